-- ron.accounting.runtime.worker: the per-stream workers export one slice at a time in seq
-- order (put with backoff inside the op budget, batched puts for put_many exporters), the
-- ACK LRU, events.
-- Methods of the runtime object (ron.accounting.runtime.rt); init.lua composes them.
local rt = require "ron.accounting.runtime.rt"
local exporter_mod = require "ron.accounting.export.exporters"
local backoff_mod = require "ron.base.backoff"
local uv = require "luv"

local floor, ipairs, tostring, tonumber, pcall =
      math.floor, ipairs, tostring, tonumber, pcall
local RT, slice_key, log = rt.RT, rt.slice_key, rt.log
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
-- Every answer is counted by its status (exports_total{status}); a put that raised, answered
-- nil or something outside the contract is a local failure, "fail", with its error text
-- (docs/EXPORT.md §1). A stream whose op ends on gap or conflict is stuck (RT:set_stuck).
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
        if not exporter_mod.is_status(status) then
            if status ~= nil then detail = "put answered " .. tostring(status) end
            status = "fail"
        end
        self.exports[status] = self.exports[status] + 1
        if exporter_mod.ACKED[status] then
            self:lru_add(ak)
            -- (a stream exports in seq order: everything up to here is delivered; RT:feed)
            if not st.acked_seq or s.id.seq > st.acked_seq then st.acked_seq = s.id.seq end
            self:ack(s)
            self:event { "acked", st.key, s.id.seq }
            if st.stuck then self:clear_stuck(st) end
            return "acked"
        end
        if self.audit then -- every outcome other than ok/dup (issue 16)
            self:audit_emit("export", { outcome = status, tenant = st.tenant,
                                        dimension = st.dim, seq = tonumber(s.id.seq),
                                        attempt = attempt + 1,
                                        detail = rt.audit_text(detail) })
        end
        if status == "conflict" then
            self.conflicts[#self.conflicts + 1] = { stream = st.key, seq = s.id.seq,
                                                    detail = detail }
            self:set_stuck(st, s, "conflict", detail)
            return "conflict"
        end
        self:note_failure(st, s, status, detail)
        -- retryable (gap too: the head may still move) within the op budget
        attempt = attempt + 1
        local elapsed = (uv.hrtime() - start) / 1e6
        local d = backoff_mod.within_budget(b, attempt, elapsed, self.cfg.op_budget_ms)
        if not d then
            -- the budget ends before the next try could start: the op ends at the budget
            local left = self.cfg.op_budget_ms - elapsed
            if left > 0 then self:pause(floor(left)) end
            self.given_up = self.given_up + 1
            if self.audit then
                self:audit_emit("export", { outcome = "given_up", tenant = st.tenant,
                                            dimension = st.dim, seq = tonumber(s.id.seq),
                                            attempt = attempt, last = status })
            end
            self:sample(self.latency_samples, (uv.hrtime() - start) / 1e6)
            self:event { "fail", st.key, s.id.seq, (uv.hrtime() - start) / 1e6, status }
            -- a gap the whole budget could not fill: the earlier seqs are not coming
            if status == "gap" then self:set_stuck(st, s, "gap", detail) end
            return "fail"
        end
        self.retries = self.retries + 1
        if not self:pause(d) then return "fail" end -- stopping
    end
end

-- A failed put, logged with its reason, sampled: a stream logs when its failure status
-- changes, then at most once per log_every_ms with the count left out (I-14: a failure is
-- observable, not a flood).
function RT:note_failure(st, s, status, detail)
    local now = uv.now()
    if st.fail_status == status and now - st.fail_logged_ms < self.cfg.log_every_ms then
        st.fail_quiet = st.fail_quiet + 1
        return
    end
    log("export %s seq %s: %s (%s)%s", st.key, tostring(s.id.seq), status, tostring(detail),
        st.fail_quiet > 0 and (" [%d more since the last line]"):format(st.fail_quiet) or "")
    st.fail_status, st.fail_logged_ms, st.fail_quiet = status, now, 0
end

-- put(s) through the exporter. An exporter with put_many (offload.file) gets the puts of
-- all streams batched: a worker queues its slice and waits on its stream's reply channel;
-- a put_flush task (at most put_parallel at once) sends up to put_batch queued slices in
-- one put_many call (one threadpool round trip instead of one per slice) and hands each
-- answer back. The queue holds at most one slice per stream (a worker waits for its own).
function RT:put(st, s)
    if not self.put_q then
        local ok, status, detail = pcall(self.exporter.put, self.exporter, s)
        if not ok then return nil, "put raised: " .. tostring(status) end
        return status, detail
    end
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

-- One per stream (I-async-2): the lane's slices in seq order, N+1 only after N's ACK.
function RT:worker(st)
    local b = self.backoff or backoff_mod.exponential.new()
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
