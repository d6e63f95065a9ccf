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
--       put_batch = 256,            -- exporter with put_many (offload.file): puts of all
--       put_parallel = 4,           -- streams batched, <= put_parallel calls at once
--                                   -- (put_batch = 1: one put() per slice)
--       compact_interval_ms = 50,   -- ack_task compacts the WAL at most this often (and
--                                   -- once idle that long): a segment is then mostly
--                                   -- fully ACKed (unlinked), rarely rewritten
--       events_cap = 4096,          -- rt.events keeps at most the last events_cap events
--       pending_cap = 1024,         -- the router's pending_slices channel
--       op_budget_ms = 10000, drain_deadline_ms = 5000, ack_lru = 4096,
--       clock = fn,                 -- UTC seconds (default: the meter's / system time)
--       tick_ms = nil }             -- rollover every tick_ms instead of at UTC boundaries
--   rt:stop()          -- no new sealing; the router drains into the lanes, workers finish
--   rt:wait()          -- (from a task) joins every task, aborts stragglers after the
--                         drain deadline; -> { finished =, aborted = }
--   rt:metrics_text()  -- Prometheus text (runtime counters + task metrics)
--
-- Tasks: wal_replay_task, rollover_task, exporter_router, exporter_worker-<tenant>-<dim>,
-- health_task, ack_task (batched meter ACKs + one compaction per batch).
--
-- Nothing is ever lost by a shed: every slice stays in the meter's pending ring (and its
-- WAL) until an ACK. A slice that is shed (pending_slices full, lane full: OrderOverflow,
-- budget spent: fail) is simply not "offered" any more; each rollover tick re-offers, from
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
local backoff_mod = require "ron.accounting.export.backoff"
local offload = require "ron.accounting.runtime.offload"
local task = require "ron.accounting.runtime.task"
local uv = require "luv"

local floor, format, concat, sort = math.floor, string.format, table.concat, table.sort
local pairs, ipairs, tostring, type, error, setmetatable, pcall, next, tonumber =
      pairs, ipairs, tostring, type, error, setmetatable, pcall, next, tonumber

local _M = {}

_M.DEFAULTS = { ordered_buffer_cap = 1024, pending_cap = 1024, op_budget_ms = 10000,
                drain_deadline_ms = 5000, ack_lru = 4096,
                events_cap = 4096,
                ack_batch = 1024,                 -- slices per pooled ACK (1: one by one)
                compact_interval_ms = 50,         -- WAL compaction at most this often
                put_batch = 256, put_parallel = 4, -- exporters with put_many
                -- bounded dispatch (G-22); false = no bound
                inflight_cap = false, tenant_inflight_cap = false,
                -- readiness (C-6)
                ready_backlog_p95 = 10000,        -- sealed, un-ACKed slices
                ready_ack_latency_p95_ms = 30000, -- offer -> ACK
                degrade_after_ms = 30000,         -- breach (or recovery) this long flips degraded
                health_interval_ms = 1000,        -- backlog sampling period
                ready_samples = 128,              -- sliding window of samples (bounded)
                bus_cap = 1024 }                  -- per-subscriber queue (C-10)

local EXPORT_STATUSES = exporter_mod.COUNTED

local RT = {}
RT.__index = RT
_M._RT = RT

local function skey(tenant, dim) return tenant .. "/" .. dim end
-- Cached on the slice object (built up to five times per slice otherwise).
local function slice_key(s)
    local k = s._rt_key
    if not k then
        k = skey(s.tenant, s.dimension) .. "/" .. tostring(s.id.seq)
        s._rt_key = k
    end
    return k
end

local function log(fmt, ...)
    io.stderr:write("runtime: ", format(fmt, ...), "\n")
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
        fairness = opts.fairness or require("ron.accounting.export.fairness.round_robin").new(),
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
        need_reoffer = true,   -- some pending slice may not be in the pipeline
        sealed_total = 0, acked_total = 0, -- slices sealed by this runtime; meter ACKs done
        inflight = 0, tenant_inflight = {}, -- bounded dispatch: slices in lanes/exporting
        breach_since = nil, healthy_since = nil, is_degraded = false,
        subs = {}, bus_lagged = 0, next_sub = 0,
    }, RT)
    for _, s in ipairs(EXPORT_STATUSES) do self.exports[s] = 0 end
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
-- feeding the router

-- Offers one slice to pending_slices; false when full (counted, stays pending).
function RT:offer(s)
    local k = slice_key(s)
    if self.offered[k] then return true end
    local ok = self.pending_slices:try_send(s)
    if not ok then
        self.rejected.busy = self.rejected.busy + 1
        self.need_reoffer = true
        return false
    end
    self.offered[k] = true
    if not self.offered_at[k] then self.offered_at[k] = uv.now() end
    return true
end

-- Every pending slice of the meter not in the pipeline yet, oldest first.
function RT:reoffer()
    self.need_reoffer = false
    for _, s in ipairs(self.meter:pending()) do
        local st = self.streams[skey(s.tenant, s.dimension)]
        if st and st.blocked_seq and s.id.seq > st.blocked_seq then
            self.need_reoffer = true -- after the one its stream waits for (I-5)
        elseif not (st and st.dead) and not self:offer(s) then
            break
        end
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
            self.sealed_total = self.sealed_total + #sealed
            if next(self.subs) then
                for _, sl in ipairs(sealed) do
                    self:publish({ type = "SliceSealed", slice_id = self.slice_id(sl),
                                   b3 = sl.b3 })
                end
            end
        end
        if self.stopping then break end
        -- Re-offers first (older, shed earlier), then the new ones: reoffer() walks the
        -- whole pending ring, which holds the sealed slices as well, in order. When nothing
        -- was shed since the last walk every older pending slice is in the pipeline: the
        -- new ones are offered alone (no O(pending) walk per tick).
        if self.need_reoffer then
            self:reoffer()
        elseif sealed then
            for _, sl in ipairs(sealed) do
                local st = self.streams[skey(sl.tenant, sl.dimension)]
                if not (st and st.dead) and not self:offer(sl) then break end
            end
        end
    end
end

-- ---------------------------------------------------------------------------------------
-- router

function RT:shed(s, reason)
    self.rejected[reason] = (self.rejected[reason] or 0) + 1
    self.offered[slice_key(s)] = nil
    self.need_reoffer = true
end

-- A new stream and its worker. Apart from RT:stream: a function that makes a closure
-- cannot be JIT-compiled through its returns (LuaJIT's UCLO), and RT:stream runs per slice.
function RT:new_stream(k, s)
    local st = { key = k, tenant = s.tenant, dim = s.dimension,
                 lane = self.task.channel(self.cfg.ordered_buffer_cap, "ordered_buffer"),
                 reply = self.put_q and self.task.channel(1, "put_reply") }
    self.streams[k] = st
    st.worker = self.task.spawn(format("exporter_worker-%s-%s", s.tenant, s.dimension),
                                function() self:worker(st) end)
    self.workers[#self.workers + 1] = st.worker
    return st
end

function RT:stream(s)
    local k = skey(s.tenant, s.dimension)
    return self.streams[k] or self:new_stream(k, s)
end

-- Blocks st at seq (I-5): its later slices are shed until seq comes back.
local function block(st, seq)
    if not st.blocked_seq or seq < st.blocked_seq then st.blocked_seq = seq end
end

function RT:route(s)
    local st = self:stream(s)
    if st.dead then return self:shed(s, "conflict") end
    local seq = s.id.seq
    if st.blocked_seq then
        -- earlier slices (still in the policy when seq was shed) go on; later ones wait
        if seq > st.blocked_seq then return self:shed(s, "blocked") end
        if seq == st.blocked_seq then st.blocked_seq = nil end
    end
    if not st.lane:try_send(s) then
        block(st, seq)
        self:shed(s, "order_overflow") -- OrderOverflow: re-offered from meter:pending()
        return
    end
    if self.bounded then
        self.inflight = self.inflight + 1
        local t = s.tenant
        self.tenant_inflight[t] = (self.tenant_inflight[t] or 0) + 1
    end
end

-- A lane's slice is finished (exported, failed, or dropped behind a failure).
function RT:done(s)
    if not self.bounded then return end
    self.inflight = self.inflight - 1
    local t = s.tenant
    local n = (self.tenant_inflight[t] or 1) - 1
    self.tenant_inflight[t] = n > 0 and n or nil
    if self.room:depth() == 0 then self.room:try_send(true) end
end

-- Into the policy; when it is full the slice is shed (it stays pending) and its stream
-- is blocked there, so that a later slice of it cannot overtake it (I-5).
function RT:admit(s)
    local st = self.streams[skey(s.tenant, s.dimension)]
    if st and st.blocked_seq and s.id.seq > st.blocked_seq then
        return self:shed(s, "blocked") -- waits for the blocked one: no policy slot taken
    end
    if not self.fairness:enqueue(s.tenant, s) then
        block(self:stream(s), s.id.seq)
        self:shed(s, "busy")
    end
end

-- From the policy into the lanes: everything, or (bounded) as long as there is room.
function RT:dispatch()
    local p, cap, eligible = self.fairness, self.cfg.inflight_cap, self.eligible
    while not cap or self.inflight < cap do
        local item
        if eligible then item = p:dequeue(eligible) else item = p:dequeue() end
        if not item then break end
        self:route(item)
    end
end

function RT:router()
    local task, pending = self.task, self.pending_slices
    local chs = self.bounded and { pending, self.room }
    while true do
        local s, err
        if chs then s, err = task.select(chs) else s, err = pending:recv() end
        if not s then
            if err == "Canceled" and not self.stopping then self:stop() end
            break
        end
        if s ~= true then self:admit(s) end -- true: a wake from self.room
        -- everything already received goes through the policy before routing
        while pending:depth() > 0 do self:admit(pending:recv()) end
        self:dispatch()
    end
    -- stopping: no new slices; what fits goes on, the rest stays pending; let the
    -- workers finish their lanes
    self:dispatch()
    for _, st in pairs(self.streams) do st.lane:close() end
end

-- ---------------------------------------------------------------------------------------
-- workers

-- rt.events: the last export events, for tests and debugging; bounded by events_cap (when
-- full, the older half is dropped: amortised O(1), still a plain list).
function RT:event(ev)
    local evs = self.events
    local n = #evs
    local cap = self.cfg.events_cap
    if n >= cap then
        local keep, k = {}, 0
        for i = n - floor(cap / 2) + 1, n do k = k + 1; keep[k] = evs[i] end
        self.events = keep
        evs, n = keep, k
    end
    evs[n + 1] = ev
end

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
        self:ack(s)
        return "acked"
    end
    b:reset()
    local start = uv.hrtime()
    local attempt = 0
    while true do
        local status, detail = self:put(st, s)
        if status == nil then status, detail = "retry_network", detail end
        if exporter_mod.ACKED[status] then
            self.exports[status] = self.exports[status] + 1
            self:lru_add(ak)
            self:ack(s)
            self:event { "acked", st.key, s.id.seq }
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
            self:event { "fail", st.key, s.id.seq, (uv.hrtime() - start) / 1e6 }
            return "fail"
        end
        self.retries = self.retries + 1
        if not self:pause(d) then
            self.exports.fail = self.exports.fail + 1
            return "fail"
        end
    end
end

-- put(s) through the exporter. An exporter with put_many (offload.file) gets the puts of
-- all streams batched: a worker queues its slice and waits on its stream's reply channel;
-- a put_flush task (at most put_parallel at once) sends up to put_batch queued slices in
-- one put_many call (one threadpool round trip instead of one per slice) and hands each
-- answer back. The queue holds at most one slice per stream (a worker waits for its own).
function RT:put(st, s)
    if not self.put_q then return self.exporter:put(s) end
    local q = self.put_q
    q.n = q.n + 1
    q[q.n] = { s, st.reply }
    if self.put_flushing < self.cfg.put_parallel then self:spawn_put_flush() end
    while true do
        local r, err = st.reply:recv()
        if not r then return nil, "Canceled: " .. tostring(err) end
        -- an answer for an earlier put whose wait was canceled is dropped
        if r[3] == s then return r[1], r[2] end
    end
end

function RT:spawn_put_flush() -- (no closure in RT:put, see RT:new_stream)
    self.put_flushing = self.put_flushing + 1
    self.task.spawn("put_flush", function() self:put_flush() end)
end

function RT:put_flush()
    local q, max = self.put_q, self.cfg.put_batch
    while q.n > 0 do
        local n = q.n < max and q.n or max
        local reqs, slices = {}, {}
        for i = 1, n do reqs[i] = q[i]; slices[i] = q[i][1] end
        for i = n + 1, q.n do q[i - n] = q[i] end
        for i = q.n - n + 1, q.n do q[i] = nil end
        q.n = q.n - n
        local ok, res, err = pcall(self.exporter.put_many, self.exporter, slices)
        if not ok then res, err = nil, tostring(res) end
        for i, req in ipairs(reqs) do
            local a = res and res[i]
            if a then
                req[2]:try_send({ a[1], a[2], req[1] })
            else
                req[2]:try_send({ nil, err or "put_many: no answer", req[1] })
            end
        end
    end
    self.put_flushing = self.put_flushing - 1
end

-- The meter ACK of an exported slice (then WAL compaction). Queued to ack_loop, which
-- acks a batch in one pool call and compacts at most every compact_interval_ms (a
-- compaction per slice would rewrite a half-ACKed WAL segment on every ACK); inline
-- (offload.ack: ack + compaction) when the queue is full or closed.
-- The slice stays in `offered` until its ACK is done, so a re-offer cannot resend it.
function RT:ack(s)
    if self.ack_ch and self.ack_ch:try_send(s) then return end
    local ok, aerr = offload.ack(self.meter, s)
    if not ok then log("ack %s: %s", slice_key(s), tostring(aerr)) end
    self:ack_done(s)
end

function RT:ack_done(s)
    self.acked_total = self.acked_total + 1
    self.offered[slice_key(s)] = nil
    self:acked(s)
end

function RT:ack_loop()
    local ch, max, every = self.ack_ch, self.cfg.ack_batch, self.cfg.compact_interval_ms
    local last, dirty = uv.now(), false
    while true do
        local s, err = ch:recv(dirty and every or nil)
        if not s then
            -- idle for compact_interval_ms, or the end: the compaction still owed
            if dirty then
                local _, cerr = offload.ack_many(self.meter, {}, true)
                if cerr then log("compaction: %s", cerr) end
                last, dirty = uv.now(), false
            end
            if err ~= "Timeout" then break end -- closed and empty (rt:wait), or shutdown
            goto continue
        end
        local batch = { s }
        while #batch < max and ch:depth() > 0 do batch[#batch + 1] = ch:recv() end
        local compact = uv.now() - last >= every
        local res, cerr = offload.ack_many(self.meter, batch, compact)
        if compact then last, dirty = uv.now(), false else dirty = true end
        if not res then
            log("ack of %d slices: %s", #batch, tostring(cerr))
        else
            if cerr then log("compaction: %s", cerr) end
            for i, sl in ipairs(batch) do
                if res[i] ~= true then log("ack %s: %s", slice_key(sl), tostring(res[i])) end
            end
        end
        for _, sl in ipairs(batch) do self:ack_done(sl) end
        ::continue::
    end
end

-- One per stream (I-async-2): the lane's slices in seq order, N+1 only after N's ACK.
function RT:worker(st)
    local b = self.backoff or require("ron.accounting.export.backoff.exponential").new()
    while true do
        local s = st.lane:recv()
        if not s then break end -- Closed (stopped) or Canceled (shutdown, lane empty)
        local r = self:export_one(st, s, b)
        -- an ACKed slice leaves `offered` once the meter has its ACK (ack_loop)
        if r ~= "acked" then self.offered[slice_key(s)] = nil end
        self:done(s)
        if r ~= "acked" then
            -- keep order: this stream waits for s to be re-offered; what is queued behind
            -- it goes back to the meter's pending ring (it never left it)
            st.blocked_seq = s.id.seq
            self.need_reoffer = true
            while st.lane:depth() > 0 do
                local later = st.lane:recv()
                self.offered[slice_key(later)] = nil
                self:done(later)
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
    local lat = t0 and uv.now() - t0
    if lat then self:sample(self.latency_samples, lat) end
    if next(self.subs) then
        self:publish({ type = "SliceExported", slice_id = self.slice_id(s), latency_ms = lat })
    end
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

-- Sealed, un-ACKed slices: the core's count (no wrapping of every pending slice).
function RT:backlog()
    return self.meter:pending_count()
end

function RT:health_step()
    local now = uv.now()
    self:sample(self.backlog_samples, self:backlog())
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

function RT:metrics()
    return { exports = self.exports, rejected = self.rejected, retries = self.retries,
             conflicts = #self.conflicts, backlog = self:backlog(),
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
    out[#out + 1] = format("accounting_export_backlog %d", self:backlog())
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
