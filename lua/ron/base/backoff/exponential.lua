-- ron.base.backoff.exponential: jittered exponential backoff for export retries
-- (seed 001 §5: base 50 ms, cap 5 s). docs/EXPORT.md "Backoff" is the contract.
--
--   local b = require("ron.base.backoff.exponential").new {
--       base_ms = 50, cap_ms = 5000, jitter = "full", seed = 1 }
--   b:delay(attempt) -> ms        attempt 1, 2, ...: the wait before retry number attempt
--   b:reset()                     a new operation (decorrelated jitter starts over)
--
-- With c = min(cap_ms, base_ms * 2^(attempt-1)):
--   none          c
--   full          uniform integer in 0 .. c
--   equal         ceil(c/2) + uniform integer in 0 .. floor(c/2)   (so in ceil(c/2) .. c)
--   decorrelated  min(cap_ms, uniform integer in base_ms .. prev * 3), prev = the last delay
--                 (base_ms after reset() or at attempt 1); attempt only matters for the reset
-- Delays are whole milliseconds. The generator is ron.base.rng seeded by opts.seed:
-- the same seed gives the same delays; no global math.random state.
local rng = require("ron.base.rng")
local setmetatable, type, error, pairs, tostring, floor, min, format, time, clock =
      setmetatable, type, error, pairs, tostring, math.floor, math.min, string.format,
      os.time, os.clock

local _M = {
    name = "exponential",
    DEFAULTS = { base_ms = 50, cap_ms = 5000, jitter = "full" }, -- seed: time-derived
    JITTER = { none = true, full = true, equal = true, decorrelated = true },
}

local B = {}
B.__index = B

local FN = "backoff.exponential.new"
local OPTS = { base_ms = true, cap_ms = true, jitter = true, seed = true }
local MAX_MS = 86400000

local function check_ms(what, v)
    if type(v) ~= "number" or v ~= floor(v) or v < 1 or v > MAX_MS then
        error(format("%s: %s must be an integer in 1..%d, got %s", FN, what, MAX_MS,
                     tostring(v)), 3)
    end
    return v
end

function _M.new(opts)
    if opts == nil then opts = {} end
    if type(opts) ~= "table" then error(FN .. ": opts must be a table, got " .. type(opts), 2) end
    for k in pairs(opts) do
        if not OPTS[k] then error(FN .. ": unknown option " .. tostring(k), 2) end
    end
    local base = check_ms("base_ms", opts.base_ms == nil and _M.DEFAULTS.base_ms or opts.base_ms)
    local cap = check_ms("cap_ms", opts.cap_ms == nil and _M.DEFAULTS.cap_ms or opts.cap_ms)
    if base > cap then
        error(format("%s: base_ms (%d) must not exceed cap_ms (%d)", FN, base, cap), 2)
    end
    local jitter = opts.jitter == nil and _M.DEFAULTS.jitter or opts.jitter
    if not _M.JITTER[jitter] then
        error(FN .. ": jitter must be none, full, equal or decorrelated, got "
              .. tostring(jitter), 2)
    end
    local seed = opts.seed
    if seed == nil then seed = time() * 1000 + floor(clock() * 1e6) % 1000 end
    if type(seed) ~= "number" or seed ~= floor(seed) then
        error(FN .. ": seed must be an integer, got " .. tostring(seed), 2)
    end
    return setmetatable({ base_ms = base, cap_ms = cap, jitter = jitter, seed = seed,
                          rng = rng.new(seed), prev = base }, B)
end

-- min(cap, base * 2^(attempt-1)) without overflowing for large attempts.
local function ceiling(self, attempt)
    if attempt > 40 then return self.cap_ms end
    return min(self.cap_ms, self.base_ms * 2 ^ (attempt - 1))
end

function B:delay(attempt)
    if type(attempt) ~= "number" or attempt ~= floor(attempt) or attempt < 1 then
        error("backoff:delay: attempt must be an integer >= 1, got " .. tostring(attempt), 2)
    end
    local j = self.jitter
    if j == "decorrelated" then
        if attempt == 1 then self.prev = self.base_ms end
        local d = min(self.cap_ms, self.rng:int(self.base_ms, self.prev * 3))
        self.prev = d
        return d
    end
    local c = ceiling(self, attempt)
    if j == "none" then return c end
    if j == "full" then return self.rng:int(0, c) end
    local h = floor(c / 2) -- equal
    return c - h + self.rng:int(0, h)
end

function B:reset()
    self.prev = self.base_ms
end

return _M
