-- bench-wallet.lua: ron-wallet through HTTP on loopback against the ledger's own commit rate,
-- same process, same store, same run (issue 17 "Benchmarks", docs/WALLET.md §8).
--
--   ron-accounting run tests/bench/bench-wallet.lua [--quick] [--out FILE] [--dir DIR]
--       [--seconds S] [--conns N] [--workers N] [--accounts K] [--no-pg] [--no-sqlite]
--       [--group-max N]   (the wallet's group_max: 1 = no group commit, one job per commit)
--       [--group-linger-ms N] (the wallet's group_linger_ms: 0 = take only what is queued)
--       [--no-pipeline]   (the wallet's group_pipeline = false: one group of a lane at a
--                          time; each case prints how many groups were sent planned on the
--                          one before in flight, and how many were planned again)
--       [--cases LIST]    (some of commit,hot,spread,balance; all by default: the baselines
--                          of the transfer cases run, the others are skipped)
--       [--profile FILE]  (LuaJIT's profiler, jit.p mode "Fm1", over each transfer run;
--                          FILE holds the last one's; an idle wait of the loop shows as the
--                          first Lua line run after it, the store's `after`)
--       [--warmup S]      (before each transfer case, an unmeasured run of S seconds:
--                          printed and emitted as <case>_cold, then the case warm;
--                          default 0: the case alone, cold)
--       [--gc-ms]         (the collector's samples per second of a transfer case, from
--                          LuaJIT's sampling profiler: a lower bound, 10-20x low against
--                          a LuaJIT that times its steps (wallet_tail.lua); starting it
--                          flushes the compiled traces: every case then starts cold)
--       [--wal-census]    (SQLite: the store's checkpoints held off after the first, and after
--                          each transfer case the WAL frames it wrote per transfer, by
--                          table and index: tests/bench/wal_census.lua)
--       [--checkpoint-ms N] (SQLite: the store's checkpoint_ms, docs/LEDGER.md)
--       [--no-reader]     (SQLite: the store's reads on its one connection, reader = false,
--                          instead of the reader connection beside the writer's)
--       [--pool-profile]  (SQLite: after each transfer case, where the group phases' time
--                          went inside the store's thread: the phase, its decode and encode,
--                          each primitive, each statement's bind and steps, COMMIT:
--                          tests/bench/pool_profile.lua; the writer's and the reader's
--                          busy time per transfer, every call, and the ceiling the
--                          writer's sets against B1)
--       [--gaps]          (after each transfer case, the store writer's time without a
--                          batch's write phase, by what the next batch was doing then:
--                          tests/bench/writer_gaps.lua)
--       [--gc-pause N]    (collectgarbage "setpause" for the whole run, as the daemon's
--                          gc_pause does; default the daemon's own, ron.node.schema's 400:
--                          a wallet runs in the daemon, so the bench measures what it runs;
--                          0 = LuaJIT's own 200, the bench's default before 2026-12-01)
--       [--gc-stepmul N] [--gc-idle-us N]  (the collector's step multiplier and its steps
--                          in the loop's idle time, up to N us per poll, 0 = none: the
--                          daemon's gc_stepmul and gc_idle_us, its defaults too; ron.base.gcidle)
--       [--cached N]      (the balance cache holding N more balances (of accounts nobody
--                          moves) from the start of each store's cases, as a node whose
--                          clients read N accounts: what the collector has to walk)
--       [--soak S]        (memory, issue 25's "flat under a 5-minute run": --soak 300.
--                          Instead of the cases below: transfer (K sources), transfer_hot
--                          and balance_http each for S seconds in slices of at most 30 s,
--                          this process's RSS printed after every slice, the money checked
--                          after every transfer slice; no baselines)
--
-- Per store (SQLite in DIR, offloaded, durability ack; PostgreSQL: a server this benchmark
-- starts, fsync on, a pool of 8 connections), one wallet service (--workers committers) on
-- the daemon's HTTP server in this process, wrk (-t1, --conns keep-alive connections, a
-- separate process: tests/bench/wrk-wallet.lua) on loopback. Transfers of 1 minor unit to
-- one sink account, every request a new Idempotency-Key and nonce, from one source account
-- (hot: every commit races for that account's one posting) or from K accounts in turn:
--   direct_hot, direct   baseline: Ledger:commit in this process on the same store from
--                        --workers tasks at once for S seconds (other accounts, no HTTP,
--                        no Idempotency-Key row, no queue), a commit that lost the race for
--                        a posting tried again: commits/s, p50/p99 per commit
--   transfer_hot,        POST /v1/transfer under wrk for S seconds: transfers/s (201s),
--   transfer             p50/p99 (wrk's), ratio = transfers/s / the direct rate
--   balance_http         GET balance of one account for S seconds (the cache), against
--                        GET /healthz (the HTTP stack's floor): reads/s, p50/p99, ratio, and
--                        the CPU per read of this process (its loop thread) and of wrk
--   sql_b1, sql_b2       the plain-SQL transfer ledger (tests/bench/sql_baseline.lua) on the
--   (_hot)               same store kind in the same run, before the wallet starts: B1 one
--                        transaction per transfer, B2 64 per transaction, from K sources or
--                        the hot one (SQLite: a file beside the ledger's, WAL, synchronous
--                        FULL, one connection; PostgreSQL: the same server, --conns
--                        connections, synchronous_commit on). Every wallet figure is printed
--                        with its ratio to B1 and B2 and the issue 25 targets beside them;
--                        on SQLite B1 runs again after each transfer case (its sync rate
--                        moves with the disk's) and the ratio to it is printed too
--                        (--no-b1-after: not)
--   same_rows(_hot)      after each transfer case: the rows its transfers wrote (recorded
--                        from the store calls: postings, transfers, transfer_accounts,
--                        intents, claims, events; tests/bench/same_rows.lua; the first 128
--                        groups, of the unmeasured warm-up run with --warmup) INSERTed again
--                        plainly into scratch tables of the same store with the same keys
--                        and indexes, first filled (untimed) with as many rows as the
--                        store's tables hold (the ledger's size: same_rows.lua's prefill),
--                        group by group as the wallet committed them (SQLite:
--                        one transaction each on a second, synchronous connection), each
--                        flushed: what the design's rows cost alone, no HTTP, no reads, no
--                        engine; printed in transfers/s with the seconds per table and
--                        the ratio to B1; same_rows_x2: the same, every two groups written
--                        as one (~64 a commit, the most 64 connections can put in one:
--                        a ceiling for any design writing these rows; --same-merge LIST)
-- The HTTP server admits --conns + 8 connections per peer (wrk is one loopback peer; the
-- daemon's default is 32). RSS of this process is printed at the start and end of a store.
-- After each transfer run: the CPU per transfer (and the loop VM's traces compiled and
-- aborted meanwhile: B.jit_counter), the groups, the store's calls, and where a
-- transfer's time goes (ms p50/p99/max of the commit queue's wait, each group's commit, the
-- server's time per request, the loop's lag), and the same second by second with the
-- groups' sizes and the loop's samples in the collector and the trace compiler
-- (tests/bench/wallet_tail.lua). Then the ledger's balances are checked (the
-- sources lost at least one unit per 201 and no more than one per request). One `BENCH
-- {json}` line per case. Needs wrk (tools/deps.sh).
local uv = require("luv")

package.path = (debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "?.lua;" .. package.path
local B = require("bench_common") -- and lua/ on package.path
local H = B.pg_harness()
local acct = require("ron.accounting")
local http = require("ron.node.http")
local store_mod = require("ron.ledger.store")
local L = require("ron.ledger.ledger")
local service = require("ron.wallet.service")
local dto = require("ron.wallet.dto")
local SB = require("sql_baseline")
local pct = require("ron.base.percentile")
local WT = require("wallet_tail")
local census = require("wal_census")
local SR = require("same_rows")
local PP = require("pool_profile")
local WG = require("writer_gaps")
local verify = require("ron.ledger.verify")

local NODE = require("ron.node.schema").DEFAULTS -- (the daemon's collector settings)
local opts = { quick = false, dir = os.getenv("TMPDIR") or "/tmp", seconds = 5, conns = 64,
               workers = service.DEFAULTS.workers, accounts = 16, pg = true, sqlite = true,
               gc_pause = NODE.gc_pause, gc_stepmul = NODE.gc_stepmul,
               gc_idle_us = NODE.gc_idle_us, same_merge = { 1, 2 },
               b1_after = true }
B.args(arg, opts, { { "--seconds", "seconds", "num" }, { "--conns", "conns", "num" },
             { "--workers", "workers", "num" }, { "--group-max", "group_max", "num" },
             { "--accounts", "accounts", "num" }, { "--group-linger-ms", "linger", "num" },
             { "--cases", "cases", "str" },
             { "--no-pg", "pg", "off" }, { "--no-sqlite", "sqlite", "off" },
             { "--profile", "profile", "str" }, { "--soak", "soak", "num" },
             { "--warmup", "warmup", "num" }, { "--gc-ms", "gc_ms", "on" },
             { "--wal-census", "wal_census", "on" }, { "--checkpoint-ms", "ckpt_ms", "num" },
             { "--gc-pause", "gc_pause", "num" }, { "--gc-stepmul", "gc_stepmul", "num" },
             { "--gc-idle-us", "gc_idle_us", "num" }, { "--cached", "cached", "num" },
             { "--no-reader", "reader", "off" }, { "--pool-profile", "pool_profile", "on" },
             { "--no-pipeline", "pipeline", "off" }, { "--gaps", "gaps", "on" },
             { "--no-b1-after", "b1_after", "off" },
             { "--same-merge", "same_merge", "nums" } },
       "ron-accounting run bench-wallet.lua [--quick] [--out FILE] [--dir DIR] [--seconds N] "
           .. "[--conns N] [--workers N] [--group-max N] [--group-linger-ms N] [--accounts N] "
           .. "[--cases commit,hot,spread,balance] [--no-pg] [--no-sqlite] [--profile FILE] "
           .. "[--soak S] [--warmup S] [--gc-ms] [--wal-census] [--checkpoint-ms N] "
           .. "[--gc-pause N] [--gc-stepmul N] [--gc-idle-us N] [--cached N] [--no-reader] "
           .. "[--pool-profile] [--no-pipeline] "
           .. "[--gaps] [--same-merge 1,2] [--no-b1-after]")
local CASES = {}
for c in (opts.cases or "commit,hot,spread,balance"):gmatch("[^,]+") do CASES[c] = true end
if opts.quick then opts.seconds, opts.conns = 1, 4 end
for _, m in ipairs(opts.same_merge) do
    assert(m >= 1 and m % 1 == 0, "--same-merge: factors are integers >= 1")
end
-- (the daemon's collector: ron.node sets it through the same call)
local GC = require("ron.base.gcidle").configure {
    pause = opts.gc_pause > 0 and opts.gc_pause or nil, stepmul = opts.gc_stepmul,
    idle_us = opts.gc_idle_us }
if opts.pool_profile then PP.enable(opts.dir) end
local emit = B.emitter(opts.out)
local format = string.format

local USD = { code = "USD", scale = 2 }
local FUND = 1000000000000

print(format("bench-wallet: %d s per case, %d connections, %d workers, group_max %s, " ..
             "group_linger_ms %s, %d source accounts, gc pause %d stepmul %d idle_us %d, "
             .. "loadavg %s", opts.seconds,
             opts.conns, opts.workers, tostring(opts.group_max or service.DEFAULTS.group_max),
             tostring(opts.linger or service.DEFAULTS.group_linger_ms), opts.accounts,
             opts.gc_pause > 0 and opts.gc_pause or 200, opts.gc_stepmul, opts.gc_idle_us,
             B.loadavg()))


-- wrk in its own process (the loop keeps serving meanwhile) -> the WRK line's fields
local function run_wrk(T, port, mode, base, from, to)
    local env = { "PATH=" .. (os.getenv("PATH") or "/usr/bin:/bin"), "WALLET_FROM=" .. from,
                  "WALLET_TO=" .. to, "WALLET_MODE=" .. mode, "WALLET_BASE=" .. base }
    -- (not uv.spawn: its fork would make the server pay a write fault on every page of its
    -- heap at the start of each case, B.spawn_out)
    local out_path = os.tmpname()
    local pid, err = B.spawn_out("wrk", { "-t1", "-c" .. opts.conns,
                                          "-d" .. opts.seconds .. "s", "--timeout", "10s",
                                          "-s", B.here .. "wrk-wallet.lua",
                                          "http://127.0.0.1:" .. port .. "/" }, env, out_path)
    assert(pid, "wrk: " .. tostring(err) .. " (Debian: wrk, tools/deps.sh)")
    local code
    local t_end = uv.now() + opts.seconds * 1000 + 60000
    repeat
        T.sleep(20)
        code = B.reap(pid)
    until code or uv.now() > t_end
    assert(code, "wrk did not end")
    local f = assert(io.open(out_path, "rb"))
    local text = f:read("*a")
    f:close()
    os.remove(out_path)
    assert(code == 0, "wrk exit " .. tostring(code) .. ": " .. text)
    local line = assert(text:match("WRK (%b{})"), "no WRK line: " .. text)
    local r = {}
    for k, v in line:gmatch('"([%w_]+)":(%d+)') do r[k] = tonumber(v) end
    r.status = {}
    for k, v in (line:match('"status":(%b{})') or ""):gmatch('"(%d+)":(%d+)') do
        r.status[tonumber(k)] = tonumber(v)
    end
    r.line = line
    local e1 = text:match("WRK first error: ([^\n]*)")
    if e1 then print("bench-wallet: " .. mode .. ": first error answer: " .. e1) end
    return r
end

local function uuid(i, k) return format("00000000-0000-4000-%04x-%012x", 0x8000 + k, i) end

-- The plain-SQL baselines of a store: { [hot] = { b1 =, b2 = } }
local function baselines(T, name, run)
    local out = {}
    for _, hot in ipairs { true, false } do
        out[hot] = {}
        for _, per in ipairs(CASES[hot and "hot" or "spread"] and { 1, 64 } or {}) do
            local r = run(per, hot)
            local label = format("sql_b%d%s", per == 1 and 1 or 2, hot and "_hot" or "")
            out[hot][per == 1 and "b1" or "b2"] = r.per_s
            print(format("%-8s %-15s %8.0f transfers/s  p50 %7.0f us  p99 %7.0f us  per tx " ..
                         "(%d per transaction, %d connection(s), %d retried)", name, label,
                         r.per_s, r.p50_us, r.p99_us, per, r.conns, r.retries))
            emit(format('{"bench":"wallet","store":"%s","case":"%s","sources":%d,"conns":%d,' ..
                        '"per_tx":%d,"transfers":%d,"retries":%d,"per_s":%.1f,"p50_us":%.0f,' ..
                        '"p99_us":%.0f,"loadavg":"%s"}', name, label, hot and 1 or opts.accounts,
                        r.conns, per, r.transfers, r.retries, r.per_s, r.p50_us, r.p99_us,
                        B.loadavg()))
        end
    end
    -- (SQLite: B1 again after each transfer case, --no-b1-after: one sync a transfer, it
    -- moves with the disk, 3,323-7,223/s within one session on 2026-12-03)
    if name == "sqlite" and opts.b1_after then
        out.again = function(hot) return run(1, hot).per_s end
    end
    return out
end

-- RSS, and the loop VM's Lua heap (what its collector walks: what one store's half leaves
-- to the next shows at the second's start)
local function rss(name, when)
    local kb, heap = B.status_kb("VmRSS"), collectgarbage("count")
    print(format("%-8s rss %-11s %8d kB  Lua heap %d kB  loadavg %s", name, when, kb, heap,
                 B.loadavg()))
    emit(format('{"bench":"wallet","store":"%s","case":"rss_%s","rss_kb":%d,"lua_heap_kb":%d,'
                .. '"loadavg":"%s"}', name, when, kb, heap, B.loadavg()))
end

-- the store's calls by primitive (timed_store, below): { [name] = { n =, us = } }
local calls = {}

local function counts_line(name, a, b, n)
    local out = {}
    local list = {}
    for k, c in pairs(calls) do list[#list + 1] = { k = k, n = c.n } end
    table.sort(list, function(x, y) return x.k < y.k end)
    local total = 0
    for _, c in ipairs(list) do
        out[#out + 1] = format("%s %.2f", c.k, c.n / n)
        total = total + c.n
    end
    print(format("%-8s %-15s store calls per commit %.2f (%s)", name, "", total / n,
                 table.concat(out, ", ")))
    if a then
        -- (the two reads of the counts are 2 transactions of their own, 3 with the first's)
        print(format("%-8s %-15s per commit: %.2f transactions, %.2f WAL syncs, %.1f WAL "
                     .. "records; server synchronous_commit %s (store's sessions: %s, durability "
                     .. "ack: the flush's transaction commits synchronously), commit_delay %s, "
                     .. "fsync %s", name, "", (b.xact - a.xact - 3) / n, (b.syncs - a.syncs) / n,
                     (b.records - a.records) / n, a.server, a.session, a.delay, a.fsync))
    end
end

-- One Ledger:commit at a time, no contention (issue 25 target: p50 <= 3 ms).
local function one_commit(T, name, led, d16, src)
    local lat = {}
    local c0 = B.pg_counts(T.sleep, led.store)
    for k in pairs(calls) do calls[k] = nil end
    local s0 = {}
    for k, v in pairs(led.stats) do s0[k] = v end
    local stop_at = uv.now() + math.min(opts.seconds, 3) * 1000
    local j = 0
    local cpu0 = B.cpu_s(0)
    while uv.now() < stop_at do
        j = j + 1
        local a = uv.hrtime()
        assert(led:commit { intent = format("single-%d", j), movements = {
            { from = src, to = d16, asset = USD, amount = 1 } } })
        lat[#lat + 1] = (uv.hrtime() - a) / 1000
    end
    local cpu_us = (B.cpu_s(0) - cpu0) / #lat * 1e6
    counts_line(name, c0, c0 and B.pg_counts(T.sleep, led.store), #lat)
    -- how each commit went (LED-72/73): planned from the plan cache in one call, read first,
    -- a cached plan's guard missed, the saga
    local d = {}
    for _, k in ipairs { "one_tx_cached", "one_tx_cache_missed", "resolves", "one_tx_missed",
                         "phases" } do
        d[#d + 1] = format("%s %.3f", k, ((led.stats[k] or 0) - (s0[k] or 0)) / #lat)
    end
    print(format("%-8s %-15s engine per commit: %s", name, "", table.concat(d, ", ")))
    print(format("%-8s %-15s %8d commits     p50 %7.0f us  p99 %7.0f us  (target p50 " ..
                 "<= 3000 us), this process's CPU %.0f us per commit  loadavg %s", name,
                 "commit_one", #lat, pct(lat, 0.5), pct(lat, 0.99), cpu_us, B.loadavg()))
    emit(format('{"bench":"wallet","store":"%s","case":"commit_one","commits":%d,' ..
                '"p50_us":%.0f,"p99_us":%.0f,"cpu_us":%.0f,"loadavg":"%s"}', name, #lat,
                pct(lat, 0.5), pct(lat, 0.99), cpu_us, B.loadavg()))
end

-- run_wrk's answer with this process's CPU per 200 (cpu_us; its loop thread's: loop_us) and
-- wrk's (wrk_us: the children's CPU, wrk is reaped by the time run_wrk returns)
local function cpu_per_read(run, ...)
    local p0, l0, c0 = B.cpu_s(0), B.cpu_s(1), B.cpu_s(-1)
    local r = run(...)
    local n = math.max(r.status[200] or 0, 1)
    r.cpu_us, r.loop_us = (B.cpu_s(0) - p0) / n * 1e6, (B.cpu_s(1) - l0) / n * 1e6
    r.wrk_us = (B.cpu_s(-1) - c0) / n * 1e6
    return r
end

-- Balance reads from the cache, against the HTTP floor (/healthz).
local function balance_reads(T, name, srv, w, from1, SINK)
    -- the feed caught up with the transfer cases first (it drops the read account's entry
    -- at every event naming it): then the case measures reads from the cache; the reads
    -- that missed anyway (went to the ledger) are counted
    local t_c = uv.now()
    local head
    repeat
        T.sleep(10)
        head = w.led.store:head_seq(w.led.book)
    until (head and w.cache.seq >= head) or uv.now() > t_c + 30000
    local caught_ms = uv.now() - t_c
    local misses, read = 0, w._read_balance
    w._read_balance = function(...)
        misses = misses + 1
        return read(...)
    end
    local rb = cpu_per_read(run_wrk, T, srv:port(), "balance", 0, from1, SINK)
    w._read_balance = nil
    local rh = cpu_per_read(run_wrk, T, srv:port(), "healthz", 0, from1, SINK)
    local brate = (rb.status[200] or 0) / (rb.duration_us / 1e6)
    local hrate = (rh.status[200] or 0) / (rh.duration_us / 1e6)
    -- CPU per read: what holds up under load (the ratio of reads/s is the machine's share)
    print(format("%-8s %-15s cpu per read: balance %.1f us (loop %.1f), wrk %.1f us; healthz " ..
                 "%.1f us (loop %.1f), wrk %.1f us; loop ratio %.2f", name, "", rb.cpu_us,
                 rb.loop_us, rb.wrk_us, rh.cpu_us, rh.loop_us, rh.wrk_us,
                 rh.loop_us / rb.loop_us))
    print(format("%-8s %-15s %8.0f reads/s      p50 %7.0f us  p99 %7.0f us  ratio %.2f " ..
                 "of healthz %.0f/s (target >= 0.7)  %d missed the cache (caught up in %d ms)",
                 name, "balance", brate, rb.p50_us, rb.p99_us, brate / hrate, hrate, misses,
                 caught_ms))
    emit(format('{"bench":"wallet","store":"%s","case":"balance_http","conns":%d,' ..
                '"reads":%d,"per_s":%.1f,"p50_us":%d,"p99_us":%d,"baseline":"healthz",' ..
                '"baseline_per_s":%.1f,"ratio":%.3f,"cache_entries":%d,"loadavg":"%s"}', name,
                opts.conns, rb.status[200] or 0, brate, rb.p50_us, rb.p99_us, hrate,
                brate / hrate, w.cache:size(), B.loadavg()))
    assert((rb.status[200] or 0) > 0, "no balance read answered 200: " .. rb.line)
end

-- This process's CPU per answered transfer since snap (HTTP, wallet, engine, the store's
-- threads; not wrk's) and the group commit's mean group: figures that hold up under load.
-- (--profile: jit.p from cpu_snap to cpu_line)
-- The store's calls by primitive: count and wall time (the wait for the store's thread
-- included), for the line after each transfer case (calls, above)
-- (each wrapper made once, apart from __index: a closure made per lookup aborted every
-- trace of the loop VM through a store call, and the bench measured that, issue 25)
-- The group being committed (run_group, below): the store calls made meanwhile, by
-- primitive (the feed's among them: they share the store's one connection)
local in_group = nil

-- A phase (apply) counted by what it holds: "apply:" and its primitives' names, each once,
-- in order (which of the engine's phases it is: the one-transaction batch's, the plan's
-- reads, the saga's claims, reserve, finalize)
local function call_key(k, ops)
    if k ~= "apply" or type(ops) ~= "table" then return k end
    local names, seen = {}, {}
    for _, op in ipairs(ops) do
        local n = tostring(op[1])
        if not seen[n] then
            seen[n] = true
            names[#names + 1] = n
        end
    end
    return "apply:" .. table.concat(names, "+")
end

local function timed_call(s, name, v)
    return function(_, ...)
        local k = call_key(name, ...)
        local t0 = uv.hrtime()
        local r = { v(s, ...) }
        local c = calls[k] or { n = 0, us = 0 }
        calls[k] = c
        local us = (uv.hrtime() - t0) / 1000
        c.n, c.us = c.n + 1, c.us + us
        if in_group then in_group[k] = (in_group[k] or 0) + us end
        return unpack(r, 1, table.maxn(r))
    end
end

local function timed_store(s)
    local made = {}
    return setmetatable({}, { __index = function(_, k)
        local v = s[k]
        if type(v) ~= "function" then return v end
        local f = made[k]
        if f == nil then
            f = timed_call(s, k, v)
            made[k] = f
        end
        return f
    end })
end

local function calls_line(name, ok)
    local list = {}
    for k, c in pairs(calls) do list[#list + 1] = { k = k, n = c.n, us = c.us } end
    table.sort(list, function(a, b) return a.us > b.us end)
    local out = {}
    for i = 1, math.min(16, #list) do
        local c = list[i]
        out[i] = format("%s %d/%.0fus", c.k, c.n, c.us / math.max(ok, 1))
    end
    print(format("%-8s %-15s store calls (count / wall per transfer): %s", name, "",
                 table.concat(out, "  ")))
    for k in pairs(calls) do calls[k] = nil end
end

-- group sizes, by powers of two (the committer's run_group, wrapped: the bench's own count)
-- and where a transfer's time goes (issue 25's p99): per job its wait in the commit queue
-- (intake to its group's start), per group its commit (run_group: the ledger's work and the
-- answers), per request the server's time (intake to the answer handed to httpd), and the
-- loop's lag (a 1 ms timer's lateness: the synchronous work that holds every connection)
local committer = require("ron.wallet.committer")
local sizes = {}
local tail = { wait = {}, commit = {}, server = {}, lag = {} }
-- per group of the case: its commit's wall, its store calls' and the loop's CPU (tail_line's
-- commit figures and slow_line's)
local groups_seen = {}
local probe = WT.new() -- the same, second by second (cpu_snap starts a case's)
do
    local run_group = committer.run_group
    committer.run_group = function(self, jobs)
        local b = 1
        while b < #jobs do b = b * 2 end
        sizes[b] = (sizes[b] or 0) + 1
        local t0 = uv.hrtime()
        for _, job in ipairs(jobs) do
            if job.t_enq then tail.wait[#tail.wait + 1] = (t0 - job.t_enq) / 1000 end
        end
        local seen, c0 = {}, B.cpu_s(1) -- (RUSAGE_THREAD: the loop thread's CPU)
        local kb0 = collectgarbage("count")
        in_group = seen
        local r = { run_group(self, jobs) }
        in_group = nil
        local t1 = uv.hrtime()
        local cpu_ms = (B.cpu_s(1) - c0) * 1000
        groups_seen[#groups_seen + 1] = { ms = (t1 - t0) / 1e6, calls = seen, n = #jobs,
                                          cpu = cpu_ms, kb0 = kb0,
                                          kb1 = collectgarbage("count") }
        probe:group(t1, #jobs, (t1 - t0) / 1000)
        return unpack(r)
    end
end

-- the wallet's intake and answers timed (per instance: the service's own methods wrapped)
local function time_requests(w)
    local enq, send, t_of = w._enqueue, w._send, setmetatable({}, { __mode = "k" })
    w._enqueue = function(self, req, job, endpoint)
        job.t_enq = uv.hrtime()
        t_of[req] = job.t_enq
        return enq(self, req, job, endpoint)
    end
    w._send = function(self, req, ...)
        local t = t_of[req]
        if t then
            local t1 = uv.hrtime()
            tail.server[#tail.server + 1] = (t1 - t) / 1000
            probe:request(t1, (t1 - t) / 1000)
        end
        return send(self, req, ...)
    end
    local lag = uv.new_timer()
    local due = uv.now() + 1
    lag:start(1, 1, function()
        local now = uv.now()
        tail.lag[#tail.lag + 1] = (now - due) * 1000
        probe:lag(uv.hrtime(), (now - due) * 1000)
        due = now + 1
    end)
    return lag
end

-- The cache feed's ledger reads (its events_since and transfers calls, the ledger instance's
-- own methods wrapped: main's feed and this one alike) and their wall time, for the line
-- after each transfer case (issue 25: on SQLite they queue on the store's one connection)
local feed = { events = 0, transfers = 0, ids = 0, rows = 0, us = 0 }
local function count_feed(led)
    for name, n_ids in pairs { events_since = false, transfers = true } do
        local f = led[name]
        led[name] = function(self, a, ...)
            local t0 = uv.hrtime()
            local r = { f(self, a, ...) }
            local k = n_ids and "transfers" or "events"
            feed[k] = feed[k] + 1
            if n_ids then feed.ids = feed.ids + #a
            elseif type(r[1]) == "table" then feed.rows = feed.rows + #r[1] end
            feed.us = feed.us + (uv.hrtime() - t0) / 1000
            return unpack(r, 1, table.maxn(r))
        end
    end
end

local function feed_line(name)
    print(format("%-8s %-15s feed: %d events_since calls (%d events read) + %d transfers " ..
                 "calls (%d transfers read back), %.1f ms wall each", name, "", feed.events,
                 feed.rows, feed.transfers, feed.ids,
                 feed.us / 1000 / math.max(feed.events + feed.transfers, 1)))
    for k in pairs(feed) do feed[k] = 0 end
end

-- p50 / p99 / max of each, in ms; emptied
local function tail_line(name)
    local out = {}
    for i, g in ipairs(groups_seen) do tail.commit[i] = g.ms * 1000 end
    for _, k in ipairs { "wait", "commit", "server", "lag" } do
        local v = tail[k]
        out[#out + 1] = format("%s p50 %.1f p99 %.1f max %.1f (%d)", k, pct(v, 0.5) / 1000,
                               pct(v, 0.99) / 1000, pct(v, 1) / 1000, #v)
        tail[k] = {}
    end
    print(format("%-8s %-15s ms: %s", name, "", table.concat(out, ", ")))
end

local function histogram()
    local out = {}
    for b = 1, 1024 do if sizes[b] then out[#out + 1] = format("<=%d:%d", b, sizes[b]) end end
    for k in pairs(sizes) do sizes[k] = nil end
    return table.concat(out, " ")
end

-- CPU seconds of this process's threads by name (/proc/self/task: the loop thread is the
-- process's name, libuv's pool threads "libuv-worker")
local TICK = 100 -- USER_HZ
-- this process's file and socket I/O so far (/proc/self/io: rchar, wchar, the bytes its
-- read and write calls moved; Linux): a figure the machine's load does not change
local function proc_io()
    local f = io.open("/proc/self/io")
    if not f then return nil end
    local t = f:read("*a")
    f:close()
    return { r = tonumber(t:match("rchar: (%d+)")), w = tonumber(t:match("wchar: (%d+)")),
             sr = tonumber(t:match("syscr: (%d+)")), sw = tonumber(t:match("syscw: (%d+)")) }
end

-- The machine's CPU time (/proc/stat, all cores, in ticks): in all and idle (idle + iowait),
-- and the cores. With 64 connections in one group the loop's and the pool's work on a
-- group run one after the other: the idle share shows how much of the machine that left.
local function machine_cpu()
    local f = io.open("/proc/stat")
    if not f then return nil end
    local t = f:read("*a")
    f:close()
    local v = {}
    for x in (t:match("^cpu%s+([^\n]+)") or ""):gmatch("%d+") do v[#v + 1] = tonumber(x) end
    if #v < 5 then return nil end
    local total = 0
    for i = 1, math.min(#v, 8) do total = total + v[i] end -- (guest time is inside user)
    local _, cores = t:gsub("\ncpu%d+ ", "")
    return { idle = v[4] + v[5], total = total, cores = cores }
end

local function thread_cpu()
    local out, pid = {}, uv.os_getpid()
    local dir = uv.fs_scandir("/proc/self/task")
    while dir do
        local tid = uv.fs_scandir_next(dir)
        if not tid then break end
        local f = io.open("/proc/self/task/" .. tid .. "/stat")
        local st = f and f:read("*a")
        if f then f:close() end
        -- after the name's ")": state ppid ... utime (14th field) stime (15th)
        local rest = st and st:match("%) (.*)")
        if rest then
            local fields = {}
            for x in rest:gmatch("%S+") do fields[#fields + 1] = x end
            local name = tonumber(tid) == pid and "loop" or "other"
            out[name] = (out[name] or 0) + (tonumber(fields[12]) + tonumber(fields[13])) / TICK
        end
    end
    return out
end

local jit_count = B.jit_counter() -- the loop VM's traces and aborts per transfer case
-- a counter table's copy (the counts at a case's start)
local function copy_counts(t)
    local c = {}
    for k, v in pairs(t or {}) do c[k] = v end
    return c
end

-- the collector over the case: its cycles, and those a step in the loop's idle time ended
-- (--gc-idle-us; gc_at: the counts at the case's start, cpu_snap)
local gc_at = { cycles = 0, idle_cycles = 0, idle_steps = 0 }
local function gc_mark()
    for k in pairs(gc_at) do gc_at[k] = GC and GC.stats[k] or 0 end
end

local function gc_line(name)
    if not GC then return end
    local st = GC.stats
    print(format("%-8s %-15s collector: %d cycles, %d of them ended in the loop's idle time "
                 .. "(%d idle steps)", name, "", st.cycles - gc_at.cycles,
                 st.idle_cycles - gc_at.idle_cycles, st.idle_steps - gc_at.idle_steps))
end

local function cpu_snap(w)
    histogram()
    for k in pairs(tail) do tail[k] = {} end
    groups_seen = {}
    for k in pairs(calls) do calls[k] = nil end
    for k in pairs(feed) do feed[k] = 0 end
    probe = WT.new()
    gc_mark()
    if opts.profile then require("jit.p").start("Fm1", opts.profile)
    else probe:start_vm(opts.gc_ms) end
    jit_count()
    local st = w.led.stats
    local ss = w.led.store.stats or {}
    return { w.m.groups or 0, w.m.grouped or 0, os.clock(), w.m.group_fallbacks or 0,
             st.resolves or 0, st.handovers or 0, st.commits or 0, st.batches or 0,
             thread_cpu(), ss.checkpoints or 0, ss.checkpoints_inline or 0,
             ss.checkpoints_finish or 0, proc_io(), machine_cpu(), uv.hrtime(),
             st.pipelined or 0, st.pipeline_replans or 0, st.pipeline_early or 0,
             st.pipeline_ahead or 0, st.atomic_batches or 0, st.atomic_batch_missed or 0,
             st.atomic_batch_big or 0, copy_counts(st.atomic_batch_missed_at) }
end

-- the offloaded SQLite store's checkpoints beside its writes (docs/LEDGER.md)
local function checkpoint_line(name, w, snap)
    local ss = w.led.store.stats
    if not (ss and ss.checkpoints) then return end
    print(format("%-8s %-15s WAL checkpoints %d (finished in the store's turn %d, past the " ..
                 "bound %d, failed %d), the last: %d frames in the WAL, %d copied", name, "",
                 ss.checkpoints - snap[10], ss.checkpoints_finish - snap[12],
                 ss.checkpoints_inline - snap[11], ss.checkpoint_failures, ss.wal_frames,
                 ss.wal_copied))
end

-- Where the slowest groups' time went against the median group's: the store's calls (their
-- wall, the wait for the store's thread included) by primitive, and the rest (the loop's
-- work: the plan, the answers), and the loop thread's CPU meanwhile (a rest well above it:
-- the loop waited, or lost its core). The groups commit one after another: a slow one is p99.
-- The feed's calls run beside the group's and are counted in it (they hold the store's
-- turn), so "rest" may read below the loop's share; with workers > 1 a call is counted in
-- the group that started last.
local function group_text(g)
    local list, store = {}, 0
    for k, us in pairs(g.calls) do
        list[#list + 1] = { k = k, ms = us / 1000 }
        store = store + us / 1000
    end
    table.sort(list, function(a, b) return a.ms > b.ms end)
    local out = {}
    for i = 1, math.min(4, #list) do out[i] = format("%s %.1f", list[i].k, list[i].ms) end
    -- (the Lua heap before and after: a fall of tens of MB is a collector's sweep in it)
    return format("%.1f ms (%d): store %.1f (%s), rest %.1f; the loop's CPU %.1f; heap %.1f -> "
                  .. "%.1f MB", g.ms, g.n, store, table.concat(out, ", "), g.ms - store, g.cpu,
                  g.kb0 / 1024, g.kb1 / 1024)
end

local function slow_line(name)
    gc_line(name)
    local gs = groups_seen
    groups_seen = {}
    if #gs < 3 then return end
    table.sort(gs, function(a, b) return a.ms < b.ms end)
    print(format("%-8s %-15s groups: the median %s", name, "",
                 group_text(gs[math.floor((#gs + 1) / 2)])))
    for i = #gs, math.max(#gs - 2, 1), -1 do
        print(format("%-8s %-15s         slow   %s", name, "", group_text(gs[i])))
    end
end

-- the cores each side kept busy over the case, and what the machine left idle
local function busy_line(name, tc, snap)
    local m1, m0 = machine_cpu(), snap[14]
    local wall = (uv.hrtime() - snap[15]) / 1e9
    if not (m1 and m0) or wall <= 0 then return end
    print(format("%-8s %-15s cores busy: the loop thread %.2f, this process's other threads " ..
                 "%.2f; the machine %.0f %% idle of %d cores (/proc/stat)", name, "",
                 (tc.loop - snap[9].loop) / wall, ((tc.other or 0) - (snap[9].other or 0)) / wall,
                 100 * (m1.idle - m0.idle) / math.max(m1.total - m0.total, 1), m1.cores))
end

local function cpu_line(name, w, snap, ok)
    if opts.profile then require("jit.p").stop() else probe:stop_vm() end
    local groups = (w.m.groups or 0) - snap[1]
    local st = w.led.stats
    print(format("%-8s %-15s %.0f us cpu/transfer (this process)  %d groups, %.1f members " ..
                 "each  loadavg %s", name, "", (os.clock() - snap[3]) / math.max(ok, 1) * 1e6,
                 groups, ((w.m.grouped or 0) - snap[2]) / math.max(groups, 1), B.loadavg()))
    -- members handed back to the single path (each its own saga: the costly way)
    print(format("%-8s %-15s %d fell back to one by one, engine: %d batches, %d plans, %d " ..
                 "handovers, %d single commits", name, "", (w.m.group_fallbacks or 0) - snap[4],
                 (st.batches or 0) - snap[8], (st.resolves or 0) - snap[5],
                 (st.handovers or 0) - snap[6], (st.commits or 0) - snap[7]))
    print(format("%-8s %-15s pipeline: %d groups sent planned on the one before in flight " ..
                 "(%d as it landed, before its results; %d planned before it landed), %d " ..
                 "planned again", name, "", (st.pipelined or 0) - snap[16],
                 (st.pipeline_early or 0) - snap[18], (st.pipeline_ahead or 0) - snap[19],
                 (st.pipeline_replans or 0) - snap[17]))
    -- the batches not in one phase took the saga's phases: why (ron.ledger.engine.batch_atomic)
    local nb = (st.batches or 0) - snap[8]
    local one = (st.atomic_batches or 0) - snap[20]
    local at = {}
    for op, n in pairs(st.atomic_batch_missed_at or {}) do
        if n > (snap[23][op] or 0) then at[#at + 1] = format("%s %d", op, n - (snap[23][op] or 0)) end
    end
    table.sort(at)
    print(format("%-8s %-15s phases: %d of %d batches in one transaction; the saga's phases " ..
                 "for %d (%d whose guard missed%s, %d past the phase's bound, the rest handed " ..
                 "over or empty)", name, "", one, nb, nb - one,
                 (st.atomic_batch_missed or 0) - snap[21],
                 #at > 0 and (": " .. table.concat(at, ", ")) or "",
                 (st.atomic_batch_big or 0) - snap[22]))
    print(format("%-8s %-15s groups of 2+ by size: %s", name, "", histogram()))
    tail_line(name)
    slow_line(name)
    for _, line in ipairs(probe:lines(format("%-8s %-15s", name, ""))) do print(line) end
    calls_line(name, ok)
    checkpoint_line(name, w, snap)
    local io1, io0 = proc_io(), snap[13]
    if io1 and io0 then
        local n = math.max(ok, 1)
        print(format("%-8s %-15s I/O per transfer (this process): written %.1f KB in %.1f " ..
                     "calls, read %.1f KB in %.1f calls", name, "", (io1.w - io0.w) / n / 1024,
                     (io1.sw - io0.sw) / n, (io1.r - io0.r) / n / 1024, (io1.sr - io0.sr) / n))
    end
    feed_line(name)
    local tc = thread_cpu()
    print(format("%-8s %-15s cpu/transfer by thread: loop %.0f us, others %.0f us; the loop " ..
                 "VM's jit: %s", name, "", (tc.loop - snap[9].loop) / math.max(ok, 1) * 1e6,
                 ((tc.other or 0) - (snap[9].other or 0)) / math.max(ok, 1) * 1e6,
                 (jit_count())))
    busy_line(name, tc, snap)
end

-- --pool-profile: the ceiling the store's writer sets (its busy time per transfer, every
-- call) on anything done on the loop's side, against B1 (b: the case's baselines)
local function ceiling_line(name, pb, b, rate)
    local ceil = PP.ceiling(pb)
    if not ceil then return end
    print(format("%-8s %-15s ceiling with the loop's work free: the writer's %.0f us per "
                 .. "transfer -> %.0f/s, %.2f x B1 (now %.2f: the writer busy %.0f %%)", name,
                 "", pb.write[1], ceil, ceil / b.b1, rate / b.b1, 100 * rate / ceil))
end

-- a transfer run's figures beside the direct rate and the plain-SQL baselines (pb: the
-- pool profile's busy times, or nil); without a direct rate (a warm-up or a soak slice)
-- its rate alone
local function report(name, base, label, nsrc, r, ok, rate, direct_rate, pb)
    if not direct_rate then
        print(format("%-8s %-15s %8.0f transfers/s  p50 %7.0f us  p99 %7.0f us", name,
                     label, rate, r.p50_us, r.p99_us))
        emit(format('{"bench":"wallet","store":"%s","case":"%s","sources":%d,"conns":%d,' ..
                    '"transfers":%d,"requests":%d,"per_s":%.1f,"p50_us":%d,"p99_us":%d,' ..
                    '"loadavg":"%s"}', name, label, nsrc, opts.conns, ok, r.requests, rate,
                    r.p50_us, r.p99_us, B.loadavg()))
        return
    end
    local b = base[nsrc == 1]
    ceiling_line(name, pb, b, rate)
    local tb1 = name == "sqlite" and 2 or 1
    print(format("%-8s %-15s %8.0f transfers/s  p50 %7.0f us  p99 %7.0f us  ratio %.2f " ..
                 "of direct", name, label, rate, r.p50_us, r.p99_us, rate / direct_rate))
    print(format("%-8s %-15s %.3f x B1 (%.0f/s, target >= %d)  %.3f x B2 (%.0f/s, target " ..
                 ">= 0.2)  p99 target <= 50000 us", name, "", rate / b.b1, b.b1,
                 nsrc == 1 and 1 or tb1, rate / b.b2, b.b2))
    emit(format('{"bench":"wallet","store":"%s","case":"%s","sources":%d,"conns":%d,' ..
                '"workers":%d,"transfers":%d,"requests":%d,"per_s":%.1f,"p50_us":%d,' ..
                '"p99_us":%d,"status":%s,"baseline":"direct","baseline_per_s":%.1f,' ..
                '"ratio":%.3f,"b1_per_s":%.1f,"ratio_b1":%.3f,"b2_per_s":%.1f,' ..
                '"ratio_b2":%.3f,"loadavg":"%s"}', name, label, nsrc, opts.conns,
                opts.workers, ok, r.requests, rate, r.p50_us, r.p99_us,
                r.line:match('"status":(%b{})'), direct_rate, rate / direct_rate, b.b1,
                rate / b.b1, b.b2, rate / b.b2, B.loadavg()))
end

-- SQLite's B1 again once a transfer case's last commits ended (base.again, --no-b1-after):
-- its line, the case's ratio to it beside the first B1's.
local function b1_again(name, base, label, nsrc, rate)
    if not base.again then return end
    local hot, b1 = nsrc == 1, base[nsrc == 1].b1
    local again = base.again(hot)
    local case_name = "sql_b1_after" .. (hot and "_hot" or "")
    print(format("%-8s %-15s %8.0f transfers/s  (B1 again after %s, before it %.0f/s: the " ..
                 "disk's sync rate moves); the wallet %.3f x it", name, case_name, again,
                 label, b1, rate / again))
    emit(format('{"bench":"wallet","store":"%s","case":"%s","per_s":%.1f,"before_per_s":%.1f,' ..
                '"wallet_ratio":%.3f,"loadavg":"%s"}', name, case_name, again, b1, rate / again,
                B.loadavg()))
end

-- --soak: each case for opts.soak seconds in slices, RSS after each (nonces: slice k of
-- a case uses WALLET_BASE + k * 2e6, below the next range for k < 250)
-- A PostgreSQL store's postings table after a soak slice: live and dead tuples, the
-- autovacuums and autoanalyzes so far, its HOT updates (the 16-source case slowed down after
-- the first autoanalyze until the store turned JIT off; its write phase still grows with
-- the table, docs/WALLET.md §8).
local function pg_postings_line(name, store)
    if store.backend ~= "postgres" then return end
    local ok, r = pcall(function()
        return store.drv.db:query("SELECT n_live_tup, n_dead_tup, autovacuum_count, "
            .. "autoanalyze_count, n_tup_hot_upd, n_tup_upd FROM pg_stat_user_tables "
            .. "WHERE relname = 'postings' ORDER BY n_live_tup DESC LIMIT 1")
    end)
    local row = ok and r and r[1]
    if not row then return end
    print(format("%-8s %-15s postings: %s live, %s dead tuples; %s autovacuums, %s "
                 .. "autoanalyzes; %s of %s updates HOT", name, "", tostring(row[1]),
                 tostring(row[2]), tostring(row[3]), tostring(row[4]), tostring(row[5]),
                 tostring(row[6])))
end

local function soak(T, name, srv, w, from, SINK, transfers)
    for _, c in ipairs { { "transfer", opts.accounts, 500000000 }, { "transfer_hot", 1, 0 },
                         { "balance" } } do
        local t0 = uv.now()
        local t_stop, k = t0 + opts.soak * 1000, 0
        while uv.now() < t_stop do
            local left = math.ceil((t_stop - uv.now()) / 1000)
            k = k + 1
            if c[1] == "balance" then -- (balance, then healthz: half a slice each)
                opts.seconds = math.max(1, math.min(15, math.ceil(left / 2)))
                balance_reads(T, name, srv, w, from[1], SINK)
            else
                opts.seconds = math.max(1, math.min(30, left))
                transfers(c[1], c[2], c[3] + k * 2000000)
            end
            rss(name, format("%s+%ds", c[1], math.floor((uv.now() - t0) / 1000)))
            pg_postings_line(name, w.led.store)
        end
    end
end

-- The wallet over led on the daemon's HTTP server (wrk's conns from one peer admitted),
-- started -> w, the meter, the server
local function serve_wallet(T, led, tokens)
    local w = service.new { ledger = led, tokens = tokens, assets = { USD = 2 },
                            workers = opts.workers, group_max = opts.group_max,
                            group_linger_ms = opts.linger,
                            group_pipeline = opts.pipeline ~= false,
                            log = function(line) print("wallet: " .. line) end }
    count_feed(led)
    w:start()
    w.lag_timer = time_requests(w)
    local m = assert(acct.open { capacity_rows = 1024, shards = 1, window_len_s = 60,
                                 host = "bench" })
    local srv = assert(http.serve { meter = m, port = 0, routes = w:routes(),
                                    max_body = 1048576, max_conns_per_peer = opts.conns + 8,
                                    max_conns = math.max(256, opts.conns + 16),
                                    runtime = { ready = function() return w:ready() end,
                                                metrics_text = function()
                                                    return w:metrics_text()
                                                end } })
    local t_end = uv.now() + 30000
    while not w.system_ready do
        assert(uv.now() < t_end, "the wallet did not start")
        T.sleep(10)
    end
    return w, m, srv
end

-- The accounts of a case, every source funded with FUND
local function fund(led, S, Dsrc, SINK, DSINK)
    local all = { SINK, DSINK }
    for i = 1, opts.accounts do all[#all + 1] = S[i]; all[#all + 1] = Dsrc[i] end
    for _, id in ipairs(all) do
        assert(led:create_account { id = dto.uuid_bytes(id), policy = "no_overdraft" })
    end
    for i = 1, opts.accounts do
        for _, id in ipairs { S[i], Dsrc[i] } do
            assert(led:commit { intent = "bench-fund-" .. id, movements = {
                { from = service.SYSTEM.top_up, to = dto.uuid_bytes(id), asset = USD,
                  amount = FUND } } })
        end
    end
end

local SAME_GROUPS = 128

-- One same-rows run's line and BENCH line (m: its merge factor; b: the case's baselines).
local function same_rows_line(name, label, r, rate, m, b)
    local n, nrows, dt, by, groups = r.transfers, r.rows, r.seconds, r.by_table, r.groups
    if n == 0 then return end
    local parts = {}
    for _, list in ipairs { SR.ROW_ORDER, { "commit", "flush" } } do
        for _, t in ipairs(list) do
            if by[t] then parts[#parts + 1] = format("%s %.0f", t, by[t] / n * 1e6) end
        end
    end
    local same = n / dt
    local case_name = "same_rows" .. (label:match("_hot$") or "") .. (m > 1 and "_x" .. m or "")
    print(format("%-8s %-15s %8.0f transfers/s  %.1f rows/transfer in %d groups (%.1f each), " ..
                 "one transaction and flush each, into tables first filled with %d " ..
                 "transfers' rows (the store's); the wallet %.3f of it, it %.2f x B1; us/transfer " ..
                 "by table and the commit's: %s", name, case_name, same, nrows / n, groups,
                 n / groups, r.prefilled, rate / same, same / b.b1, table.concat(parts, ", ")))
    emit(format('{"bench":"wallet","store":"%s","case":"%s","transfers":%d,' ..
                '"rows_per_transfer":%.2f,"groups":%d,"prefilled":%d,"per_s":%.1f,' ..
                '"wallet_ratio":%.3f,"ratio_b1":%.3f,"loadavg":"%s"}', name, case_name, n,
                nrows / n, groups, r.prefilled, same, rate / same, same / b.b1, B.loadavg()))
end

-- The same rows plain (same_rows.lua) after a transfer case: rec's groups on a connection
-- that writes now (SQLite: a synchronous store of the same file; PostgreSQL: the store's),
-- once per --same-merge factor m: the wallet's groups, then every m of them as one (m = 2:
-- groups of ~64, the most that 64 connections with one request each can put in one commit,
-- so no design writing these rows commits faster than that line at this size; b: the
-- case's baselines, for its ratio to B1).
local function same_rows(name, raw, rec, label, rate, b)
    if not rec.frozen then SR.freeze(rec) end
    for i, m in ipairs(opts.same_merge) do
        local last = i == #opts.same_merge
        local s, close = B.sync_store(raw)
        local ddl
        if name == "sqlite" then
            -- (no checkpoint inside its commits, as on the wallet's own writer: the WAL only
            -- grows meanwhile, so the figure is the rows' and their commits' alone)
            assert(s.drv:exec("PRAGMA wal_autocheckpoint = 0"))
            ddl = function(stmt) return s.drv:exec(stmt) end
        else
            ddl = function(stmt) return s.drv.db:exec(stmt) end
        end
        local r = SR.run(s, rec, ddl, { one_tx = true, prefill = true, merge = m, keep = not last,
                                        tag = label .. (m > 1 and "_x" .. m or "") })
        close()
        same_rows_line(name, label, r, rate, m, b)
    end
end

-- `ledger verify` over the store after its cases (issue 25: exact after every benchmark
-- run): every transfer, posting, balance, event and intent checked; the run fails on a
-- problem.
local function verify_line(name, raw)
    local problems, t0 = {}, uv.hrtime()
    local sum = verify.run(raw, { book = "bench", report = function(where, what)
        if #problems < 5 then problems[#problems + 1] = where .. ": " .. what end
    end })
    print(format("%-8s %-15s %d transfers, %d postings, %d events, %d intents: %d problems " ..
                 "(%.1f s)", name, "verify", sum.transfers, sum.postings, sum.events,
                 sum.intents, sum.problems, (uv.hrtime() - t0) / 1e9))
    assert(sum.problems == 0, "ledger verify: " .. table.concat(problems, "; "))
end

local function case(T, name, open_store, base)
    rss(name, "start")
    local raw = assert(open_store())
    -- (the transfer cases' rows, for same_rows: a group per phase that committed, from the
    -- case's unmeasured warm-up run when there is one, else from the measured run; at most
    -- SAME_GROUPS groups either way: what is kept is live heap the collector walks)
    local rec = SR.recording(raw)
    rec.per_phase, rec.max = true, SAME_GROUPS
    local s = timed_store(raw)
    local led = L.new { store = s, book = "bench", node = "bench",
                        pause = function(n) T.sleep(10 * n) end }
    led:recover()
    -- wallet sources S_i (a token each), a wallet sink; direct sources D_i and their sink
    local S, Dsrc, tokens, from = {}, {}, {}, {}
    for i = 1, opts.accounts do
        S[i], Dsrc[i] = uuid(i, 1), uuid(i, 2)
        local tok = "bench-wallet-token-" .. i
        tokens[acct.b3hex(tok)] = S[i]
        from[i] = S[i] .. "=" .. tok
    end
    local SINK, DSINK = uuid(0, 1), uuid(0, 2)
    local w, m, srv = serve_wallet(T, led, tokens)
    for i = 1, opts.cached or 0 do -- (--cached: balances of accounts nobody moves)
        local id = format("%016x", i)
        w.cache:begin_read(id)
        w.cache:put(id, "USD", 1000LL + i)
    end
    fund(led, S, Dsrc, SINK, DSINK)
    local function moved(ids)
        local n = 0
        for _, id in ipairs(ids) do n = n + (FUND - tonumber(led:balance(dto.uuid_bytes(id),
                                                                          USD))) end
        return n
    end

    -- the baseline: the engine's commits from nsrc sources, --workers tasks at once
    local function direct(label, nsrc)
        local lat, n_direct, n_retry = {}, 0, 0
        local d16 = dto.uuid_bytes(DSINK)
        local srcs = {}
        for i = 1, nsrc do srcs[i] = dto.uuid_bytes(Dsrc[i]) end
        local stop_at = uv.now() + opts.seconds * 1000
        local t0 = uv.hrtime()
        local hs = {}
        for k = 1, opts.workers do
            hs[k] = T.spawn("bench_direct", function()
                local j = 0
                while uv.now() < stop_at do
                    j = j + 1
                    local src = srcs[(j * opts.workers + k) % nsrc + 1]
                    local a = uv.hrtime()
                    -- sources shared between workers race for their postings and are
                    -- tried again (the wallet's workers do the same)
                    while true do
                        local r, err, code = led:commit { intent = format("%s-%d-%d", label, k,
                                                                          j),
                            movements = { { from = src, to = d16, asset = USD, amount = 1 } } }
                        if r then break end
                        assert(code == L.ERR.Unavailable, tostring(err))
                        n_retry = n_retry + 1
                        T.sleep(1)
                    end
                    lat[#lat + 1] = (uv.hrtime() - a) / 1000
                    n_direct = n_direct + 1
                end
                return true
            end)
        end
        for k = 1, opts.workers do assert(hs[k]:join(opts.seconds * 1000 + 60000)) end
        local rate = n_direct / ((uv.hrtime() - t0) / 1e9)
        print(format("%-8s %-15s %8.0f commits/s    p50 %7.0f us  p99 %7.0f us  (%d commits, " ..
                     "%d retried)", name, label, rate, pct(lat, 0.5), pct(lat, 0.99), n_direct,
                     n_retry))
        emit(format('{"bench":"wallet","store":"%s","case":"%s","sources":%d,"workers":%d,' ..
                    '"commits":%d,"retries":%d,"per_s":%.1f,"p50_us":%.0f,"p99_us":%.0f,' ..
                    '"loadavg":"%s"}', name, label, nsrc, opts.workers, n_direct, n_retry, rate,
                    pct(lat, 0.5), pct(lat, 0.99), B.loadavg()))
        return rate
    end

    -- transfers through HTTP from nsrc sources (direct_rate nil: a soak slice, no ratios)
    local function transfers(label, nsrc, nbase, direct_rate)
        if (opts.warmup or 0) > 0 and direct_rate then -- cold first, unmeasured but printed
            local seconds = opts.seconds
            opts.seconds = opts.warmup
            transfers(label .. "_cold", nsrc, nbase + 250000000)
            opts.seconds = seconds
        end
        local before = moved(S)
        local wal0 = opts.wal_census and name == "sqlite" and census.frames(led.store.path)
        local psnap = name == "sqlite" and PP.snap()
        local gsnap = opts.gaps and WG.mark(led)
        local snap = cpu_snap(w)
        local warm = (opts.warmup or 0) > 0
        rec.on = (warm and label:match("_cold$") ~= nil) or (not warm and direct_rate ~= nil)
        local r = run_wrk(T, srv:port(), "transfer", nbase,
                          table.concat(from, ";", 1, nsrc), SINK)
        local ok = r.status[201] or 0
        local rate = ok / (r.duration_us / 1e6)
        cpu_line(name, w, snap, ok)
        if opts.wal_census and name == "sqlite" then census.print(name, led.store.path, wal0, ok) end
        local pb = PP.print(name, psnap, ok)
        WG.print(name, gsnap)
        report(name, base, label, nsrc, r, ok, rate, direct_rate, pb)
        -- wrk stops mid-request: let the last commits end, then check the money
        local t_q = uv.now() + 30000
        while (next(w.calls) ~= nil or w.queue:depth() > 0) and uv.now() < t_q do
            T.sleep(10)
        end
        if rec.on and not direct_rate then SR.freeze(rec) end -- (the warm-up's rows)
        rec.on = false
        local n = moved(S) - before
        assert(n >= ok, format("%d answered 201 but only %d moved", ok, n))
        -- a request whose answer wrk dropped at its deadline may have committed: never more
        assert(n <= r.requests + opts.conns, format("%d moved for %d requests", n, r.requests))
        if direct_rate then
            b1_again(name, base, label, nsrc, rate)
            same_rows(name, raw, rec, label, rate, base[nsrc == 1])
        end
    end

    if opts.soak then
        soak(T, name, srv, w, from, SINK, transfers)
    else
        if CASES.commit then
            one_commit(T, name, led, dto.uuid_bytes(DSINK), dto.uuid_bytes(Dsrc[1]))
        end
        if CASES.hot then transfers("transfer_hot", 1, 0, direct("direct_hot", 1)) end
        if CASES.spread then
            transfers("transfer", opts.accounts, 500000000, direct("direct", opts.accounts))
        end
        if CASES.balance then balance_reads(T, name, srv, w, from[1], SINK) end
    end

    w.lag_timer:close()
    w:stop()
    assert(w:wait(30000), "the wallet did not drain")
    verify_line(name, raw)
    srv:close()
    m:close()
    s:close()
    collectgarbage()
    rss(name, "end")
end

-- What the SQLite ledger's file holds per transfer, by table and index (SQLite's dbstat:
-- issue 25, fewer and smaller rows per transfer), after the cases.
local function file_bytes(path)
    local st = assert(store_mod.open { backend = "sqlite", path = path })
    local n = st.drv:read("SELECT count(*) FROM transfers", { n = 0 })[1][1]
    local rows = st.drv:read("SELECT name, sum(pgsize), sum(payload) FROM dbstat GROUP BY name "
                             .. "ORDER BY 2 DESC", { n = 0 })
    st:close()
    if not rows or n == 0 then return print("sqlite   file bytes: no dbstat or no transfer") end
    local total, parts = 0, {}
    for _, r in ipairs(rows) do
        total = total + r[2]
        if r[2] / n >= 8 then parts[#parts + 1] = format("%s %.0f", r[1], r[2] / n) end
    end
    print(format("sqlite   file bytes per transfer (%d transfers): %.0f in pages; by table and "
                 .. "index: %s", n, total / n, table.concat(parts, ", ")))
end

B.main("bench-wallet", function(T)
    if opts.sqlite then
        local path = format("%s/bench-wallet-%d.db", opts.dir, uv.os_getpid())
        os.remove(path)
        local bpath = path .. ".base"
        local base = not opts.soak and baselines(T, "sqlite", function(per, hot)
            return SB.sqlite { path = bpath, seconds = opts.seconds, per_tx = per,
                               sources = opts.accounts, hot = hot }
        end)
        case(T, "sqlite", function()
            local st = assert(store_mod.open { backend = "sqlite", path = path,
                                               offload = true, checkpoint_ms = opts.ckpt_ms,
                                               reader = opts.reader })
            if opts.wal_census then -- one checkpoint at the first call, then none
                st.ckpt.interval, st.ckpt.max = math.huge, math.huge
            end
            return st
        end, base)
        file_bytes(path)
        PP.remove()
        B.fresh_sqlite(path)
        B.fresh_sqlite(bpath)
        -- A wallet runs on one store: the loop VM's traces of the SQLite half (specialised
        -- to its calls) are not carried into the PostgreSQL half, which ran ~1.3x the loop
        -- CPU per transfer after them (docs/WALLET.md §8, 2026-11-30 evening)
        if opts.pg and jit then jit.flush() end
    end
    if opts.pg then
        local available, why = H.available()
        if not available then
            print("bench-wallet: PostgreSQL skipped: " .. tostring(why))
        else
            -- WAL segments recycled as on a server that has checkpointed, not zero-filled
            -- in a commit's path (pg-harness.sh --wal-init-zero)
            local cluster = assert(H.start { fsync = true, max_conns = opts.conns + 32,
                                             wal_init_zero = false })
            -- (the start blocked the loop for seconds: its cached clock is that old, and a
            -- connect timer started from it would expire at once, with --cases commit alone)
            uv.update_time()
            local ok, err = pcall(function()
                local base = not opts.soak and baselines(T, "postgres", function(per, hot)
                    return SB.postgres(T, { conninfo = cluster.conninfo, schema = "bench_base",
                                            seconds = opts.seconds, conns = opts.conns,
                                            per_tx = per, sources = hot and 1 or opts.accounts })
                end)
                case(T, "postgres", function()
                    return store_mod.open { backend = "postgres", conninfo = cluster.conninfo,
                                            schema = "bench_wallet", connections = 8 }
                end, base)
            end)
            cluster:stop()
            assert(ok, err)
        end
    end
    return true
end)
