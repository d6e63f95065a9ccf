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
local _M = { VERSION = 1, SHARDS = 16 }

local gsub = string.gsub

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
[[CREATE TABLE IF NOT EXISTS @transfer_accounts (
    account B NOT NULL,
    n I NOT NULL,
    PRIMARY KEY (account, n)
)]],
[[CREATE TABLE IF NOT EXISTS @intents (
    key B PRIMARY KEY,
    status B NOT NULL,
    transfer_id B,
    code I,
    message B,
    body_hash B
)]],
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

local PG_TRIGGERS = {
[[CREATE OR REPLACE FUNCTION @postings_balance() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.status <> 2 THEN
            INSERT INTO @balances AS b (account, asset_code, scale, shard, amount)
            VALUES (NEW.account, NEW.asset_code, NEW.scale, NEW.shard, NEW.amount)
            ON CONFLICT (account, asset_code, scale, shard)
            DO UPDATE SET amount = b.amount + excluded.amount;
        END IF;
    ELSIF OLD.status <> 2 AND NEW.status = 2 THEN
        UPDATE @balances SET amount = amount - OLD.amount
        WHERE account = OLD.account AND asset_code = OLD.asset_code AND scale = OLD.scale
          AND shard = OLD.shard;
    END IF;
    RETURN NULL;
END $$]],
[[CREATE OR REPLACE TRIGGER @postings_balance_ins AFTER INSERT ON @postings
    FOR EACH ROW EXECUTE FUNCTION @postings_balance()]],
[[CREATE OR REPLACE TRIGGER @postings_balance_upd AFTER UPDATE OF status ON @postings
    FOR EACH ROW EXECUTE FUNCTION @postings_balance()]],
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

function _M.ddl(dialect, prefix)
    if not TYPES[dialect] then error("schema.ddl: unknown dialect " .. tostring(dialect), 2) end
    local out = {}
    if dialect == "postgres" then
        out[1] = "CREATE SCHEMA IF NOT EXISTS " .. prefix:sub(1, -2)
    end
    out[#out + 1] = _M.META(dialect, prefix)
    for _, s in ipairs(TABLES) do
        local stmt = typed(s, dialect)
        if dialect == "postgres" then
            -- an index is named without its schema (it lives in its table's)
            stmt = stmt:gsub("INDEX IF NOT EXISTS @", "INDEX IF NOT EXISTS ")
        end
        out[#out + 1] = _M.expand(stmt, prefix)
    end
    for _, s in ipairs(dialect == "sqlite" and SQLITE_TRIGGERS or PG_TRIGGERS) do
        if dialect == "postgres" then s = s:gsub("TRIGGER @", "TRIGGER ") end
        out[#out + 1] = _M.expand(s, prefix)
    end
    return out
end

return _M
