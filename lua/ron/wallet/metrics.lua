-- ron.wallet.metrics: what the wallet publishes (docs/reference/metrics.md): the wallet_*
-- families' text, stats(), and a dry wallet's usage.shortfall events (WLT-9). Part of
-- ron.wallet.service (its facade copies .methods onto the service's class).
local cache = require("ron.wallet.cache")
local FAM = require("ron.wallet.families")
local metrics = require("ron.base.metrics")

local format, match = string.format, string.match
local pairs, ipairs, tostring, tonumber, pcall = pairs, ipairs, tostring, tonumber, pcall

local M = {}
local W = {}
M.methods = W

-- wallet_invalidation_lag_seconds' bucket bounds: the cache's millisecond buckets in seconds
local LAG_LES = {}
for i, ms in ipairs(cache.LAG_BUCKETS) do LAG_LES[i] = format("%g", ms / 1000) end

-- The endpoints (labels of wallet_busy_rejections_total and requests).
M.ENDPOINTS = { "issue", "transfer", "burn", "account", "balance", "statement" }

-- The kinds of the wallet's tasks (labels of wallet_tasks_*): committer workers, the event
-- feed, a ledger call of a job (commit), a read's answerer and its ledger call, the node
-- lease's heartbeat and survivor scan (ron.wallet.fleet).
M.TASK_KINDS = { "worker", "group", "feed", "call", "read", "read_call", "lease", "held" }

-- A usage.shortfall event (the rater, ron.ledger.exporter): a tenant's
-- wallet did not cover a slice's charge; the rest went to its receivable. The wallet
-- publishes it: a counter, a log line, the operator's hook (a gateway throttles the tenant;
-- the metering keeps recording: usage is a fact). WLT-9.
function W:_shortfall(ev)
    local data = ev.data or ""
    local tenant = match(data, "tenant=(%S+)")
    local amount_text = match(data, "amount=(%d+)")
    local amount = tonumber(amount_text)
    local asset = match(data, "asset=(%S+)") or "?"
    local d = self.dry
    d.total = d.total + 1
    if d.by_asset[asset] ~= nil or d.n_last < 64 then -- a bounded label set
        if d.by_asset[asset] == nil then d.n_last = d.n_last + 1 end
        d.by_asset[asset] = (d.by_asset[asset] or 0) + 1
    end
    self.log(format("wallet ran dry: tenant=%s shortfall=%s %s (the receivable holds it)",
                    tostring(tenant), amount_text or "?", asset))
    if self.on_dry then
        local ok, err = pcall(self.on_dry, tenant, amount, asset)
        if not ok then self.log("on_dry hook: " .. tostring(err)) end
    end
end

-- ---- metrics (docs/reference/metrics.md) ----

function W:metrics_text()
    local out, m, c = {}, self.m, self.cache
    FAM.queue_depth:render(out, { { "commit", self.queue and self.queue:depth() or 0 } })
    FAM.busy:render_map(out, m.busy, M.ENDPOINTS)
    FAM.io_timeouts:render_map(out, m.io_timeouts, { "commit", "read", "feed" })
    FAM.retries:render(out, m.backoff_retries)
    FAM.bus_lagged:render(out, { { "ledger", c.lagged_total } })
    FAM.worker_inflight:render(out, m.worker_inflight)
    FAM.groups:render(out, { { "groups", m.groups or 0 }, { "members", m.grouped or 0 },
                             { "fallbacks", m.group_fallbacks or 0 },
                             { "handed", m.group_handed or 0 },
                             { "inline", m.group_inline or 0 },
                             { "lingers", m.group_lingers or 0 },
                             { "pipelined", m.group_pipelined or 0 } })
    local tk = self.tasks
    local live = {}
    for _, k in ipairs(M.TASK_KINDS) do live[k] = 0 end
    for _, k in pairs(tk.live) do live[k] = live[k] + 1 end
    FAM.tasks_spawned:render_map(out, tk.spawned, M.TASK_KINDS)
    FAM.tasks_finished:render_map(out, tk.finished, M.TASK_KINDS)
    FAM.tasks_aborted:render_map(out, tk.aborted, M.TASK_KINDS)
    FAM.tasks_inflight:render_map(out, live, M.TASK_KINDS)
    FAM.requests:render_map(out, m.requests)
    FAM.commits:render(out, { { "committed", m.commits }, { "rejected", m.rejections },
                              { "replayed", m.replays } })
    FAM.breaker_open:render(out, self.breaker:state() == "open" and 1 or 0)
    FAM.breaker_opens:render(out, self.breaker.opens_total)
    FAM.ledger_seq:render(out, c.seq)
    -- seconds (Prometheus' base unit) to the millisecond, written exactly: "0.25", not a
    -- double's %.17g digits
    local st = c:staleness_ms()
    FAM.staleness:render(out, st and format("%.3f", st / 1000) or "-1")
    FAM.cache_entries:render(out, c:size())
    FAM.dry:render_map(out, self.dry.by_asset)
    local cum, acc = {}, 0
    for i = 1, #cache.LAG_BUCKETS + 1 do
        acc = acc + c.lag_hist[i]
        cum[i] = acc
    end
    FAM.invalidation_lag:render_histogram(out, LAG_LES, cum, format("%.3f", c.lag_sum / 1000),
                                          c.lag_count)
    FAM.account_busy:render(out, { { "ledger", self.held.marked },
                                   { "at_once", self.held.refused } })
    if self.fleet then self.fleet:render(out) end
    return metrics.text(out)
end

function W:stats()
    return { busy = self.m.busy, requests = self.m.requests, io_timeouts = self.m.io_timeouts,
             backoff_retries = self.m.backoff_retries, commits = self.m.commits,
             rejections = self.m.rejections, replays = self.m.replays,
             queue = self.queue and self.queue:depth() or 0, breaker = self.breaker:state(),
             seq = self.cache.seq, staleness_ms = self.cache:staleness_ms(),
             lag_max_ms = self.cache.lag_max, lag_count = self.cache.lag_count }
end

return M
