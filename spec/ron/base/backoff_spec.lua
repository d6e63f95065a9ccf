-- ron.base.backoff: jittered exponential backoff (seed 001 §5: base 50 ms, cap 5 s,
-- global op budget 10 s) — bounds of each jitter mode, the cap, determinism per seed, the
-- budget cutoff, option validation and the policy shape check.
local S = require("support")
local backoff = require("ron.base.backoff")
local exponential = backoff.exponential

local DRAWS = 2000

local function ceiling(a) return math.min(5000, 50 * 2 ^ (a - 1)) end

describe("ron.base.backoff.exponential", function()
    it("none: base * 2^(attempt-1), capped at cap_ms", function()
        local b = backoff.check(exponential.new { jitter = "none", seed = 1 })
        local got = {}
        for a = 1, 10 do got[a] = b:delay(a) end
        assert.same({ 50, 100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000 }, got)
        assert.equal(5000, b:delay(1000)) -- no overflow for huge attempts
    end)

    it("full: uniform in 0 .. min(cap, base*2^(a-1)), spread over the range", function()
        local b = exponential.new { jitter = "full", seed = 7 }
        for a = 1, 12 do
            local c = ceiling(a)
            local lo, hi, sum = math.huge, -1, 0
            for _ = 1, DRAWS do
                local d = b:delay(a)
                assert.equal(math.floor(d), d)
                assert.is_true(d >= 0 and d <= c and d <= 5000)
                lo, hi, sum = math.min(lo, d), math.max(hi, d), sum + d
            end
            assert.is_true(lo <= c * 0.05 and hi >= c * 0.95)
            assert.is_true(math.abs(sum / DRAWS - c / 2) <= c * 0.05) -- mean ~ c/2
        end
    end)

    it("equal: half fixed, half random: in ceil(c/2) .. c", function()
        local b = exponential.new { jitter = "equal", seed = 8 }
        for a = 1, 12 do
            local c = ceiling(a)
            local lo, hi = math.huge, -1
            for _ = 1, DRAWS do
                local d = b:delay(a)
                assert.is_true(d >= math.ceil(c / 2) and d <= c)
                lo, hi = math.min(lo, d), math.max(hi, d)
            end
            assert.is_true(lo <= math.ceil(c / 2) + c * 0.05 and hi >= c * 0.95)
        end
    end)

    it("decorrelated: min(cap, rand(base, prev*3)), reset by attempt 1 and reset()", function()
        local b = exponential.new { jitter = "decorrelated", seed = 9 }
        local reached_cap = false
        for _ = 1, 200 do
            local prev = 50
            for a = 1, 15 do
                local d = b:delay(a)
                assert.is_true(d >= 50 and d <= math.min(5000, prev * 3))
                if d == 5000 then reached_cap = true end
                prev = d
            end
            b:reset()
        end
        assert.is_true(reached_cap)
        -- the first delay of an operation is within base .. 3*base
        for _ = 1, DRAWS do
            b:reset()
            local d = b:delay(1)
            assert.is_true(d >= 50 and d <= 150)
        end
    end)

    it("is deterministic per seed and differs between seeds", function()
        for _, j in ipairs { "full", "equal", "decorrelated" } do
            local x, y, z = exponential.new { jitter = j, seed = 42 },
                            exponential.new { jitter = j, seed = 42 },
                            exponential.new { jitter = j, seed = 43 }
            local sx, sy, sz = {}, {}, {}
            for i = 1, 50 do
                local a = (i - 1) % 8 + 1
                sx[i], sy[i], sz[i] = x:delay(a), y:delay(a), z:delay(a)
            end
            assert.same(sx, sy)
            assert.are_not.same(sx, sz)
        end
    end)

    it("does not touch math.random's global state", function()
        math.randomseed(5)
        local before = { math.random(), math.random() }
        math.randomseed(5)
        local b = exponential.new { seed = 1 }
        for a = 1, 100 do b:delay(a % 8 + 1) end
        assert.same(before, { math.random(), math.random() })
    end)

    it("validates options: unknown keys, ranges, jitter names", function()
        S.refuses(exponential.new, {
            { { base = 50 }, "backoff.exponential.new: unknown option base" },
            { { jitter = "random" } },
            { { base_ms = 0 } },
            { { base_ms = 10, cap_ms = 5 } },
            { { seed = 1.5 } },
        })
        local b = exponential.new()
        assert.equal(50, b.base_ms)
        assert.equal(5000, b.cap_ms)
        assert.equal("full", b.jitter)
        assert.has_error(function() b:delay(0) end)
    end)
end)

describe("ron.base.backoff.within_budget", function()
    it("stops retrying before the op budget: the sum of delays never exceeds it", function()
        for _, j in ipairs { "none", "full", "equal", "decorrelated" } do
            for seed = 1, 50 do
                local b = exponential.new { jitter = j, seed = seed }
                local elapsed, attempt, try_ms = 0, 1, 7 -- each try itself takes 7 ms
                elapsed = elapsed + try_ms
                while true do
                    local d = backoff.within_budget(b, attempt, elapsed)
                    if not d then break end
                    elapsed = elapsed + d
                    assert.is_true(elapsed < backoff.OP_BUDGET_MS)
                    elapsed = elapsed + try_ms
                    attempt = attempt + 1
                end
                assert.is_true(elapsed <= backoff.OP_BUDGET_MS + try_ms)
                assert.is_true(attempt > 1)
            end
        end
    end)

    it("answers nil, Timeout when the next delay would pass the remaining budget", function()
        local b = exponential.new { jitter = "none", seed = 1 }
        assert.equal(800, backoff.within_budget(b, 5, 0, 1000))
        assert.same({ nil, "Timeout" }, { backoff.within_budget(b, 5, 200, 1000) })
        assert.same({ nil, "Timeout" }, { backoff.within_budget(b, 1, 10000) })
        assert.equal(50, backoff.within_budget(b, 1, 9949))
        assert.has_error(function() backoff.within_budget(b, 1, -1) end)
    end)

    it("checks an operator's own policy shape", function()
        local own = { delay = function() return 10 end, reset = function() end }
        assert.equal(own, backoff.check(own))
        assert.equal(10, backoff.within_budget(own, 1, 0, 100))
        assert.has_error(function() backoff.check { delay = function() end } end,
                         "ron.base.backoff: policy.reset must be a function, got nil")
        assert.has_error(function() backoff.check(3) end,
                         "ron.base.backoff: a policy must be a table, got number")
        local bad = { delay = function() return -1 end, reset = function() end }
        assert.has_error(function() backoff.within_budget(bad, 1, 0) end)
    end)
end)
