-- ron.audit.families: the metric families of the audit trail, declared once
-- (ron.base.metrics; docs/reference/metrics.md lists them).
local metrics = require "ron.base.metrics"

local family = metrics.family

return {
    drops = family { name = "audit_drop_total", type = "counter",
                     help = "Audit events shed by the bounded queue (a gap record with the "
                            .. "count follows).", labels = { "reason" } },
    queue_depth = family { name = "audit_queue_depth", type = "gauge",
                           help = "Audit events waiting in the queue.", labels = { "queue" } },
    records = family { name = "audit_records_total", type = "counter",
                       help = "Audit records in the chain (its head seq)." },
    durable_seq = family { name = "audit_durable_seq", type = "gauge",
                           help = "Audit records known durable (fdatasync'ed)." },
    checkpoints = family { name = "audit_checkpoints_total", type = "counter",
                           help = "Signed audit checkpoints written." },
    io_timeouts = family { name = "audit_io_timeouts_total", type = "counter",
                           help = "Audit WAL syncs not back within io_deadline_ms.",
                           labels = { "op" } },
    failed = family { name = "audit_failed", type = "gauge",
                      help = "1 while the audit log is failed (a write error): events are shed "
                             .. "until it recovers." },
    -- a failed trail (ron.audit.recovery, AUD-I-42)
    io_errors = family { name = "audit_io_errors_total", type = "counter",
                         help = "Audit log failures by the errno of the system call that "
                                .. "failed (ENOSPC, EIO, EROFS, ...).", labels = { "errno" } },
    recoveries = family { name = "audit_recoveries_total", type = "counter",
                          help = "Failed audit logs that recovered by themselves." },
}
