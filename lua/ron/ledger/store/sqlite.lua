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
--     (uv.new_work, like ron.accounting.runtime.offload) and the calling task waits; ONE call
--     in flight per store (its connection), the others queue FIFO up to max_queue, beyond
--     that a call fails at once with class "retry" (Busy). Arguments and results cross to the
--     pool's Lua VM serialized (plain values: strings, numbers, booleans, int64_t, tables).
--     The pool VM attaches to the connection opened here (the sqlite3 * as a number) and
--     keeps its own prepared statements per connection token; close() finalizes every
--     statement of the connection (sqlite3_next_stmt) before closing it. With reader (the
--     default), the calls that only read have a second connection, one call in flight on
--     it beside the writer's (READ_CALLS below).
--
-- Errors: nil, "Code: message", class; class "retry" for SQLITE_BUSY / SQLITE_LOCKED,
-- "io" for I/O, full disk, cannot open, corrupt, read-only, "bug" for the rest
-- (constraint, misuse, SQL errors).
local ffi = require("ffi")
local sql = require("ron.ledger.store.sql")
local phase = require("ron.ledger.store.phase")
local schema = require("ron.ledger.store.schema")
local upgrade = require("ron.ledger.store.upgrade")
local heap = require("ron.base.heap")
local check = require("ron.base.check")
local prof = require("ron.ledger.store.sqlite_profile")

local type, error, tostring, tonumber, setmetatable, pcall, format, bit_band =
      type, error, tostring, tonumber, setmetatable, pcall, string.format, require("bit").band

local _M = {}

if not pcall(ffi.typeof, "sqlite3") then
    ffi.cdef [[
typedef struct sqlite3 sqlite3;
typedef struct sqlite3_stmt sqlite3_stmt;
int sqlite3_open_v2(const char *filename, sqlite3 **ppDb, int flags, const char *zVfs);
int sqlite3_close_v2(sqlite3 *);
int sqlite3_exec(sqlite3 *, const char *sql, void *cb, void *arg, char **errmsg);
int sqlite3_prepare_v2(sqlite3 *db, const char *zSql, int nByte, sqlite3_stmt **ppStmt,
                       const char **pzTail);
int sqlite3_step(sqlite3_stmt *);
int sqlite3_reset(sqlite3_stmt *);
int sqlite3_clear_bindings(sqlite3_stmt *);
int sqlite3_finalize(sqlite3_stmt *);
sqlite3_stmt *sqlite3_next_stmt(sqlite3 *pDb, sqlite3_stmt *pStmt);
int sqlite3_bind_blob(sqlite3_stmt *, int, const void *, int n, void *destructor);
int sqlite3_bind_int64(sqlite3_stmt *, int, int64_t);
int sqlite3_bind_null(sqlite3_stmt *, int);
int sqlite3_bind_parameter_count(sqlite3_stmt *);
int sqlite3_column_count(sqlite3_stmt *);
int sqlite3_column_type(sqlite3_stmt *, int iCol);
int64_t sqlite3_column_int64(sqlite3_stmt *, int iCol);
const void *sqlite3_column_blob(sqlite3_stmt *, int iCol);
int sqlite3_column_bytes(sqlite3_stmt *, int iCol);
int sqlite3_changes(sqlite3 *);
const char *sqlite3_errmsg(sqlite3 *);
const char *sqlite3_errstr(int);
int sqlite3_extended_result_codes(sqlite3 *, int onoff);
int sqlite3_busy_timeout(sqlite3 *, int ms);
int sqlite3_get_autocommit(sqlite3 *);
const char *sqlite3_libversion(void);
int sqlite3_threadsafe(void);
]]
end
-- (after the declarations above: it declares its functions over their sqlite3 type)
local ckpt = require("ron.ledger.store.sqlite_checkpoint")

local lib
local function L()
    if not lib then
        local ok, l = pcall(ffi.load, "sqlite3")
        if not ok then ok, l = pcall(ffi.load, "libsqlite3.so.0") end
        if not ok then
            error("ron.ledger.store.sqlite: libsqlite3 not found (Debian: libsqlite3-0; "
                  .. "tools/deps.sh)", 3)
        end
        lib = l
    end
    return lib
end
_M.lib = L

local OK, ROW, DONE = 0, 100, 101
local RETRY = { [5] = true, [6] = true }                      -- BUSY, LOCKED
local IO = { [10] = true, [13] = true, [14] = true, [11] = true, [8] = true, [26] = true,
             [15] = true, [7] = true }                         -- IOERR FULL CANTOPEN CORRUPT
                                                               -- READONLY NOTADB PROTOCOL NOMEM
local T_INT, T_FLOAT, T_NULL = 1, 2, 5
local OPEN_RW_CREATE_FULLMUTEX = 0x00000002 + 0x00000004 + 0x00010000
local OPEN_RO_URI_FULLMUTEX = 0x00000001 + 0x00000040 + 0x00010000
local OPEN_RW_FULLMUTEX = 0x00000002 + 0x00010000

local function classify(rc)
    local p = bit_band(rc, 0xff)
    if RETRY[p] then return "retry" end
    if IO[p] then return "io" end
    return "bug"
end
_M.classify = classify

-- ---------------------------------------------------------------------------------------
-- a connection (usable in any Lua VM of the process: the pool's attach to the same one)

local Conn = {}
Conn.__index = Conn

local function fail(self, rc, what)
    local msg = ffi.string(L().sqlite3_errmsg(self.db))
    local cls = classify(rc)
    local code = cls == "retry" and "Busy" or cls == "io" and "IoError" or "StoreError"
    return nil, format("%s: SQLite %s: %s (%d)", code, what, msg, rc), cls
end

local pp_stmt = ffi.new("sqlite3_stmt *[1]")
local pp_db = ffi.new("sqlite3 *[1]")

-- I-7: the statements a connection keeps prepared, bounded. A list primitive's text names
-- its list's length (a VALUES row per entry), so each length is a statement of its own,
-- and its compiled program grows with its bound parameters: ~111 bytes each, measured
-- (advance_streams prepared at every length 1..1024 held 351 MB on one connection). A
-- batch path whose lengths vary (a rater's put_many, a wallet's groups) met every length in
-- time: the cache grew without a bound. It keeps at most STMT_BUDGET bound parameters (and
-- STMT_BASE per statement) per connection in each VM that uses it (the loop's, each pool
-- thread's); past it, the least recently used quarter is finalized (conn.shed counts them)
-- and a length met again is prepared again (~1.3 us a parameter).
_M.STMT_BUDGET = 131072 -- ~15 MB of compiled statements
_M.STMT_BASE = 32

local function shed(self, need)
    local list = {}
    for text, e in pairs(self.stmts) do list[#list + 1] = { text = text, e = e } end
    table.sort(list, function(a, b) return a.e.used < b.e.used end)
    local C, goal = L(), (_M.STMT_BUDGET * 3) / 4 - need
    for _, x in ipairs(list) do
        if self.stmt_cost <= goal then break end
        C.sqlite3_finalize(x.e.st)
        self.stmts[x.text] = nil
        self.stmt_cost = self.stmt_cost - x.e.cost
        self.shed = self.shed + 1
    end
end

function Conn:prepare(text)
    local tick = self.tick + 1
    self.tick = tick
    local e = self.stmts[text]
    if e then
        e.used = tick
        return e.st
    end
    local C = L()
    local rc = C.sqlite3_prepare_v2(self.db, text, #text, pp_stmt, nil)
    if rc ~= OK then return fail(self, rc, "prepare") end
    local st = pp_stmt[0]
    local cost = _M.STMT_BASE + C.sqlite3_bind_parameter_count(st)
    if self.stmt_cost + cost > _M.STMT_BUDGET then shed(self, cost) end
    self.stmts[text] = { st = st, cost = cost, used = tick }
    self.stmt_cost = self.stmt_cost + cost
    return st
end

local function bind(st, binds)
    local C = L()
    for i = 1, binds.n or #binds do
        local v = binds[i]
        local rc
        if v == nil then
            rc = C.sqlite3_bind_null(st, i)
        elseif type(v) == "string" then
            rc = C.sqlite3_bind_blob(st, i, v, #v, nil) -- static: v outlives the step
        elseif type(v) == "boolean" then
            rc = C.sqlite3_bind_int64(st, i, v and 1 or 0)
        else
            rc = C.sqlite3_bind_int64(st, i, v)
        end
        if rc ~= OK then return rc end
    end
    return OK
end

local function column(C, st, j)
    local t = C.sqlite3_column_type(st, j)
    if t == T_NULL then return nil end
    if t == T_INT or t == T_FLOAT then return sql.amount(C.sqlite3_column_int64(st, j)) end
    local n = C.sqlite3_column_bytes(st, j)
    if n == 0 then return "" end
    return ffi.string(C.sqlite3_column_blob(st, j), n)
end

-- Runs text with binds; rows when want_rows, else the changes count.
function Conn:run(text, binds, want_rows)
    if not self.db then return nil, "Closed: the store was closed", "bug" end
    local st, err, cls = self:prepare(text)
    if not st then return nil, err, cls end
    local C = L()
    local key, w0, c0
    if prof.scope then
        key = prof.sql_key(text)
        w0, c0 = prof.now()
    end
    local rc = bind(st, binds)
    if key then w0, c0 = prof.add(key.bind, w0, c0) end
    if rc ~= OK then
        C.sqlite3_reset(st)
        C.sqlite3_clear_bindings(st)
        return fail(self, rc, "bind")
    end
    local rows
    if want_rows then rows = {} end
    while true do
        rc = C.sqlite3_step(st)
        if rc == ROW then
            if rows then
                local ncol, r = C.sqlite3_column_count(st), {}
                for j = 0, ncol - 1 do r[j + 1] = column(C, st, j) end
                rows[#rows + 1] = r
            end
        else
            break
        end
    end
    if key then prof.add(key.step, w0, c0) end
    local out
    if rc == DONE then
        out = rows or C.sqlite3_changes(self.db)
    else
        -- the step's error: reset returns the same code; errmsg is set
        local _, e, c = fail(self, rc, "step")
        C.sqlite3_reset(st)
        C.sqlite3_clear_bindings(st)
        return nil, e, c
    end
    C.sqlite3_reset(st)
    C.sqlite3_clear_bindings(st)
    return out
end

-- Compiled in the pool VMs too, where the store's modules are interpreted (ron.base.nojit,
-- WORK below): a statement's binds and its rows' columns are one FFI call each, ~0.2 us
-- from the interpreter, and a wallet group binds ~3,000 (0.7 ms of its phase: 0.1 ms
-- compiled, issue 25, bench-wallet --pool-profile). bind, run and column are a few loops:
-- their traces are made once per VM, not per call.
if jit then
    jit.on(bind)
    jit.on(Conn.run)
    jit.on(column)
end

function Conn:write(text, binds) return self:run(text, binds, false) end
function Conn:read(text, binds) return self:run(text, binds, true) end

function Conn:exec(text)
    if not self.db then return nil, "Closed: the store was closed", "bug" end
    local w0, c0
    if prof.scope then w0, c0 = prof.now() end
    local rc = L().sqlite3_exec(self.db, text, nil, nil, nil)
    if w0 then prof.add(prof.exec_key(text), w0, c0) end
    if rc ~= OK then return fail(self, rc, "exec") end
    return true
end

-- fn's results inside one BEGIN IMMEDIATE transaction (rolled back when fn fails; keep(r)
-- false: rolled back too, r returned: a phase whose guard missed). Inside a transaction
-- already (a primitive of a phase, LED-67): a savepoint, so a primitive's own two
-- statements (store_transfer, append_events) stay all or nothing within the phase.
function Conn:atomic(fn, keep)
    local nested = self.depth > 0
    local ok, err, cls = self:exec(nested and "SAVEPOINT rl" or "BEGIN IMMEDIATE")
    if not ok then return nil, err, cls end
    self.depth = self.depth + 1
    local r = { pcall(fn) }
    self.depth = self.depth - 1
    if not r[1] or r[2] == nil or (keep and not keep(r[2])) then
        self:exec(nested and "ROLLBACK TO rl; RELEASE rl" or "ROLLBACK")
        if not r[1] then error(r[2], 0) end
        if r[2] ~= nil then return r[2] end
        return nil, r[3], r[4]
    end
    ok, err, cls = self:exec(nested and "RELEASE rl" or "COMMIT")
    if not ok then
        self:exec(nested and "ROLLBACK TO rl; RELEASE rl" or "ROLLBACK")
        return nil, err, cls
    end
    return unpack(r, 2, table.maxn(r))
end

-- A phase (LED-67): the ops in ONE BEGIN IMMEDIATE transaction (SQLite's one writer: no
-- other connection writes meanwhile, and a reader on another connection sees the state
-- before or after it, never between); a missed guard or a failure rolls all of it back.
local function phase_ok(res) return res.ok end
function Conn:phase(fn) return self:atomic(fn, phase_ok) end

-- fn's results inside one deferred read transaction: one snapshot for every read, no write
-- lock (the offloaded store's reader refuses writes). A phase that only reads
-- (ron.ledger.store.phase reads_only), and the synchronous store's snapshot (verify over a
-- ledger that a daemon keeps writing). fn raised: raised again.
function Conn:read_phase(fn)
    local ok, err, cls = self:exec("BEGIN")
    if not ok then return nil, err, cls end
    self.depth = self.depth + 1
    local r = { pcall(fn) }
    self.depth = self.depth - 1
    self:exec("ROLLBACK") -- (ends the read transaction: nothing was written)
    if not r[1] then error(r[2], 0) end
    return unpack(r, 2, table.maxn(r))
end

-- A phase made durable by its own commit (LED-50 with durability "ack", opts.flush): the
-- phase's transaction runs under synchronous = FULL, so its COMMIT fsyncs the WAL and every
-- earlier frame with it, and text (sql.FLUSH.sqlite, the flush row) is its last write, so
-- the commit has a frame to sync whatever the ops changed: one transaction and one sync
-- instead of the phase's commit and then a flush's (issue 25). res.flushed: committed so.
function Conn:flushed_phase(fn, text)
    local ok, err, cls = self:exec("PRAGMA synchronous = FULL")
    if not ok then return nil, err, cls end
    local r = { pcall(self.atomic, self, function()
        local res, e, c = fn()
        if not (res and res.ok) then return res, e, c end
        local n, e2, c2 = self:write(text, { n = 0 })
        if not n then return nil, e2, c2 end
        res.flushed = true
        return res
    end, phase_ok) }
    -- (a failure to go back leaves FULL: slower, never less durable)
    self:exec("PRAGMA synchronous = NORMAL")
    if not r[1] then error(r[2], 0) end
    return r[2], r[3], r[4]
end

-- LED-50: text (sql.FLUSH.sqlite) committed under synchronous = FULL: its commit fsyncs the
-- WAL file, every earlier frame with it; then back to NORMAL. A PRAGMA failure after the
-- write still leaves the flush done (the write's own commit synced).
function Conn:flush(text)
    local ok, err, cls = self:exec("PRAGMA synchronous = FULL")
    if not ok then return nil, err, cls end
    local n, e2, c2 = self:write(text, { n = 0 })
    local ok2, e3, c3 = self:exec("PRAGMA synchronous = NORMAL")
    if not n then return nil, e2, c2 end
    if not ok2 then return nil, e3, c3 end
    return n
end

function Conn:close()
    if not self.db then return true end
    local C = L()
    -- every statement of this connection, whichever VM prepared it
    local st = C.sqlite3_next_stmt(self.db, nil)
    while st ~= nil do
        C.sqlite3_finalize(st)
        st = C.sqlite3_next_stmt(self.db, nil)
    end
    self.stmts, self.stmt_cost = {}, 0
    C.sqlite3_close_v2(self.db)
    self.db = nil
    return true
end

local function new_conn(db)
    return setmetatable({ db = db, stmts = {}, depth = 0, stmt_cost = 0, tick = 0, shed = 0 },
                        Conn)
end

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

-- A connection of name (a path or a URI) opened with flags, extended result codes and the
-- busy timeout on. -> conn, or nil, err, class (what: the error's name for it)
local function open_db(o, name, flags, what)
    local C = L()
    local rc = C.sqlite3_open_v2(name, pp_db, flags, nil)
    local db = pp_db[0]
    if rc ~= OK then
        local msg = db ~= nil and ffi.string(C.sqlite3_errmsg(db))
                    or ffi.string(C.sqlite3_errstr(rc))
        if db ~= nil then C.sqlite3_close_v2(db) end
        return nil, format("IoError: SQLite open %s%s: %s", o.path, what, msg), "io"
    end
    C.sqlite3_extended_result_codes(db, 1)
    C.sqlite3_busy_timeout(db, o.busy_timeout_ms or 5000)
    return new_conn(db)
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
        conn, err, cls = open_db(o, uri(o.path, "mode=ro"), OPEN_RO_URI_FULLMUTEX, "")
    else
        conn, err, cls = open_db(o, o.path, OPEN_RW_CREATE_FULLMUTEX, "")
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

-- ---------------------------------------------------------------------------------------
-- the offloaded driver

-- A serializer for the plain values that cross between VMs (Lua source, loaded back).
local function ser(v, out)
    local t = type(v)
    if t == "string" then
        out[#out + 1] = format("%q", v)
    elseif t == "number" then
        if v % 1 == 0 and v >= -2 ^ 53 and v <= 2 ^ 53 then
            out[#out + 1] = format("%d", v)
        else
            out[#out + 1] = format("%.17g", v)
        end
    elseif t == "boolean" or t == "nil" then
        out[#out + 1] = tostring(v)
    elseif t == "cdata" then
        out[#out + 1] = tostring(ffi.cast("int64_t", v)) -- "123LL": an int64_t literal
    elseif t == "table" then
        out[#out + 1] = "{"
        local n = v.n or #v
        for i = 1, n do
            ser(v[i], out)
            out[#out + 1] = ","
        end
        for k, x in pairs(v) do
            if not (type(k) == "number" and k >= 1 and k <= n and k % 1 == 0) then
                out[#out + 1] = "["
                ser(k, out)
                out[#out + 1] = "]="
                ser(x, out)
                out[#out + 1] = ","
            end
        end
        out[#out + 1] = "}"
    else
        error("ron.ledger.store.sqlite: cannot pass a " .. t .. " to the pool", 0)
    end
end

-- LuaJIT's string.buffer serializer (2.1 since 2021) when there is one: the same plain
-- values in C, against ser's Lua source that the other side compiled back with loadstring
-- (~600 us of CPU per commit, both ways: issue 25's profile). Its int64_t stays int64_t;
-- ser is the fallback of an older LuaJIT, and names the value neither can pass.
local has_buf, sbuf = pcall(require, "string.buffer")
local BUF = has_buf and "\0rl1" or nil -- a prefix no "return ..." source starts with
-- One encode and one decode buffer per VM (the loop's, each pool thread's): the bytes are
-- written after the prefix and read past it in place, no copy of either side.
local enc, dec = has_buf and sbuf.new(), has_buf and sbuf.new()

function _M.pack(...)
    local t = phase.pack(...)
    if BUF then
        local ok = pcall(enc.encode, enc:reset():put(BUF), t)
        if ok then return enc:tostring() end
    end
    local out = { "return " }
    ser(t, out)
    return table.concat(out)
end

function _M.unpack_(s)
    local t
    if BUF and s:byte(1) == 0 then
        t = dec:set(s):skip(#BUF):decode()
    else
        t = assert(loadstring(s, "=store-args"))()
    end
    return unpack(t, 1, t.n)
end

-- In a pool VM: the attached connections by token, and the store objects over them. A
-- closed store's entry stays (the loop thread cannot reach this VM to drop it) and is never
-- met again, since no token is issued twice (open below); I-7: at ATTACHED_MAX entries the
-- map starts anew, a live store's next call here attaching again (its statements prepared
-- again, the earlier ones finalized by its close).
local ATTACHED_MAX = 64
local attached, n_attached = {}, 0

-- The pool's entry point (run by the work function, under pcall): one primitive.
function _M.pool_call(dbnum, token, method, packed, durability)
    if method == ckpt.METHOD then return _M.pack(ckpt.run(L(), dbnum)) end
    local s = attached[token]
    if not s then
        if n_attached >= ATTACHED_MAX then attached, n_attached = {}, 0 end
        local conn = new_conn(ffi.cast("sqlite3 *", dbnum))
        s = sql.new(conn, "sqlite", "")
        s.durability = durability
        attached[token], n_attached = s, n_attached + 1
    end
    -- (RON_SQLITE_PROFILE: a counted phase's decode and encode timed too)
    if prof.on then
        return prof.call(s, method, packed, _M.unpack_, _M.pack, phase.pack, _M.call_kind)
    end
    return _M.pack(s[method](s, _M.unpack_(packed)))
end

-- The pool's work function (no upvalues: luv ships it to each pool thread's VM as bytecode).
-- Its first call in a VM loads this module there with the store's modules interpreted
-- (ron.base.nojit): each pool VM compiled its own traces of them, most aborted (closures
-- made per call, returns to the C caller), and every compile cost two mprotect calls, each
-- a TLB shootdown across the process's threads: ~21 % of the pool threads' samples in a
-- 16-source wallet run, ~23 % less pool CPU per transfer without (docs/WALLET.md §8). The
-- loop's VM and the pool's other bodies keep their JIT, and so do the statement loop's
-- bind, Conn:run and column here (their FFI calls, above) and the modules of the per-row
-- code (the third list below: argument checks and bind lists, loops over a group's rows;
-- compiled, a wallet group's phase took 7.1-8.7 ms against 8.3-9.1 and the pool threads
-- 132-161 us of CPU a transfer against 153-170, three pairs, issue 25).
local function WORK(path, dbnum, token, method, packed, id, durability)
    local m = _G.package.loaded["ron.ledger.store.sqlite"]
    if not m then
        _G.package.path = path
        local ok, r = _G.pcall(_G.require, "ron.base.nojit")
        if ok then
            ok, r = _G.pcall(r.require, "ron.ledger.store.sqlite", { "ron.ledger.store." },
                             { "ron.ledger.store.sql_base", "ron.ledger.store.sql_rows",
                               "ron.ledger.store.sql_batch", "ron.ledger.store.sql_claims" })
        end
        if not ok then return id, nil, _G.tostring(r) end
        m = r
    end
    local ok2, r = _G.pcall(m.pool_call, dbnum, token, method, packed, durability)
    if not ok2 then return id, nil, _G.tostring(r) end
    return id, r
end

local work_handle
-- (the checkpoints' apart: in_flight() counts the calls a caller waits for)
local inflight, ck_inflight, next_id = {}, {}, 0

local function after(id, packed, err)
    local req = inflight[id]
    if req then
        inflight[id] = nil
        if not req.ch:is_closed() then req.ch:try_send({ packed, err }) end
        return
    end
    local cb = ck_inflight[id]
    ck_inflight[id] = nil
    if not cb then return end
    if packed then return cb(_M.unpack_(packed)) end
    return cb(nil, err)
end

-- One call on the pool: entry kept in `into` (inflight or ck_inflight) under a fresh id
-- until `after` takes it. -> ok, error of the queue. (luv required here, on the loop: see
-- Off:call)
local function submit(into, entry, dbnum, token, method, packed, durability)
    if not work_handle then work_handle = require("luv").new_work(WORK, after) end
    next_id = next_id + 1
    into[next_id] = entry
    local ok, qerr = work_handle:queue(package.path, dbnum, token, method, packed, next_id,
                                       durability)
    if not ok then into[next_id] = nil end
    return ok, qerr
end

function _M.in_flight()
    local n = 0
    for _ in pairs(inflight) do n = n + 1 end
    return n
end

-- Tokens, counted in this VM's registry: a module loaded anew (busted loads a spec file's
-- modules anew per file) must not count from 1 again, or a store opened at a closed one's
-- address in the same second met, in a pool VM, the closed one's finalized statements
-- (SIGSEGV in a pool thread, wrong rows). The registry's address tells this VM from another
-- live one.
local REG = debug.getregistry()
local function next_token(dbnum)
    REG.ron_sqlite_tokens = (REG.ron_sqlite_tokens or 0) + 1
    return format("%s:%d:%x", tostring(REG):match("0x%x+") or "vm", REG.ron_sqlite_tokens, dbnum)
end

local Off = {}
-- (made apart from __index, which runs on every call of a primitive on the loop: a closure
-- made in it, even on a branch not taken, aborted every trace through it, issue 25)
local function proxy_of(k)
    return function(s, ...) return s:call(k, ...) end
end
Off.__index = function(_, k)
    local v = Off[k]
    if v ~= nil then return v end
    v = proxy_of(k)
    Off[k] = v
    return v
end

-- No snapshot: each call runs on a pool thread, so no read transaction spans two of them
-- (verify over an offloaded store reads call by call; the CLI opens it read-only instead).
Off.snapshot = false

-- The reader connection (issue 25): the calls that only read run on a second connection of
-- the file, beside the writer's. Under WAL a read transaction sees every commit made
-- before it began, so a read that follows a write the caller saw return sees that write,
-- as on the one connection; a read no longer waits behind writes queued before it (as on
-- PostgreSQL's pooled connections, where reads and writes already ran side by side). In a
-- 16-source wallet group the reads (its intents, the plan's postings and balances, the
-- feed's events) held the one connection ~80 of ~344 us per transfer.
local READ_CALLS = {}
for n in pairs(phase.READS) do READ_CALLS[n] = true end
for _, n in ipairs { "get_events_since", "get_transfers_for_account", "list_transfers",
                     "get_account_history", "list_accounts" } do
    READ_CALLS[n] = true
end

local function reads(method, ...)
    return READ_CALLS[method] or method == "apply" and phase.reads_only(...)
end

local function lane_of(self, method, ...)
    local r = self.reader
    if not r then return self end
    if reads(method, ...) then return r end
    return self
end

-- (the pool profile's: the connection a call runs on, its arguments unpacked in args)
function _M.call_kind(method, args)
    return reads(method, unpack(args, 1, args.n)) and "read" or "write"
end

-- The lane's connection closes once no call runs on it (closing it under a running
-- statement crashed SQLite: SIGFPE at a daemon's stop).
local function close_lane(lane)
    if lane.busy or lane.conn_closed then return end
    lane.conn_closed = true
    lane.conn:close()
end

-- The turn of lane for this call: at once, or FIFO behind the call in flight (bounded).
-- -> true, or nil, err, class
local function take_turn(self, lane)
    local task = require("ron.base.task")
    if lane.busy then
        if #lane.waiters >= self.max_queue then
            self.stats.rejected = self.stats.rejected + 1
            return nil, format("Busy: %d calls already wait for this SQLite store",
                               #lane.waiters), "retry"
        end
        local ch = task.channel(1, "sqlite_store_turn")
        lane.waiters[#lane.waiters + 1] = ch
        -- shut down: the turn still comes (the call ahead ends, then hands it on; a close
        -- hands it on too): a commit's next statement is not failed half-way by a stop
        -- (a saga left pending for recovery, issue 27)
        local ok, err = ch:recv_through_shutdown()
        if not ok then
            for i, w in ipairs(lane.waiters) do
                if w == ch then table.remove(lane.waiters, i) break end
            end
            return nil, "Canceled: " .. tostring(err), "io"
        end
    end
    lane.busy = true
    return true
end

-- The call ended (or never ran): the lane to its next waiter.
local function pass_turn(lane)
    lane.busy = false
    local nxt = table.remove(lane.waiters, 1)
    if nxt then
        lane.busy = true
        nxt:try_send(true)
    end
end

function Off:call(method, ...)
    -- (here, not at the top: the threadpool's VMs load this module for its driver, and
    -- they must not load luv or the scheduler: a second scheduler's handles on the loop)
    local task = require("ron.base.task")
    if self.closed then return nil, "Closed: the store was closed", "bug" end
    -- one call in flight per connection; the rest wait FIFO, bounded
    local lane = lane_of(self, method, ...)
    local turn, terr, tcls = take_turn(self, lane)
    if not turn then return nil, terr, tcls end
    if self.closed then -- closed while this call waited for its turn: pass the turn on
        pass_turn(lane)
        return nil, "Closed: the store was closed", "bug"
    end
    local ch = task.channel(1, "sqlite_store")
    local ok, qerr = submit(inflight, { ch = ch, keep = self }, lane.dbnum, lane.token, method,
                            _M.pack(...), self.durability)
    local res, err
    if not ok then
        err = "IoError: uv work queue failed: " .. tostring(qerr)
    else
        -- shut down: the answer in flight still comes (one statement)
        res, err = ch:recv_through_shutdown()
    end
    self.stats.calls = self.stats.calls + 1
    lane.busy = false
    -- closed while this call ran on the pool: the connection closes now that no worker
    -- thread uses it; the waiters are refused
    if self.closed then close_lane(lane) end
    pass_turn(lane)
    if self.ckpt and lane == self then self.ckpt:poke() end
    if not res then return nil, err, "io" end
    -- a body that raised: misuse (as the synchronous driver raises it) or a bug
    if res[1] == nil then error(tostring(res[2]), 2) end
    return _M.unpack_(res[1])
end

-- Closes the connections, or, while a call runs on the threadpool, marks the store closed
-- and leaves that connection's close to that call's end (call above).
function Off:close()
    self.closed = true
    if self.ckpt then self.ckpt:close() end
    close_lane(self)
    -- (rawget: an unknown key of an offloaded store is a proxy of a store method)
    local r = rawget(self, "reader")
    if r then close_lane(r) end
    return true
end

-- ---------------------------------------------------------------------------------------

-- fn() inside one read transaction: every read sees one state of the file (verify over a
-- ledger that a daemon keeps writing). -> fn's results (it raised: raised again).
local function snapshot(self, fn) return self.drv:read_phase(fn) end

-- A checkpoint on the pool (ron.ledger.store.sqlite_checkpoint): cb(rc, log, copied) or
-- cb(nil, err) on the loop when it ends.
local function queue_checkpoint(dbnum, method, cb)
    local ok, qerr = submit(ck_inflight, cb, dbnum, "checkpoint", method, _M.pack(), "ack")
    if not ok then cb(nil, "IoError: uv work queue failed: " .. tostring(qerr)) end
end

-- The offloaded store's checkpoints beside its writes: a second connection of the file,
-- and the writer's own automatic checkpoint off. nil when checkpoint_ms = 0 (or the second
-- connection cannot be had: SQLite's automatic checkpoint stays, as before).
local function checkpointer(o, off)
    if o.checkpoint_ms == 0 then return nil end
    local C = L()
    local rc = C.sqlite3_open_v2(o.path, pp_db, OPEN_RW_FULLMUTEX, nil)
    local db = pp_db[0]
    if rc ~= OK then
        if db ~= nil then C.sqlite3_close_v2(db) end
        return nil
    end
    local conn = new_conn(db)
    conn:exec("PRAGMA synchronous = NORMAL")
    ckpt.writer_off(C, off.conn.db)
    local uv, task = require("luv"), require("ron.base.task")
    return ckpt.new { store = off, dbnum = tonumber(ffi.cast("uintptr_t", db)),
                      queue = queue_checkpoint, now = uv.now, interval_ms = o.checkpoint_ms,
                      spawn = function(fn) task.spawn("sqlite_checkpoint", fn) end,
                      close = function() conn:close() end }
end

-- The offloaded store's reader (READ_CALLS above): a second connection of the file with
-- its own page cache (cache_mb), refusing writes (query_only: a write sent to it by mistake
-- fails instead of racing the writer's). -> a lane, or nil, err, class
local function reader_lane(o)
    local conn, oerr, ocls = open_db(o, o.path, OPEN_RW_FULLMUTEX, " (reader)")
    if not conn then return nil, oerr, ocls end
    local ok, err, cls = tune(conn, o, "PRAGMA query_only = 1")
    if not ok then
        conn:close()
        return nil, err, cls
    end
    local dbnum = tonumber(ffi.cast("uintptr_t", conn.db))
    return { conn = conn, dbnum = dbnum, token = next_token(dbnum), busy = false,
             waiters = {}, conn_closed = false }
end

function _M.open(o)
    check_opts(o)
    if o.readonly and o.offload then error("sqlite.open: readonly is not offloaded", 2) end
    heap.keep() -- SQLite's temporary b-trees must not trim the heap per statement
    local conn, err, cls = open_conn(o)
    if not conn then return nil, err, cls end
    if o.offload then
        local dbnum = tonumber(ffi.cast("uintptr_t", conn.db))
        local off = setmetatable({ conn = conn, dbnum = dbnum, token = next_token(dbnum),
                                   busy = false, waiters = {}, max_queue = o.max_queue or 1024,
                                   stats = { calls = 0, rejected = 0 }, closed = false,
                                   backend = "sqlite", offloaded = true, path = o.path,
                                   durability = durability_of(o), ckpt = false,
                                   reader = false, conn_closed = false }, Off)
        if o.reader ~= false then
            local r
            r, err, cls = reader_lane(o)
            if not r then
                conn:close()
                return nil, err, cls
            end
            off.reader = r
        end
        off.ckpt = checkpointer(o, off) or false
        return off
    end
    local s = sql.new(conn, "sqlite", "")
    s.backend, s.path, s.durability = "sqlite", o.path, durability_of(o)
    s.readonly = o.readonly or nil
    s.close = function(self) return self.drv:close() end
    s.snapshot = snapshot
    return s
end

function _M.version() return ffi.string(L().sqlite3_libversion()) end

return _M
