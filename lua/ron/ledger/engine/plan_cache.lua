-- ron.ledger.engine.plan_cache: what the one-transaction commit last saw of the pairs it
-- planned (LED-73, issue 25 "one Ledger:commit ... p50 <= 3 ms"): each payer pair's largest
-- Active postings and every pair's balance, so an uncontended commit plans without reading
-- and makes ONE store call (ron.ledger.engine.atomic). The accounts come from the engine's
-- account cache (LED-63, Ledger:_cached_accounts).
--
-- Nothing here decides anything on its own: a plan made from the cache commits only through
-- the one-transaction commit's guards (LED-72: the inputs still Active, the pins at their
-- versions, the lowered pairs above their floors, the intent unclaimed), which hold exactly
-- when the last validation on the current state passes; a stale entry makes a guard miss,
-- the phase applies nothing, the entries the plan used are forgotten and the commit reads
-- and plans again. A plan from the cache that does not simply commit (a payer its known
-- postings do not cover, a rejection) is never acted on: the commit reads instead, so no
-- rejection and no race is ever decided on remembered state.
--
-- What an entry holds (a pair's key: account .. asset_key):
--   pools[key] = { list = its Active postings, largest first (selection's order), as far
--                  as known: the |list| largest of the pair's; complete = true when there
--                  are no others }
--   bal[key]   = its balance
-- Kept exact across this engine's own one-transaction commits (their inputs removed, their
-- outputs inserted where the order says they belong, the balances set to the plan's
-- `after`), but only when no other of its commits landed between the read or plan and the
-- commit (the epoch); any other write of postings by this engine (the saga, a batch,
-- recovery) empties it (Ledger:_plan_cache_clear, called by ron.ledger.phases.apply and
-- Ledger:_p). Writers elsewhere (another engine, another process) are found by the guards.
-- Bounded: `plan_cache` entries (pools and balances), then emptied and refilled.
local view = require("ron.ledger.view")

local ipairs, min, remove = ipairs, math.min, table.remove

local _M = {}

local FIRST_PAGE = view.FIRST_PAGE
local asset_key, less, insert_sorted = view.asset_key, view.largest_less, view.insert_sorted

-- The primitives that change a pair's postings (so its balance): another writer of this
-- engine empties the cache.
_M.POSTING_WRITES = { insert_postings = true, deactivate_postings = true,
                      deactivate_many = true, reserve_postings = true,
                      release_postings = true }

function _M.new(cap)
    return { pools = {}, bal = {}, n = 0, cap = cap, epoch = 0 }
end

-- The engine's cache (made on first use), or nil when it has none (plan_cache = 0).
function _M.of(led)
    local c = led.pcache
    if c then return c end
    if (led.plan_cache or 0) <= 0 then return nil end
    c = _M.new(led.plan_cache)
    led.pcache = c
    return c
end

-- Another writer of postings in this engine (ops: a phase's, or { { name } }): the cache
-- emptied when any op changes postings.
function _M.note_writes(led, ops)
    local c = led.pcache
    if not c then return end
    for _, op in ipairs(ops) do
        if _M.POSTING_WRITES[op[1]] then return _M.clear(c) end
    end
end

function _M.clear(c)
    c.pools, c.bal, c.n, c.epoch = {}, {}, 0, c.epoch + 1
end

local function room(c)
    if c.n >= c.cap then _M.clear(c) end
    c.n = c.n + 1
end

local function key_of(p) return p.account .. asset_key(p.asset) end

-- A payer's probe as the view's source reads it: "held" (ron.ledger.view), when the list may
-- miss some of the pair's positive postings: a short payer is then a race for resolve (false,
-- not a rejection), which sends the commit to the read. A list that holds every positive
-- posting (complete, or its last <= 0: largest first) probes as nothing held: a capped or
-- uncapped payer (or one with a receivable) short of postings is planned with its negative
-- output, which the floors' guard checks (the heads keep a saga's reservation and this
-- commit apart).
local HELD, NONE = { { reservation = "(the plan cache)" } }, {}
local function probe(pool)
    local l = pool.list
    if pool.complete or (#l > 0 and l[#l].amount <= 0) then return NONE end
    return HELD
end

-- The view's source (ron.ledger.view) over the cache for r (view.wants), or nil when it
-- lacks an account, a payer's postings or a balance r needs.
function _M.source(led, c, r)
    local accts, want = led:_cached_accounts(r.ids, true)
    if #want > 0 then return nil end
    local lists, balances = {}, {}
    for k, p in ipairs(r.payers) do
        local pool = c.pools[p.key]
        if not pool then return nil end
        local l = {}
        for i, x in ipairs(pool.list) do l[i] = x end
        lists[2 * k - 1], lists[2 * k] = l, probe(pool)
    end
    for i, pr in ipairs(r.bpairs) do
        local v = c.bal[key_of(pr)]
        if v == nil then return nil end
        balances[i] = v
    end
    -- deep: a page is never read again from the store; no saga's record is read (a saga
    -- past its point of no return is an older binary's, and its credit is not needed)
    local src = view.source(led, r, accts, lists, balances, true)
    src.finalizing = NONE
    return src
end

-- What a read saw (src, the view's source of r; ids its accounts), remembered.
function _M.fill(led, c, r, src)
    for _, id in ipairs(r.ids) do
        local a = src.accts[id]
        if a then led:_remember_account(id, a) end
    end
    for _, p in ipairs(r.payers) do
        local l = p.list or {}
        local limit = p.deep and view.SELECT_LIMIT or FIRST_PAGE
        local list = {}
        for i = 1, min(#l, FIRST_PAGE) do list[i] = l[i] end
        if not c.pools[p.key] then room(c) end
        c.pools[p.key] = { list = list, complete = #l < limit and #l <= FIRST_PAGE }
    end
    for _, pr in ipairs(r.bpairs) do
        local k = key_of(pr)
        local v = src.bal[k]
        if v ~= nil then
            if c.bal[k] == nil then room(c) end
            c.bal[k] = v
        end
    end
end

-- A pool's list without the posting of id.
local function drop(list, id)
    for i, x in ipairs(list) do
        if x.id.index == id.index and x.id.transfer_id == id.transfer_id then
            remove(list, i)
            return
        end
    end
end

-- An output of ours into its pair's known list: where the order puts it, when that is
-- within what is known (a complete list, or before its last known posting).
local function add(pool, o)
    local list = pool.list
    local n = #list
    if not (pool.complete or (n > 0 and less(o, list[n]))) then return end
    insert_sorted(list, o, n + 1, less)
    if #list > FIRST_PAGE then
        list[#list] = nil
        pool.complete = false
    end
end

-- ctx's transfer committed (ctx.consumed, ctx.outs, ctx.plan): its effects on the entries,
-- when nothing else of this engine landed since e0 (else its pairs are forgotten).
function _M.committed(c, ctx, e0)
    if c.epoch ~= e0 then return _M.forget(c, ctx) end
    for _, p in ipairs(ctx.consumed) do
        local pool = c.pools[key_of(p)]
        if pool then drop(pool.list, p.id) end
    end
    for _, o in ipairs(ctx.outs or {}) do
        local pool = c.pools[key_of(o)]
        if pool then add(pool, o) end
    end
    for _, d in ipairs(ctx.plan.deltas) do
        local k = key_of(d)
        if c.bal[k] == nil then room(c) end
        c.bal[k] = d.after
    end
    c.epoch = c.epoch + 1
end

-- The entries ctx's plan used (its pairs), forgotten; with its accounts when led is given.
function _M.forget(c, ctx, led)
    for _, p in ipairs(ctx.consumed or {}) do c.pools[key_of(p)] = nil end
    for _, d in ipairs(ctx.plan and ctx.plan.deltas or {}) do
        local k = key_of(d)
        c.pools[k], c.bal[k] = nil, nil
    end
    if led then
        for _, id in ipairs(ctx.ids or {}) do led:_forget_account(id) end
    end
    c.epoch = c.epoch + 1
end

_M.key_of = key_of
return _M
