-- ron.ledger.engine.batch_atomic: the one-transaction batch (LED-74, issue 25): a planned
-- batch committed in ONE phase, guarded, instead of the batch saga's four (the record and
-- the claims, the reservation with the last step's reads, the finalize, the flush).
-- A concern of the engine ron.ledger.ledger, which installs the methods below (_M.methods)
-- on its one Ledger class; commit_many's body (ron.ledger.engine.batch) tries it first.
--
--   plan     the batch saga's own plan (_plan_batch: one read-only phase, the members
--            resolved and validated in order over the in-memory view, a payer spending its
--            own change)
--   commit   ONE phase, flushed in the same call (LED-50): the caller's claims and its own
--            writes (commit_many's opts.check, opts.also; each with its expect), the
--            members' claims (expect: no other saga holds one); the store's postings the
--            batch consumes reserved (expect all: each still Active) and the capped pairs'
--            heads taken (expect 1 each); the
--            GUARDS: every pinned account still at its pinned version (count_accounts_at),
--            every pair the chain lowers, unless uncapped, still at a balance of at least
--            its floor plus the most the chain takes from it before any later member gives
--            back (count_balances_at_least), every pair it raises at most 2^63 - 1 minus the
--            most the chain adds to it (count_balances_at_most); then the batch's finalize
--            (ron.ledger.phases: inputs consumed, outputs, the transfers, the outcomes, the
--            heads released, the events), without the record there is none of.
--
-- Why the guards suffice, as for the single path's one-transaction commit (LED-72,
-- ron.ledger.engine.atomic): the chain's validations depend on the state through the pinned
-- accounts (one version each), the consumed postings (fixed by their ids; the reservation's
-- count says they are still Active) and the balances, of which each member's floor check
-- reads the pair's balance before the batch plus the chain's moves before it, and passes
-- for every larger one: `b + (after_k - before) >= floor` for every member k that lowers
-- the pair <=> `b >= floor + before - min_k after_k`; the overflow checks likewise with the
-- largest after. So the guards hold exactly when the chain, validated again in the
-- transaction that writes, passes, with the same plans and ids (validate_and_plan is a
-- function of those inputs; selection is not re-run: the postings it chose are still
-- Active and still the payer's, which is all a transfer needs).
--
-- A batch whose plan handed no member over (it needs its own record) and that fits one
-- phase (ron.ledger.store.phase MAX_OPS) goes this way. Its deterministic rejections go in
-- the same phase (claimed, then stored with their events, as the saga's finalize stores
-- them): decided on the plan's read, as the saga decides them, never revalidated there
-- either. A missed guard applies nothing: the batch goes the saga's way (_batch_body),
-- planned again. Crash safety: one transaction, so a crash leaves
-- all of it or nothing (no record, no reservation, no head, no claim: nothing for
-- recover()); a reply lost after the commit ("maybe") is read back from the outcomes.
-- `one_tx = false` (the single path's switch) keeps the saga's phases for batches too.
local ffi = require("ffi")
local base = require("ron.ledger.engine.base")
local batch = require("ron.ledger.engine.batch")
local phases = require("ron.ledger.phases")
local pipeline = require("ron.ledger.engine.pipeline")
local resolve = require("ron.ledger.engine.resolve")
local store_phase = require("ron.ledger.store.phase")

local ipairs, sort = ipairs, table.sort

local _M = {}
local Ledger = {} -- this concern's methods

local I64 = ffi.typeof("int64_t")
local MAX = 0x7fffffffffffffffLL -- 2^63 - 1, the largest balance
local MIN = -MAX -- an uncapped pair's floor (phases.limits)
local BATCH_IDS = batch.BATCH_IDS
local EVENT_KIND = base.EVENT_KIND
local slices = batch.slices
local claim_of = batch.claim_of

-- The guards' lists (see the header): the pins at their versions, the floors, the ceilings.
local function guards(items, accts)
    local at, seen = {}, {}
    for _, it in ipairs(items) do
        for _, p in ipairs(it.t.pins) do
            if not seen[p.account] then
                seen[p.account] = true
                at[#at + 1] = { id = p.account, version = p.version }
            end
        end
    end
    local mins, maxs = {}, {}
    for _, x in ipairs(phases.chain_pairs(items)) do
        -- A chain that takes a pair below where it started needs b >= floor + (before - lo),
        -- which fits (the plan's read passed it) and is computed in wrapping int64 as
        -- phases.limits does; one whose lowest point is at or above its start needs less than
        -- b >= floor (an uncapped pair's floor, MIN, always holds): that is the guard, never
        -- weaker than the chain needs. A chain that takes a pair above where it started needs
        -- b <= (MAX - hi) + before; one that does not needs nothing (b <= MAX always holds).
        -- (Before - lo or hi - before of the wrong sign overflowed: guards that could never
        -- hold, a batch sent to the saga's phases for nothing.)
        if x.lo ~= nil then
            local a = accts[x.account]
            local floor = (a == nil or a.policy == "uncapped") and MIN or I64(a.floor or 0)
            local min = floor
            if x.lo < x.before then min = (floor + I64(x.before)) - I64(x.lo) end
            mins[#mins + 1] = { account = x.account, asset = x.asset, min = min }
        end
        if x.hi ~= nil and x.hi > x.before then
            maxs[#maxs + 1] = { account = x.account, asset = x.asset,
                                max = (MAX - I64(x.hi)) + I64(x.before) }
        end
    end
    return at, mins, maxs
end

local function add_chunked(ops, name, list, ...)
    for _, c in ipairs(slices(list, BATCH_IDS)) do
        local op = { name, c, ... }
        op.expect = #c
        ops[#ops + 1] = op
    end
end

-- The members the phase decides, each { e = the member }: the transfers, then the
-- rejections (the order of their outcomes and events, _batch_rows).
local function decided(ctx)
    local list = {}
    for _, it in ipairs(ctx.items) do list[#list + 1] = it end
    for _, x in ipairs(ctx.rejects) do list[#list + 1] = x end
    return list
end

-- (with self.lock_order, PostgreSQL's: the claims in key order and the postings it reserves
-- in id order: two phases claiming some of the same keys, or spending some of the same
-- postings, at once wait for each other in one order, never in a cycle; PostgreSQL's phase
-- takes its balance rows' lock after them, ron.ledger.store.pg_phase. The members' claim
-- keys share their 256-byte prefix: their order is their intents', compared instead)
local function by_key(a, b) return a.key < b.key end
local function by_intent(a, b) return a.e.req.intent < b.e.req.intent end

-- The phase: the claims (the caller's, its own writes, the members'), the reservation, the
-- heads, the guards, the finalize's ops.
function Ledger:_atomic_batch_ops(ctx, rows)
    local sid, ops = ctx.sid, {}
    -- the caller's claims first (commit_many's opts.check): all of them, or nothing applied
    if ctx.claims then
        if self.lock_order then sort(ctx.claims, by_key) end
        add_chunked(ops, "put_intents", ctx.claims)
    end
    -- the caller's own writes (commit_many's opts.also), with its claims: before any posting
    -- write (PostgreSQL sends them ahead of its balance lock, ron.ledger.store.pg_phase)
    ctx.also_sent = false
    if ctx.also then
        local planned = {}
        for _, it in ipairs(ctx.items) do planned[it.e.i] = it.t end
        for _, op in ipairs(ctx.also(planned) or {}) do
            ops[#ops + 1] = op
            ctx.also_sent = true
        end
    end
    local list, claims = decided(ctx), {}
    if self.lock_order then sort(list, by_intent) end
    for i, x in ipairs(list) do claims[i] = claim_of(x.e) end
    add_chunked(ops, "put_intents", claims)
    local ids = {}
    for i, x in ipairs(rows.ins) do ids[i] = x.id end
    if self.lock_order then sort(ids, resolve.ref_less) end
    add_chunked(ops, "reserve_postings", ids, sid)
    for _, h in ipairs(ctx.heads) do
        ops[#ops + 1] = { "ensure_head", h.account, h.asset }
        ops[#ops + 1] = { "acquire_head", h.account, h.asset, sid, expect = 1 }
    end
    local at, mins, maxs = guards(ctx.items, ctx.seen.accts)
    add_chunked(ops, "count_accounts_at", at)
    add_chunked(ops, "count_balances_at_least", mins)
    add_chunked(ops, "count_balances_at_most", maxs)
    for _, op in ipairs(phases.batch_finalize_ops(self, ctx, rows)) do
        if op[1] ~= "delete_saga" then ops[#ops + 1] = op end
    end
    return ops
end

-- A reply lost after the phase committed ("maybe", then a retry that missed its claims):
-- every member's outcome is the phase's (its transfer, or its rejection with its body).
-- -> the events by transfer id, or nil (nothing of the batch is in the store).
-- A member missing proves the phase did not commit (it is one transaction, and intents are
-- never deleted), whatever the others show: a member found landed was then stored by
-- another commit of the same intent and body (its outcome is identical: the transfer id is
-- the content's), which the saga's way answers as a replay. (Taken for a half-applied
-- phase, that raised out of commit_many: `make sim-ledger`, seed 5120.)
local function landed_as(x, o)
    if not o then return false end
    if x.tid then return o.status == "committed" and o.transfer_id == x.tid end
    return o.status == "rejected" and o.body_hash == x.e.req.body_hash
end

function Ledger:_atomic_batch_landed(ctx)
    local list, ks = decided(ctx), {}
    for i, x in ipairs(list) do ks[i] = x.e.req.intent end
    local cur = self:_intents_of(ks)
    local landed = 0
    for _, x in ipairs(list) do
        if landed_as(x, cur[x.e.req.intent]) then landed = landed + 1 end
    end
    if landed < #list then
        if landed > 0 then
            self.stats.atomic_batch_landed_elsewhere =
                (self.stats.atomic_batch_landed_elsewhere or 0) + 1
        end
        return nil
    end
    local tids = {}
    for i, it in ipairs(ctx.items) do tids[i] = it.tid end
    local evs = {}
    for _, c in ipairs(slices(tids, BATCH_IDS)) do
        for k, v in pairs(self:_p("get_events_for", self.book, c, EVENT_KIND)) do evs[k] = v end
    end
    return evs
end

-- The plan of a pipeline's later batch (ron.ledger.engine.pipeline): on the earlier one's
-- planned state while its phase runs, unless that plan hands over or rejects anything
-- (then, and when the earlier one is not planned yet, after its end, from the store).
function Ledger:_pipelined_plan(ctx)
    local after = ctx.after
    if after and not after.done and not after.items then pipeline.wait(after) end
    self:_plan_batch(ctx)
    if ctx.overlaid and (#ctx.handover > 0 or #ctx.rejects > 0) then
        pipeline.wait(after)
        self.stats.pipeline_replans = (self.stats.pipeline_replans or 0) + 1
        self:_plan_batch(ctx)
    end
end

-- A plan made on the earlier batch's state goes to the store once that batch ended with it
-- applied: -> true, or false (it did not: plan again, now from the store).
function Ledger:_pipeline_turn(ctx)
    if not ctx.overlaid then return true end
    -- (ready before the batch before landed: the store's writer had its next phase waiting)
    if not (ctx.after.released or ctx.after.done) then
        self.stats.pipeline_ahead = (self.stats.pipeline_ahead or 0) + 1
    end
    pipeline.wait_released(ctx.after)
    if ctx.after.landed then
        self.stats.pipelined = (self.stats.pipelined or 0) + 1
        -- (sent while the batch before makes its results)
        if not ctx.after.done then
            self.stats.pipeline_early = (self.stats.pipeline_early or 0) + 1
        end
        return true
    end
    self.stats.pipeline_replans = (self.stats.pipeline_replans or 0) + 1
    return false
end

-- The batch of ctx in one phase: -> commit_many's true (results filled; results.flushed
-- when the phase's commit was the flush), or nil: nothing of it applied, the saga's way.
function Ledger:_atomic_batch(ctx, results, later)
    self.stats.resolves = self.stats.resolves + 1
    self:_pipelined_plan(ctx)
    if #ctx.handover > 0 or #ctx.items + #ctx.rejects == 0 then return nil end
    local rows = self:_batch_rows(ctx)
    local ops = self:_atomic_batch_ops(ctx, rows)
    -- (a batch past a phase's bound, e.g. a head per capped pair of 1024 streams: the saga's
    -- phases, which hold fewer ops each; one op kept for a leased engine's guard, LED-71)
    if #ops >= store_phase.MAX_OPS then
        self.stats.atomic_batch_big = (self.stats.atomic_batch_big or 0) + 1
        return nil
    end
    if not self:_pipeline_turn(ctx) then return self:_atomic_batch(ctx, results, later) end
    -- (the next batch of a pipeline plans on this plan while the phase runs)
    if ctx.pending then ctx.pending.items = ctx.items end
    pipeline.ack(ctx.after) -- (this phase is on its way: the batch before goes on)
    local res, maybe = phases.apply(self, ops, self.flush_on_ack and { flush = true } or nil)
    local evs
    if res.ok then
        ctx.claims = nil -- (written by the phase)
        evs = phases.batch_seqs(ops, res)
        if res.flushed then results.flushed = true end
        -- (a reply lost, below, leaves them to the caller: its own writes are conditional)
        if ctx.also_sent then results.also_done = true end
    elseif maybe then
        evs = self:_atomic_batch_landed(ctx) -- (not flushed: commit_many's flush follows)
        if evs then ctx.claims = nil end
    end
    if not evs then
        self.stats.atomic_batch_missed = (self.stats.atomic_batch_missed or 0) + 1
        -- (which op's guard: res.at, "?" when the store failed; the bench prints them)
        local at = res and res.at and ops[res.at] and ops[res.at][1] or "?"
        local by = self.stats.atomic_batch_missed_at or {}
        self.stats.atomic_batch_missed_at = by
        by[at] = (by[at] or 0) + 1
        return nil
    end
    if ctx.pending then
        ctx.pending.landed = true
        -- nothing of this batch commits after its phase: the next one's may go now
        if #later == 0 then pipeline.release(ctx.pending) end
    end
    self.stats.atomic_batches = (self.stats.atomic_batches or 0) + 1
    return self:_batch_done(ctx, results, later, evs, {}, rows)
end

_M.methods = Ledger
return _M
