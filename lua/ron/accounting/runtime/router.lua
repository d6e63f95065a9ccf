-- ron.accounting.runtime.router: pending_slices -> the fairness policy -> per-stream lanes,
-- order kept per stream (I-5, with the offers' block marks), bounded dispatch (G-22), a
-- worker per stream (I-async-2). Owns the streams (their lanes and workers) and the
-- in-flight counts.
local rt = require("ron.accounting.runtime.rt")

local format, pairs = string.format, pairs
local skey = rt.skey

local _M = {}

local R = rt.class(_M, "Router")

-- o.pending: the pending_slices channel; o.batched: puts batched (a reply channel per
-- stream); workers (ron.accounting.runtime.worker) wired after
function _M.new(o)
    local self = rt.object(R, o, "task cfg fairness pending offers acks life batched", {
        streams = {},          -- key -> { key, tenant, dim, lane, reply, worker, stuck, ... }
        worker_tasks = {},     -- every worker spawned (joined by rt:wait)
        inflight = 0, tenant_inflight = {}, -- bounded dispatch: slices in lanes/exporting
        reoffer_acked = nil,
    })
    local cfg = o.cfg
    self.bounded = cfg.inflight_cap or cfg.tenant_inflight_cap
    if self.bounded then
        self.room = o.task.channel(1, "router_room") -- a worker finished a slice
        local tin, tcap = self.tenant_inflight, cfg.tenant_inflight_cap
        self.eligible = tcap and function(tenant) return (tin[tenant] or 0) < tcap end
    end
    return self
end

-- A new stream and its worker. Apart from R:stream: a function that makes a closure
-- cannot be JIT-compiled through its returns (LuaJIT's UCLO), and R:stream runs per slice.
function R:new_stream(k, s)
    local st = { key = k, tenant = s.tenant, dim = s.dimension,
                 lane = self.task.channel(self.cfg.ordered_buffer_cap, "ordered_buffer"),
                 reply = self.batched and self.task.channel(1, "put_reply"),
                 fail_status = nil, fail_logged_ms = 0, fail_quiet = 0, -- worker.note_failure
                 stuck = nil, -- { reason, seq, since_ms, detail } (stuck.lua)
                 -- the newest seq routed to export (sealed) and ACKed (exported): the
                 -- per-stream rows of /metrics and the status page (_M.note)
                 sealed_seq = nil, exported_seq = nil }
    self.streams[k] = st
    local workers = self.workers
    st.worker = self.task.spawn(format("exporter_worker-%s-%s", s.tenant, s.dimension),
                                function() workers:run(st) end)
    self.worker_tasks[#self.worker_tasks + 1] = st.worker
    return st
end

-- st[field] = seq when newer (a re-offer may bring an older one back).
function _M.note(st, field, seq)
    local cur = st[field]
    if cur == nil or seq > cur then st[field] = seq end
end

function R:stream(s)
    local k = skey(s.tenant, s.dimension)
    return self.streams[k] or self:new_stream(k, s)
end

function R:route(s)
    local st = self:stream(s)
    local seq = s.id.seq
    local why = self.offers:route_check(st.key, seq)
    if why then return self.offers:shed(s, why) end
    if not st.lane:try_send(s) then
        self.offers:block(st.key, seq)
        self.offers:shed(s, "order_overflow") -- OrderOverflow: re-offered from meter:pending()
        return
    end
    _M.note(st, "sealed_seq", seq)
    if self.bounded then
        self.inflight = self.inflight + 1
        local t = s.tenant
        self.tenant_inflight[t] = (self.tenant_inflight[t] or 0) + 1
    end
end

-- A lane's slice is finished (exported, failed, or dropped behind a failure).
function R:done(s)
    if not self.bounded then return end
    self.inflight = self.inflight - 1
    local t = s.tenant
    local n = (self.tenant_inflight[t] or 1) - 1
    self.tenant_inflight[t] = n > 0 and n or nil
    if self.room:depth() == 0 then self.room:try_send(true) end
end

-- Into the policy; when it is full the slice is shed (it stays pending) and its stream
-- is blocked there, so that a later slice of it cannot overtake it (I-5).
function R:admit(s)
    local k = skey(s.tenant, s.dimension)
    if self.offers:waits(k, s.id.seq) then
        return self.offers:shed(s, "blocked") -- waits for the blocked one: no policy slot taken
    end
    if not self.fairness:enqueue(s.tenant, s) then
        self:stream(s)
        self.offers:block(k, s.id.seq)
        self.offers:shed(s, "busy")
    end
end

-- From the policy into the lanes: everything, or (bounded) as long as there is room.
function R:dispatch()
    local p, cap, eligible = self.fairness, self.cfg.inflight_cap, self.eligible
    while not cap or self.inflight < cap do
        local item
        if eligible then item = p:dequeue(eligible) else item = p:dequeue() end
        if not item then break end
        self:route(item)
    end
end

function R:run()
    local task, pending, offers = self.task, self.pending, self.offers
    local chs = self.bounded and { pending, self.room }
    while true do
        local s, err
        if chs then s, err = task.select(chs) else s, err = pending:recv() end
        if not s then
            if err == "Canceled" and not self.life.stopping then self.life.stop() end
            break
        end
        if s ~= true then self:admit(s) end -- true: a wake from self.room
        -- everything already received goes through the policy before routing
        while pending:depth() > 0 do self:admit(pending:recv()) end
        self:dispatch()
        -- Slices left out when pending_slices was full (and what the WAL's backlog gave back
        -- meanwhile) are re-offered once the channel has drained, without waiting for the
        -- next rollover tick; only after ACKs, which made room: without them the walk would
        -- shed the same slices again and the router would spin.
        local acked = self.acks.acked_total
        if offers.need and pending:depth() == 0 and not self.life.stopping
           and acked ~= self.reoffer_acked then
            self.reoffer_acked = acked
            offers:reoffer()
        end
    end
    -- stopping: no new slices; what fits goes on, the rest stays pending; let the
    -- workers finish their lanes
    self:dispatch()
    for _, st in pairs(self.streams) do st.lane:close() end
end

return _M
