-- ron.ledger.view: what a commit's plan is resolved against (docs/LEDGER.md "Resolve", the
-- batch path, LED-32, LED-52, LED-67): the accounts, each payer pair's largest Active
-- postings with a probe for PendingInactive ones (reservations of sagas in flight), and the
-- balances, read once, then answered from memory by the engine's resolution
-- (Ledger:_resolve_commit: accounts, page, held, finalizing_to).
--
-- A payer's postings and its probe come from ONE statement (get_postings_by_pairs), so the
-- decision "short of funds" is made on one snapshot of the pair: a posting another saga has
-- reserved is either still there (held: a race, retried) or consumed together with the
-- insertion of its change (a phase, LED-67), never neither. (Three reads a moment apart, as
-- the single path made them before, could see a hot payer's posting reserved, then nothing
-- held, then its change reserved again, and answer InsufficientFunds for a race.)
--
--   local r = view.wants(reqs)            the reads reqs' plan needs
--   local ops = view.read_ops(r)          them as a phase's ops (store:apply)
--   local src = view.source(led, r, accts, lists, balances)
--   src:accounts(ids), src:page(account, asset, limit), src:held(account, asset),
--   src:finalizing_to(account, asset), src.bal[account .. asset_key], src.pools[key]
local ledger = require("ron.ledger")

local ipairs, pairs, setmetatable, type, min = ipairs, pairs, setmetatable, type, math.min

local _M = {}

_M.FIRST_PAGE = 32     -- the largest postings read first (LED-10 picks the same)
_M.SELECT_LIMIT = 1024 -- a store's batch bound (sql.MAX_BATCH)
local FIRST_PAGE, SELECT_LIMIT = _M.FIRST_PAGE, _M.SELECT_LIMIT
local BATCH_IDS, BATCH_QUERIES = 1024, 128

local function asset_key(a) return a.code .. "\0" .. a.scale end
_M.asset_key = asset_key

function _M.largest_less(a, b)
    if a.amount ~= b.amount then return a.amount > b.amount end
    if a.id.transfer_id ~= b.id.transfer_id then return a.id.transfer_id < b.id.transfer_id end
    return a.id.index < b.id.index
end

-- Puts p into list, sorted by less, at its place at or before slot j (j = #list + 1 grows
-- the list; j = #list drops its last): one insertion step, for lists kept sorted as they
-- grow (a plan's pools, the memory store's top k).
function _M.insert_sorted(list, p, j, less)
    while j > 1 and less(p, list[j - 1]) do
        list[j] = list[j - 1]
        j = j - 1
    end
    list[j] = p
end

-- The payer list (of pidx, by pair key) an output joins, or nil: none for a pair that pays
-- nothing here, nor for a number amount <= 0, which selection never takes (none stands
-- before a positive posting, so a page's positive postings are the same without it).
function _M.list_for_output(pidx, out)
    local pool = pidx[out.account .. asset_key(out.asset)]
    if pool and not (type(out.amount) == "number" and out.amount <= 0) then return pool end
    return nil
end

-- The (account, asset) pair's entry of a netting: by[account .. asset_key], made (net 0)
-- and appended to list on first sight. Resolution (ron.ledger.engine.resolve) nets with it.
local function net_pair(list, by, account, asset)
    local k = account .. asset_key(asset)
    local p = by[k]
    if not p then
        p = { account = account, asset = asset, net = 0 }
        by[k] = p
        list[#list + 1] = p
    end
    return p
end
_M.net_pair = net_pair

-- The (account, asset) pairs a request's movements net, as _resolve_commit computes them
-- (nil on an overflow: resolution rejects it the same way).
local function add_net(r, by, account, asset, amount, debit)
    local p = net_pair(r, by, account, asset)
    local v = debit and ledger.amount_sub(p.net, amount) or ledger.amount_add(p.net, amount)
    if not v then return false end
    p.net = v
    return true
end

function _M.nets_of(req)
    local r, by = {}, {}
    for _, m in ipairs(req.movements) do
        if not add_net(r, by, m.from, m.asset, m.amount, true)
           or not add_net(r, by, m.to, m.asset, m.amount, false) then
            return nil
        end
    end
    return r
end

-- The reads reqs' plan needs: -> { ids (accounts), bpairs (balances: every pair netted,
-- every receivable), payers (pairs netting a debit, each { account, asset, key, debits:
-- the requests it pays in, need: what they debit it in all, nil past int64 }), pidx
-- (payer by key), qs (their queries: the largest Active, then one PendingInactive) }.
-- (want and bpair take their tables: closures made in wants aborted every trace through it,
-- issue 25; want is also the engine's resolution's)
local function want(ids, seen, id)
    if not seen[id] then
        seen[id] = true
        ids[#ids + 1] = id
    end
end
_M.want_id = want

local function bpair(bpairs, bidx, account, asset)
    local k = account .. asset_key(asset)
    if not bidx[k] then
        bpairs[#bpairs + 1] = { account = account, asset = asset }
        bidx[k] = #bpairs
    end
end

function _M.wants(reqs)
    local ids, seen = {}, {}
    local bpairs, bidx, payers, pidx = {}, {}, {}, {}
    for _, req in ipairs(reqs) do
        for _, p in ipairs(_M.nets_of(req) or {}) do
            want(ids, seen, p.account)
            bpair(bpairs, bidx, p.account, p.asset)
            local recv = req.overdraft and req.overdraft[p.account]
            if recv then bpair(bpairs, bidx, recv, p.asset) end
            local k = p.account .. asset_key(p.asset)
            if p.net < 0 then
                local py = pidx[k]
                if not py then
                    py = { account = p.account, asset = p.asset, key = k, debits = 0, need = 0 }
                    payers[#payers + 1] = py
                    pidx[k] = py
                end
                py.debits = py.debits + 1
                py.need = py.need and ledger.amount_sub(py.need, p.net) -- (nil: past int64)
            end
        end
        for from, to in pairs(req.overdraft or {}) do
            want(ids, seen, from)
            want(ids, seen, to)
        end
    end
    local qs = {}
    for _, p in ipairs(payers) do
        qs[#qs + 1] = { account = p.account, asset = p.asset, status = "active",
                        limit = FIRST_PAGE }
        qs[#qs + 1] = { account = p.account, asset = p.asset, status = "pending_inactive",
                        limit = 1 }
    end
    return { ids = ids, bpairs = bpairs, payers = payers, pidx = pidx, qs = qs }
end

-- list in chunks of at most n (a store's bound per call)
local function chunks(list, n)
    local out = {}
    for i = 1, #list, n do
        local c = {}
        for j = i, min(#list, i + n - 1) do c[#c + 1] = list[j] end
        out[#out + 1] = c
    end
    return out
end
_M.chunks = chunks

-- r's reads as a phase's ops (each kind chunked at the stores' bounds, in the order
-- accounts, postings, balances); r.n_ops their count.
function _M.read_ops(r)
    local ops = {}
    for _, c in ipairs(chunks(r.ids, BATCH_IDS)) do
        ops[#ops + 1] = { "get_accounts", c, acc = true }
    end
    for _, c in ipairs(chunks(r.qs, BATCH_QUERIES)) do
        ops[#ops + 1] = { "get_postings_by_pairs", c, posts = true }
    end
    for _, c in ipairs(chunks(r.bpairs, BATCH_IDS)) do
        ops[#ops + 1] = { "get_balances", c, bals = true }
    end
    r.n_ops = #ops
    return ops
end

-- The answers of read_ops(r) (res[from .. from + r.n_ops - 1] of the phase's answer) ->
-- accts, lists, balances.
function _M.answers(r, ops, res, from)
    local accts, lists, bals = {}, {}, {}
    for k = from, from + r.n_ops - 1 do
        local op, v = ops[k], res[k][1]
        if op.acc then
            for id, a in pairs(v) do accts[id] = a end
        elseif op.posts then
            for _, l in ipairs(v) do lists[#lists + 1] = l end
        else
            for _, b in ipairs(v) do bals[#bals + 1] = b end
        end
    end
    return accts, lists, bals
end

local Source = {}
Source.__index = Source

-- The source over one read: accts by id, lists (r.qs' answers, in order) and balances
-- (r.bpairs'). deep: the lists already hold a second page where the first was full of
-- positive postings (the batch plan reads it up front); else it is read when asked for.
-- The probe's answer: the saga holding a reservation on the pair (its id), or false.
local function holder(probe)
    local p = probe[1]
    return p ~= nil and (p.reservation or true)
end

function _M.source(led, r, accts, lists, balances, deep)
    for k, p in ipairs(r.payers) do
        p.list, p.held = lists[2 * k - 1], holder(lists[2 * k])
    end
    local bal = {}
    for i, pr in ipairs(r.bpairs) do bal[pr.account .. asset_key(pr.asset)] = balances[i] end
    return setmetatable({ led = led, accts = accts, pools = r.pidx, bal = bal, deep = deep },
                        Source)
end

function Source:accounts(ids)
    local r = {}
    for _, id in ipairs(ids) do r[id] = self.accts[id] end
    return r
end

function Source:page(account, asset, limit)
    local pool = self.pools[account .. asset_key(asset)]
    local r = {}
    if not pool then return r end
    local l = pool.list
    if limit > FIRST_PAGE and not self.deep and not pool.deep and #l == FIRST_PAGE
       and l[FIRST_PAGE].amount > 0 then
        -- a first page full of positive postings: the pair's longer page and its probe,
        -- again one statement
        local got = self.led:_p("get_postings_by_pairs", {
            { account = account, asset = asset, status = "active", limit = SELECT_LIMIT },
            { account = account, asset = asset, status = "pending_inactive", limit = 1 } })
        pool.list, pool.held, pool.deep = got[1], holder(got[2]), true
        l = pool.list
    end
    for i = 1, min(limit, #l) do r[i] = l[i] end
    return r
end

-- -> the id of a saga holding a reservation on the pair (the probe's), or false
function Source:held(account, asset)
    local pool = self.pools[account .. asset_key(asset)]
    return pool ~= nil and pool.held
end

-- The sagas are read once per view, on the first short payer (LED-32).
function Source:finalizing_to(account, asset)
    if not self.finalizing then self.finalizing = self.led:_finalizing_outputs() end
    return self.finalizing[account .. asset_key(asset)] == true
end

return _M
