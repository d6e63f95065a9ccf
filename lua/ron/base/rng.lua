-- ron.base.rng: a small seeded pseudo-random generator for the policies (backoff
-- jitter, chaos faults). Deterministic per seed and independent of math.random's global
-- state, so a seeded run replays exactly (STYLE §9: no global state beyond the module).
--
--   local rng = require("ron.base.rng")
--   local r = rng.new(seed)      -- seed: an integer; the same seed gives the same stream
--   r:float()                    -- uniform in [0, 1)
--   r:int(lo, hi)                -- uniform integer in lo..hi (both included)
--
-- L'Ecuyer's combined multiplicative generator (CACM 31(6), 1988): period ~2.3e18, every
-- product below 2^53, so plain doubles compute it exactly under LuaJIT and PUC Lua alike.
-- Not for anything cryptographic.
local floor, type, error, tostring, setmetatable = math.floor, type, error, tostring,
                                                   setmetatable

local M1, A1 = 2147483563, 40014
local M2, A2 = 2147483399, 40692

local _M = {}

local R = {}
R.__index = R

local function step(x, a, m)
    return (a * x) % m
end

function _M.new(seed)
    if type(seed) ~= "number" or seed ~= floor(seed) or seed ~= seed
       or seed >= 2 ^ 53 or seed <= -2 ^ 53 then
        error("rng.new: seed must be an integer, got " .. tostring(seed), 2)
    end
    -- Two different, never zero, states from one seed; a few warm-up steps so that
    -- neighbouring seeds do not start with neighbouring outputs.
    local s = seed % (M1 - 1)
    local s1 = s + 1
    local s2 = (floor(seed / (M1 - 1)) + s * 7 + 12345) % (M2 - 1) + 1
    local r = setmetatable({ s1 = s1, s2 = s2 }, R)
    for _ = 1, 8 do r:float() end
    return r
end

function R:float()
    local s1, s2 = step(self.s1, A1, M1), step(self.s2, A2, M2)
    self.s1, self.s2 = s1, s2
    local z = (s1 - s2) % (M1 - 1) -- 0 .. M1-2
    return z / (M1 - 1)
end

function R:int(lo, hi)
    if hi <= lo then return lo end
    return lo + floor(self:float() * (hi - lo + 1))
end

return _M
