-- G-11 (seed 000 §4, PRODUCT.md §7): the performance smoke. Its figures are measured and
-- printed, never asserted against a clock (a shared CI machine would make that a coin toss);
-- what is asserted is that the measurement itself works: the record path samples its
-- latency into the histogram at the documented rate, and a 10k-row seal seals every row.
-- The benchmarks with same-run baselines (tests/bench, `make bench`) and ctest
-- "G-11 performance smoke" (each benchmark with --quick) give the full figures.
require("support")
local acct = require("ron.accounting")
local uv = require("luv")

local T0 = 1700000000 - 1700000000 % 3600
local SAMPLE_EVERY = 1024 -- RA_LAT_SAMPLE_SHIFT (core/internal.h): one record in 1024 timed

local function histogram(m)
    local text = assert(m:metrics())
    local count = tonumber(text:match("\naccounting_record_latency_seconds_count (%d+)"))
    local buckets = {}
    for le, n in text:gmatch('accounting_record_latency_seconds_bucket{le="([^"]+)"} (%d+)') do
        buckets[#buckets + 1] = { le = le, n = tonumber(n) }
    end
    return count, buckets
end

describe("G-11 performance smoke", function()
    it("G-11 performance smoke: record latency is sampled one in 1024 and its p95 printed "
       .. "against the 20 us target", function()
        local clock = { now = T0 + 5 }
        local m = assert(acct.open { capacity_rows = 4096, shards = 4, window_len_s = 60,
                                     host = "g11", clock = function() return clock.now end })
        local N = 200 * SAMPLE_EVERY
        local keys = {}
        for i = 1, 1000 do keys[i] = ("s%d"):format(i) end
        local T = "123e4567-e89b-12d3-a456-426614174000"
        local t0 = uv.hrtime()
        for i = 1, N do assert(m:record(T, keys[i % 1000 + 1], "bytes", 1)) end
        local wall_ns = uv.hrtime() - t0
        local count, buckets = histogram(m)
        -- The thread's sampling tick carries over from earlier records in this process:
        -- N records give floor(N / 1024) samples, or one more.
        assert.is_true(count == N / SAMPLE_EVERY or count == N / SAMPLE_EVERY + 1,
                       "samples: " .. tostring(count))
        local p95
        for _, b in ipairs(buckets) do
            if not p95 and b.n >= 0.95 * count then p95 = b.le end
        end
        assert.truthy(p95)
        print(("G-11: %d records through the Lua binding in %.1f ms (%.0f ns each); record p95 "
               .. "<= %s s by the core's histogram (%d samples); target 20 us (PRODUCT.md §7)")
              :format(N, wall_ns / 1e6, wall_ns / N, p95, count))
        m:close()
    end)

    it("G-11 performance smoke: sealing 10k rows seals every row; the cost is printed against "
       .. "the 50 ms target", function()
        local clock = { now = T0 + 5 }
        local m = assert(acct.open { capacity_rows = 10240, shards = 4, window_len_s = 60,
                                     host = "g11", clock = function() return clock.now end })
        local T = "123e4567-e89b-12d3-a456-426614174000"
        for i = 1, 10000 do assert(m:record(T, ("u%d"):format(i), "bytes", i)) end
        clock.now = T0 + 61
        local t0 = uv.hrtime()
        local sealed = assert(m:rollover(T0 + 61))
        local ms = (uv.hrtime() - t0) / 1e6
        local rows, total = 0, 0
        for _, s in ipairs(sealed) do
            rows = rows + #s.rows
            for _, r in ipairs(s.rows) do total = total + tonumber(r.inc) end
        end
        assert.equal(10000, rows)
        assert.equal(10000 * 10001 / 2, total)
        print(("G-11: sealed 10000 rows into %d slice(s) in %.1f ms; target 50 ms "
               .. "(PRODUCT.md §7)"):format(#sealed, ms))
        m:close()
    end)
end)
