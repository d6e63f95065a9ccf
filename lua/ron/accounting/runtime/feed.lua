-- ron.accounting.runtime.feed: feeding the router: new slices from the rollover task, pending
-- ones (WAL replay, re-offers) into pending_slices, bounded (a full channel leaves the slice
-- pending). Methods of the runtime object (ron.accounting.runtime.rt); init.lua composes them.
local rt = require "ron.accounting.runtime.rt"
local offload = require "ron.accounting.runtime.offload"
local uv = require "luv"

local floor, ipairs, next, tostring, tonumber =
      math.floor, ipairs, next, tostring, tonumber
local RT, skey, slice_key, log = rt.RT, rt.skey, rt.slice_key, rt.log
-- Offers one slice to pending_slices; false when full (counted, stays pending).
function RT:offer(s)
    local k = slice_key(s)
    if self.offered[k] then return true end
    local ok = self.pending_slices:try_send(s)
    if not ok then
        self.rejected.busy = self.rejected.busy + 1
        if self.audit then
            self:audit_emit("shed", { source = "runtime", reason = "busy", tenant = s.tenant,
                                      dimension = s.dimension, seq = tonumber(s.id.seq) })
        end
        self.need_reoffer = true
        return false
    end
    self.offered[k] = true
    if not self.offered_at[k] then self.offered_at[k] = uv.now() end
    return true
end

-- Offers a list of pending slices, oldest first, until pending_slices is full (the rest is
-- re-offered later: need_reoffer). fresh (RT:feed's lists): a slice its stream has already
-- delivered (seq <= the last one answered ok or dup) is not offered again. The rollover's
-- and the ACK batch's pool calls both list "since push number fed" and may overlap: a late
-- list can hold a slice the other one fed, that was exported and ACKed meanwhile. Offered
-- again, it went to the ledger past the ACK LRU: a dup, but after its stream's later seqs
-- (G-17's order check caught it, "63 -> 1").
function RT:offer_list(list, fresh)
    for _, s in ipairs(list) do
        local st = self.streams[skey(s.tenant, s.dimension)]
        if fresh and st and st.acked_seq and s.id.seq <= st.acked_seq then
            self.stale_listed = (self.stale_listed or 0) + 1 -- (specs read it)
        elseif st and st.blocked_seq and s.id.seq > st.blocked_seq then
            self.need_reoffer = true -- after the one its stream waits for (I-5)
        elseif not (st and st.dead) and not self:offer(s) then
            break
        end
    end
end

-- Every pending slice of the meter not in the pipeline yet, oldest first.
function RT:reoffer()
    self.need_reoffer = false
    self:offer_list(self.meter:pending())
end

-- What entered the pending ring since the last pool call (newly sealed slices, and slices
-- the WAL's backlog gave back as ACKs made room): offered in order. While older slices wait
-- for a re-offer (need_reoffer) these wait too: the router's re-offer walks the ring in
-- order, so a stream's later slice can never pass its earlier one (I-5).
function RT:feed(fresh, last)
    if last then self.fed = last end
    if fresh and #fresh > 0 and not self.need_reoffer then self:offer_list(fresh, true) end
end

function RT:now_s()
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
function RT:seal_now_ms()
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

function RT:rollover_loop()
    local task = self.task
    local win = self.meter:window_len()
    while not self.stopping do
        self.last_tick_ms = uv.now()
        local wait_ms = self.tick_ms
        if not wait_ms then
            local now = self:now_s()
            local nxt = (floor(now / win) + 1) * win
            wait_ms = floor((nxt - now) * 1000) + 1
        end
        local _, err = task.select({ self.stop_ch }, wait_ms)
        if err ~= "Timeout" then break end -- stop (Closed) or shutdown (Canceled)
        local sealed, rerr, fresh, last = offload.rollover(self.meter, self:seal_now_ms(),
                                                           self.fed)
        if rerr then
            -- logged when it starts or changes, not every tick; readiness shows it meanwhile
            if self.seal_err ~= tostring(rerr) then log("rollover: %s", rerr) end
            self.seal_err = tostring(rerr)
        elseif self.seal_err then
            log("rollover: sealing works again (was: %s)", self.seal_err)
            self.seal_err = nil
        end
        self.last_tick_ms = uv.now()
        if sealed then
            self.sealed_total = self.sealed_total + #sealed
            if next(self.subs) then
                for _, sl in ipairs(sealed) do
                    self:publish({ type = "SliceSealed", slice_id = self.slice_id(sl),
                                   b3 = sl.b3 })
                end
            end
        end
        if self.stopping then break end
        -- Re-offers first (older, shed earlier), then the new ones: reoffer() walks the
        -- whole pending ring, which holds the sealed slices as well, in order. When nothing
        -- was shed since the last walk every older pending slice is in the pipeline: what
        -- entered the ring since the last pool call is offered alone (no O(pending) walk
        -- per tick).
        if self.need_reoffer then
            self:reoffer()
            if last then self.fed = last end
        else
            self:feed(fresh, last)
        end
    end
end
