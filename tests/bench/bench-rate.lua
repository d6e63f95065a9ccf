-- bench-rate.lua [--quick]: rating throughput (docs/LEDGER-RATING.md).
--   rate     card:rate per slice (the pure function: bigint tiers, one floor)
--   request  usage.request per slice (rate + intent + metadata + movements)
--   put      ron.ledger.exporter:put per slice, a real meter's slices, through the engine into
--            the memory store and into SQLite (synchronous NORMAL and FULL), one stream per
--            tenant, 8 tenants
-- Prints one BENCH line per case: slices/s.
--   LUA_PATH="lua/?.lua;lua/?/init.lua;;" luajit tests/bench/bench-rate.lua
local usage = require("ron.ledger.usage")
local lexp = require("ron.ledger.exporter")

local ffi = require("ffi")
pcall(ffi.cdef, "struct ra_bench_ts { long s; long ns; }; "
                .. "int clock_gettime(int clk, struct ra_bench_ts *ts);")
local ts = ffi.new("struct ra_bench_ts")
local function clock() -- monotonic wall seconds (the SQLite cases wait for the disk)
    ffi.C.clock_gettime(1, ts)
    return tonumber(ts.s) + tonumber(ts.ns) / 1e9
end

local quick = arg[1] == "--quick"

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = here .. "?.lua;" .. package.path
local B = require("bench_common")
local card = B.rate_card()

local function bench(name, n, fn)
    local t0 = clock()
    fn(n)
    local dt = clock() - t0
    print(("BENCH %-24s %9.0f slices/s  (%d in %.2f s)"):format(name, n / dt, n, dt))
end

local N = quick and 20000 or 200000
bench("rate", N, function(n)
    local used = "0"
    for i = 1, n do
        local r = card:rate { dimension = "bytes", window_start_s = 1764547200, used = used,
                              quantity = 1000000 + i }
        used = r.used_after
    end
end)

local info = { tenant = "123e4567-e89b-12d3-a456-426614174000", dimension = "bytes", seq = 1,
               window_start_s = 1764547200, window_len_s = 300, b3 = string.rep("\1", 32),
               prev_b3 = string.rep("\0", 32), quantity = "123456789" }
bench("request", N, function(n)
    for i = 1, n do
        info.seq = i
        assert(usage.request(info, card, "1000"))
    end
end)

-- Slices from a real meter: W windows x T tenants, one row each.
local T, W = 8, quick and 25 or 125
local slices = {}
for _, win in ipairs(B.meter_windows(T, W)) do
    for _, s in ipairs(win) do slices[#slices + 1] = s end
end

-- FULL fsyncs every statement: its case takes the first 200 slices only.
local function put_all(store, n)
    local e = assert(lexp.new { store = store, card = card, node = "bench" })
    assert(e:ready())
    return function()
        for i = 1, n do assert(e:put(slices[i]) == "ok") end
    end
end

local stores = { { "put memory", function() return require("ron.ledger.store.memory").new() end } }
if pcall(require, "ron.ledger.store.sqlite") then
    for _, sync in ipairs { "normal", "full" } do
        stores[#stores + 1] = { "put sqlite " .. sync, function()
            local p = os.tmpname()
            os.remove(p)
            return assert(require("ron.ledger.store.sqlite").open { path = p .. ".db",
                                                                   synchronous = sync })
        end }
    end
end
for _, st in ipairs(stores) do
    local n = st[1]:match("full") and math.min(200, #slices) or #slices
    local run = put_all(st[2](), n)
    local c0 = clock()
    run()
    local dt = math.max(clock() - c0, 1e-9)
    print(("BENCH %-24s %9.0f slices/s  (%d slices in %.2f s)"):format(st[1], n / dt, n, dt))
end
