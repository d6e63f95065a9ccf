-- ron.wallet.families: the metric families of the wallet service, declared once
-- (ron.base.metrics; docs/reference/metrics.md lists them).
local metrics = require "ron.base.metrics"

local family = metrics.family

return {
    queue_depth = family { name = "wallet_queue_depth", type = "gauge",
                           help = "Jobs waiting in the commit queue.", labels = { "queue" } },
    busy = family { name = "wallet_busy_rejections_total", type = "counter",
                    help = "Requests refused with 429 busy (commit queue or reads full), by "
                           .. "endpoint.", labels = { "endpoint" } },
    io_timeouts = family { name = "wallet_io_timeouts_total", type = "counter",
                           help = "Ledger calls over their timeout, by op.", labels = { "op" } },
    retries = family { name = "wallet_backoff_retries_total", type = "counter",
                       help = "Commits tried again after a retry-class failure." },
    bus_lagged = family { name = "wallet_bus_lagged_total", type = "counter",
                          help = "Times the event feed fell too far behind and the whole cache "
                                 .. "was dropped.", labels = { "bus" } },
    groups = family { name = "wallet_group_commits_total", type = "counter",
                      help = "Group commits (ron.wallet.committer): groups, members, members "
                             .. "that fell back to the single path, waits for a group to "
                             .. "fill.", labels = { "what" } },
    worker_inflight = family { name = "wallet_worker_inflight", type = "gauge",
                               help = "Workers busy with a job." },
    tasks_spawned = family { name = "wallet_tasks_spawned_total", type = "counter",
                             help = "The wallet's tasks spawned, by kind.",
                             labels = { "kind" } },
    tasks_finished = family { name = "wallet_tasks_finished_total", type = "counter",
                              help = "The wallet's tasks that ended on their own, by kind.",
                              labels = { "kind" } },
    tasks_aborted = family { name = "wallet_tasks_aborted_total", type = "counter",
                             help = "The wallet's tasks aborted at the drain deadline, by kind.",
                             labels = { "kind" } },
    tasks_inflight = family { name = "wallet_tasks_inflight", type = "gauge",
                              help = "The wallet's tasks running, by kind.",
                              labels = { "kind" } },
    requests = family { name = "wallet_requests_total", type = "counter",
                        help = "Wallet answers, by status code.", labels = { "code" } },
    commits = family { name = "wallet_commits_total", type = "counter",
                       help = "Money requests by outcome: committed, rejected (stored), "
                              .. "replayed.", labels = { "outcome" } },
    breaker_open = family { name = "wallet_breaker_open", type = "gauge",
                            help = "1 while the ledger's circuit breaker is open." },
    breaker_opens = family { name = "wallet_breaker_opens_total", type = "counter",
                             help = "Times the breaker opened." },
    ledger_seq = family { name = "wallet_ledger_seq", type = "gauge",
                          help = "The last ledger event the balance cache applied." },
    staleness = family { name = "wallet_staleness_seconds", type = "gauge",
                         help = "Seconds since the balance cache last reached the "
                                .. "ledger's head (-1 before the first poll)." },
    cache_entries = family { name = "wallet_cache_entries", type = "gauge",
                             help = "Balances cached." },
    dry = family { name = "wallet_dry_total", type = "counter",
                   help = "usage.shortfall events seen: a tenant's wallet did not cover a "
                          .. "charge, by asset.", labels = { "asset" } },
    account_busy = family { name = "wallet_account_busy_total", type = "counter",
                            help = "Money requests answered 503 account_busy: the payer's "
                                   .. "postings held by one other saga for a whole commit "
                                   .. "(ledger), then refused at once for a second (at_once).",
                            labels = { "where" } },
    lease_epoch = family { name = "wallet_lease_epoch", type = "gauge",
                           help = "This node's lease epoch on the ledger (0: none yet)." },
    lease_events = family { name = "wallet_lease_events_total", type = "counter",
                            help = "The node lease's events: renewals, renew failures, "
                                   .. "takeovers of dead peers, their sagas recovered, "
                                   .. "releases, this node's lease lost, rejoins.",
                            labels = { "event" } },
    invalidation_lag = family { name = "wallet_invalidation_lag_seconds", type = "histogram",
                                help = "From a commit's acknowledgement to its cache entries "
                                       .. "dropped by the event feed (the staleness SLO, "
                                       .. "measured)." },
}
