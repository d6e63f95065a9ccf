-- ron.accounting.runtime.router: the router: pending_slices -> the fairness policy ->
-- per-stream lanes, order kept per stream (I-5), bounded dispatch (G-22), a worker per stream
-- (I-async-2). Methods of the runtime object (ron.accounting.runtime.rt); init.lua composes
-- them.
local rt = require "ron.accounting.runtime.rt"

local format, pairs, tonumber =
      string.format, pairs, tonumber
local RT, skey, slice_key = rt.RT, rt.skey, rt.slice_key
function RT:shed(s, reason)
    self.rejected[reason] = (self.rejected[reason] or 0) + 1
    if self.audit then
        self:audit_emit("shed", { source = "runtime", reason = reason, tenant = s.tenant,
                                  dimension = s.dimension, seq = tonumber(s.id.seq) })
    end
    self.offered[slice_key(s)] = nil
    self.need_reoffer = true
end

-- A new stream and its worker. Apart from RT:stream: a function that makes a closure
-- cannot be JIT-compiled through its returns (LuaJIT's UCLO), and RT:stream runs per slice.
function RT:new_stream(k, s)
    local st = { key = k, tenant = s.tenant, dim = s.dimension,
                 lane = self.task.channel(self.cfg.ordered_buffer_cap, "ordered_buffer"),
                 reply = self.put_q and self.task.channel(1, "put_reply"),
                 fail_status = nil, fail_logged_ms = 0, fail_quiet = 0, -- RT:note_failure
                 stuck = nil } -- { reason, seq, since_ms, detail } (RT:set_stuck)
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
        -- Slices left out when pending_slices was full (and what the WAL's backlog gave back
        -- meanwhile) are re-offered once the channel has drained, without waiting for the
        -- next rollover tick; only after ACKs, which made room: without them the walk would
        -- shed the same slices again and the router would spin.
        if self.need_reoffer and pending:depth() == 0 and not self.stopping
           and self.acked_total ~= self.reoffer_acked then
            self.reoffer_acked = self.acked_total
            self:reoffer()
        end
    end
    -- stopping: no new slices; what fits goes on, the rest stays pending; let the
    -- workers finish their lanes
    self:dispatch()
    for _, st in pairs(self.streams) do st.lane:close() end
end
