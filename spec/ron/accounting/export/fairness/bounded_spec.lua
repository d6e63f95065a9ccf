-- The policy features the runtime's bounded dispatch uses (docs/CONCURRENCY.md §7):
-- tenant_cap, p:dequeue(eligible), p:len(tenant). Plain busted (no loop needed).
local S = require("support")
local fairness = require("ron.accounting.export.fairness")
local _ = S

local function drain(p, eligible, n)
    local out = {}
    for _ = 1, n or 1e9 do
        local item, t = p:dequeue(eligible)
        if not item then break end
        out[#out + 1] = t .. item
    end
    return table.concat(out, " ")
end

describe("fairness policies: bounded dispatch support", function()
    print("seed: none (no randomness)")
    for _, name in ipairs { "round_robin", "wfq" } do
        local mod = fairness[name]

        it(name .. ": tenant_cap bounds one tenant's items, not the others'", function()
            local p = mod.new { cap = 10, tenant_cap = 2 }
            assert.is_true(p:enqueue("a", 1))
            assert.is_true(p:enqueue("a", 2))
            local ok, err = p:enqueue("a", 3)
            assert.is_nil(ok)
            assert.equal("Busy", err)
            assert.is_true(p:enqueue("b", 1))
            assert.equal(2, p:len("a"))
            assert.equal(1, p:len("b"))
            assert.equal(0, p:len("c"))
            assert.equal(3, p:len())
            assert.has_error(function() mod.new { tenant_cap = 0 } end)
        end)

        it(name .. ": dequeue(eligible) skips a tenant, which keeps its place", function()
            local p = mod.new()
            for i = 1, 2 do
                assert(p:enqueue("a", i))
                assert(p:enqueue("b", i))
                assert(p:enqueue("c", i))
            end
            local function not_a(t) return t ~= "a" end
            assert.equal("b1 c1", drain(p, not_a, 2))
            -- a was skipped, not moved: it is served first once eligible
            assert.equal("a1", drain(p, nil, 1))
            assert.equal("", drain(p, function() return false end))
            assert.equal(3, p:len())
            assert.equal(3, #p:tenants())
        end)
    end

    it("wfq: a skipped tenant keeps its credit", function()
        local p = fairness.wfq.new { weights = { a = 3 } }
        for i = 1, 4 do assert(p:enqueue("a", i)); assert(p:enqueue("b", i)) end
        assert.equal("a1", drain(p, nil, 1)) -- a's turn: 3 credits, 2 left
        assert.equal("b1", drain(p, function(t) return t == "b" end, 1))
        assert.equal("a2 a3 b2", drain(p, nil, 3)) -- a spends its 2 credits, then b
    end)
end)
