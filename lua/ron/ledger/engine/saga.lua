-- ron.ledger.engine.saga: the saga: the single commit path, driven by its persisted phase
-- (LED-26..LED-33): claim, reserve, revalidate, finalize, or compensate.
-- A concern of the engine ron.ledger.ledger, which installs the methods below
-- (_M.methods) on its one Ledger class.
local ledger = require("ron.ledger")
local atomic = require("ron.ledger.engine.atomic")
local codec = require("ron.ledger.codec")
local base = require("ron.ledger.engine.base")
local resolve = require("ron.ledger.engine.resolve")
local phases = require("ron.ledger.phases")
local view = require("ron.ledger.view")

local error = error
local format = string.format
local pcall = pcall

local ERR = base.ERR
local EVENT_KIND = base.EVENT_KIND
local HELD = base.HELD
local IN_FLIGHT = base.IN_FLIGHT
local RACE = base.RACE
local asset_key = base.asset_key
local complete = resolve.complete
local fail = base.fail
local guard = base.guard
local heads_of = resolve.heads_of
local hex = base.hex
local list_accounts = resolve.list_accounts
local pairs_of = resolve.pairs_of
local store_failure = base.store_failure

local _M = {}
local Ledger = {} -- this concern's methods

-- ---- the saga ----

local function saga_data(ctx)
    return codec.encode { req = ctx.req, t = ctx.tbytes, tid = ctx.tid, heads = ctx.heads,
                          created_at_ms = ctx.created_at_ms }
end

function Ledger:_save(ctx, phase)
    ctx.phase = phase
    self:_p("save_saga", ctx.sid, phase, saga_data(ctx), self.node)
end

-- Releases what ctx holds before the point of no return (compensation; LED-28).
-- Each release is read back: a count short of the full one (a lost reply, a partial batch)
-- must not leave a posting PendingInactive or a head held by a saga that gave up.
function Ledger:_compensate(ctx)
    local ids = ctx.t and ctx.t.inputs or {}
    for round = 1, self.max_attempts + 1 do
        if #ids == 0 then break end
        if self:_p("release_postings", ids, ctx.sid) ~= #ids then
            local left = {}
            for _, p in ipairs(self:_p("get_postings", ids)) do
                if p.status == "pending_inactive" and p.reservation == ctx.sid then
                    left[#left + 1] = p.id
                end
            end
            ids = left
        else
            ids = {}
        end
        if round > self.max_attempts and #ids > 0 then
            error({ ledger_store_failure = true, name = "release_postings",
                    err = "postings stay reserved", class = "io" }, 0)
        end
    end
    local heads = ctx.heads or {}
    for i = #heads, 1, -1 do
        local h = heads[i]
        if self:_p("release_head", h.account, h.asset, ctx.sid) ~= 1 then
            local cur = self:_p("get_heads", { h })[1]
            if cur and cur.holder == ctx.sid then
                self:_p("release_head", h.account, h.asset, ctx.sid)
                cur = self:_p("get_heads", { h })[1]
                if cur and cur.holder == ctx.sid then
                    error({ ledger_store_failure = true, name = "release_head",
                            err = "head stays held", class = "io" }, 0)
                end
            end
        end
    end
    ctx.t, ctx.tbytes, ctx.tid, ctx.heads = nil, nil, nil, nil
end

-- Another saga holds the intent's claim (cur; the open phase, ron.ledger.phases): false + a
-- result to return (its outcome, Conflict, Unavailable, or the answer of adopting it).
function Ledger:_claim_lost(ctx, cur)
    -- ours never reserved anything: drop its record (a saga driven again may have one)
    self:_p("delete_saga", ctx.sid)
    local final = self:_read("get_intent", ctx.req.intent)
    if final then return false, { self:_outcome(ctx.req, final) } end
    if cur and cur.body_hash ~= ctx.req.body_hash then
        return false, { fail(ERR.Conflict, "intent in flight with another body") }
    end
    local holder = cur and cur.message
    if holder and not self.inflight[holder] then
        -- A saga of this node that nobody drives (it failed with Unavailable): adopt it.
        -- Marked before the next store call (a scheduling point) so no one adopts it twice.
        self.inflight[holder] = true
        local found, batch
        -- a member of a batch ("<batch sid>/<k>") whose batch record is still there
        local bsid = holder:match("^(.+)/%d+$")
        for _, s in ipairs(self:_p("list_pending_sagas", self.node)) do
            if s.id == holder then found = s end
            if bsid and s.id == bsid and not self.inflight[bsid] then batch = s end
        end
        self.inflight[holder] = nil
        if found then return false, { self:_resume(found) } end
        if batch then
            self:_resume(batch)
            local now = self:_read("get_intent", ctx.req.intent)
            if now then return false, { self:_outcome(ctx.req, now) } end
        end
    end
    return false, { fail(ERR.Unavailable, IN_FLIGHT .. " in saga " .. tostring(holder)) }
end

-- Stores a deterministic rejection under the intent (LED-27), after compensation: the
-- outcome, its event and the record's deletion in one phase, flushed in the same call
-- (LED-67, LED-68: phases.reject).
function Ledger:_reject(ctx, err, code)
    self:_compensate(ctx)
    local stored, res = phases.reject(self, ctx, { status = "rejected", code = code,
                                                   message = err,
                                                   body_hash = ctx.req.body_hash })
    if not stored then return fail(ERR.Bug, "intent neither stored nor present") end
    self.stats.rejections = self.stats.rejections + 1
    if stored.status == "committed" then return self:_outcome(ctx.req, stored) end
    return nil, stored.message, stored.code, self.flush_on_ack and res.flushed
end

-- The last step before the point of no return (LED-30): re-read accounts, consumed
-- postings and balances, and validate against them.
-- reads: what the reserve phase read after taking the inputs and heads ({ accts,
-- consumed, prs, bals }, the same transaction), else (its reply was lost) read now.
function Ledger:_revalidate(ctx, reads)
    local t = ctx.t
    local accts, consumed, prs, bals
    if reads then
        accts, consumed, prs, bals = reads.accts, reads.consumed, reads.prs, reads.bals
    else
        accts = self:_p("get_accounts", ctx.ids)
        consumed = #t.inputs > 0 and self:_p("get_postings", t.inputs) or {}
    end
    for _, p in ipairs(consumed) do
        if p.status ~= "pending_inactive" or p.reservation ~= ctx.sid then
            return false, "a reserved posting is not ours any more", ERR.Bug
        end
    end
    if not reads then
        prs = pairs_of(t, consumed)
        bals = self:_p("get_balances", prs)
    end
    local balances = {}
    for i, pr in ipairs(prs) do
        balances[i] = { account = pr.account, asset = pr.asset, amount = bals[i] }
    end
    local alist = {}
    for _, id in ipairs(ctx.ids) do if accts[id] then alist[#alist + 1] = accts[id] end end
    local plan, err, code = ledger.validate_and_plan(t, alist, consumed, balances)
    if self.check then self.check(t, alist, consumed, balances, plan, err, code) end
    if plan then return plan, nil, nil, accts end
    return nil, err, code
end

-- One drive of a saga to an outcome.
-- fresh: sid is new (no record, no claim anywhere): the one-transaction commit may try.
function Ledger:_drive(sid, req, fresh)
    local ctx = { sid = sid, req = req, created_at_ms = self.clock(), fresh = fresh }
    self.inflight[sid] = true
    local r = { pcall(guard, function()
        -- Before the point of no return a failure releases what it holds, best effort (the
        -- saga record stays: recover() or the caller's retry finishes it).
        if ctx.phase ~= "finalizing" then
            local ok, e = pcall(self._compensate, self, ctx)
            if not ok and not store_failure(e) then error(e, 0) end
        end
    end, self._drive_body, self, ctx) }
    self.inflight[sid] = nil
    if not r[1] then error(r[2], 0) end
    self:_note_failed(sid, r[2], r[3], r[4])
    return unpack(r, 2, table.maxn(r))
end

function Ledger:_drive_body(ctx)
    local req = ctx.req
    -- the one-transaction commit first (LED-72); false: nothing of it applied
    if ctx.fresh and self.one_tx and req.kind ~= "reverse" then
        local res = { atomic.commit(self, ctx, view.wants({ req })) }
        if res[1] ~= false then return unpack(res, 1, table.maxn(res)) end
    end
    -- the prior outcome, the record, the claim and the plan's reads: one phase (LED-67)
    local r = req.kind ~= "reverse" and view.wants({ req }) or nil
    local ok, res = phases.open(self, ctx, saga_data(ctx), r)
    if not ok then return unpack(res, 1, table.maxn(res)) end
    local src = res -- (the view of the open phase's reads, or nil)
    local held = nil -- the one saga every attempt found holding the payer's postings
    for attempt = 1, self.max_attempts do
        self.stats.resolves = self.stats.resolves + 1
        local t, consumed, accts, holder
        if r then
            src = src or phases.reads(self, r)
            t, consumed, accts, holder = self:_resolve_commit(req, src)
            if attempt == 1 then held = holder elseif holder ~= held then held = false end
        else
            t, consumed, accts = self:_resolve_reverse(req)
        end
        if t == nil then return self:_reject(ctx, consumed, accts) end
        if t then
            ctx.ids = complete(t, consumed, accts)
            -- An early look: a transfer the current state refuses is refused before
            -- anything is reserved (the same check runs again as the last step).
            local prs = pairs_of(t, consumed)
            local plan, err, code = ledger.validate_and_plan(t, list_accounts(ctx.ids, accts),
                consumed, self:_balances(prs, src), true)
            if not plan and not RACE[code] and not self:_picks_moved(consumed) then
                return self:_reject(ctx, err, code)
            end
            if plan then
                ctx.t, ctx.tid = t, plan.transfer_id
                ctx.tbytes = plan.bytes
                ctx.heads = heads_of(t, consumed, accts)
                -- the record, the inputs and the heads (all or none) and the last step's
                -- reads: one phase (LED-67)
                local got, reads = phases.reserve(self, ctx, saga_data(ctx), t.inputs, prs)
                if got == "full" then
                    local done, ans = self:_last_step(ctx, reads)
                    if done then return unpack(ans, 1, table.maxn(ans)) end
                end
                ctx.t, ctx.tbytes, ctx.tid, ctx.heads = nil, nil, nil, nil
            end
        end
        src = nil
        self.pause(1)
    end
    -- Still racing: the saga stays (reserving, holding nothing) for the retry or recover().
    if held then
        return fail(ERR.Unavailable, HELD .. tostring(held) .. " for every attempt; retry")
    end
    return fail(ERR.Unavailable, "postings or heads kept changing; retry")
end

-- The last validation and the finalize: -> true and the answer's values, or false (a race:
-- what the saga held given back; validate again). The finalize checks the moved pairs'
-- limits first (phases.limits): a pair another writer raised (or an uncapped one it
-- lowered) since the last read past what the move fits would overflow; that miss applies
-- nothing and is a race too (the next attempt's early look refuses the overflow).
function Ledger:_last_step(ctx, reads)
    local plan, err, code, accts = self:_revalidate(ctx, reads)
    if plan then
        ctx.limits = phases.limits(plan.deltas, accts)
        local fin = { self:_finalize(ctx) }
        ctx.limits = nil
        if fin[1] ~= false then return true, fin end
    else
        if code == ERR.Bug then error(err) end
        if not RACE[code] then return true, { self:_reject(ctx, err, code) } end
    end
    self:_compensate(ctx)
    return false
end

-- The balances of prs as validation takes them: from the view src (its one read), else
-- read now.
function Ledger:_balances(prs, src)
    local out, bals = {}, nil
    for i, pr in ipairs(prs) do
        local v = src and src.bal[pr.account .. asset_key(pr.asset)]
        if v == nil then
            bals = bals or self:_p("get_balances", prs)
            v = bals[i]
        end
        out[i] = { account = pr.account, asset = pr.asset, amount = v }
    end
    return out
end

-- The finalize: one phase (ron.ledger.phases, LED-67); also what recover() runs for a saga
-- found in phase finalizing.
function Ledger:_finalize(ctx) return phases.finalize(self, ctx) end

-- The finalize step by step, for a state that holds part of one (an older binary's record
-- in phase finalizing): past the point of no return, every step verified, every step
-- idempotent (LED-31).
function Ledger:_finalize_steps(ctx)
    local t, tid, sid = ctx.t, ctx.tid, ctx.sid
    if ctx.phase ~= "finalizing" then self:_save(ctx, "finalizing") end
    -- 1. consume: every input Inactive, consumed by this transfer (the double-spend guard).
    if #t.inputs > 0 then
        for round = 1, self.max_attempts + 1 do
            self:_p("deactivate_postings", t.inputs, sid, tid)
            local done, left = 0, 0
            for _, p in ipairs(self:_p("get_postings", t.inputs)) do
                if p.status == "inactive" and p.consumed_by == tid then done = done + 1
                elseif p.status == "pending_inactive" and p.reservation == sid then
                    left = left + 1
                else
                    error(format("ron.ledger: double spend refused: posting %s:%d of saga %s "
                                 .. "is %s (consumed by %s)", hex(p.id.transfer_id), p.id.index,
                                 sid, p.status, p.consumed_by and hex(p.consumed_by) or "-"))
                end
            end
            if done == #t.inputs then break end
            if round > self.max_attempts or left + done ~= #t.inputs then
                error("ron.ledger: inputs of saga " .. sid .. " lost")
            end
        end
    end
    -- 2. create: every output exists.
    local outs = {}
    for i = 1, #t.outputs do outs[i] = ledger.output_posting(t, tid, i) end
    if #outs > 0 and self:_p("insert_postings", outs) ~= #outs then
        -- Short count: some exist already (a replay) or the batch was cut; read back.
        local ids = {}
        for i, o in ipairs(outs) do ids[i] = o.id end
        for round = 1, self.max_attempts + 1 do
            if #self:_p("get_postings", ids) == #outs then break end
            if round > self.max_attempts then
                error("ron.ledger: outputs of " .. hex(tid) .. " missing after insert")
            end
            self:_p("insert_postings", outs)
        end
    end
    -- 3. the transfer record.
    local involved = self:_involved(t)
    local rec = { id = tid, bytes = ctx.tbytes, intent = t.intent, book = self.book,
                  created_at_ms = ctx.created_at_ms, metadata = t.metadata }
    if self:_p("store_transfer", rec, involved) ~= 1 then
        local got = self:_read("get_transfer", tid)
        if not got or got.bytes ~= ctx.tbytes then
            error("ron.ledger: transfer " .. hex(tid) .. " not stored")
        end
    end
    -- 4. the intent's outcome.
    local outcome = { status = "committed", transfer_id = tid, body_hash = ctx.req.body_hash }
    if self:_p("put_intent", t.intent, outcome) ~= 1 then
        local cur = self:_read("get_intent", t.intent)
        if not cur or cur.status ~= "committed" or cur.transfer_id ~= tid then
            error("ron.ledger: intent of " .. hex(tid) .. " holds another outcome")
        end
    end
    -- 5. the event, gapless (LED-33): 0 = it exists, or a racing insert took the seq.
    local ev
    for _ = 1, self.max_attempts * 4 do
        self:_p("append_event", self.book, tid, EVENT_KIND, phases.event_data(ctx))
        ev = self:_read("get_event", self.book, tid, EVENT_KIND)
        if ev then break end
        self.pause(1)
    end
    if not ev then return fail(ERR.Unavailable, "event of " .. hex(tid) .. " not appended") end
    -- 6. heads back, record gone.
    for i = #(ctx.heads or {}), 1, -1 do
        local h = ctx.heads[i]
        self:_p("release_head", h.account, h.asset, sid)
    end
    self:_p("delete_saga", sid)
    return self:_committed(ctx, ev)
end

-- The receipt of a committed transfer (its event ev); durable: its finalize flushed.
function Ledger:_committed(ctx, ev, durable)
    self.stats.commits = self.stats.commits + 1
    if self.audit then
        self.audit { kind = "transfer", transfer_id = ctx.tid, intent = ctx.t.intent,
                     event_seq = ev.seq, book = self.book }
    end
    return { transfer_id = ctx.tid, status = "committed", event_seq = ev.seq, replayed = false },
        nil, nil, durable
end

_M.methods = Ledger
return _M
