-- ron.ledger.engine.plan_core: a batch member's resolution and validation in the core, one
-- FFI call (rl_batch_plan, ledger/batch.c, over rl_resolve_and_plan, ledger/resolve.c)
-- over the batch's view kept in the core: each pair marshalled once per batch and moved
-- by the core past each member it plans (issue 25, docs/LEDGER.md "The core's plan").
-- It answers only what the core decides: a planned transfer.
-- Anything else (a rejection, a race, a view that lacks what the decision needs) is nil,
-- and the caller decides that member the long way (Ledger:_resolve_commit and
-- ledger.validate_and_plan) over src, which stays the oracle: with M.check set, every
-- member is planned both ways and any difference raises (the batch specs run so).
--
--   local t, consumed, cids, prs, keys, plan = plan_core.plan(src, req)   -- or nil, code
--   plan_core.sync(src, req)    before req goes the long way: its pairs written back to src
--   plan_core.drop(src)         the whole view written back to src, and dropped
--   plan_core.finish(src)       the batch is planned: the view let go
--   plan_core.state(src, k)     pair k's balance and list in the view (the check)
--
-- t, consumed, plan: what _resolve_commit, complete and validate_and_plan give; cids: the
-- involved accounts (complete's order); prs: the pairs validated, keys their view keys.
local bit = require("bit")
local ffi = require("ffi")
local ledger = require("ron.ledger")
local C = require("ron.ledger.lib").namespace()
local base = require("ron.ledger.engine.base")

local ffi_new, ffi_string, pairs = ffi.new, ffi.string, pairs
local band, rshift = bit.band, bit.rshift
local posting_of -- (below)

local M = {}
M.check = os.getenv("RON_LEDGER_CORE_PLAN_CHECK") == "1" -- both ways, compared (specs)
M.enabled = os.getenv("RON_LEDGER_CORE_PLAN") ~= "0" -- (benchmarks compare both ways)

local F = ledger._ffi
local put_account, put_posting, put_asset = F.put_account, F.put_posting, F.put_asset
local from_amount = ledger.from_amount
local asset_key = base.asset_key
local FIRST_PAGE, SELECT_LIMIT = base.FIRST_PAGE, base.SELECT_LIMIT

local MAX_PAIRS = C.RL_MAX_INPUTS + C.RL_MAX_OUTPUTS
local MAX_ACCOUNTS = C.RL_SELECT_MAX
local movements = ffi_new("rl_movement_t[?]", MAX_PAIRS)
local views = ffi_new("rl_pair_view_t[?]", MAX_PAIRS)
local input = ffi_new("rl_resolve_in_t")
local out = ffi_new("rl_resolved_t")
local buf_cap = C.RL_TRANSFER_ENC_MAX
local buf = ffi_new("uint8_t[?]", buf_cap)
local len_out = ffi_new("size_t[1]")
local clear = require("table.clear")
M.stats = {} -- members planned (planned), refused (by code name)

-- The assets seen, as structs by asset_key (each checked once by rl_asset_init); bounded.
local assets, n_assets = {}, 0
local function asset_of(ak, a)
    local c = assets[ak]
    if c then return c end
    if n_assets >= 1024 then assets, n_assets = {}, 0 end
    c = ffi_new("rl_asset_t")
    put_asset(c, a, "asset")
    assets[ak], n_assets = c, n_assets + 1
    return c
end

-- The batch's accounts, marshalled once per view (src): { idx = id -> index, ids, arr, n }.
local function accounts_of(src)
    local A = src.core_accounts
    if A == nil then
        A = { idx = {}, ids = {}, n = 0, cap = 64 }
        A.arr = ffi_new("rl_account_t[?]", A.cap)
        src.core_accounts = A
    end
    return A
end

-- id's account index (0-based), marshalled on first sight; nil: not in the view.
local function account(A, accts, id)
    local i = A.idx[id]
    if i then return i end
    local a = accts[id]
    if a == nil or A.n >= MAX_ACCOUNTS then return nil end
    i = A.n
    if i == A.cap then
        local arr = ffi_new("rl_account_t[?]", 2 * A.cap)
        ffi.copy(arr, A.arr, ffi.sizeof("rl_account_t") * A.cap)
        A.arr, A.cap = arr, 2 * A.cap
    end
    put_account(A.arr[i], a)
    A.idx[id], A.ids[i + 1], A.n = i, id, i + 1
    return i
end

-- The batch's view in the core (rl_batch_t, ledger/batch.c): the pairs its members touched,
-- each marshalled from src on first sight (its balance, its payer list's positive
-- postings) and moved by the core past every member it plans. Its storage is this
-- module's, kept from batch to batch and bounded (M.limits: a member past them goes the
-- long way, and the view starts again from src after it). bv: the Lua side, per src:
-- the pair index by key, the pairs' keys, the read postings by tag (ptab), the members
-- planned (made_t, made_tid by member, for the tags of outputs planned in the batch).
M.limits = { pairs = 262144, posts = 262144 } -- (I-7; the specs shrink them)
local POSTING_SIZE = ffi.sizeof("rl_posting_t")
local MADE = C.RL_BATCH_MADE
local bat = ffi_new("rl_batch_t")
local bpairs, bposts, btags
local idx = ffi_new("uint32_t[?]", MAX_PAIRS)
local ctags = ffi_new("uint32_t[?]", C.RL_MAX_INPUTS)
local bv = { pairs_cap = 0 }
bat.limit = SELECT_LIMIT

local function grow_pairs()
    local cap = math.min(math.max(1024, 2 * bv.pairs_cap), M.limits.pairs)
    local arr = ffi_new("rl_batch_pair_t[?]", cap)
    if bpairs then ffi.copy(arr, bpairs, ffi.sizeof("rl_batch_pair_t") * bat.n_pairs) end
    bpairs, bat.pairs = arr, arr
    bv.pairs_cap = cap
end

-- New storage with `free` entries past the lists, each list copied in (compacted, with
-- room for 8 more): false past the bound (the view is left as it was).
local function grow_posts(free)
    local live = 0
    for i = 0, bat.n_pairs - 1 do live = live + bpairs[i].n + 8 end
    if live + free > M.limits.posts then return false end
    local cap = math.min(math.max(4096, 2 * live + free), M.limits.posts)
    local posts, tags = ffi_new("rl_posting_t[?]", cap), ffi_new("uint32_t[?]", cap)
    local at = 0
    for i = 0, bat.n_pairs - 1 do
        local p = bpairs[i]
        ffi.copy(posts + at, bposts + p.off, POSTING_SIZE * p.n)
        ffi.copy(tags + at, btags + p.off, 4 * p.n)
        p.off, p.cap = at, p.n + 8
        at = at + p.n + 8
    end
    bposts, btags, bat.postings, bat.tags, bat.cap, bat.used = posts, tags, posts, tags, cap, at
    return true
end

-- Room for a member's lists to move (rl_batch_plan's RL_EBUFSIZE): twice the longest
-- list's length and a transfer's outputs.
local function room_to_move()
    local most = 0
    for i = 0, bat.n_pairs - 1 do most = math.max(most, bpairs[i].n) end
    return grow_posts(2 * (most + C.RL_MAX_OUTPUTS))
end

-- The view emptied: its pairs, the read postings' tags, what was moved.
local function clear_view()
    bv.kidx, bv.keys, bv.ptab, bv.moved, bv.full = {}, {}, {}, {}, false
    bat.n_pairs, bat.used = 0, 0
end

-- A batch begins (src: its Lua view; false: none): the members planned in it so far
-- (made_t, made_tid: for the tags of outputs planned in the batch, valid across views).
local function start(src)
    bv.src, bv.made_t, bv.made_tid, bv.otab, bv.member = src, {}, {}, {}, 0
    clear_view()
end
start(false)

-- A payer list's positive postings (a prefix of it, largest first: LED-10).
local function positives(list)
    local n = 0
    while n < #list and list[n + 1].amount > 0 do n = n + 1 end
    return n
end

-- The pair (k: account .. asset_key) into the batch's view: -> its index, or nil (full).
local function add_pair(src, A, acct, asset, ak, k)
    if bat.n_pairs >= M.limits.pairs then
        bv.full = true
        return nil
    end
    if bat.n_pairs == bv.pairs_cap then grow_pairs() end
    local pool = src.pools[k]
    local list = pool and pool.list
    local n = list and positives(list) or 0
    if bat.cap - bat.used < n + 8 and not grow_posts(n + 8) then
        bv.full = true
        return nil
    end
    local bi = bat.n_pairs
    local p = bpairs[bi]
    p.balance = src.bal[k] or 0
    p.asset = asset_of(ak, asset)
    p.account = A.idx[acct]
    p.off, p.n, p.cap = bat.used, n, n + 8
    p.held = pool and pool.held and 1 or 0
    local fin = src.finalizing
    p.finalizing = fin == nil and 2 or (fin[k] and 1 or 0)
    p.listed = pool and 1 or 0
    local ptab = bv.ptab
    for i = 1, n do
        local e = list[i]
        put_posting(bposts[p.off + i - 1], e)
        ptab[#ptab + 1] = e
        btags[p.off + i - 1] = #ptab
    end
    bat.used = bat.used + n + 8
    bat.n_pairs = bi + 1
    bv.kidx[k], bv.keys[bi + 1] = bi, k
    return bi
end

-- One call's pairs (reused: no table per call): index by key, key, asset by index; and its
-- movements' asset keys.
local st = { pk = {}, keys = {}, assets = {}, dp = {}, np = 0 }
local aks = {}

-- The pair (acct, asset)'s index in the member's view, the batch's pair marshalled on
-- first sight; nil: the view cannot say. ak: asset_key(asset); recv: the account's
-- receivable index, or -1.
local function pair(src, A, acct, asset, ak, recv)
    local k = acct .. ak
    local pi = st.pk[k]
    if pi == nil then
        if st.np >= MAX_PAIRS then return nil end
        local bi = bv.kidx[k] or add_pair(src, A, acct, asset, ak, k)
        if bi == nil then return nil end
        pi = st.np
        st.np = pi + 1
        st.pk[k], st.keys[pi + 1], st.assets[pi + 1] = pi, k, asset
        local v = views[pi]
        v.account = A.idx[acct]
        v.asset = bpairs[bi].asset
        v.receivable = recv
        idx[pi] = bi
    end
    return pi
end

local function recv_of(A, od, id)
    local r = od and od[id]
    return r and A.idx[r] or -1
end

-- req into the input struct: -> true, or nil (an account or a pair the view lacks).
local function marshal(src, req)
    local A, accts, mv, od = accounts_of(src), src.accts, req.movements, req.overdraft
    if #mv > MAX_PAIRS then return nil end
    clear(st.pk)
    st.np = 0
    for i = 1, #mv do
        local m = mv[i]
        -- (amounts are check_request's: positive integers, numbers or int64_t)
        local f, t = account(A, accts, m.from), account(A, accts, m.to)
        if f == nil or t == nil then return nil end
        local d = movements[i - 1]
        d.from, d.to, d.amount = f, t, m.amount
        aks[i] = asset_key(m.asset)
        d.asset = asset_of(aks[i], m.asset)
    end
    if od then
        for from, to in pairs(od) do
            if account(A, accts, from) == nil or account(A, accts, to) == nil then return nil end
        end
    end
    for i = 1, #mv do
        local m = mv[i]
        local recv, ak = od and od[m.from], aks[i]
        if pair(src, A, m.from, m.asset, ak, recv_of(A, od, m.from)) == nil
           or pair(src, A, m.to, m.asset, ak, recv_of(A, od, m.to)) == nil
           or recv and pair(src, A, recv, m.asset, ak, recv_of(A, od, recv)) == nil then
            return nil
        end
    end
    input.accounts, input.n_accounts = A.arr, A.n
    input.movements, input.n_movements = movements, #mv
    input.pairs, input.n_pairs = views, st.np
    input.metadata, input.metadata_len = req.metadata, #req.metadata
    input.intent, input.intent_len = req.intent, #req.intent
    input.first_page = FIRST_PAGE
    return A
end

-- The core's answer as the long way's tables.
local function answer(A, src, req)
    local ids, accts, sassets = A.ids, src.accts, st.assets
    local consumed, inputs, outputs, pins = {}, {}, {}, {}
    local tr, nc = out.transfer, out.n_consumed
    for i = 0, nc - 1 do consumed[i + 1] = posting_of(ctags[i]) end
    for i = 0, nc - 1 do inputs[i + 1] = consumed[out.input_of[i] + 1].id end
    for i = 0, tr.n_outputs - 1 do
        outputs[i + 1] = { account = ids[out.output_account[i] + 1],
                           asset = sassets[out.output_pair[i] + 1],
                           amount = from_amount(out.outputs[i].amount) }
    end
    for i = 0, tr.n_pins - 1 do
        local id = ids[out.pin_account[i] + 1]
        pins[i + 1] = { account = id, version = accts[id].version }
    end
    -- a pair is its delta's account and asset: that table, read only, when it has one (a
    -- table fewer per pair and member); st.dp: the deltas by pair index, for this call
    local deltas, nd, dp = {}, out.plan.n_deltas, st.dp
    for i = 0, nd - 1 do
        local d, pi = out.deltas[i], out.delta_pair[i]
        deltas[i + 1] = { account = ids[views[pi].account + 1], asset = sassets[pi + 1],
                          before = from_amount(d.before), debit = from_amount(d.debit),
                          credit = from_amount(d.credit), after = from_amount(d.after) }
        dp[pi + 1] = deltas[i + 1]
    end
    local cids, prs, keys = {}, {}, {}
    for i = 0, out.n_involved - 1 do cids[i + 1] = ids[out.involved[i] + 1] end
    for i = 0, out.n_pairs_used - 1 do
        local pi = out.pairs_used[i]
        prs[i + 1] = dp[pi + 1] or { account = ids[views[pi].account + 1],
                                     asset = sassets[pi + 1] }
        keys[i + 1] = st.keys[pi + 1]
    end
    for i = 0, nd - 1 do dp[out.delta_pair[i] + 1] = nil end
    local t = { inputs = inputs, outputs = outputs, pins = pins, metadata = req.metadata,
                intent = req.intent }
    local plan = { transfer_id = ffi_string(out.plan.transfer_id, 32), deltas = deltas,
                   bytes = ffi_string(buf, len_out[0]) }
    return t, consumed, cids, prs, keys, plan
end

local function refused(code)
    local name = ffi_string(C.rl_err_name(code))
    M.stats[name] = (M.stats[name] or 0) + 1
    return nil, code
end

-- The view's posting of tag: read (ptab), or an output planned in the batch (made on
-- first ask, as move_view made it).
posting_of = function(tag)
    if tag < MADE then return bv.ptab[tag] end
    local p = bv.otab[tag]
    if p == nil then
        local k = tag - MADE
        local member, i = rshift(k, 8), band(k, 255)
        p = ledger.output_posting(bv.made_t[member + 1], bv.made_tid[member + 1], i + 1)
        bv.otab[tag] = p
    end
    return p
end

-- One member in the core: -> the answer, or nil, code (the view unmoved).
function M.plan(src, req)
    if bv.src ~= src then
        -- another batch's view (its plan yielded in a member decided the long way):
        -- written back first, so no interleaving loses a move
        if bv.src then M.drop(bv.src) end
        start(src)
    end
    local A = marshal(src, req)
    if not A then return refused(C.RL_EUNDECIDED) end
    local member = bv.member -- (past RL_BATCH_MEMBERS the core refuses it: RL_EINVAL)
    local rc = C.rl_batch_plan(bat, input, views, idx, member, out, ctags, buf, buf_cap, len_out)
    if rc == C.RL_EBUFSIZE then -- (once: the room made fits any of the member's lists)
        if not room_to_move() then
            bv.full = true
            return refused(rc)
        end
        rc = C.rl_batch_plan(bat, input, views, idx, member, out, ctags, buf, buf_cap, len_out)
    end
    if rc ~= 0 then return refused(rc) end
    M.stats.planned = (M.stats.planned or 0) + 1
    local t, consumed, cids, prs, keys, plan = answer(A, src, req)
    bv.made_t[member + 1], bv.made_tid[member + 1] = t, plan.transfer_id
    bv.member = member + 1
    local moved = bv.moved -- (the pairs sync and drop write back)
    for i = 0, st.np - 1 do moved[idx[i]] = true end
    return t, consumed, cids, prs, keys, plan
end

-- Pair bi's state back into src: its balance, and its payer list (the core's positive
-- postings, then the rest of src's list as it was: the core moves only positive ones).
local function write_back(src, bi)
    local p, k = bpairs[bi], bv.keys[bi + 1]
    local v = from_amount(p.balance)
    if v ~= (src.bal[k] or 0) then src.bal[k] = v end
    if p.listed == 1 then
        local pool = src.pools[k]
        local old, l = pool.list, {}
        for i = 0, p.n - 1 do l[i + 1] = posting_of(btags[p.off + i]) end
        for i = positives(old) + 1, #old do l[#l + 1] = old[i] end
        pool.list = l
    end
    bv.moved[bi] = nil
end

-- Before req is decided the long way over src: the pairs it can read there (each
-- movement's accounts and their receivables), where a planned member moved them, written
-- back (a rejection in a batch whose view holds long lists writes back its own pairs, not
-- the view); a full view is dropped.
local function sync_pair(src, a, ak)
    local bi = a and bv.kidx[a .. ak]
    if bi and bv.moved[bi] then write_back(src, bi) end
end

function M.sync(src, req)
    if bv.src ~= src then return end
    if bv.full then return M.drop(src) end
    local od = req.overdraft
    for _, m in ipairs(req.movements) do
        local ak = asset_key(m.asset)
        sync_pair(src, m.from, ak)
        sync_pair(src, m.to, ak)
        if od then
            sync_pair(src, od[m.from], ak)
            sync_pair(src, od[m.to], ak)
        end
    end
end

-- The view written back in full and dropped: the long way moved src (a member it
-- planned), or learned what the view's pairs did not hold (the finalizing sagas, read once
-- per view), or the view is full; the members after it marshal their pairs from src again.
-- A member the long way rejected or handed over moved nothing, and the view stays.
function M.drop(src)
    if bv.src ~= src then return end
    for bi in pairs(bv.moved) do write_back(src, bi) end
    clear_view()
end

-- The view's pair k as { balance, list of posting tables } (the check against move_view).
function M.state(src, k)
    local bi = bv.src == src and bv.kidx[k]
    if not bi then return nil end
    local p, l = bpairs[bi], {}
    for i = 0, p.n - 1 do l[i + 1] = posting_of(btags[p.off + i]) end
    return from_amount(p.balance), l, p.listed == 1
end

-- The batch is planned: its tables let go (the storage stays for the next).
function M.finish(src)
    if bv.src == src then start(false) end
end

return M
