-- ron.wallet.breaker (WLT-8): closed -> open at the threshold within the window, open for
-- open_ms, half-open probes, a success closes, a failure reopens. Injected clock.
local breaker = require("ron.wallet.breaker")

describe("ron.wallet.breaker", function()
    local now
    local function new(o)
        o = o or {}
        o.clock = function() return now end
        return breaker.new(o)
    end
    before_each(function() now = 100000 end)

    it("opens at the threshold of failures within the window, not before", function()
        local b = new { threshold = 3, window_ms = 2000, open_ms = 5000, probes = 2 }
        b:record(false)
        b:record(false)
        b:record(true) -- successes do not reset a closed breaker's window
        assert.equal("closed", b:state())
        assert.is_true(b:allow())
        b:record(false)
        assert.equal("open", b:state())
        assert.is_false(b:allow())
        assert.equal(5, b:retry_after_s())
        now = now + 4001
        assert.equal(1, b:retry_after_s())
        assert.equal(1, b.opens_total)
    end)

    it("forgets failures older than the window", function()
        local b = new { threshold = 3, window_ms = 2000 }
        b:record(false)
        b:record(false)
        now = now + 3000
        b:record(false)
        assert.equal("closed", b:state())
        assert.equal(1, b:failures())
    end)

    it("half-open: a bounded number of probes; a success closes, a failure reopens", function()
        local b = new { threshold = 1, open_ms = 5000, probes = 2 }
        b:record(false)
        assert.equal("open", b:state())
        now = now + 5000
        assert.equal("half_open", b:state())
        assert.is_true(b:allow())
        assert.is_true(b:allow())
        assert.is_false(b:allow()) -- two probes in flight
        b:record(false)
        assert.equal("open", b:state())
        assert.equal(2, b.opens_total)
        now = now + 5000
        assert.is_true(b:allow())
        b:record(true)
        assert.equal("closed", b:state())
        assert.equal(0, b:failures())
        assert.is_true(b:allow())
    end)
end)
