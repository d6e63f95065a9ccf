-- ron.base.percentile: the nearest-rank rule the readiness p95 and the benchmarks share.
local percentile = require("ron.base.percentile")

describe("ron.base.percentile", function()
    it("answers the nearest rank: the smallest value with q of the values at or below", function()
        local v = { 5, 1, 4, 2, 3 }
        assert.equal(3, percentile(v, 0.5))
        assert.equal(5, percentile(v, 0.95))
        assert.equal(5, percentile(v, 1))
        assert.equal(1, percentile(v, 0.01))
        assert.same({ 5, 1, 4, 2, 3 }, v) -- a copy is sorted, never the caller's list
    end)

    it("reads only values[1..n] when n is given (a sample ring), 0 for none", function()
        local ring = { 9, 1, 100, n = 2, i = 2 }
        assert.equal(9, percentile(ring, 0.95, ring.n))
        assert.equal(0, percentile({}, 0.5))
        assert.equal(0, percentile({ 7 }, 0.5, 0))
    end)
end)
