-- ron.ledger.store.sql: the Store primitives as SQL, shared by the SQLite and PostgreSQL
-- drivers (docs/LEDGER.md "Store"; the contract is in ron.ledger.store). Each write
-- primitive is ONE conditional statement whose affected-row count is the answer (LED-16);
-- there is no read-then-write anywhere. The one exception is store_transfer on SQLite,
-- whose involved-account rows follow in the same transaction (SQLite triggers cannot
-- expand a list), documented in the contract.
--
-- A driver gives the store three calls (the SQL's parameters are written "?b" for bytes
-- and "?i" for int64; the driver numbers and types them):
--   drv:write(sql, binds)            -> affected count | nil, "Code: message", class
--   drv:read(sql, binds, rtypes)     -> { row = { values by position }, ... } | nil, err, class
--                                       (rtypes: one letter per column, "b" or "i")
--   drv:atomic(fn)                   -> fn's results, inside one transaction (SQLite only)
-- and binds = { n = count, ... } whose values are strings (bytes), Lua integers or int64_t
-- cdata (amounts, LED-4), nil (NULL).
local ledger = require "ron.ledger"
local schema = require "ron.ledger.store.schema"
local phases = require "ron.ledger.store.phase"
local scan = require "ron.ledger.store.scan"

local type, error, tostring, tonumber, ipairs, setmetatable, format, concat, rep, byte =
      type, error, tostring, tonumber, ipairs, setmetatable, string.format, table.concat,
      string.rep, string.byte

local _M = {}

-- Per call (one statement, its parameters bounded: the host's libpq binding takes ~8000).
_M.MAX_BATCH = 1024       -- ids or pairs
_M.MAX_POSTINGS = 512     -- postings to insert (11 parameters each)
_M.SHARDS = schema.SHARDS

local PSTATUS = { active = 0, pending_inactive = 1, inactive = 2 }
local PSTATUS_NAME = { [0] = "active", "pending_inactive", "inactive" }
local POLICY = { no_overdraft = 0, capped = 1, uncapped = 2 }
local POLICY_NAME = { [0] = "no_overdraft", "capped", "uncapped" }
local ASTATUS = { open = 0, frozen = 1, closed = 2 }
local ASTATUS_NAME = { [0] = "open", "frozen", "closed" }
_M.PSTATUS, _M.PSTATUS_NAME = PSTATUS, PSTATUS_NAME

local function misuse(fname, msg) error("ron.ledger.store: " .. fname .. ": " .. msg, 3) end

local function bytes_arg(fname, v, what, len)
    if type(v) ~= "string" or (len and #v ~= len) then
        misuse(fname, format("%s must be %s", what, len and (len .. " bytes") or "a string"))
    end
    return v
end

local TWO53 = 2 ^ 53
local function int_arg(fname, v, what)
    if type(v) == "number" then
        if v % 1 == 0 and v <= TWO53 and v >= -TWO53 then return v end
    elseif type(v) == "cdata" then
        return v
    end
    misuse(fname, what .. " must be an integer (number or int64_t)")
end

local function asset_arg(fname, a)
    if type(a) ~= "table" or type(a.code) ~= "string" or type(a.scale) ~= "number" then
        misuse(fname, "asset must be { code = string, scale = integer }")
    end
    return a
end

local function list_arg(fname, l, what, max)
    if type(l) ~= "table" then misuse(fname, what .. " must be a list") end
    max = max or _M.MAX_BATCH
    if #l > max then misuse(fname, format("at most %d %s per call", max, what)) end
    return l
end

-- Amounts read back: numbers up to 2^53, int64_t beyond (as ron.ledger returns them).
local function amount(v)
    if type(v) == "cdata" then
        if v <= TWO53 and v >= -TWO53 then return tonumber(v) end
        return v
    end
    return v
end
_M.amount = amount

-- The shard of a posting in the balance projection (LED-19).
function _M.shard(transfer_id, index)
    return (index + byte(transfer_id, 1)) % _M.SHARDS
end

-- ---------------------------------------------------------------------------------------
-- statements: built once per (store, name, list length) and cached on the store

local function values_list(n, tuple)
    local one = "(" .. tuple .. ")"
    return rep(one, n, ",")
end

local POSTING_COLS = "transfer_id, idx, account, asset_code, scale, amount, status, reservation, "
                     .. "created_by, consumed_by"
local POSTING_TUPLE = "?b,?i,?b,?b,?i,?i,?i,?b,?b,?b,?i"
local ACCOUNT_COLS = "id, version, policy, floor, status, bytes"
local TRANSFER_COLS = "n, id, bytes, intent, book, created_at_ms, metadata"

local BUILD = {
    create_book = function()
        return "INSERT INTO @books (id, meta) VALUES (?b, ?b) ON CONFLICT DO NOTHING"
    end,
    get_book = function() return "SELECT id, meta FROM @books WHERE id = ?b" end,
    list_books = function() return "SELECT id, meta FROM @books ORDER BY id" end,

    create_account = function()
        return "INSERT INTO @accounts (" .. ACCOUNT_COLS .. ") VALUES (?b, 1, ?i, ?i, ?i, ?b) "
               .. "ON CONFLICT DO NOTHING"
    end,
    -- LED-17: only version max+1 goes in; a gap, an overwrite or a race counts 0.
    append_account_version = function()
        return "INSERT INTO @accounts (" .. ACCOUNT_COLS .. ") SELECT ?b, ?i, ?i, ?i, ?i, ?b "
               .. "WHERE (SELECT max(version) FROM @accounts WHERE id = ?b) = ?i "
               .. "ON CONFLICT DO NOTHING"
    end,
    get_account = function()
        return "SELECT " .. ACCOUNT_COLS .. " FROM @accounts WHERE id = ?b "
               .. "ORDER BY version DESC LIMIT 1"
    end,
    get_accounts = function(n)
        return "SELECT " .. ACCOUNT_COLS .. " FROM @accounts a WHERE id IN (VALUES "
               .. values_list(n, "?b") .. ") AND version = "
               .. "(SELECT max(version) FROM @accounts b WHERE b.id = a.id)"
    end,
    get_account_history = function()
        return "SELECT " .. ACCOUNT_COLS .. " FROM @accounts WHERE id = ?b ORDER BY version"
    end,
    list_accounts = function()
        return "SELECT " .. ACCOUNT_COLS .. " FROM @accounts a WHERE version = "
               .. "(SELECT max(version) FROM @accounts b WHERE b.id = a.id) ORDER BY id"
    end,

    insert_postings = function(n)
        return "INSERT INTO @postings (" .. POSTING_COLS .. ", shard) VALUES "
               .. values_list(n, POSTING_TUPLE) .. " ON CONFLICT DO NOTHING"
    end,
    reserve_postings = function(n)
        return "UPDATE @postings SET status = 1, reservation = ?b WHERE status = 0 AND "
               .. "(transfer_id, idx) IN (VALUES " .. values_list(n, "?b,?i") .. ")"
    end,
    release_postings = function(n)
        return "UPDATE @postings SET status = 0, reservation = NULL WHERE status = 1 AND "
               .. "reservation = ?b AND (transfer_id, idx) IN (VALUES "
               .. values_list(n, "?b,?i") .. ")"
    end,
    deactivate_reserved = function(n)
        return "UPDATE @postings SET status = 2, consumed_by = ?b WHERE status = 1 AND "
               .. "reservation = ?b AND (transfer_id, idx) IN (VALUES "
               .. values_list(n, "?b,?i") .. ")"
    end,
    deactivate_active = function(n)
        return "UPDATE @postings SET status = 2, consumed_by = ?b WHERE status = 0 AND "
               .. "(transfer_id, idx) IN (VALUES " .. values_list(n, "?b,?i") .. ")"
    end,
    get_postings = function(n)
        return "SELECT " .. POSTING_COLS .. " FROM @postings WHERE (transfer_id, idx) IN "
               .. "(VALUES " .. values_list(n, "?b,?i") .. ") ORDER BY transfer_id, idx"
    end,
    -- key: bit 1 asset, bit 2 status, bit 4 limit, bit 8 largest first
    get_postings_by_account = function(k)
        local s = { "SELECT " .. POSTING_COLS .. " FROM @postings WHERE account = ?b" }
        if k % 2 == 1 then s[#s + 1] = " AND asset_code = ?b AND scale = ?i" end
        if math.floor(k / 2) % 2 == 1 then s[#s + 1] = " AND status = ?i" end
        if math.floor(k / 8) % 2 == 1 then
            s[#s + 1] = " ORDER BY amount DESC, transfer_id, idx"
        else
            s[#s + 1] = " ORDER BY transfer_id, idx"
        end
        if math.floor(k / 4) % 2 == 1 then s[#s + 1] = " LIMIT ?i" end
        return concat(s)
    end,

    get_balances = function(n)
        return "SELECT account, asset_code, scale, CAST(sum(amount) AS BIGINT) FROM @balances "
               .. "WHERE (account, asset_code, scale) IN (VALUES " .. values_list(n, "?b,?b,?i")
               .. ") GROUP BY account, asset_code, scale"
    end,

    ensure_head = function()
        return "INSERT INTO @heads (account, asset_code, scale, version, holder) "
               .. "VALUES (?b, ?b, ?i, 0, NULL) ON CONFLICT DO NOTHING"
    end,
    acquire_head = function()
        return "UPDATE @heads SET holder = ?b, version = version + 1 WHERE account = ?b AND "
               .. "asset_code = ?b AND scale = ?i AND holder IS NULL"
    end,
    release_head = function()
        return "UPDATE @heads SET holder = NULL WHERE account = ?b AND asset_code = ?b AND "
               .. "scale = ?i AND holder = ?b"
    end,
    get_heads = function(n)
        return "SELECT account, asset_code, scale, version, holder FROM @heads WHERE "
               .. "(account, asset_code, scale) IN (VALUES " .. values_list(n, "?b,?b,?i") .. ")"
    end,

    -- PostgreSQL: the transfer row and its involved-account rows in one statement.
    store_transfer_pg = function(n)
        local s = "WITH ins AS (INSERT INTO @transfers (id, bytes, intent, book, created_at_ms, "
                  .. "metadata) VALUES (?b, ?b, ?b, ?b, ?i, ?b) ON CONFLICT DO NOTHING "
                  .. "RETURNING n)"
        if n > 0 then
            s = s .. ", acc AS (INSERT INTO @transfer_accounts (account, n) SELECT v.a, ins.n "
                .. "FROM ins, (VALUES " .. values_list(n, "?b") .. ") AS v (a) "
                .. "ON CONFLICT DO NOTHING RETURNING 1)"
        end
        return s .. " SELECT count(*) FROM ins"
    end,
    store_transfer = function()
        return "INSERT INTO @transfers (id, bytes, intent, book, created_at_ms, metadata) "
               .. "VALUES (?b, ?b, ?b, ?b, ?i, ?b) ON CONFLICT DO NOTHING"
    end,
    store_transfer_accounts = function(n)
        return "INSERT INTO @transfer_accounts (account, n) SELECT v.column1, t.n FROM (VALUES "
               .. values_list(n, "?b") .. ") AS v, @transfers t WHERE t.id = ?b "
               .. "ON CONFLICT DO NOTHING"
    end,
    get_transfer = function()
        return "SELECT " .. TRANSFER_COLS .. " FROM @transfers WHERE id = ?b"
    end,
    get_transfers_for_account = function(before)
        return "SELECT t.n, t.id, t.bytes, t.intent, t.book, t.created_at_ms, t.metadata "
               .. "FROM @transfer_accounts a JOIN @transfers t ON t.n = a.n WHERE a.account = ?b"
               .. (before == 1 and " AND a.n < ?i" or "") .. " ORDER BY a.n DESC LIMIT ?i"
    end,
    list_transfers = function()
        return "SELECT " .. TRANSFER_COLS .. " FROM @transfers WHERE n > ?i ORDER BY n LIMIT ?i"
    end,

    put_intent = function()
        return "INSERT INTO @intents (key, status, transfer_id, code, message, body_hash) "
               .. "VALUES (?b, ?b, ?b, ?i, ?b, ?b) ON CONFLICT DO NOTHING"
    end,
    get_intent = function()
        return "SELECT key, status, transfer_id, code, message, body_hash FROM @intents "
               .. "WHERE key = ?b"
    end,

    save_saga = function()
        return "INSERT INTO @sagas (id, phase, data, node) VALUES (?b, ?b, ?b, ?b) "
               .. "ON CONFLICT (id) DO UPDATE SET phase = excluded.phase, data = excluded.data, "
               .. "node = excluded.node"
    end,
    list_pending_sagas = function(by_node)
        return "SELECT id, phase, data, node FROM @sagas"
               .. (by_node == 1 and " WHERE node = ?b" or "") .. " ORDER BY id"
    end,
    delete_saga = function() return "DELETE FROM @sagas WHERE id = ?b" end,

    -- LED-22: the next seq of the book in the same statement; a racing insert that took
    -- the seq, or the same (book, transfer, kind) already there, makes it count 0.
    append_event = function()
        return "INSERT INTO @events (book, seq, transfer_id, kind, data) "
               .. "SELECT ?b, coalesce(max(seq), 0) + 1, ?b, ?b, ?b FROM @events WHERE book = ?b "
               .. "ON CONFLICT DO NOTHING"
    end,
    get_event = function()
        return "SELECT book, seq, transfer_id, kind, data FROM @events WHERE book = ?b AND "
               .. "transfer_id = ?b AND kind = ?b"
    end,
    get_events_since = function()
        return "SELECT book, seq, transfer_id, kind, data FROM @events WHERE book = ?b AND "
               .. "seq > ?i ORDER BY seq LIMIT ?i"
    end,
    head_seq = function()
        return "SELECT CAST(coalesce(max(seq), 0) AS BIGINT) FROM @events WHERE book = ?b"
    end,

    get_stream = function()
        return "SELECT seq, b3 FROM @usage_streams WHERE tenant = ?b AND dimension = ?b"
    end,
    insert_stream = function()
        return "INSERT INTO @usage_streams (tenant, dimension, seq, b3) VALUES (?b, ?b, ?i, ?b) "
               .. "ON CONFLICT DO NOTHING"
    end,
    advance_stream = function()
        return "UPDATE @usage_streams SET seq = ?i, b3 = ?b WHERE tenant = ?b AND dimension = ?b "
               .. "AND seq = ?i AND b3 = ?b"
    end,

    -- ---- batch primitives (LED-51): still ONE statement each, its count the answer ----
    get_intents = function(n)
        return "SELECT key, status, transfer_id, code, message, body_hash FROM @intents "
               .. "WHERE key IN (VALUES " .. values_list(n, "?b") .. ")"
    end,
    put_intents = function(n)
        return "INSERT INTO @intents (key, status, transfer_id, code, message, body_hash) "
               .. "VALUES " .. values_list(n, "?b, ?b, ?b, ?i, ?b, ?b") .. " ON CONFLICT DO NOTHING"
    end,
    -- n queries, each an index range scan with its own LIMIT (UNION ALL: SQLite has no
    -- LATERAL); q = the query's number, so rows are told apart whatever order comes back.
    get_postings_by_pairs = function(n)
        local s = {}
        for i = 1, n do
            s[i] = "SELECT * FROM (SELECT CAST(" .. i .. " AS BIGINT) AS q, " .. POSTING_COLS
                   .. " FROM @postings WHERE account = ?b AND asset_code = ?b AND scale = ?i "
                   .. "AND status = ?i ORDER BY amount DESC, transfer_id, idx LIMIT ?i) AS s" .. i
        end
        return concat(s, " UNION ALL ")
    end,
    -- each input its own consuming transfer: UPDATE ... FROM a VALUES list
    deactivate_many = function(n)
        return "UPDATE @postings SET status = 2, consumed_by = v.c FROM (SELECT column1 AS t, "
               .. "column2 AS i, column3 AS c FROM (VALUES " .. values_list(n, "?b,?i,?b")
               .. ") AS x) AS v WHERE @postings.transfer_id = v.t AND @postings.idx = v.i "
               .. "AND @postings.status = 1 AND @postings.reservation = ?b"
    end,
    store_transfers_pg = function(n, m)
        local s = "WITH ins AS (INSERT INTO @transfers (id, bytes, intent, book, created_at_ms, "
                  .. "metadata) VALUES " .. values_list(n, "?b, ?b, ?b, ?b, ?i, ?b")
                  .. " ON CONFLICT DO NOTHING RETURNING id, n)"
        if m > 0 then
            s = s .. ", acc AS (INSERT INTO @transfer_accounts (account, n) SELECT v.a, ins.n "
                .. "FROM ins JOIN (SELECT column1 AS t, column2 AS a FROM (VALUES "
                .. values_list(m, "?b,?b") .. ") AS x) AS v ON v.t = ins.id "
                .. "ON CONFLICT DO NOTHING RETURNING 1)"
        end
        return s .. " SELECT count(*) FROM ins"
    end,
    store_transfers = function(n)
        return "INSERT INTO @transfers (id, bytes, intent, book, created_at_ms, metadata) "
               .. "VALUES " .. values_list(n, "?b, ?b, ?b, ?b, ?i, ?b") .. " ON CONFLICT DO NOTHING"
    end,
    store_transfers_accounts = function(m)
        return "INSERT INTO @transfer_accounts (account, n) SELECT v.column2, t.n FROM (VALUES "
               .. values_list(m, "?b,?b") .. ") AS v JOIN @transfers t ON t.id = v.column1 "
               .. "ON CONFLICT DO NOTHING"
    end,
    -- LED-22 in batch: consecutive seqs after the book's max, in the list's order.
    -- PostgreSQL: the same INSERT, its count and first seq (RETURNING) in one statement
    append_events_pg = function(n)
        return "WITH ins AS (" .. _M.BUILD.append_events(n) .. " RETURNING seq) "
               .. "SELECT count(*), coalesce(min(seq), 0) FROM ins"
    end,
    append_events_max = function()
        return "SELECT coalesce(max(seq), 0) FROM @events WHERE book = ?b"
    end,
    append_events = function(n)
        return "INSERT INTO @events (book, seq, transfer_id, kind, data) "
               .. "SELECT ?b, m.s + row_number() OVER (ORDER BY v.column1), v.column2, v.column3, "
               .. "v.column4 FROM (VALUES " .. values_list(n, "?i,?b,?b,?b") .. ") AS v, "
               .. "(SELECT coalesce(max(seq), 0) AS s FROM @events WHERE book = ?b) AS m "
               .. "WHERE NOT EXISTS (SELECT 1 FROM @events e WHERE e.book = ?b AND "
               .. "e.transfer_id = v.column2 AND e.kind = v.column3) ON CONFLICT DO NOTHING"
    end,
    get_events_for = function(n)
        return "SELECT book, seq, transfer_id, kind, data FROM @events WHERE book = ?b AND "
               .. "kind = ?b AND transfer_id IN (VALUES " .. values_list(n, "?b")
               .. ") ORDER BY seq"
    end,
    get_streams = function(n)
        return "SELECT tenant, dimension, seq, b3 FROM @usage_streams WHERE (tenant, dimension) "
               .. "IN (VALUES " .. values_list(n, "?b,?b") .. ")"
    end,
    insert_streams = function(n)
        return "INSERT INTO @usage_streams (tenant, dimension, seq, b3) VALUES "
               .. values_list(n, "?b, ?b, ?i, ?b") .. " ON CONFLICT DO NOTHING"
    end,
    advance_streams = function(n)
        return "UPDATE @usage_streams SET seq = v.s, b3 = v.b FROM (SELECT column1 AS t, "
               .. "column2 AS d, column3 AS s, column4 AS b, column5 AS ps, column6 AS pb FROM "
               .. "(VALUES " .. values_list(n, "?b,?b,?i,?b,?i,?b") .. ") AS x) AS v WHERE "
               .. "@usage_streams.tenant = v.t AND @usage_streams.dimension = v.d AND "
               .. "@usage_streams.seq = v.ps AND @usage_streams.b3 = v.pb"
    end,

    get_meta = function() return "SELECT value FROM @ledger_meta WHERE key = ?b" end,
    put_meta = function()
        return "INSERT INTO @ledger_meta (key, value) VALUES (?b, ?b) ON CONFLICT DO NOTHING"
    end,

    -- ---- node leases (LED-71): {now_ms} is the store's clock (render) ----
    -- a new row (epoch 1), or the row when it is free, expired or this node's own (a
    -- restart: the earlier process of the node is dead): epoch + 1, owner, expiry
    lease_acquire = function()
        return "INSERT INTO @leases AS l (node, epoch, owner, expires_ms) VALUES (?b, 1, ?b, "
               .. "{now_ms} + ?i) ON CONFLICT (node) DO UPDATE SET epoch = l.epoch + 1, "
               .. "owner = excluded.owner, expires_ms = excluded.expires_ms WHERE l.owner IS "
               .. "NULL OR l.owner = excluded.owner OR l.expires_ms < {now_ms} RETURNING epoch"
    end,
    lease_renew = function()
        return "UPDATE @leases SET expires_ms = {now_ms} + ?i WHERE node = ?b AND epoch = ?i "
               .. "AND owner = ?b"
    end,
    -- SQLite (one writer at a time); PostgreSQL runs @rl_lease_take (schema.lua): the same
    -- UPDATE under the node's exclusive advisory lock
    lease_takeover = function()
        return "UPDATE @leases SET epoch = epoch + 1, owner = ?b, expires_ms = {now_ms} + ?i "
               .. "WHERE node = ?b AND epoch = ?i AND expires_ms = ?i AND expires_ms < {now_ms}"
    end,
    lease_takeover_pg = function() return "SELECT @rl_lease_take(?b, ?i, ?i, ?b, ?i)" end,
    lease_release = function()
        return "UPDATE @leases SET owner = NULL, expires_ms = NULL WHERE node = ?b AND "
               .. "epoch = ?i AND owner = ?b"
    end,
    list_leases = function()
        return "SELECT node, epoch, owner, expires_ms, {now_ms} FROM @leases ORDER BY node"
    end,
    -- a phase's guard: PostgreSQL reads the row under the node's shared advisory lock, after
    -- taking it (@rl_lease_held), so a takeover waits for the phases in flight and every
    -- later phase of the fenced epoch counts 0
    check_lease = function()
        return "SELECT count(*) FROM @leases WHERE node = ?b AND epoch = ?i AND owner = ?b"
    end,
    check_lease_pg = function()
        return "SELECT count(*) FROM (SELECT 1 WHERE @rl_lease_held(?b, ?i)) AS h"
    end,
}

-- The store's clock in milliseconds, inside a statement (the leases': every node reads one
-- clock, so no two nodes' clocks need to agree).
local NOW_MS = {
    sqlite = "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)",
    postgres = "CAST(extract(epoch FROM clock_timestamp()) * 1000 AS bigint)",
}
_M.NOW_MS = NOW_MS

_M.BUILD = BUILD

-- PostgreSQL: the list primitives with one ARRAY parameter per column ("?B" bytea[], "?I"
-- bigint[]) instead of a VALUES list of n tuples: `unnest(...)`, `= ANY(...)`. The text is
-- the same whatever the list's length, so the server parses and plans a few hundred bytes
-- instead of thousands of parameters (a 512-posting insert was 5632 of them), and the
-- driver sends one binary array per column instead of one parameter per value (the semantics
-- are the VALUES forms' above, statement for statement; the conformance suite runs both).
-- The Store methods build their binds once, as for SQLite: `at` leading scalars, then the
-- list's tuples (one group per entry of `groups`, each tuple's column types; n tuples, and
-- n2 for the second group), then trailing scalars; pg_binds turns the tuples into columns.
local PG_ARRAY = {
    insert_postings = { plain = true, at = 0, groups = { "bibbiiibbbi" }, sql =
        "INSERT INTO @postings (" .. POSTING_COLS .. ", shard) SELECT * FROM unnest(?B, ?I, ?B, "
        .. "?B, ?I, ?I, ?I, ?B, ?B, ?B, ?I) ON CONFLICT DO NOTHING" },
    reserve_postings = { at = 1, groups = { "bi" }, sql =
        "UPDATE @postings SET status = 1, reservation = ?b WHERE status = 0 AND "
        .. "(transfer_id, idx) IN (SELECT * FROM unnest(?B, ?I))" },
    release_postings = { at = 1, groups = { "bi" }, sql =
        "UPDATE @postings SET status = 0, reservation = NULL WHERE status = 1 AND "
        .. "reservation = ?b AND (transfer_id, idx) IN (SELECT * FROM unnest(?B, ?I))" },
    deactivate_reserved = { at = 2, groups = { "bi" }, sql =
        "UPDATE @postings SET status = 2, consumed_by = ?b WHERE status = 1 AND "
        .. "reservation = ?b AND (transfer_id, idx) IN (SELECT * FROM unnest(?B, ?I))" },
    deactivate_active = { at = 1, groups = { "bi" }, sql =
        "UPDATE @postings SET status = 2, consumed_by = ?b WHERE status = 0 AND "
        .. "(transfer_id, idx) IN (SELECT * FROM unnest(?B, ?I))" },
    get_postings = { at = 0, groups = { "bi" }, sql =
        "SELECT " .. POSTING_COLS .. " FROM @postings WHERE (transfer_id, idx) IN "
        .. "(SELECT * FROM unnest(?B, ?I)) ORDER BY transfer_id, idx" },
    -- Point reads as one index probe per key (LATERAL ... LIMIT: never turned into a join):
    -- a semi join may scan the whole table instead (the balance rows of hot accounts carry
    -- many dead versions while batches update them: 0.3 ms per get_balances of 13 pairs with
    -- 64 lanes), a cost that grows with the table, not with the keys asked (LED-19). A key
    -- asked twice answers twice (the callers map the rows by key).
    get_accounts = { at = 0, groups = { "b" }, sql =
        "SELECT a.* FROM unnest(?B) AS q (id) CROSS JOIN LATERAL (SELECT " .. ACCOUNT_COLS
        .. " FROM @accounts WHERE id = q.id ORDER BY version DESC LIMIT 1) AS a" },
    get_balances = { at = 0, groups = { "bbi" }, sql =
        "SELECT q.a, q.c, q.s, (SELECT CAST(sum(b.amount) AS BIGINT) FROM @balances b "
        .. "WHERE b.account = q.a AND b.asset_code = q.c AND b.scale = q.s) "
        .. "FROM unnest(?B, ?B, ?I) AS q (a, c, s)" },
    get_heads = { at = 0, groups = { "bbi" }, sql =
        "SELECT h.* FROM unnest(?B, ?B, ?I) AS q (a, c, s) CROSS JOIN LATERAL "
        .. "(SELECT account, asset_code, scale, version, holder FROM @heads WHERE account = q.a "
        .. "AND asset_code = q.c AND scale = q.s LIMIT 1) AS h" },
    -- the same probe per key (a batch asks ~2 keys per slice, mostly absent: = ANY planned
    -- 21.7 us of server time per slice in the daemon-shaped bench, growing with the table)
    get_intents = { at = 0, groups = { "b" }, sql =
        "SELECT i.* FROM unnest(?B) AS q (k) CROSS JOIN LATERAL (SELECT key, status, "
        .. "transfer_id, code, message, body_hash FROM @intents WHERE key = q.k LIMIT 1) AS i" },
    put_intents = { plain = true, at = 0, groups = { "bbbibb" }, sql =
        "INSERT INTO @intents (key, status, transfer_id, code, message, body_hash) "
        .. "SELECT * FROM unnest(?B, ?B, ?B, ?I, ?B, ?B) ON CONFLICT DO NOTHING" },
    -- each query its own index range scan with its own LIMIT (LATERAL), numbered by its
    -- position like the UNION ALL form
    get_postings_by_pairs = { at = 0, groups = { "bbiii" }, sql =
        "SELECT q.o, p.* FROM unnest(?B, ?B, ?I, ?I, ?I) WITH ORDINALITY AS q (a, c, s, st, l, o) "
        .. "CROSS JOIN LATERAL (SELECT " .. POSTING_COLS .. " FROM @postings WHERE account = q.a "
        .. "AND asset_code = q.c AND scale = q.s AND status = q.st "
        .. "ORDER BY amount DESC, transfer_id, idx LIMIT q.l) AS p" },
    deactivate_many = { at = 0, groups = { "bib" }, sql =
        "UPDATE @postings SET status = 2, consumed_by = v.c FROM unnest(?B, ?I, ?B) AS v (t, i, c) "
        .. "WHERE @postings.transfer_id = v.t AND @postings.idx = v.i "
        .. "AND @postings.status = 1 AND @postings.reservation = ?b" },
    -- The account rows of the transfers this statement inserted, under the numbers it just
    -- drew: no other row can hold them, so a plain INSERT (DISTINCT: an account listed
    -- twice) without ON CONFLICT, whose speculative insertion cost a probe and a WAL
    -- record more per row (5 rows per usage slice; 10.4 -> ms per 1875 rows).
    store_transfers_pg = { plain = true, at = 0, groups = { "bbbbib", "bb" }, sql =
        "WITH ins AS (INSERT INTO @transfers (id, bytes, intent, book, created_at_ms, metadata) "
        .. "SELECT * FROM unnest(?B, ?B, ?B, ?B, ?I, ?B) ON CONFLICT DO NOTHING RETURNING id, n), "
        .. "acc AS (INSERT INTO @transfer_accounts (account, n) SELECT DISTINCT v.a, ins.n "
        .. "FROM ins JOIN unnest(?B, ?B) AS v (t, a) ON v.t = ins.id RETURNING 1) "
        .. "SELECT count(*) FROM ins" },
    -- "not there yet" is one probe of the (book, transfer_id, kind) index per row (a
    -- LATERAL with LIMIT 1 is never turned into a join): a NOT EXISTS became a hash anti
    -- join over every event of the book, a cost that grew with the book's history (20 of
    -- the 32 ms of 1024 events after 30k).
    append_events_pg = { plain = true, at = 1, groups = { "ibbb" }, sql =
        "WITH ins AS (INSERT INTO @events (book, seq, transfer_id, kind, data) "
        .. "SELECT ?b, m.s + row_number() OVER (ORDER BY v.o), v.t, v.k, v.d "
        .. "FROM unnest(?I, ?B, ?B, ?B) AS v (o, t, k, d) "
        .. "CROSS JOIN (SELECT coalesce(max(seq), 0) AS s FROM @events WHERE book = ?b) AS m "
        .. "LEFT JOIN LATERAL (SELECT 1 AS x FROM @events e WHERE e.book = ?b AND "
        .. "e.transfer_id = v.t AND e.kind = v.k LIMIT 1) AS ex ON true WHERE ex.x IS NULL "
        .. "ON CONFLICT DO NOTHING RETURNING seq) "
        .. "SELECT count(*), coalesce(min(seq), 0) FROM ins" },
    get_events_for = { at = 2, groups = { "b" }, sql =
        "SELECT book, seq, transfer_id, kind, data FROM @events WHERE book = ?b AND "
        .. "kind = ?b AND transfer_id = ANY(?B) ORDER BY seq" },
    get_streams = { at = 0, groups = { "bb" }, sql =
        "SELECT u.* FROM unnest(?B, ?B) AS q (t, d) CROSS JOIN LATERAL (SELECT tenant, "
        .. "dimension, seq, b3 FROM @usage_streams WHERE tenant = q.t AND dimension = q.d "
        .. "LIMIT 1) AS u" },
    insert_streams = { at = 0, groups = { "bbib" }, sql =
        "INSERT INTO @usage_streams (tenant, dimension, seq, b3) SELECT * FROM "
        .. "unnest(?B, ?B, ?I, ?B) ON CONFLICT DO NOTHING" },
    advance_streams = { at = 0, groups = { "bbibib" }, sql =
        "UPDATE @usage_streams SET seq = v.s, b3 = v.b FROM unnest(?B, ?B, ?I, ?B, ?I, ?B) "
        .. "AS v (t, d, s, b, ps, pb) WHERE @usage_streams.tenant = v.t AND "
        .. "@usage_streams.dimension = v.d AND @usage_streams.seq = v.ps AND "
        .. "@usage_streams.b3 = v.pb" },
}
_M.PG_ARRAY = PG_ARRAY

local PG_TYPE = { b = "bytea", i = "bigint", B = "bytea[]", I = "bigint[]" }
local ARRAY_KIND = { b = "bytea", i = "int8" }

-- "?b"/"?i" (and "?B"/"?I": arrays, PostgreSQL only) -> the dialect's placeholders;
-- "@name" -> the table's (prefixed) name.
function _M.render(dialect, prefix, text)
    text = schema.expand(text, prefix):gsub("{now_ms}", NOW_MS[dialect])
    if dialect == "postgres" then
        local k = 0
        return (text:gsub("%?([biBI])", function(t)
            k = k + 1
            return "$" .. k .. "::" .. PG_TYPE[t]
        end))
    end
    return (text:gsub("%?[bi]", "?"))
end

-- binds (at scalars, the groups' tuples, trailing scalars) -> the same with each group's
-- tuples as one array per column: { array = "bytea" | "int8", n = rows, ... } (the driver
-- encodes it).
local function pg_binds(spec, binds, n, n2)
    local out, at = {}, spec.at
    for i = 1, at do out[i] = binds[i] end
    local k, src = at, at
    for g, types in ipairs(spec.groups) do
        local rows = g == 1 and n or (n2 or 0)
        local w = #types
        for c = 1, w do
            local col = { array = ARRAY_KIND[types:sub(c, c)], n = rows }
            local j = src + c
            for r = 1, rows do
                col[r] = binds[j]
                j = j + w
            end
            out[k + c] = col
        end
        k, src = k + w, src + rows * w
    end
    local last = binds.n or #binds
    for i = src + 1, last do
        k = k + 1
        out[k] = binds[i]
    end
    out.n = k
    return out
end

-- The statement text and its binds for (name, list length n[, n2]); and for a spec marked
-- plain, the same statement without its ON CONFLICT DO NOTHING (see run below).
local function stmt(self, name, n, n2, binds)
    local spec = self.dialect == "postgres" and PG_ARRAY[name]
    if spec then
        local key = name .. "[]"
        local s = self.sql_cache[key]
        if not s then
            s = _M.render(self.dialect, self.prefix, spec.sql)
            self.sql_cache[key] = s
            if spec.plain then
                local p, k = s:gsub(" ON CONFLICT DO NOTHING", "", 1)
                assert(k == 1, name)
                self.sql_cache[key .. "plain"] = p
            end
        end
        return s, pg_binds(spec, binds, n, n2), self.sql_cache[key .. "plain"]
    end
    local key = n and (name .. "#" .. n .. (n2 and ("#" .. n2) or "")) or name
    local s = self.sql_cache[key]
    if not s then
        s = _M.render(self.dialect, self.prefix, BUILD[name](n, n2))
        self.sql_cache[key] = s
    end
    return s, binds
end

-- ---------------------------------------------------------------------------------------
-- row decoding

local function account_row(r)
    return { id = r[1], version = amount(r[2]), policy = POLICY_NAME[amount(r[3])],
             floor = amount(r[4]), status = ASTATUS_NAME[amount(r[5])], bytes = r[6] }
end
local ACCOUNT_T = "biiiib"

local function posting_row(r)
    return { id = { transfer_id = r[1], index = amount(r[2]) }, account = r[3],
             asset = { code = r[4], scale = amount(r[5]) }, amount = amount(r[6]),
             status = PSTATUS_NAME[amount(r[7])], reservation = r[8], created_by = r[9],
             consumed_by = r[10] }
end
local POSTING_T = "bibbiiibbb"

local function transfer_row(r)
    return { n = amount(r[1]), id = r[2], bytes = r[3], intent = r[4], book = r[5],
             created_at_ms = amount(r[6]), metadata = r[7] }
end
local TRANSFER_T = "ibbbbib"

local function event_row(r)
    return { book = r[1], seq = amount(r[2]), transfer_id = r[3], kind = r[4], data = r[5] }
end
local EVENT_T = "bibbb"

local function map_rows(rows, f)
    local out = {}
    for i = 1, #rows do out[i] = f(rows[i]) end
    return out
end

-- ---------------------------------------------------------------------------------------
-- the Store methods (self.drv, self.dialect, self.prefix, self.sql_cache)

local Store = {}
Store.__index = Store
_M.Store = Store

function _M.new(drv, dialect, prefix)
    return setmetatable({ drv = drv, dialect = dialect, prefix = prefix or "", sql_cache = {} },
                        Store)
end

-- PostgreSQL, the inserts marked plain (insert_postings, put_intents, store_transfers,
-- append_events): the statement runs first WITHOUT its ON CONFLICT DO NOTHING, whose
-- speculative insertion costs every row a probe of each unique index and a WAL record more
-- (postings: ~15 % of the statement); only when that fails on a duplicate key (SQLSTATE
-- 23505: the row is there, or a racing statement inserted it first; the failed statement
-- changed nothing) does the conditional form run, and its count is the answer. Either way
-- ONE statement took effect, with the count the conditional form alone would give on the
-- same state (a duplicate is rare on the common path: replays are answered from the intents
-- before anything is inserted again).
local function run(self, method, name, n, binds, rtypes, n2)
    local text, b, plain = stmt(self, name, n, n2, binds)
    local drv = self.drv
    -- inside a PostgreSQL phase (ron.ledger.store.pg_phase): the statement is collected, the
    -- phase picks its form
    if drv.phase then return drv[method](drv, text, b, rtypes, plain) end
    if plain then
        local r, err, class, sqlstate = self.drv[method](self.drv, plain, b, rtypes)
        if r or sqlstate ~= "23505" then return r, err, class end
    end
    return self.drv[method](self.drv, text, b, rtypes)
end

local function write(self, name, n, binds, n2)
    return run(self, "write", name, n, binds, nil, n2)
end

local function read(self, name, n, binds, rtypes, n2)
    return run(self, "read", name, n, binds, rtypes, n2)
end

local function read_one(self, name, n, binds, rtypes, f)
    local rows, err, class = read(self, name, n, binds, rtypes)
    if not rows then return nil, err, class end
    if rows[1] == nil then return nil end
    return f(rows[1])
end

local function read_all(self, name, n, binds, rtypes, f)
    local rows, err, class = read(self, name, n, binds, rtypes)
    if not rows then return nil, err, class end
    return map_rows(rows, f)
end

-- books ------------------------------------------------------------------------------------

function Store:create_book(id, meta)
    bytes_arg("create_book", id, "book_id")
    return write(self, "create_book", nil, { n = 2, id, meta })
end

local function book_row(r) return { id = r[1], meta = r[2] } end

function Store:get_book(id)
    return read_one(self, "get_book", nil, { n = 1, bytes_arg("get_book", id, "book_id") }, "bb",
                    book_row)
end

function Store:list_books()
    return read_all(self, "list_books", nil, { n = 0 }, "bb", book_row)
end

-- accounts ---------------------------------------------------------------------------------

local function account_binds(fname, a)
    if type(a) ~= "table" then misuse(fname, "expects an account table") end
    bytes_arg(fname, a.id, "account id", 16)
    local policy, status = POLICY[a.policy or "no_overdraft"], ASTATUS[a.status or "open"]
    if not policy then misuse(fname, "unknown policy " .. tostring(a.policy)) end
    if not status then misuse(fname, "unknown status " .. tostring(a.status)) end
    local bytes = a.bytes
    if bytes == nil then -- the canonical snapshot (LED-1), stored beside the columns
        local err
        bytes, err = ledger.encode_account(a)
        if not bytes then misuse(fname, tostring(err)) end
    end
    return policy, int_arg(fname, a.floor or 0, "floor"), status, bytes
end

function Store:create_account(a)
    local policy, floor, status, bytes = account_binds("create_account", a)
    if a.version ~= 1 then misuse("create_account", "version must be 1") end
    return write(self, "create_account", nil, { n = 5, a.id, policy, floor, status, bytes })
end

function Store:append_account_version(a)
    local policy, floor, status, bytes = account_binds("append_account_version", a)
    local v = int_arg("append_account_version", a.version, "version")
    return write(self, "append_account_version", nil,
                 { n = 8, a.id, v, policy, floor, status, bytes, a.id, v - 1 })
end

function Store:get_account(id)
    return read_one(self, "get_account", nil, { n = 1, bytes_arg("get_account", id, "id", 16) },
                    ACCOUNT_T, account_row)
end

function Store:get_accounts(ids)
    list_arg("get_accounts", ids, "ids")
    local out = {}
    if #ids == 0 then return out end
    local binds = { n = #ids }
    for i, id in ipairs(ids) do binds[i] = bytes_arg("get_accounts", id, "id", 16) end
    local rows, err, class = read(self, "get_accounts", #ids, binds, ACCOUNT_T)
    if not rows then return nil, err, class end
    for _, r in ipairs(rows) do out[r[1]] = account_row(r) end
    return out
end

function Store:get_account_history(id)
    return read_all(self, "get_account_history", nil,
                    { n = 1, bytes_arg("get_account_history", id, "id", 16) }, ACCOUNT_T,
                    account_row)
end

function Store:list_accounts()
    return read_all(self, "list_accounts", nil, { n = 0 }, ACCOUNT_T, account_row)
end

-- postings ---------------------------------------------------------------------------------

local function id_binds(fname, ids, binds, k)
    list_arg(fname, ids, "ids")
    for _, id in ipairs(ids) do
        if type(id) ~= "table" then misuse(fname, "a posting id is { transfer_id =, index = }") end
        binds[k + 1] = bytes_arg(fname, id.transfer_id, "transfer_id", 32)
        binds[k + 2] = int_arg(fname, id.index, "index")
        k = k + 2
    end
    binds.n = k
    return binds
end

function Store:insert_postings(ps)
    list_arg("insert_postings", ps, "postings", _M.MAX_POSTINGS)
    local n = #ps
    if n == 0 then return 0 end
    local binds, k = { n = n * 11 }, 0
    for _, p in ipairs(ps) do
        if type(p) ~= "table" or type(p.id) ~= "table" then
            misuse("insert_postings", "a posting is { id = { transfer_id =, index = }, ... }")
        end
        local tid = bytes_arg("insert_postings", p.id.transfer_id, "transfer_id", 32)
        local idx = int_arg("insert_postings", p.id.index, "index")
        local st = PSTATUS[p.status or "active"]
        if not st then misuse("insert_postings", "unknown status " .. tostring(p.status)) end
        asset_arg("insert_postings", p.asset)
        binds[k + 1], binds[k + 2] = tid, idx
        binds[k + 3] = bytes_arg("insert_postings", p.account, "account", 16)
        binds[k + 4], binds[k + 5] = p.asset.code, p.asset.scale
        binds[k + 6] = int_arg("insert_postings", p.amount, "amount")
        binds[k + 7], binds[k + 8] = st, p.reservation
        binds[k + 9], binds[k + 10] = p.created_by or tid, p.consumed_by
        binds[k + 11] = _M.shard(tid, idx)
        k = k + 11
    end
    return write(self, "insert_postings", n, binds)
end

-- LED-18: each transition is one UPDATE guarded by the status (and the reservation id).
function Store:reserve_postings(ids, rid)
    if #ids == 0 then return 0 end
    local binds = { bytes_arg("reserve_postings", rid, "rid") }
    return write(self, "reserve_postings", #ids, id_binds("reserve_postings", ids, binds, 1))
end

function Store:release_postings(ids, rid)
    if #ids == 0 then return 0 end
    local binds = { bytes_arg("release_postings", rid, "rid") }
    return write(self, "release_postings", #ids, id_binds("release_postings", ids, binds, 1))
end

function Store:deactivate_postings(ids, rid, consumed_by)
    if #ids == 0 then return 0 end
    bytes_arg("deactivate_postings", consumed_by, "consumed_by")
    if rid == nil then
        return write(self, "deactivate_active", #ids,
                     id_binds("deactivate_postings", ids, { consumed_by }, 1))
    end
    local binds = { consumed_by, bytes_arg("deactivate_postings", rid, "rid") }
    return write(self, "deactivate_reserved", #ids, id_binds("deactivate_postings", ids, binds, 2))
end

function Store:get_postings(ids)
    if #ids == 0 then return {} end
    return read_all(self, "get_postings", #ids, id_binds("get_postings", ids, {}, 0), POSTING_T,
                    posting_row)
end

-- (account, asset?, status?, limit?, order?) order: "largest" (amount descending, then
-- ascending id: what selection wants, LED-10) or "id" (the default).
function Store:get_postings_by_account(account, asset, status, limit, order)
    local binds = { bytes_arg("get_postings_by_account", account, "account", 16) }
    local k = 0
    if asset ~= nil then
        asset_arg("get_postings_by_account", asset)
        binds[#binds + 1], binds[#binds + 2] = asset.code, asset.scale
        k = k + 1
    end
    if status ~= nil then
        local st = PSTATUS[status]
        if not st then misuse("get_postings_by_account", "unknown status " .. tostring(status)) end
        binds[#binds + 1] = st
        k = k + 2
    end
    if limit ~= nil then
        binds[#binds + 1] = int_arg("get_postings_by_account", limit, "limit")
        k = k + 4
    end
    if order == "largest" then
        k = k + 8
    elseif order ~= nil and order ~= "id" then
        misuse("get_postings_by_account", "order is \"largest\" or \"id\"")
    end
    binds.n = #binds
    return read_all(self, "get_postings_by_account", k, binds, POSTING_T, posting_row)
end

-- balances (LED-19) --------------------------------------------------------------------

local function pair_binds(fname, pairs_)
    list_arg(fname, pairs_, "pairs")
    local binds, k = { n = #pairs_ * 3 }, 0
    for _, p in ipairs(pairs_) do
        if type(p) ~= "table" then misuse(fname, "a pair is { account =, asset = }") end
        binds[k + 1] = bytes_arg(fname, p.account, "account", 16)
        asset_arg(fname, p.asset)
        binds[k + 2], binds[k + 3] = p.asset.code, p.asset.scale
        k = k + 3
    end
    return binds
end

local function pair_key(account, code, scale) return account .. "\0" .. scale .. "\0" .. code end

-- -> { amount per pair, in the pairs' order } (0 for a pair without postings)
function Store:get_balances(pairs_)
    if #pairs_ == 0 then return {} end
    local rows, err, class = read(self, "get_balances", #pairs_,
                                  pair_binds("get_balances", pairs_), "bbii")
    if not rows then return nil, err, class end
    local by = {}
    for _, r in ipairs(rows) do by[pair_key(r[1], r[2], amount(r[3]))] = amount(r[4]) end
    local out = {}
    for i, p in ipairs(pairs_) do
        out[i] = by[pair_key(p.account, p.asset.code, p.asset.scale)] or 0
    end
    return out
end

function Store:get_balance(account, asset)
    local r, err, class = self:get_balances({ { account = account, asset = asset } })
    if not r then return nil, err, class end
    return r[1]
end

-- floor heads (LED-20) -------------------------------------------------------------------

function Store:ensure_head(account, asset)
    asset_arg("ensure_head", asset)
    return write(self, "ensure_head", nil,
                 { n = 3, bytes_arg("ensure_head", account, "account", 16), asset.code,
                   asset.scale })
end

function Store:acquire_head(account, asset, saga_id)
    asset_arg("acquire_head", asset)
    return write(self, "acquire_head", nil,
                 { n = 4, bytes_arg("acquire_head", saga_id, "saga_id"),
                   bytes_arg("acquire_head", account, "account", 16), asset.code, asset.scale })
end

function Store:release_head(account, asset, saga_id)
    asset_arg("release_head", asset)
    return write(self, "release_head", nil,
                 { n = 4, bytes_arg("release_head", account, "account", 16), asset.code,
                   asset.scale, bytes_arg("release_head", saga_id, "saga_id") })
end

-- -> { [i] = { version =, holder = } | nil (no row yet), n = #pairs }
function Store:get_heads(pairs_)
    local out = { n = #pairs_ }
    if #pairs_ == 0 then return out end
    local rows, err, class = read(self, "get_heads", #pairs_, pair_binds("get_heads", pairs_),
                                  "bbiib")
    if not rows then return nil, err, class end
    local by = {}
    for _, r in ipairs(rows) do
        by[pair_key(r[1], r[2], amount(r[3]))] = { version = amount(r[4]), holder = r[5] }
    end
    for i, p in ipairs(pairs_) do out[i] = by[pair_key(p.account, p.asset.code, p.asset.scale)] end
    return out
end

-- transfers ----------------------------------------------------------------------------

function Store:store_transfer(rec, involved)
    if type(rec) ~= "table" then misuse("store_transfer", "expects a transfer record") end
    local id = bytes_arg("store_transfer", rec.id, "id", 32)
    involved = list_arg("store_transfer", involved or {}, "involved accounts")
    local tb = { n = 6, id, bytes_arg("store_transfer", rec.bytes, "bytes"),
                 bytes_arg("store_transfer", rec.intent, "intent"),
                 bytes_arg("store_transfer", rec.book, "book"),
                 int_arg("store_transfer", rec.created_at_ms or 0, "created_at_ms"), rec.metadata }
    for _, a in ipairs(involved) do bytes_arg("store_transfer", a, "involved account", 16) end
    if self.dialect == "postgres" then
        local n = #involved
        for i = 1, n do tb[6 + i] = involved[i] end
        tb.n = 6 + n
        local rows, err, class = read(self, "store_transfer_pg", n, tb, "i")
        if not rows then return nil, err, class end
        return amount(rows[1][1])
    end
    return self.drv:atomic(function()
        local n, err, class = write(self, "store_transfer", nil, tb)
        if not n or n == 0 or #involved == 0 then return n, err, class end
        local ab = { n = #involved + 1 }
        for i, a in ipairs(involved) do ab[i] = a end
        ab[#involved + 1] = id
        local m, err2, class2 = write(self, "store_transfer_accounts", #involved, ab)
        if not m then return nil, err2, class2 end
        return n
    end)
end

function Store:get_transfer(id)
    return read_one(self, "get_transfer", nil, { n = 1, bytes_arg("get_transfer", id, "id", 32) },
                    TRANSFER_T, transfer_row)
end

-- Newest first; before = a record's n (the page's last) for the next page.
function Store:get_transfers_for_account(account, limit, before)
    local binds = { bytes_arg("get_transfers_for_account", account, "account", 16) }
    if before ~= nil then binds[2] = int_arg("get_transfers_for_account", before, "before") end
    binds[#binds + 1] = int_arg("get_transfers_for_account", limit or 100, "limit")
    binds.n = #binds
    return read_all(self, "get_transfers_for_account", before ~= nil and 1 or 0, binds,
                    TRANSFER_T, transfer_row)
end

-- Oldest first; after = a record's n (0: from the start).
function Store:list_transfers(after, limit)
    return read_all(self, "list_transfers", nil,
                    { n = 2, int_arg("list_transfers", after or 0, "after"),
                      int_arg("list_transfers", limit or 100, "limit") }, TRANSFER_T, transfer_row)
end

-- intents (LED-21) -----------------------------------------------------------------------

function Store:put_intent(key, o)
    bytes_arg("put_intent", key, "key")
    -- "claimed": the engine's claim row of an intent (message = the saga id), under a key no
    -- caller can send (docs/LEDGER.md "Intents").
    if type(o) ~= "table" or (o.status ~= "committed" and o.status ~= "rejected" and
                              o.status ~= "claimed") then
        misuse("put_intent", "outcome.status is \"committed\", \"rejected\" or \"claimed\"")
    end
    return write(self, "put_intent", nil,
                 { n = 6, key, o.status, o.transfer_id, o.code ~= nil and int_arg("put_intent",
                   o.code, "code") or nil, o.message, o.body_hash })
end

function Store:get_intent(key)
    return read_one(self, "get_intent", nil, { n = 1, bytes_arg("get_intent", key, "key") },
                    "bbbibb", function(r)
        return { key = r[1], status = r[2], transfer_id = r[3], code = amount(r[4]),
                 message = r[5], body_hash = r[6] }
    end)
end

-- sagas ------------------------------------------------------------------------------------

function Store:save_saga(id, phase, data, node)
    bytes_arg("save_saga", id, "id")
    if phase ~= "reserving" and phase ~= "finalizing" then
        misuse("save_saga", "phase is \"reserving\" or \"finalizing\"")
    end
    return write(self, "save_saga", nil, { n = 4, id, phase, data, node })
end

function Store:list_pending_sagas(node)
    local binds = { n = node ~= nil and 1 or 0, node }
    return read_all(self, "list_pending_sagas", node ~= nil and 1 or 0, binds, "bbbb",
                    function(r) return { id = r[1], phase = r[2], data = r[3], node = r[4] } end)
end

function Store:delete_saga(id)
    return write(self, "delete_saga", nil, { n = 1, bytes_arg("delete_saga", id, "id") })
end

-- events (LED-22) ------------------------------------------------------------------------

function Store:append_event(book, transfer_id, kind, data)
    bytes_arg("append_event", book, "book")
    return write(self, "append_event", nil,
                 { n = 5, book, bytes_arg("append_event", transfer_id, "transfer_id"),
                   bytes_arg("append_event", kind, "kind"), data, book })
end

-- The event of (book, transfer, kind) or nil: what the engine reads after a 0 from
-- append_event to tell "already there" from "a racing insert took the seq".
function Store:get_event(book, transfer_id, kind)
    return read_one(self, "get_event", nil, { n = 3, book, transfer_id, kind }, EVENT_T,
                    event_row)
end

function Store:get_events_since(book, after_seq, limit)
    return read_all(self, "get_events_since", nil,
                    { n = 3, bytes_arg("get_events_since", book, "book"),
                      int_arg("get_events_since", after_seq or 0, "after_seq"),
                      int_arg("get_events_since", limit or 100, "limit") }, EVENT_T, event_row)
end

function Store:head_seq(book)
    local rows, err, class = read(self, "head_seq", nil,
                                  { n = 1, bytes_arg("head_seq", book, "book") }, "i")
    if not rows then return nil, err, class end
    return amount(rows[1][1])
end

-- usage streams ----------------------------------------------------------------------------

function Store:get_stream(tenant, dimension)
    return read_one(self, "get_stream", nil,
                    { n = 2, bytes_arg("get_stream", tenant, "tenant"),
                      bytes_arg("get_stream", dimension, "dimension") }, "ib",
                    function(r) return { seq = amount(r[1]), b3 = r[2] } end)
end

-- LED-25: the head moves only from exactly (prev_seq, prev_b3); the first slice inserts once.
function Store:advance_stream(tenant, dimension, seq, b3, prev_seq, prev_b3)
    bytes_arg("advance_stream", tenant, "tenant")
    bytes_arg("advance_stream", dimension, "dimension")
    int_arg("advance_stream", seq, "seq")
    bytes_arg("advance_stream", b3, "b3")
    if prev_seq == nil then
        return write(self, "insert_stream", nil, { n = 4, tenant, dimension, seq, b3 })
    end
    return write(self, "advance_stream", nil,
                 { n = 6, seq, b3, tenant, dimension,
                   int_arg("advance_stream", prev_seq, "prev_seq"),
                   bytes_arg("advance_stream", prev_b3, "prev_b3") })
end

-- batch primitives (LED-51) -----------------------------------------------------------------
-- What the engine's commit_many and the exporter's put_many use so that the round trips are
-- per batch, not per request. Each is ONE statement (store_transfers on SQLite: two in one
-- transaction, like store_transfer); bounded per call like the others (the caller chunks).

_M.MAX_PAIR_QUERIES = 128  -- get_postings_by_pairs (SQLite: <= 500 compound SELECTs)
_M.MAX_TRANSFER_PARAMS = 6000 -- store_transfers: 6 per transfer + 2 per involved account

-- -> { [key] = outcome + key } (absent keys absent)
function Store:get_intents(keys)
    list_arg("get_intents", keys, "keys")
    local out = {}
    if #keys == 0 then return out end
    local binds = { n = #keys }
    for i, k in ipairs(keys) do binds[i] = bytes_arg("get_intents", k, "key") end
    local rows, err, class = read(self, "get_intents", #keys, binds, "bbbibb")
    if not rows then return nil, err, class end
    for _, r in ipairs(rows) do
        out[r[1]] = { key = r[1], status = r[2], transfer_id = r[3], code = amount(r[4]),
                      message = r[5], body_hash = r[6] }
    end
    return out
end

local OUTCOME = { committed = true, rejected = true, claimed = true }

-- list = { { key =, outcome = { status, transfer_id?, code?, message?, body_hash? } } }
-- -> n stored (a key already present keeps its first outcome and counts 0)
function Store:put_intents(list)
    list_arg("put_intents", list, "intents")
    if #list == 0 then return 0 end
    local binds, k = { n = #list * 6 }, 0
    for _, e in ipairs(list) do
        local o = type(e) == "table" and e.outcome
        if type(o) ~= "table" or not OUTCOME[o.status] then
            misuse("put_intents", "each is { key =, outcome = { status = ... } }")
        end
        binds[k + 1] = bytes_arg("put_intents", e.key, "key")
        binds[k + 2], binds[k + 3] = o.status, o.transfer_id
        binds[k + 4] = o.code ~= nil and int_arg("put_intents", o.code, "code") or nil
        binds[k + 5], binds[k + 6] = o.message, o.body_hash
        k = k + 6
    end
    return write(self, "put_intents", #list, binds)
end

-- queries = { { account =, asset =, status =, limit = }, ... } -> { [i] = postings of
-- query i, largest first (amount descending, then id ascending: selection's order) }
function Store:get_postings_by_pairs(queries)
    list_arg("get_postings_by_pairs", queries, "queries", _M.MAX_PAIR_QUERIES)
    local out = {}
    for i = 1, #queries do out[i] = {} end
    if #queries == 0 then return out end
    local binds, k = { n = #queries * 5 }, 0
    for _, q in ipairs(queries) do
        if type(q) ~= "table" then misuse("get_postings_by_pairs", "a query is a table") end
        binds[k + 1] = bytes_arg("get_postings_by_pairs", q.account, "account", 16)
        asset_arg("get_postings_by_pairs", q.asset)
        binds[k + 2], binds[k + 3] = q.asset.code, q.asset.scale
        local st = PSTATUS[q.status or "active"]
        if not st then misuse("get_postings_by_pairs", "unknown status " .. tostring(q.status)) end
        binds[k + 4] = st
        binds[k + 5] = int_arg("get_postings_by_pairs", q.limit or _M.MAX_BATCH, "limit")
        k = k + 5
    end
    local rows, err, class = read(self, "get_postings_by_pairs", #queries, binds,
                                  "i" .. POSTING_T)
    if not rows then return nil, err, class end
    for _, r in ipairs(rows) do
        local q = amount(r[1])
        local l = out[q]
        l[#l + 1] = posting_row { r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11] }
    end
    local function less(a, b)
        if a.amount ~= b.amount then return a.amount > b.amount end
        if a.id.transfer_id ~= b.id.transfer_id then return a.id.transfer_id < b.id.transfer_id end
        return a.id.index < b.id.index
    end
    for i = 1, #queries do table.sort(out[i], less) end
    return out
end

-- list = { { id =, consumed_by = }, ... }: PendingInactive with reservation rid -> Inactive,
-- each consumed by its own transfer. -> n
function Store:deactivate_many(list, rid)
    list_arg("deactivate_many", list, "postings")
    if #list == 0 then return 0 end
    local binds, k = {}, 0
    for _, e in ipairs(list) do
        if type(e) ~= "table" or type(e.id) ~= "table" then
            misuse("deactivate_many", "each is { id = { transfer_id =, index = }, consumed_by = }")
        end
        binds[k + 1] = bytes_arg("deactivate_many", e.id.transfer_id, "transfer_id", 32)
        binds[k + 2] = int_arg("deactivate_many", e.id.index, "index")
        binds[k + 3] = bytes_arg("deactivate_many", e.consumed_by, "consumed_by", 32)
        k = k + 3
    end
    binds[k + 1] = bytes_arg("deactivate_many", rid, "rid")
    binds.n = k + 1
    return write(self, "deactivate_many", #list, binds)
end

-- list = { { rec = { id, bytes, intent, book, created_at_ms, metadata }, involved = {...} } }
-- -> n transfers stored (present ones count 0); the rows and their transfer_accounts rows
-- are atomic as in store_transfer.
function Store:store_transfers(list)
    list_arg("store_transfers", list, "transfers")
    if #list == 0 then return 0 end
    local tb, ab, k, m = {}, {}, 0, 0
    for _, e in ipairs(list) do
        local rec = type(e) == "table" and e.rec
        if type(rec) ~= "table" then misuse("store_transfers", "each is { rec =, involved = }") end
        local id = bytes_arg("store_transfers", rec.id, "id", 32)
        tb[k + 1], tb[k + 2] = id, bytes_arg("store_transfers", rec.bytes, "bytes")
        tb[k + 3] = bytes_arg("store_transfers", rec.intent, "intent")
        tb[k + 4] = bytes_arg("store_transfers", rec.book, "book")
        tb[k + 5] = int_arg("store_transfers", rec.created_at_ms or 0, "created_at_ms")
        tb[k + 6] = rec.metadata
        k = k + 6
        for _, a in ipairs(e.involved or {}) do
            ab[2 * m + 1] = id
            ab[2 * m + 2] = bytes_arg("store_transfers", a, "involved account", 16)
            m = m + 1
        end
    end
    if k + 2 * m > _M.MAX_TRANSFER_PARAMS then
        misuse("store_transfers", format("at most %d parameters per call", _M.MAX_TRANSFER_PARAMS))
    end
    if self.dialect == "postgres" then
        for i = 1, 2 * m do tb[k + i] = ab[i] end
        tb.n = k + 2 * m
        local rows, err, class = read(self, "store_transfers_pg", #list, tb, "i", m)
        if not rows then return nil, err, class end
        return amount(rows[1][1])
    end
    tb.n, ab.n = k, 2 * m
    return self.drv:atomic(function()
        local n, err, class = write(self, "store_transfers", #list, tb)
        if not n or n == 0 or m == 0 then return n, err, class end
        local c, err2, class2 = write(self, "store_transfers_accounts", m, ab)
        if not c then return nil, err2, class2 end
        return n
    end)
end

-- list = { { transfer_id =, kind =, data = }, ... } -> n, first_seq: the rows whose (book,
-- transfer, kind) is not there yet take seqs max+1, max+2, ... of the book in the list's
-- order, in one statement (gapless: the numbering skips the present ones); first_seq is
-- the first inserted row's seq (n > 0), so with n = #list the seqs are first_seq ..
-- first_seq + n - 1 without a read. A row whose seq a racing insert took is skipped
-- (counts short): get_events_for tells which, the caller appends those again. (SQLite:
-- the INSERT and a read of the book's max in one transaction.)
function Store:append_events(book, list)
    bytes_arg("append_events", book, "book")
    list_arg("append_events", list, "events")
    if #list == 0 then return 0 end
    local binds, k = { book }, 1
    for i, e in ipairs(list) do
        if type(e) ~= "table" then misuse("append_events", "each is { transfer_id =, kind = }") end
        binds[k + 1] = i
        binds[k + 2] = bytes_arg("append_events", e.transfer_id, "transfer_id")
        binds[k + 3] = bytes_arg("append_events", e.kind, "kind")
        binds[k + 4] = e.data
        k = k + 4
    end
    binds[k + 1], binds[k + 2] = book, book
    binds.n = k + 2
    if self.dialect == "postgres" then
        local rows, err, class = read(self, "append_events_pg", #list, binds, "ii")
        if not rows then return nil, err, class end
        local n = amount(rows[1][1])
        return n, n > 0 and amount(rows[1][2]) or nil
    end
    -- SQLite: the book's max read in the same (exclusive) transaction gives the first seq
    return self.drv:atomic(function()
        local n, err, class = write(self, "append_events", #list, binds)
        if not n or n == 0 then return n, err, class end
        local rows, err2, class2 = read(self, "append_events_max", nil, { n = 1, book }, "i")
        if not rows then return nil, err2, class2 end
        return n, amount(rows[1][1]) - n + 1
    end)
end

-- -> { [transfer_id] = event } of one kind
function Store:get_events_for(book, transfer_ids, kind)
    bytes_arg("get_events_for", book, "book")
    bytes_arg("get_events_for", kind, "kind")
    list_arg("get_events_for", transfer_ids, "transfer ids")
    local out = {}
    if #transfer_ids == 0 then return out end
    local binds = { book, kind, n = #transfer_ids + 2 }
    for i, t in ipairs(transfer_ids) do
        binds[i + 2] = bytes_arg("get_events_for", t, "transfer_id")
    end
    local rows, err, class = read(self, "get_events_for", #transfer_ids, binds, EVENT_T)
    if not rows then return nil, err, class end
    for _, r in ipairs(rows) do out[r[3]] = event_row(r) end
    return out
end

local function stream_key(tenant, dim) return tenant .. "\0" .. dim end
_M.stream_key = stream_key

-- pairs = { { tenant =, dimension = } } -> { [tenant .. "\0" .. dimension] = { seq, b3 } }
function Store:get_streams(pairs_)
    list_arg("get_streams", pairs_, "streams")
    local out = {}
    if #pairs_ == 0 then return out end
    local binds = { n = #pairs_ * 2 }
    for i, p in ipairs(pairs_) do
        binds[2 * i - 1] = bytes_arg("get_streams", p.tenant, "tenant")
        binds[2 * i] = bytes_arg("get_streams", p.dimension, "dimension")
    end
    local rows, err, class = read(self, "get_streams", #pairs_, binds, "bbib")
    if not rows then return nil, err, class end
    for _, r in ipairs(rows) do out[stream_key(r[1], r[2])] = { seq = amount(r[3]), b3 = r[4] } end
    return out
end

-- list = { { tenant, dimension, seq, b3 } }: each stream's first head (insert once). -> n
function Store:insert_streams(list)
    list_arg("insert_streams", list, "streams")
    if #list == 0 then return 0 end
    local binds = { n = #list * 4 }
    for i, e in ipairs(list) do
        local k = 4 * (i - 1)
        binds[k + 1] = bytes_arg("insert_streams", e.tenant, "tenant")
        binds[k + 2] = bytes_arg("insert_streams", e.dimension, "dimension")
        binds[k + 3] = int_arg("insert_streams", e.seq, "seq")
        binds[k + 4] = bytes_arg("insert_streams", e.b3, "b3")
    end
    return write(self, "insert_streams", #list, binds)
end

-- list = { { tenant, dimension, seq, b3, prev_seq, prev_b3 } }: each head moves only from
-- exactly (prev_seq, prev_b3) (LED-25), at most one entry per stream. -> n moved
function Store:advance_streams(list)
    list_arg("advance_streams", list, "streams")
    if #list == 0 then return 0 end
    local binds = { n = #list * 6 }
    for i, e in ipairs(list) do
        local k = 6 * (i - 1)
        binds[k + 1] = bytes_arg("advance_streams", e.tenant, "tenant")
        binds[k + 2] = bytes_arg("advance_streams", e.dimension, "dimension")
        binds[k + 3] = int_arg("advance_streams", e.seq, "seq")
        binds[k + 4] = bytes_arg("advance_streams", e.b3, "b3")
        binds[k + 5] = int_arg("advance_streams", e.prev_seq, "prev_seq")
        binds[k + 6] = bytes_arg("advance_streams", e.prev_b3, "prev_b3")
    end
    return write(self, "advance_streams", #list, binds)
end

-- meta --------------------------------------------------------------------------------------

function Store:get_meta(key)
    local rows, err, class = read(self, "get_meta", nil, { n = 1, key }, "b")
    if not rows then return nil, err, class end
    return rows[1] and rows[1][1]
end

function Store:put_meta(key, value)
    return write(self, "put_meta", nil, { n = 2, key, value })
end

-- node leases (LED-71, ron.ledger.lease) --------------------------------------------------
-- A node's lease row: { node, epoch, owner, expires_ms } in the store's clock. The engine
-- of a node guards every write with check_lease (its node and epoch) in the same
-- transaction, so once a survivor took a dead node's lease over (epoch + 1) no statement of
-- that node's earlier process lands any more.

local function lease_count(rows, err, class)
    if not rows then return nil, err, class end
    return amount(rows[1] and rows[1][1]) or 0
end

-- -> the epoch now held (> 0) | 0 (another node owns the row, unexpired)
function Store:lease_acquire(node, ttl_ms)
    bytes_arg("lease_acquire", node, "node")
    return lease_count(read(self, "lease_acquire", nil,
        { n = 3, node, node, int_arg("lease_acquire", ttl_ms, "ttl_ms") }, "i"))
end

-- -> 1 | 0 (the row is not (node, epoch, owner) any more: lost)
function Store:lease_renew(node, epoch, owner, ttl_ms)
    bytes_arg("lease_renew", node, "node")
    return write(self, "lease_renew", nil, { n = 4, int_arg("lease_renew", ttl_ms, "ttl_ms"),
        node, int_arg("lease_renew", epoch, "epoch"), bytes_arg("lease_renew", owner, "owner") })
end

-- The expired row (node, epoch, expires_ms as listed) -> owner, epoch + 1. -> 1 | 0
function Store:lease_takeover(node, epoch, expires_ms, owner, ttl_ms)
    bytes_arg("lease_takeover", node, "node")
    bytes_arg("lease_takeover", owner, "owner")
    int_arg("lease_takeover", epoch, "epoch")
    int_arg("lease_takeover", expires_ms, "expires_ms")
    int_arg("lease_takeover", ttl_ms, "ttl_ms")
    if self.dialect == "postgres" then
        return lease_count(read(self, "lease_takeover_pg", nil,
            { n = 5, node, epoch, expires_ms, owner, ttl_ms }, "i"))
    end
    return write(self, "lease_takeover", nil,
                 { n = 5, owner, ttl_ms, node, epoch, expires_ms })
end

-- -> 1 | 0: the row (node, epoch, owner) is free (nobody owns it, nothing to recover)
function Store:lease_release(node, epoch, owner)
    return write(self, "lease_release", nil, { n = 3, bytes_arg("lease_release", node, "node"),
        int_arg("lease_release", epoch, "epoch"), bytes_arg("lease_release", owner, "owner") })
end

-- -> { { node, epoch, owner?, expires_ms?, now_ms }, ... } by node
function Store:list_leases()
    return read_all(self, "list_leases", nil, { n = 0 }, "bibii", function(r)
        return { node = r[1], epoch = amount(r[2]), owner = r[3], expires_ms = amount(r[4]),
                 now_ms = amount(r[5]) }
    end)
end

-- -> 1 | 0: (node, epoch) holds the node's lease (a phase's guard: expect = 1)
function Store:check_lease(node, epoch)
    bytes_arg("check_lease", node, "node")
    int_arg("check_lease", epoch, "epoch")
    if self.dialect == "postgres" then
        return lease_count(read(self, "check_lease_pg", nil, { n = 2, node, epoch }, "i"))
    end
    return lease_count(read(self, "check_lease", nil, { n = 3, node, epoch, node }, "i"))
end

-- durability ----------------------------------------------------------------------------------

-- LED-50: with durability "ack" the primitives commit without waiting for the disk (the
-- log keeps them in order); flush() makes everything this store's connections wrote before
-- it durable with ONE sync, and the caller calls it before it acknowledges. With
-- "statement" every primitive was already durable: flush() does nothing and counts 0.
-- -> 1 | 0 | nil, err, class. Idempotent; nothing to flush is not an error.
_M.FLUSH = {
    -- PostgreSQL: a commit waits for the WAL flush only when its transaction wrote WAL
    -- (RecordTransactionCommit: wrote_xlog AND an xid AND synchronous_commit > off); a
    -- transactional logical message is a WAL record with an xid, and set_config(..., true)
    -- turns synchronous_commit on for this one transaction. XLogFlush(its end) flushes the
    -- whole WAL up to there: every earlier asynchronous commit of every connection.
    -- (SELECT set_config(...), txid_current() does NOT: an xid without a WAL record commits
    -- asynchronously; the host spec checks pg_current_wal_flush_lsn() after a flush.)
    postgres = "SELECT set_config('synchronous_commit', 'on', true), "
               .. "pg_logical_emit_message(true, 'ron.ledger.flush', '')",
    -- SQLite: the one row changes (randomblob: an identical value would leave the page
    -- clean, and a transaction with no frame syncs nothing); the driver commits it under
    -- synchronous = FULL, whose WAL fsync covers every earlier frame of the file.
    sqlite = "INSERT INTO @ledger_meta (key, value) "
             .. "VALUES (CAST('flush' AS BLOB), randomblob(8)) "
             .. "ON CONFLICT (key) DO UPDATE SET value = randomblob(8)",
}

function Store:flush()
    if self.durability ~= "ack" then return 0 end
    local text = self.flush_sql
    if not text then
        text = schema.expand(_M.FLUSH[self.dialect], self.prefix)
        self.flush_sql = text
    end
    local n, err, class = self.drv:flush(text)
    if not n then return nil, err, class end
    return 1
end

-- verify's reads (ron.ledger.store.scan): every row of a table as stored, a page at a time
function Store:scan(tbl, after, limit) return scan.sql(self, tbl, after, limit, _M) end

local function pack(...) return { n = select("#", ...), ... } end

-- Several primitives in one call: { { "name", args... }, ... } -> { { results... }, ... },
-- each its own statement, in order; it stops after the first that fails (nil, err, class),
-- whose results end the list. The offloaded SQLite driver runs the whole list in one pool
-- call (one hop off the loop instead of one per primitive).
function Store:many(calls)
    if type(calls) ~= "table" then misuse("many", "expects a list of { name, args... }") end
    local out = {}
    for i, c in ipairs(calls) do
        local name = type(c) == "table" and c[1]
        local f = name ~= "many" and Store[name]
        if not f then misuse("many", "unknown primitive " .. tostring(name)) end
        local r = pack(f(self, unpack(c, 2, table.maxn(c))))
        out[i] = r
        if r[1] == nil and r[2] ~= nil then break end
    end
    return out
end

-- A phase (LED-67, ron.ledger.store.phase): the ops in ONE transaction, in one call. SQLite:
-- one BEGIN IMMEDIATE transaction on the connection (the offloaded driver runs the whole
-- call in one pool hop); PostgreSQL: one pipeline on one connection of the pool
-- (ron.ledger.store.pg_phase). opts.flush: flush() after the commit, in the same call.
function Store:apply(ops, opts)
    phases.check(ops, opts)
    if self.drv.apply_phase then return self.drv.apply_phase(self, ops, opts) end
    local res, err, class = self.drv:phase(function() return phases.run(self, ops) end)
    if res and res.ok and opts and opts.flush then
        res.flushed = self:flush() ~= nil
    end
    return res, err, class
end

-- The names every backend offers (the offloaded driver proxies exactly these).
_M.METHODS = {
    "create_book", "get_book", "list_books",
    "create_account", "append_account_version", "get_account", "get_accounts",
    "get_account_history", "list_accounts",
    "insert_postings", "reserve_postings", "release_postings", "deactivate_postings",
    "get_postings", "get_postings_by_account",
    "get_balances", "get_balance",
    "ensure_head", "acquire_head", "release_head", "get_heads",
    "store_transfer", "get_transfer", "get_transfers_for_account", "list_transfers",
    "put_intent", "get_intent",
    "save_saga", "list_pending_sagas", "delete_saga",
    "append_event", "get_event", "get_events_since", "head_seq",
    "get_stream", "advance_stream",
    "get_meta", "put_meta", "flush", "many", "apply", "scan",
    -- node leases (LED-71)
    "lease_acquire", "lease_renew", "lease_takeover", "lease_release", "list_leases",
    "check_lease",
    -- batch primitives (LED-51)
    "get_intents", "put_intents", "get_postings_by_pairs", "deactivate_many",
    "store_transfers", "append_events", "get_events_for", "get_streams", "insert_streams",
    "advance_streams",
}

-- Refuses a database written by a newer layout (LED-24): the version row, checked before
-- the DDL runs.
function _M.check_version(v)
    if v == nil then return true end
    local n = tonumber(v)
    if not n then
        return nil, "SchemaError: ledger_meta schema_version is not a number: " .. tostring(v)
    end
    if n > schema.VERSION then
        return nil, format("SchemaError: the store holds schema version %d, newer than this "
                           .. "code's %d: refusing to open it (upgrade ron-accounting)", n,
                           schema.VERSION)
    end
    return true
end

return _M
