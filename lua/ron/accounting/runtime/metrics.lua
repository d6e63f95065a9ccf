-- ron.accounting.runtime.metrics: the runtime's Prometheus text: export outcomes (the
-- contract's label set), sheds, retries, backlog, readiness, bus lag, then the scheduler's task
-- metrics, through the one registry (the families: ron.accounting.families). Methods of the
-- runtime object (ron.accounting.runtime.rt); init.lua composes them.
local rt = require "ron.accounting.runtime.rt"
local exporter_mod = require "ron.accounting.export.exporters"

local FAM = require "ron.accounting.families"
local metrics = require "ron.base.metrics"

local format, sort, pairs, tostring = string.format, table.sort, pairs, tostring

local RT = rt.RT
function RT:metrics()
    return { exports = self.exports, rejected = self.rejected, retries = self.retries,
             conflicts = #self.conflicts, backlog = self:backlog(),
             given_up = self.given_up, stuck = self.stuck_n,
             degraded = self.is_degraded, bus_lagged = self.bus_lagged }
end

-- The stuck streams' gauge rows, at most FAM.STUCK_LISTED (a scrape walks the streams only
-- when some are stuck).
local function stuck_rows(self)
    local rows = {}
    if self.stuck_n == 0 then return rows end
    for _, st in pairs(self.streams) do
        if st.stuck and #rows < FAM.STUCK_LISTED then
            rows[#rows + 1] = { st.tenant, st.dim, st.stuck.reason, tostring(st.stuck.seq), 1 }
        end
    end
    local function k(r) return format("%s\0%s\0%s\0%s", r[1], r[2], r[3], r[4]) end
    sort(rows, function(a, b) return k(a) < k(b) end)
    return rows
end

function RT:metrics_text()
    local out = {}
    FAM.exports:render_map(out, self.exports, exporter_mod.COUNTED)
    FAM.given_up:render(out, self.given_up)
    FAM.streams_stuck:render(out, self.stuck_n)
    FAM.clock_steps:render(out, self.clock_steps)
    FAM.losses_accepted:render(out, self.losses_accepted)
    FAM.lost_slices:render(out, self.lost_slices)
    FAM.stream_stuck:render(out, stuck_rows(self))
    FAM.rejected:render_map(out, self.rejected)
    FAM.retries:render(out, self.retries)
    FAM.busy:render(out, self.rejected.busy or 0)
    FAM.backlog:render(out, self:backlog())
    FAM.ready:render(out, self:ready() and 1 or 0)
    FAM.bus_lagged:render(out, self.bus_lagged)
    return metrics.text(out) .. self.task.metrics_text()
end
