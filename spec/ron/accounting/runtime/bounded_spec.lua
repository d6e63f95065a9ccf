-- ron.accounting.runtime: batched ACKs with interval compaction, bounded dispatch
-- (inflight_cap, tenant_inflight_cap), bounded per-slice state. Run in the host (ctest
-- lua-runtime-bounded-host).
local S = require("support")
local runtime = require("ron.accounting.runtime")

local T0 = S.T0

local function setup() return S.rt_setup(nil, { fsync = false }) end

local function segments(wal)
    local out = S.run("ls " .. S.shell_quote(wal))
    local n = 0
    for _ in out:gmatch("%.seg") do n = n + 1 end
    return n
end

local function count(t)
    local n = 0
    for _ in pairs(t) do n = n + 1 end
    return n
end

-- Records windows 1..n for the tenants, then moves the clock past them (one rollover).
local function windows(m, clock, n, tenants)
    for w = 1, n do
        clock.now = T0 + 60 * (w - 1) + 5
        for _, t in ipairs(tenants) do assert(m:record(t, "alice", "bytes", w)) end
    end
    clock.now = T0 + 60 * n + 1
end

describe("ron.accounting.runtime (batched ACKs, bounded dispatch)", function()
    it("ACKs in batches; the WAL is compacted once the ACKs stop", function()
        local clock, m, dir, ledger, wal = setup()
        local rt
        S.run_task(function(task)
            rt = runtime.start { meter = m, exporter = ledger, tick_ms = 5,
                                 compact_interval_ms = 30 }
            windows(m, clock, 5, S.TENANTS)
            assert.is_true(S.eventually(task, function()
                return rt.acked_total == 15 and #m:pending() == 0 end, 5000))
            -- every segment fully ACKed: removed by the compaction owed after 30 ms idle
            assert.is_true(S.eventually(task, function() return segments(wal) == 0 end, 2000))
            S.rt_stop(rt)
        end)
        assert.equal(15, rt.exports.ok)
        assert.equal(0, count(rt.offered))
        assert.equal(0, count(rt.offered_at))
        S.rt_done(m, dir)
    end)

    it("ack_batch = 1 ACKs inline (one pool call per slice), same outcome", function()
        local clock, m, dir, ledger = setup()
        local rt
        S.run_task(function(task)
            rt = runtime.start { meter = m, exporter = ledger, tick_ms = 5, ack_batch = 1 }
            assert.is_nil(rt.ack_task)
            windows(m, clock, 3, S.TENANTS)
            assert.is_true(S.eventually(task, function()
                return rt.exports.ok == 9 and #m:pending() == 0 end, 5000))
            rt:stop()
            rt:wait()
        end)
        S.rt_done(m, dir)
    end)

    it("bounded dispatch: at most inflight_cap in flight, tenant_inflight_cap per tenant", function()
        local clock, m, dir, ledger = setup()
        local now, max_all, per, max_per = 0, 0, {}, 0
        local e = {
            put = function(_, s)
                now = now + 1
                per[s.tenant] = (per[s.tenant] or 0) + 1
                if now > max_all then max_all = now end
                if per[s.tenant] > max_per then max_per = per[s.tenant] end
                require("ron.base.task").sleep(3)
                local st, d = ledger:put(s)
                now = now - 1
                per[s.tenant] = per[s.tenant] - 1
                return st, d
            end,
            close = function() end,
        }
        local rt
        S.run_task(function(task)
            rt = runtime.start { meter = m, exporter = e, tick_ms = 5, inflight_cap = 2,
                                 tenant_inflight_cap = 1 }
            for w = 1, 4 do
                clock.now = T0 + 60 * (w - 1) + 5
                for _, t in ipairs(S.TENANTS) do
                    for _, d in ipairs { "bytes", "requests", "cpu_units" } do
                        assert(m:record(t, "alice", d, w))
                    end
                end
            end
            clock.now = T0 + 60 * 4 + 1
            assert.is_true(S.eventually(task, function()
                return rt.exports.ok == 36 and #m:pending() == 0 end, 10000))
            rt:stop()
            rt:wait()
        end)
        print(("max in flight %d (cap 2), per tenant %d (cap 1)"):format(max_all, max_per))
        assert.equal(2, max_all)
        assert.equal(1, max_per)
        assert.equal(0, rt.inflight)
        assert.equal(0, count(rt.tenant_inflight))
        S.rt_done(m, dir)
    end)

    it("stop with a backlog in the policy: the rest stays pending, nothing aborted", function()
        local clock, m, _, ledger = setup()
        local e = {
            put = function(_, s)
                require("ron.base.task").sleep(20)
                return ledger:put(s)
            end,
            close = function() end,
        }
        local rt, r
        S.run_task(function(task)
            rt = runtime.start { meter = m, exporter = e, tick_ms = 5, inflight_cap = 1 }
            windows(m, clock, 10, { S.TENANT_A })
            assert.is_true(S.eventually(task, function() return rt.exports.ok >= 1 end, 5000))
            rt:stop()
            r = rt:wait()
        end)
        assert.equal(0, r.aborted)
        assert.is_true(#m:pending() > 0)
        assert.equal(10, rt.exports.ok + #m:pending())
        m:close()
    end)

    it("rt.events stays within events_cap", function()
        local clock, m, _, ledger = setup()
        local rt
        S.run_task(function(task)
            rt = runtime.start { meter = m, exporter = ledger, tick_ms = 5, events_cap = 8 }
            windows(m, clock, 10, S.TENANTS)
            assert.is_true(S.eventually(task, function()
                return rt.acked_total == 30 end, 5000))
            rt:stop()
            rt:wait()
        end)
        assert.is_true(#rt.events <= 8 and #rt.events >= 4)
        local last = rt.events[#rt.events]
        assert.equal("acked", last[1])
        m:close()
    end)

    it("offload.file put_many answers, per slice, what put would", function()
        local clock, m, dir, ledger = setup()
        windows(m, clock, 2, { S.TENANT_A, S.TENANT_B })
        local sealed = assert(m:rollover())
        assert.equal(4, #sealed)
        local by = {}
        for _, s in ipairs(sealed) do by[s.tenant .. s.id.seq] = s end
        local a1, a2, b1 = by[S.TENANT_A .. 1], by[S.TENANT_A .. 2], by[S.TENANT_B .. 1]
        S.run_task(function()
            local r = assert(ledger:put_many { a2, b1 })
            assert.equal("gap", r[1][1])
            assert.equal("ok", r[2][1])
            r = assert(ledger:put_many { a1, b1 })
            assert.same({ "ok", "dup" }, { r[1][1], r[2][1] })
            r = assert(ledger:put_many { a2 })
            assert.equal("ok", r[1][1])
        end)
        S.rt_done(m, dir)
    end)

    it("offload.file's shared stream heads never hide another writer's appends", function()
        -- The pool threads share the heads offload.file learnt; another writer of the same
        -- ledger (another process, another exporter: G-16) is seen through the file size.
        local clock, m, dir, ledger = setup()
        windows(m, clock, 4, { S.TENANT_A })
        local sealed = assert(m:rollover())
        assert.equal(4, #sealed)
        local other = assert(require("ron.accounting.export.exporters.file").new { dir = dir,
                                                                             fsync = false })
        S.run_task(function()
            local r = assert(ledger:put_many { sealed[1] })
            assert.equal("ok", r[1][1])
            assert.equal("ok", (other:put(sealed[2]))) -- behind offload.file's back
            r = assert(ledger:put_many { sealed[2] })
            assert.equal("dup", r[1][1])
            r = assert(ledger:put_many { sealed[4] })
            assert.same({ "gap", "head is seq 2" }, r[1])
            assert.equal("ok", (assert(ledger:put(sealed[3]))))
            assert.equal("dup", (other:put(sealed[3])))
            -- many rounds, some with two puts of the stream in flight at once (the second
            -- goes without the shared head): the stream's puts land on any pool thread
            for _ = 1, 10 do
                local task = require("ron.base.task")
                local a = task.spawn("twin", function() return ledger:put_many { sealed[4] } end)
                r = assert(ledger:put_many { sealed[4] })
                local ok, ra = a:join()
                assert.is_true(ok)
                for _, x in ipairs { r[1][1], ra[1][1] } do
                    assert.truthy(x == "ok" or x == "dup", tostring(x))
                end
            end
            assert.same({ seq = 4, b3 = sealed[4].b3 },
                        assert(ledger:head(S.TENANT_A, "bytes")))
        end)
        other:close()
        S.rt_done(m, dir)
    end)

    it("rejects a bad inflight_cap", function()
        local _, m, _, ledger = setup()
        S.run_task(function()
            assert.has_error(function()
                runtime.start { meter = m, exporter = ledger, inflight_cap = 0 }
            end)
        end)
        m:close()
    end)
end)
