-- ron.accounting.export.exporters.chaos: wraps any exporter with seeded faults (issue 4, G-9):
-- failures, latency, timeouts, lost ACKs, duplicate deliveries. docs/EXPORT.md "The chaos
-- exporter" is the contract.
--
--   local chaos = require("ron.accounting.export.exporters.chaos")
--   local e = chaos.wrap(inner, { seed = 1, failure_rate = 0.3,
--                                 failure = "retry_network", latency_ms = { 5, 20 } })
--   e:put(slice) -> the contract's answers; e:head(...) = inner:head(...); e:close()
--   e:stats()    -> { puts =, passed =, failure =, timeout =, lost_ack =, dup_delivery =,
--                     latency =, latency_ms_total = }
--
-- Per put, in this order (each fault an independent draw, five draws per put whatever
-- happens, so one seed gives one sequence of faults):
--   latency       sleep uniform min..max ms (task.sleep: only inside a task, see below)
--   failure       answer opts.failure without calling inner
--   timeout       sleep timeout_ms, call inner when timeout_stores, answer retry_timeout
--   lost ACK      call inner; when it answered ok (stored), answer retry_network instead
--   duplicate     call inner twice and answer the second result (dup after an ok)
-- Sleeps use ron.base.task.sleep when the task module is loaded and the put runs
-- inside one of its tasks; anywhere else (plain Lua, lite mode) a sleep is skipped and
-- not counted, so wrapping a synchronous caller never blocks the loop thread.
local exporter = require("ron.accounting.export.exporters")
local rng = require("ron.base.rng")
local task = require("ron.base.task")
local type, error, pairs, tostring, floor, format, setmetatable, pcall =
      type, error, pairs, tostring, math.floor, string.format, setmetatable, pcall

local _M = {}

_M.DEFAULTS = { seed = 1, failure_rate = 0, failure = "retry_network", latency_ms = nil,
                timeout_rate = 0, timeout_ms = 0, timeout_stores = false, lost_ack_rate = 0,
                dup_rate = 0 }

local OPTS = { seed = true, failure_rate = true, failure = true, latency_ms = true,
               timeout_rate = true, timeout_ms = true, timeout_stores = true,
               lost_ack_rate = true, dup_rate = true }
local FN = "exporters.chaos.wrap"

local function check_rate(opts, k)
    local v = opts[k]
    if v == nil then return _M.DEFAULTS[k] end
    if type(v) ~= "number" or v ~= v or v < 0 or v > 1 then
        error(format("%s: %s must be a number in 0..1, got %s", FN, k, tostring(v)), 3)
    end
    return v
end

local function check_ms(what, v)
    if type(v) ~= "number" or v ~= floor(v) or v < 0 or v > 3600000 then
        error(format("%s: %s must be an integer in 0..3600000, got %s", FN, what,
                     tostring(v)), 3)
    end
    return v
end

local E = {}
E.__index = E

function _M.wrap(inner, opts)
    exporter.check(inner)
    if opts == nil then opts = {} end
    if type(opts) ~= "table" then error(FN .. ": opts must be a table, got " .. type(opts), 2) end
    for k in pairs(opts) do
        if not OPTS[k] then error(FN .. ": unknown option " .. tostring(k), 2) end
    end
    local seed = opts.seed == nil and _M.DEFAULTS.seed or opts.seed
    if type(seed) ~= "number" or seed ~= floor(seed) then
        error(FN .. ": seed must be an integer, got " .. tostring(seed), 2)
    end
    local failure = opts.failure == nil and _M.DEFAULTS.failure or opts.failure
    if not exporter.RETRYABLE[failure] then
        error(FN .. ": failure must be retry_network, retry_remote_5xx or retry_timeout, got "
              .. tostring(failure), 2)
    end
    local lat = opts.latency_ms
    if lat ~= nil then
        if type(lat) ~= "table" then
            error(FN .. ": latency_ms must be { min, max }, got " .. type(lat), 2)
        end
        for k in pairs(lat) do
            if k ~= 1 and k ~= 2 then
                error(FN .. ": latency_ms must be { min, max }, got key " .. tostring(k), 2)
            end
        end
        check_ms("latency_ms[1]", lat[1])
        check_ms("latency_ms[2]", lat[2])
        if lat[1] > lat[2] then
            error(format("%s: latency_ms min (%d) exceeds max (%d)", FN, lat[1], lat[2]), 2)
        end
        lat = { lat[1], lat[2] }
    end
    local ts = opts.timeout_stores
    if ts == nil then ts = _M.DEFAULTS.timeout_stores end
    if type(ts) ~= "boolean" then
        error(FN .. ": timeout_stores must be a boolean, got " .. type(ts), 2)
    end
    local self = setmetatable({
        inner = inner,
        rng = rng.new(seed),
        failure_rate = check_rate(opts, "failure_rate"),
        failure = failure,
        latency_ms = lat,
        timeout_rate = check_rate(opts, "timeout_rate"),
        timeout_ms = check_ms("timeout_ms", opts.timeout_ms == nil and _M.DEFAULTS.timeout_ms
                              or opts.timeout_ms),
        timeout_stores = ts,
        lost_ack_rate = check_rate(opts, "lost_ack_rate"),
        dup_rate = check_rate(opts, "dup_rate"),
        counts = { puts = 0, passed = 0, failure = 0, timeout = 0, lost_ack = 0,
                   dup_delivery = 0, latency = 0, latency_ms_total = 0 },
    }, E)
    local okh, head = pcall(function() return inner.head end)
    if okh and head ~= nil then
        self.head = function(_, ...) return inner:head(...) end
    end
    return self
end

-- task.sleep(ms) when running inside a task; false otherwise.
local function sleep(ms)
    local ok, err = pcall(task.sleep, ms)
    if ok then return true end
    if tostring(err):find("outside a task", 1, true) then return false end
    error(err, 0)
end

function E:put(slice)
    local c = self.counts
    c.puts = c.puts + 1
    local r = self.rng
    local r_lat, r_fail, r_timeout, r_lost, r_dup = r:float(), r:float(), r:float(), r:float(),
                                                    r:float()
    local lat = self.latency_ms
    if lat then
        local ms = lat[1] + floor(r_lat * (lat[2] - lat[1] + 1))
        if sleep(ms) then
            c.latency = c.latency + 1
            c.latency_ms_total = c.latency_ms_total + ms
        end
    end
    if r_fail < self.failure_rate then
        c.failure = c.failure + 1
        return self.failure, "chaos: injected failure"
    end
    if r_timeout < self.timeout_rate then
        c.timeout = c.timeout + 1
        sleep(self.timeout_ms)
        if self.timeout_stores then
            local s, err = self.inner:put(slice)
            if s == nil then return nil, err end
        end
        return "retry_timeout", "chaos: injected timeout"
    end
    local s, detail = self.inner:put(slice)
    if s == nil then return nil, detail end
    if s == "ok" and r_lost < self.lost_ack_rate then
        c.lost_ack = c.lost_ack + 1
        return "retry_network", "chaos: lost ACK (stored)"
    end
    if r_dup < self.dup_rate then
        c.dup_delivery = c.dup_delivery + 1
        return self.inner:put(slice)
    end
    c.passed = c.passed + 1
    return s, detail
end

E.stats = exporter.stats

function E:close()
    return self.inner:close()
end

return _M
