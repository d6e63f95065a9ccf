-- ron.ledger.store.sql_block: a binds block, one list primitive's statement binds in one
-- string, so that the rows of a phase cross from the loop to the offloaded SQLite driver's
-- pool thread as bytes and are bound there from those bytes (docs/LEDGER.md "The C batch
-- path", step 2). Serialized as Lua tables, a phase's rows cost the loop ~12 us a rated
-- slice to encode and the writer 9-13 to decode, each object on its own (issue 25); a block
-- is one string either way, and the pool makes no Lua value of a row.
--
-- Layout (native byte order: both sides are one process):
--   "\0rb1"  u32 rows  u32 values   then each value: u8 tag and its payload
--   tag 0 NULL | 1 int64 (8 bytes; a boolean as 0/1) | 2 bytes (u32 length, then the bytes)
-- The values are exactly the binds the primitive builds from its list
-- (ron.ledger.store.sql_binds), in its statement's order; SQLite binds a block's bytes in
-- place (SQLITE_STATIC: the string outlives the statement's steps).
--
--   local blk = require("ron.ledger.store.sql_block")
--   blk.encode(rows, binds)  -> block        blk.is(v), blk.rows(block)
--   blk.pair(a, b)           -> a, b, rows of a, rows of b
--   blk.bind(C, st, block)   -> rc           (sqlite_conn's bind of a block)
--   blk.args(method, ...)    -> the call's arguments, its list primitives' lists as blocks
--   blk.args_into(b, method, ...)  the same, each block written at the end of the
--                            string.buffer b and named by a reference (sqlite_msg)
--   blk.deref_args(method, t, base, lo, hi)  (the pool) t's references made the blocks
--   blk.on                   (RON_SQLITE_BLOCKS=0: off, the lists cross as tables)
local ffi = require("ffi")
local sql_binds = require("ron.ledger.store.sql_binds")
local claims = require("ron.ledger.store.sql_claims")

local type, error, pairs, pcall, byte, sub, select =
      type, error, pairs, pcall, string.byte, string.sub, select

local _M = {}

_M.on = os.getenv("RON_SQLITE_BLOCKS") ~= "0"

local MAGIC, HEAD = "\0rb1", 12
local u8p, u32p, i64p = ffi.typeof("uint8_t *"), ffi.typeof("uint32_t *"),
                        ffi.typeof("int64_t *")
local cu8p, cu32p, ci64p = ffi.typeof("const uint8_t *"), ffi.typeof("const uint32_t *"),
                           ffi.typeof("const int64_t *")

function _M.is(v)
    return type(v) == "string" and #v >= HEAD and sub(v, 1, 4) == MAGIC
end

function _M.rows(s)
    local a, b, c, d = byte(s, 5, 8)
    return a + b * 256 + c * 65536 + d * 16777216
end

-- a primitive's two blocks and their rows
function _M.pair(a, b) return a, b, _M.rows(a), _M.rows(b) end

local buf -- (string.buffer: one per VM, reused)
-- (args_into: the message the blocks go to, while its ops are turned into blocks)
local into

-- A block's place in a message (sqlite_msg): the key of its offset.
local REF = "\0rb"
_M.REF = REF

-- binds' values 1..binds.n as a block of `rows` rows (in args_into: written at the end of
-- its message, -> a reference to it)
function _M.encode(rows, binds)
    local n, size = binds.n or #binds, HEAD
    for i = 1, n do
        local v = binds[i]
        local t = type(v)
        if v == nil then size = size + 1
        elseif t == "string" then size = size + 5 + #v
        elseif t == "number" or t == "cdata" or t == "boolean" then size = size + 9
        else error("ron.ledger.store: a binds block cannot hold a " .. t, 2) end
    end
    local out = into
    if not out then
        buf = buf or require("string.buffer").new()
        out = buf:reset()
    end
    local at = #out
    local p = ffi.cast(u8p, (out:reserve(size)))
    ffi.copy(p, MAGIC, 4)
    ffi.cast(u32p, p + 4)[0] = rows
    ffi.cast(u32p, p + 8)[0] = n
    local off = HEAD
    for i = 1, n do
        local v = binds[i]
        local t = type(v)
        if v == nil then
            p[off] = 0
            off = off + 1
        elseif t == "string" then
            local len = #v
            p[off] = 2
            ffi.cast(u32p, p + off + 1)[0] = len
            ffi.copy(p + off + 5, v, len)
            off = off + 5 + len
        else
            p[off] = 1
            if t == "boolean" then v = v and 1 or 0 end
            ffi.cast(i64p, p + off + 1)[0] = v
            off = off + 9
        end
    end
    out:commit(size)
    if into then return { [REF] = at, len = size } end
    return buf:tostring()
end

local SQLITE_OK, SQLITE_MISUSE = 0, 21

-- st's parameters 1..values from block s; -> SQLite's code (MISUSE: a block that does not
-- end where its values do)
function _M.bind(C, st, s)
    local p, len = ffi.cast(cu8p, s), #s
    local n, off = ffi.cast(cu32p, p + 8)[0], HEAD
    for i = 1, n do
        if off >= len then return SQLITE_MISUSE end
        local tag, rc = p[off]
        if tag == 0 then
            rc = C.sqlite3_bind_null(st, i)
            off = off + 1
        elseif tag == 1 then
            rc = C.sqlite3_bind_int64(st, i, ffi.cast(ci64p, p + off + 1)[0])
            off = off + 9
        else
            local bl = ffi.cast(cu32p, p + off + 1)[0]
            if off + 5 + bl > len then return SQLITE_MISUSE end
            rc = C.sqlite3_bind_blob(st, i, p + off + 5, bl, nil) -- static: s outlives the step
            off = off + 5 + bl
        end
        if rc ~= SQLITE_OK then return rc end
    end
    return off == len and SQLITE_OK or SQLITE_MISUSE
end
if jit then jit.on(_M.bind) end

-- ---- the loop's side: an op's lists as blocks ----

local SQLITE = { dialect = "sqlite" } -- (claims.intent_of's view of the store)
local function held_key(k) return claims.intent_of(SQLITE, k) end
-- the block of no rows (a constant: zero rows, zero values, the same in either byte order)
local EMPTY = MAGIC .. ("\0"):rep(8)

-- op -> its arguments as blocks: a list (1) or two (2); nil leaves the op as it is
-- (an empty list; or a list its primitive refuses, which the pool then refuses as before)
local FORMS = {
    insert_postings = function(op)
        local ps = op[2]
        return _M.encode(#ps, sql_binds.postings(ps))
    end,
    deactivate_many = function(op)
        local l = op[2]
        return _M.encode(#l, sql_binds.deactivate(l, op[3]))
    end,
    advance_streams = function(op)
        local l = op[2]
        return _M.encode(#l, sql_binds.streams("advance_streams", l, 6))
    end,
    insert_streams = function(op)
        local l = op[2]
        return _M.encode(#l, sql_binds.streams("insert_streams", l, 4))
    end,
    store_transfers = function(op)
        local tb, ab, m = sql_binds.transfers(op[2])
        return _M.encode(#op[2], tb), _M.encode(m, ab)
    end,
    put_intents = function(op)
        local plain, held = sql_binds.intents_split(SQLITE, op[2])
        return #plain > 0 and _M.encode(#plain, sql_binds.intents(plain)) or EMPTY,
               #held > 0 and _M.encode(#held, sql_binds.intents(held, held_key)) or EMPTY
    end,
}
_M.FORMS = FORMS

local function blocked(op)
    local list = op[2]
    if type(list) ~= "table" or #list == 0 then return nil end
    local ok, a, b = pcall(FORMS[op[1]], op)
    if not ok then return nil end
    local nop = { op[1], a, b }
    for k, v in pairs(op) do
        if type(k) ~= "number" then nop[k] = v end
    end
    return nop
end

-- ops with each list primitive's op as blocks (a new list; ops itself is the caller's, who
-- reads its ops back after the phase)
local function ops_of(ops)
    if type(ops) ~= "table" then return ops end
    local out
    for i = 1, #ops do
        local op = ops[i]
        local nop = type(op) == "table" and FORMS[op[1]] and blocked(op)
        if nop and not out then
            out = {}
            for j = 1, i - 1 do out[j] = ops[j] end
        end
        if out then out[i] = nop or op end
    end
    return out or ops
end

local function args(method, ...)
    if method == "apply" then
        local ops, opts = ...
        return ops_of(ops), opts
    end
    if FORMS[method] and select("#", ...) <= 2 then
        local nop = blocked({ method, ... })
        if nop then return nop[2], nop[3] end
    end
    return ...
end

_M.args = args

-- (into reset however args ends)
local function reset(ok, ...)
    into = nil
    if not ok then error((...), 0) end
    return ...
end

function _M.args_into(b, method, ...)
    into = b
    return reset(pcall(args, method, ...))
end

-- ---- the pool's side ----

local function is_ref(v) return type(v) == "table" and v[REF] ~= nil end

-- the block a reference names in the message at base, inside [lo, hi)
local function block_of(v, base, lo, hi)
    local at, len = v[REF], v.len
    if type(at) ~= "number" or type(len) ~= "number" or at < lo or at + len > hi then
        error("sqlite_msg: a block reference outside the message's blocks", 0)
    end
    return ffi.string(base + at, len)
end

-- t: a call's arguments (phase.pack's), each block reference in place made its block
function _M.deref_args(method, t, base, lo, hi)
    if method == "apply" then
        local ops = t[1]
        if type(ops) ~= "table" then return end
        for _, op in ipairs(ops) do
            if type(op) == "table" then
                for k = 2, 3 do
                    if is_ref(op[k]) then op[k] = block_of(op[k], base, lo, hi) end
                end
            end
        end
        return
    end
    for k = 1, 2 do
        if is_ref(t[k]) then t[k] = block_of(t[k], base, lo, hi) end
    end
end

return _M
