-- ron.ledger.engine.batch_plan: the batch path's plan, in memory over one read of each kind,
-- and its last-step validation of the whole chain (LED-52, LED-54).
-- A concern of the engine ron.ledger.ledger, which installs the methods below
-- (_M.methods) on its one Ledger class.
local ledger = require("ron.ledger")
local base = require("ron.ledger.engine.base")
local batch = require("ron.ledger.engine.batch")
local phases = require("ron.ledger.phases")
local pipeline = require("ron.ledger.engine.pipeline")
local plan_core = require("ron.ledger.engine.plan_core")
local resolve = require("ron.ledger.engine.resolve")
local view = require("ron.ledger.view")

local sort = table.sort

local BATCH_IDS = batch.BATCH_IDS
local BATCH_QUERIES = batch.BATCH_QUERIES
local FIRST_PAGE = base.FIRST_PAGE
local RACE = base.RACE
local SELECT_LIMIT = base.SELECT_LIMIT
local asset_key = base.asset_key
local complete = resolve.complete
local heads_of = resolve.heads_of
local list_accounts = resolve.list_accounts
local pairs_of = resolve.pairs_of
local pkey = batch.pkey
local store_inputs = batch.store_inputs

local _M = {}
local Ledger = {} -- this concern's methods

-- The plan's three reads (reads only, none needs another's answer: LED-62) -> accts, the
-- payers' lists, the balances, cached (some account answered from memory, LED-63). On a
-- store that serves statements at once (overlap: PostgreSQL's pool) they go at once; else
-- in ONE read-only phase (one call: one thread hop of the offloaded SQLite driver instead
-- of three). Either way the accounts the cache holds are not read (LED-63), the ones read
-- are remembered.
-- (The reads at once made apart: closures made in _plan_reads and _revalidate_reads closed
-- their upvalues at the phase's early return, which aborted every trace through them.)
local function plan_reads_at_once(self, ctx, r)
    local accts, res, got, cached
    self:_read_at_once(function() accts, cached = self:_accounts_of(r.ids, not ctx.fresh) end,
                       function() res = self:_list_read("get_postings_by_pairs", r.qs,
                                                        BATCH_QUERIES) end,
                       function() got = self:_list_read("get_balances", r.bpairs, BATCH_IDS) end)
    return accts, res, got, cached
end

local function pinned_at_once(self, ids, rids)
    local accts, got
    self:_read_at_once(function() accts = self:_accounts_of(ids) end,
                       function() got = self:_list_read("get_postings", rids, BATCH_IDS) end)
    return accts, got
end

function Ledger:_plan_reads(ctx, r)
    if not self.overlap then
        local accts, want, cached = self:_cached_accounts(r.ids, not ctx.fresh)
        local rr = setmetatable({ ids = want }, { __index = r })
        local ops = view.read_ops(rr)
        if #ops == 0 then return accts, {}, {}, cached end
        local read, res, got = view.answers(rr, ops, phases.apply(self, ops), 1)
        self.stats.plan_reads_phase = (self.stats.plan_reads_phase or 0) + 1
        for id, a in pairs(read) do
            accts[id] = a
            self:_remember_account(id, a)
        end
        return accts, res, got, cached
    end
    return plan_reads_at_once(self, ctx, r)
end

-- The plan's view moves on past a transfer it validated: the balances by its plan's deltas,
-- the payers' lists without the postings it consumes (remembered in seen.posts) and with
-- the ones it creates, in selection order. An output of a number amount <= 0 joins no
-- list: selection never takes one (select_postings does not even pass it to the core), and
-- none can stand before a positive posting, so a page's positive postings and the full
-- first page's test are the same without it (an uncapped source's negative posting per
-- transfer made the source's list grow through the batch, each insertion a walk down it).
local function move_view(pidx, bal, seen, plan, t, consumed)
    for _, d in ipairs(plan.deltas) do
        bal[d.account .. asset_key(d.asset)] = d.after
    end
    local gone, touched = {}, {}
    for _, p in ipairs(consumed) do
        local pk = pkey(p.id)
        gone[pk] = true
        seen.posts[pk] = p
        touched[p.account .. asset_key(p.asset)] = true
    end
    for pk in pairs(touched) do
        local pool = pidx[pk]
        local kept = {}
        for _, p in ipairs(pool.list) do
            if not gone[pkey(p.id)] then kept[#kept + 1] = p end
        end
        pool.list = kept
    end
    local tid = plan.transfer_id
    for i, out in ipairs(t.outputs) do
        local pool = view.list_for_output(pidx, out)
        if pool then
            local l = pool.list
            view.insert_sorted(l, ledger.output_posting(t, tid, i), #l + 1, view.largest_less)
        end
    end
end

-- A pipeline's later batch (ron.ledger.engine.pipeline) starts its view where the earlier
-- batch's plan leaves it while that batch's phase runs (ctx.overlaid): -> true, or false
-- when the view cannot (a payer list read cut at its page): the earlier batch's end was
-- waited for, plan again from the store. items: the earlier batch's plan as the reads
-- began (pipeline.items_of then). Reads that began while that phase was in flight may
-- predate its commit though they return after the batch ended: the view moves to its plan
-- all the same (each edit a set) when it ended released (that plan was all it wrote), and
-- is read again from the store when it ended otherwise (its saga's way, members after its
-- phase: more than its plan). Nil items: it was not in flight with a plan then (the
-- reads began after its end, _pipelined_plan).
function Ledger:_plan_on_earlier(ctx, pidx, bal, items)
    ctx.overlaid = nil
    if items == nil then return true end
    local after = ctx.after
    if after.done and not after.released then return false end
    if not pipeline.eligible(items, pidx) then
        pipeline.wait(ctx.after)
        return false
    end
    pipeline.overlay(items, pidx, bal, pkey)
    ctx.overlaid = true
    return true
end

-- One member resolved and validated the long way over the view (resolve.lua, the oracle):
-- -> t, consumed, accts, cids, prs, plan; or nil, err, code (a rejection to store), or
-- false (a race: handed over). sbal: each pair's balance where the plan first saw it.
function Ledger:_plan_member_lua(req, src, sbal)
    local t, consumed, a3 = self:_resolve_commit(req, src)
    if not t then return t, consumed, a3 end
    local cids = complete(t, consumed, a3)
    local prs = pairs_of(t, consumed)
    local bal, balances = src.bal, {}
    for i, pr in ipairs(prs) do
        local bk = pr.account .. asset_key(pr.asset)
        local v = bal[bk] or 0
        if sbal[bk] == nil then sbal[bk] = v end
        balances[i] = { account = pr.account, asset = pr.asset, amount = v }
    end
    local plan, err, code = ledger.validate_and_plan(t, list_accounts(cids, a3), consumed,
                                                     balances, true)
    if not plan and RACE[code] then return false end
    if not plan then return nil, err, code end
    return t, consumed, a3, cids, prs, plan
end

-- The same, in the core when it decides the member (ron.ledger.engine.plan_core: a planned
-- transfer, and the core's view of the batch moved past it: the last value true), else the
-- long way over src, which the core's view is first written back into, and dropped when
-- that way moved src or read the finalizing sagas. (src.bal holds a pair's balance as the
-- batch found it until then: what sbal wants on first sight.)
function Ledger:_plan_member(req, src, sbal)
    if not plan_core.enabled then return self:_plan_member_lua(req, src, sbal) end
    local t, consumed, cids, prs, keys, plan = plan_core.plan(src, req)
    if not t then
        plan_core.sync(src, req)
        local fin = src.finalizing
        local r = { self:_plan_member_lua(req, src, sbal) } -- (the rare way: a table)
        if r[1] or src.finalizing ~= fin then plan_core.drop(src) end
        return unpack(r, 1, 6)
    end
    local bal = src.bal
    for _, bk in ipairs(keys) do
        if sbal[bk] == nil then sbal[bk] = bal[bk] or 0 end
    end
    if plan_core.check then self:_plan_core_check(req, src, t, consumed, cids, prs, plan) end
    return t, consumed, src.accts, cids, prs, plan, true
end

-- plan_core.check: after move_view, the core's view of every pair the transfer touched
-- holds what src does (the balance; the list's positive postings, in order).
local function check_view(src, plan, t, consumed)
    local keys = {}
    for _, d in ipairs(plan.deltas) do keys[#keys + 1] = d.account .. asset_key(d.asset) end
    for _, p in ipairs(consumed) do keys[#keys + 1] = p.account .. asset_key(p.asset) end
    for _, o in ipairs(t.outputs) do keys[#keys + 1] = o.account .. asset_key(o.asset) end
    for _, k in ipairs(keys) do
        local b, l, listed = plan_core.state(src, k)
        local pool = src.pools[k]
        if b == nil or b ~= (src.bal[k] or 0) or listed ~= (pool ~= nil) then
            error("ron.ledger: the core's view differs from move_view's: a balance", 0)
        end
        local sl = pool and pool.list or {}
        for i = 1, #sl + 1 do
            local p, q = l[i], sl[i]
            if q ~= nil and q.amount <= 0 then q = nil end
            if (p == nil) ~= (q == nil) or p and (pkey(p.id) ~= pkey(q.id)
                                                  or p.amount ~= q.amount) then
                error("ron.ledger: the core's view differs from move_view's: list " .. i, 0)
            end
            if p == nil then break end
        end
    end
end

-- plan_core.check: the long way over the same view must give the same plan.
function Ledger:_plan_core_check(req, src, t, consumed, cids, prs, plan)
    local lt, lc, la, lcids, lprs, lplan = self:_plan_member_lua(req, src, {})
    local function differ(what)
        error("ron.ledger: the core's plan differs from resolve.lua's: " .. what, 0)
    end
    if not lt then
        differ(lt == false and "a race there" or "rejected there: " .. tostring(lc))
    end
    if lplan.bytes ~= plan.bytes or lplan.transfer_id ~= plan.transfer_id then
        differ("the transfer")
    end
    if #lc ~= #consumed or #lcids ~= #cids or #lprs ~= #prs
       or #lplan.deltas ~= #plan.deltas then
        differ("a count")
    end
    for i, p in ipairs(lc) do
        -- (by id: an output planned in the batch is a table of each side's own)
        local q = consumed[i]
        if pkey(p.id) ~= pkey(q.id) or p.amount ~= q.amount or p.account ~= q.account then
            differ("consumed " .. i)
        end
    end
    for i, id in ipairs(lcids) do
        if id ~= cids[i] or la[id] ~= src.accts[id] then differ("involved " .. i) end
    end
    for i, pr in ipairs(lprs) do
        if pr.account ~= prs[i].account or asset_key(pr.asset) ~= asset_key(prs[i].asset) then
            differ("pair " .. i)
        end
    end
    for i, d in ipairs(lplan.deltas) do
        local c = plan.deltas[i]
        for _, f in ipairs { "account", "before", "debit", "credit", "after" } do
            if d[f] ~= c[f] then differ("delta " .. i .. " " .. f) end
        end
        if asset_key(d.asset) ~= asset_key(c.asset) then differ("delta " .. i .. " asset") end
    end
    for i, o in ipairs(lt.outputs) do
        if o.amount ~= t.outputs[i].amount then differ("output " .. i) end
    end
end

-- True when payer p's first page (a full one, read) is all its one payment of the batch
-- can pick from: p pays in one request only, and the page holds what it needs. That
-- member's selection then takes from the first page the single path reads too (a credit
-- planned before it in the batch joins both), and succeeds there, so it never looks
-- further: no second page to read (up to 1,024 postings of every such payer a batch, a
-- rating's tenant wallet topped up 32 times or more, issue 25).
local function covered(p)
    if p.debits ~= 1 or p.need == nil then return false end
    local sum = 0
    for _, q in ipairs(p.list) do
        sum = ledger.amount_add(sum, q.amount)
        if sum == nil then return false end
    end
    return sum >= p.need
end

-- Reads once, then resolves and validates the members in order over the in-memory view.
-- Sets ctx.items (the transfers, in order), ctx.rejects, ctx.handover, ctx.heads.
function Ledger:_plan_batch(ctx)
    local reqs = {}
    for i, e in ipairs(ctx.batch) do reqs[i] = e.req end
    local r = view.wants(reqs)
    local payers = r.payers
    local earlier = pipeline.items_of(ctx.after) -- (before the reads: _plan_on_earlier)
    local accts, res, got, cached = self:_plan_reads(ctx, r)
    local src = view.source(self, r, accts, res, got, true)
    local more = {}
    for _, p in ipairs(payers) do
        -- the single path's second page, read up front for a pair whose first page may not
        -- hold all its positive postings (the plan moves the lists as it goes), unless the
        -- first page covers it
        if #p.list == FIRST_PAGE and p.list[FIRST_PAGE].amount > 0 and not covered(p) then
            more[#more + 1] = p
        end
    end
    if #more > 0 then
        local q2 = {}
        for i, p in ipairs(more) do
            q2[i] = { account = p.account, asset = p.asset, status = "active",
                      limit = SELECT_LIMIT }
        end
        local r2 = self:_list_read("get_postings_by_pairs", q2, BATCH_QUERIES)
        for i, p in ipairs(more) do p.list = r2[i] end
    end
    local bal, pidx = src.bal, r.pidx
    if not self:_plan_on_earlier(ctx, pidx, bal, earlier) then return self:_plan_batch(ctx) end
    local items, rejects, handover, heads, hseen = {}, {}, {}, {}, {}
    -- what the validations below start from, for the last step's comparison (same_inputs):
    -- each pair's balance before the batch moved it, each account and consumed posting seen
    local seen = { bal = {}, accts = {}, posts = {} }
    local sbal = seen.bal
    for _, e in ipairs(ctx.batch) do
        local k = e.k
        local t, consumed, a3, cids, prs, plan, moved = self:_plan_member(e.req, src, sbal)
        if t == nil then
            rejects[#rejects + 1] = { k = k, e = e, err = consumed, code = a3 }
        elseif t == false then
            handover[#handover + 1] = { k = k, e = e }
        else
            local tid = plan.transfer_id
            for _, id in ipairs(cids) do seen.accts[id] = a3[id] end
            if moved and not plan_core.check then
                for _, p in ipairs(consumed) do seen.posts[pkey(p.id)] = p end
            else
                move_view(pidx, bal, seen, plan, t, consumed)
                if moved then check_view(src, plan, t, consumed) end
            end
            items[#items + 1] = { k = k, e = e, t = t, tid = tid, cids = cids,
                                  tbytes = plan.bytes, prs = prs, deltas = plan.deltas }
            for _, h in ipairs(heads_of(t, consumed, a3)) do
                local hk = h.account .. asset_key(h.asset)
                if not hseen[hk] then
                    hseen[hk] = true
                    h.key = hk
                    heads[#heads + 1] = h
                end
            end
        end
    end
    plan_core.finish(src)
    if cached and #rejects > 0 then
        -- a rejection is stored as it is (no last step): decided on the store's accounts,
        -- never on remembered ones (LED-63)
        self.stats.plans_uncached = (self.stats.plans_uncached or 0) + 1
        ctx.fresh = true
        return self:_plan_batch(ctx)
    end
    sort(heads, function(a, b) return a.key < b.key end)
    for _, h in ipairs(heads) do h.key = nil end
    ctx.items, ctx.rejects, ctx.handover, ctx.heads = items, rejects, handover, heads
    ctx.ins, ctx.seen = store_inputs(items), seen
end

-- The last step's reads of a planned batch (LED-30), to go in its reserve phase (the single
-- path's do, phases.reserve, each list chunked at the stores' bound): -> the pinned
-- accounts' ids and the pairs whose balances the chain needs (a consumed posting's pair is
-- the one the plan saw: a posting never changes account or asset), or nil for a batch
-- that pins nothing.
-- The accounts the transfers of items pin, each once, in order.
local function pinned(items)
    local ids, seen = {}, {}
    for _, it in ipairs(items) do
        for _, p in ipairs(it.t.pins) do
            if not seen[p.account] then
                seen[p.account] = true
                ids[#ids + 1] = p.account
            end
        end
    end
    return ids
end

function Ledger:_last_reads(ctx)
    local ids, prs, pseen = pinned(ctx.items), {}, {}
    for _, it in ipairs(ctx.items) do
        for _, pr in ipairs(it.prs) do
            local k = pr.account .. asset_key(pr.asset)
            if not pseen[k] then
                pseen[k] = true
                -- (a pair of the core's plan may be its delta's table: only the pair goes
                -- to the store's phase)
                prs[#prs + 1] = { account = pr.account, asset = pr.asset }
            end
        end
    end
    if #ids == 0 then return nil end
    return ids, prs
end

-- The last step's reads: -> accts (by id), the reserved postings, the balances by pair key
-- (nil: read after the chain's pairs are known). pre: what the reserve phase read
-- (phases.reserve with the pairs of _last_reads), its accounts remembered (LED-63) as a
-- read of the store's.
function Ledger:_revalidate_reads(ctx, pre)
    if pre then
        local bal = {}
        for i, pr in ipairs(pre.prs) do bal[pr.account .. asset_key(pr.asset)] = pre.bals[i] end
        for id, a in pairs(pre.accts) do self:_remember_account(id, a) end
        self.stats.last_reads_in_reserve = (self.stats.last_reads_in_reserve or 0) + 1
        return pre.accts, pre.consumed, bal
    end
    local ids = pinned(ctx.items)
    local rids = {}
    for i, x in ipairs(store_inputs(ctx.items)) do rids[i] = x.id end
    -- the accounts and the reserved postings at once (LED-62); the balances need the
    -- postings' pairs
    local accts, got = pinned_at_once(self, ids, rids)
    return accts, got, nil
end

-- The posting ref names when it is an output of an earlier transfer of this batch (mine:
-- tid -> position, before: the spender's), else nil: made for a chained spend only, not
-- for every output of the batch.
local function made_by(items, mine, ref, before)
    local j = mine[ref.transfer_id]
    if not j or j >= before or ref.index >= #items[j].t.outputs then return nil end
    return ledger.output_posting(items[j].t, items[j].tid, ref.index + 1)
end

local function same_account(a, b)
    return a == b or (b ~= nil and a.version == b.version and a.status == b.status
                      and a.policy == b.policy and a.floor == b.floor)
end

local function same_posting(a, b)
    return a == b or (b ~= nil and a.account == b.account and a.amount == b.amount
                      and a.asset.code == b.asset.code and a.asset.scale == b.asset.scale)
end

-- True when the last step's reads give every validation of the chain the inputs the plan's
-- gave it: each pair's balance where the plan started it, each pinned account as the plan
-- saw it (version, status, policy, floor), each consumed posting the one the plan picked
-- (a non-inactive status validates alike). validate_and_plan is a function of its inputs,
-- so the chain would validate again to the same plans, ids included: the second run of
-- the core over them is skipped (issue 25). Anything that moved: false, and the chain is
-- validated again in full.
local function same_inputs(ctx, items, accts, bal, prs)
    local seen = ctx.seen
    if not seen then return false end
    for _, pr in ipairs(prs) do
        local k = pr.account .. asset_key(pr.asset)
        local v = seen.bal[k]
        if v == nil or bal[k] ~= v then return false end
    end
    for id, a in pairs(seen.accts) do
        if not same_account(a, accts[id]) then return false end
    end
    for _, it in ipairs(items) do
        for i, ref in ipairs(it.t.inputs) do
            if not same_posting(it.consumed[i], seen.posts[pkey(ref)]) then return false end
        end
    end
    return true
end

-- The last step before the point of no return (LED-30, for the whole chain): accounts, the
-- reserved store postings and balances read again (pre: read by the reserve phase); each
-- transfer validated in order against them, a later one seeing the earlier ones' effects.
-- true, or false (re-plan: the state moved), or false, err (a reserved posting is not ours:
-- a bug); and the accounts read (the finalize's limits: phases.batch_limits).
function Ledger:_revalidate_batch(ctx, pre)
    local items = ctx.items
    if #items == 0 then return true end
    local accts, got, bal = self:_revalidate_reads(ctx, pre)
    local rows, prs, pseen = {}, {}, {}
    for _, p in ipairs(got) do
        if p.status ~= "pending_inactive" or p.reservation ~= ctx.sid then
            return false, "a reserved posting is not ours any more"
        end
        rows[pkey(p.id)] = p
    end
    local mine = {}
    for j, it in ipairs(items) do mine[it.tid] = j end
    for j, it in ipairs(items) do
        local consumed = {}
        for i, ref in ipairs(it.t.inputs) do
            local p = rows[pkey(ref)] or made_by(items, mine, ref, j)
            if not p then return false end -- lost: re-plan (never happens with ours held)
            consumed[i] = p
        end
        it.consumed = consumed
        for _, pr in ipairs(pairs_of(it.t, consumed)) do
            local k = pr.account .. asset_key(pr.asset)
            if not pseen[k] then
                pseen[k] = true
                prs[#prs + 1] = pr
                if bal and bal[k] == nil then bal = nil end -- not read with the phase
            end
        end
    end
    if not bal then
        bal = {}
        got = self:_list_read("get_balances", prs, BATCH_IDS)
        for i, pr in ipairs(prs) do bal[pr.account .. asset_key(pr.asset)] = got[i] end
    end
    if not self.check and same_inputs(ctx, items, accts, bal, prs) then
        self.stats.last_step_unchanged = (self.stats.last_step_unchanged or 0) + 1
        return true, nil, accts
    end
    local ok, err = self:_validate_chain(items, accts, bal)
    return ok, err, accts
end

-- Each transfer of items validated in order against accts and the balances chain (by pair
-- key), a later one seeing the earlier ones' effects: true, or false, or false, err.
function Ledger:_validate_chain(items, accts, chain)
    for _, it in ipairs(items) do
        local balances = {}
        for i, pr in ipairs(pairs_of(it.t, it.consumed)) do
            balances[i] = { account = pr.account, asset = pr.asset,
                            amount = chain[pr.account .. asset_key(pr.asset)] }
        end
        local alist = {}
        for _, id in ipairs(it.cids) do if accts[id] then alist[#alist + 1] = accts[id] end end
        local plan, err, code = ledger.validate_and_plan(it.t, alist, it.consumed, balances)
        if self.check then self.check(it.t, alist, it.consumed, balances, plan, err, code) end
        if not plan then return false end
        if plan.transfer_id ~= it.tid then return false, "a planned transfer changed its id" end
        it.deltas = plan.deltas -- (the finalize's limits, phases.batch_limits)
        for _, d in ipairs(plan.deltas) do chain[d.account .. asset_key(d.asset)] = d.after end
    end
    return true
end

_M.methods = Ledger
return _M
