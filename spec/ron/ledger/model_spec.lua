-- rl_validate_and_plan against an independent Lua model (spec/ron/ledger/model.lua) over
-- random histories (LED-5..LED-9, LED-12): for every transfer both must give the same
-- error name, or the same plan; committed transfers are applied to the history and every
-- balance recomputed from postings must equal the plan's "after". Transfers are built to
-- be mostly valid and then given zero, one or several faults at once, so the order of the
-- checks is exercised too. The seed is printed; RL_SEED and RL_STEPS replay a run.
local S = require("support")
local ledger = require("ron.ledger")
local model = dofile(S.root .. "spec/ron/ledger/model.lua")

local SEED = tonumber(os.getenv("RL_SEED") or "") or 20261125
local STEPS = tonumber(os.getenv("RL_STEPS") or "") or 1500

-- A small deterministic generator (xorshift32), independent of math.random's.
local function rng(seed)
    local x = seed % 4294967296
    if x == 0 then x = 2463534242 end
    return function(n)
        x = bit.bxor(x, bit.lshift(x, 13))
        x = bit.bxor(x, bit.rshift(x, 17))
        x = bit.bxor(x, bit.lshift(x, 5))
        local u = x % 4294967296
        return u % n
    end
end

local function id16(b) return string.rep("\0", 15) .. string.char(b) end

local USD = { code = "USD", scale = 2 }
local EUR = { code = "EUR", scale = 2 }
local USD3 = { code = "USD", scale = 3 } -- a scale conflict with USD

describe("rl_validate_and_plan = the Lua model (LED-12)", function()
    it(string.format("agrees on %d random transfers (seed %d)", STEPS, SEED), function()
        print(string.format("# model: seed %d, %d steps (RL_SEED=%d RL_STEPS=%d to replay)",
                            SEED, STEPS, SEED, STEPS))
        local r = rng(SEED)
        local accounts = {
            { id = id16(1), policy = "uncapped" }, -- the world: issues value
            { id = id16(2), policy = "no_overdraft" },
            { id = id16(3), policy = "no_overdraft" },
            { id = id16(4), policy = "capped", floor = -500 },
            { id = id16(5), policy = "capped", floor = -5000 },
            { id = id16(6), policy = "uncapped" },
        }
        for _, a in ipairs(accounts) do a.version, a.status = 1, "open" end
        local postings = {}
        local outcomes, committed = {}, 0

        local function balance(id, asset)
            local s = 0
            for _, p in ipairs(postings) do
                if p.status ~= "inactive" and p.account == id and p.asset.code == asset.code
                    and p.asset.scale == asset.scale then
                    s = s + p.amount
                end
            end
            return s
        end
        local function account(id)
            for _, a in ipairs(accounts) do if a.id == id then return a end end
        end

        for step = 1, STEPS do
            -- accounts change now and then (a new version; sometimes frozen or closed)
            if r(15) == 0 then
                local a = accounts[2 + r(#accounts - 1)]
                a.version = a.version + 1
                local k = r(30)
                a.status = k == 0 and "closed" or k < 4 and "frozen" or "open"
            end
            -- the transfer: some postings in, conserving outputs out
            local t = { inputs = {}, outputs = {}, pins = {}, intent = "m:" .. step }
            local faults = {}
            local function fault(p) return r(100) < p end
            local consumed = {}
            -- mostly live postings; now and then a consumed one (PostingSpent)
            local live = {}
            for _, p in ipairs(postings) do
                if p.status ~= "inactive" then live[#live + 1] = p end
            end
            local n_in = #live > 0 and r(4) or 0
            local chosen = {}
            for _ = 1, n_in do
                local p = live[1 + r(#live)]
                if fault(2) then p = postings[1 + r(#postings)] end
                if not chosen[p] then
                    chosen[p] = true
                    consumed[#consumed + 1] = p
                end
            end
            local sums, order = {}, {}
            for _, p in ipairs(consumed) do
                local k = p.asset.code .. "/" .. p.asset.scale
                if not sums[k] then sums[k] = { asset = p.asset, v = 0 } order[#order + 1] = k end
                sums[k].v = sums[k].v + p.amount
            end
            if #consumed == 0 then -- an issuance from the world
                local amount = 1 + r(100000)
                local asset = r(2) == 0 and USD or EUR
                t.outputs[1] = { account = accounts[2 + r(5)].id, asset = asset, amount = amount }
                t.outputs[2] = { account = accounts[1].id, asset = asset, amount = -amount }
            end
            for _, k in ipairs(order) do
                local left = sums[k].v
                while left ~= 0 do
                    local part = (r(3) == 0 or left < 2) and left or 1 + r(math.abs(left))
                    if left < 0 and part > 0 then part = -part end
                    if math.abs(part) > math.abs(left) then part = left end
                    t.outputs[#t.outputs + 1] = { account = accounts[1 + r(#accounts)].id,
                                                   asset = sums[k].asset, amount = part }
                    left = left - part
                end
            end
            if #t.outputs == 0 and #consumed == 0 then
                t.outputs[1] = { account = accounts[2].id, asset = USD, amount = 1 }
            end
            -- faults, any number at once
            if fault(4) then -- an overdraft: a negative output balanced by a credit
                local a = accounts[1 + r(#accounts)]
                local x = 1 + r(3000)
                t.outputs[#t.outputs + 1] = { account = a.id, asset = USD, amount = -x }
                t.outputs[#t.outputs + 1] = { account = accounts[1 + r(#accounts)].id,
                                               asset = USD, amount = x }
                faults[#faults + 1] = "overdraft"
            end
            if fault(4) then
                t.outputs[1].amount = t.outputs[1].amount + 1
                if t.outputs[1].amount == 0 then t.outputs[1].amount = 2 end
                faults[#faults + 1] = "conservation"
            end
            if fault(3) then
                t.outputs[#t.outputs + 1] = { account = accounts[2].id, asset = USD3, amount = 5 }
                faults[#faults + 1] = "asset"
            end
            if fault(3) then
                t.outputs[1].account = id16(99) -- nobody's
                faults[#faults + 1] = "unknown account"
            end
            if fault(3) then
                t.inputs[#t.inputs + 1] = { transfer_id = string.rep("\255", 32), index = 7 }
                faults[#faults + 1] = "unknown posting"
            end
            for _, p in ipairs(consumed) do t.inputs[#t.inputs + 1] = p.id end
            table.sort(t.inputs, model.ref_less)
            -- pins: every involved account at its version, then perhaps faults
            local involved, seen = {}, {}
            for _, p in ipairs(consumed) do
                if not seen[p.account] then seen[p.account] = true involved[#involved + 1] = p.account end
            end
            for _, o in ipairs(t.outputs) do
                if not seen[o.account] then seen[o.account] = true involved[#involved + 1] = o.account end
            end
            for _, id in ipairs(involved) do
                local a = account(id)
                t.pins[#t.pins + 1] = { account = id, version = a and a.version or 1 }
            end
            if fault(3) and #t.pins > 0 then
                t.pins[1 + r(#t.pins)].version = 99
                faults[#faults + 1] = "stale pin"
            end
            if fault(3) and #t.pins > 0 then
                table.remove(t.pins, 1 + r(#t.pins))
                faults[#faults + 1] = "missing pin"
            end
            if fault(3) then
                local extra = accounts[1 + r(#accounts)].id
                if not seen[extra] then
                    t.pins[#t.pins + 1] = { account = extra, version = 1 }
                    faults[#faults + 1] = "extra pin"
                end
            end
            table.sort(t.pins, function(a, b) return model.bytes_less(a.account, b.account) end)
            -- balances of every pair, perhaps one missing
            local balances, have = {}, {}
            local function want(id, asset)
                local k = id .. asset.code .. asset.scale
                if not have[k] then
                    have[k] = true
                    balances[#balances + 1] = { account = id, asset = asset, amount = balance(id, asset) }
                end
            end
            for _, p in ipairs(consumed) do want(p.account, p.asset) end
            for _, o in ipairs(t.outputs) do want(o.account, o.asset) end
            if fault(3) and #balances > 0 then
                table.remove(balances, 1 + r(#balances))
                faults[#faults + 1] = "missing balance"
            end

            local plan, err = ledger.validate_and_plan(t, accounts, consumed, balances)
            local mplan, merr = model.validate(t, accounts, consumed, balances)
            local got = plan and "OK" or err:match("^(%w+):")
            local expect = mplan and "OK" or merr
            assert.are.equal(expect, got, string.format("step %d, faults {%s}", step,
                                                         table.concat(faults, ", ")))
            outcomes[got] = (outcomes[got] or 0) + 1
            if plan then
                assert.are.equal(#mplan.deltas, #plan.deltas, "step " .. step)
                for i, d in ipairs(plan.deltas) do
                    local m = mplan.deltas[i]
                    assert.are.same({ m.account, m.asset.code, m.before, m.debit, m.credit, m.after },
                                    { d.account, d.asset.code, d.before, d.debit, d.credit, d.after },
                                    "step " .. step .. " delta " .. i)
                end
                -- commit into the history, then recompute from postings alone
                for _, p in ipairs(consumed) do p.status = "inactive" end
                for i = 1, #t.outputs do
                    postings[#postings + 1] = ledger.output_posting(t, plan.transfer_id, i)
                end
                for _, d in ipairs(plan.deltas) do
                    assert.are.equal(d.after, balance(d.account, d.asset), "step " .. step)
                end
                committed = committed + 1
            end
        end
        -- every asset's postings still sum to zero: value only moved (LED-5)
        for _, asset in ipairs({ USD, EUR }) do
            local s = 0
            for _, a in ipairs(accounts) do s = s + balance(a.id, asset) end
            assert.are.equal(0, s)
        end
        local names = {}
        for k, v in pairs(outcomes) do names[#names + 1] = k .. "=" .. v end
        table.sort(names)
        print("# model: " .. table.concat(names, " "))
        assert.is_true(committed > STEPS / 5)
        for _, name in ipairs({ "ConservationViolated", "AccountVersionMismatch", "Unpinned",
                                "AccountFrozen", "UnknownPosting", "UnknownAccount",
                                "BalanceMissing", "AssetConflict", "PostingSpent",
                                "NegativePosting", "InsufficientFunds" }) do
            assert.is_true((outcomes[name] or 0) > 0, name .. " never happened")
        end
    end)
end)
