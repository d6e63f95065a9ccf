-- G-22 tenant hotspot fairness (seed 000 §4): one tenant at 10x load cannot starve the others;
-- per-tenant backlog bounded and rotating fairly. Run in the host (ctest lua-g22-host:
-- `ron-accounting run spec/run-busted.lua spec/ron/accounting/export/fairness/g22_spec.lua`).
--
-- The export runtime with bounded dispatch (inflight_cap, tenant_inflight_cap: the
-- exporter is the bottleneck, so the backlog waits in the fairness policy) and an exporter
-- with a fixed per-put latency in front of the offloaded file ledger. The hot tenant seals
-- 10 slices per window (10 dimensions), each of 9 cold tenants 1 (one dimension); every
-- window is sealed by one rollover, so the whole backlog arrives at once.
--
-- Assertions do not depend on wall-clock speed: they use the ordinal position of each
-- ACK (the order in which the runtime ACKs, from the SliceExported bus events), which the
-- policy and the caps decide. Latencies in ms (offer -> ACK) are printed, not asserted.
local S = require("support")
local acct = require("ron.accounting")
local offload = require("ron.accounting.runtime.offload")
local runtime = require("ron.accounting.runtime")
local fairness = require("ron.accounting.export.fairness")
local pct = require("ron.base.percentile")
local task = require("ron.base.task")

local T0 = S.T0
local HOT = "00000000-0000-4000-8000-0000000000ff"
local COLD = {}
for i = 1, 9 do COLD[i] = string.format("00000000-0000-4000-8000-%012x", 0xc0 + i) end
local DIMS = {}
for d = 1, 10 do DIMS[d] = "d" .. d end

local INFLIGHT, TENANT_INFLIGHT, TENANT_CAP, LATENCY_MS = 2, 1, 32, 3

-- An exporter whose every put takes LATENCY_MS (a task sleep), then the file ledger, and
-- returns in the order the puts were made. The ordinal bounds below hold for puts of equal
-- length; the file ledger's puts run on the threadpool, each with its own fsync, so under
-- a loaded machine one of the two in flight could take many times the other's time, its
-- tenant then skipped a whole round (tenant_inflight_cap): gaps of 17-18 against 14 were
-- seen at load 8-16. Each put waits for the one before it to return (a chain of
-- one-slot channels), so the ACK order is the dispatch order, as with a fixed latency.
local function slow(inner, ms)
    local prev -- the release of the put made last
    return {
        put = function(_, s)
            local before, mine = prev, task.channel(1)
            prev = mine
            task.sleep(ms)
            local status, detail = inner:put(s)
            if before then assert(before:recv()) end
            mine:try_send(true)
            return status, detail
        end,
        close = function() end,
    }
end


-- Seals `windows` windows: load[tenant] = number of dimensions it records per window.
-- Runs the runtime until every slice is ACKed; returns what was observed.
local function scenario(policy, load, windows, rt_opts)
    local clock = S.clock(T0 + 5)
    local m = assert(acct.open(S.cfg { clock = clock.fn, dimensions = DIMS, capacity_rows = 4096,
                                       wal = { dir = S.tmpname(".wal") } }))
    local dir = S.tmpname(".ledger")
    local ledger = assert(offload.file { dir = dir })
    local total = 0
    for w = 1, windows do
        clock.now = T0 + 60 * (w - 1) + 5
        for t, ndims in pairs(load) do
            for d = 1, ndims do assert(m:record(t, "alice", DIMS[d], 1)) end
            total = total + ndims
        end
    end
    clock.now = T0 + 60 * windows + 1
    local obs = { order = {}, lat = {}, max_held = {}, total = total }
    local rt
    S.run_task(function(task)
        local o = { meter = m, exporter = slow(ledger, LATENCY_MS), fairness = policy,
                    tick_ms = 5 }
        for k, v in pairs(rt_opts) do o[k] = v end
        rt = runtime.start(o)
        local function sample()
            for t in pairs(load) do
                local n = policy:len(t)
                if n > (obs.max_held[t] or 0) then obs.max_held[t] = n end
            end
        end
        rt:subscribe(function(ev)
            if ev.type ~= "SliceExported" then return end
            local t = ev.slice_id.tenant
            obs.order[#obs.order + 1] = t
            local l = obs.lat[t] or {}
            obs.lat[t] = l
            l[#l + 1] = ev.latency_ms
            sample()
        end, { cap = 4096 })
        assert.is_true(S.eventually(task, function()
            sample()
            return #obs.order == total
        end, 60000), "not every slice was ACKed")
        S.rt_stop(rt)
    end)
    obs.rt = rt
    assert.equal(total, rt.exports.ok)
    assert.equal(0, #m:pending())
    assert.equal(0, (S.verify(dir)))
    m:close()
    return obs
end

-- Ordinal positions (1-based) of each tenant's ACKs.
local function positions(order)
    local pos = {}
    for i, t in ipairs(order) do
        pos[t] = pos[t] or {}
        pos[t][#pos[t] + 1] = i
    end
    return pos
end

-- The largest distance between two consecutive ACKs of t (from position 0 for the first).
local function max_gap(list)
    local g, prev = 0, 0
    for _, p in ipairs(list) do
        if p - prev > g then g = p - prev end
        prev = p
    end
    return g
end

local function report(name, obs)
    local pos = positions(obs.order)
    local function line(label, ts)
        local lat, ords = {}, {}
        for _, t in ipairs(ts) do
            for _, v in ipairs(obs.lat[t] or {}) do lat[#lat + 1] = v end
            for _, v in ipairs(pos[t] or {}) do ords[#ords + 1] = v end
        end
        print(string.format("  %-8s %4d slices  latency ms p50 %5d p95 %5d  ack ordinal p50 %4d p95 %4d",
            label, #lat, pct(lat, 0.5), pct(lat, 0.95), pct(ords, 0.5), pct(ords, 0.95)))
    end
    print(name)
    line("hot", { HOT })
    line("cold", COLD)
    local held = {}
    for t, n in pairs(obs.max_held) do held[#held + 1] = t:sub(-2) .. "=" .. n end
    table.sort(held)
    print("  max items held in the policy per tenant: " .. table.concat(held, " "))
    print(string.format("  shed: busy %d blocked %d", obs.rt.rejected.busy, obs.rt.rejected.blocked))
    return pos
end

local function hot_cold_load()
    local load = { [HOT] = 10 }
    for _, t in ipairs(COLD) do load[t] = 1 end
    return load
end

local BOUNDS = { inflight_cap = INFLIGHT, tenant_inflight_cap = TENANT_INFLIGHT }

describe("G-22 tenant hotspot fairness", function()
    it("round_robin: cold tenants finish before the hot backlog is half drained", function()
        print("seed: none (no randomness: the order is decided by the policy and the caps)")
        local windows = 20
        local p = fairness.round_robin.new { tenant_cap = TENANT_CAP }
        local obs = scenario(p, hot_cold_load(), windows, BOUNDS)
        local pos = report("G-22 round_robin (hot 10x, 9 cold, inflight 2, per tenant 1)", obs)
        local hot = pos[HOT]
        assert.equal(10 * windows, #hot)
        local half = hot[#hot / 2] -- ordinal of the ACK that halves the hot backlog
        local k = 10               -- tenants holding items
        for _, t in ipairs(COLD) do
            assert.equal(windows, #pos[t])
            assert.is_true(pos[t][#pos[t]] < half,
                t .. " finished at " .. pos[t][#pos[t]] .. ", hot half-drained at " .. half)
            -- RR bound: served within k - 1 dequeues of the others; the ACK order differs
            -- from the dequeue order by at most the slices in flight
            local g = max_gap(pos[t])
            assert.is_true(g <= k + 2 * INFLIGHT, t .. ": gap " .. g)
        end
        for t, n in pairs(obs.max_held) do
            assert.is_true(n <= TENANT_CAP, t .. " held " .. n)
        end
        assert.is_true(obs.rt.rejected.busy > 0) -- the hot tenant hit its cap, and recovered
    end)

    it("wfq (weights 1..8, hot at 8): every cold tenant is served within its WFQ bound", function()
        print("seed: none (no randomness: the order is decided by the policy and the caps)")
        local windows = 20
        local weights = { [HOT] = 8 }
        for i, t in ipairs(COLD) do weights[t] = (i - 1) % 8 + 1 end
        local p = fairness.wfq.new { weights = weights, tenant_cap = TENANT_CAP }
        local obs = scenario(p, hot_cold_load(), windows, BOUNDS)
        local pos = report("G-22 wfq (hot weight 8, cold weights 1..8,1)", obs)
        local sum = 0
        for _, w in pairs(weights) do sum = sum + w end
        for _, t in ipairs(COLD) do
            assert.equal(windows, #pos[t])
            -- DRR bound: the next turn comes within the other tenants' weights
            local g = max_gap(pos[t])
            local bound = (sum - weights[t]) + 1 + 2 * INFLIGHT
            assert.is_true(g <= bound, t .. ": gap " .. g .. " > " .. bound)
        end
        for t, n in pairs(obs.max_held) do
            assert.is_true(n <= TENANT_CAP, t .. " held " .. n)
        end
        -- not starved: the weight-1 cold tenants still finish before the hot one
        local hot = pos[HOT]
        assert.equal(10 * windows, #hot)
        for _, t in ipairs(COLD) do
            assert.is_true(pos[t][#pos[t]] < hot[#hot], t .. " finished after the hot tenant")
        end
    end)

    it("wfq: while every tenant is backlogged, service shares match weights 1..8 (+-10%)", function()
        print("seed: none (no randomness)")
        local windows = 100
        local tenants, weights, load = {}, {}, {}
        for w = 1, 8 do
            local t = string.format("00000000-0000-4000-8000-%012x", 0xa0 + w)
            tenants[w], weights[t], load[t] = t, w, 1
        end
        local p = fairness.wfq.new { weights = weights }
        -- global bound only: a tenant's turn may use both slots, so ACK order = DRR order
        local obs = scenario(p, load, windows, { inflight_cap = INFLIGHT })
        local first = 360 -- 10 full rounds (sum of weights 36): weight 8 has used 80 of 100
        local got = {}
        for i = 1, first do got[obs.order[i]] = (got[obs.order[i]] or 0) + 1 end
        local parts = {}
        for w, t in ipairs(tenants) do
            local want = first * w / 36
            parts[#parts + 1] = string.format("w%d %d/%.0f", w, got[t] or 0, want)
            assert.is_true(math.abs((got[t] or 0) - want) <= math.max(0.1 * want, 2),
                "weight " .. w .. ": " .. tostring(got[t]) .. " of " .. want)
        end
        print("G-22 wfq shares over the first 360 ACKs (got/expected): " .. table.concat(parts, " "))
    end)
end)
