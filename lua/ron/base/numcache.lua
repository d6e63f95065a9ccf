-- ron.base.numcache: a bounded cache from short keys to an int64_t and a number, kept OFF
-- the Lua heap (I-7): the shed policy of ron.base.lru (two generations), each generation
-- calloc'd arrays of fixed slots (the key inline) under open addressing.
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
-- young one. Bounded: 2 generations of (a power of two >= 2 * cap) slots of 80 bytes,
-- allocated zeroed at new() (calloc: resident only as the entries fill them), and a front
-- of the last FRONT (256) keys read as Lua objects (get, below).
local ffi = require("ffi")
local bit = require("bit")
local offheap = require("ron.base.offheap")

local C = ffi.C
local band = bit.band
local type, error, setmetatable = type, error, setmetatable
local ffi_copy, ffi_fill = ffi.copy, ffi.fill
local hash = offheap.hash

local KEY_MAX = 56
local i32p = ffi.typeof("int32_t *")
local u8p = ffi.typeof("uint8_t *")
local i64p = ffi.typeof("int64_t *")
local f64p = ffi.typeof("double *")
local WHO = "ron.base.numcache"

local _M = { KEY_MAX = KEY_MAX }

local N = {}
N.__index = N

local function alloc(ct, n, size) return offheap.alloc(ct, n, size, WHO) end

-- A generation: parallel arrays of slots (tags: the key's hash; klens: its length, 0 for
-- an empty slot; keys: KEY_MAX bytes a slot; is, xs: the values), n entries. Arrays, not
-- an array of structs: an element of a number array reads as a number, where a struct
-- element is a reference the interpreter allocates (the wallet's reads run interpreted as
-- often as compiled).
local function new_gen(nslots)
    return { tags = alloc(i32p, nslots, 4), klens = alloc(i32p, nslots, 4),
             keys = alloc(u8p, nslots, KEY_MAX), is = alloc(i64p, nslots, 8),
             xs = alloc(f64p, nslots, 8), n = 0 }
end

function _M.new(cap)
    offheap.check_count(cap, "cap", WHO)
    local self = setmetatable({ cap = cap, front = {}, front_n = 0 }, N)
    if cap > 0 then
        local nslots = offheap.slots_for(cap)
        self.mask = nslots - 1
        self.young, self.old = new_gen(nslots), new_gen(nslots)
    end
    return self
end

-- -> the slot index of k in g, and whether it holds k (else the empty slot k would take)
local function find(mask, g, k, h)
    local tags, klens, klen = g.tags, g.klens, #k
    local i = band(h, mask)
    while true do
        local kl = klens[i]
        if kl == 0 then return i, false end
        if kl == klen and tags[i] == h and C.memcmp(g.keys + i * KEY_MAX, k, klen) == 0 then
            return i, true
        end
        i = band(i + 1, mask)
    end
end

local function clear_gen(self, g)
    ffi_fill(g.klens, (self.mask + 1) * 4, 0) -- (a slot of length 0 is empty)
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
    if self.front[k] then
        self.front[k] = nil
        self.front_n = self.front_n - 1
    end
    local h, g = hash(k), self.young
    local at, found = find(self.mask, g, k, h)
    if not found and g.n >= self.cap then
        self.old, self.young = g, self.old
        g = self.young
        clear_gen(self, g)
        self.front, self.front_n = {}, 0 -- (the dropped generation's keys may be there)
        at = find(self.mask, g, k, h)
    end
    if not found then
        g.n = g.n + 1
        g.tags[at], g.klens[at] = h, #k
        ffi_copy(g.keys + at * KEY_MAX, k, #k)
    end
    g.is[at], g.xs[at] = i, x
    return true
end

-- Removes slot at of g, shifting back the slots after it that probed past it (linear
-- probing's deletion: no tombstones, so a lookup still stops at the first empty slot).
local function remove(mask, g, at)
    local tags, klens, keys, is, xs = g.tags, g.klens, g.keys, g.is, g.xs
    local j = at
    while true do
        j = band(j + 1, mask)
        local kl = klens[j]
        if kl == 0 then break end
        local home = band(tags[j], mask)
        -- the slot stays when its home lies cyclically in (at, j]
        local stays
        if at < j then stays = home > at and home <= j else stays = home > at or home <= j end
        if not stays then
            tags[at], klens[at], is[at], xs[at] = tags[j], kl, is[j], xs[j]
            ffi_copy(keys + at * KEY_MAX, keys + j * KEY_MAX, kl)
            at = j
        end
    end
    klens[at] = 0
    g.n = g.n - 1
end

-- The last FRONT keys read, with their values, in a plain table: a hit there is one table
-- lookup, where the slots' lookup costs ~1 us interpreted (hash, memcmp); FRONT bounds the
-- Lua objects it holds. Emptied when full, on a generation's roll and by clear; a put or a
-- delete of a key drops it there.
_M.FRONT = 256

local function front_put(self, k, i, x)
    if self.front_n >= _M.FRONT then self.front, self.front_n = {}, 0 end
    self.front[k] = { i, x }
    self.front_n = self.front_n + 1
end

function N:get(k)
    local e = self.front[k]
    if e then return e[1], e[2] end
    check_key(k)
    if self.cap <= 0 or #k > KEY_MAX then return nil end
    local h, mask = hash(k), self.mask
    local g = self.young
    local at, found = find(mask, g, k, h)
    if found then
        local i, x = g.is[at], g.xs[at] -- (an int64_t element reads as a new one)
        front_put(self, k, i, x)
        return i, x
    end
    g = self.old
    at, found = find(mask, g, k, h)
    if not found then return nil end
    local i, x = g.is[at], g.xs[at]
    remove(mask, g, at)
    self:put(k, i, x)
    front_put(self, k, i, x)
    return i, x
end

local function delete_in(mask, g, k, h)
    local at, found = find(mask, g, k, h)
    if found then remove(mask, g, at) end
end

function N:delete(k)
    check_key(k)
    if self.cap <= 0 or #k > KEY_MAX then return end
    if self.front[k] then
        self.front[k] = nil
        self.front_n = self.front_n - 1
    end
    local h = hash(k)
    delete_in(self.mask, self.young, k, h)
    delete_in(self.mask, self.old, k, h)
end

function N:clear()
    if self.cap <= 0 then return end
    self.front, self.front_n = {}, 0
    clear_gen(self, self.young)
    clear_gen(self, self.old)
end

function N:count()
    if self.cap <= 0 then return 0 end
    return self.young.n + self.old.n
end

return _M
