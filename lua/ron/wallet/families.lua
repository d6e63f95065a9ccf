-- ron.wallet.families: the metric families of the wallet service, declared once
-- (ron.base.metrics.declare: one row a family, its "type name{labels}" and its help;
-- docs/reference/metrics.md lists them).
local metrics = require("ron.base.metrics")

local FAM = metrics.declare {
    queue_depth = { "gauge wallet_queue_depth{queue}", "Jobs waiting in the commit queue." },
    busy = { "counter wallet_busy_rejections_total{endpoint}",
             "Requests refused with 429 busy (commit queue or reads full), by endpoint." },
    io_timeouts = { "counter wallet_io_timeouts_total{op}",
                    "Ledger calls over their timeout, by op." },
    retries = { "counter wallet_backoff_retries_total",
                "Commits tried again after a retry-class failure." },
    bus_lagged = { "counter wallet_bus_lagged_total{bus}",
                   "Times the event feed fell too far behind and the whole cache was dropped." },
    groups = { "counter wallet_group_commits_total{what}",
               "Group commits (ron.wallet.committer): groups, members, members that fell back "
               .. "to the single path, members handed back (a held payer) and driven apart, "
               .. "groups without the hand-back, waits for a group to fill." },
    worker_inflight = { "gauge wallet_worker_inflight", "Workers busy with a job." },
    tasks_spawned = { "counter wallet_tasks_spawned_total{kind}",
                      "The wallet's tasks spawned, by kind." },
    tasks_finished = { "counter wallet_tasks_finished_total{kind}",
                       "The wallet's tasks that ended on their own, by kind." },
    tasks_aborted = { "counter wallet_tasks_aborted_total{kind}",
                      "The wallet's tasks aborted at the drain deadline, by kind." },
    tasks_inflight = { "gauge wallet_tasks_inflight{kind}",
                       "The wallet's tasks running, by kind." },
    requests = { "counter wallet_requests_total{code}", "Wallet answers, by status code." },
    commits = { "counter wallet_commits_total{outcome}",
                "Money requests by outcome: committed, rejected (stored), replayed." },
    breaker_open = { "gauge wallet_breaker_open", "1 while the ledger's circuit breaker is open." },
    breaker_opens = { "counter wallet_breaker_opens_total", "Times the breaker opened." },
    ledger_seq = { "gauge wallet_ledger_seq", "The last ledger event the balance cache applied." },
    staleness = { "gauge wallet_staleness_seconds",
                  "Seconds since the balance cache last reached the ledger's head (-1 before "
                  .. "the first poll)." },
    cache_entries = { "gauge wallet_cache_entries", "Balances cached." },
    dry = { "counter wallet_dry_total{asset}",
            "usage.shortfall events seen: a tenant's wallet did not cover a charge, by asset." },
    account_busy = { "counter wallet_account_busy_total{where}",
                     "Money requests answered 503 account_busy: the payer's postings held by "
                     .. "one other saga for a whole commit (ledger), then refused at once for "
                     .. "a second (at_once)." },
    lease_epoch = { "gauge wallet_lease_epoch",
                    "This node's lease epoch on the ledger (0: none yet)." },
    lease_events = { "counter wallet_lease_events_total{event}",
                     "The node lease's events: renewals, renew failures, takeovers of dead "
                     .. "peers, their sagas recovered, releases, this node's lease lost, "
                     .. "rejoins." },
    invalidation_lag = { "histogram wallet_invalidation_lag_seconds",
                         "From a commit's acknowledgement to its cache entries dropped by the "
                         .. "event feed (the staleness SLO, measured)." },
}

return FAM
