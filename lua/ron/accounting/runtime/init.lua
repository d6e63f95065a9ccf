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
-- Files: one per concern, each an object that owns its state and is handed the others it
-- calls (STYLE.md 9b; the C core's meter.c facade is the model): offers.lua (the ONE writer
-- of what is offered, delivered and must be re-offered), feed.lua (rollover, WAL replay),
-- router.lua (policy, lanes, streams), worker.lua (per-stream export), puts.lua (put_many
-- batching), stuck.lua (streams that cannot advance, the operator's accept_loss), acks.lua
-- (meter ACKs, compaction), readiness.lua (C-6, degraded), bus.lua (C-10 hooks),
-- metrics.lua (the Prometheus text); rt.lua holds what they share (keys, the log). This one
-- composes them (start) and is the runtime's facade (stop, wait, ready, metrics, ...).
--
-- Nothing is ever lost by a shed: every slice stays in the meter's pending ring (and its
-- WAL) until an ACK. A slice that is shed (pending_slices full, lane full: OrderOverflow,
-- budget spent: given up) is simply not "offered" any more; each rollover tick re-offers, from
-- meter:pending() (per stream in seq order), every pending slice not offered yet. To keep
-- strict seq order (I-5) a stream whose slice N was shed is "blocked at N": the router
-- sheds its later slices too (they are re-offered after N) until N comes back.
--
-- Offers are incremental: a tick offers the slices it sealed; the full walk of
-- meter:pending() (O(pending)) runs only on a tick after something was shed (offers.need),
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
-- compaction: per-ACK compaction cost ~0.4 ms per ACK). N stays offered until its ACK is
-- done.
--
-- Per-slice state is bounded: offered/offered_at by the slices in the pipeline, the ACK
-- LRU by ack_lru, rt.events by events_cap. Bus events: SliceSealed { slice_id, b3 },
-- SliceExported { slice_id, latency_ms (offer -> ACK) }; built only when someone subscribed.
--
-- Blocking calls (rollover's WAL fsync, ack's compaction, the file ledger's fsync) go
-- through ron.accounting.runtime.offload (the libuv threadpool); pass offload.file{...} as the
-- exporter for the file ledger.
local acks_mod = require("ron.accounting.runtime.acks")
local bus_mod = require("ron.accounting.runtime.bus")
local exporter_mod = require("ron.accounting.export.exporters")
local feed_mod = require("ron.accounting.runtime.feed")
local metrics = require("ron.accounting.runtime.metrics")
local offers_mod = require("ron.accounting.runtime.offers")
local puts_mod = require("ron.accounting.runtime.puts")
local readiness_mod = require("ron.accounting.runtime.readiness")
local round_robin = require("ron.accounting.export.fairness.round_robin")
local router_mod = require("ron.accounting.runtime.router")
local rt = require("ron.accounting.runtime.rt")
local stuck_mod = require("ron.accounting.runtime.stuck")
local task = require("ron.base.task")
local worker_mod = require("ron.accounting.runtime.worker")
local uv = require("luv")

local floor = math.floor
local pairs, ipairs, type, error, setmetatable, rawget =
      pairs, ipairs, type, error, setmetatable, rawget

local _M = {}

_M.DEFAULTS = { ordered_buffer_cap = 1024, pending_cap = 1024, op_budget_ms = 10000,
                drain_deadline_ms = 5000, ack_lru = 4096,
                events_cap = 4096, log_every_ms = 60000,
                -- a forward step of the wall clock beyond this is held (feed.lua,
                -- seal_now_ms) until the clock comes back or it lasted confirm_ms
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

_M.slice_id = rt.slice_id
_M._p95 = rt.p95 -- for specs
-- The concerns' classes (specs guard their hot methods' traces; benchmarks drive one).
_M._classes = { Offers = offers_mod.Offers, Router = router_mod.Router,
                Workers = worker_mod.Workers, Puts = puts_mod.Puts,
                Readiness = readiness_mod.Readiness }
_M.puts = puts_mod

-- The runtime object: the facade. Its methods are the runtime's API; its fields are the
-- concerns (rt.offers, rt.feeder, rt.router, rt.workers, rt.acks, rt.stuck, rt.readiness,
-- rt.bus); the counters and tables tests read are views of their owners' (VIEWS).
local RT = {}
local VIEWS = {
    exports = "workers", retries = "workers", given_up = "workers", conflicts = "workers",
    events = "workers",
    rejected = "offers", offered = "offers", offered_at = "offers", lru = "offers",
    lru_head = "offers", lru_tail = "offers", stale_listed = "offers",
    stuck_n = "stuck", losses_accepted = "stuck", lost_slices = "stuck",
    acked_total = "acks",
    sealed_total = "feeder", seal_err = "feeder", clock_steps = "feeder", fed = "feeder",
    streams = "router", inflight = "router", tenant_inflight = "router", fairness = "router",
    bus_lagged = "bus", is_degraded = "readiness",
}
RT.__index = function(t, k)
    local m = RT[k]
    if m ~= nil then return m end
    local owner = VIEWS[k]
    if owner then return rawget(t, owner)[k] end
    return nil
end

local function config(opts)
    local cfg = {}
    for k, v in pairs(_M.DEFAULTS) do cfg[k] = opts[k] == nil and v or opts[k] end
    for _, k in ipairs { "inflight_cap", "tenant_inflight_cap" } do
        local v = cfg[k]
        if v and (type(v) ~= "number" or v < 1 or v ~= floor(v)) then
            error("runtime.start: " .. k .. " must be an integer >= 1 or nil", 3)
        end
    end
    return cfg
end

-- The concerns, each with its own state, handed the others it calls.
local function compose(self, opts)
    local cfg, sched, meter, exporter = self.cfg, self.task, opts.meter, opts.exporter
    local life, stop_ch, audit = self.life, self.stop_ch, opts.audit
    local batched = cfg.put_batch > 1 and type(exporter.put_many) == "function"
    self.bus = bus_mod.new { task = sched, cfg = cfg, tasks = self.tasks }
    self.offers = offers_mod.new { pending = self.pending_slices, ack_lru = cfg.ack_lru,
                                   list_pending = function() return meter:pending() end,
                                   audit = audit }
    self.feeder = feed_mod.new { task = sched, cfg = cfg, meter = meter, offers = self.offers,
                                 bus = self.bus, life = life, stop_ch = stop_ch,
                                 clock = opts.clock, mono = opts.mono, tick_ms = opts.tick_ms }
    self.router = router_mod.new { task = sched, cfg = cfg, pending = self.pending_slices,
                                   fairness = opts.fairness or round_robin.new(),
                                   offers = self.offers, life = life, batched = batched }
    self.stuck = stuck_mod.new { streams = self.router.streams, exporter = exporter,
                                 feeder = self.feeder, audit = audit }
    self.readiness = readiness_mod.new { task = sched, cfg = cfg, meter = meter,
                                         feeder = self.feeder, stuck = self.stuck, life = life,
                                         stop_ch = stop_ch, tick_ms = opts.tick_ms,
                                         audit = audit }
    self.acks = acks_mod.new { task = sched, cfg = cfg, meter = meter, offers = self.offers,
                               feeder = self.feeder, readiness = self.readiness, bus = self.bus }
    self.workers = worker_mod.new {
        task = sched, cfg = cfg, exporter = exporter, backoff = opts.backoff,
        offers = self.offers, stop_ch = stop_ch, audit = audit,
        puts = batched and puts_mod.new { task = sched, exporter = exporter,
                                          put_batch = cfg.put_batch,
                                          put_parallel = cfg.put_parallel } or nil }
    local w = self.workers
    w.router, w.acks, w.stuck, w.readiness = self.router, self.acks, self.stuck, self.readiness
    self.router.acks, self.router.workers = self.acks, w
    self.stuck.workers = w
end

local function spawn(self, name, fn, obj)
    self.tasks[#self.tasks + 1] = task.spawn(name, fn, obj)
end

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
    local self = setmetatable({ task = task.current(), meter = opts.meter,
                                exporter = opts.exporter, cfg = config(opts), tasks = {},
                                stop_ch = task.channel(1, "runtime_stop") }, RT)
    self.life = { stopping = false, stop = function() self:stop() end }
    self.pending_slices = task.channel(self.cfg.pending_cap, "pending_slices")
    compose(self, opts)
    task.on_shutdown(function() self:stop() end)
    spawn(self, "wal_replay_task", self.feeder.replay, self.feeder)
    spawn(self, "rollover_task", self.feeder.rollover_loop, self.feeder)
    spawn(self, "exporter_router", self.router.run, self.router)
    spawn(self, "health_task", self.readiness.loop, self.readiness)
    if self.acks.ch then self.ack_task = task.spawn("ack_task", self.acks.loop, self.acks) end
    return self
end

-- ---------------------------------------------------------------------------------------
-- control

function RT:stop()
    local life = self.life
    if life.stopping then return false end
    life.stopping = true
    self.stop_ch:close()
    self.pending_slices:close()
    if self.router.room then self.router.room:close() end
    self.bus:close() -- deliver what is queued, end
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
    join_all(self.router.worker_tasks)
    if self.ack_task then -- the workers are done: the last ACKs, then the ack task ends
        self.acks.ch:close()
        join_all({ self.ack_task })
    end
    return { finished = finished, aborted = aborted }
end

-- After wait(): a worker stops waiting for its answer at shutdown, but the put_many in
-- flight goes on; the daemon's stop waits for it too (at most deadline_ms), so that a
-- commit is not cut half-way. -> the put_flush tasks still running after it
function RT:wait_puts(deadline_ms)
    local puts = self.workers.puts
    if not puts then return 0 end
    local t_end = uv.now() + (deadline_ms or self.cfg.drain_deadline_ms)
    local left = 0
    for _, h in ipairs(puts:running()) do
        local ms = t_end - uv.now()
        if not (ms > 0 and h:join(ms)) then left = left + 1 end
    end
    return left
end

function RT:ready() return self.readiness:ready() end
function RT:backlog() return self.readiness:backlog() end
function RT:metrics() return metrics.table(self) end
function RT:metrics_text() return metrics.text(self) end
function RT:subscribe(fn, opts) return self.bus:subscribe(fn, opts) end
function RT:accept_loss(tenant, dimension, reason)
    return self.stuck:accept_loss(tenant, dimension, reason)
end
function RT:stuck_list() return self.stuck:list() end
function RT:now_s() return self.feeder:now_s() end

return _M
