-- ron.base.families: the metric families of the platform (the task scheduler's), declared
-- once (ron.base.metrics; docs/reference/metrics.md lists them).
local metrics = require "ron.base.metrics"

local family = metrics.family

return {
    tasks_spawned = family { name = "ron_tasks_spawned_total", type = "counter",
                             help = "Tasks spawned, by kind.", labels = { "kind" } },
    tasks_aborted = family { name = "ron_tasks_aborted_total", type = "counter",
                             help = "Tasks aborted (drain deadline, timeout), by kind.",
                             labels = { "kind" } },
    tasks_failed = family { name = "ron_tasks_failed_total", type = "counter",
                            help = "Tasks that raised an error, by kind.", labels = { "kind" } },
    tasks_live = family { name = "ron_tasks_live", type = "gauge",
                          help = "Tasks spawned and not yet ended." },
    -- the process's Lua heap (the daemon's gc_pause: how far it grows between collections)
    lua_heap = family { name = "ron_lua_heap_bytes", type = "gauge",
                        help = "Bytes of the Lua heap in use." },
    queue_depth = family { name = "ron_queue_depth", type = "gauge",
                           help = "Values buffered in a bounded task channel.",
                           labels = { "queue" } },
    queue_dropped = family { name = "ron_queue_dropped_total", type = "counter",
                             help = "Sends rejected because the channel was full.",
                             labels = { "queue", "reason" } },
}
