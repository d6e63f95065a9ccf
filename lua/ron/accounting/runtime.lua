-- ron.accounting.runtime: the export pipeline as tasks on the loop (issue 4, seed 001 §2).
--
--   local rt = runtime.start { meter = m, exporter = e,
--       fairness = p,               -- default fairness.round_robin
--       backoff = b,                -- default backoff.exponential (one per worker)
--       ordered_buffer_cap = 1024,  -- per-stream lane
--       pending_cap = 1024,         -- the router's pending_slices channel
--       op_budget_ms = 10000, drain_deadline_ms = 5000, ack_lru = 4096,
--       clock = fn,                 -- UTC seconds (default: the meter's / system time)
--       tick_ms = nil }             -- rollover every tick_ms instead of at UTC boundaries
--   rt:stop()          -- no new sealing; the router drains into the lanes, workers finish
--   rt:wait()          -- (from a task) joins every task, aborts stragglers after the
--                         drain deadline; -> { finished =, aborted = }
--   rt:metrics_text()  -- Prometheus text (runtime counters + task metrics)
--
-- Tasks: wal_replay_task, rollover_task, exporter_router, exporter_worker-<tenant>-<dim>.
--
-- Nothing is ever lost by a shed: every slice stays in the meter's pending ring (and its
-- WAL) until an ACK. A slice that is shed (pending_slices full, lane full: OrderOverflow,
-- budget spent: fail) is simply not "offered" any more; each rollover tick re-offers, from
-- meter:pending() (per stream in seq order), every pending slice not offered yet. To keep
-- strict seq order (I-5) a stream whose slice N was shed is "blocked at N": the router
-- sheds its later slices too (they are re-offered after N) until N comes back.
--
-- Blocking calls (rollover's WAL fsync, ack's compaction, the file ledger's fsync) go
-- through ron.accounting.offload (the libuv threadpool); pass offload.file{...} as the
-- exporter for the file ledger.
local exporter_mod = require "ron.accounting.exporter"
local backoff_mod = require "ron.accounting.backoff"
local offload = require "ron.accounting.offload"
local uv = require "luv"

local floor, format, concat, sort = math.floor, string.format, table.concat, table.sort
local pairs, ipairs, tostring, type, error, setmetatable, pcall =
      pairs, ipairs, tostring, type, error, setmetatable, pcall

local _M = {}

_M.DEFAULTS = { ordered_buffer_cap = 1024, pending_cap = 1024, op_budget_ms = 10000,
                drain_deadline_ms = 5000, ack_lru = 4096,
                -- readiness (C-6)
                ready_backlog_p95 = 10000,        -- sealed, un-ACKed slices
                ready_ack_latency_p95_ms = 30000, -- offer -> ACK
                degrade_after_ms = 30000,         -- breach (or recovery) this long flips degraded
                health_interval_ms = 1000,        -- backlog sampling period
                ready_samples = 128,              -- sliding window of samples (bounded)
                bus_cap = 1024 }                  -- per-subscriber queue (C-10)

local EXPORT_STATUSES = { "ok", "dup", "retry_network", "retry_remote_5xx", "retry_timeout",
                          "fail" }

local RT = {}
RT.__index = RT
_M._RT = RT

local function skey(tenant, dim) return tenant .. "/" .. dim end
local function slice_key(s) return skey(s.tenant, s.dimension) .. "/" .. tostring(s.id.seq) end

local function log(fmt, ...)
    io.stderr:write("runtime: ", format(fmt, ...), "\n")
end

function _M.start(opts)
    if type(opts) ~= "table" or not opts.meter or not opts.exporter then
        error("runtime.start: expects { meter = m, exporter = e, ... }", 2)
    end
    local task = require "ron.accounting.task"
    exporter_mod.check(opts.exporter)
    local cfg = {}
    for k, v in pairs(_M.DEFAULTS) do cfg[k] = opts[k] == nil and v or opts[k] end
    local self = setmetatable({
        task = task, meter = opts.meter, exporter = opts.exporter, cfg = cfg,
        fairness = opts.fairness or require("ron.accounting.fairness.round_robin").new(),
        backoff = opts.backoff, clock = opts.clock, tick_ms = opts.tick_ms,
        streams = {},          -- key -> { lane, worker, blocked_seq, dead, tenant, dim }
        offered = {},          -- slice key -> true while in the pipeline
        lru = {}, lru_q = {}, lru_head = 1, lru_tail = 0,
        exports = {}, rejected = {}, retries = 0, conflicts = {}, events = {},
        tasks = {}, workers = {},
        stopping = false,
        started_ms = uv.now(), last_tick_ms = nil,
        backlog_samples = { n = 0, i = 0 }, latency_samples = { n = 0, i = 0 },
        offered_at = {},       -- slice key -> uv.now() when offered
        breach_since = nil, healthy_since = nil, is_degraded = false,
        subs = {}, bus_lagged = 0, next_sub = 0,
    }, RT)
    for _, s in ipairs(EXPORT_STATUSES) do self.exports[s] = 0 end
    self.rejected.order_overflow, self.rejected.busy = 0, 0
    self.rejected.blocked = 0
    self.stop_ch = task.channel(1, "runtime_stop")
    self.pending_slices = task.channel(cfg.pending_cap, "pending_slices")
    task.on_shutdown(function() self:stop() end)

    self.tasks[#self.tasks + 1] = task.spawn("wal_replay_task", function()
        self:reoffer()
        self.replayed = true
    end)
    self.tasks[#self.tasks + 1] = task.spawn("rollover_task", function() self:rollover_loop() end)
    self.tasks[#self.tasks + 1] = task.spawn("exporter_router", function() self:router() end)
    self.tasks[#self.tasks + 1] = task.spawn("health_task", function() self:health_loop() end)
    return self
end

-- ---------------------------------------------------------------------------------------
-- feeding the router

-- Offers one slice to pending_slices; false when full (counted, stays pending).
function RT:offer(s)
    local k = slice_key(s)
    if self.offered[k] then return true end
    local ok = self.pending_slices:try_send(s)
    if not ok then
        self.rejected.busy = self.rejected.busy + 1
        return false
    end
    self.offered[k] = true
    if not self.offered_at[k] then self.offered_at[k] = uv.now() end
    return true
end

-- Every pending slice of the meter not in the pipeline yet, oldest first.
function RT:reoffer()
    for _, s in ipairs(self.meter:pending()) do
        local st = self.streams[skey(s.tenant, s.dimension)]
        if not (st and st.dead) and not self:offer(s) then break end
    end
end

function RT:now_s()
    if self.clock then return self.clock() end
    local c = self.meter._clock
    if c then return c() end
    local s, us = uv.gettimeofday()
    return s + us / 1e6
end

function RT:rollover_loop()
    local task = self.task
    local win = self.meter:window_len()
    while not self.stopping do
        self.last_tick_ms = uv.now()
        local wait_ms = self.tick_ms
        if not wait_ms then
            local now = self:now_s()
            local nxt = (floor(now / win) + 1) * win
            wait_ms = floor((nxt - now) * 1000) + 1
        end
        local _, err = task.select({ self.stop_ch }, wait_ms)
        if err ~= "Timeout" then break end -- stop (Closed) or shutdown (Canceled)
        local sealed, rerr = offload.rollover(self.meter, floor(self:now_s() * 1000))
        if rerr then log("rollover: %s", rerr) end
        self.last_tick_ms = uv.now()
        if sealed then
            for _, sl in ipairs(sealed) do
                self:publish({ type = "SliceSealed", slice_id = self.slice_id(sl), b3 = sl.b3 })
            end
        end
        if self.stopping then break end
        -- Re-offers first (older, shed earlier), then the new ones: reoffer() walks the
        -- whole pending ring, which holds the sealed slices as well, in order.
        if sealed then self:reoffer() end
    end
end

-- ---------------------------------------------------------------------------------------
-- router

function RT:shed(s, reason)
    self.rejected[reason] = (self.rejected[reason] or 0) + 1
    self.offered[slice_key(s)] = nil
end

function RT:route(s)
    local k = skey(s.tenant, s.dimension)
    local st = self.streams[k]
    if not st then
        st = { key = k, tenant = s.tenant, dim = s.dimension,
               lane = self.task.channel(self.cfg.ordered_buffer_cap, "ordered_buffer") }
        self.streams[k] = st
        st.worker = self.task.spawn(format("exporter_worker-%s-%s", s.tenant, s.dimension),
                                    function() self:worker(st) end)
        self.workers[#self.workers + 1] = st.worker
    end
    if st.dead then return self:shed(s, "conflict") end
    local seq = s.id.seq
    if st.blocked_seq then
        if seq ~= st.blocked_seq then return self:shed(s, "blocked") end
        st.blocked_seq = nil
    end
    if not st.lane:try_send(s) then
        st.blocked_seq = seq
        self:shed(s, "order_overflow") -- OrderOverflow: re-offered from meter:pending()
    end
end

function RT:router()
    local task, p = self.task, self.fairness
    while true do
        local s, err = self.pending_slices:recv()
        if not s then
            if err == "Canceled" and not self.stopping then self:stop() end
            break
        end
        if not p:enqueue(s.tenant, s) then
            self:shed(s, "busy")
        end
        -- everything already received goes through the policy before routing
        while self.pending_slices:depth() > 0 do
            local s2 = self.pending_slices:recv()
            if not p:enqueue(s2.tenant, s2) then self:shed(s2, "busy") end
        end
        while true do
            local item = p:dequeue()
            if not item then break end
            self:route(item)
        end
    end
    -- stopping: no new slices; let the workers finish their lanes
    for _, st in pairs(self.streams) do st.lane:close() end
    local _ = task
end

-- ---------------------------------------------------------------------------------------
-- workers

function RT:lru_has(k) return self.lru[k] ~= nil end

function RT:lru_add(k)
    if self.lru[k] then return end
    self.lru[k] = true
    self.lru_tail = self.lru_tail + 1
    self.lru_q[self.lru_tail] = k
    if self.lru_tail - self.lru_head + 1 > self.cfg.ack_lru then
        self.lru[self.lru_q[self.lru_head]] = nil
        self.lru_q[self.lru_head] = nil
        self.lru_head = self.lru_head + 1
    end
end

-- Sleeps ms unless the runtime stops; false when stopped.
function RT:pause(ms)
    local _, err = self.task.select({ self.stop_ch }, ms)
    return err == "Timeout"
end

-- Exports one slice: "acked" | "fail" | "conflict".
function RT:export_one(st, s, b)
    local ak = slice_key(s) .. "/" .. s.b3
    if self:lru_has(ak) then -- delivered and ACKed before: a re-offer (I-17)
        self.exports.dup = self.exports.dup + 1
        offload.ack(self.meter, s)
        self:acked(s)
        return "acked"
    end
    b:reset()
    local start = uv.hrtime()
    local attempt = 0
    while true do
        local status, detail = self.exporter:put(s)
        if status == nil then status, detail = "retry_network", detail end
        if exporter_mod.ACKED[status] then
            self.exports[status] = self.exports[status] + 1
            local ok, aerr = offload.ack(self.meter, s)
            if not ok then log("ack %s: %s", slice_key(s), tostring(aerr)) end
            self:lru_add(ak)
            self:acked(s)
            self.events[#self.events + 1] = { "acked", st.key, s.id.seq }
            return "acked"
        end
        if status == "conflict" then
            self.conflicts[#self.conflicts + 1] = { stream = st.key, seq = s.id.seq,
                                                    detail = detail }
            log("conflict on %s seq %s: %s; stopping that stream's worker", st.key,
                tostring(s.id.seq), tostring(detail))
            return "conflict"
        end
        if exporter_mod.RETRYABLE[status] then
            self.exports[status] = self.exports[status] + 1
        end
        -- retryable (gap too: the head may still move) within the op budget
        attempt = attempt + 1
        local elapsed = (uv.hrtime() - start) / 1e6
        local d = backoff_mod.within_budget(b, attempt, elapsed, self.cfg.op_budget_ms)
        if not d then
            -- the budget ends before the next try could start: the op ends at the budget
            local left = self.cfg.op_budget_ms - elapsed
            if left > 0 then self:pause(floor(left)) end
            self.exports.fail = self.exports.fail + 1
            self:sample(self.latency_samples, (uv.hrtime() - start) / 1e6)
            self.events[#self.events + 1] = { "fail", st.key, s.id.seq,
                                              (uv.hrtime() - start) / 1e6 }
            return "fail"
        end
        self.retries = self.retries + 1
        if not self:pause(d) then
            self.exports.fail = self.exports.fail + 1
            return "fail"
        end
    end
end

-- One per stream (I-async-2): the lane's slices in seq order, N+1 only after N's ACK.
function RT:worker(st)
    local b = self.backoff or require("ron.accounting.backoff.exponential").new()
    while true do
        local s = st.lane:recv()
        if not s then break end -- Closed (stopped) or Canceled (shutdown, lane empty)
        local r = self:export_one(st, s, b)
        self.offered[slice_key(s)] = nil
        if r ~= "acked" then
            -- keep order: this stream waits for s to be re-offered; what is queued behind
            -- it goes back to the meter's pending ring (it never left it)
            st.blocked_seq = s.id.seq
            while st.lane:depth() > 0 do
                local later = st.lane:recv()
                self.offered[slice_key(later)] = nil
            end
            if r == "conflict" then
                st.dead = true
                break
            end
        end
    end
end

-- ---------------------------------------------------------------------------------------
-- readiness (C-6): rollover running ∧ exporter ok; a sustained breach sets degraded (I-8)

function _M.slice_id(s)
    return { tenant = s.tenant, dimension = s.dimension, window_start_s = s.id.window_start_s,
             window_len_s = s.id.window_len_s, seq = s.id.seq }
end
RT.slice_id = _M.slice_id

-- A bounded ring of the last cfg.ready_samples values.
function RT:sample(ring, v)
    local cap = self.cfg.ready_samples
    ring.i = ring.i % cap + 1
    ring[ring.i] = v
    if ring.n < cap then ring.n = ring.n + 1 end
end

local function p95(ring)
    if ring.n == 0 then return 0 end
    local a = {}
    for i = 1, ring.n do a[i] = ring[i] end
    sort(a)
    local k = math.ceil(0.95 * ring.n)
    return a[k]
end
_M._p95 = p95

function RT:acked(s)
    local k = slice_key(s)
    local t0 = self.offered_at[k]
    self.offered_at[k] = nil
    if t0 then self:sample(self.latency_samples, uv.now() - t0) end
    self:publish({ type = "SliceExported", slice_id = self.slice_id(s) })
end

-- -> ready, reasons (a list of strings; empty when ready), details
function RT:ready()
    local cfg, reasons = self.cfg, {}
    local now = uv.now()
    local period = self.tick_ms or self.meter:window_len() * 1000
    local last = self.last_tick_ms or self.started_ms
    if self.stopping then
        reasons[#reasons + 1] = "stopping"
    elseif now - last > 2 * period + 1000 then
        reasons[#reasons + 1] = format("rollover_task stalled for %d ms", now - last)
    end
    local bp, lp = p95(self.backlog_samples), p95(self.latency_samples)
    if bp > cfg.ready_backlog_p95 then
        reasons[#reasons + 1] = format("backlog p95 %d > %d", bp, cfg.ready_backlog_p95)
    end
    if lp > cfg.ready_ack_latency_p95_ms then
        reasons[#reasons + 1] = format("ack latency p95 %d ms > %d ms", lp,
                                       cfg.ready_ack_latency_p95_ms)
    end
    if self.is_degraded then reasons[#reasons + 1] = "degraded" end
    return #reasons == 0, reasons, { backlog_p95 = bp, ack_latency_p95_ms = lp }
end

function RT:exporter_ok()
    local cfg = self.cfg
    return p95(self.backlog_samples) <= cfg.ready_backlog_p95
       and p95(self.latency_samples) <= cfg.ready_ack_latency_p95_ms
end

function RT:set_degraded(on)
    if on == self.is_degraded then return end
    self.is_degraded = on
    pcall(self.meter.set_degraded, self.meter, on)
    log("%s: backlog p95 %d, ack latency p95 %d ms", on and "degraded (exporter)" or
        "recovered", p95(self.backlog_samples), p95(self.latency_samples))
end

function RT:health_step()
    local now = uv.now()
    self:sample(self.backlog_samples, #self.meter:pending())
    if self:exporter_ok() then
        self.breach_since = nil
        self.healthy_since = self.healthy_since or now
        if self.is_degraded and now - self.healthy_since >= self.cfg.degrade_after_ms then
            self:set_degraded(false)
        end
    else
        self.healthy_since = nil
        self.breach_since = self.breach_since or now
        if not self.is_degraded and now - self.breach_since >= self.cfg.degrade_after_ms then
            self:set_degraded(true)
        end
    end
end

function RT:health_loop()
    while not self.stopping do
        self:health_step()
        if not self:pause(self.cfg.health_interval_ms) then break end
    end
end

-- ---------------------------------------------------------------------------------------
-- bus hooks (C-10): bounded per-subscriber queues, drop-oldest, delivered by a task

local Sub = {}
Sub.__index = Sub

function RT:publish(ev)
    for _, sub in pairs(self.subs) do
        if sub.n >= sub.cap then -- drop the oldest
            sub.q[sub.head] = nil
            sub.head = sub.head + 1
            sub.n = sub.n - 1
            sub.lagged = sub.lagged + 1
            self.bus_lagged = self.bus_lagged + 1
        end
        sub.q[sub.head + sub.n] = ev
        sub.n = sub.n + 1
        sub.wake:try_send(true)
    end
end

-- rt:subscribe(fn [, { cap = 1024 }]) -> sub; fn(event) runs in the subscriber's task
-- (it may yield); sub:close() stops it, sub.lagged counts the events it lost.
function RT:subscribe(fn, opts)
    if type(fn) ~= "function" then error("runtime:subscribe(fn): fn must be a function", 2) end
    local cap = (opts and opts.cap) or self.cfg.bus_cap
    self.next_sub = self.next_sub + 1
    local sub = setmetatable({ id = self.next_sub, rt = self, cap = cap, q = {}, head = 1,
                               n = 0, lagged = 0, delivered = 0,
                               wake = self.task.channel(1, "bus_wake") }, Sub)
    self.subs[sub.id] = sub
    sub.task = self.task.spawn("bus_subscriber-" .. sub.id, function()
        while true do
            if sub.n > 0 then
                local ev = sub.q[sub.head]
                sub.q[sub.head] = nil
                sub.head = sub.head + 1
                sub.n = sub.n - 1
                local ok, err = pcall(fn, ev)
                if not ok then log("bus subscriber %d: %s", sub.id, tostring(err)) end
                sub.delivered = sub.delivered + 1
            else
                local _, err = sub.wake:recv()
                if err then break end -- closed (and nothing queued) or shutdown
            end
        end
    end)
    self.tasks[#self.tasks + 1] = sub.task
    return sub
end

function Sub:close()
    if self.closed then return end
    self.closed = true
    self.rt.subs[self.id] = nil
    self.q, self.n = {}, 0
    self.wake:close()
end

-- ---------------------------------------------------------------------------------------
-- control

function RT:stop()
    if self.stopping then return false end
    self.stopping = true
    self.stop_ch:close()
    self.pending_slices:close()
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
    return { finished = finished, aborted = aborted }
end

function RT:metrics()
    return { exports = self.exports, rejected = self.rejected, retries = self.retries,
             conflicts = #self.conflicts, backlog = #self.meter:pending(),
             degraded = self.is_degraded, bus_lagged = self.bus_lagged }
end

function RT:metrics_text()
    local out = {}
    out[#out + 1] = "# HELP accounting_exports_total Export outcomes, by status."
    out[#out + 1] = "# TYPE accounting_exports_total counter"
    for _, s in ipairs(EXPORT_STATUSES) do
        out[#out + 1] = format('accounting_exports_total{status="%s"} %d', s, self.exports[s])
    end
    out[#out + 1] = "# HELP accounting_rejected_total Slices shed by the runtime, by reason."
    out[#out + 1] = "# TYPE accounting_rejected_total counter"
    local rs = {}
    for k in pairs(self.rejected) do rs[#rs + 1] = k end
    sort(rs)
    for _, k in ipairs(rs) do
        out[#out + 1] = format('accounting_rejected_total{reason="%s"} %d', k, self.rejected[k])
    end
    out[#out + 1] = "# HELP backoff_retries_total Export retries after a backoff delay."
    out[#out + 1] = "# TYPE backoff_retries_total counter"
    out[#out + 1] = format("backoff_retries_total %d", self.retries)
    out[#out + 1] = "# HELP busy_rejections_total Slices shed: pending_slices was full (Busy)."
    out[#out + 1] = "# TYPE busy_rejections_total counter"
    out[#out + 1] = format("busy_rejections_total %d", self.rejected.busy or 0)
    out[#out + 1] = "# HELP accounting_export_backlog Sealed slices not ACKed yet."
    out[#out + 1] = "# TYPE accounting_export_backlog gauge"
    out[#out + 1] = format("accounting_export_backlog %d", #self.meter:pending())
    out[#out + 1] = "# HELP accounting_ready 1 when the runtime is ready (C-6)."
    out[#out + 1] = "# TYPE accounting_ready gauge"
    out[#out + 1] = format("accounting_ready %d", self:ready() and 1 or 0)
    out[#out + 1] = "# HELP bus_lagged_total Bus events dropped (oldest first) for slow subscribers."
    out[#out + 1] = "# TYPE bus_lagged_total counter"
    out[#out + 1] = format("bus_lagged_total %d", self.bus_lagged)
    return concat(out, "\n") .. "\n" .. self.task.metrics_text()
end

local _ = pcall
return _M
