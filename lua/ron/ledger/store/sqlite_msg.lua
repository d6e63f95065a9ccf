-- ron.ledger.store.sqlite_msg: a call's arguments handed to the offloaded SQLite driver's
-- pool thread in place, off the loop's Lua heap (issue 25, docs/LEDGER.md "A call's bytes
-- off the loop's heap").
--
-- Before, a call's arguments crossed as a Lua string made on the loop (the serialized
-- values, its binds blocks copied into it, each block itself a string made first), which
-- luv copied again into the pool VM: a rated put_many's write phase is ~1.9 MB, so the
-- loop made ~3.7 KB of strings a slice for the collector, of ~16 KB it allocates a slice.
-- Now the loop writes the call into a string.buffer of its own (kept from call to call,
-- bounded), the blocks first and the serialized values after them, and the pool thread
-- reads that memory through its address while the call runs; the buffer is given back
-- when the call's answer is in (the loop touches it only then).
--
-- Layout (native byte order: both sides are one process):
--   "\0rm1"  u32 blocks  the blocks' bytes (each a binds block, ron.ledger.store.sql_block)
--   then the values: "\0rl1" and string.buffer's encoding of phase.pack(args)
-- A block in the values is a reference { ["\0rb"] = offset in the message, len = bytes },
-- which the pool turns back into the block (a string of its own VM) before the call runs.
--
--   local msg = require("ron.ledger.store.sqlite_msg")
--   local m = msg.take()                      -- the loop: a message (msg.give(m) after)
--   local addr, len = msg.write(m, method, ...)   -- nil when a value cannot be encoded
--   msg.read(addr, len, method)  -> the call's arguments (the pool)
--   msg.stats()                  -> { kept = buffers kept }
--   msg.VALUES                   the serialized values' prefix (sqlite_off's strings too)
local ffi = require("ffi")
local has_buf, sbuf = pcall(require, "string.buffer") -- (sqlite_off: messages only with it)
local phase = require("ron.ledger.store.phase")
local block = require("ron.ledger.store.sql_block")

local pcall, unpack, tonumber, error = pcall, unpack, tonumber, error

local _M = {}

-- The keys of the store's rows and calls that cross the pool most (a census of a rated
-- put_many's calls and answers, issue 25): string.buffer writes a key of its dictionary as
-- its index and reads it back as this very string, so the side that decodes makes no
-- lookup in its string table for it (79.7 lj_str_new calls a rated slice on the loop, most
-- of them lookups of such strings: docs/LEDGER.md "Where the loop's CPU goes inside
-- LuaJIT"). Both sides load this one list (one process, one file), so a change reaches
-- both at once; a key outside it crosses as a string.
_M.DICT = { "n", "id", "version", "status", "bytes", "policy", "floor", "code", "scale",
            "asset", "account", "expect", "transfer_id", "tenant", "max", "data", "kind",
            "dimension", "b3", "seq", "ok", "book", "index", "amount", "created_by", "len",
            "\0rb", "limit", "bals", "key", "outcome", "body_hash", "message", "consumed_by",
            "reservation", "metadata", "intent", "created_at_ms", "rec", "involved", "event",
            "also_done", "flushed", "balance", "rows", "count", "flush", "keys", "target",
            "opened_at", "updated_at", "phase", "sid", "node", "lease", "head", "prev_b3" }
local OPTS = { dict = _M.DICT }

-- A string.buffer for the pool's crossings (the dictionary set).
function _M.buffer() return sbuf.new(OPTS) end

local MAGIC, VALUES = "\0rm1", "\0rl1"
_M.VALUES = VALUES
local HEAD = 8
local cu8p, u32p, cu32p = ffi.typeof("const uint8_t *"), ffi.typeof("uint32_t *"),
                          ffi.typeof("const uint32_t *")

-- I-7: at most KEEP buffers wait for the next call (one per call in flight is made when
-- none waits: the writer's, the reader's, a checkpoint's); a buffer that grew past
-- KEEP_BYTES is let go rather than kept.
_M.KEEP, _M.KEEP_BYTES = 4, 8 * 1024 * 1024
local kept = {}

-- a message: { b = its string.buffer, size = the bytes of the call written last }
function _M.take()
    local m = kept[#kept]
    if m then
        kept[#kept] = nil
        return m
    end
    return { b = _M.buffer(), size = 0 }
end

function _M.give(m)
    if #kept < _M.KEEP and m.size <= _M.KEEP_BYTES then
        m.b:reset()
        kept[#kept + 1] = m
    end
end

function _M.stats() return { kept = #kept } end

-- The call into m: -> its address (a number) and length; nil when a value cannot be
-- encoded by string.buffer (the caller then passes the call as a string, as before).
function _M.write(m, method, ...)
    local b = m.b
    b:reset():put(MAGIC, "\0\0\0\0")
    local t = phase.pack(block.args_into(b, method, ...))
    ffi.cast(u32p, (b:ref()) + 4)[0] = #b - HEAD
    b:put(VALUES)
    local ok = pcall(b.encode, b, t)
    local p, len = b:ref()
    m.size = len
    if not ok then return nil end
    return tonumber(ffi.cast("uintptr_t", p)), len
end

-- (the pool) the call at addr: -> its arguments, each block reference made the block
local dec = has_buf and _M.buffer()

function _M.read(addr, len, method)
    local base = ffi.cast(cu8p, addr)
    if len < HEAD or ffi.string(base, 4) ~= MAGIC then error("sqlite_msg: not a message", 0) end
    local nb = ffi.cast(cu32p, base + 4)[0]
    local at = HEAD + nb
    if at + #VALUES > len or ffi.string(base + at, #VALUES) ~= VALUES then
        error("sqlite_msg: a message's values are not where its blocks end", 0)
    end
    local t = dec:set(base + at + #VALUES, len - at - #VALUES):decode()
    dec:reset()
    block.deref_args(method, t, base, HEAD, at)
    return unpack(t, 1, t.n)
end

return _M
