-- ron.accounting.runtime.metrics: the runtime's Prometheus text, through the one registry
-- (the families: ron.accounting.families): export outcomes (the contract's label set), sheds,
-- retries, backlog, readiness, bus lag, then the scheduler's task metrics. Reads the
-- concerns' state; writes none.
local FAM = require("ron.accounting.families")
local exporter_mod = require("ron.accounting.export.exporters")
local metrics = require("ron.base.metrics")

local format, sort, pairs, tostring, tonumber = string.format, table.sort, pairs, tostring,
                                                  tonumber

local _M = {}

-- rt:metrics(): the counters as a table (status lines, tests).
function _M.table(rt)
    local w = rt.workers
    return { exports = w.exports, rejected = rt.offers.rejected, retries = w.retries,
             conflicts = #w.conflicts, backlog = rt.readiness:backlog(),
             given_up = w.given_up, stuck = rt.stuck.stuck_n,
             degraded = rt.readiness.is_degraded, bus_lagged = rt.bus.bus_lagged }
end

-- The stuck streams' gauge rows, at most FAM.STUCK_LISTED (a scrape walks the streams only
-- when some are stuck).
local function stuck_rows(stuck, streams)
    local rows = {}
    if stuck.stuck_n == 0 then return rows end
    for _, st in pairs(streams) do
        if st.stuck and #rows < FAM.STUCK_LISTED then
            rows[#rows + 1] = { st.tenant, st.dim, st.stuck.reason, tostring(st.stuck.seq), 1 }
        end
    end
    local function k(r) return format("%s\0%s\0%s\0%s", r[1], r[2], r[3], r[4]) end
    sort(rows, function(a, b) return k(a) < k(b) end)
    return rows
end

-- The per-stream rows (sealed and exported seq), at most FAM.STREAMS_LISTED streams: stuck
-- ones first, then the furthest behind, then by key (a stream that was never routed in
-- this process has no row).
local function behind(st)
    local s, e = st.sealed_seq, st.exported_seq
    if not s or (e and e >= s) then return 0 end
    return tonumber(e and s - e or s)
end

local function stream_rows(streams)
    local list = {}
    for _, st in pairs(streams) do
        if st.sealed_seq or st.exported_seq then
            list[#list + 1] = { st = st, stuck = st.stuck and 0 or 1, behind = behind(st) }
        end
    end
    sort(list, function(a, b)
        if a.stuck ~= b.stuck then return a.stuck < b.stuck end
        if a.behind ~= b.behind then return a.behind > b.behind end
        return a.st.key < b.st.key
    end)
    local rows = {}
    for i = 1, math.min(#list, FAM.STREAMS_LISTED) do
        local st = list[i].st
        rows[#rows + 1] = { st.tenant, st.dim, "sealed", st.sealed_seq or st.exported_seq }
        rows[#rows + 1] = { st.tenant, st.dim, "exported", st.exported_seq or 0 }
    end
    return rows
end
_M.stream_rows = stream_rows

function _M.text(rt)
    local w, f, stuck, rejected = rt.workers, rt.feeder, rt.stuck, rt.offers.rejected
    local out = {}
    FAM.exports:render_map(out, w.exports, exporter_mod.COUNTED)
    FAM.given_up:render(out, w.given_up)
    FAM.streams_stuck:render(out, stuck.stuck_n)
    FAM.clock_steps:render(out, f.clock_steps)
    FAM.losses_accepted:render(out, stuck.losses_accepted)
    FAM.lost_slices:render(out, stuck.lost_slices)
    FAM.stream_stuck:render(out, stuck_rows(stuck, rt.router.streams))
    FAM.stream_seq:render(out, stream_rows(rt.router.streams))
    FAM.rejected:render_map(out, rejected)
    FAM.retries:render(out, w.retries)
    FAM.busy:render(out, rejected.busy or 0)
    FAM.backlog:render(out, rt.readiness:backlog())
    FAM.ready:render(out, rt.readiness:ready() and 1 or 0)
    FAM.bus_lagged:render(out, rt.bus.bus_lagged)
    return metrics.text(out) .. rt.task.metrics_text()
end

return _M
