-- ron.base.offheap: what the caches kept off the Lua heap share (ron.base.blobcache,
-- ron.base.numcache; issue 25): their key hash, their calloc'd arrays, their index size.
--
--   local offheap = require("ron.base.offheap")
--   offheap.hash(s)                -> an int32: s's bytes hashed (an index takes its low bits)
--   offheap.alloc(ct, n, size, who) -> a ct pointer to n zeroed elements of size bytes, freed
--                                     with it (who names the caller in an out-of-memory error)
--   offheap.slots_for(cap)         -> a power of two >= 2 * cap (a generation's slots: open
--                                     addressing at most half full)
--   offheap.check_count(v, what, who) -- an integer >= 0, else an error at the caller's caller
local ffi = require("ffi")
local bit = require("bit")

local C = ffi.C
pcall(ffi.cdef, "int memcmp(const void *s1, const void *s2, size_t n);")
pcall(ffi.cdef, "void *calloc(size_t nmemb, size_t size);")
pcall(ffi.cdef, "void free(void *ptr);")

local bor, bxor, lshift, rshift, tobit = bit.bor, bit.bxor, bit.lshift, bit.rshift, bit.tobit
local byte, type, error = string.byte, type, error

local _M = {}

-- FNV-1a over 4-byte words (exact in doubles: h * 16777619 = (h << 24) + h * 403), then
-- the high bits folded down (an index takes the low ones, which a word's upper bytes
-- reach only through the fold). Words, not bytes: the wallet's reads run it interpreted
-- as often as compiled, ~0.6 against ~1.0 us for a balance's 20-byte key.
function _M.hash(s)
    local h, n, i = tobit(2166136261), #s, 1
    while i + 3 <= n do
        local a, b, c, d = byte(s, i, i + 3)
        h = bxor(h, bor(a, lshift(b, 8), lshift(c, 16), lshift(d, 24)))
        h = tobit(lshift(h, 24) + h * 403)
        i = i + 4
    end
    while i <= n do
        h = bxor(h, byte(s, i))
        h = tobit(lshift(h, 24) + h * 403)
        i = i + 1
    end
    h = bxor(h, rshift(h, 15))
    h = tobit(lshift(h, 24) + h * 403)
    return bxor(h, rshift(h, 13))
end

-- (calloc: the OS's zero pages, so a generation costs memory as it fills, not when made;
-- the finalizer sits on the pointer the caller keeps)
function _M.alloc(ct, n, size, who)
    local p = C.calloc(n, size)
    if p == nil then error(who .. ": out of memory", 3) end
    return ffi.gc(ffi.cast(ct, p), C.free)
end

function _M.slots_for(cap)
    local n = 8
    while n < 2 * cap do n = n * 2 end
    return n
end

function _M.check_count(v, what, who)
    if type(v) ~= "number" or v < 0 or v % 1 ~= 0 then
        error(who .. ": " .. what .. " must be an integer >= 0", 3)
    end
end

return _M
