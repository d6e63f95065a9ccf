-- ron.accounting.runtime.metrics: the runtime's Prometheus text: export outcomes (the
-- contract's label set), sheds, retries, backlog, readiness, bus lag, then the scheduler's task
-- metrics. Methods of the runtime object (ron.accounting.runtime.rt); init.lua composes them.
local rt = require "ron.accounting.runtime.rt"
local exporter_mod = require "ron.accounting.export.exporters"

local format, concat, sort, pairs, ipairs, tostring =
      string.format, table.concat, table.sort, pairs, ipairs, tostring
-- The per-stream stuck gauge lists at most this many streams (label cardinality is bounded,
-- I-7); accounting_streams_stuck counts them all.
local STUCK_LISTED = 100

-- The runtime's plain counters and gauges: name, type, help, the field of the runtime.
local SCALARS = {
    { "accounting_export_given_up_total", "counter", "Export operations that ended at the "
      .. "op budget without an ACK (the slice stays pending, retried later).", "given_up" },
    { "accounting_streams_stuck", "gauge", "Streams that cannot advance (gap the op budget "
      .. "could not fill, conflict): alert on > 0.", "stuck_n" },
    { "accounting_clock_steps_total", "counter", "Forward steps of the wall clock beyond "
      .. "clock_step_tolerance_ms (sealing held at the monotonic time).", "clock_steps" },
    { "accounting_losses_accepted_total", "counter", "Losses the operator accepted for stuck "
      .. "streams (streams accept-loss).", "losses_accepted" },
    { "accounting_lost_slices_total", "counter", "Seqs given up by accepted losses (their "
      .. "usage is unknown).", "lost_slices" },
}
local RT = rt.RT
function RT:metrics()
    return { exports = self.exports, rejected = self.rejected, retries = self.retries,
             conflicts = #self.conflicts, backlog = self:backlog(),
             given_up = self.given_up, stuck = self.stuck_n,
             degraded = self.is_degraded, bus_lagged = self.bus_lagged }
end

function RT:metrics_text()
    local out = {}
    out[#out + 1] = "# HELP accounting_exports_total Export outcomes, by status."
    out[#out + 1] = "# TYPE accounting_exports_total counter"
    for _, s in ipairs(exporter_mod.COUNTED) do
        out[#out + 1] = format('accounting_exports_total{status="%s"} %d', s, self.exports[s])
    end
    for _, m in ipairs(SCALARS) do
        out[#out + 1] = format("# HELP %s %s\n# TYPE %s %s\n%s %d", m[1], m[3], m[1], m[2],
                               m[1], self[m[4]])
    end
    out[#out + 1] = "# HELP accounting_stream_stuck 1 for each stuck stream (at most "
                    .. STUCK_LISTED .. " listed), by reason and the seq it waits at."
    out[#out + 1] = "# TYPE accounting_stream_stuck gauge"
    local stuck = {}
    if self.stuck_n > 0 then -- (a scrape walks the streams only when some are stuck)
        for _, st in pairs(self.streams) do
            if st.stuck and #stuck < STUCK_LISTED then
                stuck[#stuck + 1] = format(
                    'accounting_stream_stuck{tenant="%s",dimension="%s",reason="%s",seq="%s"} 1',
                    st.tenant, st.dim, st.stuck.reason, tostring(st.stuck.seq))
            end
        end
    end
    sort(stuck)
    for _, l in ipairs(stuck) do out[#out + 1] = l end
    out[#out + 1] = "# HELP accounting_rejected_total Slices shed by the runtime, by reason."
    out[#out + 1] = "# TYPE accounting_rejected_total counter"
    local rs = {}
    for k in pairs(self.rejected) do rs[#rs + 1] = k end
    sort(rs)
    for _, k in ipairs(rs) do
        out[#out + 1] = format('accounting_rejected_total{reason="%s"} %d', k, self.rejected[k])
    end
    out[#out + 1] = "# HELP backoff_retries_total Export retries after a backoff delay."
    out[#out + 1] = "# TYPE backoff_retries_total counter"
    out[#out + 1] = format("backoff_retries_total %d", self.retries)
    out[#out + 1] = "# HELP busy_rejections_total Slices shed: pending_slices was full (Busy)."
    out[#out + 1] = "# TYPE busy_rejections_total counter"
    out[#out + 1] = format("busy_rejections_total %d", self.rejected.busy or 0)
    out[#out + 1] = "# HELP accounting_export_backlog Sealed slices not ACKed yet."
    out[#out + 1] = "# TYPE accounting_export_backlog gauge"
    out[#out + 1] = format("accounting_export_backlog %d", self:backlog())
    out[#out + 1] = "# HELP accounting_ready 1 when the runtime is ready (C-6)."
    out[#out + 1] = "# TYPE accounting_ready gauge"
    out[#out + 1] = format("accounting_ready %d", self:ready() and 1 or 0)
    out[#out + 1] = "# HELP bus_lagged_total Bus events dropped (oldest first) for slow "
                    .. "subscribers."
    out[#out + 1] = "# TYPE bus_lagged_total counter"
    out[#out + 1] = format("bus_lagged_total %d", self.bus_lagged)
    return concat(out, "\n") .. "\n" .. self.task.metrics_text()
end
