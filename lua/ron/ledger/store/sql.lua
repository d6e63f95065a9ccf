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
--
-- This module is the facade: the Store class, its constructor and the names every backend
-- offers (METHODS); the primitives live by concern in sql_rows (single-row), sql_batch
-- (LED-51), sql_lease (LED-71), their statement texts in sql_text and what they share in
-- sql_base; each concern module exports a methods table this module installs on the class.
local schema = require("ron.ledger.store.schema")
local phases = require("ron.ledger.store.phase")
local prof = require("ron.ledger.store.sqlite_profile")
local scan = require("ron.ledger.store.scan")
local base = require("ron.ledger.store.sql_base")
local sql_text = require("ron.ledger.store.sql_text")
local rows = require("ron.ledger.store.sql_rows")
local batch = require("ron.ledger.store.sql_batch")
local lease = require("ron.ledger.store.sql_lease")

local type, tostring, tonumber, ipairs, pairs, setmetatable, format =
      type, tostring, tonumber, ipairs, pairs, setmetatable, string.format
local misuse = base.misuse

local _M = {}

_M.MAX_BATCH = base.MAX_BATCH
_M.MAX_POSTINGS = base.MAX_POSTINGS
_M.SHARDS = base.SHARDS
_M.PSTATUS = base.PSTATUS
_M.PSTATUS_NAME = base.PSTATUS_NAME
_M.amount = base.amount
_M.shard = base.shard
_M.render = base.render
_M.BUILD, _M.NOW_MS, _M.PG_ARRAY = sql_text.BUILD, sql_text.NOW_MS, sql_text.PG_ARRAY
_M.MAX_PAIR_QUERIES, _M.MAX_TRANSFER_PARAMS = batch.MAX_PAIR_QUERIES, batch.MAX_TRANSFER_PARAMS
_M.stream_key = batch.stream_key

-- ---------------------------------------------------------------------------------------
-- the Store methods (self.drv, self.dialect, self.prefix, self.sql_cache)

local Store = {}
Store.__index = Store
_M.Store = Store

function _M.new(drv, dialect, prefix)
    return setmetatable({ drv = drv, dialect = dialect, prefix = prefix or "", sql_cache = {} },
                        Store)
end

for _, m in ipairs({ rows, batch, lease }) do
    for name, f in pairs(m.methods) do Store[name] = f end
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

local function flush_text(self)
    local text = self.flush_sql
    if not text then
        text = schema.expand(_M.FLUSH[self.dialect], self.prefix)
        self.flush_sql = text
    end
    return text
end

function Store:flush()
    if self.durability ~= "ack" then return 0 end
    local n, err, class = self.drv:flush(flush_text(self))
    if not n then return nil, err, class end
    return 1
end

-- verify's reads (ron.ledger.store.scan): every row of a table as stored, a page at a time
function Store:scan(tbl, after, limit) return scan.sql(self, tbl, after, limit, _M) end

local pack = phases.pack

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
local function apply(self, ops, opts)
    local run = function() return phases.run(self, ops) end
    if opts and opts.flush and self.durability == "ack" and self.drv.flushed_phase then
        -- SQLite: the phase's own commit is the sync (one transaction, not two)
        return self.drv:flushed_phase(run, flush_text(self))
    end
    if self.drv.read_phase and phases.reads_only(ops, opts) then
        return self.drv:read_phase(run)
    end
    local res, err, class = self.drv:phase(run)
    if res and res.ok and opts and opts.flush then
        res.flushed = self:flush() ~= nil
    end
    return res, err, class
end

function Store:apply(ops, opts)
    phases.check(ops, opts)
    if self.drv.apply_phase then return self.drv.apply_phase(self, ops, opts) end
    -- (SQLite with RON_SQLITE_PROFILE: the phase timed from inside its thread)
    if prof.on and prof.begin(#ops) then
        local w0, c0 = prof.now()
        local r = { pcall(apply, self, ops, opts) }
        prof.add("phase", w0, c0)
        prof.finish() -- (raised or not: the statements after it are not the phase's)
        if not r[1] then error(r[2], 0) end
        return unpack(r, 2, 4)
    end
    return apply(self, ops, opts)
end

-- The names every backend offers (the offloaded driver proxies exactly these).
_M.METHODS = {
    "create_book", "get_book", "list_books",
    "create_account", "append_account_version", "get_account", "get_accounts",
    "get_account_history", "list_accounts",
    "insert_postings", "reserve_postings", "release_postings", "deactivate_postings",
    "get_postings", "get_postings_by_account",
    "get_balances", "get_balance", "count_accounts_at", "count_balances_at_least",
    "count_balances_at_most",
    "ensure_head", "acquire_head", "release_head", "get_heads",
    "store_transfer", "get_transfer", "get_transfers_for_account", "list_transfers",
    "put_intent", "get_intent",
    "save_saga", "list_pending_sagas", "list_finalizing_sagas", "delete_saga",
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
