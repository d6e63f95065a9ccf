-- An independent model of rl_validate_and_plan in plain Lua, used only as a test oracle
-- (pgledger's method): it follows docs/LEDGER.md "Validation order" step by step and
-- shares no code with the C core. spec/ron/ledger/model_spec.lua runs random histories
-- through both and requires identical error codes and identical plans (LED-12).
--
-- Values are the tables of ron.ledger (lua/ron/ledger/init.lua); amounts stay far below
-- 2^53 in the histories, so Lua numbers are exact and overflow is out of the model's scope
-- (the C tests cover it).
local M = {}

-- Byte-wise comparison of two strings (never locale-dependent).
function M.bytes_less(a, b)
    local n = math.min(#a, #b)
    for i = 1, n do
        local x, y = a:byte(i), b:byte(i)
        if x ~= y then return x < y end
    end
    return #a < #b
end

function M.ref_less(a, b)
    if a.transfer_id ~= b.transfer_id then return M.bytes_less(a.transfer_id, b.transfer_id) end
    return a.index < b.index
end

local function same_asset(a, b) return a.code == b.code and a.scale == b.scale end

local function ref_eq(a, b) return a.transfer_id == b.transfer_id and a.index == b.index end

-- Returns plan ({ deltas = { {account, asset, before, debit, credit, after} } }) or nil,
-- error name.
function M.validate(t, accounts, consumed, balances)
    local function account(id)
        for _, a in ipairs(accounts) do if a.id == id then return a end end
    end
    -- 1. shape, the part a resolved transfer can miss: it moves something and names its
    -- intent (LED-14)
    if #(t.inputs or {}) + #(t.outputs or {}) == 0 or type(t.intent) ~= "string"
       or #t.intent == 0 then
        return nil, "NonCanonical"
    end
    -- 2. consumed postings
    local ins = {}
    for i, ref in ipairs(t.inputs or {}) do
        for _, p in ipairs(consumed) do
            if ref_eq(p.id, ref) then ins[i] = p break end
        end
        if not ins[i] then return nil, "UnknownPosting" end
        if ins[i].status == "inactive" then return nil, "PostingSpent" end
    end
    -- 3. involved accounts, in order of first appearance
    local involved, seen = {}, {}
    local function involve(id)
        if not seen[id] then seen[id] = true involved[#involved + 1] = id end
    end
    for _, p in ipairs(ins) do involve(p.account) end
    for _, o in ipairs(t.outputs or {}) do involve(o.account) end
    for _, id in ipairs(involved) do
        if not account(id) then return nil, "UnknownAccount" end
    end
    -- 4. pins
    local pinned = {}
    for _, p in ipairs(t.pins or {}) do pinned[p.account] = p.version end
    for _, id in ipairs(involved) do
        if pinned[id] == nil then return nil, "Unpinned" end
        if pinned[id] ~= (account(id).version or 1) then return nil, "AccountVersionMismatch" end
    end
    for _, p in ipairs(t.pins or {}) do
        if not seen[p.account] then return nil, "Unpinned" end
    end
    -- 5. status
    for _, id in ipairs(involved) do
        local st = account(id).status or "open"
        if st == "frozen" then return nil, "AccountFrozen" end
        if st == "closed" then return nil, "AccountClosed" end
    end
    -- 6. assets
    local legs = {}
    for _, p in ipairs(ins) do legs[#legs + 1] = p.asset end
    for _, o in ipairs(t.outputs or {}) do legs[#legs + 1] = o.asset end
    for i = 2, #legs do
        for j = 1, i - 1 do
            if legs[i].code == legs[j].code and legs[i].scale ~= legs[j].scale then
                return nil, "AssetConflict"
            end
        end
    end
    -- 7. sums per (account, asset) pair
    local deltas = {}
    local function pair(id, asset)
        for _, d in ipairs(deltas) do
            if d.account == id and same_asset(d.asset, asset) then return d end
        end
        local d = { account = id, asset = asset, debit = 0, credit = 0 }
        deltas[#deltas + 1] = d
        return d
    end
    for _, p in ipairs(ins) do local d = pair(p.account, p.asset) d.debit = d.debit + p.amount end
    for _, o in ipairs(t.outputs or {}) do
        local d = pair(o.account, o.asset)
        d.credit = d.credit + o.amount
    end
    -- 8. conservation per asset
    for i, d in ipairs(deltas) do
        local first = true
        for j = 1, i - 1 do if same_asset(deltas[j].asset, d.asset) then first = false end end
        if first then
            local debit, credit = 0, 0
            for j = i, #deltas do
                if same_asset(deltas[j].asset, d.asset) then
                    debit, credit = debit + deltas[j].debit, credit + deltas[j].credit
                end
            end
            if debit ~= credit then return nil, "ConservationViolated" end
        end
    end
    -- 9. balances
    for _, d in ipairs(deltas) do
        local b
        for _, x in ipairs(balances) do
            if not b and x.account == d.account and same_asset(x.asset, d.asset) then b = x end
        end
        if not b then return nil, "BalanceMissing" end
        d.before = b.amount
        d.after = d.before - d.debit + d.credit
    end
    -- 10. policies
    for _, o in ipairs(t.outputs or {}) do
        if (account(o.account).policy or "no_overdraft") == "no_overdraft" and o.amount < 0 then
            return nil, "NegativePosting"
        end
    end
    for _, d in ipairs(deltas) do
        local a = account(d.account)
        local policy = a.policy or "no_overdraft"
        local floor = policy == "capped" and a.floor or 0
        if policy ~= "uncapped" and d.after < d.before and d.after < floor then
            return nil, "InsufficientFunds"
        end
    end
    return { deltas = deltas }
end

return M
