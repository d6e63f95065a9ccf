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
local offheap = require("ron.base.offheap")

local C = ffi.C
local band = bit.band
local select, setmetatable, type, error = select, setmetatable, type, error
local ffi_copy, ffi_string, ffi_cast, ffi_fill = ffi.copy, ffi.string, ffi.cast, ffi.fill
local hash, alloc = offheap.hash, offheap.alloc

local u8p = ffi.typeof("uint8_t *")
local u32p = ffi.typeof("uint32_t *")
local i32p = ffi.typeof("int32_t *")
local WHO = "ron.base.blobcache"

local _M = {}

local function pad4(n) return band(n + 3, -4) end

-- A generation: the arena (bytes), the index (slots: a record's offset / 4 + 1, 0 empty;
-- tags: its hash), entries n, bytes used.
local function new_gen(bytes, nslots)
    return { arena = alloc(u8p, bytes, 1, WHO), slots = alloc(u32p, nslots, 4, WHO),
             tags = alloc(i32p, nslots, 4, WHO), n = 0, used = 0 }
end

local B = {}
B.__index = B

function _M.new(cap, bytes)
    offheap.check_count(cap, "cap", WHO)
    bytes = bytes or cap * 512
    offheap.check_count(bytes, "bytes", WHO)
    local self = setmetatable({ cap = cap, bytes = pad4(bytes) }, B)
    if cap > 0 then
        local nslots = offheap.slots_for(cap)
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

-- the record's size for key k and values ... (each a string, else an error for put's caller)
local function size_of(k, ...)
    if type(k) ~= "string" then error("ron.base.blobcache: a key is a string", 3) end
    local size = 12 + pad4(#k)
    for i = 1, select("#", ...) do
        local v = select(i, ...)
        if type(v) ~= "string" then error("ron.base.blobcache: a value is a string", 3) end
        size = size + 4 + pad4(#v)
    end
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

function B:put(k, ...)
    local size = size_of(k, ...)
    if self.cap <= 0 or size > self.bytes then return false end
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
