-- ron.accounting.families: the metric families of the meter's Lua side (the export runtime,
-- the nginx path), declared once (ron.base.metrics.declare: one row a family, its "type
-- name{labels}" and its help; docs/reference/metrics.md lists them). The C core's own
-- families are core/metrics.c's.
local metrics = require("ron.base.metrics")

-- The per-stream stuck gauge lists at most this many streams (label cardinality is bounded,
-- I-7); accounting_streams_stuck counts them all.
local STUCK_LISTED = 100
-- The per-stream sealed/exported gauge lists at most this many streams: stuck ones first,
-- then the furthest behind (the status page's stream rows, issue 27 item 6).
local STREAMS_LISTED = 100

local FAM = metrics.declare {
    STUCK_LISTED = STUCK_LISTED,
    STREAMS_LISTED = STREAMS_LISTED,
    exports = { "counter accounting_exports_total{status}", "Export outcomes, by status." },
    given_up = { "counter accounting_export_given_up_total",
                 "Export operations that ended at the op budget without an ACK (the slice "
                 .. "stays pending, retried later)." },
    streams_stuck = { "gauge accounting_streams_stuck",
                      "Streams that cannot advance (gap the op budget could not fill, "
                      .. "conflict): alert on > 0." },
    clock_steps = { "counter accounting_clock_steps_total",
                    "Forward steps of the wall clock beyond clock_step_tolerance_ms (sealing "
                    .. "held at the monotonic time)." },
    losses_accepted = { "counter accounting_losses_accepted_total",
                        "Losses the operator accepted for stuck streams (streams accept-loss)." },
    lost_slices = { "counter accounting_lost_slices_total",
                    "Seqs given up by accepted losses (their usage is unknown)." },
    stream_stuck = { "gauge accounting_stream_stuck{tenant,dimension,reason,seq}",
                     "1 for each stuck stream (at most " .. STUCK_LISTED .. " listed), by reason "
                     .. "and the seq it waits at." },
    stream_seq = { "gauge accounting_stream_seq{tenant,dimension,state}",
                   "The newest seq of a stream offered to export (state sealed) and ACKed "
                   .. "(state exported; 0: none yet), at most " .. STREAMS_LISTED .. " streams "
                   .. "listed: stuck ones first, then the furthest behind." },
    rejected = { "counter accounting_rejected_total{reason}",
                 "Slices shed by the runtime, by reason." },
    retries = { "counter accounting_export_retries_total",
                "Export retries after a backoff delay." },
    busy = { "counter accounting_busy_rejections_total",
             "Slices shed: pending_slices was full (Busy)." },
    backlog = { "gauge accounting_export_backlog", "Sealed slices not ACKed yet." },
    ready = { "gauge accounting_ready", "1 when the runtime is ready (C-6)." },
    bus_lagged = { "counter accounting_bus_lagged_total",
                   "Bus events dropped (oldest first) for slow subscribers." },
    -- the nginx path (ron.accounting.nginx): node-wide with errors_dict (no worker_pid),
    -- else per worker
    nginx_errors = { "counter ron_accounting_nginx_errors_total{reason,worker_pid}",
                     "requests not metered (or partly), per reason" },
}

return FAM
