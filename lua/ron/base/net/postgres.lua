-- ron.base.net.postgres: PostgreSQL for tasks (ron.base.task) on the host's
-- loop, on top of the C module ron.base.net.postgres_c (host/lua/pq.c: libpq's async API,
-- the socket polled by libuv, never a blocking call on the loop). Only inside `ron-accounting
-- run`.
--
--   local pg = require("ron.base.net.postgres")
--   local db = pg.new {                  -- no I/O yet: connects on first use
--       conninfo = "host=127.0.0.1 port=5432 dbname=x user=y",   -- or a postgresql:// URI
--       connect_timeout_ms = 5000,       -- seed 001 §5: I/O deadlines of 5 s
--       query_timeout_ms = 5000,         -- per query; 0 = none
--       backoff = policy,                -- reconnect spacing (the shape of
--                                        -- ron.base.backoff), default
--                                        -- backoff.exponential (50 ms .. 5 s, full jitter)
--       on_connect = fn(db) }            -- after each (re)connect, before anything else runs
--                                        -- on it (db:query works inside); a failure
--                                        -- (nil, err, ...) drops the connection
--   local db, err, sqlstate, class = pg.connect(conninfo_or_opts)   -- new + connect now
--   local rows, err, sqlstate, class = db:query(sql, params [, { timeout_ms = n }])
--   local rows, err, sqlstate, class = db:exec(sql [, opts])  -- several statements, no params
--   local res, err, sqlstate, class = db:pipeline(list [, opts]) -- libpq's pipeline mode: list
--                                    -- of { sql, params } and "sync" (each sync commits the
--                                    -- statements before it as one transaction), one round
--                                    -- trip; res[i]: rows | { error =, sqlstate = } |
--                                    -- { aborted = true } | { sync = true } (pq.c);
--                                    -- opts.prepare: entries { sql, params, prep = true }
--                                    -- as named prepared statements (pg_prepared)
--   db:connected()  -> true while the connection is up
--   db:close()
--   db.stats        -- { connects, connect_failures, queries, failures = { class = n } }
--
--   local pool = pg.pool { conninfo = ..., size = 4, ... }    -- size connections (1..64),
--   pool:query(...), pool:exec(...), pool:pipeline(...), pool:close()  -- as pg.new's
--   pool:stats()    -- the members' stats summed
--
-- Calls that wait (connect, query, exec, a pool's query) must come from a task; misuse
-- raises. params: see pq.c (nil -> NULL, strings, numbers, booleans, pq.bytea(s) for
-- binary bytea). rows: rows[i].column and rows[i][position], as strings (NULL: absent),
-- rows.n, rows.columns, rows.command, rows.affected.
--
-- Failures: nil, "Code: message", sqlstate, class with class (pq.c) one of "network"
-- (Code Network), "server" (Server; sqlstate = the server's SQLSTATE when it sent one),
-- "timeout" (Timeout), "closed" (Closed), "client" (Client), "canceled" (Canceled).
--
-- Reconnects: a connection found broken (server restart, network) is dropped; the next
-- call reconnects. Attempts are spaced by the backoff policy (attempt k waits
-- backoff:delay(k) after the k-th consecutive failure); a call made before the next
-- attempt is due fails at once with the last failure's class ("Network: reconnecting in
-- N ms: ..."), so a caller with its own retry loop (the export runtime) keeps control of
-- its op budget. A query is never re-sent by this module: the caller decides (the
-- PostgreSQL ledger's put is idempotent, so the runtime simply retries it).
--
-- Waiting: each call waits on a one-slot task channel that the C callback fills. After
-- task.shutdown() the wait keeps polling (one loop turn per try) until the callback came:
-- the answer in flight is never lost and the connection never left mid-operation; it
-- comes within the query (or connect) timeout. A task aborted while it waits (drain
-- deadline) leaves the callback to fill a channel nobody reads: harmless, the connection
-- is usable again afterwards.
local uv = require("luv")
local task = require("ron.base.task")
local backoff_mod = require("ron.base.backoff")
local check = require("ron.base.check")
local prepared = require("ron.base.net.pg_prepared")

local type, error, pairs, ipairs, tostring, select, setmetatable, pcall, unpack, format =
      type, error, pairs, ipairs, tostring, select, setmetatable, pcall, unpack, string.format
local insert, remove = table.insert, table.remove

local _M = {
    DEFAULTS = { connect_timeout_ms = 5000, query_timeout_ms = 5000 },
    MAX_POOL = 64,
}

local CODE = { network = "Network", server = "Server", timeout = "Timeout", closed = "Closed",
               client = "Client", canceled = "Canceled" }

local OPTS = { conninfo = true, connect_timeout_ms = true, query_timeout_ms = true,
               backoff = true, on_connect = true } -- pg.new's
local POOL_OPTS = { size = true } -- pg.pool's: OPTS and size
for k in pairs(OPTS) do POOL_OPTS[k] = true end

-- (a C module of the host, missing outside `ron-accounting run`: pq() says so)
local has_pq, pq_c = pcall(require, "ron.base.net.postgres_c")

local function pq()
    if not has_pq then
        error("ron.base.net.postgres: needs the ron-accounting host "
              .. "(ron.base.net.postgres_c is its C module): run the script with "
              .. "`ron-accounting run`", 3)
    end
    return pq_c
end

-- The C module (its connections, for a driver of its own: ron.ledger.store.postgres), and a
-- Lua string as a bytea parameter (the C module's text form of binary).
_M.pq = pq
function _M.bytea(s) return pq().bytea(s) end

local function check_ms(v, what)
    if v ~= nil and (type(v) ~= "number" or v ~= v or v < 0 or v > 86400000) then
        error(format("ron.base.net.postgres: %s must be a number in 0..86400000, got %s",
                     what, tostring(v)), 4)
    end
end

local function check_opts(opts, fname, known)
    check.options(fname, opts, known, 3)
    if type(opts.conninfo) ~= "string" or opts.conninfo == "" then
        error(fname .. ": conninfo must be a non-empty string", 3)
    end
    check_ms(opts.connect_timeout_ms, "connect_timeout_ms")
    check_ms(opts.query_timeout_ms, "query_timeout_ms")
    if opts.on_connect ~= nil and type(opts.on_connect) ~= "function" then
        error(fname .. ": on_connect must be a function", 3)
    end
    if opts.backoff ~= nil then backoff_mod.check(opts.backoff) end
end

local function fmt_err(err, class)
    local code = CODE[class] or "Client"
    err = tostring(err or "unknown error")
    if err:sub(1, #code + 1) == code .. ":" then return err end
    return code .. ": " .. err
end

-- Runs start(cb) and waits (in a task) for cb's values. start raising is misuse: raised.
local function await(start)
    local ch = task.channel(1, "pg_answer")
    start(function(...) ch:try_send({ n = select("#", ...), ... }) end)
    -- shut down: the operation in flight still answers within its timeout (header)
    local res, err = ch:recv_through_shutdown()
    if res then return unpack(res, 1, res.n) end
    return nil, "Canceled: " .. tostring(err), nil, "canceled"
end

-- ---------------------------------------------------------------------------------------
-- one managed connection

local DB = {}
DB.__index = DB

function _M.new(opts)
    check_opts(opts, "pg.new", OPTS)
    local self = setmetatable({
        conninfo = opts.conninfo,
        connect_timeout_ms = opts.connect_timeout_ms or _M.DEFAULTS.connect_timeout_ms,
        query_timeout_ms = opts.query_timeout_ms or _M.DEFAULTS.query_timeout_ms,
        backoff = opts.backoff or backoff_mod.exponential.new(),
        on_connect = opts.on_connect,
        raw = nil, failures = 0, retry_at = nil, last_err = nil, last_class = nil,
        busy = false, closed = false,
        stats = { connects = 0, connect_failures = 0, queries = 0, failures = {} },
    }, DB)
    return self
end

function _M.connect(opts)
    if type(opts) == "string" then opts = { conninfo = opts } end
    local db = _M.new(opts)
    local raw, err, st, cls = db:ensure()
    if not raw then return nil, fmt_err(err, cls), st, cls end
    return db
end

function DB:connected()
    local st = self.raw and self.raw:status()
    return st == "idle" or st == "busy"
end

local function count_failure(self, class)
    local f = self.stats.failures
    f[class or "client"] = (f[class or "client"] or 0) + 1
end

-- The raw connection, connected (and on_connect run), or nil, err, sqlstate, class.
function DB:ensure()
    if self.closed then return nil, "Closed: the connection was closed", nil, "closed" end
    local raw = self.raw
    if raw then
        if raw:status() == "idle" then return raw end
        raw:close() -- broken (or left busy by an aborted waiter): drop it
        self.raw = nil
    end
    local now = uv.now()
    if self.retry_at and now < self.retry_at then
        return nil, format("%s: reconnecting in %d ms: %s", CODE[self.last_class] or "Network",
                           self.retry_at - now, tostring(self.last_err)), nil,
               self.last_class or "network"
    end
    local obj -- the connection object, closed on failure (not left to the GC)
    local conn, err, st, cls = await(function(cb)
        obj = pq().connect(self.conninfo, cb, { timeout_ms = self.connect_timeout_ms })
    end)
    if not conn and obj then obj:close() end
    if conn and self.closed then -- db:close() while connecting
        conn:close()
        conn, err, st, cls = nil, "the connection was closed", nil, "closed"
    end
    if conn then
        self.raw = conn
        if self.on_connect then
            self.in_hook = true
            local ok, r1, e1, s1, c1 = pcall(self.on_connect, self)
            self.in_hook = false
            if not ok then
                conn:close()
                self.raw = nil
                error(r1, 0)
            end
            if not r1 then
                conn:close()
                self.raw = nil
                conn, err, st, cls = nil, e1, s1, c1 or "client"
            end
        end
    end
    if not conn then
        self.failures = self.failures + 1
        self.stats.connect_failures = self.stats.connect_failures + 1
        self.last_err, self.last_class = err, cls or "network"
        self.retry_at = uv.now() + self.backoff:delay(self.failures)
        count_failure(self, cls)
        return nil, fmt_err(err, cls), st, cls or "network"
    end
    self.failures, self.retry_at, self.last_err = 0, nil, nil
    self.backoff:reset()
    self.stats.connects = self.stats.connects + 1
    return conn
end

local function run(self, method, sql, params, opts, fname)
    if method == "pipeline" then
        if type(sql) ~= "table" then error(fname .. ": list must be a table", 3) end
    elseif type(sql) ~= "string" then
        error(fname .. ": sql must be a string", 3)
    end
    if opts ~= nil and type(opts) ~= "table" then error(fname .. ": opts must be a table", 3) end
    local timeout_ms = opts and opts.timeout_ms or self.query_timeout_ms
    check_ms(timeout_ms, "timeout_ms")
    -- One operation at a time per connection; inside on_connect the hook's own queries run
    -- on the connection being set up.
    if self.busy and not self.in_hook then
        error(fname .. ": another task is using this connection (use pg.pool)", 3)
    end
    local raw, err, st, cls
    if self.in_hook then
        raw = self.raw
    else
        self.busy = true
        local ok
        ok, raw, err, st, cls = pcall(self.ensure, self)
        if not ok then
            self.busy = false
            error(raw, 0)
        end
    end
    local rows
    if raw then
        self.stats.queries = self.stats.queries + 1
        local ok, e = pcall(function()
            rows, err, st, cls = await(function(cb)
                if method == "query" then
                    return raw:query(sql, params, cb, { timeout_ms = timeout_ms })
                elseif method == "pipeline" then
                    return raw:pipeline(sql, cb, { timeout_ms = timeout_ms })
                end
                return raw:exec(sql, cb, { timeout_ms = timeout_ms })
            end)
        end)
        if not ok then
            if not self.in_hook then self.busy = false end
            error(e, 0)
        end
        if not rows then count_failure(self, cls) end
        if raw:status() ~= "idle" and raw:status() ~= "busy" then
            raw:close()
            if self.raw == raw then self.raw = nil end
        end
    end
    if not self.in_hook then self.busy = false end
    if not rows then return nil, fmt_err(err, cls), st, cls end
    return rows
end

function DB:query(sql, params, opts) return run(self, "query", sql, params, opts, "db:query") end
function DB:exec(sql, opts) return run(self, "exec", sql, nil, opts, "db:exec") end
-- opts.prepare: entries { sql, params, prep = true } run as named prepared statements
-- (ron.base.net.pg_prepared), on a connection already up and idle (ensure() then hands it
-- over without a reconnect in between); else as they are.
function DB:pipeline(list, opts)
    local raw = self.raw
    if not (opts and opts.prepare and type(list) == "table" and raw and not self.busy
            and not self.closed and raw:status() == "idle") then
        return run(self, "pipeline", list, nil, opts, "db:pipeline")
    end
    local sent, map, fresh = prepared.rewrite(self, raw, list)
    local rows, err, st, cls = run(self, "pipeline", sent, nil, opts, "db:pipeline")
    if not rows then return rows, err, st, cls end
    return prepared.answer(self, raw, rows, map, fresh)
end

function DB:close()
    self.closed = true
    if self.raw then
        self.raw:close()
        self.raw = nil
    end
end

-- ---------------------------------------------------------------------------------------
-- a pool of connections (one operation per connection at a time)

local Pool = {}
Pool.__index = Pool

function _M.pool(opts)
    check_opts(opts, "pg.pool", POOL_OPTS)
    local size = opts.size or 1
    if type(size) ~= "number" or size ~= math.floor(size) or size < 1 or size > _M.MAX_POOL then
        error(format("pg.pool: size must be an integer in 1..%d", _M.MAX_POOL), 2)
    end
    local member_opts = {}
    for k, v in pairs(opts) do if k ~= "size" then member_opts[k] = v end end
    local self = setmetatable({ members = {}, size = size, closed = false }, Pool)
    -- The members share the backoff policy (delay(attempt) is a function of the attempt;
    -- each member counts its own attempts).
    for i = 1, size do self.members[i] = _M.new(member_opts) end
    return self
end

-- The free members, last released first (issue 25): a caller that runs one statement or
-- pipeline at a time gets the connection it just used, so one server backend does the
-- work, where handing them out in turn (a FIFO) woke each backend once per `size` calls:
-- on PostgreSQL 15 with 4 connections, one ledger commit cost the server 1.7-1.9x the CPU
-- of a pool of 1 (measured; docs/LEDGER.md "The pool hands out its last connection"). The
-- channel counts the free members (a token each; waiters queue on it, woken in order); the
-- members themselves wait on a stack. Made in the scheduler that runs the caller (a pool
-- outlives a spec's scheduler: the next one gets a channel of its own, every member free).
function Pool:free_ch()
    local sched = task.current()
    if self.free and self.sched == sched then return self.free end
    self.sched = sched
    self.free = sched.channel(self.size, "pg_pool")
    self.idle = {}
    for i = self.size, 1, -1 do
        self.idle[#self.idle + 1] = self.members[i]
        self.free:try_send(true)
    end
    return self.free
end

function Pool:acquire()
    if self.closed then return nil, "Closed: the pool was closed", nil, "closed" end
    local ch = self:free_ch()
    -- shut down: a member still comes back (its query ends within its timeout), unless the
    -- pool closes (close() closes the channel): a commit's next statement is not failed
    -- half-way by a stop (issue 27)
    local tok, err = ch:recv_through_shutdown()
    if self.closed and not tok then return nil, "Closed: the pool was closed", nil, "closed" end
    if not tok then return nil, "Canceled: " .. tostring(err), nil, "canceled" end
    return remove(self.idle)
end

-- (a waiter woken by the token runs later, by then the member is on the stack; a token
-- refused, a member of an earlier scheduler's channel, is not pushed: the channel of
-- this one already counts every member free). A member waiting to reconnect (its last
-- connect failed: a call fails at once until retry_at) goes to the bottom, as it went to
-- the back of the FIFO: the healthy members are tried first.
function Pool:release(m)
    if self.free and self.free:try_send(true) then
        local idle = self.idle
        if m.retry_at then insert(idle, 1, m) else idle[#idle + 1] = m end
    end
end

local function pool_run(self, method, ...)
    local m, err, st, cls = self:acquire()
    if not m then return nil, err, st, cls end
    local res = { pcall(m[method], m, ...) }
    self:release(m)
    if not res[1] then error(res[2], 0) end
    return unpack(res, 2, table.maxn(res))
end

function Pool:query(sql, params, opts) return pool_run(self, "query", sql, params, opts) end
function Pool:exec(sql, opts) return pool_run(self, "exec", sql, opts) end
function Pool:pipeline(list, opts) return pool_run(self, "pipeline", list, opts) end

function Pool:close()
    self.closed = true
    if self.free then self.free:close() end -- (wakes acquire's waiters: "Closed")
    for _, m in ipairs(self.members) do m:close() end
end

function Pool:stats()
    local s = { connects = 0, connect_failures = 0, queries = 0, failures = {} }
    for _, m in ipairs(self.members) do
        s.connects = s.connects + m.stats.connects
        s.connect_failures = s.connect_failures + m.stats.connect_failures
        s.queries = s.queries + m.stats.queries
        for k, v in pairs(m.stats.failures) do s.failures[k] = (s.failures[k] or 0) + v end
    end
    return s
end

-- Helpers for callers: bytea text output ("\x0a1b...") to bytes, and SQL identifiers.
function _M.unhex(s)
    if type(s) ~= "string" then return nil end
    local hex = s:match("^\\x(%x*)$")
    if not hex or #hex % 2 == 1 then return nil end
    return (hex:gsub("%x%x", function(h) return string.char(tonumber(h, 16)) end))
end

function _M.valid_ident(s)
    return type(s) == "string" and #s >= 1 and #s <= 63 and s:match("^[a-z_][a-z0-9_]*$") ~= nil
end

return _M
