-- ron.ledger.engine.resolve: resolve (read only): a request -> its transfer, or a deterministic
-- rejection; and the lists of a transfer's pairs and heads the saga and the batch use.
-- A concern of the engine ron.ledger.ledger, which installs the methods below
-- (_M.methods) on its one Ledger class.
local ledger = require("ron.ledger")
local B = require("ron.ledger.bigint")
local codec = require("ron.ledger.codec")
local base = require("ron.ledger.engine.base")
local view = require("ron.ledger.view")

local format = string.format
local sort = table.sort

local ERR = base.ERR
local FIRST_PAGE = base.FIRST_PAGE
local MAX_INPUTS = base.MAX_INPUTS
local SELECT_LIMIT = base.SELECT_LIMIT
local asset_key = base.asset_key
local fail = base.fail
local hex = base.hex

local _M = {}
local Ledger = {} -- this concern's methods

-- ---- resolve (read only): request -> transfer, or a deterministic rejection ----

-- Returns t, info or nil, err, code (a rejection to store) or false, err, code (a race:
-- try again).
-- Where resolution reads from: a view (ron.ledger.view) of one read of the accounts, the
-- payers' postings and the balances, for the single path and a batch alike (LED-52), so a
-- batch picks exactly the postings one-by-one commits would.
-- (module-level helpers of _resolve_commit: no closure per request, see pairs_of)
local NONE = {}
local net_pair = base.net_pair
local want_id = view.want_id
local function ref_less(a, b)
    if a.transfer_id ~= b.transfer_id then return a.transfer_id < b.transfer_id end
    return a.index < b.index
end

function Ledger:_resolve_commit(req, src)
    local pairs_, by_k = {}, {}
    for _, m in ipairs(req.movements) do
        local pf = net_pair(pairs_, by_k, m.from, m.asset)
        local a = ledger.amount_sub(pf.net, m.amount)
        if not a then return fail(ERR.AmountOverflow, "movement sums overflow") end
        pf.net = a
        local pt = net_pair(pairs_, by_k, m.to, m.asset)
        local c = ledger.amount_add(pt.net, m.amount)
        if not c then return fail(ERR.AmountOverflow, "movement sums overflow") end
        pt.net = c
    end
    local ids, seen = {}, {}
    for _, p in ipairs(pairs_) do want_id(ids, seen, p.account) end
    for from, to in pairs(req.overdraft or NONE) do
        want_id(ids, seen, from)
        want_id(ids, seen, to)
    end
    local accts = src:accounts(ids)
    for _, id in ipairs(ids) do
        if not accts[id] then return fail(ERR.UnknownAccount, "no account " .. hex(id)) end
    end
    local inputs, outputs, consumed = {}, {}, {}
    for _, p in ipairs(pairs_) do
        if p.net < 0 then
            local need = -p.net
            -- The largest few first: when they cover the need, greedy largest-first over
            -- all postings picks exactly these (the store orders as selection does, LED-10);
            -- only a short page is read again in full.
            local lim = FIRST_PAGE
            local list = src:page(p.account, p.asset, lim)
            local cap = MAX_INPUTS - #inputs
            local picks, sum, change, avail = ledger.select_postings(list, p.account, p.asset,
                                                                     need, cap)
            -- wip/perf: selection takes only positive postings; a full page ending in one
            -- <= 0 (largest first) means there are no more (an uncapped source or a
            -- receivable holds only negatives: re-reading 1024 of them per commit grew the
            -- cost with history, bench-ledger-rating-pg)
            if not picks and #list == FIRST_PAGE and list[FIRST_PAGE].amount > 0 then
                lim = SELECT_LIMIT
                list = src:page(p.account, p.asset, lim)
                picks, sum, change, avail = ledger.select_postings(list, p.account, p.asset,
                                                                   need, cap)
            end
            if picks then
                for _, i in ipairs(picks) do
                    inputs[#inputs + 1] = list[i].id
                    consumed[#consumed + 1] = list[i]
                end
                if change ~= 0 then
                    outputs[#outputs + 1] = { account = p.account, asset = p.asset,
                                              amount = change }
                end
            elseif change == ERR.InsufficientFunds then
                -- sum (4th value) is what the account has; the shortfall goes to the
                -- receivable the caller named, or onto the account itself when its policy
                -- lets it hold a negative posting (the floor is checked by validation).
                -- Postings other sagas hold are value in flight, not value missing: a short
                -- account with reservations on the pair is a race (retry), never a stored
                -- InsufficientFunds or an overdraft (LED-32).
                local holder = src:held(p.account, p.asset)
                if holder then
                    return false, "reservations in flight", ERR.Unavailable, holder
                end
                -- So are the outputs of a saga past the point of no return: between its
                -- inputs' deactivation and its outputs' insertion (a window a store stall
                -- holds open) the account shows neither the spent posting nor its change.
                if src:finalizing_to(p.account, p.asset) then
                    return false, "a finalizing transfer credits the account", ERR.Unavailable
                end
                -- The reads above are not one snapshot: a saga that finished (or gave its
                -- reservation back) between the first read and these checks left Active
                -- postings the first read could not see. Read them again last: value that
                -- was reserved, then finalizing, then Active is seen by one of the reads.
                -- (A batch's view is one read per batch: the same list, nothing to compare.)
                if not src.deep then
                    local again = src:page(p.account, p.asset, lim)
                    local _, _, _, avail2 = ledger.select_postings(again, p.account, p.asset,
                                                                   need, cap)
                    if avail2 ~= avail then -- nil when they now cover the need
                        return false, "the account's postings changed meanwhile",
                            ERR.Unavailable
                    end
                end
                local recv = req.overdraft and req.overdraft[p.account]
                if not recv and accts[p.account].policy == "no_overdraft" then
                    return fail(ERR.InsufficientFunds, format(
                        "account %s has %s of %s %s, needs %s", hex(p.account),
                        B.dec(avail), p.asset.code, tostring(p.asset.scale), B.dec(need)))
                end
                if avail > 0 then
                    local all, s2 = ledger.select_postings(list, p.account, p.asset, avail, cap)
                    if not all then
                        return fail(ERR.LimitExceeded, "too many postings to drain " ..
                                    hex(p.account))
                    end
                    assert(s2 == avail)
                    for _, i in ipairs(all) do
                        inputs[#inputs + 1] = list[i].id
                        consumed[#consumed + 1] = list[i]
                    end
                end
                outputs[#outputs + 1] = { account = recv or p.account, asset = p.asset,
                                          amount = -(need - avail) }
            else
                return nil, sum, change -- LimitExceeded, AmountOverflow: deterministic
            end
        elseif p.net > 0 then
            outputs[#outputs + 1] = { account = p.account, asset = p.asset, amount = p.net }
        end
    end
    if #inputs > 1 then sort(inputs, ref_less) end
    return { inputs = inputs, outputs = outputs, metadata = req.metadata, intent = req.intent },
        consumed, accts
end

-- After the early look refused a transfer: true when a posting it picked is no longer
-- Active. The balances it read are then not the postings' snapshot (another saga consumed a
-- pick and its change is not inserted yet: the projection shows the debit without the
-- change), so the refusal is a race to resolve again, not a rejection to store (LED-32).
function Ledger:_picks_moved(consumed)
    if #consumed == 0 then return false end
    local ids = {}
    for i, p in ipairs(consumed) do ids[i] = p.id end
    local now = self:_p("get_postings", ids)
    if #now ~= #ids then return true end
    for _, p in ipairs(now) do if p.status ~= "active" then return true end end
    return false
end

-- The (account, asset) keys every saga in phase finalizing (any node) has a credit (a
-- positive output) to: value in flight that a debit must wait for, not a stored
-- InsufficientFunds (LED-32). A single saga's record holds its transfer (t), a batch's its
-- transfers (items[i].t). Only on the short-account path; the saga table holds the sagas
-- running or left to recover(). The store lists the finalizing records only: the reserving
-- ones (with lanes, the other lanes' batch records, each member's request inside) stay on
-- the server (list_pending_sagas returned them all, 373-587 us of wall per rated slice on
-- PostgreSQL with 4 lanes).
function Ledger:_finalizing_outputs()
    local keys = {}
    for _, s in ipairs(self:_p("list_finalizing_sagas")) do
        local d = codec.decode(s.data)
        local bytes = {}
        if d and d.t then
            bytes[1] = d.t
        elseif d and d.kind == "batch" then
            for _, it in ipairs(d.items or {}) do bytes[#bytes + 1] = it.t end
        end
        for _, b in ipairs(bytes) do
            for _, o in ipairs(ledger.decode_transfer(b).outputs) do
                -- only a credit can be the value a short payer waits for: a negative
                -- output (an uncapped source's issue, a receivable's debt) never covers
                -- a need (every rated slice gives the usage source one: with lanes, each
                -- batch that met another lane's finalizing record handed all its
                -- members to the single path)
                if o.amount > 0 then keys[o.account .. asset_key(o.asset)] = true end
            end
        end
    end
    return keys
end

function Ledger:_finalizing_to(account, asset)
    return self:_finalizing_outputs()[account .. asset_key(asset)] == true
end

function Ledger:_resolve_reverse(req)
    local rec = self:_read("get_transfer", req.target)
    if not rec then return fail(ERR.NotFound, "no transfer " .. hex(req.target)) end
    local orig = ledger.decode_transfer(rec.bytes)
    local outs = {}
    for i = 1, #orig.outputs do outs[i] = { transfer_id = req.target, index = i - 1 } end
    local created = self:_p("get_postings", outs)
    local was = self:_p("get_postings", orig.inputs)
    if #created ~= #outs or #was ~= #orig.inputs then
        return fail(ERR.Bug, "transfer " .. hex(req.target) .. " has lost postings")
    end
    for _, p in ipairs(created) do
        if p.status == "inactive" then
            return fail(ERR.PostingSpent, "transfer " .. hex(req.target) ..
                        " created postings that are already spent")
        end
        if p.status ~= "active" then return false, "reserved by another saga", ERR.Unavailable end
    end
    local outputs, ids, seen = {}, {}, {}
    for i, p in ipairs(was) do
        outputs[i] = { account = p.account, asset = p.asset, amount = p.amount }
    end
    for _, p in ipairs(created) do
        if not seen[p.account] then seen[p.account] = true ids[#ids + 1] = p.account end
    end
    for _, o in ipairs(outputs) do
        if not seen[o.account] then seen[o.account] = true ids[#ids + 1] = o.account end
    end
    local accts = self:_p("get_accounts", ids)
    for _, id in ipairs(ids) do
        if not accts[id] then return fail(ERR.UnknownAccount, "no account " .. hex(id)) end
    end
    return { inputs = outs, outputs = outputs, intent = req.intent,
             metadata = req.metadata ~= "" and req.metadata or "reverses " .. hex(req.target) },
        created, accts
end

-- The accounts whose history lists t (one transfer_accounts row each): every pinned
-- account but the engine's unindexed ones (LED-58).
function Ledger:_involved(t)
    local involved, skip = {}, self.unindexed
    for _, p in ipairs(t.pins) do
        if not skip[p.account] then involved[#involved + 1] = p.account end
    end
    return involved
end

-- Pins (every involved account at the version just read) and the pairs to validate.
local function complete(t, consumed, accts)
    local seen, ids = {}, {}
    for _, p in ipairs(consumed) do
        if not seen[p.account] then seen[p.account] = true ids[#ids + 1] = p.account end
    end
    for _, o in ipairs(t.outputs) do
        if not seen[o.account] then seen[o.account] = true ids[#ids + 1] = o.account end
    end
    local sorted = {}
    for i, id in ipairs(ids) do sorted[i] = id end
    sort(sorted)
    t.pins = {}
    for i, id in ipairs(sorted) do t.pins[i] = { account = id, version = accts[id].version } end
    return ids
end

-- The (account, asset) pairs of t, in order of first appearance.
-- (No local closures in these helpers: creating one (FNEW) is not compiled by LuaJIT and
-- aborts every trace through them, several times per transfer.)
local function add_pair(r, seen, account, asset)
    local k = account .. asset_key(asset)
    if not seen[k] then
        seen[k] = true
        r[#r + 1] = { account = account, asset = asset }
    end
end
local function pairs_of(t, consumed)
    local r, seen = {}, {}
    for _, p in ipairs(consumed) do add_pair(r, seen, p.account, p.asset) end
    for _, o in ipairs(t.outputs) do add_pair(r, seen, o.account, o.asset) end
    return r
end

-- The heads to take (LED-29): every capped pair the transfer debits (consumes a posting of,
-- or gives a negative output), in sorted order (no deadlock between two sagas).
local function add_head(r, seen, accts, account, asset)
    local a = accts[account]
    if a and a.policy == "capped" then
        local k = account .. asset_key(asset)
        if not seen[k] then
            seen[k] = true
            r[#r + 1] = { account = account, asset = asset, key = k }
        end
    end
end
local function by_key(a, b) return a.key < b.key end
local function heads_of(t, consumed, accts)
    local r, seen = {}, {}
    for _, p in ipairs(consumed) do add_head(r, seen, accts, p.account, p.asset) end
    for _, o in ipairs(t.outputs) do
        if o.amount < 0 then add_head(r, seen, accts, o.account, o.asset) end
    end
    if #r == 0 then return r end
    sort(r, by_key)
    for _, h in ipairs(r) do h.key = nil end
    return r
end

local function list_accounts(ids, accts)
    local r = {}
    for i, id in ipairs(ids) do r[i] = accts[id] end
    return r
end

_M.complete = complete
_M.ref_less = ref_less -- (a transfer's inputs' order; the one-transaction batch's reservation)
_M.heads_of = heads_of
_M.list_accounts = list_accounts
_M.pairs_of = pairs_of
_M.methods = Ledger
return _M
