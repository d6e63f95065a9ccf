-- ron.ledger.engine.batch_plan: the batch path's plan, in memory over one read of each kind,
-- and its last-step validation of the whole chain (LED-52, LED-54).
-- A concern of the engine ron.ledger.ledger, which installs the methods below
-- (_M.methods) on its one Ledger class.
local ledger = require "ron.ledger"
local base = require "ron.ledger.engine.base"
local batch = require "ron.ledger.engine.batch"
local phases = require "ron.ledger.phases"
local resolve = require "ron.ledger.engine.resolve"
local view = require "ron.ledger.view"

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
function Ledger:_plan_reads(ctx, r)
    local accts, res, got, cached
    if not self.overlap then
        local want
        accts, want, cached = self:_cached_accounts(r.ids, not ctx.fresh)
        local rr = setmetatable({ ids = want }, { __index = r })
        local ops = view.read_ops(rr)
        if #ops == 0 then return accts, {}, {}, cached end
        local read
        read, res, got = view.answers(rr, ops, phases.apply(self, ops), 1)
        self.stats.plan_reads_phase = (self.stats.plan_reads_phase or 0) + 1
        for id, a in pairs(read) do
            accts[id] = a
            self:_remember_account(id, a)
        end
        return accts, res, got, cached
    end
    self:_read_at_once(function() accts, cached = self:_accounts_of(r.ids, not ctx.fresh) end,
                       function() res = self:_list_read("get_postings_by_pairs", r.qs,
                                                        BATCH_QUERIES) end,
                       function() got = self:_list_read("get_balances", r.bpairs, BATCH_IDS) end)
    return accts, res, got, cached
end

-- Reads once, then resolves and validates the members in order over the in-memory view.
-- Sets ctx.items (the transfers, in order), ctx.rejects, ctx.handover, ctx.heads.
function Ledger:_plan_batch(ctx)
    local reqs = {}
    for i, e in ipairs(ctx.batch) do reqs[i] = e.req end
    local r = view.wants(reqs)
    local payers = r.payers
    local accts, res, got, cached = self:_plan_reads(ctx, r)
    local src = view.source(self, r, accts, res, got, true)
    local more = {}
    for _, p in ipairs(payers) do
        -- the single path's second page, read up front for a pair whose first page may not
        -- hold all its positive postings (the plan moves the lists as it goes)
        if #p.list == FIRST_PAGE and p.list[FIRST_PAGE].amount > 0 then
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
    local items, rejects, handover, heads, hseen = {}, {}, {}, {}, {}
    for _, e in ipairs(ctx.batch) do
        local k = e.k
        local t, consumed, a3 = self:_resolve_commit(e.req, src)
        if t == nil then
            rejects[#rejects + 1] = { k = k, e = e, err = consumed, code = a3 }
        elseif t == false then
            handover[#handover + 1] = { k = k, e = e }
        else
            local cids = complete(t, consumed, a3)
            local prs = pairs_of(t, consumed)
            local balances = {}
            for i, pr in ipairs(prs) do
                balances[i] = { account = pr.account, asset = pr.asset,
                                amount = bal[pr.account .. asset_key(pr.asset)] or 0 }
            end
            local plan, err, code = ledger.validate_and_plan(t, list_accounts(cids, a3),
                                                             consumed, balances, true)
            if not plan and RACE[code] then
                handover[#handover + 1] = { k = k, e = e }
            elseif not plan then
                rejects[#rejects + 1] = { k = k, e = e, err = err, code = code }
            else
                -- the view moves on: balances, the payers' postings
                for _, d in ipairs(plan.deltas) do
                    bal[d.account .. asset_key(d.asset)] = d.after
                end
                local gone, touched = {}, {}
                for _, p in ipairs(consumed) do
                    gone[pkey(p.id)] = true
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
                for i = 1, #t.outputs do
                    local o = ledger.output_posting(t, tid, i)
                    local pool = pidx[o.account .. asset_key(o.asset)]
                    if pool then
                        local l = pool.list
                        local j = #l + 1
                        while j > 1 and view.largest_less(o, l[j - 1]) do
                            l[j] = l[j - 1]
                            j = j - 1
                        end
                        l[j] = o
                    end
                end
                items[#items + 1] = { k = k, e = e, t = t, tid = tid, cids = cids,
                                      tbytes = plan.bytes, prs = prs }
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
    end
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
    ctx.ins = store_inputs(items)
end

-- The last step's reads of a planned batch (LED-30), to go in its reserve phase (the single
-- path's do, phases.reserve): -> the pinned accounts' ids and the pairs whose balances the
-- chain needs (a consumed posting's pair is the one the plan saw: a posting never changes
-- account or asset), or nil when a list is over the stores' bound per call (the last step
-- then reads them itself, chunked).
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
                prs[#prs + 1] = pr
            end
        end
    end
    if #ids == 0 or #ids > BATCH_IDS or #prs > BATCH_IDS or #ctx.ins > BATCH_IDS then
        return nil
    end
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
    local accts, got
    -- the accounts and the reserved postings at once (LED-62); the balances need the
    -- postings' pairs
    self:_read_at_once(function() accts = self:_accounts_of(ids) end,
                       function() got = self:_list_read("get_postings", rids, BATCH_IDS) end)
    return accts, got, nil
end

-- The last step before the point of no return (LED-30, for the whole chain): accounts, the
-- reserved store postings and balances read again (pre: read by the reserve phase); each
-- transfer validated in order against them, a later one seeing the earlier ones' effects.
-- true, or false (re-plan: the state moved), or false, err (a reserved posting is not ours:
-- a bug).
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
    local made = {}
    for _, it in ipairs(items) do
        local consumed = {}
        for i, ref in ipairs(it.t.inputs) do
            local p = rows[pkey(ref)] or made[pkey(ref)]
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
        for i = 1, #it.t.outputs do
            local o = ledger.output_posting(it.t, it.tid, i)
            made[pkey(o.id)] = o
        end
    end
    if not bal then
        bal = {}
        got = self:_list_read("get_balances", prs, BATCH_IDS)
        for i, pr in ipairs(prs) do bal[pr.account .. asset_key(pr.asset)] = got[i] end
    end
    return self:_validate_chain(items, accts, bal)
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
        for _, d in ipairs(plan.deltas) do chain[d.account .. asset_key(d.asset)] = d.after end
    end
    return true
end

_M.methods = Ledger
return _M
