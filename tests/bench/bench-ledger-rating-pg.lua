-- bench-ledger-rating-pg.lua: rating throughput into the ledger (issue 15's target: "rating
-- keeps up with the metering export, >= 5k slices/s on PostgreSQL on this machine, >= 0.5 of
-- a plain INSERT baseline in the same run"), docs/LEDGER.md "Durability at the
-- acknowledgement" (LED-50).
--
--   ron-accounting run tests/bench/bench-ledger-rating-pg.lua [--quick] [--out FILE]
--       [--dir DIR] [--slices N] [--statement-slices N] [--streams N] [--no-pg] [--no-sqlite]
--       [--batches 64,256,1024] [--batch-slices N] [--batch-streams N] [--no-single]
--       [--pg-stats] [--daemon 256,1024] [--put-batch N] [--put-parallel N] [--gc-pause N]
--       [--gc-stepmul N] [--gc-idle-us N] [--lane-min N] [--lanes N] [--offload] [--stages]
--       [--alloc] [--mark]
--       (--gc-*: the loop VM's collector, the daemon's gc_* and their defaults: ron.base.gcidle)
--
-- Slices of a real meter (one stream per tenant) rated through ron.ledger.exporter (rate card,
-- usage.request, the engine's commit saga, the stream head) into PostgreSQL (a server this
-- benchmark starts, fsync on, through a pool of 4 connections) and SQLite (WAL, the
-- synchronous driver), for durability "ack" (flush at the acknowledgement) and "statement"
-- (every statement durable):
--   1 stream   put per slice (each answer flushed: one sync per slice)
--   N streams  put_many of N slices, one per stream (tenants at once over the pool, ONE
--              flush per batch: group commit)
-- Baselines, same store, same connection(s), same durability, same run, the same rows
-- (tenant, dimension, seq, b3, quantity) into a plain table with a primary key:
--   row        one INSERT per slice, durable per row (ack: the INSERT + flush(); statement:
--              the INSERT's own commit)
--   batch      one INSERT of N rows per batch, durable per batch
-- ratio = rating slices/s / baseline rows/s (1 stream against row, N streams against batch).
-- The batch path (LED-51..LED-56, durability ack): put_many of B slices (B = 64, 256, 1024)
-- through the engine's commit_many, ONE flush per batch:
--   chain      1 stream: B consecutive slices of one tenant per put_many
--   streams    M streams (--batch-streams, 64): B slices of M tenants per put_many (B/M
--              windows each; the exporter's lanes run at once over the PostgreSQL pool)
-- against two baselines, each flushed per batch, on the same store in the same run:
--   row of the slice   one row per slice (tenant, dimension, seq, b3, quantity) in plain
--                      multi-row INSERTs of B rows (chunked at 1024)
--   the same rows      every row the rated batch wrote (postings, transfers, their accounts,
--                      intents, events: recorded from the primitives' arguments) INSERTed
--                      plainly into a scratch copy of the store's tables (same columns, keys
--                      and indexes, no triggers, no ON CONFLICT, no reads, no saga record),
--                      the same batching: issue 15's "a plain INSERT loop of the same rows"
-- The daemon's shape (--daemon S,S,..; issue 15 "keeps up with the metering export"): what
-- `ron-accounting run examples/daemon.lua` sends to ron.ledger.exporter, driven by the
-- runtime's own put path (RT.put / RT.put_flush of lua/ron/accounting/runtime/worker.lua):
-- S streams, one worker task each with its next slice (a stream's slice N+1 is put only
-- after N's answer), the workers' puts queued (at most one per stream) and sent by at most
-- put_parallel (4) put_flush tasks in put_many calls of at most put_batch (1024) slices:
-- every put_many holds ONE slice per stream. S streams x W windows all sealed = a backlog
-- replay (the WAL's slices re-offered after an outage); the live steady state is one such
-- burst of S slices per window (rollover). --put-batch / --put-parallel: the runtime's
-- put_batch / put_parallel for these cases. Baseline: the row of the slice, one INSERT per
-- put_many the case made (its slices), flushed per batch; the same rows as above (the
-- recorded rows in put_many-sized groups: with put_many calls at once their grouping is
-- approximate). A case is a fresh store in the same process: --daemon 1024,1024,1024 gives
-- the cold process's figures first and a warm one's last (its pool threads' statements
-- prepared, their heaps grown, the loop's traces compiled: a running daemon's; docs/LEDGER.md
-- "A warm process rates a third faster").
-- --offload: the SQLite batch and daemon cases on the offloaded driver (offload = true, the
-- store `ron-accounting run` composes for the daemon's ledger: its statements in the libuv
-- pool, reads on a second connection, checkpoints beside), labelled "sqlite-o"; their
-- baselines write through a synchronous store of the same file. The CPU lines then also
-- show the loop thread's share (the rest is the pool's).
-- --lanes N: the exporter's `parallel` (a put_many's lanes at once on PostgreSQL, default
-- 4, LED-66).
-- --stages: the daemon cases also print the loop thread's CPU per slice by stage of a put_many
-- (tests/bench/stages.lua: the exporter's and the engine's per-batch methods wrapped).
-- --alloc: the daemon cases run with the loop VM's collector stopped and print the bytes it
-- allocated per slice by stage (repeatable to a few percent, where CPU figures move with
-- the load; what the collector later frees). That run's rates are not a measurement (no
-- collection at all).
-- --pool-profile: the SQLite store's phases timed from inside the pool thread that runs
-- them (tests/bench/pool_profile.lua, as bench-wallet's): per phase and per rated slice; the
-- writer and reader connections' busy time per slice (every call), and the ceiling the
-- writer's sets on any work done on the loop's side; with it, each statement's prepare too
-- (a list's length new to the pool thread's connection).
-- --timeline N: the daemon case's N-th put_many, store call by store call as the loop saw
-- them (tests/bench/timeline.lua): when each was made and answered, an apply's ops, and how
-- much of the put_many had a call in flight against the loop's own work.
-- statements/slice: the store calls a rated slice costs (reads included). Per case also the
-- wall time inside store calls per primitive, and the CPU per slice of this process and of
-- the PostgreSQL server; --pg-stats loads pg_stat_statements and prints the server's
-- execution time per statement.
-- Output: human-readable lines and one `BENCH {json}` line per case.
local uv = require("luv")
local task = require("ron.base.task")

package.path = (debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "?.lua;" .. package.path
local B = require("bench_common") -- and lua/ on package.path
local H = B.pg_harness()
local store = require("ron.ledger.store")
local sql = require("ron.ledger.store.sql")
local SR = require("same_rows")
local ST = require("stages")
local usage = require("ron.ledger.usage")
local lexp = require("ron.ledger.exporter")

-- RON_BENCH_PROFILE=MODE:FILE (e.g. "v:/tmp/v.txt", "Fl2:/tmp/f.txt"): LuaJIT's sampling
-- profiler (jit.p) over the rated part of the batch and daemon cases only, not the baselines.
local PROFILE = os.getenv("RON_BENCH_PROFILE")
if PROFILE then package.path = package.path .. ";/usr/share/luajit-2.1.0-beta3/?.lua" end
local function prof(on)
    if not PROFILE then return end
    local p = require("jit.p")
    if on then p.start(PROFILE:match("^([^:]*):(.*)$")) else p.stop() end
end

local NODE = require("ron.node.schema").DEFAULTS -- (the daemon's collector settings)
local opts = { quick = false, dir = os.getenv("TMPDIR") or "/tmp", slices = 1600,
               statement_slices = 160, streams = 8, pg = true, sqlite = true,
               batches = { 64, 256, 1024 }, batch_slices = 4096, batch_streams = 64,
               single = true, pg_stats = false, daemon = {},
               -- the runtime's own defaults (what the daemon sends)
               put_batch = require("ron.accounting.runtime").DEFAULTS.put_batch,
               put_parallel = require("ron.accounting.runtime").DEFAULTS.put_parallel,
               -- the daemon's (it sets it at start): 0 = LuaJIT's own (200)
               gc_pause = NODE.gc_pause, gc_stepmul = NODE.gc_stepmul,
               gc_idle_us = NODE.gc_idle_us }
B.args(arg, opts, { { "--slices", "slices", "num" }, { "--statement-slices", "statement_slices", "num" },
             { "--streams", "streams", "num" }, { "--no-pg", "pg", "off" },
             { "--no-sqlite", "sqlite", "off" }, { "--no-single", "single", "off" },
             { "--pg-stats", "pg_stats", "on" }, { "--batch-slices", "batch_slices", "num" },
             { "--batch-streams", "batch_streams", "num" }, { "--put-batch", "put_batch", "num" },
             { "--put-parallel", "put_parallel", "num" }, { "--gc-pause", "gc_pause", "num" },
             { "--gc-stepmul", "gc_stepmul", "num" }, { "--gc-idle-us", "gc_idle_us", "num" },
             { "--lane-min", "lane_min", "num" }, { "--lanes", "lanes", "num" },
             { "--daemon", "daemon", "nums" },
             { "--batches", "batches", "nums" }, { "--offload", "offload", "on" },
             { "--stages", "stages", "on" }, { "--alloc", "alloc", "on" },
             { "--pool-profile", "pool_profile", "on" }, { "--timeline", "timeline", "num" },
             { "--mark", "mark", "on" } },
       "ron-accounting run bench-ledger-rating-pg.lua [--quick] [--out FILE] [--dir DIR] "
           .. "[--slices N] [--statement-slices N] [--streams N] [--no-pg] [--no-sqlite] "
           .. "[--batches B,B,..] [--batch-slices N] [--batch-streams N] [--no-single] "
           .. "[--pg-stats] [--daemon S,S,..] [--put-batch N] [--put-parallel N] [--gc-pause N] "
           .. "[--gc-stepmul N] [--gc-idle-us N] "
           .. "[--lane-min N] [--lanes N] [--offload] [--stages] [--alloc] [--pool-profile] "
           .. "[--timeline N]")
local PP = opts.pool_profile and require("pool_profile")
if PP then PP.enable(opts.dir, 1) end
-- (the daemon's collector: ron.node sets it through the same call)
local GC = require("ron.base.gcidle").configure {
    pause = opts.gc_pause > 0 and opts.gc_pause or nil, stepmul = opts.gc_stepmul,
    idle_us = opts.gc_idle_us }
if opts.quick then
    opts.slices, opts.statement_slices, opts.batch_slices = 160, 32, 1024
    opts.batches = { 64, 256 }
end

local emit = B.emitter(opts.out)
local function now() return uv.hrtime() / 1e9 end

local card = B.rate_card()
local make_slices = B.meter_windows

-- Counts the store's calls (every primitive and read) on the instance.
-- Also the wall time spent inside them (c.t: seconds, per name c.tby): what the rest of a
-- case's time is, is the engine's and the exporter's own work (Lua CPU).
-- --timeline N: the daemon case's N-th put_many's store calls (tests/bench/timeline.lua)
local TL = opts.timeline and require("timeline").new(now)
local function counting(s) return B.instrument(s, nil, TL and TL:hook()) end

-- The `most` store primitives a case spent the most wall time in since tby0 (calls.tby
-- then), as "name us-per-slice" strings, the largest first.
local function store_times(calls, tby0, total, most)
    local t = {}
    for k, v in pairs(calls.tby) do
        if v > tby0[k] then t[#t + 1] = { k, (v - tby0[k]) / total * 1e6 } end
    end
    table.sort(t, function(a, b) return a[2] > b[2] end)
    local r = {}
    for i = 1, math.min(most, #t) do r[i] = ("%s %.0f"):format(t[i][1], t[i][2]) end
    return r
end

local PLAIN = [[CREATE TABLE IF NOT EXISTS @plain_slices (tenant B NOT NULL, dimension B NOT NULL,
    seq I NOT NULL, b3 B NOT NULL, quantity I NOT NULL, PRIMARY KEY (tenant, dimension, seq))]]

local function plain_ddl(s) return B.plain_ddl(s, PLAIN) end

local insert_cache = {}
local function plain_insert(s, n)
    local key = s.prefix .. s.dialect .. n
    if not insert_cache[key] then
        local one = "(?b, ?b, ?i, ?b, ?i)"
        insert_cache[key] = sql.render(s.dialect, s.prefix, "INSERT INTO @plain_slices (tenant, "
            .. "dimension, seq, b3, quantity) VALUES " .. string.rep(one, n, ","))
    end
    return insert_cache[key]
end

local function row_binds(list)
    local b = { n = 5 * #list }
    for i, s in ipairs(list) do
        local info = usage.from_slice(s)
        local k = 5 * (i - 1)
        b[k + 1], b[k + 2], b[k + 3], b[k + 4], b[k + 5] =
            usage.tenant_raw(s.tenant), s.dimension, info.seq, info.b3, 1000
    end
    return b
end

-- The baseline: the rows of `windows` (batch = true: one INSERT per window; else one per
-- slice), each INSERT made durable before the next (flush() under durability ack).
local function baseline(s, windows, batch, exec_ddl)
    assert(exec_ddl(plain_ddl(s)))
    local t0, rows = now(), 0
    for _, w in ipairs(windows) do
        local groups = batch and { w } or {}
        if not batch then for i, sl in ipairs(w) do groups[i] = { sl } end end
        for _, g in ipairs(groups) do
            assert(assert(s.drv:write(plain_insert(s, #g), row_binds(g))) == #g)
            if s.durability == "ack" then assert(s:flush() == 1) end
            rows = rows + #g
        end
    end
    return rows / (now() - t0)
end

-- The "same rows" baseline (issue 15: "a plain INSERT loop of the same rows"): the rows a
-- rated batch wrote, INSERTed plainly into a scratch copy of the store's tables, the same
-- batching, flushed per batch (tests/bench/same_rows.lua).
-- CPU seconds (user + system) of a process, and of this one and of the PostgreSQL server
-- the bench started (its postmaster and the postmaster's children: the pool's backends, the
-- WAL writer...): on 2 shared cores the server's CPU per slice competes with the engine's.
local CLK_TCK = 100
local function proc_cpu(pid)
    local f = io.open("/proc/" .. pid .. "/stat")
    if not f then return 0 end
    local st = f:read("*l")
    f:close()
    local rest = st and st:match("%) (.*)$")
    if not rest then return 0 end
    local fields = {}
    for x in rest:gmatch("%S+") do fields[#fields + 1] = x end
    -- fields from the state on: utime and stime are the stat file's 14th and 15th
    return ((tonumber(fields[12]) or 0) + (tonumber(fields[13]) or 0)) / CLK_TCK
end

local server_dir -- the PostgreSQL cluster's directory while it runs
local function server_cpu()
    if not server_dir then return 0 end
    local f = io.open(server_dir .. "/data/postmaster.pid")
    local pm = f and f:read("*l")
    if f then f:close() end
    if not pm or not pm:match("^%d+$") then return 0 end
    local total = proc_cpu(pm)
    local p = io.popen("ps -o pid= --ppid " .. pm)
    for pid in p:read("*a"):gmatch("%d+") do total = total + proc_cpu(pid) end
    p:close()
    return total
end

-- --pg-stats: the server's own time per statement (pg_stat_statements, loaded at start):
-- reset before a timed case, the top statements printed after it (us per slice of
-- execution inside the server, calls per batch, rows per call).
local stats_cluster
local function pg_stats_reset()
    if stats_cluster then assert(stats_cluster:psql("SELECT pg_stat_statements_reset()")) end
end

local function pg_stats_read(slices)
    if not stats_cluster then return nil end
    return assert(stats_cluster:psql(
        "SELECT round((total_exec_time * 1000 / " .. slices .. ")::numeric, 1), calls, rows, "
        .. "regexp_replace(left(query, 90), '\\s+', ' ', 'g') FROM pg_stat_statements "
        .. "WHERE query NOT LIKE '%pg_stat_statements%' ORDER BY total_exec_time DESC LIMIT 12"))
end

local function pg_stats_print(out, batches)
    if not out then return end
    print("    server execution (pg_stat_statements; us/slice, calls/batch, rows/call, statement):")
    for line in out:gmatch("[^\n]+") do
        local us, calls, rows, q = line:match("^([^|]*)|([^|]*)|([^|]*)|(.*)$")
        if us then
            print(("      %7s  %5.1f  %7.1f  %s"):format(us, tonumber(calls) / batches,
                                                    tonumber(rows) / math.max(1, tonumber(calls)),
                                                    q))
        end
    end
end

local function sqlite_path(name)
    return B.fresh_sqlite(opts.dir .. "/bench-ledger-rating-" .. name .. ".sqlite")
end

local results = {}

-- One case: a fresh store from open(), rated slices/s, its baseline, the ratio.
local function case(backend, durability, streams, n, open, exec_ddl_of)
    local W = math.max(1, math.floor(n / streams))
    local windows = make_slices(streams, W)
    local s = open()
    local calls = counting(s)
    local e = assert(lexp.new { store = s, card = card, node = "bench", book = "main" })
    assert(e:ready())
    -- warm-up: the tenants' accounts and the statements (not timed)
    local warm = make_slices(streams, 1)
    for _, sl in ipairs(warm[1]) do
        sl.tenant = sl.tenant:gsub("^00000000", "11111111")
        assert(e:put(sl) == "ok")
    end
    local c0 = calls.n
    local by0 = {}
    for k, v in pairs(calls.by) do by0[k] = v end
    local t0 = now()
    local total = 0
    for _, w in ipairs(windows) do
        if streams == 1 then
            local st, d = e:put(w[1])
            assert(st == "ok", tostring(st) .. " " .. tostring(d))
        else
            local r = e:put_many(w)
            for i = 1, #w do assert(r[i][1] == "ok", tostring(r[i][1]) .. " " .. tostring(r[i][2])) end
        end
        total = total + #w
    end
    local dt = now() - t0
    local sps = total / dt
    local per = (calls.n - c0) / total
    local parts = {}
    for k, v in pairs(calls.by) do
        if v > by0[k] then parts[#parts + 1] = { k, (v - by0[k]) / total } end
    end
    table.sort(parts, function(a, b) return a[2] > b[2] end)
    for i, p in ipairs(parts) do parts[i] = ("%s %.2f"):format(p[1], p[2]) end
    local base = baseline(s, windows, streams > 1, exec_ddl_of(s))
    local ratio = sps / base
    local label = ("%s %-9s %d stream%s"):format(backend, durability, streams,
                                                  streams == 1 and " " or "s")
    print(("%-32s %6d slices: rated %8.0f slices/s (%4.1f store calls/slice), plain INSERT "
           .. "(%s) %8.0f rows/s, ratio %.2f"):format(label, total, sps, per,
                                                     streams > 1 and ("batch of " .. streams)
                                                     or "row", base, ratio))
    emit(('{"bench":"ledger-rating","name":"rating_%s_%s_%d","params":{"slices":%d,'
          .. '"streams":%d,"durability":"%s"},"slices_per_s":%.1f,"store_calls_per_slice":%.2f,'
          .. '"baseline":"%s","baseline_rows_per_s":%.1f,"ratio":%.3f,"loadavg":"%s"}')
         :format(backend, durability, streams, total, streams, durability, sps, per,
                 streams > 1 and "insert_batch" or "insert_row", base, ratio, B.loadavg()))
    print("    store calls per slice: " .. table.concat(parts, ", "))
    results[#results + 1] = { label = label, sps = sps, base = base, ratio = ratio }
    e:close()
    s:close()
end

-- The batch path: put_many of `bsize` slices through commit_many, `streams` streams, n
-- slices in all; the baseline is the same rows in multi-row INSERTs of bsize rows (chunked
-- at 1024), flushed per batch.
-- The store and ron.ledger.exporter of a batch or daemon case, warmed up (not timed): the
-- statements on another tenant set, and the timed tenants' accounts created once.
-- The store calls so far (calls: counting's): count, time, and per call count and time.
local function calls_mark(calls)
    local by0, tby0 = {}, {}
    for k, v in pairs(calls.by) do by0[k], tby0[k] = v, calls.tby[k] end
    return calls.n, calls.t, by0, tby0
end

-- --mark: each measured run's start and end on stderr in CLOCK_MONOTONIC seconds, for
-- `perf record -k CLOCK_MONOTONIC` and `perf report --time START,END` (tests/bench/README.md
-- "Inside LuaJIT": the rated part alone, without the setup and the baselines)
local function mark(what)
    if not opts.mark then return end
    io.stderr:write(("perf-mark %s %.6f\n"):format(what, now()))
end

-- A measured run starts: PostgreSQL's statistics reset, the recorder (rec) and the profiler
-- on. -> this process's CPU, the server's, the clock
-- (cpu0: this process's CPU and its loop thread's)
local function measure_start(rec)
    mark("start")
    pg_stats_reset()
    local cpu0, srv0 = { proc_cpu("self"), proc_cpu("thread-self") }, server_cpu()
    local t0 = now()
    rec.on = true
    prof(true)
    return cpu0, srv0, t0
end

-- It ends. -> seconds, this process's CPU seconds, the server's, the loop thread's
local function measure_end(rec, cpu0, srv0, t0)
    prof(false)
    rec.on = false
    local dt = now() - t0
    mark("end")
    return dt, proc_cpu("self") - cpu0[1], server_cpu() - srv0,
           proc_cpu("thread-self") - cpu0[2]
end

-- The same rows plain (same_rows.lua) as the put_many calls rec recorded wrote them, call by
-- call, converted before the clock starts. -> rows, seconds, this process's CPU seconds
local function same_rows_run(s, rec, exec_ddl_of)
    local r = SR.run(s, rec, exec_ddl_of(s), {
        clock = now, cpu = function() return proc_cpu("self") end })
    return r.rows, r.seconds, r.cpu
end

local function warmed_exporter(open, streams)
    local s = open()
    local calls = counting(s)
    local rec = SR.recording(s)
    local e = assert(lexp.new { store = s, card = card, node = "bench", book = "main",
                                 lane_min = opts.lane_min, parallel = opts.lanes })
    assert(e:ready())
    local warm = make_slices(streams, 1)
    for _, sl in ipairs(warm[1]) do sl.tenant = sl.tenant:gsub("^00000000", "11111111") end
    for _, r in ipairs(e:put_many(warm[1])) do assert(r[1] == "ok", tostring(r[2])) end
    for t = 1, streams do
        assert(e:tenant_accounts(usage.tenant_raw(("00000000-0000-4000-8000-%012x"):format(t))))
    end
    return s, e, calls, rec
end

local function case_batch(backend, streams, bsize, n, open, exec_ddl_of)
    local W = math.max(1, math.floor(n / streams))
    local windows = make_slices(streams, W)
    local all = {}
    for _, w in ipairs(windows) do for _, sl in ipairs(w) do all[#all + 1] = sl end end
    local batches = require("ron.ledger.view").chunks(all, bsize)
    local s, e, calls, rec = warmed_exporter(open, streams)
    local c0, ct0, by0, tby0 = calls_mark(calls)
    local cpu0, srv0, t0 = measure_start(rec)
    for bi, b in ipairs(batches) do
        rec.cur = bi
        local r = e:put_many(b)
        for i = 1, #b do assert(r[i][1] == "ok", tostring(r[i][1]) .. " " .. tostring(r[i][2])) end
    end
    local dt, cpu_self, cpu_srv, cpu_loop = measure_end(rec, cpu0, srv0, t0)
    local stats = pg_stats_read(#all)
    local total = #all
    local sps = total / dt
    local per = (calls.n - c0) / total
    local parts = {}
    for k, v in pairs(calls.by) do
        if v > by0[k] then parts[#parts + 1] = { k, (v - by0[k]) / #batches } end
    end
    table.sort(parts, function(a, b) return a[2] > b[2] end)
    for i, p in ipairs(parts) do parts[i] = ("%s %.1f"):format(p[1], p[2]) end
    local tparts = store_times(calls, tby0, total, 6)
    local in_store = calls.t - ct0
    -- the baseline: the same rows, the same batching, the same durability
    local bs, close_bs = B.sync_store(s)
    assert(exec_ddl_of(bs)(plain_ddl(bs)))
    local tb0 = now()
    for _, b in ipairs(batches) do
        for i = 1, #b, 1024 do
            local g = {}
            for j = i, math.min(#b, i + 1023) do g[#g + 1] = b[j] end
            assert(assert(bs.drv:write(plain_insert(bs, #g), row_binds(g))) == #g)
        end
        if bs.durability == "ack" then assert(bs:flush() == 1) end
    end
    local base = total / (now() - tb0)
    local ratio = sps / base
    -- the same rows, plain (same_rows.lua)
    local nrows, same_dt = same_rows_run(bs, rec, exec_ddl_of)
    close_bs()
    local same = total / same_dt
    local ratio_same = sps / same
    local label = ("%s ack batch %4d, %3d stream%s"):format(backend, bsize, streams,
                                                            streams == 1 and " " or "s")
    print(("%-36s %6d slices: rated %8.0f slices/s (%5.2f store calls/slice), plain INSERT "
           .. "(batch of %d) %8.0f rows/s, ratio %.2f"):format(label, total, sps, per, bsize,
                                                              base, ratio))
    print(("    the same rows plain (%.1f rows/slice, batch of %d slices, %d rows/s): %.0f "
           .. "slices/s, ratio %.2f"):format(nrows / total, bsize, nrows / same_dt, same,
                                             ratio_same))
    print("    store calls per batch: " .. table.concat(parts, ", "))
    print(("    time per slice: %.0f us, in store calls %.0f us (%.0f%%), engine + exporter "
           .. "(Lua) %.0f us; top calls (us/slice): %s"):format(dt / total * 1e6,
           in_store / total * 1e6, 100 * in_store / dt, (dt - in_store) / total * 1e6,
           table.concat(tparts, ", ")))
    print(("    CPU per slice: this process %.0f us (its loop thread %.0f), the PostgreSQL "
           .. "server %.0f us (load %s)"):format(cpu_self / total * 1e6, cpu_loop / total * 1e6,
                                                cpu_srv / total * 1e6, B.loadavg()))
    pg_stats_print(stats, #batches)
    emit(('{"bench":"ledger-rating","name":"rating_batch_%s_%d_%d","params":{"slices":%d,'
          .. '"streams":%d,"batch":%d,"durability":"ack"},"slices_per_s":%.1f,'
          .. '"store_calls_per_slice":%.3f,"store_time_share":%.3f,"baseline":"insert_batch_%d",'
          .. '"baseline_rows_per_s":%.1f,"ratio":%.3f,"same_rows_per_slice":%.2f,'
          .. '"same_rows_slices_per_s":%.1f,"ratio_same_rows":%.3f,"cpu_us_per_slice":%.1f,'
          .. '"server_cpu_us_per_slice":%.1f,"loadavg":"%s"}')
         :format(backend:gsub(" ", ""), bsize, streams, total, streams, bsize, sps, per,
                 in_store / dt, bsize, base, ratio, nrows / total, same, ratio_same,
                 cpu_self / total * 1e6, cpu_srv / total * 1e6, B.loadavg()))
    results[#results + 1] = { label = label, sps = sps, base = base, ratio = ratio }
    e:close()
    s:close()
end

-- The daemon's shape (see the header): S streams x W windows through the runtime's put
-- path (the runtime's put batcher, ron.accounting.runtime.puts: the daemon's own code).
local puts_mod = require("ron.accounting.runtime").puts
local function case_daemon(backend, streams, n, open, exec_ddl_of)
    local W = math.max(1, math.floor(n / streams))
    local windows = make_slices(streams, W)
    local s, e, calls, rec = warmed_exporter(open, streams)
    -- the exporter as the runtime sees it: every put_many's slices kept (its size, the
    -- baseline's batching), how many ran at once
    local sent, at_once, max_at_once, nb = {}, 0, 0, 0
    local wrapped = { put_many = function(_, list)
        nb = nb + 1
        rec.cur = nb
        sent[nb] = list
        at_once = at_once + 1
        if at_once > max_at_once then max_at_once = at_once end
        if TL then TL:begin(nb == opts.timeline) end
        local ok, r, err = pcall(e.put_many, e, list)
        if TL then TL:done(string.format("put_many %d of %d slices", nb, #list)) end
        at_once = at_once - 1
        if not ok then error(r, 0) end
        return r, err
    end }
    local puts = puts_mod.new { task = task, exporter = wrapped, put_batch = opts.put_batch,
                                put_parallel = opts.put_parallel }
    local c0, ct0, by0, tby0 = calls_mark(calls)
    local sr0, sb0 = calls.saga_rows, calls.saga_bytes
    local st0 = (opts.stages or opts.alloc) and ST.mark(e)
    if opts.alloc then
        collectgarbage()
        collectgarbage("stop")
    end
    local pp0 = PP and PP.snap()
    local cpu0, srv0, t0 = measure_start(rec)
    local workers, failed = {}, {}
    for t = 1, streams do
        local st = { reply = task.channel(1, "put_reply") }
        workers[t] = task.spawn("bench_worker", function()
            for w = 1, W do
                local status, detail = puts:put(st.reply, windows[w][t])
                if status ~= "ok" then
                    failed[#failed + 1] = tostring(status) .. " " .. tostring(detail)
                    return
                end
            end
        end)
    end
    for _, h in ipairs(workers) do assert(h:join()) end
    local dt, cpu_self, cpu_srv, cpu_loop = measure_end(rec, cpu0, srv0, t0)
    local total = streams * W
    if opts.alloc then
        print("    " .. ST.alloc_line(st0, total))
        collectgarbage("restart")
    end
    assert(#failed == 0, failed[1])
    local stats = pg_stats_read(total)
    local sps = total / dt
    local per = (calls.n - c0) / total
    local sizes, smin, smax = 0, math.huge, 0
    for _, l in ipairs(sent) do
        sizes = sizes + #l
        smin, smax = math.min(smin, #l), math.max(smax, #l)
    end
    local parts = {}
    for k, v in pairs(calls.by) do
        if v > by0[k] then parts[#parts + 1] = { k, (v - by0[k]) / nb } end
    end
    table.sort(parts, function(a, b) return a[2] > b[2] end)
    for i = 1, math.min(8, #parts) do parts[i] = ("%s %.1f"):format(parts[i][1], parts[i][2]) end
    for i = #parts, 9, -1 do parts[i] = nil end
    local tparts = store_times(calls, tby0, total, 8)
    -- baselines, the batching the case had
    local bs, close_bs = B.sync_store(s)
    assert(exec_ddl_of(bs)(plain_ddl(bs)))
    local tb0 = now()
    for _, b in ipairs(sent) do
        assert(assert(bs.drv:write(plain_insert(bs, #b), row_binds(b))) == #b)
        if bs.durability == "ack" then assert(bs:flush() == 1) end
    end
    local base = total / (now() - tb0)
    local nrows, same_dt, same_cpu = same_rows_run(bs, rec, exec_ddl_of)
    close_bs()
    local same = total / same_dt
    local label = ("%s daemon %4d streams x %d"):format(backend, streams, W)
    print(("%-36s %6d slices: rated %8.0f slices/s (%5.2f store calls/slice), put_many %d "
           .. "calls of %d..%d (mean %.0f) slices, %d at once (put_batch %d, put_parallel %d)")
          :format(label, total, sps, per, nb, smin, smax, sizes / nb, max_at_once,
                  opts.put_batch, opts.put_parallel))
    print(("    plain INSERT of the row of the slice, the same batches: %.0f rows/s, ratio %.2f;"
           .. " the same rows (%.1f/slice): %.0f slices/s, ratio %.2f"):format(base, sps / base,
           nrows / total, same, sps / same))
    print("    store calls per put_many: " .. table.concat(parts, ", "))
    print("    wall us per slice in store calls (nested: apply holds its primitives): "
          .. table.concat(tparts, ", "))
    print(("    saga records the store listed (LED-32's look): %d rows, %d bytes of data (%.0f "
           .. "per slice)"):format(calls.saga_rows - sr0, calls.saga_bytes - sb0,
                                  (calls.saga_bytes - sb0) / total))
    print(("    time per slice %.0f us (store calls, overlapping: %.0f us); CPU per slice: this "
           .. "process %.0f us (its loop thread %.0f; the same rows' INSERTs: %.0f us), the "
           .. "PostgreSQL server %.0f us (load %s)"):format(dt / total * 1e6,
           (calls.t - ct0) / total * 1e6, cpu_self / total * 1e6, cpu_loop / total * 1e6,
           same_cpu / total * 1e6, cpu_srv / total * 1e6, B.loadavg()))
    if opts.stages then
        print("    " .. ST.line(st0, total))
        local sl = ST.strings_line(st0, total)
        if sl then print("    " .. sl) end
    end
    -- (its "per transfer": per rated slice)
    local pb = PP and PP.print(backend, pp0, total)
    -- the writer's busy time bounds any work on the loop's side (the C batch path's too):
    -- with the loop free and overlapped, a slice still holds the writer this long
    local ceil = PP and PP.ceiling(pb)
    if ceil then
        print(("    ceiling with the loop's work free and overlapped: the writer's %.0f us per "
               .. "slice -> %.0f slices/s, ratio %.2f of the same rows (now %.2f: the writer "
               .. "busy %.0f %% of the time)"):format(pb.write[1], ceil, ceil / same, sps / same,
               100 * pb.write[1] * total / 1e6 / dt))
    end
    if TL and TL.label then TL:print() end
    pg_stats_print(stats, nb)
    emit(('{"bench":"ledger-rating","name":"rating_daemon_%s_%d","params":{"slices":%d,'
          .. '"streams":%d,"windows":%d,"put_batch":%d,"put_parallel":%d},"slices_per_s":%.1f,'
          .. '"put_many_calls":%d,"put_many_mean":%.1f,"put_many_at_once":%d,'
          .. '"store_calls_per_slice":%.3f,"baseline":"insert_batch","baseline_rows_per_s":%.1f,'
          .. '"ratio":%.3f,"same_rows_per_slice":%.2f,"same_rows_slices_per_s":%.1f,'
          .. '"ratio_same_rows":%.3f,"cpu_us_per_slice":%.1f,"server_cpu_us_per_slice":%.1f,'
          .. '"loadavg":"%s"}')
         :format(backend:gsub(" ", ""), streams, total, streams, W, opts.put_batch,
                 opts.put_parallel, sps, nb, sizes / nb, max_at_once, per, base, sps / base,
                 nrows / total, same, sps / same, cpu_self / total * 1e6,
                 cpu_srv / total * 1e6, B.loadavg()))
    results[#results + 1] = { label = label, sps = sps, base = base, ratio = sps / base }
    e:close()
    s:close()
end

local function batch_cases(backend, open, exec_ddl_of)
    for _, bsize in ipairs(opts.batches) do
        for _, streams in ipairs { 1, opts.batch_streams } do
            case_batch(backend, streams, bsize, opts.batch_slices, open, exec_ddl_of)
        end
    end
    for _, streams in ipairs(opts.daemon) do
        case_daemon(backend, streams, opts.batch_slices, open, exec_ddl_of)
    end
end

local function run()
    print(("bench-ledger-rating: %d streams, load %s, gc_pause %s, gc_stepmul %d, "
           .. "gc_idle_us %d%s"):format(opts.streams, B.loadavg(),
          opts.gc_pause > 0 and opts.gc_pause or "200 (LuaJIT's)", opts.gc_stepmul,
          opts.gc_idle_us, GC and "" or " (no idle steps)"))
    local shapes = { 1, opts.streams }
    if opts.sqlite and #opts.batches + #opts.daemon > 0 then
        local p
        batch_cases(opts.offload and "sqlite-o" or "sqlite  ", function()
            p = sqlite_path("batch")
            return assert(store.open { backend = "sqlite", path = p, durability = "ack",
                                       offload = opts.offload })
        end, function(s) return function(ddl) return s.drv:exec(ddl) end end)
        sqlite_path("batch")
        if PP then PP.remove() end -- (the pool threads' profile files)
    end
    if opts.sqlite and opts.single then
        for _, d in ipairs { "ack", "statement" } do
            for _, k in ipairs(shapes) do
                local p = sqlite_path(d .. k)
                case("sqlite  ", d, k, d == "ack" and opts.slices or opts.statement_slices,
                     function()
                         return assert(store.open { backend = "sqlite", path = p,
                                                    durability = d })
                     end,
                     function(s) return function(ddl) return s.drv:exec(ddl) end end)
                sqlite_path(d .. k)
            end
        end
    end
    if not opts.pg then return end
    local cluster = B.pg_cluster("bench-ledger-rating", H)
    if not cluster then return end
    server_dir = cluster.dir
    if opts.pg_stats then
        assert(cluster:psql("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'"))
        cluster:stop_server()
        cluster:start_server()
        local out, rc = cluster:psql("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        assert(rc == 0, out)
        stats_cluster = cluster
    end
    local okr, err = pcall(function()
        local n = 0
        if #opts.batches + #opts.daemon > 0 then
            batch_cases("postgres", function()
                n = n + 1
                return assert(store.open { backend = "postgres", conninfo = cluster.conninfo,
                                           schema = "rating_" .. n, connections = 4,
                                           durability = "ack", connect_timeout_ms = 30000,
                                           query_timeout_ms = 120000 })
            end, function(s) return function(ddl) return s.drv.db:exec(ddl) end end)
        end
        if not opts.single then return end
        for _, d in ipairs { "ack", "statement" } do
            for _, k in ipairs(shapes) do
                n = n + 1
                case("postgres", d, k, d == "ack" and opts.slices or opts.statement_slices,
                     function()
                         return assert(store.open { backend = "postgres",
                                                    conninfo = cluster.conninfo,
                                                    schema = "rating_" .. n, connections = 4,
                                                    durability = d,
                                                    connect_timeout_ms = 30000,
                                                    query_timeout_ms = 120000 })
                     end,
                     function(s) return function(ddl) return s.drv.db:exec(ddl) end end)
            end
        end
    end)
    server_dir, stats_cluster = nil, nil
    cluster:stop()
    if not okr then error(err, 0) end
end

B.main("bench-ledger-rating", run)
