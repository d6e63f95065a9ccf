-- ron.base.rng: the seeded generator behind backoff jitter and chaos faults.
require("support")
local rng = require("ron.base.rng")

describe("ron.base.rng", function()
    it("is deterministic per seed and differs between seeds", function()
        local a, b, c = rng.new(1), rng.new(1), rng.new(2)
        local sa, sb, sc = {}, {}, {}
        for i = 1, 100 do sa[i], sb[i], sc[i] = a:float(), b:float(), c:float() end
        assert.same(sa, sb)
        assert.are_not.same(sa, sc)
    end)

    it("draws floats in [0, 1) and integers uniformly in lo..hi", function()
        local r = rng.new(12345)
        local counts, N = {}, 60000
        for _ = 1, N do
            local f = r:float()
            assert.is_true(f >= 0 and f < 1)
            local v = r:int(1, 6)
            counts[v] = (counts[v] or 0) + 1
        end
        for v = 1, 6 do assert.is_true(math.abs(counts[v] - N / 6) <= N / 6 * 0.05) end
        assert.equal(3, r:int(3, 3))
    end)

    it("accepts negative and large integer seeds, rejects others", function()
        assert.is_number(rng.new(-5):float())
        assert.is_number(rng.new(2 ^ 52):float())
        assert.has_error(function() rng.new(1.5) end)
        assert.has_error(function() rng.new("1") end)
        assert.has_error(function() rng.new(0 / 0) end)
    end)
end)
