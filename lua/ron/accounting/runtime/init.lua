-- ron.accounting.runtime: the export pipeline as tasks on the loop (issue 4, seed 001 §2).
--
--   local rt = runtime.start { meter = m, exporter = e,
--       fairness = p,               -- default fairness.round_robin
--       backoff = b,                -- default backoff.exponential (one per worker)
--       ordered_buffer_cap = 1024,  -- per-stream lane
--       inflight_cap = nil,         -- slices in lanes or being exported, all streams (nil:
--                                   -- no bound, the router routes everything at once)
--       tenant_inflight_cap = nil,  -- the same per tenant (nil: no bound)
--       ack_batch = 1024,           -- meter ACKs per pool call (ack_task); 1: inline
--       put_batch = 1024,           -- exporter with put_many (offload.file): puts of all
--       put_parallel = 4,           -- streams batched, <= put_parallel calls at once
--                                   -- (put_batch = 1: one put() per slice)
--       compact_interval_ms = 50,   -- ack_task compacts the WAL at most this often (and
--                                   -- once idle that long): a segment is then mostly
--                                   -- fully ACKed (unlinked), rarely rewritten
--       events_cap = 4096,          -- rt.events keeps at most the last events_cap events
--       pending_cap = 1024,         -- the router's pending_slices channel
--       op_budget_ms = 10000, drain_deadline_ms = 5000, ack_lru = 4096,
--       log_every_ms = 60000,       -- a stream's failing puts: one log line per status
--                                   -- change, then at most one per log_every_ms
--       clock = fn,                 -- UTC seconds (default: the meter's / system time)
--       mono = fn,                  -- monotonic ms (default uv.hrtime): with an injected
--                                   -- clock, the clock-step guard runs only if given
--       clock_step_tolerance_ms = 60000, clock_step_confirm_ms = 600000,
--                                   -- a forward clock step beyond the tolerance is held
--                                   -- until the clock comes back or it lasted confirm_ms
--                                   -- (false: no guard)
--       tick_ms = nil,              -- rollover every tick_ms instead of at UTC boundaries
--       audit = nil }               -- function(kind, attrs): every shed, non-ok export,
--                                   -- stuck stream and readiness flip as an audit record
--                                   -- (the daemon's ron.audit.host emit; issue 16)
--   rt:stop()          -- no new sealing; the router drains into the lanes, workers finish
--   rt:wait()          -- (from a task) joins every task, aborts stragglers after the
--                         drain deadline; -> { finished =, aborted = }
--   rt:metrics_text()  -- Prometheus text (runtime counters + task metrics)
--
-- Tasks: wal_replay_task, rollover_task, exporter_router, exporter_worker-<tenant>-<dim>,
-- health_task, ack_task (batched meter ACKs + one compaction per batch).
--
-- Files: this one makes the object (start) and ends it (stop, wait); the methods live by
-- concern in feed.lua (rollover and re-offers into pending_slices), router.lua (policy and
-- lanes), worker.lua (per-stream export), stuck.lua (streams that cannot advance, the
-- operator's accept_loss), acks.lua (meter ACKs, compaction), readiness.lua
-- (C-6, degraded), bus.lua (C-10 hooks), metrics.lua; rt.lua holds the class.
--
-- Nothing is ever lost by a shed: every slice stays in the meter's pending ring (and its
-- WAL) until an ACK. A slice that is shed (pending_slices full, lane full: OrderOverflow,
-- budget spent: given up) is simply not "offered" any more; each rollover tick re-offers, from
-- meter:pending() (per stream in seq order), every pending slice not offered yet. To keep
-- strict seq order (I-5) a stream whose slice N was shed is "blocked at N": the router
-- sheds its later slices too (they are re-offered after N) until N comes back.
--
-- Offers are incremental: a tick offers the slices it sealed; the full walk of
-- meter:pending() (O(pending)) runs only on a tick after something was shed (need_reoffer),
-- i.e. only when some pending slice is not in the pipeline.
--
-- Bounded dispatch (G-22, docs/CONCURRENCY.md §7): with inflight_cap and/or
-- tenant_inflight_cap set, the router keeps the slices in the fairness policy and takes one
-- out only when a lane may take it: at most inflight_cap slices in the lanes or being
-- exported in all, at most tenant_inflight_cap of one tenant (the built-in policies skip a
-- tenant at its cap and keep its turn: p:dequeue(eligible)). So when the exporter is the
-- bottleneck the backlog waits in the policy, where round_robin / wfq order it, and a hot
-- tenant holds at most tenant_inflight_cap of the exporter's slots. Without either knob
-- (the default) the router routes everything at once, and the policy only orders each
-- batch. On rt:stop() what is still in the policy stays pending (re-offered at the next
-- start).
--
-- ACKs: a worker puts N, queues N's meter ACK to ack_task and goes on to N+1 (order is
-- the downstream's: N answered ok/dup). ack_task ACKs a batch (up to ack_batch) in one pool
-- call; the WAL is compacted with a batch at most every compact_interval_ms, and once the
-- ACKs stop for that long (the core rewrites a segment that is half ACKed on every
-- compaction: per-ACK compaction cost ~0.4 ms per ACK). N stays in `offered` until its
-- ACK is done.
--
-- Per-slice state is bounded: offered/offered_at by the slices in the pipeline, the ACK
-- LRU by ack_lru, rt.events by events_cap. Bus events: SliceSealed { slice_id, b3 },
-- SliceExported { slice_id, latency_ms (offer -> ACK) }; built only when someone subscribed.
--
-- Blocking calls (rollover's WAL fsync, ack's compaction, the file ledger's fsync) go
-- through ron.accounting.runtime.offload (the libuv threadpool); pass offload.file{...} as the
-- exporter for the file ledger.
local exporter_mod = require "ron.accounting.export.exporters"
local round_robin = require "ron.accounting.export.fairness.round_robin"
local task = require "ron.base.task"
local uv = require "luv"

local floor = math.floor
local pairs, ipairs, type, error, setmetatable =
      pairs, ipairs, type, error, setmetatable

local _M = {}

_M.DEFAULTS = { ordered_buffer_cap = 1024, pending_cap = 1024, op_budget_ms = 10000,
                drain_deadline_ms = 5000, ack_lru = 4096,
                events_cap = 4096, log_every_ms = 60000,
                -- a forward step of the wall clock beyond this is held (feed.lua,
                -- RT:seal_now_ms) until the clock comes back or it lasted confirm_ms
                clock_step_tolerance_ms = 60000, clock_step_confirm_ms = 600000,
                ack_batch = 1024,                 -- slices per pooled ACK (1: one by one)
                compact_interval_ms = 50,         -- WAL compaction at most this often
                -- exporters with put_many; 1024: ron.ledger.exporter rates a daemon's 1024
                -- streams at ~1.7x the rate of 4 calls of 256 at once (docs/LEDGER.md)
                put_batch = 1024, put_parallel = 4,
                -- bounded dispatch (G-22); false = no bound
                inflight_cap = false, tenant_inflight_cap = false,
                -- readiness (C-6)
                ready_backlog_p95 = 10000,        -- sealed, un-ACKed slices
                ready_ack_latency_p95_ms = 30000, -- offer -> ACK
                degrade_after_ms = 30000,         -- breach (or recovery) this long flips degraded
                health_interval_ms = 1000,        -- backlog sampling period
                ready_samples = 128,              -- sliding window of samples (bounded)
                bus_cap = 1024 }                  -- per-subscriber queue (C-10)

local rt = require "ron.accounting.runtime.rt"
local RT = rt.RT
_M._RT = RT
-- The concerns, each a file adding methods to RT (one per task kind of seed 001 §2).
for _, concern in ipairs { "feed", "router", "worker", "stuck", "acks", "readiness", "bus",
                           "metrics" } do
    require("ron.accounting.runtime." .. concern)
end
_M.slice_id = RT.slice_id
_M._p95 = rt.p95 -- (readiness.lua) for specs

function _M.start(opts)
    if type(opts) ~= "table" or not opts.meter or not opts.exporter then
        error("runtime.start: expects { meter = m, exporter = e, ... }", 2)
    end
    exporter_mod.check(opts.exporter)
    if exporter_mod.is_blocking(opts.exporter) then
        -- its put() does its I/O on the calling thread: the loop would block
        error("runtime.start: the exporter blocks the loop (blocking = true); run it on the "
              .. "libuv threadpool (for exporters.file: offload.file { dir = ... })", 2)
    end
    local cfg = {}
    for k, v in pairs(_M.DEFAULTS) do cfg[k] = opts[k] == nil and v or opts[k] end
    for _, k in ipairs { "inflight_cap", "tenant_inflight_cap" } do
        local v = cfg[k]
        if v and (type(v) ~= "number" or v < 1 or v ~= floor(v)) then
            error("runtime.start: " .. k .. " must be an integer >= 1 or nil", 2)
        end
    end
    local self = setmetatable({
        task = task.current(), meter = opts.meter, exporter = opts.exporter, cfg = cfg,
        fairness = opts.fairness or round_robin.new(),
        backoff = opts.backoff, clock = opts.clock,
        tick_ms = opts.tick_ms, mono = opts.mono,
        audit = opts.audit,    -- function(kind, attrs): the audit trail (RT:audit_emit)
        step = {}, clock_steps = 0, step_ahead_ms = nil, -- RT:seal_now_ms
        streams = {},          -- key -> { lane, worker, blocked_seq, dead, tenant, dim }
        offered = {},          -- slice key -> true while in the pipeline
        fed = 0,               -- the meter's push number up to which slices were fed
        lru = {}, lru_q = {}, lru_head = 1, lru_tail = 0,
        exports = {}, rejected = {}, retries = 0, conflicts = {}, events = {},
        given_up = 0,          -- export ops that ended at the budget without an ACK
        stuck_n = 0,           -- streams that cannot advance (gap, conflict): stuck.lua
        losses_accepted = 0, lost_slices = 0, -- RT:accept_loss
        seal_err = nil,        -- the last rollover's error while sealing fails
        tasks = {}, workers = {},
        stopping = false,
        started_ms = uv.now(), last_tick_ms = nil,
        backlog_samples = { n = 0, i = 0 }, latency_samples = { n = 0, i = 0 },
        offered_at = {},       -- slice key -> uv.now() when offered
        need_reoffer = true,   -- some pending slice may not be in the pipeline
        sealed_total = 0, acked_total = 0, -- slices sealed by this runtime; meter ACKs done
        inflight = 0, tenant_inflight = {}, -- bounded dispatch: slices in lanes/exporting
        breach_since = nil, healthy_since = nil, is_degraded = false,
        subs = {}, bus_lagged = 0, next_sub = 0,
    }, RT)
    for _, s in ipairs(exporter_mod.COUNTED) do self.exports[s] = 0 end
    self.rejected.order_overflow, self.rejected.busy = 0, 0
    self.rejected.blocked = 0
    self.stop_ch = task.channel(1, "runtime_stop")
    self.pending_slices = task.channel(cfg.pending_cap, "pending_slices")
    if cfg.put_batch > 1 and type(self.exporter.put_many) == "function" then
        self.put_q, self.put_flushing = { n = 0 }, 0
    end
    self.bounded = cfg.inflight_cap or cfg.tenant_inflight_cap
    if self.bounded then
        self.room = task.channel(1, "router_room") -- a worker finished a slice
        local tin, tcap = self.tenant_inflight, cfg.tenant_inflight_cap
        self.eligible = tcap and function(tenant) return (tin[tenant] or 0) < tcap end
    end
    task.on_shutdown(function() self:stop() end)

    self.tasks[#self.tasks + 1] = task.spawn("wal_replay_task", function()
        self:reoffer()
        self.replayed = true
    end)
    self.tasks[#self.tasks + 1] = task.spawn("rollover_task", function() self:rollover_loop() end)
    self.tasks[#self.tasks + 1] = task.spawn("exporter_router", function() self:router() end)
    self.tasks[#self.tasks + 1] = task.spawn("health_task", function() self:health_loop() end)
    if cfg.ack_batch > 1 then
        self.ack_ch = task.channel(cfg.pending_cap, "ack_queue")
        self.ack_task = task.spawn("ack_task", function() self:ack_loop() end)
    end
    return self
end

-- ---------------------------------------------------------------------------------------
-- control

function RT:stop()
    if self.stopping then return false end
    self.stopping = true
    self.stop_ch:close()
    self.pending_slices:close()
    if self.room then self.room:close() end
    for _, sub in pairs(self.subs) do sub.wake:close() end -- deliver what is queued, end
    return true
end

-- From a task: joins every runtime task; stragglers are aborted at the drain deadline.
function RT:wait()
    local deadline = uv.now() + self.cfg.drain_deadline_ms
    local finished, aborted = 0, 0
    local function join_all(list)
        local i = 1
        while i <= #list do -- workers may still be spawned while the router drains
            local t = list[i]
            local left = deadline - uv.now()
            local ok = left > 0 and t:join(left)
            if ok then
                finished = finished + 1
            else
                if t:abort() then aborted = aborted + 1 end
            end
            i = i + 1
        end
    end
    join_all(self.tasks)
    join_all(self.workers)
    if self.ack_task then -- the workers are done: the last ACKs, then the ack task ends
        self.ack_ch:close()
        join_all({ self.ack_task })
    end
    return { finished = finished, aborted = aborted }
end

return _M
