-- ron.base.numcache: a bounded cache from short keys to an int64_t and a number, kept OFF
-- the Lua heap (I-7): the shed policy of ron.base.lru (two generations), each generation
-- one calloc'd array of fixed slots (the key inline) under open addressing.
--
--   local numcache = require("ron.base.numcache")
--   local c = numcache.new(cap)  -- cap >= 0 entries per generation (0: nothing kept)
--   c:put(k, i, x)               -- k a string of 1..KEY_MAX bytes, i an int64_t (or an
--                                -- integer number), x a number; -> true, or false when
--                                -- not kept (a longer key, cap 0)
--   c:get(k)                     -- -> i (a new int64_t), x | nil
--   c:delete(k)  c:clear()  c:count()
--
-- Why (issue 25): the wallet's balance cache held two generations of up to 100,000 balances
-- as Lua objects (the key, the entry's table, its amount, its account). LuaJIT sweeps every
-- object once per cycle, in about one group commit's steps (docs/WALLET.md §8): with
-- 200,000 balances cached, the slowest groups' loop CPU was 61-79 ms and the hot case's
-- p99 74 ms against 39. Here an entry is 80 bytes of a slot array: nothing to sweep.
--
-- Shed policy as ron.base.lru: when the young generation holds cap entries it becomes the
-- old one and the old one is dropped whole; a hit in the old generation moves back to the
-- young one. Bounded: 2 arrays of (a power of two >= 2 * cap) slots of 80 bytes, allocated
-- zeroed at new() (calloc: resident only as the entries fill them).
local ffi = require("ffi")
local bit = require("bit")
local blobcache = require("ron.base.blobcache") -- (its hash; memcmp and calloc declared)

local C = ffi.C
local band = bit.band
local type, error, setmetatable, pcall = type, error, setmetatable, pcall
local ffi_copy, ffi_fill, ffi_gc, ffi_cast = ffi.copy, ffi.fill, ffi.gc, ffi.cast
local hash = blobcache.hash

local KEY_MAX = 56
pcall(ffi.cdef, [[
typedef struct ron_numcache_slot {
    int32_t tag;       /* the key's hash */
    int32_t klen;      /* 0: empty */
    uint8_t key[56];
    int64_t i;
    double x;
} ron_numcache_slot;
]])
local SLOT = ffi.sizeof("ron_numcache_slot")
local slotp = ffi.typeof("ron_numcache_slot *")

local _M = { KEY_MAX = KEY_MAX }

local N = {}
N.__index = N

local function new_gen(nslots)
    local p = C.calloc(nslots, SLOT)
    if p == nil then error("ron.base.numcache: out of memory", 3) end
    return { slots = ffi_gc(ffi_cast(slotp, p), C.free), n = 0 }
end

function _M.new(cap)
    if type(cap) ~= "number" or cap < 0 or cap % 1 ~= 0 then
        error("ron.base.numcache: cap must be an integer >= 0", 2)
    end
    local self = setmetatable({ cap = cap }, N)
    if cap > 0 then
        local nslots = 8
        while nslots < 2 * cap do nslots = nslots * 2 end
        self.mask = nslots - 1
        self.young, self.old = new_gen(nslots), new_gen(nslots)
    end
    return self
end

-- -> the slot index of k in g, and whether it holds k (else the empty slot k would take)
local function find(mask, g, k, h)
    local sl, klen = g.slots, #k
    local i = band(h, mask)
    while true do
        local s = sl[i]
        if s.klen == 0 then return i, false end
        if s.tag == h and s.klen == klen and C.memcmp(s.key, k, klen) == 0 then
            return i, true
        end
        i = band(i + 1, mask)
    end
end

local function clear_gen(self, g)
    ffi_fill(g.slots, (self.mask + 1) * SLOT, 0)
    g.n = 0
end

local function check_key(k)
    if type(k) ~= "string" or #k == 0 then
        error("ron.base.numcache: a key is a non-empty string", 3)
    end
end

function N:put(k, i, x)
    check_key(k)
    if type(x) ~= "number" then error("ron.base.numcache: x must be a number", 2) end
    if self.cap <= 0 or #k > KEY_MAX then return false end
    local h, g = hash(k), self.young
    local at, found = find(self.mask, g, k, h)
    if not found and g.n >= self.cap then
        self.old, self.young = g, self.old
        g = self.young
        clear_gen(self, g)
        at = find(self.mask, g, k, h)
    end
    local s = g.slots[at]
    if not found then
        g.n = g.n + 1
        s.tag, s.klen = h, #k
        ffi_copy(s.key, k, #k)
    end
    s.i, s.x = i, x
    return true
end

-- Removes slot at of g, shifting back the slots after it that probed past it (linear
-- probing's deletion: no tombstones, so a lookup still stops at the first empty slot).
local function remove(mask, g, at)
    local sl = g.slots
    local j = at
    while true do
        j = band(j + 1, mask)
        local s = sl[j]
        if s.klen == 0 then break end
        local home = band(s.tag, mask)
        -- s stays when its home lies cyclically in (at, j]
        local stays
        if at < j then stays = home > at and home <= j else stays = home > at or home <= j end
        if not stays then
            ffi_copy(sl + at, sl + j, SLOT)
            at = j
        end
    end
    sl[at].klen = 0
    g.n = g.n - 1
end

function N:get(k)
    check_key(k)
    if self.cap <= 0 or #k > KEY_MAX then return nil end
    local h, mask = hash(k), self.mask
    local at, found = find(mask, self.young, k, h)
    if found then
        local s = self.young.slots[at]
        return s.i, s.x -- (an int64_t field reads as a new int64_t)
    end
    local old = self.old
    at, found = find(mask, old, k, h)
    if not found then return nil end
    local s = old.slots[at]
    local i, x = s.i, s.x
    remove(mask, old, at)
    self:put(k, i, x)
    return i, x
end

local function delete_in(mask, g, k, h)
    local at, found = find(mask, g, k, h)
    if found then remove(mask, g, at) end
end

function N:delete(k)
    check_key(k)
    if self.cap <= 0 or #k > KEY_MAX then return end
    local h = hash(k)
    delete_in(self.mask, self.young, k, h)
    delete_in(self.mask, self.old, k, h)
end

function N:clear()
    if self.cap <= 0 then return end
    clear_gen(self, self.young)
    clear_gen(self, self.old)
end

function N:count()
    if self.cap <= 0 then return 0 end
    return self.young.n + self.old.n
end

return _M
