-- ron.base.blobcache: a bounded cache of byte strings kept OFF the Lua heap (I-7): the
-- shed policy of ron.base.lru (two generations), with each generation's entries in one
-- calloc'd arena and found through an open-addressing index beside it, so that however
-- many entries it holds, the collector sees none of them.
--
--   local blobcache = require("ron.base.blobcache")
--   local c = blobcache.new(cap, bytes) -- cap >= 0 entries per generation (0: nothing kept);
--                                       -- bytes per generation (default cap * 512)
--   c:put(k, ...)        -- k and each value: a string; -> true, or false when not kept
--   c:get(k)             -- -> { the values } (new strings), or nil
--   c:count()  c:clear()
--
-- Why (issue 25): the wallet's answer cache held two generations of 10,000 answers, four
-- Lua objects each (the key, the answer's table, its body, its body hash). LuaJIT sweeps
-- every object of the heap once per cycle, and its pacing counts a swept object as ten
-- bytes of marking where it costs ~80 ns: the whole sweep ran in the steps of about one
-- group commit, whose loop time it tripled (docs/WALLET.md §8, "The slow groups were the
-- sweep"). Here an entry is bytes in an arena: no object to mark or sweep, no garbage.
--
-- Shed policy: when the young generation holds cap entries, or has no room left for the
-- next one, it becomes the old one and the old one is dropped whole (its arena reused); a
-- hit in the old generation is copied back to the young one. A put of a key already held
-- writes a new record (the old bytes stay until their generation is dropped). An entry
-- larger than a whole generation is not kept. Bounded: 2 * bytes of arenas and 2 * (a
-- power of two >= 2 * cap) slots of 8 bytes, allocated zeroed at new() (calloc: resident
-- only as the entries fill them).
--
-- A record, 4-byte aligned: [i32 hash][u32 key length][u32 values] [key] then per value
-- [u32 length][bytes], each field padded to 4 bytes.
local ffi = require("ffi")
local bit = require("bit")

local C = ffi.C
pcall(ffi.cdef, "int memcmp(const void *s1, const void *s2, size_t n);")
pcall(ffi.cdef, "void *calloc(size_t nmemb, size_t size);")
pcall(ffi.cdef, "void free(void *ptr);")

local band, bor, bxor, lshift, rshift, tobit = bit.band, bit.bor, bit.bxor, bit.lshift,
                                           bit.rshift, bit.tobit
local byte, select, setmetatable, type, error = string.byte, select, setmetatable, type, error
local ffi_copy, ffi_string, ffi_cast, ffi_gc, ffi_fill = ffi.copy, ffi.string, ffi.cast,
                                                         ffi.gc, ffi.fill

local u8p = ffi.typeof("uint8_t *")
local u32p = ffi.typeof("uint32_t *")
local i32p = ffi.typeof("int32_t *")

local _M = {}

-- FNV-1a over 4-byte words (exact in doubles: h * 16777619 = (h << 24) + h * 403), then
-- the high bits folded down (an index takes the low ones, which a word's upper bytes
-- reach only through the fold). Words, not bytes: the wallet's reads run it interpreted
-- as often as compiled, ~0.6 against ~1.0 us for a balance's 20-byte key.
local function hash(s)
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
_M.hash = hash

local function pad4(n) return band(n + 3, -4) end

-- (calloc: the OS's zero pages, so a generation costs memory as it fills, not at new())
local function alloc(ct, n, size)
    local p = C.calloc(n, size)
    if p == nil then error("ron.base.blobcache: out of memory", 3) end
    return ffi_gc(ffi_cast(ct, p), C.free) -- (the finalizer on the pointer kept)
end

-- A generation: the arena (bytes), the index (slots: a record's offset / 4 + 1, 0 empty;
-- tags: its hash), entries n, bytes used.
local function new_gen(bytes, nslots)
    return { arena = alloc(u8p, bytes, 1), slots = alloc(u32p, nslots, 4),
             tags = alloc(i32p, nslots, 4), n = 0, used = 0 }
end

local B = {}
B.__index = B

function _M.new(cap, bytes)
    if type(cap) ~= "number" or cap < 0 or cap % 1 ~= 0 then
        error("ron.base.blobcache: cap must be an integer >= 0", 2)
    end
    bytes = bytes or cap * 512
    if type(bytes) ~= "number" or bytes < 0 or bytes % 1 ~= 0 then
        error("ron.base.blobcache: bytes must be an integer >= 0", 2)
    end
    local self = setmetatable({ cap = cap, bytes = pad4(bytes) }, B)
    if cap > 0 then
        local nslots = 8
        while nslots < 2 * cap do nslots = nslots * 2 end
        self.mask = nslots - 1
        self.young, self.old = new_gen(self.bytes, nslots), new_gen(self.bytes, nslots)
    end
    return self
end

-- -> the slot of k in g (its record's offset in .off), or the empty slot it would take
local function find(self, g, k, h)
    local mask, slots, tags, arena = self.mask, g.slots, g.tags, g.arena
    local i, klen = band(h, mask), #k
    while true do
        local s = slots[i]
        if s == 0 then return i, nil end
        if tags[i] == h then
            local off = (s - 1) * 4
            local rec = ffi_cast(u32p, arena + off)
            if rec[1] == klen and C.memcmp(arena + off + 12, k, klen) == 0 then return i, off end
        end
        i = band(i + 1, mask)
    end
end

local function clear_gen(self, g)
    ffi_fill(g.slots, (self.mask + 1) * 4, 0)
    g.n, g.used = 0, 0
end

-- the record's size for key k and values ...
local function size_of(k, ...)
    local size = 12 + pad4(#k)
    for i = 1, select("#", ...) do size = size + 4 + pad4(#select(i, ...)) end
    return size
end

local function write(g, off, h, k, ...)
    local arena, n = g.arena, select("#", ...)
    local rec = ffi_cast(u32p, arena + off)
    ffi_cast(i32p, rec)[0] = h
    rec[1], rec[2] = #k, n
    ffi_copy(arena + off + 12, k, #k)
    local at = off + 12 + pad4(#k)
    for i = 1, n do
        local v = select(i, ...)
        ffi_cast(u32p, arena + at)[0] = #v
        ffi_copy(arena + at + 4, v, #v)
        at = at + 4 + pad4(#v)
    end
end

local function check_strings(k, ...)
    if type(k) ~= "string" then error("ron.base.blobcache: a key is a string", 3) end
    for i = 1, select("#", ...) do
        if type(select(i, ...)) ~= "string" then
            error("ron.base.blobcache: a value is a string", 3)
        end
    end
end

function B:put(k, ...)
    check_strings(k, ...)
    if self.cap <= 0 then return false end
    local size = size_of(k, ...)
    if size > self.bytes then return false end
    local h = hash(k)
    local g = self.young
    local i, off = find(self, g, k, h)
    if (not off and g.n >= self.cap) or g.used + size > self.bytes then
        self.old, self.young = g, self.old
        g = self.young
        clear_gen(self, g)
        i, off = find(self, g, k, h)
    end
    if not off then g.n = g.n + 1 end
    write(g, g.used, h, k, ...)
    g.slots[i], g.tags[i] = g.used / 4 + 1, h
    g.used = g.used + size
    return true
end

-- the values of the record at off in g
local function values(g, off)
    local arena = g.arena
    local rec = ffi_cast(u32p, arena + off)
    local out = {}
    local at = off + 12 + pad4(rec[1])
    for i = 1, rec[2] do
        local len = ffi_cast(u32p, arena + at)[0]
        out[i] = ffi_string(arena + at + 4, len)
        at = at + 4 + pad4(len)
    end
    return out
end

function B:get(k)
    if type(k) ~= "string" then error("ron.base.blobcache: a key is a string", 2) end
    if self.cap <= 0 then return nil end
    local h = hash(k)
    local _, off = find(self, self.young, k, h)
    if off then return values(self.young, off) end
    local old = self.old
    _, off = find(self, old, k, h)
    if not off then return nil end
    local v = values(old, off)
    self:put(k, unpack(v))
    return v
end

-- entries held (at most 2 * cap; an entry copied back from the old generation counts twice
-- until that one is dropped)
function B:count()
    if self.cap <= 0 then return 0 end
    return self.young.n + self.old.n
end

function B:clear()
    if self.cap <= 0 then return end
    clear_gen(self, self.young)
    clear_gen(self, self.old)
end

return _M
