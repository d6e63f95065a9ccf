-- ron.accounting.runtime: the audit hooks (AUD-I-21, issue 16 phase 2). A runtime started
-- with opts.audit = function(kind, attrs) hands every export outcome other than ok/dup,
-- every op given up at its budget, stuck and unstuck streams, sheds and readiness flips to
-- it, each with {tenant, dimension, reason/outcome, seq} where it has them. Same harness as
-- stalls_spec.lua (a meter with an injected clock and a WAL, an offloaded file ledger
-- behind a wrapper that misbehaves for one tenant).
local S = require("support")
local runtime = require("ron.accounting.runtime")
local rt_mod = require("ron.accounting.runtime.rt")

local run, setup, eventually, window = S.run_task, S.rt_setup, S.eventually, S.rt_window


local function quiet(f)
    local write = rt_mod.write
    rt_mod.write = function() end
    local ok, err = pcall(f)
    rt_mod.write = write
    if not ok then error(err, 0) end
end

local function find(recs, kind, pred)
    local n = 0
    for _, r in ipairs(recs) do
        if r.kind == kind and pred(r.attrs) then n = n + 1 end
    end
    return n
end

describe("ron.accounting.runtime: audit hooks (AUD-I-21)", function()
    it("gap until the budget ends, given up, stuck, unstuck; readiness flips; each with tenant and dimension", function()
        local clock, m, _, ledger = setup()
        local e, hole = S.gapping_ledger(ledger, S.TENANTS[1], "head is 0\n(a detail)")
        local recs = {}
        local function audit(kind, attrs) recs[#recs + 1] = { kind = kind, attrs = attrs } end
        quiet(function()
            run(function(task)
                local rt = runtime.start { meter = m, exporter = e, tick_ms = 5,
                                           op_budget_ms = 40, health_interval_ms = 10,
                                           degrade_after_ms = 60000, audit = audit }
                window(m, clock, 1)
                assert.is_true(eventually(task, function() return rt.stuck_n == 1 end, 5000))
                assert.is_true(eventually(task, function()
                    return find(recs, "readiness", function(a)
                        return a.event == "not_ready" end) >= 1 end, 5000))
                hole.open = false
                assert.is_true(eventually(task, function()
                    return rt.exports.ok == 3 and rt.stuck_n == 0 end, 5000))
                assert.is_true(eventually(task, function()
                    return find(recs, "readiness", function(a) return a.event == "ready" end)
                           >= 2 end, 5000))
                S.rt_stop(rt)
            end)
        end)
        local t1 = S.TENANTS[1]
        local gaps = find(recs, "export", function(a)
            return a.outcome == "gap" and a.tenant == t1 and a.dimension == "bytes"
                   and a.seq == 1 and a.detail == "head is 0?(a detail)" end)
        assert.truthy(gaps >= 1, "gap outcomes")
        assert.truthy(find(recs, "export", function(a)
            return a.outcome == "given_up" and a.last == "gap" and a.tenant == t1 end) >= 1)
        assert.equal(1, find(recs, "stream", function(a)
            return a.event == "stuck" and a.reason == "gap" and a.tenant == t1
                   and a.dimension == "bytes" and a.seq == 1 end))
        assert.equal(1, find(recs, "stream", function(a)
            return a.event == "unstuck" and a.tenant == t1 end))
        -- nothing for the streams that exported ok
        assert.equal(0, find(recs, "export", function(a) return a.tenant ~= t1 end))
        local nr = 0
        for _, r in ipairs(recs) do
            if r.kind == "readiness" and r.attrs.event == "not_ready" then
                nr = nr + 1
                assert.truthy(r.attrs.reasons:find("stream stuck", 1, true), r.attrs.reasons)
            end
        end
        assert.truthy(nr >= 1)
        m:close()
    end)

    it("a conflict is an export record and a stuck stream; a full pending_slices sheds as shed records", function()
        local clock, m, _, ledger = setup()
        local e = S.conflicting_ledger(ledger, S.TENANTS[2])
        local recs, nbusy = {}, nil
        local function audit(kind, attrs) recs[#recs + 1] = { kind = kind, attrs = attrs } end
        quiet(function()
            run(function(task)
                -- pending_slices of one: the rollover's second and third slices are shed
                -- (Busy: they stay pending and are offered again)
                local rt = runtime.start { meter = m, exporter = e, tick_ms = 5,
                                           op_budget_ms = 40, health_interval_ms = 10,
                                           degrade_after_ms = 60000, audit = audit,
                                           pending_cap = 1 }
                window(m, clock, 1)
                assert.is_true(eventually(task, function()
                    return rt.stuck_n == 1 and rt.exports.ok == 2 end, 5000))
                assert.truthy(rt.rejected.busy >= 1)
                rt:stop()
                nbusy = rt.rejected.busy
                rt:wait()
            end)
        end)
        local t2 = S.TENANTS[2]
        assert.equal(1, find(recs, "export", function(a)
            return a.outcome == "conflict" and a.tenant == t2 and a.seq == 1
                   and a.detail == "another b3 at seq 1" end))
        assert.equal(1, find(recs, "stream", function(a)
            return a.event == "stuck" and a.reason == "conflict" and a.tenant == t2 end))
        local busy = find(recs, "shed", function(a)
            return a.reason == "busy" and a.source == "runtime" and a.dimension == "bytes"
                   and a.seq == 1 and (a.tenant == S.TENANTS[1] or a.tenant == S.TENANTS[2]
                                        or a.tenant == S.TENANTS[3]) end)
        assert.truthy(busy >= 1, "busy sheds")
        -- every shed is a record (the count of the metric, not a sample)
        assert.equal(nbusy, find(recs, "shed", function(a) return a.reason == "busy" end))
        m:close()
    end)
end)
