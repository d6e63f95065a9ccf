-- ron.audit.host: the host pattern of seed 002 (its §§2-6) on the daemon's loop: a bounded
-- queue, one sink worker per chain head, deadlines on enqueue and on WAL I/O, a drain on
-- shutdown, no task leaks (docs/AUDIT.md, "In the daemon").
--
--   local host = require("ron.audit.host")
--   local h = assert(host.start { writer_id = "node-1", stream = "daemon", dir = DIR,
--                                 key_path = KEY, checkpoint_every = 1000, queue_cap = 65536 })
--   h:emit("reject", { tenant = t, dimension = d, reason = r })  -- never blocks
--   h:emit_wait("operator", attrs, 25)    -- from a task: waits <= 25 ms for room
--   h:latest_checkpoint()                 -- { origin, size, root, note } | nil
--   h:close(deadline_ms)                  -- from a task: stop intake, drain, join, close
--
-- Threads and tasks (AUD-I-19, AUD-I-20). emit() runs on the caller (the ingest handler, the
-- export runtime): it stamps the event (ts_ms from the wall clock, n: an event number, so two
-- equal rejects in one millisecond stay two records and are not taken for a re-emit,
-- AUD-I-6), encodes it once (a bad event is refused to its caller) and puts the bytes in the
-- log's bounded queue, packed in chunks of at most `batch` events; it never hashes the chain
-- and never writes (AUD-I-17). The sink worker, one task per chain (seed 002 I-2: the only
-- writer of its head), wakes on the first event after an idle period or every interval_ms,
-- takes the queue's first chunk and hands it to the libuv threadpool in ONE call that appends
-- the whole chunk (seq, prev, BLAKE3 self_hash and dedupe key, frames, Merkle leaves:
-- rau_log_append_packed) and makes it durable (rau_log_sync: one write + one fdatasync), so
-- the loop never hashes nor waits for the disk (seed 002 I-6). While that call is out the
-- worker does not touch the log; events keep queueing into the next chunks: that is the
-- batching. A call that is not back within io_deadline_ms opens the breaker: emit() sheds at
-- once with reason io_backpressure (counted, and a Gap record later) instead of filling the
-- queue behind a stalled disk, and audit_io_timeouts_total{op="wal"} counts it; the breaker
-- closes when the call returns. A failed append or sync fails the log (AUD-I-14): the chain
-- says why at ERROR (the errno, the file, the file system), sheds its events as audit_failed
-- and recovers by itself with a bounded backoff (ron.audit.recovery, AUD-I-42), then writes
-- one Gap record with the exact count and time range of what it shed meanwhile.
--
-- Checkpoints (AUD-I-39): with a key, every checkpoint_every records and, for records none
-- covers, every checkpoint_interval_ms (an idle worker syncs once for it), and at close.
--
-- Shed reasons (audit_drop_total{reason}): audit_backpressure (queue full),
-- io_backpressure (the breaker), audit_deadline (emit_wait ran out), shutdown_deadline
-- (close ran out before the queue was empty), audit_failed (the log failed, until it
-- recovers), audit_closed (after close). All but audit_closed end as a Gap record with the
-- exact count (AUD-I-18).
local audit = require("ron.audit")
local config = require("ron.audit.config")
local FAM = require("ron.audit.families")
local metrics = require("ron.base.metrics")
local recovery = require("ron.audit.recovery")
local task = require("ron.base.task")
local offload = require("ron.audit.offload")
local uv = require("luv")

local floor, max, format, pairs, type, tostring, setmetatable, error =
      math.floor, math.max, string.format, pairs, type, tostring, setmetatable, error

local _M = {}

_M.DEFAULTS = { queue_cap = 65536, batch = 4096, interval_ms = 50,
                io_deadline_ms = 1000, close_deadline_ms = 2000, recover_min_ms = 100,
                recover_max_ms = 10000 }

-- (slice: accepted and ignored; it was the number of events hashed on the loop between
-- yields, before the hashing moved to the threadpool)
local HOST_KEYS = { shards = true, batch = true, slice = true, interval_ms = true,
                    io_deadline_ms = true, close_deadline_ms = true, now_ms = true, log = true,
                    sync = true, recover_min_ms = true, recover_max_ms = true, reopen = true }

-- The wall clock in ms, read through the FFI (the vDSO's clock_gettime, compiled into the
-- emitting trace) rather than luv's gettimeofday (a Lua C function: a trace exit per event;
-- ~120 ns against ~50 ns an emit).
local ffi = require("ffi")
pcall(ffi.cdef, [[
struct rau_host_timespec { long tv_sec; long tv_nsec; };
int clock_gettime(int clk, struct rau_host_timespec *ts);
]])
local ts_buf = ffi.new("struct rau_host_timespec")
local CLOCK_REALTIME = 0
local function wall_ms()
    ffi.C.clock_gettime(CLOCK_REALTIME, ts_buf)
    return tonumber(ts_buf.tv_sec) * 1000 + floor(tonumber(ts_buf.tv_nsec) / 1000000)
end

local H = {}
H.__index = H
local metrics_text -- below

-- A text for an attribute: printable ASCII only (a detail from an exporter or a peer may
-- hold anything; the record's strings must be valid NFC UTF-8), at most max bytes.
function _M.text(s, cap)
    s = tostring(s):gsub("[^\32-\126]", "?")
    cap = cap or 200
    if #s > cap then s = s:sub(1, cap - 3) .. "..." end
    return s
end

-- The daemon's `audit = { ... }` block: its defaults and check (ron.audit.config).
_M.CONFIG_DEFAULTS = config.DEFAULTS
_M.check_config = config.check
_M.check_tokens = config.check_tokens
_M.check_paths = config.check_paths

-- o: the ron.audit.open config (writer_id, stream, dir | amnesia, key_path,
-- checkpoint_every, queue_cap, ...) and batch, interval_ms, io_deadline_ms,
-- close_deadline_ms, now_ms (wall ms), log (function(line)), sync (a test's replacement of
-- offload.audit_sync). From a task or the main chunk; -> host | nil, err.
local function start_one(o, ctr)
    local lcfg, self = {}, setmetatable({}, H)
    for k, v in pairs(_M.DEFAULTS) do self[k] = v end
    for k, v in pairs(o) do
        if HOST_KEYS[k] then self[k] = v else lcfg[k] = v end
    end
    -- The group-commit buffer holds a batch of typical records (~200 bytes); a batch of
    -- larger ones fills it and the append writes it out (one more fdatasync) on the
    -- threadpool, where the whole append runs: never on the loop thread.
    lcfg.batch_bytes = lcfg.batch_bytes or max(1048576, self.batch * 512)
    lcfg.queue_cap = lcfg.queue_cap or self.queue_cap
    local lg, err = audit.open(lcfg)
    if not lg then return nil, err end
    self.lg = lg
    lg:set_chunk(self.batch)
    self.now_ms = self.now_ms or wall_ms
    self.log = self.log or function(line, level)
        io.stderr:write("ron-audit: ", level and (level .. ": ") or "", line, "\n")
    end
    self.sync = self.sync or offload.audit_sync
    self.reopen = self.reopen or offload.audit_reopen
    self.key = lcfg.key_path and not lcfg.amnesia
    self.cp_interval_ms = lcfg.checkpoint_interval_ms or 0
    self.cp_tick = uv.now()
    self.io_errors, self.recoveries = {}, 0
    -- event numbers continue past the chain's head (past the sum of the heads when sharded)
    self.ctr = ctr or { n = 0 }
    self.ctr.n = self.ctr.n + lg:stats().head_seq
    self.dir, self.writer_id, self.stream = lcfg.dir, lcfg.writer_id, lcfg.stream
    self.stalled = false           -- the I/O breaker (a sync past its deadline)
    self.failed = nil              -- the error that failed the log
    self.closing = false
    self.io_timeouts, self.syncs, self.emitted, self.in_flight = 0, 0, 0, 0
    self.wake = task.channel(1, "audit_wake")
    self.room = task.channel(1, "audit_room")
    self.stop = task.channel(1, "audit_stop")
    self.worker = task.spawn("audit_sink-" .. lcfg.writer_id .. "-" .. lcfg.stream,
                             function() self:run() end)
    return self
end

-- A sharded host (AUD-I-38, docs/AUDIT.md "More than one chain"): `shards` = N chains of one
-- writer, each with its own queue, sink worker, log and pool call, so N chunks are hashed
-- and synced at once on N threadpool threads. Chain 1 is (writer_id, stream) in dir, as
-- without shards; chain i > 1 is (writer_id, stream.<i-1>) in dir/<stream.<i-1>>, signed
-- with key_path.<i-1> (a checkpoint's origin is its signer's name, AUD-I-10: one key per
-- chain). emit() deals events round-robin over the chains (a chain whose queue is full is
-- skipped while another has room) and numbers them with one counter `n` over all chains, so
-- merging the chains by n gives the emit order; emit_keyed() always goes to chain 1 (a
-- re-emit must meet its first record's dedupe key).
local Set = {}
Set.__index = Set

function _M.start(o)
    if type(o) ~= "table" then error("ron.audit.host.start: options table expected", 2) end
    local n = o.shards or 1
    if type(n) ~= "number" or n < 1 or n > 64 or floor(n) ~= n then
        error("ron.audit.host.start: shards must be an integer in 1..64", 2)
    end
    if n == 1 then return start_one(o) end
    local ctr = { n = 0 }
    local set = setmetatable({ chains = {}, rr = 0, ctr = ctr, closing = false }, Set)
    for i = 1, n do
        local oi = {}
        for k, v in pairs(o) do oi[k] = v end
        oi.shards = nil
        if i > 1 then
            local sfx = "." .. (i - 1)
            oi.stream = (o.stream or "") .. sfx
            oi.dir = o.dir and (o.dir .. "/" .. oi.stream) or nil
            oi.key_path = o.key_path and (o.key_path .. sfx) or nil
        end
        local h, err = start_one(oi, ctr)
        if not h then
            for _, c in ipairs(set.chains) do -- nothing was emitted: no round is out
                c.closing, c.closed = true, true
                c.stop:close()
                c.worker:abort()
                c.lg:close()
            end
            return nil, err
        end
        set.chains[i] = h
    end
    set.n_chains = n
    return set
end

-- The chain the next event goes to: the next in turn, or after it the first with room.
local function pick(self)
    local chains, n = self.chains, self.n_chains
    local i = self.rr % n + 1
    self.rr = i
    local h = chains[i]
    local lg = h.lg
    if lg.queued < lg.cap then return h end
    for j = 1, n - 1 do
        local c = chains[(i + j - 1) % n + 1]
        if c.lg.queued < c.lg.cap and not c.stalled then return c end
    end
    return h
end

function Set:emit(kind, attrs, ts_ms) return pick(self):emit(kind, attrs, ts_ms) end
function Set:emit_wait(kind, attrs, deadline_ms)
    return pick(self):emit_wait(kind, attrs, deadline_ms)
end
function Set:emit_keyed(kind, attrs, ts_ms) return self.chains[1]:emit_keyed(kind, attrs, ts_ms) end

-- Every event queued on any chain before the call is durable (chain by chain).
function Set:wait_durable()
    for _, h in ipairs(self.chains) do
        local ok, err = h:wait_durable()
        if not ok then return nil, err end
    end
    return true
end

-- Stops intake on every chain first, then closes them one by one within ONE deadline: each
-- drains in what is left of deadline_ms (a chain reached with none left sheds its queue as
-- shutdown_deadline, with its Gap record). -> true | nil, err (the first)
function Set:close(deadline_ms)
    deadline_ms = deadline_ms or self.chains[1].close_deadline_ms
    self.closing = true
    for _, h in ipairs(self.chains) do h.closing = true end
    local t_end = uv.hrtime() + deadline_ms * 1e6
    local ok, err = true, nil
    for _, h in ipairs(self.chains) do
        local cok, cerr = h:close(max(0, floor((t_end - uv.hrtime()) / 1e6)))
        if not cok and ok then ok, err = false, cerr end
    end
    if not ok then return nil, err end
    return true
end

-- Every chain's open (a list, chain 1 first).
function Set:open_info()
    local out = {}
    for i, h in ipairs(self.chains) do out[i] = h:open_info() end
    return out
end

-- Chain 1's last checkpoint (the one the ledger carries); every chain's: checkpoints().
function Set:latest_checkpoint() return self.chains[1]:latest_checkpoint() end
function Set:checkpoints()
    local out = {}
    for i, h in ipairs(self.chains) do out[i] = h:latest_checkpoint() or false end
    return out
end

local SUMS = { "head_seq", "durable_seq", "syncs", "duplicates", "checkpoints", "queue_depth",
               "io_timeouts", "host_syncs", "emitted", "in_flight", "pending_gaps",
               "recoveries" }

-- The chains' stats summed (head_seq: records in all chains), with `chains` = each one's.
function Set:stats()
    local t = { drops = {}, chains = {}, stalled = false, failed = nil, io_errors = {} }
    for _, k in ipairs(SUMS) do t[k] = 0 end
    for i, h in ipairs(self.chains) do
        local s = h:stats()
        t.chains[i] = s
        for _, k in ipairs(SUMS) do t[k] = t[k] + (s[k] or 0) end
        for r, v in pairs(s.drops) do t.drops[r] = (t.drops[r] or 0) + v end
        for e, v in pairs(s.io_errors) do t.io_errors[e] = (t.io_errors[e] or 0) + v end
        t.stalled = t.stalled or s.stalled
        t.failed = t.failed or s.failed
        t.last_shed_ms = max(t.last_shed_ms or 0, s.last_shed_ms or 0)
    end
    return t
end

function Set:metrics_text()
    local s = self:stats()
    return metrics_text(s, s.drops, s.queue_depth)
end

local function shed(self, reason, ts, kind, attrs)
    self.lg:shed(reason, ts, audit.what_of(kind, attrs))
    return nil, format("Busy: audit event shed (%s)", reason)
end

-- Puts a stamped event into this chain's queue: emit() and emit_keyed() after their stamps.
function H:put(kind, attrs, ts)
    if self.closing then
        self.lg.drops.audit_closed = (self.lg.drops.audit_closed or 0) + 1
        return nil, "Closed: audit trail closed"
    end
    if self.failed then return shed(self, "audit_failed", ts, kind, attrs) end -- until it recovers
    if self.stalled then return shed(self, "io_backpressure", ts, kind, attrs) end
    local ok, err = self.lg:emit(kind, attrs, ts)
    if not ok then return nil, err end
    self.emitted = self.emitted + 1
    if self.lg.queued == 1 then self.wake:try_send(true) end
    return true
end

-- Never blocks, never writes. -> true | nil, "Busy: ..." (shed, counted) | nil, err (an
-- event that cannot be encoded: a bug of the caller, not counted). The event number comes
-- from self.ctr, shared by the chains of a sharded host (one numbering over all of them).
function H:emit(kind, attrs, ts_ms)
    local ctr = self.ctr
    ctr.n = ctr.n + 1
    attrs = attrs or {}
    attrs.n = ctr.n
    return self:put(kind, attrs, ts_ms or self.now_ms())
end

-- The enqueue deadline (seed 002, timeouts), from a task: waits up to deadline_ms for room in a
-- full queue; then the event is shed as audit_deadline.
function H:emit_wait(kind, attrs, deadline_ms)
    local ts = self.now_ms()
    local t_end = uv.now() + deadline_ms
    while not self.closing and not self.failed and not self.stalled
          and self.lg:depth() >= self.lg.cap do
        local left = t_end - uv.now()
        if left <= 0 then
            self.ctr.n = self.ctr.n + 1
            return shed(self, "audit_deadline", ts)
        end
        self.wake:try_send(true)
        local _, err = self.room:recv(left)
        if err == "Canceled" or err == "Closed" then break end
    end
    return self:emit(kind, attrs, ts)
end

-- An event that is its own identity: no event number `n` is added, so emitting it again
-- with the same kind, attrs and ts_ms folds into its first record (the log's dedupe key,
-- AUD-I-6) instead of a second one. That is what makes a replayed range exactly once (the
-- ledger feed, ron.node.feed, AUD-I-32). Otherwise as emit().
function H:emit_keyed(kind, attrs, ts_ms)
    return self:put(kind, attrs, ts_ms)
end

-- From a task: waits until every event queued before the call is in the chain and synced
-- (durable). -> true | nil, "Closed: ..." (the trail closed meanwhile) | nil, "Busy: ..."
-- (it failed meanwhile: what was queued may have been shed; try again) | nil, "Canceled".
function H:wait_durable()
    local lg = self.lg
    local mark, target = lg.enqueued_total, nil
    while true do
        if self.closed then return nil, "Closed: audit trail closed" end
        if self.failed then return nil, "Busy: the audit trail failed: " .. self.failed end
        -- settled, not taken: a chunk taken out of the queue may still be appending in the
        -- pool, and the head read then misses its records (1001 events awaited, 957 seen)
        if not target and lg.settled_total >= mark then target = lg:stats().head_seq end
        if target and lg:stats().durable_seq >= target then return true end
        if not task.sleep(self.interval_ms) then return nil, "Canceled" end
    end
end

-- Appends chunk c (nil: nothing, an empty sync: a checkpoint when one is due) and makes it
-- durable in ONE pool call, with the WAL I/O deadline. -> true | nil, err (the log failed:
-- ron.audit.recovery takes over; c is kept to be appended again).
function H:commit(c)
    local lg = self.lg
    self.in_flight = c and c.n or 0 -- out of the queue, not yet in the chain
    local timed_out = false
    local rc, appended, dups = self.sync(lg, self.io_deadline_ms, function()
        timed_out = true
        self.io_timeouts = self.io_timeouts + 1
        self.stalled = true
        self.log(format("the audit log's sync is not back after %d ms: new events are shed " ..
                        "(io_backpressure) until it is", self.io_deadline_ms), "WARN")
    end, c)
    self.in_flight = 0
    if timed_out then
        self.stalled = false
        self.log("the audit log's sync is back: events are taken again", "WARN")
    end
    if rc == 0 then
        lg:count(appended or 0, dups or 0)
        if c then
            lg:settle(c)
            lg:release(c)
        end
        self.syncs = self.syncs + 1
        return true
    end
    -- a number: the pool is done with the chunk's bytes; an error answer may leave them in use
    local err = rc and audit.err_text(rc) or appended
    if rc then lg:count(appended or 0, dups or 0) end
    recovery.failed(self, err, c, rc ~= nil)
    return nil, err
end

-- One round of the sink worker: take the queue's first chunk (at most `batch` events, and
-- the Gap records when the queue is empty after it) and commit it.
function H:round()
    local c = self.lg:take()
    if not c then return 0 end
    self.room:try_send(true)
    local ok, err = self:commit(c)
    if not ok then return nil, err end
    return c.n
end

-- Idle: a checkpoint for the records none covers once checkpoint_interval_ms passed (the
-- log signs it in an empty sync when its own clock says it is due; AUD-I-39).
function H:idle_checkpoint()
    if not self.key or self.cp_interval_ms <= 0 or uv.now() - self.cp_tick < self.cp_interval_ms
    then return end
    self.cp_tick = uv.now()
    local cp = self.lg:latest_checkpoint()
    if self.lg:stats().head_seq > (cp and cp.size or 0) then self:commit(nil) end
end

function H:run()
    while not self.closing do
        if self.failed then
            if not recovery.run(self) then break end
        else
            if self.lg:depth() == 0 and self.lg.n_gaps == 0 then
                local _, err = task.select({ self.wake, self.stop }, self.interval_ms)
                if err == "Canceled" or err == "Closed" or self.closing then break end
                if err == "Timeout" then self:idle_checkpoint() end
            end
            if self.lg:depth() > 0 or self.lg.n_gaps > 0 then self:round() end
        end
    end
end

-- From a task: stop intake, join the sink worker (it ends its round), then append what is
-- queued until deadline_ms (what is left is shed as shutdown_deadline, so the last Gap
-- record says how much), sync on this thread (the loop is ending), sign a checkpoint of the
-- head when there is a key (AUD-I-39: at rest nothing is left unpinned) and close.
-- -> true | nil, err
function H:close(deadline_ms)
    if self.closed then return true end
    self.closed = true
    deadline_ms = deadline_ms or self.close_deadline_ms
    self.closing = true
    self.stop:close()
    -- the worker ends its round: a sync out cannot be taken back (its own deadline)
    local joined = self.worker:join(deadline_ms + self.io_deadline_ms + 1)
    if not joined then self.worker:abort() end
    local t_end = uv.hrtime() + deadline_ms * 1e6
    local lg = self.lg
    local ok, err = true, self.failed
    if not self.failed and joined then
        while lg:depth() > 0 and uv.hrtime() < t_end do
            local n
            n, err = lg:append_queued(self.batch)
            if not n then
                ok = false
                break
            end
        end
        -- out of time: the rest is evidence of loss
        if lg:depth() > 0 then lg:shed_queued("shutdown_deadline") end
        if ok then
            local n
            n, err = lg:append_queued(0) -- the Gap records
            ok = n ~= nil
        end
        if ok then ok, err = lg:sync() end
        if ok and self.key then ok, err = lg:checkpoint() end
    else
        ok = false
        if self.failed then
            recovery.abandon(self)
            err = format("it failed (%s): %d event(s) shed since are not in it", self.failed,
                         (lg.drops.audit_failed or 0) - (self.shed_at_fail or 0))
        end
        err = err or "the sink worker did not stop in time (its sync is still out)"
    end
    if joined then
        local cok, cerr = lg:close()
        if ok and not cok then ok, err = false, cerr end
    end
    if not ok then return nil, err end
    return true
end

-- How the chain's open went (ron.audit Log:open_info), and as a line for an operator.
function H:open_info() return self.lg:open_info() end

function _M.open_text(o)
    if not o then return "closed" end
    if o.head_used then
        return format("opened from its head file (%d records hashed, %d decoded)", o.hashed,
                      o.decoded)
    end
    if o.decoded == 0 then return "opened empty" end
    return format("opened by decoding all %d records (%s)", o.decoded,
                  o.why ~= "" and o.why or "no head file")
end

-- { origin, size, root (hex), note } of the chain's last checkpoint, or nil.
function H:latest_checkpoint()
    return self.lg:latest_checkpoint()
end

function H:stats()
    local s = self.lg:stats()
    s.io_timeouts, s.host_syncs, s.emitted = self.io_timeouts, self.syncs, self.emitted
    s.stalled, s.failed, s.in_flight = self.stalled, self.failed, self.in_flight
    s.pending_gaps = self.lg.n_gaps
    s.recoveries, s.io_errors, s.last_shed_ms = self.recoveries, self.io_errors,
                                                self.lg.last_shed_ms
    return s
end

-- The audit_* families for /metrics (docs/reference/metrics.md): s a stats() table, drops
-- the shed counts by reason, depth the events queued (a sharded host: the chains' sums).
metrics_text = function(s, drops, depth)
    local out = audit.render_queue({}, drops, depth)
    FAM.io_errors:render_map(out, s.io_errors)
    FAM.records:render(out, s.head_seq)
    FAM.durable_seq:render(out, s.durable_seq)
    FAM.checkpoints:render(out, s.checkpoints)
    FAM.io_timeouts:render(out, { { "wal", s.io_timeouts } })
    FAM.failed:render(out, s.failed and 1 or 0)
    FAM.recoveries:render(out, s.recoveries)
    return metrics.text(out)
end

function H:metrics_text()
    return metrics_text(self:stats(), self.lg.drops, self.lg:depth())
end

return _M
