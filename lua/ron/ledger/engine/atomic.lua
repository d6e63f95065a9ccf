-- ron.ledger.engine.atomic: the one-transaction commit (LED-72, issue 25 "Fewer round
-- trips"): an uncontended single commit in TWO store calls instead of three phases, or ONE
-- when the plan cache (LED-73, ron.ledger.engine.plan_cache) remembers what the plan needs:
-- the plan is then made from it, and step 1 is skipped; a guard that misses on a plan from
-- the cache forgets what it used and the commit takes the two calls below.
--
--   1. read     the prior outcome and the view's reads (ron.ledger.view): one read-only phase
--   (resolve and validate in memory, over the view: the saga's early look)
--   2. commit   ONE phase: the claim; the inputs reserved (expect #inputs) and the capped
--               pairs' heads taken (expect 1 each); the GUARDS: every pinned account still at
--               its pinned version (count_accounts_at, expect #pins) and every pair the
--               transfer lowers, unless uncapped, still at a balance of at least its floor
--               plus what the transfer takes from it (count_balances_at_least), and every
--               pair it raises still at most 2^63 - 1 minus what the transfer adds to it
--               (count_balances_at_most: another writer may have raised it); then the
--               saga's finalize (ron.ledger.phases: inputs consumed, outputs, the transfer,
--               the outcome, the heads released, the event); flushed in the same call.
--
-- Why this is the saga's last validation, atomically: validate_and_plan depends on the
-- state through the accounts (pins, status, policy, floor: one version each), the consumed
-- postings (their content is fixed by their id; the reservation's count says they are
-- still Active) and the balances, of which only the floor check of a pair that goes down
-- reads them, monotonically: `before + net >= floor` <=> `balance >= floor - net`, and the
-- overflow check of a pair that goes up: `before + net <= MAX` <=> `balance <= MAX - net`. So the
-- guards hold exactly when the last validation on the state they read would pass, and they
-- run after the inputs and heads are taken, inside the transaction that writes: the check
-- is folded into the write (the seed's "CAS"), where the saga's re-read leaves a window
-- between its last validation and its finalize.
--
-- Crash safety: the commit is one transaction, so a crash leaves all of it or nothing (no
-- saga record, no reservation, no head: nothing for recover()). A guard that misses applies
-- nothing, and the commit goes the saga's way (ron.ledger.engine.saga: open, reserve, last
-- validation, finalize or reject), as does anything that is not the plain case: a
-- rejection, a race in resolve, a reversal, a store failure's "maybe" that did not commit.
local ledger = require("ron.ledger")
local phases = require("ron.ledger.phases")
local resolve = require("ron.ledger.engine.resolve")
local view = require("ron.ledger.view")
local PC = require("ron.ledger.engine.plan_cache")
local ffi = require("ffi")

local ipairs = ipairs

local _M = {}

local I64 = ffi.typeof("int64_t")
local EVENT_KIND = phases.EVENT_KIND
local complete, heads_of, list_accounts, pairs_of =
      resolve.complete, resolve.heads_of, resolve.list_accounts, resolve.pairs_of

-- The guards' lists: the pins at their versions; the pairs the plan lowers with the least
-- balance each may have now (floor + before - after, the floor check of validate_and_plan
-- rearranged; an uncapped pair's floor is -2^63: phases.limits); the pairs it raises with
-- the most balance each may have now (phases.limits).
local function guards(t, accts, plan)
    local at = {}
    for i, p in ipairs(t.pins) do at[i] = { id = p.account, version = p.version } end
    local lim = phases.limits(plan.deltas, accts) -- the ceilings, the uncapped pairs' floors
    local mins = lim.mins
    for _, d in ipairs(plan.deltas) do
        local a = accts[d.account]
        if a.policy ~= "uncapped" and d.after < d.before then
            mins[#mins + 1] = { account = d.account, asset = d.asset,
                                min = I64(a.floor or 0) + I64(d.before) - I64(d.after) }
        end
    end
    return at, lim
end

local function commit_ops(led, ctx, at, bounds)
    local req, sid = ctx.req, ctx.sid
    local ops = {
        { "put_intent", phases.CLAIM_PREFIX .. req.intent,
          { status = "claimed", message = sid, body_hash = req.body_hash }, expect = 1 },
    }
    for _, c in ipairs(phases.slices(ctx.t.inputs, phases.BATCH_IDS)) do
        ops[#ops + 1] = { "reserve_postings", c, sid, expect = #c }
    end
    for _, h in ipairs(ctx.heads) do
        ops[#ops + 1] = { "ensure_head", h.account, h.asset }
        ops[#ops + 1] = { "acquire_head", h.account, h.asset, sid, expect = 1 }
    end
    ops[#ops + 1] = { "count_accounts_at", at, expect = #at }
    local mins, maxs = bounds.mins, bounds.maxs
    if #mins > 0 then ops[#ops + 1] = { "count_balances_at_least", mins, expect = #mins } end
    if #maxs > 0 then ops[#ops + 1] = { "count_balances_at_most", maxs, expect = #maxs } end
    -- the finalize's ops, but for the record's deletion (there is none)
    for _, op in ipairs(phases.finalize_ops(led, ctx)) do
        if op[1] ~= "delete_saga" then ops[#ops + 1] = op end
        if op[1] == "insert_postings" then ctx.outs = op[2] end -- (for the plan cache)
    end
    return ops
end

-- The plan over a view's source src (a read's, or the plan cache's): -> true and the
-- guards' lists, ctx planned (ctx.t, ctx.tid, ctx.tbytes, ctx.heads, ctx.ids; ctx.consumed,
-- ctx.outs, ctx.plan for the cache), or false (a rejection or a race: not this way).
local function plan_from(led, ctx, src, cached)
    local req = ctx.req
    if cached then
        led.stats.cached_resolves = (led.stats.cached_resolves or 0) + 1
    else
        led.stats.resolves = led.stats.resolves + 1
    end
    local t, consumed, accts = led:_resolve_commit(req, src)
    if not t then return false end -- a rejection or a race: the saga stores or retries it
    ctx.ids = complete(t, consumed, accts)
    local alist, prs = list_accounts(ctx.ids, accts), pairs_of(t, consumed)
    local bals = led:_balances(prs, src)
    local p, err, code = ledger.validate_and_plan(t, alist, consumed, bals, true)
    if led.check then -- (the hook sees a plan as the last step's: without the bytes)
        led.check(t, alist, consumed, bals, p and { transfer_id = p.transfer_id,
                                                    deltas = p.deltas }, err, code)
    end
    if not p then return false end
    ctx.t, ctx.tid, ctx.tbytes = t, p.transfer_id, p.bytes
    ctx.heads = heads_of(t, consumed, accts)
    ctx.consumed, ctx.plan = consumed, p
    return true, guards(t, accts, p)
end

-- The read and the plan: -> true, the prior outcome's answer values, or false (the saga's
-- way), or nil, the guards' lists and the read's source.
local function read_plan(led, ctx, r)
    local req = ctx.req
    local ops = { { "get_intent", req.intent } }
    for _, op in ipairs(view.read_ops(r)) do ops[#ops + 1] = op end
    local res = phases.apply(led, ops)
    local prior = res[1][1]
    if prior then return true, { led:_outcome(req, prior) } end
    local src = view.source(led, r, view.answers(r, ops, res, 2))
    local ok, at, bounds = plan_from(led, ctx, src)
    if not ok then return false end
    return nil, at, bounds, src
end

local function unplan(ctx)
    ctx.t, ctx.tbytes, ctx.tid, ctx.heads, ctx.ids = nil, nil, nil, nil, nil
    ctx.consumed, ctx.outs, ctx.plan = nil, nil, nil
end

-- The commit phase of ctx's plan: -> { answer values }, "ok" | "maybe" (an earlier attempt
-- of the phase committed, its reply lost), or false (nothing of it applied).
local function attempt(led, ctx, at, bounds)
    local ops = commit_ops(led, ctx, at, bounds)
    local flush = led.flush_on_ack
    local res, maybe = phases.apply(led, ops, { flush = flush, keep_cache = true })
    if res.ok then
        led.stats.one_tx = (led.stats.one_tx or 0) + 1
        return { led:_committed(ctx, res[#ops][1], flush and res.flushed) }, "ok"
    end
    if maybe then
        -- an earlier attempt may have committed, its reply lost: then this one missed its
        -- claim, and the intent holds our transfer
        local cur = led:_read("get_intent", ctx.req.intent)
        if cur and cur.status == "committed" and cur.transfer_id == ctx.tid then
            local ev = led:_read("get_event", led.book, ctx.tid, EVENT_KIND)
            if ev then return { led:_committed(ctx, ev, false) }, "maybe" end
        end
    end
    return false
end

-- The plan cache's try (LED-73): a plan made without reading, committed in one call.
-- -> the answer values, or nil (not from the cache: read).
local function from_cache(led, c, ctx, r)
    local src = PC.source(led, c, r)
    if not src then return nil end
    local e0 = c.epoch
    local ok, at, bounds = plan_from(led, ctx, src, true)
    if ok then
        local ans, how = attempt(led, ctx, at, bounds)
        if ans then
            if how == "ok" then PC.committed(c, ctx, e0) else PC.forget(c, ctx) end
            led.stats.one_tx_cached = (led.stats.one_tx_cached or 0) + 1
            return ans
        end
        PC.forget(c, ctx, led) -- a guard missed: something it remembered moved
    end
    led.stats.one_tx_cache_missed = (led.stats.one_tx_cache_missed or 0) + 1
    unplan(ctx)
    return nil
end

-- One commit in one call (the plan cache's) or two (a read, then the commit). -> false
-- (nothing of it applied: the caller drives the saga), or the commit's answer values.
function _M.commit(led, ctx, r)
    local c = PC.of(led)
    if c then
        local ans = from_cache(led, c, ctx, r)
        if ans then return unpack(ans, 1, table.maxn(ans)) end
    end
    local e0 = c and c.epoch
    local done, at, bounds, src = read_plan(led, ctx, r)
    if done then return unpack(at, 1, table.maxn(at)) end
    if done == false then return false end
    local ans, how = attempt(led, ctx, at, bounds)
    if not ans then
        led.stats.one_tx_missed = (led.stats.one_tx_missed or 0) + 1
        unplan(ctx)
        return false
    end
    if c then
        if how == "ok" and c.epoch == e0 then
            PC.fill(led, c, r, src)
            PC.committed(c, ctx, e0)
        else
            PC.forget(c, ctx)
        end
    end
    return unpack(ans, 1, table.maxn(ans))
end

return _M
