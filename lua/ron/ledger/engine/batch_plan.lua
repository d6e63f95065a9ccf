-- ron.ledger.engine.batch_plan: the batch path's plan, in memory over one read of each kind,
-- and its last-step validation of the whole chain (LED-52, LED-54).
-- A concern of the engine ron.ledger.ledger, which installs the methods below
-- (_M.methods) on its one Ledger class.
local ledger = require "ron.ledger"
local base = require "ron.ledger.engine.base"
local batch = require "ron.ledger.engine.batch"
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

-- Reads once, then resolves and validates the members in order over the in-memory view.
-- Sets ctx.items (the transfers, in order), ctx.rejects, ctx.handover, ctx.heads.
function Ledger:_plan_batch(ctx)
    local reqs = {}
    for i, e in ipairs(ctx.batch) do reqs[i] = e.req end
    local r = view.wants(reqs)
    local ids, qs, payers = r.ids, r.qs, r.payers
    -- the plan's three reads at once (reads only, none needs another's answer: LED-62)
    local accts, res, got, cached
    self:_read_at_once(function() accts, cached = self:_accounts_of(ids, not ctx.fresh) end,
                       function() res = self:_list_read("get_postings_by_pairs", qs,
                                                        BATCH_QUERIES) end,
                       function() got = self:_list_read("get_balances", r.bpairs, BATCH_IDS) end)
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
                                      tbytes = plan.bytes }
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

-- The last step before the point of no return (LED-30, for the whole chain): accounts, the
-- reserved store postings and balances read again; each transfer validated in order
-- against them, a later one seeing the earlier ones' effects. true, or false (re-plan: the
-- state moved), or false, err (a reserved posting is not ours: a bug).
function Ledger:_revalidate_batch(ctx)
    local items = ctx.items
    if #items == 0 then return true end
    local ids, seen, prs, pseen = {}, {}, {}, {}
    for _, it in ipairs(items) do
        for _, p in ipairs(it.t.pins) do
            if not seen[p.account] then
                seen[p.account] = true
                ids[#ids + 1] = p.account
            end
        end
    end
    local ins = store_inputs(items)
    local rids = {}
    for i, x in ipairs(ins) do rids[i] = x.id end
    local rows, accts, got = {}, nil, nil
    -- the accounts and the reserved postings at once (LED-62); the balances need the
    -- postings' pairs
    self:_read_at_once(function() accts = self:_accounts_of(ids) end,
                       function() got = self:_list_read("get_postings", rids, BATCH_IDS) end)
    for _, p in ipairs(got) do
        if p.status ~= "pending_inactive" or p.reservation ~= ctx.sid then
            return false, "a reserved posting is not ours any more"
        end
        rows[pkey(p.id)] = p
    end
    local made = {}
    local chain = {}
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
            end
        end
        for i = 1, #it.t.outputs do
            local o = ledger.output_posting(it.t, it.tid, i)
            made[pkey(o.id)] = o
        end
    end
    got = self:_list_read("get_balances", prs, BATCH_IDS)
    for i, pr in ipairs(prs) do chain[pr.account .. asset_key(pr.asset)] = got[i] end
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
