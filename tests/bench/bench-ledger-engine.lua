-- bench-ledger-engine.lua: the engine (lua/ron/ledger/ledger.lua), one saga at a time.
--
-- Plain LuaJIT: commits/s on the in-memory store and on SQLite (synchronous NORMAL and FULL,
-- the synchronous driver), each commit a deposit or a payment with change.
--   RON_LEDGER_LIB=build/libronledger.so luajit tests/bench/bench-ledger-engine.lua [N]
--
-- Inside the host (issue 25's "one Ledger:commit with no contention"): the latency of one
-- Ledger:commit at a time, p50 and p99, on offloaded SQLite (durability ack: the commit
-- flushes before it answers) and on PostgreSQL (a server the bench starts, fsync on, a pool
-- of 4), each commit a payment of 1 unit from one of 16 funded payers (a posting and its
-- change) to a sink; the store calls per commit; the load average beside every figure.
--   build/ron-accounting run tests/bench/bench-ledger-engine.lua [--commits N] [--no-pg]
--       [--no-sqlite] [--out FILE]
-- Prints one `BENCH {json}` line per store (tests/bench/README.md).
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = here .. "../../lua/?.lua;" .. here .. "../../lua/?/init.lua;" .. package.path
local L = require("ron.ledger.ledger")
local store = require("ron.ledger.store")
local memory = require("ron.ledger.store.memory")
local pct = require("ron.base.percentile")

local HOST = pcall(require, "ron.base.net.postgres_c")
local N = not HOST and tonumber(arg and arg[1]) or 2000
local USD = { code = "USD", scale = 2 }
local EXT = ("E"):rep(16)
local ACCTS = { ("A"):rep(16), ("B"):rep(16), ("C"):rep(16), ("D"):rep(16) }

local function clock() return os.clock() end

local function run(name, s, n)
    local led = L.new { store = s, nonce = "bench" }
    assert(led:create_account { id = EXT, policy = "uncapped" })
    for _, a in ipairs(ACCTS) do assert(led:create_account { id = a }) end
    local calls0 = s.calls or 0
    local t0 = os.time()
    local c0 = clock()
    local ok = 0
    for i = 1, n do
        local from = i % 3 == 1 and EXT or ACCTS[i % 4 + 1]
        local to = ACCTS[(i * 7) % 4 + 1]
        if to == from then to = EXT end
        if led:commit { intent = "b" .. i, movements = { { from = from, to = to, asset = USD,
                                                           amount = 1 + i % 50 } } } then
            ok = ok + 1
        end
    end
    local dt = clock() - c0
    if dt < 0.001 then dt = os.time() - t0 end
    local per = s.calls and (s.calls - calls0) / n or nil
    print(string.format("%-22s %6d commits (%d committed) in %.2f s cpu: %.0f commits/s%s",
                        name, n, ok, dt, n / dt,
                        per and string.format(", %.1f primitives/commit", per) or ""))
    print(string.format('BENCH {"bench":"ledger-engine","store":"%s","commits":%d,' ..
                        '"committed":%d,"seconds":%.3f,"commits_per_s":%.1f}', name, n, ok, dt,
                        n / dt))
end


-- ---- inside the host: the latency of one commit at a time ----

local function host_main()
    local uv = require("luv")
    local task = require("ron.base.task")
    package.path = here .. "?.lua;" .. package.path
    local B = require("bench_common")
    local H = dofile(here .. "../pg/harness.lua")
    local o = { commits = 2000, pg = true, sqlite = true, dir = os.getenv("TMPDIR") or "/tmp" }
    local i = 1
    while i <= #arg do
        local a, v = arg[i], arg[i + 1]
        if a == "--commits" then o.commits = assert(tonumber(v)); i = i + 2
        elseif a == "--out" then o.out = v; i = i + 2
        elseif a == "--no-pg" then o.pg = false; i = i + 1
        elseif a == "--no-sqlite" then o.sqlite = false; i = i + 1
        else error("bench-ledger-engine.lua: unknown argument " .. tostring(a)) end
    end
    local emit = B.emitter(o.out)
    local PAYERS, SINK = {}, ("S"):rep(16)
    for k = 1, 16 do PAYERS[k] = string.format("P%015d", k) end
    local function case(name, s)
        local cs, cnt = B.counted(s)
        local led = L.new { store = cs, book = "bench", node = "bench-" .. name,
                            pause = function(k) task.sleep(k) end }
        B.fund_payers(led, EXT, SINK, PAYERS, USD)
        local lat = {}
        local c0, calls0 = os.clock(), cnt.calls
        local t0 = uv.hrtime()
        for k = 1, o.commits do
            local a = uv.hrtime()
            assert(led:commit { intent = "pay-" .. k, movements = {
                { from = PAYERS[k % 16 + 1], to = SINK, asset = USD, amount = 1 } } })
            lat[k] = (uv.hrtime() - a) / 1000
        end
        local wall = (uv.hrtime() - t0) / 1e9
        local cpu = os.clock() - c0
        local calls = (cnt.calls - calls0) / o.commits
        print(string.format("%-9s %6d commits, one at a time: p50 %6.0f us  p99 %6.0f us  "
                            .. "%6.0f commits/s  %.1f store calls/commit  %.0f us cpu/commit  "
                            .. "loadavg %s", name, o.commits, pct(lat, 0.5), pct(lat, 0.99),
                            o.commits / wall, calls, cpu / o.commits * 1e6, B.loadavg()))
        emit(string.format('{"bench":"ledger-engine-latency","store":"%s","commits":%d,'
                           .. '"p50_us":%.0f,"p99_us":%.0f,"per_s":%.1f,"calls_per_commit":%.1f,'
                           .. '"cpu_us":%.0f,"loadavg":"%s"}', name, o.commits, pct(lat, 0.5),
                           pct(lat, 0.99), o.commits / wall, calls, cpu / o.commits * 1e6,
                           B.loadavg()))
    end
    B.main("bench-ledger-engine", function()
        case("memory", memory.new())
        if o.sqlite then
            local path = string.format("%s/bench-ledger-engine-%d.db", o.dir, uv.os_getpid())
            os.remove(path)
            local s = assert(store.open { backend = "sqlite", path = path, offload = true })
            case("sqlite", s)
            s:close()
            B.fresh_sqlite(path)
        end
        if o.pg then
            B.with_pg_store("bench-ledger-engine", H, "bench_engine", function(s)
                case("postgres", s)
            end)
        end
        return true
    end)
end

if HOST then return host_main() end

run("memory", memory.new(), N)
for _, sync in ipairs { "normal", "full" } do
    local p = os.tmpname()
    os.remove(p)
    local s = assert(store.open { backend = "sqlite", path = p, synchronous = sync })
    run("sqlite-" .. sync, s, sync == "full" and math.floor(N / 4) or N)
    s:close()
    os.remove(p)
end
