-- ron.ledger.store.postgres: the Store (ron.ledger.store) on PostgreSQL through
-- ron.base.net.postgres (async libpq on the host's loop). Only inside `ron-accounting
-- run`, and every call from a task (ron.base.task).
--
--   local s, err, class = require("ron.ledger.store.postgres").open {
--       conninfo = "host=... dbname=...",  -- or db = an existing pg.new/pg.pool object
--       schema = "ron_ledger",             -- the tables' schema, [a-z_][a-z0-9_]* (<= 63 B)
--       connections = 4,                   -- pool size when conninfo is given (1..64)
--       query_timeout_ms = 5000,
--       durability = "ack",                -- "ack" (default) | "statement" (LED-50)
--       prepare = true,                    -- a phase's statements as named prepared ones
--                                          -- (false: behind PgBouncer's transaction mode)
--       node = "n1" }                      -- the engine node this process serves: fencing
--
-- Fencing (LED-65): with node, every connection of the pool this store makes names itself
-- (application_name "rl:<16 hex of the schema and node>:<16 hex of this open>"), and
-- s:fence() ends every other backend with this node's name and waits until they are gone.
-- A process killed mid-commit leaves its statements running on the server (a backend
-- notices its client is gone only after the statement); recover() fences first, so a
-- save_saga or a reserve of the dead process cannot land after it. The node must be unique
-- per running process (a live process with the same node loses its connections).
--
-- Durability (LED-50): "ack" runs the statements with synchronous_commit = off (set on each
-- connection of the pool this store makes) and flush() commits one WAL record synchronously,
-- which flushes the WAL up to it: every statement any connection finished before. With
-- "statement" the server's synchronous_commit applies (default on: each statement waits for
-- its WAL flush) and flush() counts 0. With db = (the caller's connections) their own
-- setting applies; flush() still makes everything before it durable.
--
-- JIT (issue 25): each connection of the pool this store makes runs with jit = off (the
-- store's statements are index probes of milliseconds; see on_connect_of). With db = (the
-- caller's connections), or behind a pooler that does not keep sessions, set it on the role
-- instead: ALTER ROLE ... SET jit = off.
--
-- Same SQL as SQLite (ron.ledger.store.sql) with "$n::type" parameters; bytes travel as
-- binary bytea parameters and come back as bytea hex text. The statements run under READ
-- COMMITTED, one statement each (autocommit): the conditional WHERE / ON CONFLICT does the
-- arbitration, a racing writer blocks on the row or the unique index and then counts 0.
-- Migrations: open() takes an advisory transaction lock, creates what is missing and
-- records the schema version (LED-24).
--
-- Errors: class "retry" for SQLSTATE 40001 (serialization failure), 40P01 (deadlock) and
-- 26000 (a named prepared statement the session lost: prepared again on the retry);
-- "io" for the connection (network, closed, timeout, canceled, SQLSTATE classes 08, 53, 57,
-- 58); "bug" for the rest.
local codec = require("ron.ledger.codec")
local ledger = require("ron.ledger")
local sql = require("ron.ledger.store.sql")
local schema = require("ron.ledger.store.schema")
local pg = require("ron.base.net.postgres")
local check = require("ron.base.check")
local pg_phase = require("ron.ledger.store.pg_phase")
local wire = require("ron.ledger.store.pg_wire")
local task = require("ron.base.task")
local upgrade = require("ron.ledger.store.upgrade")
local uv = require("luv")

local type, error, tostring, tonumber, ipairs, format =
    type, error, tostring, tonumber, ipairs, string.format

local _M = { DEFAULT_SCHEMA = "ron_ledger" }

local fail, params, decode = wire.fail, wire.params, wire.decode
_M.classify, _M.params, _M.decode, _M.fail = wire.classify, params, decode, fail

local Drv = {}
Drv.__index = Drv

-- A phase is one pipeline on one connection (ron.ledger.store.pg_phase); Store:apply asks
-- the driver for it, so the dialect-neutral store needs no PostgreSQL module.
Drv.apply_phase = pg_phase.apply

function Drv:write(text, binds)
    local rows, err, st, cls = self.db:query(text, params(binds))
    if not rows then return fail(err, st, cls) end
    return rows.affected or 0
end

function Drv:read(text, binds, rtypes)
    local rows, err, st, cls = self.db:query(text, params(binds))
    if not rows then return fail(err, st, cls) end
    return decode(rows, rtypes)
end

function Drv:atomic(fn) return fn() end -- every primitive here is one statement

function Drv:flush(text)
    local rows, err, st, cls = self.db:query(text)
    if not rows then return fail(err, st, cls) end
    return 1
end

local OPTS = { conninfo = true, db = true, schema = true, connections = true,
               query_timeout_ms = true, connect_timeout_ms = true, durability = true,
               node = true, fence_timeout_ms = true, readonly = true, prepare = true }

-- The DDL in one transaction (a multi-statement simple query is one implicit transaction:
-- a failure leaves nothing half-made and no transaction open) under an advisory lock (two
-- processes opening at once would otherwise race on CREATE ... IF NOT EXISTS); the version
-- row checked first.
local LOCK_KEY = 0x726f6e6c -- "ronl"

-- On one connection (m), inside the transaction BEGIN opened: the version read under the
-- lock, the DDL, the upgrade of an older store (ron.ledger.store.upgrade, LED-68), the
-- version row.
local function migrate_on(m, prefix)
    local q = "BEGIN; SELECT pg_advisory_xact_lock(" .. LOCK_KEY .. "); CREATE SCHEMA IF NOT "
              .. "EXISTS " .. prefix:sub(1, -2) .. "; " .. schema.META("postgres", prefix)
    local ok, err, st, cls = m:exec(q)
    if not ok then return fail(err, st, cls) end
    local s = sql.new(setmetatable({ db = m }, Drv), "postgres", prefix)
    local v, e2, c2 = s:get_meta("schema_version")
    if e2 then return nil, e2, c2 end
    local vok, verr = sql.check_version(v)
    if not vok then return nil, verr, "bug" end
    ok, err, st, cls = m:exec(table.concat(schema.ddl("postgres", prefix), ";\n"))
    if not ok then return fail(err, st, cls) end
    if upgrade.needed(v) then
        local n, e3, c3 = upgrade.run(s)
        if not n then return nil, e3, c3 end
    end
    local n, e4, c4 = s:put_meta("schema_version", tostring(schema.VERSION))
    if not n then return nil, e4, c4 end
    ok, err, st, cls = m:exec("COMMIT")
    if not ok then return fail(err, st, cls) end
    return true
end

local function migrate(db, prefix)
    local m = db
    if db.acquire then
        local err, st, cls
        m, err, st, cls = db:acquire()
        if not m then return fail(err, st, cls) end
    end
    local r = { pcall(migrate_on, m, prefix) }
    if not (r[1] and r[2]) then m:exec("ROLLBACK") end
    if db.acquire then db:release(m) end
    if not r[1] then error(r[2], 0) end
    return unpack(r, 2, 4)
end

-- A read-only store (verify, LED-69) opens only a ledger: its ledger_meta table and its
-- schema_version row, the version this code checks. Nothing is created or migrated.
local function check_ledger(db, s, name)
    local rows, err, st, cls = db:query("SELECT count(*) FROM pg_tables WHERE schemaname = '"
                                        .. name .. "' AND tablename = 'ledger_meta'")
    if not rows then return fail(err, st, cls) end
    if tonumber(rows[1][1]) == 0 then
        return nil, format("NotALedger: schema %s holds no ledger (no ledger_meta table)", name),
               "bug"
    end
    local v, e2, c2 = s:get_meta("schema_version")
    if e2 then return nil, e2, c2 end
    return upgrade.readable(v, "schema " .. name)
end

-- fn() inside one REPEATABLE READ, READ ONLY transaction on the store's one connection:
-- every read sees one snapshot (verify over a ledger that writers keep changing).
local function snapshot(self, fn)
    local db = self.drv.db
    local ok, err, st, cls = db:exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
    if not ok then return fail(err, st, cls) end
    local r = { pcall(fn) }
    db:exec(r[1] and "COMMIT" or "ROLLBACK")
    if not r[1] then error(r[2], 0) end
    return unpack(r, 2, table.maxn(r))
end

-- LED-50, durability "ack": each connection commits without waiting for the WAL flush; the
-- WAL is one ordered log, so a crash keeps a prefix of the commits, and flush() (a
-- synchronous commit) makes all of them durable at once.
local ASYNC_COMMIT = "SET synchronous_commit = off"

-- 16 hex digits of the first 8 bytes (an application_name is at most 63 bytes)
local function hex16(s) return ledger.hex(s:sub(1, 8)) end

-- The application_name prefix of a node's connections (LED-65): only hex and ':' (no LIKE
-- wildcard).
local function node_tag(schema_name, node)
    return "rl:" .. hex16(codec.sha256(schema_name .. "\0" .. node)) .. ":"
end

-- Ends the backends named by tag but not `me`: -> the count ended, the terminate's error.
local function terminate(db, others)
    local rows, err = db:query("SELECT pg_terminate_backend(pid) AS t " .. others)
    local ended = 0
    if rows then
        for i = 1, rows.n or #rows do
            if rows[i][1] == "t" or rows[i].t == "t" then ended = ended + 1 end
        end
    end
    return ended, rows == nil and err or nil
end

local function named(tag, me)
    return "FROM pg_stat_activity WHERE datname = current_database() AND application_name "
           .. "LIKE '" .. tag .. "%'" .. (me and (" AND application_name <> '" .. me .. "'") or "")
end

-- LED-71: a survivor that took another node's lease over ends that node's backends once (a
-- dead process's statements still running, a transaction of a stopped one left open); no
-- wait: the node's later statements, a reconnected pool's included, are fenced by its
-- lease's epoch (ron.ledger.lease). -> the count ended | nil, err, "io"
local function fence_node(self, node)
    if type(node) ~= "string" or node == "" then
        error("postgres: fence_node: node must be a non-empty string", 2)
    end
    local tag = node_tag(self.schema, node)
    if tag == self.fence_tag then error("postgres: fence_node: this store's own node", 2) end
    local ended, err = terminate(self.drv.db, named(tag))
    if err then return nil, "Unavailable: ending node " .. node .. "'s backends: " .. tostring(err),
                       "io" end
    return ended
end
_M.node_tag = node_tag

-- LED-65: ends the other backends named for this store's node (another process of the same
-- node: a dead one's statements still running) and waits until none is left. -> the number
-- ended | nil, "Unavailable: ...", "io". Only hex and ':' in the names: no LIKE wildcard.
local function fence(self, timeout_ms)
    local db = self.drv.db
    local others = named(self.fence_tag, self.fence_me)
    local ended, err = terminate(db, others)
    -- (not allowed to signal them, or they ended meanwhile: wait for them to end anyway)
    local t_end = uv.now() + (timeout_ms or self.fence_timeout_ms)
    while true do
        local n = db:query("SELECT count(*) AS n " .. others)
        if n and tonumber(n[1].n or n[1][1]) == 0 then break end
        if uv.now() >= t_end then
            return nil, format("Unavailable: backends of node %s still running after %d ms%s",
                               self.node, timeout_ms or self.fence_timeout_ms,
                               err and " (ending them failed: " .. tostring(err) .. ")" or ""),
                   "io"
        end
        task.sleep(10)
    end
    self.fenced = (self.fenced or 0) + ended
    return ended
end

-- The options' checks (level: the caller's caller, open's). -> the schema name, durability
local function check_opts(o)
    check.options("postgres.open", o, OPTS, 3)
    local name = o.schema or _M.DEFAULT_SCHEMA
    if not pg.valid_ident(name) then
        error("postgres.open: schema must match [a-z_][a-z0-9_]* (at most 63 bytes)", 3)
    end
    local durability = o.durability or "ack"
    if durability ~= "ack" and durability ~= "statement" then
        error("postgres.open: durability is \"ack\" or \"statement\"", 3)
    end
    if o.node ~= nil and (type(o.node) ~= "string" or o.node == "") then
        error("postgres.open: node must be a non-empty string", 3)
    end
    local ft = o.fence_timeout_ms
    if ft ~= nil and (type(ft) ~= "number" or ft ~= ft or ft < 0 or ft > 3600000) then
        error("postgres.open: fence_timeout_ms must be a number in 0..3600000", 3)
    end
    if o.node ~= nil and o.db ~= nil then
        error("postgres.open: node (fencing) needs the store's own connections (conninfo)", 3)
    end
    if o.readonly and (o.db ~= nil or o.node ~= nil) then
        error("postgres.open: readonly opens its own one connection (conninfo, no node)", 3)
    end
    return name, durability
end

-- Each new connection's settings: JIT off; read-only (verify), or the durability and the
-- node's tag.
-- JIT off (issue 25): every statement of the store is bounded (a page, a list of at most
-- MAX_BATCH keys, each an index probe or a few), so compiling one never pays; and the
-- planner's estimate of a list read grows with the table, not with what it reads. A query
-- of get_postings_by_pairs is estimated at 1/(accounts x statuses) of the postings, a tenth
-- of that under its LIMIT (a column: 10%): with the wallet's 16 sources and one sink that
-- is 1,303 rows at 480,000 postings where the index holds 0 or 1. Its 32 queries crossed
-- jit_above_cost (100,000) with the postings' first ANALYZE, and every execution then
-- compiled for 10-60 ms to run 0.3 ms of index probes (the same Limit over the same index
-- scan as before: only "JIT:" was new); the wallet's transfers from 16 sources fell from
-- 3,300/s to ~1,000/s after 90 s of a soak (docs/WALLET.md §8).
local function on_connect_of(o, durability, me)
    local sets = { "SET jit = off" }
    if o.readonly then -- (LED-69: verify never writes)
        sets[2] = "SET default_transaction_read_only = on"
    else
        if durability == "ack" then sets[#sets + 1] = ASYNC_COMMIT end
        if me then sets[#sets + 1] = "SET application_name = '" .. me .. "'" end
    end
    return function(c)
        local ok, err, st, cls
        for _, q in ipairs(sets) do
            ok, err, st, cls = c:exec(q)
            if not ok then return ok, err, st, cls end
        end
        return ok, err, st, cls
    end
end

function _M.open(o)
    local name, durability = check_opts(o)
    local tag, me
    if o.node then
        tag = node_tag(name, o.node)
        local f = io.open("/dev/urandom", "rb")
        local r = f and f:read(8)
        if f then f:close() end
        me = tag .. hex16(r or codec.sha256(tostring({}) .. os.time()))
    end
    local db, own = o.db, false
    if db == nil then
        if type(o.conninfo) ~= "string" or o.conninfo == "" then
            error("postgres.open: conninfo (or db) is required", 2)
        end
        db = pg.pool { conninfo = o.conninfo, size = o.readonly and 1 or o.connections or 4,
                       query_timeout_ms = o.query_timeout_ms,
                       connect_timeout_ms = o.connect_timeout_ms,
                       on_connect = on_connect_of(o, durability, me) }
        own = true
    end
    local prefix = '"' .. name .. '".'
    local s = sql.new(setmetatable({ db = db }, Drv), "postgres", prefix)
    s.backend, s.schema, s.durability = "postgres", name, durability
    -- issue 25: a phase's statements as named prepared statements (false: behind a pooler
    -- that does not keep sessions, PgBouncer's transaction mode)
    s.prepare = o.prepare ~= false
    s.fence_node = fence_node
    if me then
        s.node, s.fence_tag, s.fence_me = o.node, tag, me
        s.fence_timeout_ms = o.fence_timeout_ms or 10000
        s.fence = fence
    end
    local ok, err, cls
    if o.readonly then
        s.readonly, s.snapshot = true, snapshot
        ok, err, cls = check_ledger(db, s, name)
    else
        ok, err, cls = migrate(db, prefix)
    end
    if not ok then
        if own then db:close() end
        return nil, err, cls
    end
    s.close = function(self)
        if own then self.drv.db:close() end
        return true
    end
    return s
end

return _M
