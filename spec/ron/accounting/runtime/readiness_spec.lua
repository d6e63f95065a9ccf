-- ron.accounting.runtime: readiness (C-6, I-8, G-5) and bus hooks (C-10), on the host's
-- loop (ctest lua-readiness-host: `ron-accounting run spec/run-busted.lua
-- spec/ron/accounting/runtime/readiness_spec.lua`). Same harness as runtime_spec.lua.
local S = require("support")
local uv = require("luv")
local runtime = require("ron.accounting.runtime")
local chaos = require("ron.accounting.export.exporters.chaos")

local T0 = S.T0

local run = S.run_task

local setup, eventually, window = S.rt_setup, S.eventually, S.rt_window

local FAST = { tick_ms = 5, op_budget_ms = 40, ready_backlog_p95 = 2,
               ready_ack_latency_p95_ms = 2000, degrade_after_ms = 50,
               health_interval_ms = 10, ready_samples = 8 }
local function opts(extra) return S.merge(FAST, extra) end

describe("ron.accounting.runtime readiness (C-6)", function()
    it("p95 of a bounded sample ring", function()
        local r = { n = 0, i = 0 }
        local rd = setmetatable({ cfg = { ready_samples = 20 } }, runtime._classes.Readiness)
        for v = 1, 100 do rd:sample(r, v) end
        assert.equal(20, r.n)
        assert.equal(99, runtime._p95(r)) -- samples 81..100: the ceil(0.95*20) = 19th
    end)

    it("a failing exporter degrades the runtime, records fail with DegradedExporter; healing clears it", function()
        local clock, m, dir, ledger = setup(11)
        local e = chaos.wrap(ledger, { seed = 11, failure_rate = 1, failure = "retry_remote_5xx" })
        local b = require("ron.base.backoff.exponential").new { base_ms = 2, cap_ms = 10,
                                                                     seed = 11 }
        local rt
        run(function(task)
            rt = runtime.start(opts { meter = m, exporter = e, backoff = b })
            assert.is_true((rt:ready()))
            for w = 1, 5 do window(m, clock, w) end
            assert.is_true(eventually(task, function() return m:degraded() end, 5000))
            local ready, reasons = rt:ready()
            assert.is_false(ready)
            assert.truthy(table.concat(reasons, ";"):find("backlog p95", 1, true))
            local ok, err = m:record(S.TENANTS[1], "bob", "bytes", 1)
            assert.is_nil(ok)
            assert.truthy(tostring(err):find("DegradedExporter", 1, true))
            assert.truthy(m:metrics():find("accounting_degraded 1", 1, true))
            assert.truthy(rt:metrics_text():find("accounting_ready 0", 1, true))
            e.failure_rate = 0 -- healed
            assert.is_true(eventually(task, function()
                return #m:pending() == 0 and not m:degraded() end, 10000))
            assert.is_true((rt:ready()))
            assert.truthy(m:metrics():find("accounting_degraded 0", 1, true))
            assert(m:record(S.TENANTS[1], "bob", "bytes", 1))
            S.rt_stop(rt)
        end)
        S.rt_done(m, dir)
    end)

    it("G-5: tiny caps under sustained input shed without deadlock; readiness flips and recovers", function()
        local clock, m, dir, ledger = setup(5)
        local e = chaos.wrap(ledger, { seed = 5, latency_ms = { 3, 6 } })
        local rt
        local saw_degraded, saw_unready, refused, recorded = false, false, 0, 0
        run(function(task)
            rt = runtime.start(opts { meter = m, exporter = e, ordered_buffer_cap = 1,
                                      pending_cap = 1 })
            local w = 0
            local t_end = uv.now() + 600
            while uv.now() < t_end do -- sustained: a window of 3 tenants x 4 dims every 10 ms
                w = w + 1
                clock.now = T0 + 60 * (w - 1) + 5
                for _, t in ipairs(S.TENANTS) do
                    for d = 1, 4 do
                        local ok, err = m:record(t, "user" .. d, "bytes", 1)
                        if ok then recorded = recorded + 1
                        elseif tostring(err):find("DegradedExporter", 1, true) then
                            refused = refused + 1
                        end
                    end
                end
                clock.now = T0 + 60 * w + 1
                task.sleep(10)
                if m:degraded() then saw_degraded = true end
                if not rt:ready() then saw_unready = true end
            end
            assert.is_true(eventually(task, function()
                return #m:pending() == 0 and not m:degraded() and (rt:ready()) end, 30000))
            S.rt_stop(rt)
        end)
        print(("G-5: recorded %d, refused (degraded) %d, shed busy %d order_overflow %d blocked %d")
              :format(recorded, refused, rt.rejected.busy, rt.rejected.order_overflow,
                      rt.rejected.blocked))
        assert.is_true(saw_degraded)
        assert.is_true(saw_unready)
        assert.is_true(rt.rejected.busy + rt.rejected.order_overflow > 0)
        assert.equal(0, #m:pending())
        S.rt_done(m, dir)
    end)
end)

describe("ron.accounting.runtime bus hooks (C-10)", function()
    it("SliceSealed then SliceExported, in order", function()
        local clock, m, _, ledger = setup()
        local got = {}
        run(function(task)
            local rt = runtime.start { meter = m, exporter = ledger, tick_ms = 5 }
            local sub = rt:subscribe(function(ev) got[#got + 1] = ev end)
            for w = 1, 4 do
                window(m, clock, w, { S.TENANTS[1] })
                -- SliceExported follows the meter ACK, which ack_task batches: wait for
                -- that event (not just the ledger's ok) before the next window seals
                assert.is_true(eventually(task, function() return #got == 2 * w end, 5000))
            end
            assert.equal(4, rt.exports.ok)
            sub:close()
            rt:stop()
            rt:wait()
            assert.equal(0, rt.bus_lagged)
        end)
        assert.equal(8, #got)
        for i = 1, 4 do
            local s, x = got[2 * i - 1], got[2 * i]
            assert.equal("SliceSealed", s.type)
            assert.equal(i, s.slice_id.seq)
            assert.equal(S.TENANTS[1], s.slice_id.tenant)
            assert.equal(64, #s.b3)
            assert.equal("SliceExported", x.type)
            assert.equal(i, x.slice_id.seq)
        end
        m:close()
    end)

    it("a slow subscriber with a tiny cap loses the oldest, counted, and never blocks sealing", function()
        local clock, m, _, ledger = setup()
        local got = {}
        local rt, sub
        run(function(task)
            rt = runtime.start { meter = m, exporter = ledger, tick_ms = 5 }
            sub = rt:subscribe(function(ev)
                got[#got + 1] = ev
                task.sleep(200)
            end, { cap = 2 })
            for w = 1, 5 do
                window(m, clock, w)
                assert.is_true(eventually(task, function() return rt.exports.ok == 3 * w end, 5000))
            end
            -- not a wall-clock bound (load): sealing that waited for the subscriber would
            -- have delivered every event and dropped none
            assert.is_true(sub.lagged > 0, "sealing/export was blocked by the subscriber")
            assert.equal(15, rt.exports.ok)
            rt:stop()
            rt:wait()
        end)
        assert.is_true(sub.lagged > 0)
        assert.equal(sub.lagged, rt.bus_lagged)
        assert.truthy(rt:metrics_text():find("accounting_bus_lagged_total " .. rt.bus_lagged, 1, true))
        -- what was delivered is in order: the newest survive
        for i = 2, #got do
            local a, b = got[i - 1], got[i]
            assert.is_true(a.type ~= b.type or a.slice_id.window_start_s <= b.slice_id.window_start_s)
        end
        m:close()
    end)
end)
