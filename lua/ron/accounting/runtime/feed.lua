-- ron.accounting.runtime.feed: the rollover task and the WAL replay: seals on the threadpool
-- (offload.rollover), then hands what entered the pending ring to the offers (re-offers
-- first when something was shed). Owns the clock guard, the push number fed, the sealing
-- error and the sealed count.
local rt = require("ron.accounting.runtime.rt")
local offload = require("ron.accounting.runtime.offload")
local uv = require("luv")

local floor, ipairs, next, tostring = math.floor, ipairs, next, tostring
local log = rt.log

local _M = {}

local F = rt.class(_M, "Feed")

function _M.new(o)
    return rt.object(F, o, "task cfg meter offers bus life stop_ch clock mono tick_ms", {
        step = {}, clock_steps = 0, step_ahead_ms = nil, -- seal_now_ms's guard
        fed = 0,              -- the meter's push number up to which slices were fed
        seal_err = nil,       -- the last rollover's error while sealing fails
        sealed_total = 0,     -- slices sealed by this runtime
        last_tick_ms = nil, replayed = false,
    })
end

-- The WAL replay at start: every pending slice, oldest first.
function F:replay()
    self.offers:reoffer()
    self.replayed = true
end

-- What a pool call listed since push number fed (fresh) and the number to pass next time.
function F:feed(fresh, last)
    if last then self.fed = last end
    self.offers:feed(fresh)
end

function F:now_s()
    if self.clock then return self.clock() end
    local c = self.meter._clock
    if c then return c() end
    local s, us = uv.gettimeofday()
    return s + us / 1e6
end

-- The time a rollover seals up to, guarded against a forward step of the clock (issue 14
-- item 3): the wall clock is compared with where the monotonic clock says it should be
-- since the last rollover. A step forward beyond clock_step_tolerance_ms is held: sealing
-- goes on at the monotonic clock's time (no window that has not ended is sealed), logged
-- once, counted (accounting_clock_steps_total), a /readyz reason; when the wall clock comes
-- back, or the step has lasted clock_step_confirm_ms (a real correction, e.g. a node whose
-- clock was slow), the wall clock is followed again. Backward steps need no guard (I-15:
-- nothing is sealed twice). The guard is off with an injected clock (the runtime's or the
-- meter's) unless the caller injects the monotonic clock too (tests' clocks jump).
function F:seal_now_ms()
    local wall = floor(self:now_s() * 1000)
    local tol = self.cfg.clock_step_tolerance_ms
    if not tol or ((self.clock or self.meter._clock) and not self.mono) then return wall end
    local mono = self.mono and self.mono() or uv.hrtime() / 1e6
    local g = self.step
    if not g.wall then
        g.wall, g.mono = wall, mono
        return wall
    end
    local expect = floor(g.wall + (mono - g.mono))
    if wall - expect > tol then
        if not g.since then
            g.since = mono
            self.clock_steps = self.clock_steps + 1
            log("the clock stepped forward by %.0f s (beyond clock_step_tolerance_ms %d): "
                .. "sealing follows the monotonic clock until the wall clock comes back, or "
                .. "for clock_step_confirm_ms (%d) if the step stays", (wall - expect) / 1000,
                tol, self.cfg.clock_step_confirm_ms)
        end
        if mono - g.since < self.cfg.clock_step_confirm_ms then
            self.step_ahead_ms = wall - expect
            return expect
        end
        log("the clock step of %.0f s lasted %d ms: taken as the new time", (wall - expect) / 1000,
            self.cfg.clock_step_confirm_ms)
    elseif g.since then
        log("the clock is back (%.0f s from the monotonic clock's time): sealing follows it",
            (wall - expect) / 1000)
    end
    g.since, self.step_ahead_ms = nil, nil
    g.wall, g.mono = wall, mono
    return wall
end

-- How long until the next rollover: tick_ms, or to the next UTC window boundary.
function F:wait_ms()
    if self.tick_ms then return self.tick_ms end
    local win = self.meter:window_len()
    local now = self:now_s()
    local nxt = (floor(now / win) + 1) * win
    return floor((nxt - now) * 1000) + 1
end

-- One rollover in the pool; the error logged when it starts or changes (readiness shows it
-- meanwhile). -> the pool call's fresh list and push number
function F:rollover()
    local sealed, rerr, fresh, last = offload.rollover(self.meter, self:seal_now_ms(), self.fed)
    if rerr then
        if self.seal_err ~= tostring(rerr) then log("rollover: %s", rerr) end
        self.seal_err = tostring(rerr)
    elseif self.seal_err then
        log("rollover: sealing works again (was: %s)", self.seal_err)
        self.seal_err = nil
    end
    self.last_tick_ms = uv.now()
    if sealed then
        self.sealed_total = self.sealed_total + #sealed
        local bus = self.bus
        if next(bus.subs) then
            for _, sl in ipairs(sealed) do
                bus:publish({ type = "SliceSealed", slice_id = rt.slice_id(sl), b3 = sl.b3 })
            end
        end
    end
    return fresh, last
end

function F:rollover_loop()
    local task = self.task
    while not self.life.stopping do
        self.last_tick_ms = uv.now()
        local _, err = task.select({ self.stop_ch }, self:wait_ms())
        if err ~= "Timeout" then break end -- stop (Closed) or shutdown (Canceled)
        local fresh, last = self:rollover()
        if self.life.stopping then break end
        -- Re-offers first (older, shed earlier), then the new ones: reoffer() walks the
        -- whole pending ring, which holds the sealed slices as well, in order. When nothing
        -- was shed since the last walk every older pending slice is in the pipeline: what
        -- entered the ring since the last pool call is offered alone (no O(pending) walk
        -- per tick).
        if self.offers.need then
            self.offers:reoffer()
            if last then self.fed = last end
        else
            self:feed(fresh, last)
        end
    end
end

return _M
