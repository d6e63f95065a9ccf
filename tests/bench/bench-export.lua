-- bench-export.lua: export throughput into the file ledger through the export runtime
-- (PRODUCT.md §7, "export to the file ledger: >= 50k slices/s with flat memory").
--
--   ron-accounting run tests/bench/bench-export.lua [--quick] [--out FILE] [--dir DIR]
--       [--streams N] [--slices N] [--fsync-slices N] [--base-slices N] [--fsync on,off]
--       [--no-null] [--put-batch N] [--bin ron-accounting]
--
-- What runs:
--   runtime   a meter (injected clock, a WAL under DIR, pending ring of 16384 slices) with
--             --streams tenants x 1 dimension ("bytes"). A producer task records one row per
--             stream per window and moves the clock past the window (60 s of fake time);
--             rollover_task (tick_ms = 1) seals it into --streams slices, the router and the
--             workers export them into offload.file{ dir, fsync } (the file ledger on the
--             libuv threadpool; puts of all streams batched through put_many) and ACK them
--             (ack_task: batched, WAL compaction at most every 50 ms). The producer keeps at
--             most 4 windows unsealed and the pending ring at most half full (the WAL counts
--             ACKed slices until compaction), using the runtime's own counters: the core's
--             pending count takes the seal mutex, which the pool holds across fsyncs.
--             One untimed warm-up window first creates every stream (ledger file, worker).
--             Timed: from the first record to the last ACK. Figure: slices/s; also the loop
--             thread's and the whole process's CPU share.
--   null      the same runtime with an exporter that answers ok at once: its own cost.
--   baseline  the same kind of slices put() by ron.accounting.export.exporters.file directly,
--             synchronously, in a loop (no runtime, no pool, no ACK), same fsync setting,
--             after the same warm-up. ratio = runtime slices/s / baseline slices/s.
-- fsync off: 1M slices (--slices); fsync on: 200k (--fsync-slices; ~0.15 ms per fsync here).
-- Memory: VmRSS (/proc/self/status) at start, before the timed part, at every quarter,
-- after, and the peak VmHWM; the runtime's per-slice tables (offered, offered_at, ACK LRU,
-- events) are printed at the end and must be bounded (the program fails otherwise), as
-- must every slice be ACKed. Every ledger is checked with `ron-accounting verify` when
-- --bin (or RA_BIN) names the binary.
local uv = require("luv")
local acct = require("ron.accounting")
local task = require("ron.base.task")
local runtime = require("ron.accounting.runtime")
local offload = require("ron.accounting.runtime.offload")
local file = require("ron.accounting.export.exporters.file")

local function pending_count(m) return m:pending_count() end

local opts = { quick = false, out = nil, dir = nil, streams = 1000, slices = 1000000,
               fsync_slices = nil, base_slices = nil, fsync = { "off", "on" },
               bin = os.getenv("RA_BIN") }
local B = require("bench_common")
B.args(arg, opts, { { "--no-null", "no_null", "on" }, { "--put-batch", "put_batch", "num" },
             { "--bin", "bin", "str" }, { "--streams", "streams", "num" },
             { "--slices", "slices", "num" }, { "--fsync-slices", "fsync_slices", "num" },
             { "--base-slices", "base_slices", "num" }, { "--fsync", "fsync", "strs" } },
       "ron-accounting run bench-export.lua [--quick] [--out FILE] [--dir DIR] [--streams N] "
           .. "[--slices N] [--fsync-slices N] [--base-slices N] [--fsync on,off] [--no-null] "
           .. "[--put-batch N] [--bin ron-accounting]")
if opts.quick then
    opts.streams, opts.slices = 50, 2000
    opts.fsync_slices = opts.fsync_slices or 500
    opts.base_slices = opts.base_slices or 500
end
-- fsync on costs ~0.15 ms per put here: 1M would take minutes; the default keeps it at
-- 200k (a full-size figure all the same: the rate is flat over the run).
opts.fsync_slices = opts.fsync_slices or math.min(opts.slices, 200000)

local WINDOW = 60
local T0 = 1700000000 - 1700000000 % 3600
local RING = 16384
local UNSEALED = tonumber(os.getenv("BENCH_UNSEALED") or 4) -- windows recorded, not sealed yet

local emit = B.emitter(opts.out)

local status_kb = B.status_kb

local loadavg = B.loadavg

local function sh(cmd)
    local ok = os.execute(cmd)
    return ok == 0 or ok == true
end

local base_dir = opts.dir or ((os.getenv("TMPDIR") or "/tmp") .. "/ra-bench-export-"
                              .. tostring(uv.os_getpid()))
assert(sh("mkdir -p '" .. base_dir .. "'"), "cannot create " .. base_dir)
local function fresh_dir(name)
    local d = base_dir .. "/" .. name
    sh("rm -rf '" .. d .. "'")
    return d
end

local function tenant(i) return string.format("%08x-0000-4000-8000-%012x", 0x20000000 + i, i) end

local function count(t)
    local n = 0
    for _ in pairs(t) do n = n + 1 end
    return n
end

local function verify(dir)
    if not opts.bin then return "skipped (no --bin / RA_BIN)" end
    local p = io.popen("'" .. opts.bin .. "' verify --quiet '" .. dir .. "' 2>&1; echo rc=$?")
    local out = p:read("*a")
    p:close()
    local rc = tonumber(out:match("rc=(%d+)%s*$"))
    return rc == 0 and "OK" or ("FAILED: " .. out)
end

-- ---- baseline: exporters.file put() in a loop, no runtime ------------------------------------
local function run_baseline(fsync, n_slices)
    local dir = fresh_dir("base-" .. (fsync and "fsync" or "nofsync"))
    local ledger = assert(file.new { dir = dir, fsync = fsync })
    local clock = { now = T0 + 5 }
    local m = assert(acct.open { window_len_s = WINDOW, capacity_rows = opts.streams * 2,
                                 amnesia = true, pending_slices_cap = RING,
                                 clock = function() return clock.now end })
    local tenants = {}
    for i = 1, opts.streams do tenants[i] = assert(acct.tenant(tenant(i))) end
    local done, ns, w = 0, 0, 0
    while done < n_slices do
        w = w + 1
        clock.now = T0 + WINDOW * (w - 1) + 5
        local n = w == 1 and opts.streams or math.min(opts.streams, n_slices - done)
        for i = 1, n do assert(m:record(tenants[i], "s", "bytes", 1)) end
        local sealed = assert(m:rollover(T0 + WINDOW * w + 1))
        local t0 = uv.hrtime()
        for _, s in ipairs(sealed) do
            local st, d = ledger:put(s)
            if st ~= "ok" then error("baseline put: " .. tostring(st) .. " " .. tostring(d)) end
        end
        if w > 1 then -- the first window (creating every stream) is a warm-up, untimed
            ns = ns + (uv.hrtime() - t0)
            done = done + #sealed
        end
        for _, s in ipairs(sealed) do assert(m:ack(s)) end
    end
    ledger:close()
    m:close()
    local v = verify(dir)
    sh("rm -rf '" .. dir .. "'")
    return { slices = done, s = ns / 1e9, rate = done / (ns / 1e9), verify = v }
end

-- ---- the runtime ----------------------------------------------------------------------------
local function run_runtime(fsync, n_slices, variant)
    local ldir, wdir = fresh_dir("ledger-" .. (fsync and "fsync" or "nofsync")),
                       fresh_dir("wal-" .. (fsync and "fsync" or "nofsync"))
    local clock = { now = T0 + 5 }
    local m = assert(acct.open { window_len_s = WINDOW, capacity_rows = opts.streams * (UNSEALED + 2),
                                 pending_slices_cap = RING, clock = function() return clock.now end,
                                 wal = { dir = wdir } })
    local tenants = {}
    for i = 1, opts.streams do tenants[i] = assert(acct.tenant(tenant(i))) end
    local exporter = assert(offload.file { dir = ldir, fsync = fsync })
    if variant == "null" then -- the runtime alone: put() answers ok at once
        exporter = { put = function() return "ok" end, close = function() end }
    end
    local r = { slices = n_slices, rss = {} }
    local h = task.spawn("bench", function()
        collectgarbage()
        r.rss_start = status_kb("VmRSS")
        local rt = runtime.start { meter = m, exporter = exporter, tick_ms = 1,
                                   pending_cap = RING,
                                   -- the backlog is deliberate (up to half the ring): not
                                   -- a reason to degrade the meter in the middle of a run
                                   ready_backlog_p95 = RING, put_batch = opts.put_batch }
        local batches = math.ceil(n_slices / opts.streams)
        local quarter = math.max(1, math.floor(batches / 4))
        -- warm-up, untimed: one window creates every stream (its ledger file and worker)
        clock.now = T0 + 5
        for i = 1, opts.streams do assert(m:record(tenants[i], "s", "bytes", 1)) end
        clock.now = T0 + WINDOW + 1
        while rt.acked_total < opts.streams do task.sleep(1) end
        local base_ok = rt.acked_total
        collectgarbage()
        r.rss_before = status_kb("VmRSS")
        local t0, cpu0, pcpu0 = uv.hrtime(), B.cpu_s(1), B.cpu_s(0)
        local w, sent = 1, 0
        while sent < n_slices do
            -- the pending ring must take one more window, with half of it to spare (the
            -- WAL counts ACKed slices too until their segment is compacted; it holds as
            -- many as the ring), and at most UNSEALED windows recorded are not sealed yet
            -- (counted by the runtime: ra_meter_pending_count takes the meter's seal mutex,
            -- which a rollover or compaction on the pool holds across its fsync)
            while rt.sealed_total - rt.acked_total + opts.streams > RING / 2
                  or sent + opts.streams - rt.sealed_total > UNSEALED * opts.streams do
                task.sleep(1)
            end
            w = w + 1
            clock.now = T0 + WINDOW * (w - 1) + 5
            local n = math.min(opts.streams, n_slices - sent)
            for i = 1, n do assert(m:record(tenants[i], "s", "bytes", 1)) end
            sent = sent + n
            clock.now = T0 + WINDOW * w + 1
            if (w - 1) % quarter == 0 then r.rss[#r.rss + 1] = status_kb("VmRSS") end
        end
        while rt.acked_total < n_slices + base_ok do task.sleep(1) end
        assert(pending_count(m) == 0, "slices left pending")
        r.s = (uv.hrtime() - t0) / 1e9
        r.loop_cpu = (B.cpu_s(1) - cpu0) / r.s
        r.proc_cpu = (B.cpu_s(0) - pcpu0) / r.s
        r.rate = n_slices / r.s
        r.exports = rt.exports
        if exporter.calls then -- offload.file: its pool calls (one per put_many batch)
            r.batch = { calls = exporter.calls, puts = exporter.puts }
        end
        r.rejected = rt.rejected
        rt:stop()
        local wr = rt:wait()
        r.tables = { offered = count(rt.offered), offered_at = count(rt.offered_at),
                     lru = count(rt.lru), lru_q = rt.lru_tail - rt.lru_head + 1,
                     events = #rt.events, streams = count(rt.streams),
                     fairness = rt.fairness:len() }
        r.aborted = wr.aborted
        r.rss_after = status_kb("VmRSS")
        collectgarbage()
        r.rss_after_gc = status_kb("VmRSS")
        r.hwm = status_kb("VmHWM")
    end)
    uv.run("default")
    local ok, err = h:join()
    if not ok then error("runtime run: " .. tostring(err)) end
    m:close()
    r.verify = verify(ldir)
    sh("rm -rf '" .. ldir .. "' '" .. wdir .. "'")
    return r
end

-- ---- main -----------------------------------------------------------------------------------
print(string.format("# bench-export.lua: %s, %d streams (tenants x 1 dim), %d slices (fsync off) / "
    .. "%d (fsync on), pending ring %d, dir %s, loadavg %s", jit and jit.version or _VERSION,
    opts.streams, opts.slices, opts.fsync_slices, RING, base_dir, loadavg()))
print("# ratio = runtime slices/s / baseline (exporters.file put() loop, same fsync) slices/s")
local fails = 0

local function report(name, variant, fsync, n, rr, b)
    local ratio = b and rr.rate / b.rate
    print(string.format("\n== %s: %d slices in %.2f s (after a warm-up window)", name, n, rr.s))
    print(string.format("   runtime    %10.0f slices/s  (target >= 50000)", rr.rate))
    if b then
        print(string.format("   baseline   %10.0f slices/s  (exporters.file put() loop, %d slices)"
            .. "  ratio %.2f", b.rate, b.slices, ratio))
    else
        print("   (exporter answers ok at once: the runtime's own cost, no baseline)")
    end
    print(string.format("   loop thread busy %.0f%% of the run (its CPU time / wall time); the "
        .. "whole process (loop + pool) %.0f%% of one CPU; loadavg %s", 100 * rr.loop_cpu,
        100 * rr.proc_cpu, loadavg()))
    print(string.format("   exports ok %d dup %d fail %d; shed busy %d order_overflow %d blocked %d; "
        .. "aborted %d", rr.exports.ok, rr.exports.dup, rr.exports.fail, rr.rejected.busy,
        rr.rejected.order_overflow, rr.rejected.blocked, rr.aborted))
    if rr.batch then
        print(string.format("   put_many: %d pool calls for %d puts (%.1f slices per call, "
            .. "warm-up included)", rr.batch.calls, rr.batch.puts, rr.batch.puts / rr.batch.calls))
    end
    print(string.format("   RSS kB: at start %d, before %d, quarters %s, after %d (after GC %d), "
        .. "peak VmHWM %d", rr.rss_start, rr.rss_before, table.concat(rr.rss, " "), rr.rss_after,
        rr.rss_after_gc, rr.hwm))
    local t = rr.tables
    print(string.format("   per-slice state at the end: offered %d, offered_at %d, ack lru %d "
        .. "(queue %d), events %d, streams %d, fairness queue %d", t.offered, t.offered_at, t.lru,
        t.lru_q, t.events, t.streams, t.fairness))
    print(string.format("   verify: runtime ledger %s; baseline ledger %s", rr.verify,
        b and b.verify or "-"))
    local bounded = t.offered == 0 and t.offered_at == 0 and t.lru <= runtime.DEFAULTS.ack_lru
        and t.lru_q <= runtime.DEFAULTS.ack_lru and t.events <= runtime.DEFAULTS.events_cap
    local ok = bounded and rr.exports.ok + rr.exports.dup == n + opts.streams
        and rr.aborted == 0 and rr.verify:sub(1, 6) ~= "FAILED"
        and not (b and b.verify:sub(1, 6) == "FAILED")
    if not ok then fails = fails + 1 end
    emit(string.format('{"bench":"export","name":"%s","variant":"%s","params":{"streams":%d,'
        .. '"slices":%d,"fsync":%s,"pending_ring":%d,"tick_ms":1},"slices_per_s":%.0f,'
        .. '"seconds":%.3f,"loop_busy":%.2f,%s,"rss_kb":{"start":%d,"before":%d,"after":%d,'
        .. '"after_gc":%d,"peak_hwm":%d},"tables":{"offered":%d,"offered_at":%d,"lru":%d,'
        .. '"events":%d},"ok":%s}', name, variant, opts.streams, n, tostring(fsync), RING,
        rr.rate, rr.s, rr.loop_cpu,
        b and string.format('"baselines":{"file_put_loop":{"slices":%d,"slices_per_s":%.0f}},'
            .. '"ratios":{"file_put_loop":%.3f}', b.slices, b.rate, ratio)
          or '"baselines":{},"ratios":{}',
        rr.rss_start, rr.rss_before, rr.rss_after, rr.rss_after_gc, rr.hwm, t.offered,
        t.offered_at, t.lru, t.events, tostring(ok)))
end

if not opts.no_null then
    collectgarbage()
    local n = opts.slices
    local rr = run_runtime(false, n, "null")
    report(string.format("export/null/runtime/s%d", opts.streams), "null", false, n, rr, nil)
end
for _, f in ipairs(opts.fsync) do
    local fsync = f == "on"
    local n = fsync and opts.fsync_slices or opts.slices
    local nb = opts.base_slices or math.min(n, fsync and 20000 or 200000)
    collectgarbage()
    local rr = run_runtime(fsync, n, "file")
    collectgarbage()
    local b = run_baseline(fsync, nb)
    report(string.format("export/file/runtime/s%d/fsync_%s", opts.streams, f), "file", fsync,
           n, rr, b)
end
if not opts.dir then sh("rm -rf '" .. base_dir .. "'") end
if fails > 0 then
    io.stderr:write("bench-export.lua: ", fails, " configuration(s) failed their check\n")
    os.exit(1)
end
