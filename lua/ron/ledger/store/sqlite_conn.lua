-- ron.ledger.store.sqlite_conn: one SQLite connection through the LuaJIT FFI, usable in any
-- Lua VM of the process (the loop's, and the libuv pool's, which attach to a connection
-- opened on the loop): its statements prepared and kept (bounded, I-7), binds and columns,
-- run/read/write/exec, transactions (atomic, phase, read_phase, flushed_phase), flush and
-- close. The Store over it is ron.ledger.store.sql's; ron.ledger.store.sqlite opens it,
-- ron.ledger.store.sqlite_off drives it from the pool.
--
--   local sc = require("ron.ledger.store.sqlite_conn")
--   local conn, err, cls = sc.open_db(path, name, flags, what, busy_timeout_ms)
--   sc.new(db)              -- a connection over a sqlite3 * (the pool's attach)
--   sc.lib()                -- libsqlite3, loaded once per VM
--   sc.classify(rc)         -- "retry" | "io" | "bug"
local ffi = require("ffi")
local sql = require("ron.ledger.store.sql")
local prof = require("ron.ledger.store.sqlite_profile")
local block = require("ron.ledger.store.sql_block")

local type, setmetatable, pcall, format, bit_band =
      type, setmetatable, pcall, string.format, require("bit").band

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

local share = require("ron.ledger.store.sqlite_share") -- (after the cdef: it uses the types)

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
-- and a length met again is prepared again (~1.3 us a parameter). The offloaded driver's
-- connections share theirs among the pool's VMs (ron.ledger.store.sqlite_share): one
-- budget per connection, each text prepared once.
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

local function compile(self, C, text)
    local w0, c0
    if prof.scope then w0, c0 = prof.now() end
    local rc = C.sqlite3_prepare_v2(self.db, text, #text, pp_stmt, nil)
    if w0 then prof.add(prof.sql_key(text).prepare, w0, c0) end
    if rc ~= OK then return fail(self, rc, "prepare") end
    local st = pp_stmt[0]
    return st, _M.STMT_BASE + C.sqlite3_bind_parameter_count(st)
end

-- (a connection whose statements the VMs share, sqlite_share: this VM's map holds the
-- table's slots of this generation)
local function prepare_shared(self, sh, text)
    local C = L()
    local h = share.hash(text)
    local slot = share.find(sh, C, text, h)
    local st, cost
    if slot then
        st = sh.slot[slot].st
    else
        local cls
        st, cost, cls = compile(self, C, text)
        if not st then return nil, cost, cls end
        local shed_first
        slot, shed_first = share.add(sh, C, st, text, h, cost)
        if shed_first then
            self.stmts, self.gen = {}, sh.gen
            self.shed = self.shed + 1
        end
    end
    share.touch(sh, slot)
    self.stmts[text] = { st = st, slot = slot }
    return st
end

function Conn:prepare(text)
    local sh = self.share
    if sh then
        if self.gen ~= sh.gen then self.stmts, self.gen = {}, sh.gen end
        local e = self.stmts[text]
        if e then
            share.touch(sh, e.slot)
            return e.st
        end
        return prepare_shared(self, sh, text)
    end
    local tick = self.tick + 1
    self.tick = tick
    local e = self.stmts[text]
    if e then
        e.used = tick
        return e.st
    end
    local st, cost, cls = compile(self, L(), text)
    if not st then return nil, cost, cls end
    if self.stmt_cost + cost > _M.STMT_BUDGET then shed(self, cost) end
    self.stmts[text] = { st = st, cost = cost, used = tick }
    self.stmt_cost = self.stmt_cost + cost
    return st
end

local function bind(st, binds)
    local C = L()
    if type(binds) == "string" then return block.bind(C, st, binds) end -- (sql_block)
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

-- share_addr: the address of the connection's shared statements (sqlite_share.new), when
-- the VMs of the pool run its calls; nil: this VM's own statements
local function new_conn(db, share_addr)
    return setmetatable({ db = db, stmts = {}, depth = 0, stmt_cost = 0, tick = 0, shed = 0,
                          share = share_addr and share.at(share_addr) or false, gen = -1 },
                        Conn)
end
_M.new = new_conn

-- Open flags (FULLMUTEX: a connection the loop opens and a pool thread uses)
_M.OPEN_RW_CREATE = OPEN_RW_CREATE_FULLMUTEX
_M.OPEN_RO_URI = OPEN_RO_URI_FULLMUTEX
_M.OPEN_RW = OPEN_RW_FULLMUTEX

-- A bare sqlite3 * of name opened with flags: -> db, or nil (nothing left open).
function _M.open_v2(name, flags)
    local C = L()
    local rc = C.sqlite3_open_v2(name, pp_db, flags, nil)
    local db = pp_db[0]
    if rc ~= OK then
        if db ~= nil then C.sqlite3_close_v2(db) end
        return nil
    end
    return db
end

-- A connection of name (a path or a URI) opened with flags, extended result codes and the
-- busy timeout on. -> conn, or nil, err, class (path and what: the error's words for it)
function _M.open_db(path, name, flags, what, busy_timeout_ms)
    local C = L()
    local rc = C.sqlite3_open_v2(name, pp_db, flags, nil)
    local db = pp_db[0]
    if rc ~= OK then
        local msg = db ~= nil and ffi.string(C.sqlite3_errmsg(db))
                    or ffi.string(C.sqlite3_errstr(rc))
        if db ~= nil then C.sqlite3_close_v2(db) end
        return nil, format("IoError: SQLite open %s%s: %s", path, what, msg), "io"
    end
    C.sqlite3_extended_result_codes(db, 1)
    C.sqlite3_busy_timeout(db, busy_timeout_ms or 5000)
    return new_conn(db)
end

return _M
