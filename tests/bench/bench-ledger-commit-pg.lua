-- bench-ledger-commit-pg.lua: where the time of one uncontended Ledger:commit on PostgreSQL
-- goes (issue 25, docs/LEDGER.md "One round trip on PostgreSQL").
--
--   build/ron-accounting run tests/bench/bench-ledger-commit-pg.lua [--commits N]
--       [--warmup N] [--plan-cache N] [--no-prepare] [--explain MS] [--out FILE]
--   --plan-cache 0: every commit reads first (LED-73 off); --no-prepare: the statements sent
--   unnamed (parsed and planned by the server every time); --explain MS: auto_explain logs
--   the plan (with ANALYZE, nested statements too) of every statement of MS milliseconds or
--   more, and the bench prints, per statement, how many were logged and their scan nodes
--   (how docs/LEDGER.md "A new ledger's generic plans" was found; the run's figures then
--   carry auto_explain's own cost: it times every node of every statement)
--
-- A server the bench starts (fsync on, synchronous_commit on: the durable contract) with
-- pg_stat_statements (planning tracked) and WAL I/O timing; one engine over a pool of 4, each
-- commit a payment of 1 unit from one of 16 funded payers (a posting and its change) to a
-- sink, one at a time. After a warm-up it resets the server's counters and prints, per
-- commit: the wall time (p50, mean), this process's CPU, the round trips (pipelines and
-- single statements) and the wall time spent waiting in them, the server's execution and
-- planning time per statement (pg_stat_statements), the server processes' CPU (/proc), and
-- the WAL's flushes and their time (pg_stat_wal). The load average beside every figure.
package.path = (debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "?.lua;" .. package.path
local B = require("bench_common") -- and lua/ on package.path
local L = require("ron.ledger.ledger")
local pct = require("ron.base.percentile")
local uv = require("luv")

local format = string.format

local opts = { commits = 2000, warmup = 200, out = nil, cache = nil }
B.args(arg, opts, {
    { "--commits", "commits", "num" }, { "--warmup", "warmup", "num" },
    { "--plan-cache", "cache", "num" }, { "--no-prepare", "noprep", "on" },
    { "--explain", "explain", "num" },
}, "bench-ledger-commit-pg.lua [--commits N] [--warmup N] [--plan-cache N] [--no-prepare] "
   .. "[--explain MS] [--out F]")

local USD = { code = "USD", scale = 2 }
local EXT, SINK = ("E"):rep(16), ("S"):rep(16)
local PAYERS = {}
for k = 1, 16 do PAYERS[k] = format("P%015d", k) end

-- The server's processes' CPU seconds (every child of the postmaster: the backends, the
-- WAL writer, the checkpointer...), from /proc.
local function server_cpu_s(cluster)
    local f = io.open(cluster.dir .. "/data/postmaster.pid")
    if not f then return 0 end
    local pm = f:read("*l")
    f:close()
    local hz = 100
    local total = 0
    local p = io.popen("ps -o pid= --ppid " .. pm)
    local pids = p:read("*a")
    p:close()
    for pid in (pids .. " " .. pm):gmatch("%d+") do
        local s = io.open("/proc/" .. pid .. "/stat")
        if s then
            local line = s:read("*l")
            s:close()
            local rest = line and line:match("%) (.*)$")
            if rest then
                local fields = {}
                for w in rest:gmatch("%S+") do fields[#fields + 1] = w end
                -- fields[12], [13]: utime, stime (the 14th and 15th of stat)
                total = total + (tonumber(fields[12]) + tonumber(fields[13])) / hz
            end
        end
    end
    return total
end

-- Round trips through the pool, each timed (wall): the store's pipelines (store:apply) and
-- its single statements (a primitive outside a phase).
local function time_round_trips(db)
    local c = { pipelines = 0, queries = 0, wait_s = 0 }
    for _, m in ipairs { "pipeline", "query" } do
        local f = db[m]
        db[m] = function(self, ...)
            local t0 = uv.hrtime()
            local r = { f(self, ...) }
            c.wait_s = c.wait_s + (uv.hrtime() - t0) / 1e9
            if m == "pipeline" then c.pipelines = c.pipelines + 1 else c.queries = c.queries + 1 end
            return unpack(r, 1, table.maxn(r))
        end
    end
    return c
end

local function psql_rows(cluster, q)
    local out, rc = cluster:psql(q)
    assert(rc == 0, out)
    local rows = {}
    for line in out:gmatch("[^\n]+") do
        local r = {}
        for v in (line .. "|"):gmatch("([^|]*)|") do r[#r + 1] = v end
        rows[#rows + 1] = r
    end
    return rows
end

-- The cluster's settings for the measurement: pg_stat_statements needs a restart.
local function instrument_server(cluster)
    for _, s in ipairs {
        "ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'"
            .. (opts.explain and ", 'auto_explain'" or ""),
        "ALTER SYSTEM SET track_wal_io_timing = on",
    } do psql_rows(cluster, s) end
    cluster:stop_server()
    cluster:start_server()
    uv.update_time()
    psql_rows(cluster, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    psql_rows(cluster, "ALTER SYSTEM SET pg_stat_statements.track_planning = on")
    if opts.explain then
        for _, set in ipairs { "log_min_duration = " .. math.floor(opts.explain),
                               "log_analyze = on", "log_nested_statements = on" } do
            psql_rows(cluster, "ALTER SYSTEM SET auto_explain." .. set)
        end
    end
    psql_rows(cluster, "SELECT pg_reload_conf()")
end

-- --explain: the plans auto_explain wrote to the server's log, per statement (its first 90
-- characters): how many, and each scan node's count (the relation or index it reads).
local function explained(cluster)
    local f = io.open(cluster.dir .. "/log.start")
    if not f then return end
    local by, order, q = {}, {}, nil
    for line in f:lines() do
        local text = line:match("Query Text: (.*)")
        if text then
            q = text:gsub("%s+", " "):sub(1, 90)
            if not by[q] then by[q], order[#order + 1] = { n = 0, scans = {} }, q end
            by[q].n = by[q].n + 1
        elseif q then
            local scan = line:match("%->%s+([%w ]-Scan[%w ]- on [%w_.\"]+)")
                         or line:match("%->%s+([%w ]-Scan using [%w_]+)")
            if scan then by[q].scans[scan] = (by[q].scans[scan] or 0) + 1 end
        end
    end
    f:close()
    print(format("plans logged by auto_explain (statements of %d ms or more):", opts.explain))
    for _, k in ipairs(order) do
        local parts = {}
        for scan, c in pairs(by[k].scans) do parts[#parts + 1] = format("%s x%d", scan, c) end
        table.sort(parts)
        print(format("%8d  %s\n          %s", by[k].n, k, table.concat(parts, "; ")))
    end
end

local function reset(cluster)
    psql_rows(cluster, "SELECT pg_stat_statements_reset(); SELECT pg_stat_reset_shared('wal')")
end

local function report(cluster, n, lat, cpu_s, rt, scpu_s, emit)
    local wall = 0
    for _, v in ipairs(lat) do wall = wall + v end
    local stmts = psql_rows(cluster, [[SELECT calls, round(total_exec_time::numeric, 3),
        round(total_plan_time::numeric, 3), plans, regexp_replace(left(query, 90), '\s+', ' ', 'g')
        FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat%'
        ORDER BY total_exec_time + total_plan_time DESC]])
    local exec_ms, plan_ms = 0, 0
    print(format("%-8s %9s %9s  statement (per commit: calls, exec us, plan us)", "calls",
                 "exec", "plan"))
    for _, r in ipairs(stmts) do
        exec_ms, plan_ms = exec_ms + tonumber(r[2]), plan_ms + tonumber(r[3])
        print(format("%8.2f %9.1f %9.1f  %s", tonumber(r[1]) / n, tonumber(r[2]) * 1000 / n,
                     tonumber(r[3]) * 1000 / n, r[5]))
    end
    local w = psql_rows(cluster, "SELECT wal_records, wal_write, wal_sync, "
                        .. "round(wal_write_time::numeric, 3), round(wal_sync_time::numeric, 3) "
                        .. "FROM pg_stat_wal")[1]
    local x = {
        p50_us = pct(lat, 0.5), mean_us = wall / n, cpu_us = cpu_s / n * 1e6,
        pipelines = rt.pipelines / n, queries = rt.queries / n, wait_us = rt.wait_s / n * 1e6,
        exec_us = exec_ms * 1000 / n, plan_us = plan_ms * 1000 / n,
        server_cpu_us = scpu_s / n * 1e6, wal_records = tonumber(w[1]) / n,
        wal_syncs = tonumber(w[3]) / n, wal_write_us = tonumber(w[4]) * 1000 / n,
        wal_sync_us = tonumber(w[5]) * 1000 / n,
    }
    print(format("plan_cache %s, prepare %s: ", tostring(opts.cache or "default"),
                 tostring(not opts.noprep)))
    print(format("per commit over %d: wall p50 %.0f us, mean %.0f us; this process's CPU %.0f "
                 .. "us; round trips %.2f (pipelines) + %.2f (statements), waiting %.0f us in "
                 .. "them; server exec %.0f us + plan %.0f us (pg_stat_statements), server CPU "
                 .. "%.0f us; WAL records %.1f, syncs %.2f taking %.0f us (writes %.0f us)  "
                 .. "loadavg %s", n, x.p50_us, x.mean_us, x.cpu_us, x.pipelines, x.queries,
                 x.wait_us, x.exec_us, x.plan_us, x.server_cpu_us, x.wal_records, x.wal_syncs,
                 x.wal_sync_us, x.wal_write_us, B.loadavg()))
    local parts = {}
    for k, v in pairs(x) do parts[#parts + 1] = format('"%s":%.2f', k, v) end
    table.sort(parts)
    emit(format('{"bench":"ledger-commit-pg","commits":%d,"plan_cache":"%s","prepare":%s,%s,'
                .. '"loadavg":"%s"}', n, tostring(opts.cache or "default"),
                tostring(not opts.noprep), table.concat(parts, ","), B.loadavg()))
end

B.main("bench-ledger-commit-pg", function(T)
    local emit = B.emitter(opts.out)
    local H = B.pg_harness()
    B.with_pg_store("bench-ledger-commit-pg", H, "bench_commit", function(s, cluster)
        instrument_server(cluster)
        local lopts = { store = s, book = "bench", node = "bench-commit",
                        pause = function(k) T.sleep(k) end }
        lopts.plan_cache = opts.cache
        s.prepare = not opts.noprep
        local led = L.new(lopts)
        B.fund_payers(led, EXT, SINK, PAYERS, USD)
        local k = 0
        local function one()
            k = k + 1
            assert(led:commit { intent = "pay-" .. k, movements = {
                { from = PAYERS[k % 16 + 1], to = SINK, asset = USD, amount = 1 } } })
        end
        for _ = 1, opts.warmup do one() end
        T.sleep(1100) -- (a backend reports its statistics within a second of going idle)
        reset(cluster)
        local rt = time_round_trips(s.drv.db)
        local lat, n = {}, opts.commits
        local scpu0, c0 = server_cpu_s(cluster), os.clock()
        for i = 1, n do
            local a = uv.hrtime()
            one()
            lat[i] = (uv.hrtime() - a) / 1000
        end
        local cpu_s, scpu_s = os.clock() - c0, server_cpu_s(cluster) - scpu0
        T.sleep(1100)
        report(cluster, n, lat, cpu_s, rt, scpu_s, emit)
        if opts.explain then explained(cluster) end
    end)
    return true
end)
