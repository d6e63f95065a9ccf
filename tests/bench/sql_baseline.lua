-- sql_baseline.lua: the plain-SQL transfer ledger that bench-wallet.lua measures the wallet
-- against in the same run (issue 25 "Targets"): what a user could write in an afternoon.
--
--   local SB = require("sql_baseline")
--   SB.sqlite { path =, seconds =, per_tx = 1|64, sources = K, hot = bool }   -> stats
--   SB.postgres(T, { conninfo =, schema =, seconds =, conns = N, per_tx =, sources = K })
--                                                                              -> stats
--   stats = { transfers, per_s, p50_us, p99_us (per transaction), retries, conns }
--
-- The schema: balances (id, balance), transfers (id, idem UNIQUE, src, dst, amount), entries
-- (transfer_id, account, amount). A transfer is the conditional debit (`balance >= amount`,
-- nothing else happens when it does not match), the credit of the one sink, the transfer row
-- under its own idempotency key and its two entry rows, all in one transaction:
--   B1  per_tx = 1   one transaction per transfer
--   B2  per_tx = 64  64 transfers per transaction
-- SQLite: WAL, synchronous = FULL, one connection on this thread (SQLite has one writer: more
-- connections would only wait on its lock, each wait a sleep of the busy handler, so one is
-- the baseline's best case). The loop is blocked while it runs: call it with nothing else
-- under load. PostgreSQL: `conns` connections (tasks on the loop), synchronous_commit on
-- (the server's default), one statement per transfer (data-modifying CTEs); connection k
-- pays from source k % K (K = 1: the hot source), so a transaction locks its one source
-- then the sink (no lock cycles); a serialization failure or deadlock is retried, counted.
local ffi = require("ffi")
local uv = require("luv")
local pct = require("ron.base.percentile")

local format = string.format
local _M = {}

local FUND = 1000000000000
local SINK = 0
local TRANSIENT = ffi.cast("void *", ffi.cast("intptr_t", -1)) -- SQLITE_TRANSIENT: a copy

local function stats(n, t0, lat, retries, conns)
    return { transfers = n, per_s = n / ((uv.hrtime() - t0) / 1e9), p50_us = pct(lat, 0.5),
             p99_us = pct(lat, 0.99), retries = retries, conns = conns }
end

-- ---- SQLite (the store's libsqlite3 and its cdefs) ----

local function sqlite_db(path)
    local C = require("ron.ledger.store.sqlite").lib()
    local pp = ffi.new("sqlite3 *[1]")
    assert(C.sqlite3_open_v2(path, pp, 0x2 + 0x4 + 0x10000, nil) == 0, "sqlite open " .. path)
    local db = pp[0]
    local function exec(text)
        local rc = C.sqlite3_exec(db, text, nil, nil, nil)
        assert(rc == 0, format("sqlite %s: %s", text, ffi.string(C.sqlite3_errmsg(db))))
    end
    local pst, stmts = ffi.new("sqlite3_stmt *[1]"), {}
    -- runs text with int64/blob binds -> changes
    local function run(text, ...)
        local st = stmts[text]
        if not st then
            assert(C.sqlite3_prepare_v2(db, text, #text, pst, nil) == 0,
                   ffi.string(C.sqlite3_errmsg(db)))
            st = pst[0]
            stmts[text] = st
        end
        for i = 1, select("#", ...) do
            local v = select(i, ...)
            if type(v) == "string" then C.sqlite3_bind_blob(st, i, v, #v, TRANSIENT)
            else C.sqlite3_bind_int64(st, i, v) end
        end
        local rc = C.sqlite3_step(st)
        C.sqlite3_reset(st)
        assert(rc == 101, format("sqlite step %d: %s", rc, ffi.string(C.sqlite3_errmsg(db))))
        return C.sqlite3_changes(db)
    end
    local function close()
        for _, st in pairs(stmts) do C.sqlite3_finalize(st) end
        C.sqlite3_close_v2(db)
    end
    return exec, run, close
end

local SQLITE_DDL = [[
PRAGMA journal_mode = WAL;
PRAGMA synchronous = FULL;
CREATE TABLE IF NOT EXISTS balances (id INTEGER PRIMARY KEY, balance INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS transfers (id INTEGER PRIMARY KEY, idem BLOB NOT NULL UNIQUE,
    src INTEGER NOT NULL, dst INTEGER NOT NULL, amount INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS entries (transfer_id INTEGER NOT NULL, account INTEGER NOT NULL,
    amount INTEGER NOT NULL);
]]

function _M.sqlite(o)
    local exec, run, close = sqlite_db(o.path)
    exec(SQLITE_DDL)
    exec("BEGIN")
    run("INSERT OR IGNORE INTO balances VALUES (?, 0)", SINK)
    for k = 1, o.sources do run("INSERT OR REPLACE INTO balances VALUES (?, ?)", k, FUND) end
    exec("COMMIT")
    local next_id = 1
    local function transfer(src)
        local id = next_id
        next_id = next_id + 1
        if run("UPDATE balances SET balance = balance - ?2 WHERE id = ?1 AND balance >= ?2",
               src, 1) ~= 1 then
            return false
        end
        run("UPDATE balances SET balance = balance + ?2 WHERE id = ?1", SINK, 1)
        run("INSERT INTO transfers (id, idem, src, dst, amount) VALUES (?, ?, ?, ?, ?)", id,
            format("k%015d-%d", id, o.per_tx), src, SINK, 1)
        run("INSERT INTO entries VALUES (?1, ?2, -?4), (?1, ?3, ?4)", id, src, SINK, 1)
        return true
    end
    exec("DELETE FROM transfers; DELETE FROM entries")
    local lat, n, j = {}, 0, 0
    local t0 = uv.hrtime()
    local stop = t0 + o.seconds * 1e9
    while uv.hrtime() < stop do
        local a = uv.hrtime()
        exec("BEGIN IMMEDIATE")
        for _ = 1, o.per_tx do
            j = j + 1
            if transfer(o.hot and 1 or j % o.sources + 1) then n = n + 1 end
        end
        exec("COMMIT")
        lat[#lat + 1] = (uv.hrtime() - a) / 1000
    end
    local r = stats(n, t0, lat, 0, 1)
    close()
    uv.update_time()
    return r
end

-- ---- PostgreSQL ----

local PG_TRANSFER = [[
WITH d AS (UPDATE %s.balances SET balance = balance - $3::bigint
           WHERE id = $1::bigint AND balance >= $3::bigint RETURNING id),
     c AS (UPDATE %s.balances SET balance = balance + $3::bigint
           WHERE id = $2::bigint AND EXISTS (SELECT 1 FROM d) RETURNING id),
     t AS (INSERT INTO %s.transfers (idem, src, dst, amount)
           SELECT $4::text, $1::bigint, $2::bigint, $3::bigint FROM d RETURNING id)
INSERT INTO %s.entries (transfer_id, account, amount)
SELECT id, $1::bigint, -$3::bigint FROM t UNION ALL SELECT id, $2::bigint, $3::bigint FROM t]]

-- generous deadlines: the benchmark may share a loaded machine
local function pg_connect(pg, o)
    return assert(pg.connect { conninfo = o.conninfo, connect_timeout_ms = 60000,
                               query_timeout_ms = 60000 })
end

local function pg_setup(pg, o)
    local s = o.schema
    local db = pg_connect(pg, o)
    assert(db:exec(format([[
DROP SCHEMA IF EXISTS %s CASCADE; CREATE SCHEMA %s;
CREATE TABLE %s.balances (id bigint PRIMARY KEY, balance bigint NOT NULL);
CREATE TABLE %s.transfers (id bigserial PRIMARY KEY, idem text NOT NULL UNIQUE,
    src bigint NOT NULL, dst bigint NOT NULL, amount bigint NOT NULL);
CREATE TABLE %s.entries (transfer_id bigint NOT NULL, account bigint NOT NULL,
    amount bigint NOT NULL);
INSERT INTO %s.balances SELECT g, %d FROM generate_series(1, %d) g;
INSERT INTO %s.balances VALUES (%d, 0);]], s, s, s, s, s, s, FUND, o.sources, s, SINK)))
    db:close()
end

function _M.postgres(T, o)
    local pg = require("ron.base.net.postgres")
    pg_setup(pg, o)
    local q = format(PG_TRANSFER, o.schema, o.schema, o.schema, o.schema)
    local lat, n, retries, conns = {}, 0, 0, 0
    local dbs = {}
    for k = 1, o.conns do dbs[k] = pg_connect(pg, o) end
    local t0 = uv.hrtime()
    local stop_at = uv.now() + o.seconds * 1000
    local hs = {}
    for k = 1, o.conns do
        hs[k] = T.spawn("sql_baseline_pg", function()
            local db, src, j = dbs[k], k % o.sources + 1, 0
            conns = conns + 1
            while uv.now() < stop_at do
                local list = {}
                for i = 1, o.per_tx do
                    list[i] = { q, { src, SINK, 1, format("k%d-%d-%d-%d", o.per_tx, k, j, i) } }
                end
                j = j + 1
                local a = uv.hrtime()
                local res, err, sqlstate = db:pipeline(list)
                if not res and (sqlstate == "40001" or sqlstate == "40P01") then
                    retries = retries + 1
                else
                    assert(res, tostring(err))
                    for i = 1, o.per_tx do
                        local r = res[i]
                        if r and (r.error or r.aborted) then
                            if r.sqlstate == "40001" or r.sqlstate == "40P01" then
                                retries = retries + 1
                                break
                            end
                            error("baseline: " .. tostring(r.error or "aborted"))
                        end
                        if i == o.per_tx then n = n + o.per_tx end
                    end
                    lat[#lat + 1] = (uv.hrtime() - a) / 1000
                end
            end
            return true
        end)
    end
    for k = 1, o.conns do assert(hs[k]:join(o.seconds * 1000 + 60000)) end
    local r = stats(n, t0, lat, retries, conns)
    for k = 1, o.conns do dbs[k]:close() end
    return r
end

return _M
