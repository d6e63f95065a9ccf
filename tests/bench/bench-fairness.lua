-- bench-fairness.lua: per-tenant export latency under a 10x hot tenant (seed 000 G-22),
-- round_robin vs wfq, with a FIFO policy as the baseline measured in the same run.
--
--   ron-accounting run tests/bench/bench-fairness.lua [--quick] [--out FILE] [--dir DIR]
--       [--windows N] [--latency-ms N] [--inflight N]
--
-- Setup (as spec/ron/accounting/export/fairness/g22_spec.lua, larger): a meter (injected clock,
-- WAL) where the hot tenant records 10 dimensions per window and 9 cold tenants one each,
-- --windows windows (default 50: 500 hot slices, 50 per cold tenant), one sealed every
-- --period-ms (default 12: 1583 slices/s arrive). The runtime runs with bounded dispatch
-- (inflight_cap = --inflight, default 2) into an exporter that sleeps --latency-ms
-- (default 2) per put, then writes the offloaded file ledger (fsync on): 1000 slices/s at
-- most, so the exporter is the bottleneck and the backlog waits in the fairness policy.
-- round_robin and wfq also get tenant_inflight_cap = 1 and a policy tenant_cap of 64
-- (beyond it the hot tenant's slices stay pending and are re-offered).
-- Policies: fifo (the baseline: one queue in arrival order, the policy shape, and no
-- per-tenant caps: what the runtime does without fairness), round_robin, wfq (hot weight 8,
-- cold weights 1..8,1: the worst case for the cold ones), wfq_hot1 (the same, hot weight 1).
-- Figures per policy: offer -> ACK latency p50/p95/max in ms for the hot tenant and for the
-- cold ones together (and the worst cold tenant's p95), the ACK ordinal at which the last
-- cold slice was ACKed, and the ratio of the cold p95 to fifo's (< 1: fairness helps).
local uv = require("luv")
local acct = require("ron.accounting")
local task = require("ron.base.task")
local runtime = require("ron.accounting.runtime")
local offload = require("ron.accounting.runtime.offload")
local fairness = require("ron.accounting.export.fairness")
local pct = require("ron.base.percentile")

local opts = { quick = false, out = nil, dir = nil, windows = 50, latency_ms = 2, inflight = 2,
               period_ms = 12 }
local B = require("bench_common")
B.args(arg, opts, { { "--windows", "windows", "num" }, { "--latency-ms", "latency_ms", "num" },
             { "--inflight", "inflight", "num" }, { "--period-ms", "period_ms", "num" } },
       "ron-accounting run bench-fairness.lua [--quick] [--out FILE] [--dir DIR] [--windows N] "
           .. "[--latency-ms N] [--inflight N] [--period-ms N]")
if opts.quick then opts.windows = 8 end

local T0 = 1700000000 - 1700000000 % 3600
local HOT = "00000000-0000-4000-8000-0000000000ff"
local COLD = {}
for i = 1, 9 do COLD[i] = string.format("00000000-0000-4000-8000-%012x", 0xc0 + i) end
local DIMS = {}
for d = 1, 10 do DIMS[d] = "d" .. d end
local TENANT_CAP = 64

local emit = B.emitter(opts.out)

local base_dir = opts.dir or ((os.getenv("TMPDIR") or "/tmp") .. "/ra-bench-fairness-"
                              .. tostring(uv.os_getpid()))
os.execute("mkdir -p '" .. base_dir .. "'")

-- The baseline policy: one FIFO for every tenant (no fairness), the policy shape.
local function fifo(cap)
    local q, head, tail, per = {}, 1, 0, {}
    local p = {}
    function p.enqueue(_, tenant, item)
        if (per[tenant] or 0) >= cap then return nil, "Busy" end
        tail = tail + 1
        q[tail] = { tenant, item }
        per[tenant] = (per[tenant] or 0) + 1
        return true
    end
    function p.dequeue(_, eligible)
        for i = head, tail do
            local e = q[i]
            if not eligible or eligible(e[1]) then
                table.remove(q, i)
                tail = tail - 1
                per[e[1]] = per[e[1]] - 1
                return e[2], e[1]
            end
        end
        return nil
    end
    function p.len(_, tenant)
        if tenant then return per[tenant] or 0 end
        return tail - head + 1
    end
    function p.tenants() return {} end
    return fairness.check(p)
end

local function run(name, policy, bounded)
    local clock = { now = T0 + 5 }
    local dir = base_dir .. "/" .. name
    os.execute("rm -rf '" .. dir .. "' && mkdir -p '" .. dir .. "'")
    local m = assert(acct.open { window_len_s = 60, capacity_rows = 16384, dimensions = DIMS,
                                 clock = function() return clock.now end,
                                 wal = { dir = dir .. "/wal" } })
    local ledger = assert(offload.file { dir = dir .. "/ledger" })
    local exporter = {
        put = function(_, s)
            task.sleep(opts.latency_ms)
            return ledger:put(s)
        end,
        close = function() end,
    }
    local total = opts.windows * 19
    local lat, order = {}, {}
    local elapsed
    local h = task.spawn("bench", function()
        local t0 = uv.now()
        local rt = runtime.start { meter = m, exporter = exporter, fairness = policy,
                                   tick_ms = 2, inflight_cap = opts.inflight,
                                   tenant_inflight_cap = bounded and 1 or nil }
        rt:subscribe(function(ev)
            if ev.type ~= "SliceExported" then return end
            local t = ev.slice_id.tenant
            order[#order + 1] = t
            lat[t] = lat[t] or {}
            lat[t][#lat[t] + 1] = ev.latency_ms
        end, { cap = 65536 })
        -- one window every period_ms: 19 slices, faster than the exporter drains them
        for w = 1, opts.windows do
            clock.now = T0 + 60 * (w - 1) + 5
            for d = 1, 10 do assert(m:record(HOT, "alice", DIMS[d], 1)) end
            for _, t in ipairs(COLD) do assert(m:record(t, "alice", DIMS[1], 1)) end
            clock.now = T0 + 60 * w + 1
            task.sleep(opts.period_ms)
        end
        while #order < total do task.sleep(5) end
        elapsed = uv.now() - t0
        rt:stop()
        rt:wait()
    end)
    uv.run("default")
    assert(h:join())
    m:close()
    os.execute("rm -rf '" .. dir .. "'")
    local cold, worst_cold_p95, last_cold = {}, 0, 0
    for _, t in ipairs(COLD) do
        for _, v in ipairs(lat[t]) do cold[#cold + 1] = v end
        local p = pct(lat[t], 0.95)
        if p > worst_cold_p95 then worst_cold_p95 = p end
    end
    local hot_done = 0
    for i, t in ipairs(order) do
        if t ~= HOT then last_cold = i else hot_done = hot_done + 1 end
    end
    return {
        hot = { p50 = pct(lat[HOT], 0.5), p95 = pct(lat[HOT], 0.95), max = pct(lat[HOT], 1) },
        cold = { p50 = pct(cold, 0.5), p95 = pct(cold, 0.95), max = pct(cold, 1) },
        worst_cold_p95 = worst_cold_p95, last_cold = last_cold, total = total,
        elapsed_ms = elapsed,
    }
end

print(string.format("# bench-fairness.lua: hot tenant 10 slices/window, 9 cold 1, %d windows "
    .. "(%d slices), one window every %d ms; exporter %d ms per put, inflight_cap %d "
    .. "(capacity %.0f slices/s, arrivals %.0f/s); rr/wfq: tenant_inflight_cap 1, policy "
    .. "tenant_cap %d; fifo: neither", opts.windows, opts.windows * 19, opts.period_ms,
    opts.latency_ms, opts.inflight, 1000 * opts.inflight / opts.latency_ms,
    19000 / opts.period_ms, TENANT_CAP))
local weights = { [HOT] = 8 }
for i, t in ipairs(COLD) do weights[t] = (i - 1) % 8 + 1 end
local base
for _, pol in ipairs {
    { "fifo", function() return fifo(65536) end, false },
    { "round_robin", function() return fairness.round_robin.new { tenant_cap = TENANT_CAP } end,
      true },
    { "wfq", function()
        return fairness.wfq.new { weights = weights, tenant_cap = TENANT_CAP } end, true },
    { "wfq_hot1", function()
        local w1 = {}
        for t, w in pairs(weights) do w1[t] = w end
        w1[HOT] = 1
        return fairness.wfq.new { weights = w1, tenant_cap = TENANT_CAP } end, true },
} do
    local r = run(pol[1], pol[2](), pol[3])
    base = base or r
    local ratio = r.cold.p95 / math.max(1, base.cold.p95)
    print(string.format("\n== fairness/%s: %d slices in %d ms", pol[1], r.total, r.elapsed_ms))
    print(string.format("   hot   latency ms p50 %6d  p95 %6d  max %6d", r.hot.p50, r.hot.p95,
                        r.hot.max))
    print(string.format("   cold  latency ms p50 %6d  p95 %6d  max %6d  (worst cold tenant p95 %d)",
                        r.cold.p50, r.cold.p95, r.cold.max, r.worst_cold_p95))
    print(string.format("   last cold slice ACKed at ordinal %d of %d; cold p95 / fifo cold p95 = %.2f",
                        r.last_cold, r.total, ratio))
    emit(string.format('{"bench":"fairness","name":"fairness/%s/hot10x/w%d","params":{"windows":%d,'
        .. '"latency_ms":%d,"inflight_cap":%d,"tenant_inflight_cap":1,"tenant_cap":%d},'
        .. '"hot_ms":{"p50":%d,"p95":%d,"max":%d},"cold_ms":{"p50":%d,"p95":%d,"max":%d},'
        .. '"worst_cold_p95_ms":%d,"last_cold_ordinal":%d,"slices":%d,"elapsed_ms":%d,'
        .. '"baselines":{"fifo":{"cold_p95_ms":%d}},"ratios":{"fifo_cold_p95":%.3f}}',
        pol[1], opts.windows, opts.windows, opts.latency_ms, opts.inflight, TENANT_CAP,
        r.hot.p50, r.hot.p95, r.hot.max, r.cold.p50, r.cold.p95, r.cold.max, r.worst_cold_p95,
        r.last_cold, r.total, r.elapsed_ms, base.cold.p95, ratio))
end
if not opts.dir then os.execute("rm -rf '" .. base_dir .. "'") end
