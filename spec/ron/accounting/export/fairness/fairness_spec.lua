-- ron.accounting.export.fairness: round-robin and WFQ router policies (seed 000 C-11, seed 001
-- §11), their bounds (cap -> Busy), option validation and the G-22-style starvation bound.
require("support")
local fairness = require("ron.accounting.export.fairness")
local rng = require("ron.base.rng")

local A, B, C, D = "tenant-a", "tenant-b", "tenant-c", "tenant-d"

local function drain(p)
    local out = {}
    while true do
        local item, tenant = p:dequeue()
        if item == nil then break end
        out[#out + 1] = tenant .. ":" .. item
    end
    return out
end

-- Max number of dequeues of other tenants between two services of `victim` (and before
-- its first), with `hot` holding 10x victim's items, interleaved by a seeded pattern.
local function starvation(p, hot, victim, n_victim, seed)
    local r = rng.new(seed)
    local hot_n, vic_n = 0, 0
    while hot_n < 10 * n_victim or vic_n < n_victim do
        if vic_n < n_victim and (hot_n >= 10 * n_victim or r:float() < 1 / 11) then
            vic_n = vic_n + 1
            assert(p:enqueue(victim, vic_n))
        else
            hot_n = hot_n + 1
            assert(p:enqueue(hot, hot_n))
        end
    end
    local worst, since = 0, 0
    local served = 0
    while true do
        local item, tenant = p:dequeue()
        if item == nil then break end
        if tenant == victim then
            served = served + 1
            assert.equal(served, item) -- FIFO within a tenant
            if since > worst then worst = since end
            since = 0
        elseif served < n_victim then
            since = since + 1
        end
    end
    assert.equal(n_victim, served)
    return worst
end

describe("ron.accounting.export.fairness.round_robin", function()
    it("rotates strictly over the tenants holding items, FIFO within each", function()
        local p = fairness.check(fairness.round_robin.new())
        for i = 1, 3 do assert.is_true(p:enqueue(A, i)) end
        assert.is_true(p:enqueue(B, 1))
        for i = 1, 2 do assert.is_true(p:enqueue(C, i)) end
        assert.equal(6, p:len())
        assert.same({ A, B, C }, p:tenants())
        assert.same({ "tenant-a:1", "tenant-b:1", "tenant-c:1", "tenant-a:2", "tenant-c:2",
                      "tenant-a:3" }, drain(p))
        assert.equal(0, p:len())
        assert.same({}, p:tenants())
        assert.is_nil(p:dequeue())
    end)

    it("puts a tenant that becomes active at the back of the rotation", function()
        local p = fairness.round_robin.new()
        p:enqueue(A, 1); p:enqueue(A, 2); p:enqueue(B, 1)
        assert.same({ 1, A }, { p:dequeue() })
        p:enqueue(C, 1)
        assert.same({ B, A, C }, p:tenants())
        assert.same({ "tenant-b:1", "tenant-a:2", "tenant-c:1" }, drain(p))
    end)

    it("is bounded: cap items, then Busy until one is dequeued", function()
        local p = fairness.round_robin.new { cap = 3 }
        assert.is_true(p:enqueue(A, 1))
        assert.is_true(p:enqueue(B, 1))
        assert.is_true(p:enqueue(A, 2))
        assert.same({ nil, "Busy" }, { p:enqueue(C, 1) })
        assert.equal(3, p:len())
        assert.equal(1, (p:dequeue()))
        assert.is_true(p:enqueue(C, 1))
        assert.equal(fairness.DEFAULT_CAP, 65536)
    end)

    it("G-22: a tenant with 10x the items delays another's next item by <= 1 dequeue",
       function()
        -- Bound for RR: k - 1 dequeues with k active tenants; here k = 2.
        local seed = 22
        print(("fairness RR starvation: seed %d"):format(seed))
        local worst = starvation(fairness.round_robin.new(), A, B, 200, seed)
        print(("fairness RR starvation: worst wait %d dequeues (bound 1)"):format(worst))
        assert.is_true(worst <= 1)
    end)

    it("rejects unknown options and bad values", function()
        assert.has_error(function() fairness.round_robin.new { capacity = 3 } end,
                         "fairness.round_robin.new: unknown option capacity")
        assert.has_error(function() fairness.round_robin.new { cap = 0 } end)
        assert.has_error(function() fairness.round_robin.new { cap = 1.5 } end)
        assert.has_error(function() fairness.round_robin.new "x" end)
        local p = fairness.round_robin.new()
        assert.has_error(function() p:enqueue(nil, 1) end)
        assert.has_error(function() p:enqueue(A, nil) end)
    end)
end)

describe("ron.accounting.export.fairness.wfq", function()
    it("serves backlogged tenants in proportion to their weights (+-10%)", function()
        local seed = 4242
        print(("fairness WFQ ratios: seed %d"):format(seed))
        local weights = { [A] = 1, [B] = 2, [C] = 4, [D] = 8 }
        local p = fairness.check(fairness.wfq.new { weights = weights })
        local r = rng.new(seed)
        local names = { A, B, C, D }
        local counts = { [A] = 0, [B] = 0, [C] = 0, [D] = 0 }
        local enq = { [A] = 0, [B] = 0, [C] = 0, [D] = 0 }
        -- Seeded arrivals, every tenant kept backlogged; then count the first N services.
        for _ = 1, 8000 do
            local t = names[r:int(1, 4)]
            enq[t] = enq[t] + 1
            assert(p:enqueue(t, enq[t]))
        end
        for _, t in ipairs(names) do
            for _ = 1, 3000 do enq[t] = enq[t] + 1; assert(p:enqueue(t, enq[t])) end
        end
        local N = 6000
        local last = {}
        for _ = 1, N do
            local item, t = p:dequeue()
            assert.is_true(item > (last[t] or 0)) -- FIFO within a tenant
            last[t] = item
            counts[t] = counts[t] + 1
        end
        for _, t in ipairs(names) do
            local expected = N * weights[t] / 15
            print(("fairness WFQ ratios: %s weight %d served %d expected %.0f"):format(
                  t, weights[t], counts[t], expected))
            assert.is_true(math.abs(counts[t] - expected) <= 0.1 * expected)
        end
    end)

    it("uses default_weight for tenants without a weight", function()
        local p = fairness.wfq.new { weights = { [A] = 3 }, default_weight = 1 }
        for i = 1, 6 do p:enqueue(A, i); p:enqueue(B, i) end
        assert.same({ "tenant-a:1", "tenant-a:2", "tenant-a:3", "tenant-b:1",
                      "tenant-a:4", "tenant-a:5", "tenant-a:6", "tenant-b:2" },
                    { unpack(drain(p), 1, 8) })
    end)

    it("G-22: a hot tenant (weight 8, 10x items) delays another's next item by <= 8", function()
        -- Bound for WFQ: the sum of the other active tenants' weights; here 8.
        local seed = 2222
        print(("fairness WFQ starvation: seed %d"):format(seed))
        local p = fairness.wfq.new { weights = { [A] = 8, [B] = 1 } }
        local worst = starvation(p, A, B, 200, seed)
        print(("fairness WFQ starvation: worst wait %d dequeues (bound 8)"):format(worst))
        assert.is_true(worst <= 8)
        -- Equal weights: the same bound as round-robin.
        local worst1 = starvation(fairness.wfq.new(), A, B, 200, seed)
        assert.is_true(worst1 <= 1)
    end)

    it("is bounded: cap items, then Busy", function()
        local p = fairness.wfq.new { cap = 2 }
        assert.is_true(p:enqueue(A, 1))
        assert.is_true(p:enqueue(A, 2))
        assert.same({ nil, "Busy" }, { p:enqueue(B, 1) })
        assert.same({ A }, p:tenants())
        p:dequeue()
        assert.is_true(p:enqueue(B, 1))
        assert.equal(2, p:len())
    end)

    it("rejects weights outside 1..8 and unknown options", function()
        assert.has_error(function() fairness.wfq.new { weights = { [A] = 0 } } end,
                         "fairness.wfq.new: weights[tenant-a] must be an integer in 1..8, got 0")
        assert.has_error(function() fairness.wfq.new { weights = { [A] = 9 } } end)
        assert.has_error(function() fairness.wfq.new { weights = { [A] = 2.5 } } end)
        assert.has_error(function() fairness.wfq.new { weights = { 3 } } end)
        assert.has_error(function() fairness.wfq.new { default_weight = 9 } end)
        assert.has_error(function() fairness.wfq.new { weight = { [A] = 2 } } end,
                         "fairness.wfq.new: unknown option weight")
    end)
end)

describe("ron.accounting.export.fairness.check", function()
    it("accepts an operator's own policy of the same shape and rejects others", function()
        local own = { enqueue = function() return true end, dequeue = function() end,
                      len = function() return 0 end, tenants = function() return {} end }
        assert.equal(own, fairness.check(own))
        assert.has_error(function() fairness.check(nil) end,
                         "ron.accounting.export.fairness: a policy must be a table, got nil")
        own.tenants = nil
        assert.has_error(function() fairness.check(own) end,
                         "ron.accounting.export.fairness: policy.tenants must be a function, got nil")
    end)
end)
