-- ron.ledger.store.sqlite: the Store (ron.ledger.store) on SQLite through the LuaJIT FFI
-- (libsqlite3.so.0, Debian libsqlite3-0; tools/deps.sh installs libsqlite3-dev).
--
--   local sqlite = require("ron.ledger.store.sqlite")
--   local s = sqlite.open { path = "ledger.db",            -- required
--                           durability = "ack",            -- "ack" (default) | "statement"
--                           busy_timeout_ms = 5000,
--                           offload = false,               -- true: primitives in the pool
--                           max_queue = 1024,              -- offloaded calls waiting, per store
--                           cache_mb = 64,                 -- SQLite's page cache (bounded)
--                           checkpoint_ms = 250,           -- offloaded: WAL checkpoints beside
--                                                          -- the writes (0: inside commits)
--                           reader = true }                -- offloaded: reads on a second
--                                                          -- connection (its own cache_mb)
--   s:create_book(...) ... s:close()
--
-- Durability (LED-23, LED-50): WAL journal mode. durability = "statement" runs synchronous =
-- FULL, which fsyncs the WAL at every commit: a primitive that returned is on disk.
-- "ack" (the default) runs synchronous = NORMAL (no fsync per commit; the WAL's frames are
-- appended in order and checksummed, so after a power loss the database is a prefix of the
-- commits) and flush() commits one meta row under FULL: one fsync that makes every earlier
-- commit durable; the caller flushes before it acknowledges. A crash of the process loses
-- nothing either way (the OS has the writes). The older option synchronous = "full" |
-- "normal" still means "statement" | "ack". Each primitive is one statement in its own
-- implicit transaction (store_transfer: two statements in one BEGIN IMMEDIATE transaction).
--
-- The page cache: cache_mb per connection (PRAGMA cache_size; SQLite's own default is 2 MB).
-- A transfer writes ~2.8 KB into six B-trees at positions its random ids choose; past a
-- few hundred MB of ledger each write read its pages back from the OS (a syscall each) and
-- a 16-source wallet fell from 287 to 91 transfers/s over 5 minutes (bench-wallet --soak).
--
-- Checkpoints (issue 25): SQLite copies the WAL into the database file inside the commit
-- that takes the WAL past 1000 pages. The offloaded store turns that off on its connection
-- and checkpoints from a second connection on a pool thread, beside its writes, at most
-- every checkpoint_ms (ron.ledger.store.sqlite_checkpoint has the why, the figures and the
-- bounds); checkpoint_ms = 0 keeps SQLite's automatic checkpoint. The synchronous driver
-- keeps it always.
--
-- Two drivers, the same SQL (ron.ledger.store.sql):
--   sync (default): each call runs on the caller's thread (busted, the CLI, benchmarks).
--   offload = true: inside `ron-accounting run`, each call runs in the libuv threadpool
--     (ron.ledger.store.sqlite_off) and the calling task waits; ONE call in flight per
--     store (its connection), the others queue FIFO up to max_queue, beyond that a call
--     fails at once with class "retry" (Busy). The pool VM attaches to the connection
--     opened here and keeps its own prepared statements per connection token; close()
--     finalizes every statement of the connection (sqlite3_next_stmt) before closing it.
--     With reader (the default), the calls that only read have a second connection, one
--     call in flight on it beside the writer's (sqlite_off's READ_CALLS).
-- This module opens (options, pragmas, migrations); a connection is
-- ron.ledger.store.sqlite_conn's.
--
-- Errors: nil, "Code: message", class; class "retry" for SQLITE_BUSY / SQLITE_LOCKED,
-- "io" for I/O, full disk, cannot open, corrupt, read-only, "bug" for the rest
-- (constraint, misuse, SQL errors).
local ffi = require("ffi")
local sql = require("ron.ledger.store.sql")
local schema = require("ron.ledger.store.schema")
local upgrade = require("ron.ledger.store.upgrade")
local heap = require("ron.base.heap")
local check = require("ron.base.check")
local sc = require("ron.ledger.store.sqlite_conn")
local off = require("ron.ledger.store.sqlite_off")

local type, error, tostring, format = type, error, tostring, string.format

local _M = {}

-- (the connection's and the offloaded driver's, here as before the split: specs, benches)
_M.lib, _M.classify = sc.lib, sc.classify
_M.pack, _M.unpack_, _M.in_flight = off.pack, off.unpack_, off.in_flight

-- ---------------------------------------------------------------------------------------
-- open: connection, pragmas, migrations

local SYNC = { full = "FULL", normal = "NORMAL" }
local OPTS = { path = true, synchronous = true, busy_timeout_ms = true, offload = true,
               max_queue = true, durability = true, readonly = true, cache_mb = true,
               checkpoint_ms = true, reader = true }
local DURABILITY = { ack = "normal", statement = "full" } -- -> the per-statement synchronous

-- durability (LED-50) from the options: "ack" (default) or "statement"; the older option
-- synchronous ("normal" | "full") names the same two, and both given must agree.
local function durability_of(o)
    local d = o.durability
    if d == nil then
        if o.synchronous == "full" then return "statement" end
        return "ack"
    end
    return d
end

local function check_opts(o)
    check.options("sqlite.open", o, OPTS, 3)
    if type(o.path) ~= "string" or o.path == "" then
        error("sqlite.open: path must be a non-empty string", 3)
    end
    if o.synchronous ~= nil and not SYNC[o.synchronous] then
        error("sqlite.open: synchronous is \"full\" or \"normal\"", 3)
    end
    if o.durability ~= nil and not DURABILITY[o.durability] then
        error("sqlite.open: durability is \"ack\" or \"statement\"", 3)
    end
    if o.durability ~= nil and o.synchronous ~= nil
       and DURABILITY[o.durability] ~= o.synchronous then
        error("sqlite.open: durability \"ack\" goes with synchronous \"normal\", "
              .. "\"statement\" with \"full\"", 3)
    end
    local bt = o.busy_timeout_ms
    if bt ~= nil and (type(bt) ~= "number" or bt < 0 or bt > 600000 or bt % 1 ~= 0) then
        error("sqlite.open: busy_timeout_ms must be an integer in 0..600000", 3)
    end
    local mq = o.max_queue
    if mq ~= nil and (type(mq) ~= "number" or mq < 1 or mq > 65536 or mq % 1 ~= 0) then
        error("sqlite.open: max_queue must be an integer in 1..65536", 3)
    end
    local cm = o.cache_mb
    if cm ~= nil and (type(cm) ~= "number" or cm < 1 or cm > 65536 or cm % 1 ~= 0) then
        error("sqlite.open: cache_mb must be an integer in 1..65536", 3)
    end
    local ck = o.checkpoint_ms
    if ck ~= nil and (type(ck) ~= "number" or ck < 0 or ck > 60000 or ck % 1 ~= 0) then
        error("sqlite.open: checkpoint_ms must be an integer in 0..60000", 3)
    end
    if o.reader ~= nil and type(o.reader) ~= "boolean" then
        error("sqlite.open: reader must be a boolean", 3)
    end
end

local function migrate(conn)
    local ok, err, cls = conn:exec(schema.META("sqlite", ""))
    if not ok then return nil, err, cls end
    local st = sql.new(conn, "sqlite", "")
    local v
    v, err, cls = st:get_meta("schema_version")
    if err then return nil, err, cls end
    ok, err = sql.check_version(v)
    if not ok then return nil, err, "bug" end
    local stmts = schema.ddl("sqlite", "")
    ok, err, cls = conn:atomic(function()
        for _, s in ipairs(stmts) do
            local ok2, e2, c2 = conn:exec(s)
            if not ok2 then return nil, e2, c2 end
        end
        -- the version again, inside the transaction: another process may have upgraded
        local now, e3, c3 = st:get_meta("schema_version")
        if e3 then return nil, e3, c3 end
        if upgrade.needed(now) then
            local n, e4, c4 = upgrade.run(st)
            if not n then return nil, e4, c4 end
        end
        if upgrade.older(now) then return upgrade.v4(st) end
        return st:put_meta("schema_version", tostring(schema.VERSION))
    end)
    if not ok then return nil, err, cls end
    return true
end

-- A file name as a URI path (RFC 3986 with SQLite's rules): '%', '?' and '#' escaped.
local function uri(path, query)
    return "file:" .. path:gsub("[%%?#]", function(c) return format("%%%02X", c:byte()) end)
           .. "?" .. query
end

-- A read-only store (verify, LED-69) opens only a ledger: its ledger_meta table and its
-- schema_version row, the version this code checks. Nothing is created or migrated.
local function check_ledger(conn, path)
    local rows, err = conn:read("SELECT name FROM sqlite_master WHERE type = 'table' "
                                .. "AND name = 'ledger_meta'", { n = 0 })
    if not rows then
        return nil, format("NotALedger: %s holds no ledger (not a SQLite database: %s)", path,
                           tostring(err)), "bug"
    end
    if #rows == 0 then
        return nil, format("NotALedger: %s holds no ledger (no ledger_meta table)", path), "bug"
    end
    local v, cls
    v, err, cls = sql.new(conn, "sqlite", ""):get_meta("schema_version")
    if err then return nil, err, cls end
    return upgrade.readable(v, path)
end

-- A connection of name (a path or a URI) opened with flags (sqlite_conn.open_db, with o's
-- busy timeout). -> conn, or nil, err, class
local function open_db(o, name, flags, what)
    return sc.open_db(o.path, name, flags, what, o.busy_timeout_ms)
end

-- Every connection's pragmas, then extra's: the page cache (cache_mb) and temporary files
-- in memory. A statement of a transaction that may fail half-way keeps the pages it changes
-- in a statement journal, which SQLite spills to a file in /var/tmp past 64 KiB; the
-- batch's finalize statements did, ~2.6 KB of file writes per transfer (issue 25,
-- docs/WALLET.md §8). Its size is the statement's own pages. -> true | nil, err, class
local function tune(conn, o, extra)
    local list = { format("PRAGMA cache_size = -%d", (o.cache_mb or 64) * 1024),
                   "PRAGMA temp_store = MEMORY", extra }
    for _, p in ipairs(list) do
        local ok, err, cls = conn:exec(p)
        if not ok then return nil, err, cls end
    end
    return true
end

local function open_conn(o)
    local conn, err, cls
    if o.readonly then
        conn, err, cls = open_db(o, uri(o.path, "mode=ro"), sc.OPEN_RO_URI, "")
    else
        conn, err, cls = open_db(o, o.path, sc.OPEN_RW_CREATE, "")
    end
    if not conn then return nil, err, cls end
    local ok
    if o.readonly then
        ok, err, cls = check_ledger(conn, o.path)
    else
        ok, err, cls = conn:exec("PRAGMA journal_mode = WAL")
        if ok then
            ok, err, cls = conn:exec("PRAGMA synchronous = " .. SYNC[DURABILITY[durability_of(o)]])
        end
        if ok then ok, err, cls = migrate(conn) end
    end
    -- (after the checks: on a file that is no database the pragma fails as an I/O error)
    if ok then ok, err, cls = tune(conn, o) end
    if not ok then
        conn:close()
        return nil, err, cls
    end
    return conn
end

-- fn() inside one read transaction: every read sees one state of the file (verify over a
-- ledger that a daemon keeps writing). -> fn's results (it raised: raised again).
local function snapshot(self, fn) return self.drv:read_phase(fn) end

-- The offloaded store's reader connection: its own page cache (cache_mb), refusing writes
-- (query_only). -> conn, or nil, err, class
local function open_reader(o)
    local conn, err, cls = open_db(o, o.path, sc.OPEN_RW, " (reader)")
    if not conn then return nil, err, cls end
    local ok
    ok, err, cls = tune(conn, o, "PRAGMA query_only = 1")
    if not ok then
        conn:close()
        return nil, err, cls
    end
    return conn
end

function _M.open(o)
    check_opts(o)
    if o.readonly and o.offload then error("sqlite.open: readonly is not offloaded", 2) end
    heap.keep() -- SQLite's temporary b-trees must not trim the heap per statement
    local conn, err, cls = open_conn(o)
    if not conn then return nil, err, cls end
    if o.offload then
        local rconn
        if o.reader ~= false then
            rconn, err, cls = open_reader(o)
            if not rconn then
                conn:close()
                return nil, err, cls
            end
        end
        return off.new(o, conn, rconn, durability_of(o))
    end
    local s = sql.new(conn, "sqlite", "")
    s.backend, s.path, s.durability = "sqlite", o.path, durability_of(o)
    s.readonly = o.readonly or nil
    s.close = function(self) return self.drv:close() end
    s.snapshot = snapshot
    return s
end

function _M.version() return ffi.string(sc.lib().sqlite3_libversion()) end

return _M
