-- ron.accounting.runtime.worker: the per-stream workers export one slice at a time in seq
-- order (put with backoff inside the op budget; put_many exporters through the batcher,
-- puts.lua). Owns the export counters (exports_total by status, retries, conflicts, ops
-- given up), the events log and each stream's failure-log state; what was offered and
-- delivered is the offers' (offers.lua), the ACKs the acks' (acks.lua).
local rt = require("ron.accounting.runtime.rt")
local router_mod = require("ron.accounting.runtime.router")
local exporter_mod = require("ron.accounting.export.exporters")
local backoff_mod = require("ron.base.backoff")
local uv = require("luv")

local floor, ipairs, tostring, tonumber, pcall = math.floor, ipairs, tostring, tonumber, pcall
local log = rt.log

local _M = {}

local W = rt.class(_M, "Workers")

-- o.puts: nil unless the exporter batches; router, acks, stuck, readiness wired after
function _M.new(o)
    local self = rt.object(W, o, "task cfg exporter backoff offers puts stop_ch audit", {
        exports = {}, retries = 0, conflicts = {},
        given_up = 0,          -- export ops that ended at the budget without an ACK
        events = {},           -- the last events_cap export events (tests, debugging)
    })
    for _, s in ipairs(exporter_mod.COUNTED) do self.exports[s] = 0 end
    return self
end

-- The events log: bounded by events_cap (when full, the older half is dropped, in place:
-- amortised O(1), still a plain list).
function W:event(ev)
    local evs = self.events
    local n = #evs
    local cap = self.cfg.events_cap
    if n >= cap then
        local keep = floor(cap / 2)
        for i = 1, keep do evs[i] = evs[n - keep + i] end
        for i = n, keep + 1, -1 do evs[i] = nil end
        n = keep
    end
    evs[n + 1] = ev
end

-- A failed put, logged with its reason, sampled: a stream logs when its failure status
-- changes, then at most once per log_every_ms with the count left out (I-14: a failure is
-- observable, not a flood).
function W:note_failure(st, s, status, detail)
    local now = uv.now()
    if st.fail_status == status and now - st.fail_logged_ms < self.cfg.log_every_ms then
        st.fail_quiet = st.fail_quiet + 1
        return
    end
    log("export %s seq %s: %s (%s)%s", st.key, tostring(s.id.seq), status, tostring(detail),
        st.fail_quiet > 0 and (" [%d more since the last line]"):format(st.fail_quiet) or "")
    st.fail_status, st.fail_logged_ms, st.fail_quiet = status, now, 0
end

-- put(s) through the exporter, or batched with the other streams' (puts.lua).
function W:put(st, s)
    if self.puts then return self.puts:put(st.reply, s) end
    local ok, status, detail = pcall(self.exporter.put, self.exporter, s)
    if not ok then return nil, "put raised: " .. tostring(status) end
    return status, detail
end

-- An op that ran out of its budget: the rest of it waited, counted, audited; a gap the
-- whole budget could not fill is stuck (the earlier seqs are not coming).
function W:give_up(st, s, status, detail, attempt, start)
    local elapsed = (uv.hrtime() - start) / 1e6
    local left = self.cfg.op_budget_ms - elapsed
    if left > 0 then rt.pause(self.task, self.stop_ch, floor(left)) end
    self.given_up = self.given_up + 1
    if self.audit then
        self.audit("export", { outcome = "given_up", tenant = st.tenant, dimension = st.dim,
                               seq = tonumber(s.id.seq), attempt = attempt, last = status })
    end
    self.readiness:sample_latency((uv.hrtime() - start) / 1e6)
    self:event { "fail", st.key, s.id.seq, (uv.hrtime() - start) / 1e6, status }
    if status == "gap" then self.stuck:set(st, s, "gap", detail) end
    return "fail"
end

-- Exports one slice: "acked" | "fail" | "conflict".
-- Every answer is counted by its status (exports_total{status}); a put that raised, answered
-- nil or something outside the contract is a local failure, "fail", with its error text
-- (docs/EXPORT.md §1). A stream whose op ends on gap or conflict is stuck (stuck.lua).
function W:export_one(st, s, b)
    local offers = self.offers
    if offers:was_delivered(s) then -- delivered and ACKed before: a re-offer (I-17)
        self.exports.dup = self.exports.dup + 1
        router_mod.note(st, "exported_seq", s.id.seq)
        self.acks:ack(s)
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
            offers:delivered(st.key, s)
            router_mod.note(st, "exported_seq", s.id.seq)
            self.acks:ack(s)
            self:event { "acked", st.key, s.id.seq }
            if st.stuck then self.stuck:clear(st) end
            return "acked"
        end
        if self.audit then -- every outcome other than ok/dup (issue 16)
            self.audit("export", { outcome = status, tenant = st.tenant, dimension = st.dim,
                                   seq = tonumber(s.id.seq), attempt = attempt + 1,
                                   detail = rt.audit_text(detail) })
        end
        if status == "conflict" then
            self.conflicts[#self.conflicts + 1] = { stream = st.key, seq = s.id.seq,
                                                    detail = detail }
            self.stuck:set(st, s, "conflict", detail)
            return "conflict"
        end
        self:note_failure(st, s, status, detail)
        -- retryable (gap too: the head may still move) within the op budget
        attempt = attempt + 1
        local elapsed = (uv.hrtime() - start) / 1e6
        local d = backoff_mod.within_budget(b, attempt, elapsed, self.cfg.op_budget_ms)
        if not d then return self:give_up(st, s, status, detail, attempt, start) end
        self.retries = self.retries + 1
        if not rt.pause(self.task, self.stop_ch, d) then return "fail" end -- stopping
    end
end

-- One per stream (I-async-2): the lane's slices in seq order, N+1 only after N's ACK.
function W:run(st)
    local b = self.backoff or backoff_mod.exponential.new()
    local offers, router = self.offers, self.router
    while true do
        local s = st.lane:recv()
        if not s then break end -- Closed (stopped) or Canceled (shutdown, lane empty)
        local r = self:export_one(st, s, b)
        -- an ACKed slice leaves the pipeline once the meter has its ACK (acks.lua)
        if r ~= "acked" then
            -- keep order: this stream waits for s to be re-offered; what is queued behind
            -- it goes back to the meter's pending ring (it never left it)
            offers:undelivered(st.key, s, r == "conflict")
            router:done(s)
            while st.lane:depth() > 0 do
                local later = st.lane:recv()
                offers:dropped(later)
                router:done(later)
            end
            if r == "conflict" then break end
        else
            router:done(s)
        end
    end
end

return _M
