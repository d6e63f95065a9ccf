-- ron.node.families: the metric families of the node (its HTTP server, ingest, the ledger
-- receiver, the audit attest task), declared once (ron.base.metrics;
-- docs/reference/metrics.md lists them).
local metrics = require "ron.base.metrics"

local family = metrics.family

return {
    -- the HTTP server's connections (ron.node.http)
    http_conns = family { name = "accounting_http_connections", type = "gauge",
                          help = "Connections open, by pool (general, or the loopback "
                                 .. "reserve).", labels = { "pool" } },
    http_refused = family { name = "accounting_http_connections_refused_total",
                            type = "counter",
                            help = "Connections closed at accept: a peer over "
                                   .. "max_conns_per_peer, or the server full.",
                            labels = { "reason" } },
    http_evicted = family { name = "accounting_http_connections_evicted_total",
                            type = "counter",
                            help = "Idle reserved connections closed to admit a new loopback "
                                   .. "one." },
    http_header_timeouts = family { name = "accounting_http_header_timeouts_total",
                                    type = "counter",
                                    help = "Connections closed because no complete request "
                                           .. "head arrived within header_timeout_ms." },
    http_early_refusals = family { name = "accounting_http_early_refusals_total",
                                   type = "counter",
                                   help = "Requests refused before any handler (413: a body "
                                          .. "over max_body; 400: malformed; 431: a head over "
                                          .. "max_header_bytes), by the route asked.",
                                   labels = { "route", "status" } },
    -- POST /v1/records (ron.node.ingest)
    ingest_requests = family { name = "accounting_ingest_requests_total", type = "counter",
                               help = "POST /v1/records answers, by status code.",
                               labels = { "code" } },
    ingest_records = family { name = "accounting_ingest_records_total", type = "counter",
                              help = "Records recorded through POST /v1/records." },
    ingest_rejected = family { name = "accounting_ingest_rejected_total", type = "counter",
                               help = "POST /v1/records requests refused or cut short, by "
                                      .. "reason (I-14).", labels = { "reason" } },
    ingest_skipped = family { name = "accounting_ingest_skipped_records_total",
                              type = "counter",
                              help = "Records not recorded again: an earlier request with the "
                                     .. "same Idempotency-Key recorded them." },
    ingest_keys = family { name = "accounting_ingest_idempotency_keys", type = "gauge",
                           help = "Idempotency-Keys remembered." },
    -- the ledger receiver (ron.node.receiver)
    receiver_slices = family { name = "accounting_receiver_slices_total", type = "counter",
                               help = "Slices PUT to the ledger receiver, by the backend's "
                                      .. "answer.", labels = { "status" } },
    receiver_rejected = family { name = "accounting_receiver_rejected_total", type = "counter",
                                 help = "Requests the ledger receiver refused before the "
                                        .. "backend, by reason.", labels = { "reason" } },
    receiver_heads = family { name = "accounting_receiver_heads_total", type = "counter",
                              help = "Head queries answered." },
    receiver_queue = family { name = "accounting_receiver_queue_depth", type = "gauge",
                              help = "Requests waiting for a worker." },
    -- audit checkpoints carried into the ledgers (ron.node.attest)
    attested = family { name = "audit_attested_total", type = "counter",
                        help = "Audit checkpoints carried into a ledger's event feed." },
    attest_conflicts = family { name = "audit_attest_conflicts_total", type = "counter",
                                help = "Carried checkpoints whose root the audit log no longer "
                                       .. "has (a rewritten log)." },
}
