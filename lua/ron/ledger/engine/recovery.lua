-- ron.ledger.engine.recovery: recovery: a saga or a batch found in the store resumed (rolled
-- forward or given back, then driven again), and recover() (LED-31, LED-53, LED-71).
-- A concern of the engine ron.ledger.ledger, which installs the methods below
-- (_M.methods) on its one Ledger class.
local ledger = require("ron.ledger")
local codec = require("ron.ledger.codec")
local base = require("ron.ledger.engine.base")

local sort = table.sort
local pairs, type = pairs, type

local CLAIM_PREFIX = base.CLAIM_PREFIX
local ERR = base.ERR
local guard = base.guard

local _M = {}
local Ledger = {} -- this concern's methods

-- A batch found in the store (recover(), or a member's retry adopting it): finalizing ->
-- rolled forward; reserving -> given back, then each member driven by the single path.
local function batch_ctx(s, d)
    local ctx = { sid = s.id, phase = s.phase, heads = d.heads, created_at_ms = d.created_at_ms,
                  batch = {} }
    local by = {}
    local function member(k, req)
        local e = by[k]
        if not e then
            e = { k = k, req = req, sid = s.id .. "/" .. k }
            by[k] = e
            ctx.batch[#ctx.batch + 1] = e
        end
        return e
    end
    if d.fin then
        ctx.items, ctx.rejects, ctx.handover = {}, {}, {}
        for i, x in ipairs(d.items) do
            local t = ledger.decode_transfer(x.t)
            ctx.items[i] = { k = x.k, t = t, tbytes = x.t, tid = ledger.transfer_id(t),
                             e = member(x.k, { intent = t.intent, body_hash = x.h,
                                               keys = x.keys }) }
        end
        for i, x in ipairs(d.rejects) do
            ctx.rejects[i] = { k = x.k, code = x.code, err = x.message,
                               e = member(x.k, { intent = x.intent, body_hash = x.h,
                                                 keys = x.keys }) }
        end
        for i, x in ipairs(d.handover) do ctx.handover[i] = { k = x.k, e = member(x.k, x.req) } end
    else
        for _, m in ipairs(codec.decode(d.members)) do member(m.k, m.req) end
        ctx.ins = {}
        for i, id in ipairs(d.ins or {}) do ctx.ins[i] = { id = id } end
    end
    sort(ctx.batch, function(a, b) return a.k < b.k end)
    return ctx
end
_M._batch_ctx = batch_ctx

-- deferred (recover()): a list that gets the members a finalizing batch handed over, as
-- saga records to drive later, instead of driving them here.
function Ledger:_resume_batch(s, d, deferred)
    local ctx = batch_ctx(s, d)
    self.inflight[s.id] = true
    for _, e in ipairs(ctx.batch) do self.inflight[e.sid] = true end
    local r
    if s.phase == "finalizing" then
        r = { guard(nil, self._finalize_batch, self, ctx) }
        if r[1] then
            -- the members it handed over: their saga records exist now; drive them (a
            -- member that is still racing answers Unavailable: its record stays, and so
            -- does this answer)
            self.inflight[s.id] = nil
            for _, e in ipairs(ctx.batch) do self.inflight[e.sid] = nil end
            for _, x in ipairs(ctx.handover or {}) do
                local m = { id = x.e.sid, phase = "reserving", node = self.node,
                            data = self:_member_record(ctx, x.e) }
                if deferred then deferred[#deferred + 1] = m
                else
                    local rr = { guard(nil, self._resume, self, m) }
                    if rr[1] == nil and rr[3] == ERR.Unavailable then r = rr end
                end
            end
        end
    else
        r = { guard(nil, function()
            self:_give_back_batch(ctx)
            -- each member saga first, then this record goes: a crash in between leaves the
            -- members recoverable on their own
            for _, e in ipairs(ctx.batch) do
                self:_p("save_saga", e.sid, "reserving", self:_member_record(ctx, e), self.node)
                if s.node ~= nil and s.node ~= self.node then self:_taken(e.sid) end
            end
            self:_p("delete_saga", s.id)
            return true
        end) }
    end
    self.inflight[s.id] = nil
    for _, e in ipairs(ctx.batch) do self.inflight[e.sid] = nil end
    if r[1] and s.phase ~= "finalizing" then
        for _, e in ipairs(ctx.batch) do
            local rr = { guard(nil, self._resume, self,
                               { id = e.sid, phase = "reserving",
                                 data = self:_member_record(ctx, e) }) }
            if rr[1] == nil and rr[3] == ERR.Unavailable then r = rr end
        end
    end
    self.stats.recovered = self.stats.recovered + 1
    return unpack(r, 1, table.maxn(r))
end

-- Resumes a saga found in the store (recover(), or adoption by a caller's retry).
-- deferred: see _resume_batch.
function Ledger:_resume(s, deferred)
    local d = codec.decode(s.data)
    if d.kind == "batch" then return self:_resume_batch(s, d, deferred) end
    local ctx = { sid = s.id, req = d.req, phase = s.phase, tbytes = d.t, tid = d.tid,
                  heads = d.heads, created_at_ms = d.created_at_ms }
    if ctx.tbytes then ctx.t = ledger.decode_transfer(ctx.tbytes) end
    self.inflight[s.id] = true
    local r
    if s.phase == "finalizing" then
        r = { guard(nil, self._finalize, self, ctx) }
    else
        -- Not past the point of no return: give back what it may hold, then drive it again
        -- from the start (it re-resolves and re-validates against the current state).
        r = { guard(nil, function()
            self:_compensate(ctx)
            local prior = self:_read("get_intent", ctx.req.intent)
            local claim = self:_read("get_intent", CLAIM_PREFIX .. ctx.req.intent)
            if prior or (claim and claim.message ~= s.id) then
                -- (its own rejection stored and the record left: an older binary's crash
                -- between the two; its event appended if missing, LED-68)
                if prior and claim and claim.message == s.id then
                    self:_rejection_event(ctx.req, prior)
                end
                self:_p("delete_saga", s.id)
                if prior then return self:_outcome(ctx.req, prior) end
                -- Another saga claimed the intent first (this one died before its claim):
                -- that one decides the outcome; this record was never more than a draft.
                return { status = "abandoned", saga = s.id, holder = claim.message }
            end
            -- A peer's saga (a survivor's recovery, LED-71): the record becomes this node's
            -- before the drive, whose own writes move it only once a phase commits (its
            -- open phase's claim is there already: that phase is refused and the record
            -- stays). Without this, a drive that ended Unavailable before its reserve left
            -- the record the dead node's: nobody listed it (this node's retries could not
            -- adopt it and answered "intent in flight" for good; issue 29 item 4).
            if s.node ~= nil and s.node ~= self.node then
                -- (a request's record, as a batch member's: ctx holds req and created_at_ms)
                self:_p("save_saga", s.id, "reserving", self:_member_record(ctx, ctx), self.node)
                self:_taken(s.id)
            end
            return true
        end) }
        if r[1] == true then
            self.inflight[s.id] = nil
            return self:_drive(s.id, ctx.req)
        end
    end
    self.inflight[s.id] = nil
    self.stats.recovered = self.stats.recovered + 1
    return unpack(r, 1, table.maxn(r))
end

-- On start (and whenever wanted): every saga of this node that nobody drives is finished:
-- finalizing ones rolled forward, reserving ones released and driven again (LED-31).
-- Returns a list of { id, phase, ok, err, code }.
--
-- Order matters: a dead process leaves several sagas, and a reserving one driven again must
-- not find its siblings' reservations or heads (nobody would ever release them: it would
-- wait for itself). So finalizing sagas are rolled forward first (they release their
-- heads), then every reserving saga gives back what it holds, then each is driven again.
-- The members a finalizing batch handed over to the single path are driven with the
-- reserving ones, after the give-back: driven at once they waited for a posting a dead
-- sibling still held, gave up (Unavailable) and their records stayed (LED-31).
--
-- opts.node (LED-71): the sagas of another node, whose lease this engine's node took over
-- (ron.ledger.lease; the caller ended that node's backends): the same recovery, each saga
-- driven again under this engine's node (its record becomes this node's).
function Ledger:recover(opts)
    local report = {}
    local node = opts and opts.node or self.node
    -- LED-65: a dead process of this node may still have statements running on the server;
    -- they end (or are ended) before anything is read (a store opened with this node)
    local store = self.store
    if node == self.node and type(store.fence) == "function" and store.node == self.node then
        local n, ferr, fcls = store:fence()
        if not n then return nil, ferr, fcls == "io" and ERR.Unavailable or ERR.Bug end
        self.stats.fenced = (self.stats.fenced or 0) + n
    end
    local list, err = guard(nil, function() return self:_p("list_pending_sagas", node) end)
    if not list then return nil, err end
    local function add(s, r, e, code)
        report[#report + 1] = { id = s.id, phase = s.phase, ok = r ~= nil, err = e, code = code }
    end
    local reserving, handed, seen = {}, {}, {}
    for _, s in ipairs(list) do
        if not self.inflight[s.id] then
            if s.phase == "finalizing" then add(s, self:_resume(s, handed))
            else
                reserving[#reserving + 1] = s
                seen[s.id] = true
            end
        end
    end
    for _, m in ipairs(handed) do -- (a member's record the dead process had written: listed)
        if not seen[m.id] then
            reserving[#reserving + 1] = m
            seen[m.id] = true
        end
    end
    local ready = {}
    for _, s in ipairs(reserving) do
        local d = codec.decode(s.data)
        local ok, e, code
        if d.kind == "batch" then
            local ctx = _M._batch_ctx(s, d)
            ok, e, code = guard(nil, function()
                self:_give_back_batch(ctx)
                return true
            end)
        else
            local ctx = { sid = s.id, heads = d.heads,
                          t = d.t and ledger.decode_transfer(d.t) or nil }
            ok, e, code = guard(nil, function()
                self:_compensate(ctx)
                return true
            end)
        end
        if ok then ready[#ready + 1] = s else add(s, nil, e, code) end
    end
    for _, s in ipairs(ready) do
        if not self.inflight[s.id] then add(s, self:_resume(s)) end
    end
    return report
end

-- A saga this engine took over from a dead peer (LED-71), or one of its own whose drive a
-- store failure ended (saga.lua `_drive`), noted until it is decided: a survivor's recovery
-- may leave one undecided (its payer held by a third saga for every attempt). Bounded:
-- TAKEN_MAX ids; past it, such a saga waits for a retry here (which adopts it) or this
-- node's next start.
local TAKEN_MAX = 4096
function Ledger:_taken(id)
    if not self.taken[id] and self.taken_n < TAKEN_MAX then
        self.taken[id], self.taken_n = true, self.taken_n + 1
    end
end

-- A drive (a single saga's or a batch's) that a store failure ended (Unavailable, not a
-- race): its record and claims stay, and another node cannot adopt this live node's saga,
-- so a client failing over there after the 503 got "intent in flight" until a retry came
-- back here (issue 29 item 4). Noted: the lease scan resumes it (resume_idle). A race is
-- the caller's to retry, as before; a one-transaction commit left no record (dropped from
-- the note at the next scan).
function Ledger:_note_failed(sid, res, err, code)
    if res == nil and code == ERR.Unavailable and not base.is_contention(err, code) then
        self:_taken(sid)
    end
end

-- The sagas this engine took over from a dead peer and has not decided yet, resumed (at
-- most `max`, 16 by default, oldest first) as a retry of their request would adopt them;
-- each stays noted until its drive decides it or the store no longer lists it (a retry
-- decided it). Without this, a peer's saga whose drive was still racing when its node was
-- recovered waited for a retry on the survivor, and a retry on any other node (the dead one
-- restarted, say) answered "intent in flight" for good (it cannot adopt a live node's saga;
-- issue 29 item 4). The survivor's scan calls it (ron.ledger.lease). No fence: this node's
-- own process is running (LED-65 is recover()'s, at a start). -> report as recover()'s
function Ledger:resume_idle(max)
    if self.taken_n == 0 then return {} end
    local list, err = guard(nil, function() return self:_p("list_pending_sagas", self.node) end)
    if not list then return nil, err end
    local report, listed = {}, {}
    for _, s in ipairs(list) do
        listed[s.id] = true
        if #report < (max or 16) and self.taken[s.id] and not self.inflight[s.id] then
            local r, e, code = self:_resume(s)
            report[#report + 1] = { id = s.id, phase = s.phase, ok = r ~= nil, err = e,
                                    code = code }
            if r ~= nil or code ~= ERR.Unavailable then listed[s.id] = nil end
        end
    end
    for id in pairs(self.taken) do
        if not listed[id] then self.taken[id], self.taken_n = nil, self.taken_n - 1 end
    end
    return report
end

_M.methods = Ledger
return _M
