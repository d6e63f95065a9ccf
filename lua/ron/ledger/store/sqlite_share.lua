-- ron.ledger.store.sqlite_share: one connection's prepared statements, shared by the Lua VMs
-- that run its calls. The offloaded driver's calls run on any of libuv's pool threads, each
-- with its own VM; each VM prepared every statement text it met for itself, so a list
-- primitive's text of a new length was prepared up to four times on one connection (~1.3 us
-- a parameter: ~16 us a rated slice on the writer in a cold process, issue 25,
-- docs/LEDGER.md "The C batch path", step 2). A connection runs one call at a time (the
-- driver's lanes), so its statements can pass from one VM to the next: this table, in C
-- memory that every VM of the process reaches by its address, keeps each text's statement
-- once, bounded (I-7: the budget of bound parameters, sqlite_conn.STMT_BUDGET, now per
-- connection rather than per VM and connection), the least recently used quarter finalized
-- past it.
--
-- The VMs keep their own map text -> statement (a Lua string lookup, no hashing of the
-- text per call) and drop it whenever the table's generation moved: a shed, by whichever
-- VM, finalized statements that another VM's map may still name.
--
--   local share = require("ron.ledger.store.sqlite_share")
--   local addr = share.new(budget)      -- (the loop, per connection) a number: the address
--   local sh = share.at(addr)           -- (any VM) the table
--   share.find(sh, C, text, h) / share.add(sh, C, st, text, h, cost) / share.touch(sh, slot)
--                                       -- (C: libsqlite3's namespace)
--   share.hash(text), share.free(addr)  -- (the loop, after the connection's close)
--   share.on                            -- RON_SQLITE_SHARE=0: off
local ffi = require("ffi")
local bit = require("bit")

local bxor, rol, tobit = bit.bxor, bit.rol, bit.tobit
local sort = table.sort

local _M = {}

_M.on = os.getenv("RON_SQLITE_SHARE") ~= "0" -- (0: each pool VM its own, as before)

-- (sqlite3_stmt is declared by ron.ledger.store.sqlite_conn, which requires this module)
ffi.cdef [[
typedef struct ron_sqlite_stmt_slot {
    double used;
    sqlite3_stmt *st;
    int32_t h;
    uint32_t len;
    uint32_t cost;
    uint32_t pad;
} ron_sqlite_stmt_slot_t;
typedef struct ron_sqlite_share {
    double gen, tick, prepared, adopted, shed, cost, budget; /* (doubles: read without a box) */
    uint32_t cap, n;
    ron_sqlite_stmt_slot_t slot[?];
} ron_sqlite_share_t;
]]
for _, decl in ipairs { "void *calloc(size_t, size_t);", "void free(void *);",
                        "int memcmp(const void *, const void *, size_t);",
                        "const char *sqlite3_sql(sqlite3_stmt *);",
                        "int sqlite3_finalize(sqlite3_stmt *);" } do
    pcall(ffi.cdef, decl)
end

local CAP = 8192 -- slots: at most CAP / 2 statements (each costs STMT_BASE or more)
local SHARE_P = ffi.typeof("ron_sqlite_share_t *")
local cu8p, cu32p = ffi.typeof("const uint8_t *"), ffi.typeof("const uint32_t *")

function _M.new(budget)
    local size = ffi.sizeof("ron_sqlite_share_t", CAP)
    local p = ffi.C.calloc(1, size)
    if p == nil then error("ron.ledger.store.sqlite_share: out of memory", 2) end
    local sh = ffi.cast(SHARE_P, p)
    sh.cap, sh.budget = CAP, budget
    return tonumber(ffi.cast("uintptr_t", p))
end

function _M.at(addr) return ffi.cast(SHARE_P, ffi.cast("uintptr_t", addr)) end

function _M.free(addr) ffi.C.free(ffi.cast("void *", ffi.cast("uintptr_t", addr))) end

-- a 32-bit hash of the text's bytes (four at a time)
function _M.hash(s)
    local n = #s
    local p = ffi.cast(cu8p, s)
    local w = ffi.cast(cu32p, p)
    local h = tobit(n)
    local words = (n - n % 4) / 4
    for i = 0, words - 1 do h = bxor(rol(h, 5) + h, w[i]) end
    for i = words * 4, n - 1 do h = bxor(rol(h, 5) + h, p[i]) end
    return tobit(h)
end
if jit then jit.on(_M.hash) end

local function same(C, slot, text)
    return slot.len == #text and ffi.C.memcmp(C.sqlite3_sql(slot.st), text, #text) == 0
end

-- -> the slot of text's statement, or nil (C: libsqlite3's namespace)
function _M.find(sh, C, text, h)
    local mask = sh.cap - 1
    local i = bit.band(h, mask)
    while sh.slot[i].st ~= nil do
        local s = sh.slot[i]
        if s.h == h and same(C, s, text) then
            sh.adopted = sh.adopted + 1
            return i
        end
        i = bit.band(i + 1, mask)
    end
    return nil
end

function _M.touch(sh, i)
    local t = sh.tick + 1
    sh.tick = t
    sh.slot[i].used = t
end

local function put(sh, st, h, len, cost, used)
    local mask = sh.cap - 1
    local i = bit.band(h, mask)
    while sh.slot[i].st ~= nil do i = bit.band(i + 1, mask) end
    local s = sh.slot[i]
    s.st, s.h, s.len, s.cost, s.used = st, h, len, cost, used
    sh.n, sh.cost = sh.n + 1, sh.cost + cost
    return i
end

-- The least recently used statements finalized until the rest and `need` fit 3/4 of the
-- budget (and half the slots); the survivors placed again; the generation moved on.
local function shed(sh, C, need)
    local live = {}
    for i = 0, sh.cap - 1 do
        local s = sh.slot[i]
        if s.st ~= nil then
            live[#live + 1] = { st = s.st, h = s.h, len = s.len, cost = s.cost, used = s.used }
        end
    end
    sort(live, function(a, b) return a.used < b.used end)
    ffi.fill(sh.slot, ffi.sizeof("ron_sqlite_stmt_slot_t") * sh.cap)
    sh.n, sh.cost = 0, 0
    local cost, n, goal = 0, #live, sh.budget * 3 / 4 - need
    for _, x in ipairs(live) do cost = cost + x.cost end
    local first = 1
    while first <= #live and (cost > goal or n >= sh.cap / 4) do
        C.sqlite3_finalize(live[first].st)
        cost, n, first = cost - live[first].cost, n - 1, first + 1
        sh.shed = sh.shed + 1
    end
    for k = first, #live do
        local x = live[k]
        put(sh, x.st, x.h, x.len, x.cost, x.used)
    end
    sh.gen = sh.gen + 1
end

-- st (text's, just prepared) kept -> its slot, and whether a shed came first (the caller's
-- own map is stale then too)
function _M.add(sh, C, st, text, h, cost)
    local shed_first = false
    if sh.cost + cost > sh.budget or sh.n >= sh.cap / 2 then
        shed(sh, C, cost)
        shed_first = true
    end
    sh.prepared = sh.prepared + 1
    local t = sh.tick + 1
    sh.tick = t
    return put(sh, st, h, #text, cost, t), shed_first
end

return _M
