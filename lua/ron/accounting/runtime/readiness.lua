-- ron.accounting.runtime.readiness: readiness (C-6): rollover running and the exporter ok; a
-- sustained breach sets degraded (I-8); backlog and ACK-latency samples in bounded rings.
-- Methods of the runtime object (ron.accounting.runtime.rt); init.lua composes them.
local rt = require "ron.accounting.runtime.rt"
local uv = require "luv"

local format, sort, concat, pcall, next =
      string.format, table.sort, table.concat, pcall, next
local RT, slice_key, log = rt.RT, rt.slice_key, rt.log
function RT.slice_id(s)
    return { tenant = s.tenant, dimension = s.dimension, window_start_s = s.id.window_start_s,
             window_len_s = s.id.window_len_s, seq = s.id.seq }
end

-- A bounded ring of the last cfg.ready_samples values.
function RT:sample(ring, v)
    local cap = self.cfg.ready_samples
    ring.i = ring.i % cap + 1
    ring[ring.i] = v
    if ring.n < cap then ring.n = ring.n + 1 end
end

local function p95(ring)
    if ring.n == 0 then return 0 end
    local a = {}
    for i = 1, ring.n do a[i] = ring[i] end
    sort(a)
    local k = math.ceil(0.95 * ring.n)
    return a[k]
end
rt.p95 = p95 -- for specs

function RT:acked(s)
    local k = slice_key(s)
    local t0 = self.offered_at[k]
    self.offered_at[k] = nil
    local lat = t0 and uv.now() - t0
    if lat then self:sample(self.latency_samples, lat) end
    if next(self.subs) then
        self:publish({ type = "SliceExported", slice_id = self.slice_id(s), latency_ms = lat })
    end
end

-- -> ready, reasons (a list of strings; empty when ready), details
function RT:ready()
    local cfg, reasons = self.cfg, {}
    local now = uv.now()
    local period = self.tick_ms or self.meter:window_len() * 1000
    local last = self.last_tick_ms or self.started_ms
    if self.stopping then
        reasons[#reasons + 1] = "stopping"
    elseif now - last > 2 * period + 1000 then
        reasons[#reasons + 1] = format("rollover_task stalled for %d ms", now - last)
    end
    local bp, lp = p95(self.backlog_samples), p95(self.latency_samples)
    if bp > cfg.ready_backlog_p95 then
        reasons[#reasons + 1] = format("backlog p95 %d > %d", bp, cfg.ready_backlog_p95)
    end
    if lp > cfg.ready_ack_latency_p95_ms then
        reasons[#reasons + 1] = format("ack latency p95 %d ms > %d ms", lp,
                                       cfg.ready_ack_latency_p95_ms)
    end
    if self.is_degraded then reasons[#reasons + 1] = "degraded (exporter)" end
    -- the meter's own state (issue 14 item 2): the WAL refusing rollovers (full, its cap)
    -- sets the core's degraded flag; a failing rollover (read-only disk, a segment in doubt)
    -- is the last rollover's error
    local mdeg = self.meter:degraded()
    if mdeg and not self.is_degraded then
        reasons[#reasons + 1] = "meter degraded (the WAL refuses new slices: full or at its cap)"
    end
    if self.seal_err then reasons[#reasons + 1] = "sealing fails: " .. self.seal_err end
    if self.step_ahead_ms then
        reasons[#reasons + 1] = format("the clock is %.0f s ahead of the monotonic clock: "
                                       .. "sealing holds at the monotonic time",
                                       self.step_ahead_ms / 1000)
    end
    if self.stuck_n > 0 then reasons[#reasons + 1] = self:stuck_reason() end
    return #reasons == 0, reasons, { backlog_p95 = bp, ack_latency_p95_ms = lp,
                                     stuck_streams = self.stuck_n, meter_degraded = mdeg }
end

function RT:exporter_ok()
    local cfg = self.cfg
    return p95(self.backlog_samples) <= cfg.ready_backlog_p95
       and p95(self.latency_samples) <= cfg.ready_ack_latency_p95_ms
end

function RT:set_degraded(on)
    if on == self.is_degraded then return end
    self.is_degraded = on
    pcall(self.meter.set_degraded, self.meter, on)
    if self.audit then
        self:audit_emit("readiness", { event = on and "degraded" or "recovered",
                                       backlog_p95 = p95(self.backlog_samples),
                                       ack_latency_p95_ms = p95(self.latency_samples) })
    end
    log("%s: backlog p95 %d, ack latency p95 %d ms", on and "degraded (exporter)" or
        "recovered", p95(self.backlog_samples), p95(self.latency_samples))
end

-- Sealed, un-ACKed slices: the core's count (no wrapping of every pending slice).
function RT:backlog()
    return self.meter:pending_count()
end

-- /readyz flips (issue 16): one audit record when readiness changes, with its reasons.
function RT:audit_ready()
    local ready, reasons = self:ready()
    if ready == self.was_ready then return end
    self.was_ready = ready
    self:audit_emit("readiness", { event = ready and "ready" or "not_ready",
                                   reasons = rt.audit_text(concat(reasons, "; ")) })
end

function RT:health_step()
    local now = uv.now()
    self:sample(self.backlog_samples, self:backlog())
    if self.audit then self:audit_ready() end
    if self:exporter_ok() then
        self.breach_since = nil
        self.healthy_since = self.healthy_since or now
        if self.is_degraded and now - self.healthy_since >= self.cfg.degrade_after_ms then
            self:set_degraded(false)
        end
    else
        self.healthy_since = nil
        self.breach_since = self.breach_since or now
        if not self.is_degraded and now - self.breach_since >= self.cfg.degrade_after_ms then
            self:set_degraded(true)
        end
    end
end

function RT:health_loop()
    while not self.stopping do
        self:health_step()
        if not self:pause(self.cfg.health_interval_ms) then break end
    end
end
