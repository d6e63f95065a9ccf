-- ron.accounting.runtime: the export pipeline on the host's loop (issue 4). Run in the
-- host (ctest lua-runtime-host: `ron-accounting run spec/run-busted.lua
-- spec/ron/accounting/runtime/runtime_spec.lua`). Each case: a fresh task module, a meter with an
-- injected clock and a WAL, the runtime, a file ledger (offloaded) in a temp dir; the body
-- runs as a task; the loop runs to its end; no task may be left live.
local S = require("support")
local uv = require("luv")
local runtime = require("ron.accounting.runtime")
local chaos = require("ron.accounting.export.exporters.chaos")

local T0 = S.T0

local run = S.run_task

local setup, eventually, window, verify = S.rt_setup, S.eventually, S.rt_window, S.verify

local in_seq_order = S.in_seq_order

describe("ron.accounting.runtime", function()
    it("refuses any exporter that declares blocking = true (exporters.file does)", function()
        local _, m, dir = setup()
        local plain = assert(require("ron.accounting.export.exporters.file").new { dir = dir })
        local msg = "runtime.start: the exporter blocks the loop (blocking = true); run it on "
                    .. "the libuv threadpool (for exporters.file: offload.file { dir = ... })"
        local own = { blocking = true, put = function() return "ok" end, close = function() end }
        run(function()
            assert.has_error(function() runtime.start { meter = m, exporter = plain } end, msg)
            assert.has_error(function() runtime.start { meter = m, exporter = own } end, msg)
            assert.has_error(function()
                runtime.start { meter = m, exporter = { blocking = "yes", put = own.put,
                                                        close = own.close } }
            end, "ron.accounting.export.exporters: exporter.blocking must be a boolean or "
                 .. "nil, got string")
        end)
        m:close()
    end)

    it("end to end: every slice lands in the ledger once, in order; pending empties", function()
        local clock, m, dir, ledger = setup()
        local rt
        run(function(task)
            rt = runtime.start { meter = m, exporter = ledger, tick_ms = 5 }
            for w = 1, 5 do
                window(m, clock, w)
                assert.is_true(eventually(task, function()
                    return rt.exports.ok == 3 * w and #m:pending() == 0 end, 5000))
            end
            rt:stop()
            local r = rt:wait()
            assert.equal(0, r.aborted)
        end)
        for _, t in ipairs(S.TENANTS) do
            local h = assert(require("ron.accounting.export.exporters.file").new { dir = dir }
                :head(t, "bytes"))
            assert.equal(5, h.seq)
        end
        assert.equal(0, #m:pending())
        assert.equal(15, rt.exports.ok)
        assert.equal(0, rt.exports.dup)
        assert.is_true(in_seq_order(rt))
        assert.equal(0, (verify(dir)))
        assert.truthy(rt:metrics_text():find('accounting_exports_total{status="ok"} 15', 1, true))
        m:close()
    end)
    it("G-4: N+1 is exported only after N's ACK (N delayed)", function()
        local clock, m, dir, ledger = setup()
        local log = {}
        local slow = {
            put = function(_, sl)
                local task = require("ron.base.task")
                log[#log + 1] = { "start", sl.id.seq }
                if sl.id.seq == 1 then task.sleep(100) end
                local st, d = ledger:put(sl)
                log[#log + 1] = { "end", sl.id.seq, st }
                return st, d
            end,
            close = function() end,
        }
        local rt
        run(function(task)
            rt = runtime.start { meter = m, exporter = slow, tick_ms = 5 }
            clock.now = T0 + 5
            assert(m:record(S.TENANTS[1], "alice", "bytes", 1))
            clock.now = T0 + 65
            assert(m:record(S.TENANTS[1], "alice", "bytes", 2))
            clock.now = T0 + 121 -- both windows seal in one rollover: N+1 ready with N
            assert.is_true(eventually(task, function()
                return rt.exports.ok == 2 and #m:pending() == 0 end, 5000))
            rt:stop()
            rt:wait()
        end)
        assert.same({ { "start", 1 }, { "end", 1, "ok" }, { "start", 2 }, { "end", 2, "ok" } },
                    log)
        S.rt_done(m, dir, rt)
    end)

    it("G-4: a tiny ordered_buffer_cap sheds with OrderOverflow, never out of order", function()
        local clock, m, dir, ledger = setup()
        local slow = chaos.wrap(ledger, { seed = 1, latency_ms = { 5, 5 } })
        local rt
        run(function(task)
            rt = runtime.start { meter = m, exporter = slow, tick_ms = 5,
                                 ordered_buffer_cap = 1 }
            for w = 1, 8 do
                clock.now = T0 + 60 * (w - 1) + 5
                assert(m:record(S.TENANTS[1], "alice", "bytes", w))
            end
            clock.now = T0 + 60 * 8 + 1
            assert.is_true(eventually(task, function()
                return rt.exports.ok == 8 and #m:pending() == 0 end, 10000))
            rt:stop()
            rt:wait()
        end)
        assert.is_true(rt.rejected.order_overflow > 0)
        assert.truthy(rt:metrics_text():find('accounting_rejected_total{reason="order_overflow"} '
                                             .. rt.rejected.order_overflow, 1, true))
        assert.equal(8, rt.exports.ok)
        S.rt_done(m, dir, rt)
    end)

    it("G-9: 20% failures and latency: sealing continues, all drains once healthy", function()
        local seed = 7
        local clock, m, dir, ledger = setup(seed)
        local e = chaos.wrap(ledger, { seed = seed, failure_rate = 0.2, latency_ms = { 1, 5 },
                                       lost_ack_rate = 0.05 })
        local b = require("ron.base.backoff.exponential").new {
            base_ms = 2, cap_ms = 20, seed = seed }
        local rt
        run(function(task)
            rt = runtime.start { meter = m, exporter = e, backoff = b, tick_ms = 5 }
            for w = 1, 10 do
                window(m, clock, w)
                task.sleep(10)
            end
            e.failure_rate, e.lost_ack_rate = 0, 0 -- healthy again
            assert.is_true(eventually(task, function()
                return rt.exports.ok + rt.exports.dup >= 30 and #m:pending() == 0 end, 20000))
            rt:stop()
            rt:wait()
        end)
        local st = e:stats()
        assert.is_true(st.failure > 0)
        assert.is_true(rt.exports.retry_network > 0)
        assert.is_true(rt.retries > 0)
        for _, t in ipairs(S.TENANTS) do
            local h = assert(require("ron.accounting.export.exporters.file").new { dir = dir }
                :head(t, "bytes"))
            assert.equal(10, h.seq)
        end
        S.rt_done(m, dir, rt)
    end)

    it("retries stop within the global op budget (+-10%)", function()
        local seed = 3
        local clock, m, _, ledger = setup(seed)
        local e = chaos.wrap(ledger, { seed = seed, failure_rate = 1, failure = "retry_remote_5xx" })
        local b = require("ron.base.backoff.exponential").new {
            base_ms = 5, cap_ms = 40, seed = seed }
        local rt
        local BUDGET = 400
        run(function(task)
            rt = runtime.start { meter = m, exporter = e, backoff = b, tick_ms = 5,
                                 op_budget_ms = BUDGET }
            window(m, clock, 1, { S.TENANTS[1] })
            assert.is_true(eventually(task, function() return rt.given_up > 0 end, 5000))
            rt:stop()
            rt:wait()
        end)
        local fail
        for _, ev in ipairs(rt.events) do if ev[1] == "fail" then fail = ev break end end
        assert.truthy(fail)
        print(("op ended after %.1f ms (budget %d)"):format(fail[4], BUDGET))
        assert.is_true(fail[4] >= BUDGET * 0.9 and fail[4] <= BUDGET * 1.1)
        assert.is_true(rt.exports.retry_remote_5xx > 1)
        assert.equal(1, #m:pending()) -- still pending: retried later, nothing lost
        m:close()
    end)

    it("shutdown: rt:stop() drains within the deadline, no task leak", function()
        local clock, m, dir, ledger = setup(1)
        -- 100 ms per put: the 30 slices would take 3 s; the 300 ms deadline cuts that short
        local e = chaos.wrap(ledger, { seed = 1, latency_ms = { 100, 100 } })
        local rt, elapsed, r
        local task = run(function(task)
            rt = runtime.start { meter = m, exporter = e, tick_ms = 5, drain_deadline_ms = 300 }
            for w = 1, 30 do
                clock.now = T0 + 60 * (w - 1) + 5
                assert(m:record(S.TENANTS[1], "alice", "bytes", w))
            end
            clock.now = T0 + 60 * 30 + 1
            assert.is_true(eventually(task, function() return rt.exports.ok > 0 end, 5000))
            local t0 = uv.now()
            rt:stop()
            r = rt:wait()
            elapsed = uv.now() - t0
        end)
        print(("drain took %d ms, finished %d, aborted %d"):format(elapsed, r.finished, r.aborted))
        -- bounded by the deadline, not by the backlog (3 s); generous for a loaded machine
        assert.is_true(elapsed < 1500, "drain took " .. elapsed .. " ms")
        assert.is_true(r.aborted >= 1) -- the put in flight at the deadline
        assert.equal(0, task.live())
        -- nothing lost, nothing twice: every slice is either ACKed on the meter or still
        -- pending (and in the WAL) for the next start; an export answered ok whose batched
        -- meter ACK had not run yet stays pending too (the ledger answers dup next time)
        local head = require("ron.accounting.export.exporters.file").new { dir = dir }
                         :head(S.TENANTS[1], "bytes")
        local covered = {}
        for q = 1, head and head.seq or 0 do covered[q] = true end
        for _, sl in ipairs(m:pending()) do covered[sl.id.seq] = true end
        for q = 1, 30 do assert.is_true(covered[q], "slice " .. q .. " lost") end
        S.rt_done(m, dir) -- the ledger holds one chain, each seq once
    end)

    -- The loop thread's per-slice paths must stay compilable (issue 4's throughput came
    -- from this): LuaJIT 2.1 does not compile the returns of a function that makes a
    -- closure (UCLO, FNEW), nor a { ... } constructor (VARG); a trace that meets one
    -- aborts, and the path runs interpreted. Observed with jit.attach over 2000 slices.
    it("the per-slice paths of the loop thread compile: no closure or vararg aborts", function()
        local util, vmdef = require("jit.util"), require("jit.vmdef")
        local function upvalue(fn, name)
            for i = 1, 64 do
                local n, v = debug.getupvalue(fn, i)
                if n == nil then break end
                if n == name then return v end
            end
            error("no upvalue " .. name)
        end
        local clock, m, dir, ledger = setup()
        local tenants = {}
        for i = 1, 40 do tenants[i] = ("00000000-0000-4000-8000-%012x"):format(0x100 + i) end
        local guarded, aborts, started = {}, {}, 0
        local function on_trace(what, _, func, pc, otr, oex)
            if what == "start" then started = started + 1 end
            if what ~= "abort" or not guarded[func] then return end
            local msg = vmdef.traceerr[otr] or tostring(otr)
            if type(oex) == "number" and msg:find("bytecode", 1, true) then
                local op = vmdef.bcnames:sub(oex * 6 + 1, oex * 6 + 6):gsub(" ", "")
                if op == "UCLO" or op == "FNEW" or op == "VARG" then
                    aborts[#aborts + 1] = ("%s (%s) at %s"):format(op, guarded[func],
                                                                   util.funcinfo(func, pc).loc)
                end
            end
        end
        run(function(task)
            local C, ch = runtime._classes, task.channel(1)
            local Channel = getmetatable(ch)
            local hand_over = upvalue(Channel.try_send, "hand_over")
            local wait = require("ron.base.task.wait")
            local ready = require("ron.base.task.ready")
            for name, fn in pairs {
                ["Router:stream"] = C.Router.stream, ["Router:route"] = C.Router.route,
                ["Router:admit"] = C.Router.admit, ["Router:dispatch"] = C.Router.dispatch,
                ["Workers:put"] = C.Workers.put, ["Puts:put"] = C.Puts.put,
                ["Router:done"] = C.Router.done, ["Workers:export_one"] = C.Workers.export_one,
                ["Offers:offer"] = C.Offers.offer, ["Offers:route_check"] = C.Offers.route_check,
                ["Offers:delivered"] = C.Offers.delivered, ["Offers:acked"] = C.Offers.acked,
                ["ch:recv"] = Channel.recv,
                ["ch:try_send"] = Channel.try_send, hand_over = hand_over, wake = wait.wake,
                unwait = wait.unwait, schedule = ready.schedule,
                select_recv = upvalue(Channel.recv, "select_recv"), block = wait.block,
                run_ready = ready.run,
            } do
                guarded[fn] = name
            end
            local rt = runtime.start { meter = m, exporter = ledger, tick_ms = 1 }
            jit.flush()
            jit.attach(on_trace, "trace")
            for w = 1, 50 do
                window(m, clock, w, tenants)
                assert.is_true(eventually(task, function()
                    return rt.exports.ok == 40 * w end, 10000), "window " .. w)
            end
            jit.attach(on_trace)
            S.rt_stop(rt)
        end)
        assert.is_true(started > 0, "no trace was recorded at all")
        assert.same({}, aborts)
        S.rt_done(m, dir)
    end)
end)
