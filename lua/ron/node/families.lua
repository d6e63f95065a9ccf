-- ron.node.families: the metric families of the node (its HTTP server, ingest, the ledger
-- receiver, the audit attest task), declared once (ron.base.metrics.declare: one row a
-- family, its "type name{labels}" and its help; docs/reference/metrics.md lists them).
local metrics = require("ron.base.metrics")

local FAM = metrics.declare {
    -- the HTTP server's connections (ron.node.http)
    http_conns = { "gauge accounting_http_connections{pool}",
                   "Connections open, by pool (general, or the loopback reserve)." },
    http_refused = { "counter accounting_http_connections_refused_total{reason}",
                     "Connections closed at accept: a peer over max_conns_per_peer, or the "
                     .. "server full." },
    http_evicted = { "counter accounting_http_connections_evicted_total",
                     "Idle reserved connections closed to admit a new loopback one." },
    http_header_timeouts = { "counter accounting_http_header_timeouts_total",
                             "Connections closed because no complete request head arrived "
                             .. "within header_timeout_ms." },
    http_early_refusals = { "counter accounting_http_early_refusals_total{route,status}",
                            "Requests refused before any handler (413: a body over max_body; "
                            .. "400: malformed; 431: a head over max_header_bytes), by the "
                            .. "route asked." },
    -- POST /v1/records (ron.node.ingest)
    ingest_requests = { "counter accounting_ingest_requests_total{code}",
                        "POST /v1/records answers, by status code." },
    ingest_records = { "counter accounting_ingest_records_total",
                       "Records recorded through POST /v1/records." },
    ingest_rejected = { "counter accounting_ingest_rejected_total{reason}",
                        "POST /v1/records requests refused or cut short, by reason (I-14)." },
    ingest_skipped = { "counter accounting_ingest_skipped_records_total",
                       "Records not recorded again: an earlier request with the same "
                       .. "Idempotency-Key recorded them." },
    ingest_keys = { "gauge accounting_ingest_idempotency_keys", "Idempotency-Keys remembered." },
    -- the ledger receiver (ron.node.receiver)
    receiver_slices = { "counter accounting_receiver_slices_total{status}",
                        "Slices PUT to the ledger receiver, by the backend's answer." },
    receiver_rejected = { "counter accounting_receiver_rejected_total{reason}",
                          "Requests the ledger receiver refused before the backend, by reason." },
    receiver_heads = { "counter accounting_receiver_heads_total", "Head queries answered." },
    receiver_queue = { "gauge accounting_receiver_queue_depth", "Requests waiting for a worker." },
    -- audit checkpoints carried into the ledgers (ron.node.attest)
    attested = { "counter audit_attested_total",
                 "Audit checkpoints carried into a ledger's event feed." },
    attest_conflicts = { "counter audit_attest_conflicts_total",
                         "Carried checkpoints whose root the audit log no longer has (a "
                         .. "rewritten log)." },
}

return FAM
