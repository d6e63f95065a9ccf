-- ron.base.lru: a bounded cache of two generations (I-7), the one the
-- daemon's idempotency keys (node/ingest.lua) and the wallet's answers and balances
-- (ron.wallet.service, ron.wallet.cache) keep.
--
--   local lru = require("ron.base.lru")
--   local c = lru.new(cap)   -- cap >= 0 entries per generation; 0: nothing is kept
--   c:put(k, v)              c:get(k) -> v | nil      c:delete(k)      c:clear()
--   c:count()                -- entries held (at most 2 * cap)
--
-- Shed policy: when the young generation is full it becomes the old one and the old one is
-- dropped whole; a hit in the old generation moves the entry back to the young one. So
-- the entries used in the last cap insertions survive, at O(1) per call and no list to
-- maintain (no garbage per hit beyond the table slots).
local setmetatable = setmetatable

local _M = {}

local L = {}
L.__index = L

function _M.new(cap)
    return setmetatable({ cap = cap, young = {}, old = {}, n_young = 0, n_old = 0 }, L)
end

function L:put(k, v)
    if self.cap <= 0 then return end
    if self.young[k] == nil then
        if self.n_young >= self.cap then
            self.old, self.n_old = self.young, self.n_young
            self.young, self.n_young = {}, 0
        end
        self.n_young = self.n_young + 1
    end
    self.young[k] = v
end

function L:get(k)
    local v = self.young[k]
    if v ~= nil then return v end
    v = self.old[k]
    if v ~= nil then
        self.old[k] = nil
        self.n_old = self.n_old - 1
        self:put(k, v)
    end
    return v
end

function L:delete(k)
    if self.young[k] ~= nil then
        self.young[k] = nil
        self.n_young = self.n_young - 1
    end
    if self.old[k] ~= nil then
        self.old[k] = nil
        self.n_old = self.n_old - 1
    end
end

function L:clear()
    self.young, self.old, self.n_young, self.n_old = {}, {}, 0, 0
end

function L:count() return self.n_young + self.n_old end

return _M
