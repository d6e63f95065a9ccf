-- ron.ledger.engine.plan_core: a batch member's resolution and validation in the core, one
-- FFI call (rl_resolve_and_plan, ledger/resolve.c) over the batch's view (issue 25: the
-- plan stage of a rated slice 20 -> 16 us and 6.6 -> 5.2 KB allocated, docs/LEDGER.md "The
-- core's plan"). It answers only what the core decides: a planned transfer.
-- Anything else (a rejection, a race, a view that lacks what the decision needs) is nil,
-- and the caller decides that member the long way (Ledger:_resolve_commit and
-- ledger.validate_and_plan), which stays the oracle: with M.check set, every member is
-- planned both ways and any difference raises (the batch specs run so).
--
--   local t, consumed, cids, prs, keys, plan = plan_core.plan(src, req)   -- or nil, code
--
-- t, consumed, plan: what _resolve_commit, complete and validate_and_plan give; cids: the
-- involved accounts (complete's order); prs: the pairs validated, keys their view keys.
local ffi = require("ffi")
local ledger = require("ron.ledger")
local C = require("ron.ledger.lib").namespace()
local base = require("ron.ledger.engine.base")

local ffi_new, ffi_string, pairs = ffi.new, ffi.string, pairs

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
-- The payers' postings of one call, grown as a call needs (up to POSTS_MAX: a call past it
-- goes the long way).
local POSTS_MAX = 65536
local post_cap, posts = 0, nil
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

-- One call's pairs (reused: no table per call): index by key, key, asset, list by index;
-- and its movements' asset keys.
local st = { pk = {}, keys = {}, assets = {}, lists = {}, dp = {}, np = 0, nposts = 0 }
local aks = {}

-- A payer's positive postings (a prefix of its list, largest first: LED-10) into the pool.
local function put_postings(v, list)
    local n = 0
    while n < #list and n < SELECT_LIMIT do
        local a = list[n + 1].amount
        if a <= 0 then break end
        n = n + 1
    end
    if n == 0 then return true end
    local at = st.nposts
    if at + n > post_cap then
        st.want = at + n -- (M.plan grows the pool and marshals the call again)
        return false
    end
    for i = 1, n do put_posting(posts[at + i - 1], list[i]) end
    v.postings, v.n_postings = posts + at, n
    st.nposts = at + n
    return true
end

-- The pair (acct, asset)'s index in the view, marshalled on first sight (payer: with its
-- postings); nil: the view cannot say. ak: asset_key(asset); recv: the account's receivable
-- index, or -1.
local function pair(src, A, acct, asset, ak, recv, payer)
    local k = acct .. ak
    local pi = st.pk[k]
    local pool = src.pools[k]
    if pi == nil then
        if st.np >= MAX_PAIRS then return nil end
        pi = st.np
        st.np = pi + 1
        st.pk[k], st.keys[pi + 1], st.assets[pi + 1], st.lists[pi + 1] = pi, k, asset, false
        local v = views[pi]
        v.postings, v.n_postings = nil, 0
        v.account = A.idx[acct]
        v.asset = asset_of(ak, asset)
        v.balance = src.bal[k] or 0
        v.receivable = recv
        v.held = pool and pool.held and 1 or 0
        local fin = src.finalizing
        v.finalizing = fin == nil and 2 or (fin[k] and 1 or 0)
    end
    if payer and pool and not st.lists[pi + 1] then
        st.lists[pi + 1] = pool.list
        if not put_postings(views[pi], pool.list) then return nil end
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
    st.np, st.nposts, st.want = 0, 0, nil
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
        if pair(src, A, m.from, m.asset, ak, recv_of(A, od, m.from), true) == nil
           or pair(src, A, m.to, m.asset, ak, recv_of(A, od, m.to), false) == nil
           or recv and pair(src, A, recv, m.asset, ak, recv_of(A, od, recv), false) == nil then
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
    local ids, accts, lists, sassets = A.ids, src.accts, st.lists, st.assets
    local consumed, inputs, outputs, pins = {}, {}, {}, {}
    local tr, nc = out.transfer, out.n_consumed
    for i = 0, nc - 1 do
        consumed[i + 1] = lists[out.consumed_pair[i] + 1][out.consumed_pos[i] + 1]
    end
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

function M.plan(src, req)
    local A = marshal(src, req)
    while not A and st.want and st.want <= POSTS_MAX do -- (each round at least doubles)
        post_cap = math.min(POSTS_MAX, math.max(st.want, 2 * post_cap, 256))
        posts = ffi_new("rl_posting_t[?]", post_cap)
        A = marshal(src, req)
    end
    if not A then return refused(C.RL_EUNDECIDED) end
    local rc = C.rl_resolve_and_plan(input, out, buf, buf_cap, len_out)
    if rc ~= 0 then return refused(rc) end
    M.stats.planned = (M.stats.planned or 0) + 1
    return answer(A, src, req)
end

return M
