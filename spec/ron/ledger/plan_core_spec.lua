-- A batch member's plan in the core (ron.ledger.engine.plan_core over rl_resolve_and_plan,
-- issue 25) against the long way (resolve.lua and validate_and_plan): each case plans the
-- same batch with the core and without it, compares the answers, and with plan_core.check
-- has every member the core planned planned the long way too and compared (a difference
-- raises). The seeded property of ledger_batch_spec runs with the check as well.
local L = require("ron.ledger.ledger")
local memory = require("ron.ledger.store.memory")
local sim = require("ron.ledger.sim")
local plan_core = require("ron.ledger.engine.plan_core")

local mv, EXT, RECV = sim.mv, sim.EXT, sim.RECV
local function id16(c) return string.rep(c, 16) end
local A, B, C, K = id16("A"), id16("B"), id16("C"), id16("K")

local function world()
    local store = memory.new()
    local led = L.new { store = store, book = "main", node = "n1", nonce = "p",
                        clock = function() return 1700000000000 end }
    for _, a in ipairs(sim.ACCOUNTS) do assert(led:create_account(a)) end
    return store, led
end

-- The batch's answers on a fresh world whose setup ran first: core on or off.
local function answers(core, setup, reqs)
    local was = plan_core.enabled
    plan_core.enabled = core
    local ok, res = pcall(function()
        local store, led = world()
        setup(led)
        local r = led:commit_many(reqs)
        assert(sim.verify(store, "main"))
        return r
    end)
    plan_core.enabled = was
    assert(ok, res)
    return res
end

local function same(a, b)
    assert.are.equal(#a, #b)
    for i = 1, #a do
        assert.are.equal(a[i][1] == nil, b[i][1] == nil, "member " .. i)
        if a[i][1] then
            assert.are.equal(a[i][1].transfer_id, b[i][1].transfer_id, "member " .. i)
        else
            assert.are.equal(a[i][3], b[i][3], "member " .. i)
        end
    end
end

describe("the core's plan (plan_core, rl_resolve_and_plan)", function()
    local was_check
    setup(function()
        was_check = plan_core.check
        plan_core.check = true
    end)
    teardown(function() plan_core.check = was_check end)

    it("picks from a payer's second page, drains a short payer onto its receivable, gives "
       .. "an uncapped source its own negative posting, and spends change within the batch, "
       .. "as resolve.lua does", function()
        -- A holds 40 postings of 1: paying 35 needs more than the first page (32)
        local function setup(led)
            for i = 1, 40 do assert(led:commit { intent = "d" .. i, movements = { mv(EXT, A, 1) } }) end
            assert(led:commit { intent = "b", movements = { mv(EXT, B, 10) } })
        end
        local reqs = {
            { intent = "p1", movements = { mv(A, C, 35) } },
            { intent = "p2", movements = { mv(B, C, 25) }, overdraft = { [B] = RECV } },
            { intent = "p3", movements = { mv(EXT, K, 7) } },
            { intent = "p4", movements = { mv(A, B, 3) } }, -- A's change from p1
            { intent = "p5", movements = { mv(C, A, 5), mv(A, B, 2) } },
        }
        local n0, u0 = plan_core.stats.planned or 0, plan_core.stats.Undecided or 0
        local core = answers(true, setup, reqs)
        local planned = (plan_core.stats.planned or 0) - n0
        local long = answers(false, setup, reqs)
        same(core, long)
        for i = 1, #reqs do assert(core[i][1], "member " .. i .. ": " .. tostring(core[i][2])) end
        -- all but the view's first short payer (p2): whether a finalizing saga credits it is
        -- read then, by the long way (Undecided), once per view
        assert.are.equal(#reqs - 1, planned)
        assert.are.equal(1, (plan_core.stats.Undecided or 0) - u0)
    end)

    it("plans a member whose payers hold more postings than its pool had room for (the pool "
       .. "grows, the member is marshalled again)", function()
        -- A and B hold 300 postings of 1 each: both lists (read whole past the first page)
        -- go into one call's pool
        local function setup(led)
            for i = 1, 300 do
                assert(led:commit { intent = "a" .. i, movements = { mv(EXT, A, 1) } })
                assert(led:commit { intent = "b" .. i, movements = { mv(EXT, B, 1) } })
            end
        end
        local reqs = { { intent = "p", movements = { mv(A, C, 40), mv(B, C, 40) } } }
        local n0 = plan_core.stats.planned or 0
        local core = answers(true, setup, reqs)
        assert.are.equal(1, (plan_core.stats.planned or 0) - n0)
        assert.truthy(core[1][1], tostring(core[1][2]))
        same(core, answers(false, setup, reqs))
    end)

    it("leaves rejections and races to the long way, with its codes", function()
        local function setup(led)
            assert(led:commit { intent = "a", movements = { mv(EXT, A, 5) } })
        end
        local reqs = {
            { intent = "r1", movements = { mv(A, C, 50) } }, -- short, no overdraft
            { intent = "r2", movements = { mv(A, id16("?"), 1) } }, -- no such account
            { intent = "r3", movements = { mv(A, C, 2) } },
        }
        local function refusals()
            local n = 0
            for k, v in pairs(plan_core.stats) do if k ~= "planned" then n = n + v end end
            return n
        end
        local r0 = refusals()
        local core = answers(true, setup, reqs)
        same(core, answers(false, setup, reqs))
        assert.is_nil(core[1][1])
        assert.is_nil(core[2][1])
        assert.truthy(core[3][1])
        -- r1 (the view's first short payer) and r2 (not in the view), in each plan made (a
        -- batch with a rejection is planned again from the store's accounts, LED-63)
        assert.is_true(refusals() - r0 >= 2)
    end)
end)
