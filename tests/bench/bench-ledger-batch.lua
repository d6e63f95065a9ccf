-- bench-ledger-batch.lua: the engine's batch path (Ledger:commit_many, issue 25), one batch
-- at a time, with where its time goes.
--
--   build/ron-accounting run tests/bench/bench-ledger-batch.lua [--batches N] [--sizes 64,256]
--       [--payers K] [--no-pg] [--no-sqlite] [--profile FILE] [--out FILE]
--
-- Each batch is `size` payments of 1 unit from K funded payers (round robin; 16 unless
-- --payers; 1: one hot payer spending its own change through the batch) to one sink,
-- on offloaded SQLite (durability ack: the batch flushes before it answers) and on PostgreSQL
-- (a server the bench starts, fsync on, a pool of 4). Printed per store and size: transfers/s,
-- the wall time per transfer, this thread's CPU per transfer (the engine's Lua and the loop)
-- and the process's (with the store's threads), the store calls per batch, the wall and this
-- thread's CPU of each phase of the path (plan, claims, reserve, last step, finalize, flush),
-- and beside them the same-run baseline B2 (the plain-SQL ledger of sql_baseline.lua, 64
-- transfers per transaction, 16 sources) with the ratio. The load average beside every
-- figure, and the traces this VM's trace compiler made and threw away meanwhile (each
-- compile two mprotect calls). --profile FILE: LuaJIT's profiler (jit.p, mode "Fl") over
-- the SQLite 256 case.
-- Prints one `BENCH {json}` line per store and size (tests/bench/README.md).
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = here .. "?.lua;" .. here .. "../../lua/?.lua;" .. here .. "../../lua/?/init.lua;"
               .. package.path
local ffi = require("ffi")
local uv = require("luv")
local task = require("ron.base.task")
local L = require("ron.ledger.ledger")
local phases = require("ron.ledger.phases")
local store = require("ron.ledger.store")
local B = require("bench_common")
local SB = require("sql_baseline")
local H = dofile(here .. "../pg/harness.lua")

local format = string.format

ffi.cdef [[
struct bench_ts { long tv_sec; long tv_nsec; };
int clock_gettime(int clk, struct bench_ts *ts);
]]
local ts = ffi.new("struct bench_ts")
-- this thread's CPU seconds (CLOCK_THREAD_CPUTIME_ID = 3)
local function tcpu()
    ffi.C.clock_gettime(3, ts)
    return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

local o = { batches = 20, sizes = { 64, 256 }, payers = 16, pg = true, sqlite = true,
            dir = os.getenv("TMPDIR") or "/tmp" }
B.args(arg, o, { { "--batches", "batches", "num" }, { "--sizes", "sizes", "nums" },
                 { "--payers", "payers", "num" },
                 { "--no-pg", "pg", "off" }, { "--no-sqlite", "sqlite", "off" },
                 { "--profile", "profile", "str" }, { "--out", "out", "str" } },
       "bench-ledger-batch.lua [--batches N] [--sizes 64,256] [--payers K] [--no-pg] [--no-sqlite] "
       .. "[--profile FILE] [--out FILE]")
local emit = B.emitter(o.out)

local USD = { code = "USD", scale = 2 }
local EXT, SINK = ("E"):rep(16), ("S"):rep(16)
local PAYERS = {}
for k = 1, 16 do PAYERS[k] = format("P%015d", k) end

-- the phases timed: engine methods (on the instance) and phases.* functions
local PHASES = { "_plan_batch", "_claim_batch", "reserve", "_revalidate_batch",
                 "finalize_batch", "flush" }

local function timed(acc, name, f)
    return function(...)
        local w0, c0 = uv.hrtime(), tcpu()
        local r = { f(...) }
        local a = acc[name]
        a.wall = a.wall + (uv.hrtime() - w0) / 1e9
        a.cpu = a.cpu + tcpu() - c0
        return unpack(r, 1, table.maxn(r))
    end
end

local function instrument(led, acc)
    for _, p in ipairs(PHASES) do acc[p] = { wall = 0, cpu = 0 } end
    for _, m in ipairs { "_plan_batch", "_claim_batch", "_revalidate_batch", "flush" } do
        led[m] = timed(acc, m, led[m])
    end
    local orig = { reserve = phases.reserve, finalize_batch = phases.finalize_batch }
    phases.reserve = timed(acc, "reserve", orig.reserve)
    phases.finalize_batch = timed(acc, "finalize_batch", orig.finalize_batch)
    return function()
        phases.reserve, phases.finalize_batch = orig.reserve, orig.finalize_batch
    end
end

local function setup(led) B.fund_payers(led, EXT, SINK, PAYERS, USD) end

local jit_count = B.jit_counter() -- traces compiled and aborted per case (issue 25)
local serial = 0
local function case(name, s, size, b2)
    local cs, cnt = B.counted(s)
    local led = L.new { store = cs, book = "bench", node = "bench-" .. name .. size,
                        pause = function(k) task.sleep(k) end }
    serial = serial + 1
    if serial == 1 or name == "postgres" and size == o.sizes[1] then setup(led) end
    local acc = {}
    local restore = instrument(led, acc)
    local profiling = o.profile and name == "sqlite" and size == o.sizes[#o.sizes]
    if profiling then require("jit.p").start(os.getenv("SB_PMODE") or "Fl", o.profile) end
    jit_count()
    local c0, p0, calls0, t0 = tcpu(), os.clock(), cnt.calls, uv.hrtime()
    local n = 0
    for b = 1, o.batches do
        local reqs = {}
        for k = 1, size do
            reqs[k] = { intent = format("b%s-%d-%d-%d-%d", name, serial, size, b, k), movements = {
                { from = PAYERS[k % o.payers + 1], to = SINK, asset = USD, amount = 1 } } }
        end
        local res = led:commit_many(reqs)
        for k = 1, size do
            assert(res[k][1], res[k][2])
            n = n + 1
        end
    end
    local wall = (uv.hrtime() - t0) / 1e9
    local cpu, pcpu = tcpu() - c0, os.clock() - p0
    if profiling then require("jit.p").stop() end
    restore()
    local la = B.loadavg()
    local rate = n / wall
    print(format("%-8s batch %3d, %2d payer(s): %6.0f transfers/s  %6.0f us wall/transfer  "
                 .. "%5.0f us cpu/transfer (process %5.0f)  %5.1f store calls/batch  B2 %6.0f/s  ratio %.3f  loadavg %s",
                 name, size, o.payers, rate, wall / n * 1e6, cpu / n * 1e6, pcpu / n * 1e6,
                 (cnt.calls - calls0) / o.batches, b2, rate / b2, la))
    local parts = {}
    for _, p in ipairs(PHASES) do
        parts[#parts + 1] = format("%s %.0f/%.0f", p, acc[p].wall / n * 1e6, acc[p].cpu / n * 1e6)
    end
    print(format("%-8s batch %3d: us per transfer wall/cpu: %s", name, size,
                 table.concat(parts, "  ")))
    print(format("%-8s batch %3d: this VM's jit: %s", name, size, (jit_count())))
    emit(format('{"bench":"ledger-batch","store":"%s","size":%d,"payers":%d,"batches":%d,'
                .. '"per_s":%.1f,"wall_us":%.0f,"cpu_us":%.0f,"process_cpu_us":%.0f,'
                .. '"calls_per_batch":%.1f,"b2_per_s":%.1f,"ratio_b2":%.3f,"loadavg":"%s"}', name,
                size, o.payers, o.batches, rate, wall / n * 1e6, cpu / n * 1e6, pcpu / n * 1e6,
                (cnt.calls - calls0) / o.batches, b2, rate / b2, la))
end

B.main("bench-ledger-batch", function(T)
    if o.sqlite then
        local path = format("%s/bench-ledger-batch-%d.db", o.dir, uv.os_getpid())
        os.remove(path)
        local b2 = SB.sqlite { path = path .. ".base", seconds = 2, per_tx = 64, sources = 16 }
        print(format("sqlite   B2 (plain SQL, 64 per transaction): %.0f transfers/s  loadavg %s",
                     b2.per_s, B.loadavg()))
        local s = assert(store.open { backend = "sqlite", path = path, offload = true })
        for _, size in ipairs(o.sizes) do case("sqlite", s, size, b2.per_s) end
        s:close()
        B.fresh_sqlite(path)
        B.fresh_sqlite(path .. ".base")
    end
    if o.pg then
        B.with_pg_store("bench-ledger-batch", H, "bench_batch", function(s, cluster)
            local b2 = SB.postgres(T, { conninfo = cluster.conninfo, schema = "bench_base",
                                        seconds = 2, conns = 4, per_tx = 64, sources = 16 })
            print(format("postgres B2 (plain SQL, 64 per transaction, 4 conns): %.0f "
                         .. "transfers/s  loadavg %s", b2.per_s, B.loadavg()))
            for _, size in ipairs(o.sizes) do case("postgres", s, size, b2.per_s) end
        end)
    end
    return true
end)
