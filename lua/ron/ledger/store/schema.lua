-- ron.ledger.store.schema: the store's tables for both SQL backends (docs/LEDGER.md "Store",
-- LED-16..LED-24). Every statement is idempotent (CREATE ... IF NOT EXISTS, CREATE OR
-- REPLACE), so open() runs all of it on every start; the version row in ledger_meta says
-- which layout a database holds, and a layout newer than this code is refused (LED-24).
--
--   schema.VERSION                    the layout this code writes and reads
--   schema.ddl(dialect, prefix)       -> list of statements ("sqlite" | "postgres")
--   schema.META(dialect, prefix)      -> the statement creating ledger_meta alone (read
--                                        before anything else is created)
--
-- Column encodings (both backends): ids, keys, bytes and codes are BLOB / bytea, amounts
-- and counters INTEGER / bigint (int64), posting status 0 active, 1 pending_inactive,
-- 2 inactive (the core's rl_posting_status_t). `shard` is computed by the store when a
-- posting is inserted: (index + first byte of the transfer id) % 16 (LED-19).
-- VERSION 2 (LED-56): PostgreSQL's balance projection by statement-level triggers (the
-- same projection; a version-1 binary would add its row triggers back beside them and count
-- twice, so it must refuse the store: LED-24). SQLite's layout is the same as in 1.
-- VERSION 3 (LED-67, LED-68): the same tables; every account version and every stored
-- rejection is an event of the feed (ron.ledger.events), so an older binary (which appends
-- neither) must refuse the store; open() of an older store backfills those events once
-- (ron.ledger.store.upgrade). PostgreSQL: the phases' guard function @rl_expect, made in
-- the same migration transaction.
-- VERSION 4 (issue 25): SQLite keeps the engine's claims in their own table, `claims`,
-- keyed by the intent alone (ron.ledger.store.sql_claims) instead of intents rows under
-- 256 bytes 0xff ‖ intent; an older binary would look for them in intents and claim an
-- intent twice, so it must refuse the store (LED-24). SQLite's intents and
-- transfer_accounts are WITHOUT ROWID tables (their keys stored once). open() of an older
-- SQLite store rebuilds both and moves its claims once (ron.ledger.store.upgrade).
-- PostgreSQL's layout is the same as in 3.
local _M = { VERSION = 4, SHARDS = 16 }

local gsub = string.gsub

-- (in TABLES; SQLite's claims table has its columns)
local INTENTS = [[CREATE TABLE IF NOT EXISTS @intents (
    key B PRIMARY KEY,
    status B NOT NULL,
    transfer_id B,
    code I,
    message B,
    body_hash B
) WITHOUT ROWID]]

-- Tables, written once for both dialects: B = bytes, I = int64, IPK = an autoincrement
-- row number. The dialect maps them.
local TABLES = {
[[CREATE TABLE IF NOT EXISTS @books (
    id B PRIMARY KEY,
    meta B
)]],
[[CREATE TABLE IF NOT EXISTS @accounts (
    id B NOT NULL,
    version I NOT NULL,
    policy I NOT NULL,
    floor I NOT NULL,
    status I NOT NULL,
    bytes B NOT NULL,
    PRIMARY KEY (id, version)
)]],
[[CREATE TABLE IF NOT EXISTS @postings (
    transfer_id B NOT NULL,
    idx I NOT NULL,
    account B NOT NULL,
    asset_code B NOT NULL,
    scale I NOT NULL,
    amount I NOT NULL,
    status I NOT NULL,
    reservation B,
    created_by B NOT NULL,
    consumed_by B,
    shard I NOT NULL,
    PRIMARY KEY (transfer_id, idx)
)]],
-- selection reads an account's Active postings of one asset, largest first (LED-10)
[[CREATE INDEX IF NOT EXISTS @postings_by_account
    ON @postings (account, asset_code, scale, status, amount DESC, transfer_id, idx)]],
[[CREATE TABLE IF NOT EXISTS @balances (
    account B NOT NULL,
    asset_code B NOT NULL,
    scale I NOT NULL,
    shard I NOT NULL,
    amount I NOT NULL,
    PRIMARY KEY (account, asset_code, scale, shard)
)]],
[[CREATE TABLE IF NOT EXISTS @heads (
    account B NOT NULL,
    asset_code B NOT NULL,
    scale I NOT NULL,
    version I NOT NULL,
    holder B,
    PRIMARY KEY (account, asset_code, scale)
)]],
[[CREATE TABLE IF NOT EXISTS @transfers (
    n IPK,
    id B NOT NULL UNIQUE,
    bytes B NOT NULL,
    intent B NOT NULL,
    book B NOT NULL,
    created_at_ms I NOT NULL,
    metadata B
)]],
-- (transfer_accounts and intents WITHOUT ROWID, SQLite since schema 4: the key is the row's
-- place, stored once, instead of a rowid table beside a key index holding it again;
-- PostgreSQL has no such clause)
[[CREATE TABLE IF NOT EXISTS @transfer_accounts (
    account B NOT NULL,
    n I NOT NULL,
    PRIMARY KEY (account, n)
) WITHOUT ROWID]],
INTENTS,
[[CREATE TABLE IF NOT EXISTS @sagas (
    id B PRIMARY KEY,
    phase B NOT NULL,
    data B,
    node B
)]],
[[CREATE TABLE IF NOT EXISTS @events (
    book B NOT NULL,
    seq I NOT NULL,
    transfer_id B NOT NULL,
    kind B NOT NULL,
    data B,
    PRIMARY KEY (book, seq),
    UNIQUE (book, transfer_id, kind)
)]],
[[CREATE TABLE IF NOT EXISTS @usage_streams (
    tenant B NOT NULL,
    dimension B NOT NULL,
    seq I NOT NULL,
    b3 B NOT NULL,
    PRIMARY KEY (tenant, dimension)
)]],
-- LED-71: each node's lease (ron.ledger.lease); a table a binary without leases never
-- reads, so the schema version stays
[[CREATE TABLE IF NOT EXISTS @leases (
    node B PRIMARY KEY,
    epoch I NOT NULL,
    owner B,
    expires_ms I
)]],
}

-- SQLite only (ron.ledger.store.sql_claims): the engine's claims, one row per intent in
-- flight or decided, keyed by the intent (WITHOUT ROWID), the other columns those of intents.
local SQLITE_TABLES = {
    (INTENTS:gsub("@intents %(\n    key ", "@claims (\n    intent ")),
}

-- The balance projection (LED-19): a posting inserted not Inactive adds its amount to its
-- shard's row; a posting turning Inactive subtracts it. A statement whose row was skipped
-- (ON CONFLICT DO NOTHING, a WHERE that did not match) fires nothing, so the projection is
-- exactly as idempotent as the primitives.
local SQLITE_TRIGGERS = {
[[CREATE TRIGGER IF NOT EXISTS @postings_balance_ins AFTER INSERT ON @postings
WHEN NEW.status <> 2 BEGIN
    INSERT INTO @balances (account, asset_code, scale, shard, amount)
    VALUES (NEW.account, NEW.asset_code, NEW.scale, NEW.shard, NEW.amount)
    ON CONFLICT (account, asset_code, scale, shard) DO UPDATE SET amount = amount + excluded.amount;
END]],
[[CREATE TRIGGER IF NOT EXISTS @postings_balance_upd AFTER UPDATE OF status ON @postings
WHEN OLD.status <> 2 AND NEW.status = 2 BEGIN
    UPDATE @balances SET amount = amount - OLD.amount
    WHERE account = OLD.account AND asset_code = OLD.asset_code AND scale = OLD.scale
      AND shard = OLD.shard;
END]],
}

-- PostgreSQL (LED-56): statement-level triggers over the statement's transition tables, so
-- a batch statement (a multi-row INSERT of 512 postings, an UPDATE ... FROM of 1024) costs
-- ONE aggregated upsert of the balance rows it touches instead of one PL/pgSQL call per
-- row. The rows are touched in (account, asset, shard) order: two statements at once lock
-- the hot rows (revenue, a shared source) in the same order and wait instead of deadlocking.
-- The UPDATE trigger fires on every UPDATE of postings (a transition table forbids a column
-- list) and counts only the rows that became Inactive.
local PG_TRIGGERS = {
[[DROP TRIGGER IF EXISTS postings_balance_ins ON @postings]],
[[DROP TRIGGER IF EXISTS postings_balance_upd ON @postings]],
[[CREATE OR REPLACE FUNCTION @postings_balance_ins() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO @balances AS b (account, asset_code, scale, shard, amount)
    SELECT account, asset_code, scale, shard, sum(amount) FROM new_rows WHERE status <> 2
    GROUP BY account, asset_code, scale, shard ORDER BY account, asset_code, scale, shard
    ON CONFLICT (account, asset_code, scale, shard)
    DO UPDATE SET amount = b.amount + excluded.amount;
    RETURN NULL;
END $$]],
[[CREATE OR REPLACE FUNCTION @postings_balance_upd() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- the rows locked in key order first (an UPDATE ... FROM has no order of its own)
    PERFORM 1 FROM @balances AS b,
        (SELECT DISTINCT o.account, o.asset_code, o.scale, o.shard
         FROM old_rows o JOIN new_rows n ON n.transfer_id = o.transfer_id AND n.idx = o.idx
         WHERE o.status <> 2 AND n.status = 2) AS d
    WHERE b.account = d.account AND b.asset_code = d.asset_code AND b.scale = d.scale
      AND b.shard = d.shard
    ORDER BY b.account, b.asset_code, b.scale, b.shard FOR UPDATE OF b;
    UPDATE @balances AS b SET amount = b.amount - d.amount
    FROM (SELECT o.account, o.asset_code, o.scale, o.shard, sum(o.amount) AS amount
          FROM old_rows o JOIN new_rows n ON n.transfer_id = o.transfer_id AND n.idx = o.idx
          WHERE o.status <> 2 AND n.status = 2
          GROUP BY o.account, o.asset_code, o.scale, o.shard) AS d
    WHERE b.account = d.account AND b.asset_code = d.asset_code AND b.scale = d.scale
      AND b.shard = d.shard;
    RETURN NULL;
END $$]],
[[CREATE OR REPLACE TRIGGER @postings_balance_ins_s AFTER INSERT ON @postings
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION @postings_balance_ins()]],
[[CREATE OR REPLACE TRIGGER @postings_balance_upd_s AFTER UPDATE ON @postings
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION @postings_balance_upd()]],
}

-- PostgreSQL: a batch's saga record is large (the engine's record of 1024 usage slices is
-- ~0.4-0.6 MB, written twice per batch) and TOASTed; lz4 compresses it in about 40 % of
-- pglz's time (a 430 KB record: 2.0 against 4.7 ms per save, the same size within 10 %).
-- Storage only: a binary of any version reads and writes the column the same, so the
-- schema version stays. A server built without lz4 keeps pglz (the error is caught); a
-- column already lz4 is not altered again (ALTER TABLE locks the table at every open).
local PG_STORAGE = {
[[DO $$ BEGIN
    IF (SELECT attcompression FROM pg_attribute WHERE attrelid = '@sagas'::regclass
        AND attname = 'data') IS DISTINCT FROM 'l' THEN
        EXECUTE 'ALTER TABLE @sagas ALTER COLUMN data SET COMPRESSION lz4';
    END IF;
EXCEPTION WHEN feature_not_supported OR invalid_parameter_value THEN NULL;
END $$]],
}

-- PostgreSQL: the guard of a phase's statement (LED-67, ron.ledger.store.pg_phase): its
-- count, or SQLSTATE RL001 when it is not the one the engine planned, which aborts the
-- phase's transaction. Created by version 3's migration (with the upgrade below; CREATE OR
-- REPLACE: a store that has it from before is the same).
local PG_FUNCTIONS = {
[[CREATE OR REPLACE FUNCTION @rl_expect(got bigint, want bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
    IF got IS DISTINCT FROM want THEN
        RAISE EXCEPTION 'ron.ledger: a phase''s statement counted %, not %', got, want
            USING ERRCODE = 'RL001';
    END IF;
    RETURN got;
END $$]],
-- LED-71 (ron.ledger.lease): a node's advisory lock key; a phase of a leased engine holds it
-- shared (rl_lease_held, its guard), a takeover exclusive (rl_lease_take). Each reads the
-- row AFTER the lock is granted: a VOLATILE function's statements take a new snapshot, so
-- a phase granted the lock after a takeover committed sees the new epoch and counts 0, and
-- a takeover waits for the phases in flight. The takeover's wait is bounded (lock_timeout).
[[CREATE OR REPLACE FUNCTION @rl_lease_key(n bytea) RETURNS bigint LANGUAGE sql IMMUTABLE AS
$$ SELECT hashtextextended('ron.ledger lease @leases ' || encode(n, 'hex'), 0) $$]],
[[CREATE OR REPLACE FUNCTION @rl_lease_held(n bytea, e bigint) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(@rl_lease_key(n));
    RETURN EXISTS (SELECT 1 FROM @leases WHERE node = n AND epoch = e AND owner = n);
END $$]],
[[CREATE OR REPLACE FUNCTION @rl_lease_take(n bytea, e bigint, x bigint, o bytea, ttl bigint)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE c bigint;
BEGIN
    PERFORM set_config('lock_timeout', '2000', true);
    PERFORM pg_advisory_xact_lock(@rl_lease_key(n));
    UPDATE @leases SET epoch = epoch + 1, owner = o,
        expires_ms = CAST(extract(epoch FROM clock_timestamp()) * 1000 AS bigint) + ttl
    WHERE node = n AND epoch = e AND expires_ms = x
      AND expires_ms < CAST(extract(epoch FROM clock_timestamp()) * 1000 AS bigint);
    GET DIAGNOSTICS c = ROW_COUNT;
    RETURN c;
END $$]],
}

local TYPES = {
    sqlite = { B = "BLOB", I = "INTEGER", IPK = "INTEGER PRIMARY KEY AUTOINCREMENT" },
    postgres = { B = "bytea", I = "bigint",
                 IPK = "bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY" },
}

-- Table names: "@name" -> prefix .. name (PostgreSQL: "schema".name; SQLite: none). A
-- trigger or index name in PostgreSQL is not schema-qualified where it is declared.
function _M.expand(sql, prefix)
    return (gsub(sql, "@([%w_]+)", function(n) return prefix .. n end))
end

local function typed(sql, dialect)
    local t = TYPES[dialect]
    return (gsub(sql, "(%w+) (IPK)", function(c, k) return c .. " " .. t[k] end)
        :gsub(" B([ ,\n)])", " " .. t.B .. "%1"):gsub(" I([ ,\n)])", " " .. t.I .. "%1"))
end

function _M.META(dialect, prefix)
    return _M.expand(typed([[CREATE TABLE IF NOT EXISTS @ledger_meta (
    key B PRIMARY KEY,
    value B NOT NULL
)]], dialect), prefix)
end

-- The statement creating table name (nil: none of that name).
function _M.table_ddl(dialect, prefix, name)
    local head = "CREATE TABLE IF NOT EXISTS " .. _M.expand("@" .. name, prefix) .. " ("
    for _, s in ipairs(_M.ddl(dialect, prefix)) do
        if s:sub(1, #head) == head then return s end
    end
    return nil
end

function _M.ddl(dialect, prefix)
    if not TYPES[dialect] then error("schema.ddl: unknown dialect " .. tostring(dialect), 2) end
    local out = {}
    if dialect == "postgres" then
        out[1] = "CREATE SCHEMA IF NOT EXISTS " .. prefix:sub(1, -2)
    end
    out[#out + 1] = _M.META(dialect, prefix)
    local tables = TABLES
    if dialect == "sqlite" then
        tables = {}
        for _, s in ipairs(TABLES) do tables[#tables + 1] = s end
        for _, s in ipairs(SQLITE_TABLES) do tables[#tables + 1] = s end
    end
    for _, s in ipairs(tables) do
        local stmt = typed(s, dialect)
        if dialect == "postgres" then
            stmt = stmt:gsub(" WITHOUT ROWID$", "")
            -- an index is named without its schema (it lives in its table's)
            stmt = stmt:gsub("INDEX IF NOT EXISTS @", "INDEX IF NOT EXISTS ")
        end
        out[#out + 1] = _M.expand(stmt, prefix)
    end
    for _, s in ipairs(dialect == "sqlite" and SQLITE_TRIGGERS or PG_TRIGGERS) do
        if dialect == "postgres" then s = s:gsub("TRIGGER @", "TRIGGER ") end
        out[#out + 1] = _M.expand(s, prefix)
    end
    if dialect == "postgres" then
        for _, s in ipairs(PG_STORAGE) do out[#out + 1] = _M.expand(s, prefix) end
        for _, s in ipairs(PG_FUNCTIONS) do out[#out + 1] = _M.expand(s, prefix) end
    end
    if dialect == "postgres" then
        -- an older layout's version row moves up with the triggers (same transaction)
        out[#out + 1] = _M.expand("UPDATE @ledger_meta SET value = convert_to('"
            .. _M.VERSION .. "', 'UTF8') WHERE key = convert_to('schema_version', 'UTF8') "
            .. "AND convert_from(value, 'UTF8')::int < " .. _M.VERSION, prefix)
    end
    return out
end

return _M
