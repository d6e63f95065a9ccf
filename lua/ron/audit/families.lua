-- ron.audit.families: the metric families of the audit trail, declared once
-- (ron.base.metrics.declare: one row a family, its "type name{labels}" and its help;
-- docs/reference/metrics.md lists them).
local metrics = require("ron.base.metrics")

local FAM = metrics.declare {
    drops = { "counter audit_drop_total{reason}",
              "Audit events shed by the bounded queue (a gap record with the count follows)." },
    queue_depth = { "gauge audit_queue_depth{queue}", "Audit events waiting in the queue." },
    records = { "counter audit_records_total", "Audit records in the chain (its head seq)." },
    durable_seq = { "gauge audit_durable_seq", "Audit records known durable (fdatasync'ed)." },
    checkpoints = { "counter audit_checkpoints_total", "Signed audit checkpoints written." },
    io_timeouts = { "counter audit_io_timeouts_total{op}",
                    "Audit WAL syncs not back within io_deadline_ms." },
    failed = { "gauge audit_failed",
               "1 while the audit log is failed (a write error): events are shed until it "
               .. "recovers." },
    -- a failed trail (ron.audit.recovery, AUD-I-42)
    io_errors = { "counter audit_io_errors_total{errno}",
                  "Audit log failures by the errno of the system call that failed (ENOSPC, "
                  .. "EIO, EROFS, ...)." },
    recoveries = { "counter audit_recoveries_total",
                   "Failed audit logs that recovered by themselves." },
}

return FAM
