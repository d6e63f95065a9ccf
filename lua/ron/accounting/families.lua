-- ron.accounting.families: the metric families of the meter's Lua side (the export runtime,
-- the nginx path), declared once (ron.base.metrics; docs/reference/metrics.md lists them).
-- The C core's own families are core/metrics.c's.
local metrics = require "ron.base.metrics"

local family = metrics.family

-- The per-stream stuck gauge lists at most this many streams (label cardinality is bounded,
-- I-7); accounting_streams_stuck counts them all.
local STUCK_LISTED = 100
-- The per-stream sealed/exported gauge lists at most this many streams: stuck ones first,
-- then the furthest behind (the status page's stream rows, issue 27 item 6).
local STREAMS_LISTED = 100

return {
    STUCK_LISTED = STUCK_LISTED,
    STREAMS_LISTED = STREAMS_LISTED,
    exports = family { name = "accounting_exports_total", type = "counter",
                       help = "Export outcomes, by status.", labels = { "status" } },
    given_up = family { name = "accounting_export_given_up_total", type = "counter",
                        help = "Export operations that ended at the op budget without an ACK "
                               .. "(the slice stays pending, retried later)." },
    streams_stuck = family { name = "accounting_streams_stuck", type = "gauge",
                             help = "Streams that cannot advance (gap the op budget could not "
                                    .. "fill, conflict): alert on > 0." },
    clock_steps = family { name = "accounting_clock_steps_total", type = "counter",
                           help = "Forward steps of the wall clock beyond "
                                  .. "clock_step_tolerance_ms (sealing held at the monotonic "
                                  .. "time)." },
    losses_accepted = family { name = "accounting_losses_accepted_total", type = "counter",
                               help = "Losses the operator accepted for stuck streams (streams "
                                      .. "accept-loss)." },
    lost_slices = family { name = "accounting_lost_slices_total", type = "counter",
                           help = "Seqs given up by accepted losses (their usage is unknown)." },
    stream_stuck = family { name = "accounting_stream_stuck", type = "gauge",
                            help = "1 for each stuck stream (at most " .. STUCK_LISTED
                                   .. " listed), by reason and the seq it waits at.",
                            labels = { "tenant", "dimension", "reason", "seq" } },
    stream_seq = family { name = "accounting_stream_seq", type = "gauge",
                          help = "The newest seq of a stream offered to export (state sealed) "
                                 .. "and ACKed (state exported; 0: none yet), at most "
                                 .. STREAMS_LISTED .. " streams listed: stuck ones first, "
                                 .. "then the furthest behind.",
                          labels = { "tenant", "dimension", "state" } },
    rejected = family { name = "accounting_rejected_total", type = "counter",
                        help = "Slices shed by the runtime, by reason.", labels = { "reason" } },
    retries = family { name = "accounting_export_retries_total", type = "counter",
                       help = "Export retries after a backoff delay." },
    busy = family { name = "accounting_busy_rejections_total", type = "counter",
                    help = "Slices shed: pending_slices was full (Busy)." },
    backlog = family { name = "accounting_export_backlog", type = "gauge",
                       help = "Sealed slices not ACKed yet." },
    ready = family { name = "accounting_ready", type = "gauge",
                     help = "1 when the runtime is ready (C-6)." },
    bus_lagged = family { name = "accounting_bus_lagged_total", type = "counter",
                          help = "Bus events dropped (oldest first) for slow subscribers." },
    -- the nginx path (ron.accounting.nginx): node-wide with errors_dict (no worker_pid),
    -- else per worker
    nginx_errors = family { name = "ron_accounting_nginx_errors_total", type = "counter",
                            help = "requests not metered (or partly), per reason",
                            labels = { "reason", "worker_pid" } },
}
