-- ron.base.families: the metric families of the platform (the task scheduler's), declared
-- once (ron.base.metrics.declare: one row a family, its "type name{labels}" and its help;
-- docs/reference/metrics.md lists them).
local metrics = require("ron.base.metrics")

local FAM = metrics.declare {
    tasks_spawned = { "counter ron_tasks_spawned_total{kind}", "Tasks spawned, by kind." },
    tasks_aborted = { "counter ron_tasks_aborted_total{kind}",
                      "Tasks aborted (drain deadline, timeout), by kind." },
    tasks_failed = { "counter ron_tasks_failed_total{kind}",
                     "Tasks that raised an error, by kind." },
    tasks_live = { "gauge ron_tasks_live", "Tasks spawned and not yet ended." },
    -- the process's Lua heap (the daemon's gc_pause: how far it grows between collections)
    lua_heap = { "gauge ron_lua_heap_bytes", "Bytes of the Lua heap in use." },
    -- where its collector's cycles ended (the daemon's gc_idle_us: ron.base.gcidle)
    lua_gc_cycles = { "counter ron_lua_gc_cycles_total{ended}",
                      "Collector cycles of the loop's Lua VM ended, by where: idle (a step in "
                      .. "the event loop's idle time) or allocation." },
    queue_depth = { "gauge ron_queue_depth{queue}", "Values buffered in a bounded task channel." },
    queue_dropped = { "counter ron_queue_dropped_total{queue,reason}",
                      "Sends rejected because the channel was full." },
}

return FAM
