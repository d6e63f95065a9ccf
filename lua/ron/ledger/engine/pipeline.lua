-- ron.ledger.engine.pipeline: two batches of one caller in flight at once (issue 25, the
-- wallet's lanes): batch B is read and planned while batch A's one-transaction phase runs
-- in the store, on the state A's plan leaves, and its phase goes to the store only once
-- A's commit_many has ended with that plan applied as it was made.
--
--   local tok = {}                                         -- the caller's, one per batch
--   led:commit_many(reqs_a, { pending = tok_a })
--   led:commit_many(reqs_b, { after = tok_a, pending = tok_b })   -- in another task
--
-- What A leaves (tok.items: A's planned transfers, set just before its phase is sent; tok.landed:
-- that phase committed as planned; tok.done: A's commit_many ended) is used by B's plan when
-- B's reads began while A was not done (reads that began during A's phase may predate its
-- commit, however late they return: if A ended released, B's view still moves to A's plan;
-- if A ended otherwise, B reads again), and only through the rules below, so that B's
-- answers are exactly those of committing B's requests one by one after A's:
--   * B's view of each pair A moves: its balance is A's last `after` of it; each payer list
--     loses the postings A consumes and gains A's outputs still Active at A's end, in
--     selection order; each edit is a set (a posting already there, or gone, stays so),
--     so B's reads may see the store before or after A's commit (the reader runs beside the
--     writer) and the view is the same;
--   * only where B read every Active posting of that payer pair (fewer than a first page):
--     a list cut at the page, edited, need not be the pair's largest any more;
--   * a plan made so is sent only when A landed (tok.landed) and handed nothing over and
--     rejected nothing (a rejection is stored unguarded, so it is never decided on a state
--     that is not yet the store's; the plan cache's rule, LED-72): else B waits for A and
--     plans again from the store;
--   * it is sent once A is released (tok.released: A's phase committed as planned and
--     nothing of A commits after it, so A's members are all decided; set before A's
--     results are made) or ended: the store's writer goes from A's phase to B's without
--     the loop's work for A's results and its caller's answers in between;
--   * B's phase carries the one-transaction batch's guards as ever (its inputs Active, the
--     pins, the floors): another writer between A and B makes them miss, and B goes the
--     saga's way, planned again.
-- A's commit_many that raised, or went the saga's way, never sets landed: B plans again.
-- A caller whose own work after A's commit_many must come before B's commit (the wallet's
-- fallbacks and hand-backs: a payer's requests in arrival order) sets tok.hold = true before
-- A's commit_many and calls pipeline.done(tok) itself once that work ended (always). A
-- released batch leaves no such work: every member is committed, rejected or replayed.
-- Depth two: the caller starts B's successor only once A is done (B's reads might else
-- predate A's commit, which B's view only covers through A's own token).
local task = require("ron.base.task")
local ledger = require("ron.ledger")
local view = require("ron.ledger.view")

local ipairs, pairs, tostring = ipairs, pairs, tostring

local _M = {}

local FIRST_PAGE = view.FIRST_PAGE
local asset_key, insert_sorted, less = view.asset_key, view.insert_sorted, view.largest_less

-- Waits on tok's list (tok.waiters: for its end; tok.rwaiters: for its release or end)
-- until over(tok) holds.
local function wait_on(tok, list, over)
    if tok == nil or over(tok) then return end
    local ch = task.channel(1, "ledger_pipeline")
    tok[list] = tok[list] or {}
    tok[list][#tok[list] + 1] = ch
    while not over(tok) do
        local v, err = ch:recv_through_shutdown()
        if v == nil and err ~= nil and not over(tok) then
            error({ ledger_store_failure = true, name = "pipeline", class = "retry",
                    err = "the wait for the batch before this one ended: " .. tostring(err) }, 0)
        end
    end
end

local function ended(tok) return tok.done end
local function released(tok) return tok.done or tok.released end

-- Waits until tok's batch ended (its commit_many returned or raised).
function _M.wait(tok) wait_on(tok, "waiters", ended) end

-- tok's batch ended: its waiters go on.
function _M.done(tok)
    if tok == nil or tok.done then return end
    tok.done = true
    for _, ch in ipairs(tok.waiters or {}) do ch:try_send(true) end
    for _, ch in ipairs(tok.rwaiters or {}) do ch:try_send(true) end
    tok.waiters, tok.rwaiters = nil, nil
end

-- How long A gives the loop to B, at most, once released (B acks as its phase goes).
_M.RELEASE_WAIT_MS = 20

-- A's phase committed as planned and nothing of A is left to commit after it (no member
-- handed over, none to run one by one after the batch): B's phase may go now, before A's
-- results and its caller's answers are made, so the store's writer goes from A's phase to
-- B's without waiting for the loop's work between them. A waiting B is woken and given the
-- loop until its phase is on its way (_M.ack), at most RELEASE_WAIT_MS.
function _M.release(tok)
    if tok == nil or tok.done or tok.released then return end
    tok.released = true
    local ws = tok.rwaiters
    tok.rwaiters = nil
    if ws == nil then return end
    local ack = task.channel(1, "ledger_pipeline_ack")
    tok.ack = ack
    for _, ch in ipairs(ws) do ch:try_send(true) end
    ack:recv(_M.RELEASE_WAIT_MS)
    tok.ack = nil
end

-- B's phase is on its way (or B plans again): A goes on.
function _M.ack(tok)
    local ack = tok and tok.ack
    if ack then ack:try_send(true) end
end

-- Waits until tok's batch was released (_M.release) or ended.
function _M.wait_released(tok) wait_on(tok, "rwaiters", released) end

-- tok's planned transfers while its phase is in flight, else nil.
function _M.items_of(tok)
    if tok == nil or tok.done then return nil end
    return tok.items
end

-- May a plan whose payers are pidx start from items' state? Every payer pair items move
-- must have been read whole (a list shorter than a page; see the header).
function _M.eligible(items, pidx)
    for _, it in ipairs(items) do
        for _, d in ipairs(it.deltas) do
            local p = pidx[d.account .. asset_key(d.asset)]
            if p and #p.list >= FIRST_PAGE then return false end
        end
    end
    return true
end

-- The view (bal: balance by pair key; pidx: the payer lists) moved to the state items
-- leave (the header's first rule). pkey: a posting id's key.
function _M.overlay(items, pidx, bal, pkey)
    local gone, made = {}, {}
    for _, it in ipairs(items) do
        for _, d in ipairs(it.deltas) do
            local k = d.account .. asset_key(d.asset)
            if bal[k] ~= nil then bal[k] = d.after end
        end
        for _, ref in ipairs(it.t.inputs) do gone[pkey(ref)] = true end
    end
    for _, pool in pairs(pidx) do
        local kept = {}
        for _, p in ipairs(pool.list) do
            local pk = pkey(p.id)
            if not gone[pk] and not made[pk] then
                made[pk] = true
                kept[#kept + 1] = p
            end
        end
        pool.list = kept
    end
    for _, it in ipairs(items) do
        for i, out in ipairs(it.t.outputs) do
            local pool = view.list_for_output(pidx, out)
            if pool then
                local p = ledger.output_posting(it.t, it.tid, i)
                local pk = pkey(p.id)
                if not gone[pk] and not made[pk] then
                    made[pk] = true
                    local l = pool.list
                    insert_sorted(l, p, #l + 1, less)
                end
            end
        end
    end
end

return _M
