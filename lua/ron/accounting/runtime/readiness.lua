-- ron.accounting.runtime.readiness: readiness (C-6): rollover running and the exporter ok; a
-- sustained breach sets degraded (I-8). Owns the backlog and ACK-latency samples (bounded
-- rings), the breach/health timers and the degraded flag.
local rt = require("ron.accounting.runtime.rt")
local uv = require("luv")

local format, concat, pcall = string.format, table.concat, pcall
local p95, log = rt.p95, rt.log

local _M = {}

local R = rt.class(_M, "Readiness")

function _M.new(o)
    return rt.object(R, o, "task cfg meter feeder stuck life stop_ch tick_ms audit", {
        started_ms = uv.now(),
        backlog_samples = { n = 0, i = 0 }, latency_samples = { n = 0, i = 0 },
        breach_since = nil, healthy_since = nil, is_degraded = false, was_ready = nil,
    })
end

-- A bounded ring of the last cfg.ready_samples values.
function R:sample(ring, v)
    local cap = self.cfg.ready_samples
    ring.i = ring.i % cap + 1
    ring[ring.i] = v
    if ring.n < cap then ring.n = ring.n + 1 end
end

-- An export's latency (offer -> ACK, or an op given up at its budget).
function R:sample_latency(ms)
    self:sample(self.latency_samples, ms)
end

-- Sealed, un-ACKed slices: the core's count (no wrapping of every pending slice).
function R:backlog()
    return self.meter:pending_count()
end

-- The meter's and the feed's reasons (issue 14 items 2, 3): the WAL refusing rollovers
-- (full, its cap) sets the core's degraded flag; a failing rollover (read-only disk, a
-- segment in doubt) is the last rollover's error; a held clock step.
function R:meter_reasons(reasons)
    local f = self.feeder
    local mdeg = self.meter:degraded()
    if mdeg and not self.is_degraded then
        reasons[#reasons + 1] = "meter degraded (the WAL refuses new slices: full or at its cap)"
    end
    if f.seal_err then reasons[#reasons + 1] = "sealing fails: " .. f.seal_err end
    if f.step_ahead_ms then
        reasons[#reasons + 1] = format("the clock is %.0f s ahead of the monotonic clock: "
                                       .. "sealing holds at the monotonic time",
                                       f.step_ahead_ms / 1000)
    end
    return mdeg
end

-- -> ready, reasons (a list of strings; empty when ready), details
function R:ready()
    local cfg, reasons = self.cfg, {}
    local now = uv.now()
    local period = self.tick_ms or self.meter:window_len() * 1000
    local last = self.feeder.last_tick_ms or self.started_ms
    if self.life.stopping then
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
    local mdeg = self:meter_reasons(reasons)
    local stuck_n = self.stuck.stuck_n
    if stuck_n > 0 then reasons[#reasons + 1] = self.stuck:reason() end
    return #reasons == 0, reasons, { backlog_p95 = bp, ack_latency_p95_ms = lp,
                                     stuck_streams = stuck_n, meter_degraded = mdeg }
end

function R:exporter_ok()
    local cfg = self.cfg
    return p95(self.backlog_samples) <= cfg.ready_backlog_p95
       and p95(self.latency_samples) <= cfg.ready_ack_latency_p95_ms
end

function R:set_degraded(on)
    if on == self.is_degraded then return end
    self.is_degraded = on
    pcall(self.meter.set_degraded, self.meter, on)
    if self.audit then
        self.audit("readiness", { event = on and "degraded" or "recovered",
                                  backlog_p95 = p95(self.backlog_samples),
                                  ack_latency_p95_ms = p95(self.latency_samples) })
    end
    log("%s: backlog p95 %d, ack latency p95 %d ms", on and "degraded (exporter)" or
        "recovered", p95(self.backlog_samples), p95(self.latency_samples))
end

-- /readyz flips (issue 16): one audit record when readiness changes, with its reasons.
function R:audit_ready()
    local ready, reasons = self:ready()
    if ready == self.was_ready then return end
    self.was_ready = ready
    self.audit("readiness", { event = ready and "ready" or "not_ready",
                              reasons = rt.audit_text(concat(reasons, "; ")) })
end

function R:step()
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

function R:loop()
    while not self.life.stopping do
        self:step()
        if not rt.pause(self.task, self.stop_ch, self.cfg.health_interval_ms) then break end
    end
end

return _M
