-- ron.accounting.runtime: a stream never stalls silently (issue 14 items 1, 2, 4), on the
-- host's loop (ctest lua-stalls-host). Same harness as runtime_spec.lua: a meter with an
-- injected clock and a WAL, the runtime, a file ledger (offloaded) behind a wrapper that
-- misbehaves for one tenant.
local S = require("support")
local runtime = require("ron.accounting.runtime")
local rt_mod = require("ron.accounting.runtime.rt")
local offload = require("ron.accounting.runtime.offload")

local run, setup, eventually, window, verify =
      S.run_task, S.rt_setup, S.eventually, S.rt_window, S.verify

local FAST = { tick_ms = 5, op_budget_ms = 40, health_interval_ms = 10,
               degrade_after_ms = 60000 } -- the exporter-latency path stays out of the way

local function opts(extra) return S.merge(FAST, extra) end

-- The runtime's log lines while f runs.
local function logged(f)
    local lines, write = {}, rt_mod.write
    rt_mod.write = function(line) lines[#lines + 1] = line end
    local ok, err = pcall(f, lines)
    rt_mod.write = write
    if not ok then error(err, 0) end
    return lines
end

local function count(lines, needle)
    local n = 0
    for _, l in ipairs(lines) do if l:find(needle, 1, true) then n = n + 1 end end
    return n
end

local wrapped = S.wrapped_ledger

-- Inside the task: the stuck stream drains (rt.exports.ok reaches n, none stuck) and the
-- runtime is ready again.
local function unstuck(task, rt, n)
    assert.is_true(eventually(task, function()
        return rt.exports.ok == n and rt.stuck_n == 0 end, 5000))
    assert.is_true((rt:ready()))
end

describe("ron.accounting.runtime: stalls are loud (issue 14)", function()
    it("a local exporter failure counts as fail with its reason, not as retry_network", function()
        local clock, m, dir, ledger = setup()
        local raised = 0
        local e = wrapped(ledger, function()
            if raised < 3 then raised = raised + 1; error("disk on fire") end
            return false
        end)
        local rt
        local lines = logged(function()
            run(function(task)
                rt = runtime.start(opts { meter = m, exporter = e, op_budget_ms = 5000 })
                window(m, clock, 1)
                assert.is_true(eventually(task, function() return rt.exports.ok == 3 end, 5000))
                S.rt_stop(rt)
            end)
        end)
        assert.equal(3, rt.exports.fail)
        assert.equal(0, rt.exports.retry_network)
        assert.truthy(count(lines, "disk on fire") >= 1, table.concat(lines, "\n"))
        assert.truthy(rt:metrics_text():find('accounting_exports_total{status="fail"} 3', 1,
                                             true))
        S.rt_done(m, dir)
    end)

    it("a gap the op budget cannot fill: counted as gap, stuck (logged once with the remedy, "
       .. "readyz reason, per-stream gauge), and cleared when the stream advances", function()
        local clock, m, dir, ledger = setup()
        local e, hole = S.gapping_ledger(ledger, S.TENANTS[1], "head is 0")
        local rt
        local lines = logged(function(lines)
            run(function(task)
                rt = runtime.start(opts { meter = m, exporter = e })
                assert.is_true((rt:ready()))
                window(m, clock, 1)
                -- several budgets end on gap: still one STUCK line
                assert.is_true(eventually(task, function() return rt.given_up >= 3 end, 5000))
                assert.equal(1, rt.stuck_n)
                assert.equal(1, count(lines, "STUCK"))
                local ready, reasons = rt:ready()
                assert.is_false(ready)
                local want = ("1 stream stuck: %s/bytes at seq 1 (gap)"):format(S.TENANTS[1])
                assert.truthy(table.concat(reasons, ";"):find(want, 1, true),
                              table.concat(reasons, ";"))
                local text = rt:metrics_text()
                assert.truthy(text:find("accounting_streams_stuck 1\n", 1, true))
                assert.truthy(text:find(('accounting_stream_stuck{tenant="%s",dimension="bytes",'
                    .. 'reason="gap",seq="1"} 1'):format(S.TENANTS[1]), 1, true), text)
                assert.truthy(rt.exports.gap >= 3)
                assert.truthy(text:find('accounting_exports_total{status="gap"}', 1, true))
                assert.equal(2, rt.exports.ok) -- the other streams went on (P-3)
                hole.open = false -- the earlier seqs arrived downstream (or the loss was accepted)
                unstuck(task, rt, 3)
                S.rt_stop(rt)
            end)
        end)
        local stuck_line
        for _, l in ipairs(lines) do if l:find("STUCK", 1, true) then stuck_line = l end end
        assert.truthy(stuck_line:find("ron-accounting streams accept-loss", 1, true), stuck_line)
        assert.equal(1, count(lines, "advances again"))
        assert.truthy(rt:metrics_text():find("accounting_streams_stuck 0\n", 1, true))
        S.rt_done(m, dir)
    end)

    it("a conflict stops only that stream, as a stuck stream with its reason", function()
        local clock, m, _, ledger = setup()
        local e = S.conflicting_ledger(ledger, S.TENANTS[2])
        local rt
        local lines = logged(function()
            run(function(task)
                rt = runtime.start(opts { meter = m, exporter = e })
                window(m, clock, 1)
                assert.is_true(eventually(task, function()
                    return rt.exports.ok == 2 and rt.stuck_n == 1 end, 5000))
                local ready, reasons = rt:ready()
                assert.is_false(ready)
                assert.truthy(table.concat(reasons, ";"):find(
                    ("%s/bytes at seq 1 (conflict)"):format(S.TENANTS[2]), 1, true))
                S.rt_stop(rt)
            end)
        end)
        assert.equal(1, rt.exports.conflict)
        assert.equal(1, count(lines, "STUCK"))
        m:close()
    end)

    it("readiness includes the meter: a degraded meter and a failing rollover are reasons",
       function()
        local clock, m, _, ledger = setup()
        local rt
        local real = offload.rollover
        local lines = logged(function()
            run(function(task)
                rt = runtime.start(opts { meter = m, exporter = ledger })
                assert.is_true((rt:ready()))
                -- the core's flag (set by the WAL when it refuses rollovers)
                m:set_degraded(true)
                local ready, reasons = rt:ready()
                assert.is_false(ready)
                assert.truthy(table.concat(reasons, ";"):find("meter degraded", 1, true))
                assert.truthy(rt:metrics_text():find("accounting_ready 0", 1, true))
                m:set_degraded(false)
                assert.is_true((rt:ready()))
                -- a rollover that fails (a read-only disk, a segment in doubt)
                offload.rollover = function() return nil, "IoError: read-only file system" end
                window(m, clock, 1)
                assert.is_true(eventually(task, function() return rt.seal_err ~= nil end, 5000))
                ready, reasons = rt:ready()
                assert.is_false(ready)
                assert.truthy(table.concat(reasons, ";"):find(
                    "sealing fails: IoError: read-only file system", 1, true))
                task.sleep(50) -- many failing ticks
                offload.rollover = real
                assert.is_true(eventually(task, function()
                    return rt.seal_err == nil and rt.exports.ok == 3 end, 5000))
                assert.is_true((rt:ready()))
                S.rt_stop(rt)
            end)
        end)
        offload.rollover = real
        -- logged when it starts and when it ends, not on every failing tick
        assert.equal(1, count(lines, "rollover: IoError: read-only file system"))
        assert.equal(1, count(lines, "sealing works again"))
        m:close()
    end)

    it("a WAL segment lost in the middle: the stream is stuck on gap until the operator "
       .. "accepts the loss; then it goes on, and verify lists exactly the seqs given up",
       function()
        print("seed: none (no randomness)")
        local acct = require("ron.accounting")
        local clock = S.clock(S.T0 + 5)
        local wal = S.tmpname(".wal")
        local dir = S.tmpname(".ledger")
        local function open() return assert(acct.open(S.cfg { clock = clock.fn,
                                                              wal = { dir = wal } })) end
        -- three windows sealed by three rollovers: three segments, nothing exported yet
        local m = open()
        for w = 1, 3 do
            clock.now = S.T0 + 60 * (w - 1) + 5
            assert(m:record(S.TENANTS[1], "alice", "bytes", w))
            clock.now = S.T0 + 60 * w + 1
            m:rollover()
        end
        assert.equal(3, m:pending_count())
        m:close()
        local segs = {}
        for name in io.popen("ls " .. S.shell_quote(wal)):lines() do
            if name:match("^%x+%.seg$") then segs[#segs + 1] = name end
        end
        table.sort(segs)
        assert.equal(3, #segs)
        assert(os.remove(wal .. "/" .. segs[2])) -- seq 2 is gone
        m = open()
        assert.equal(2, m:pending_count())
        local ledger = assert(offload.file { dir = dir })
        local rt, r, err
        local lines = logged(function()
            run(function(task)
                rt = runtime.start(opts { meter = m, exporter = ledger })
                assert.is_true(eventually(task, function() return rt.stuck_n == 1 end, 5000))
                assert.equal(1, rt.exports.ok) -- seq 1
                local list = rt:stuck_list()
                assert.equal(1, #list)
                assert.same({ S.TENANTS[1], "bytes", "gap", 3 },
                            { list[1].tenant, list[1].dimension, list[1].reason, list[1].seq })
                -- refused where it does not apply
                r, err = rt:accept_loss(S.TENANTS[2], "bytes", "x")
                assert.is_nil(r)
                assert.truthy(err:find("^NotFound: stream "), err)
                r, err = rt:accept_loss(S.TENANTS[1], "bytes", "segment 2 deleted (spec)")
                assert.is_nil(err)
                assert.same({ from = 2, to = 2 }, r)
                unstuck(task, rt, 2)
                S.rt_stop(rt)
            end)
        end)
        assert.equal(0, m:pending_count())
        m:close()
        assert.equal(1, count(lines, "STUCK"))
        assert.equal(1, count(lines, "LOSS ACCEPTED: stream " .. S.TENANTS[1]
                                     .. "/bytes: seqs 2..2 (1 slices) given up by the operator "
                                     .. "(segment 2 deleted (spec)); their usage is unknown"))
        assert.equal(1, rt.losses_accepted)
        assert.equal(1, rt.lost_slices)
        -- the ledger: seq 1, the accepted loss of seq 2, seq 3; chain unbroken; totals 1 + 3
        local rc, out = verify(dir)
        assert.equal(0, rc, out)
        local bin = os.getenv("RA_BIN") or "build/ron-accounting"
        out = S.run(bin .. " verify --totals " .. S.shell_quote(dir))
        -- at the runtime's clock (now_s once went to the pool as an 11th argument, which
        -- luv dropped: the record said the wall clock's time)
        assert.truthy(out:find("LOSS ACCEPTED [^\n]*: seqs 2%.%.2 given up by the operator at "
                               .. clock.now .. " UTC s: segment 2 deleted %(spec%)"), out)
        assert.truthy(out:find("accepted losses 1 seqs given up", 1, true), out)
        assert.truthy(out:find(" bytes 4 (2 slices", 1, true), out)
        assert.truthy(out:find("\nOK", 1, true), out)
    end)

    it("a forward clock step is held at the monotonic clock's time, logged, counted, a "
       .. "readiness reason; sealing follows the clock again when it comes back, or once the "
       .. "step lasted clock_step_confirm_ms", function()
        local clock, m, dir, ledger = setup()
        local mono = 0
        local rt
        local function sealed_through()
            return tonumber(m:metrics():match("accounting_sealed_through_window (%-?%d+)"))
        end
        local lines = logged(function()
            run(function(task)
                rt = runtime.start(opts { meter = m, exporter = ledger, clock = clock.fn,
                                          mono = function() return mono end,
                                          clock_step_confirm_ms = 600000 })
                clock.now = S.T0 + 5
                for _, t in ipairs(S.TENANTS) do assert(m:record(t, "alice", "bytes", 1)) end
                task.sleep(30) -- a few ticks: the guard has its base
                -- +1 day on the wall clock, one second on the monotonic clock
                clock.now, mono = S.T0 + 86400 + 6, 1000
                assert.is_true(eventually(task, function() return rt.clock_steps == 1 end, 5000))
                task.sleep(30)
                assert.equal(0, m:pending_count()) -- window 1 has not ended by monotonic time
                assert.is_true(sealed_through() < math.floor((S.T0 + 60) / 60) + 1)
                local ready, reasons = rt:ready()
                assert.is_false(ready)
                assert.truthy(table.concat(reasons, ";"):find("the clock is 86400 s ahead of "
                    .. "the monotonic clock", 1, true), table.concat(reasons, ";"))
                -- the clock comes back; window 1 has ended: sealed and exported on time
                clock.now, mono = S.T0 + 61, 56000
                assert.is_true(eventually(task, function() return rt.exports.ok == 3 end, 5000))
                assert.is_true((rt:ready()))
                assert.equal(math.floor((S.T0 + 61) / 60) - 1, sealed_through())
                -- a step that stays (a slow clock corrected by an hour) is taken after
                -- clock_step_confirm_ms of monotonic time
                clock.now, mono = S.T0 + 3600 + 62, 57000
                assert.is_true(eventually(task, function() return rt.clock_steps == 2 end, 5000))
                task.sleep(30)
                assert.equal(math.floor((S.T0 + 61) / 60) - 1, sealed_through())
                mono = 57000 + 600000
                assert.is_true(eventually(task, function()
                    return sealed_through() == math.floor((S.T0 + 3600 + 62) / 60) - 1 end, 5000))
                assert.is_true((rt:ready()))
                S.rt_stop(rt)
            end)
        end)
        assert.equal(2, count(lines, "the clock stepped forward by"))
        assert.equal(1, count(lines, "the clock is back"))
        assert.equal(1, count(lines, "taken as the new time"))
        assert.truthy(rt:metrics_text():find("accounting_clock_steps_total 2\n", 1, true))
        S.rt_done(m, dir)
    end)
end)
