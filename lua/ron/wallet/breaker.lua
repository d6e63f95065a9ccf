-- ron.wallet.breaker: the wallet's circuit breaker in front of the ledger (seed 004 §5,
-- docs/WALLET.md §6, WLT-8). Pure state over an injected clock; no I/O, no tasks.
--
--   local breaker = require("ron.wallet.breaker")
--   local b = breaker.new { threshold = 20, window_ms = 10000, open_ms = 5000, probes = 10,
--                           clock = function() return now_ms end }
--   if b:allow() then ... b:record(ok) end      -- ok = true: success; false: a failure
--   b:state() -> "closed" | "open" | "half_open"; b:retry_after_s()
--
-- closed: failures are counted in a rolling window (a ring of one-second buckets); at
-- `threshold` failures within window_ms it opens. open: allow() is false for open_ms, then
-- half_open. half_open: allow() lets `probes` calls through (a call in flight counts); the
-- first success closes it (counts cleared), a failure opens it again.
local floor, max, ceil = math.floor, math.max, math.ceil
local setmetatable, type, error = setmetatable, type, error

local _M = {}

_M.DEFAULTS = { threshold = 20, window_ms = 10000, open_ms = 5000, probes = 10 }

local B = {}
B.__index = B

function _M.new(o)
    o = o or {}
    local self = setmetatable({}, B)
    for k, v in pairs(_M.DEFAULTS) do self[k] = o[k] or v end
    if type(o.clock) ~= "function" then error("breaker.new: clock (ms) is required", 2) end
    self.clock = o.clock
    self.n_buckets = max(1, ceil(self.window_ms / 1000))
    self.buckets, self.stamps = {}, {}
    for i = 1, self.n_buckets do self.buckets[i], self.stamps[i] = 0, -1 end
    self.st = "closed"
    self.opened_at = 0
    self.probing = 0
    self.opens_total = 0
    return self
end

local function failures(self, now)
    local sec = floor(now / 1000)
    local n = 0
    for i = 1, self.n_buckets do
        if self.stamps[i] > sec - self.n_buckets then n = n + self.buckets[i] end
    end
    return n
end

local function open(self, now)
    self.st, self.opened_at, self.probing = "open", now, 0
    self.opens_total = self.opens_total + 1
end

function B:state()
    if self.st == "open" and self.clock() - self.opened_at >= self.open_ms then
        self.st, self.probing = "half_open", 0
    end
    return self.st
end

function B:allow()
    local st = self:state()
    if st == "closed" then return true end
    if st == "open" then return false end
    if self.probing >= self.probes then return false end
    self.probing = self.probing + 1
    return true
end

function B:record(ok)
    -- (a success while closed changes nothing: every member of a group is recorded, and
    -- the clock was read for each, issue 25)
    if ok and self.st == "closed" then return end
    local now = self.clock()
    local st = self:state()
    if st == "half_open" then
        self.probing = max(0, self.probing - 1)
        if ok then
            self.st = "closed"
            for i = 1, self.n_buckets do self.buckets[i], self.stamps[i] = 0, -1 end
        else
            open(self, now)
        end
        return
    end
    if ok or st == "open" then return end
    local sec = floor(now / 1000)
    local i = sec % self.n_buckets + 1
    if self.stamps[i] ~= sec then self.buckets[i], self.stamps[i] = 0, sec end
    self.buckets[i] = self.buckets[i] + 1
    if failures(self, now) >= self.threshold then open(self, now) end
end

-- Seconds until an open breaker lets probes through (at least 1).
function B:retry_after_s()
    if self:state() ~= "open" then return 1 end
    return max(1, ceil((self.open_ms - (self.clock() - self.opened_at)) / 1000))
end

function B:failures() return failures(self, self.clock()) end

return _M
