-- The counters of one scheduler (ron.base.task) as a table and as Prometheus text.
local FAM = require("ron.base.families")
local metrics = require("ron.base.metrics")
local gcidle = require("ron.base.gcidle")

local ipairs, pairs, floor, sort = ipairs, pairs, math.floor, table.sort

local M = {}

local function copy(t)
    local c = {}
    for k, v in pairs(t) do c[k] = v end
    return c
end

function M.metrics(S)
    local depth = {}
    for name in pairs(S.dropped_total) do depth[name] = 0 end
    for ch in pairs(S.channels) do
        if not ch.closed or ch.n > 0 then depth[ch.name] = (depth[ch.name] or 0) + ch.n end
    end
    return { tasks_spawned_total = copy(S.spawned_total),
             tasks_aborted_total = copy(S.aborted_total),
             tasks_failed_total = copy(S.failed_total), tasks_live = S.n_live,
             queue_depth = depth, queue_dropped_total = copy(S.dropped_total) }
end

function M.metrics_text(S)
    local m = M.metrics(S)
    local out = {}
    FAM.tasks_spawned:render_map(out, m.tasks_spawned_total)
    FAM.tasks_aborted:render_map(out, m.tasks_aborted_total)
    FAM.tasks_failed:render_map(out, m.tasks_failed_total)
    FAM.tasks_live:render(out, m.tasks_live)
    FAM.lua_heap:render(out, floor(collectgarbage("count") * 1024))
    local gc = gcidle.current -- (counted only while the idle stepper runs)
    if gc then
        local st = gc.stats
        FAM.lua_gc_cycles:render(out, { { "idle", st.idle_cycles },
                                        { "allocation", st.cycles - st.idle_cycles } })
    end
    FAM.queue_depth:render_map(out, m.queue_depth)
    local keys, rows = {}, {}
    for k in pairs(m.queue_dropped_total) do keys[#keys + 1] = k end
    sort(keys)
    for i, k in ipairs(keys) do rows[i] = { k, "busy", m.queue_dropped_total[k] } end
    FAM.queue_dropped:render(out, rows)
    return metrics.text(out)
end

return M
