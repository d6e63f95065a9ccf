-- bench-ledger-sqlite-lengths.lua: the offloaded SQLite store under list lengths that vary
-- (I-7, docs/LEDGER.md "Prepared statements, bounded"): a list primitive's statement is one
-- per length, so a batch path whose lengths vary meets every length in time. The store
-- keeps its prepared statements and their texts within a budget; this measures what that
-- costs and that memory stays flat.
--
--   ron-accounting run tests/bench/bench-ledger-sqlite-lengths.lua [--quick] [--out FILE]
--       [--dir DIR] [--rounds N] [--max-len L]
--
-- Each round moves the heads of the first n of L streams one seq on (advance_streams) and
-- reads them back (get_streams, on the reader connection): the same length every round
-- (the baseline, n = L/2: one statement each, prepared once) and then a random length in
-- 1..L every round (seed printed). Printed for each: rows/s, RSS at its start and end (the
-- process: the pool threads' statements are in it), and the ratio of the random lengths'
-- rows/s to the fixed length's.
-- Output: human-readable lines and one `BENCH {json}` line (tests/bench/README.md).
local uv = require("luv")

package.path = (debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "?.lua;" .. package.path
local B = require("bench_common") -- and lua/ on package.path
local store = require("ron.ledger.store")

local format = string.format

local opts = { dir = os.getenv("TMPDIR") or "/tmp", rounds = 3000, max_len = 1024 }
B.args(arg, opts, { { "--rounds", "rounds", "num" }, { "--max-len", "max_len", "num" } },
       "ron-accounting run bench-ledger-sqlite-lengths.lua [--quick] [--out FILE] [--dir DIR] "
           .. "[--rounds N] [--max-len L]")
if opts.quick then opts.rounds = 200 end
local emit = B.emitter(opts.out)
local SEED = 20261202

local function rss_mb() return B.status_kb("VmRSS") / 1024 end

local function tenant(i) return format("%016d", i) end

-- Rounds of moves: len(r) streams each; -> rows/s, RSS at the start and end (MB)
local function run(s, seq, rounds, len)
    local rows, r0 = 0, rss_mb()
    local t0 = uv.hrtime()
    for r = 1, rounds do
        local n = len(r)
        local list, keys = {}, {}
        for i = 1, n do
            local from = seq[i]
            list[i] = { tenant = tenant(i), dimension = "d", seq = from + 1,
                        b3 = string.rep(string.char((from + 1) % 256), 32), prev_seq = from,
                        prev_b3 = string.rep(string.char(from % 256), 32) }
            keys[i] = { tenant = tenant(i), dimension = "d" }
            seq[i] = from + 1
        end
        assert(s:advance_streams(list) == n, "advance_streams")
        assert(s:get_streams(keys), "get_streams")
        rows = rows + n
    end
    return rows / ((uv.hrtime() - t0) / 1e9), r0, rss_mb()
end

B.main("bench-ledger-sqlite-lengths", function()
    local path = B.fresh_sqlite(opts.dir .. "/bench-sqlite-lengths.db")
    local s = assert(store.open { backend = "sqlite", path = path, offload = true })
    local L = opts.max_len
    local seq, first = {}, {}
    for i = 1, L do
        first[i] = { tenant = tenant(i), dimension = "d", seq = 1, b3 = string.rep("\1", 32) }
        seq[i] = 1
    end
    for c = 1, L, 1024 do
        local part = {}
        for i = c, math.min(L, c + 1023) do part[#part + 1] = first[i] end
        assert(s:insert_streams(part) == #part)
    end
    local half = math.max(1, math.floor(L / 2))
    local fixed, f0, f1 = run(s, seq, opts.rounds, function() return half end)
    print(format("sqlite-o fixed length %d, %d rounds: %.0f rows/s, RSS %.0f -> %.0f MB (load %s)",
                 half, opts.rounds, fixed, f0, f1, B.loadavg()))
    math.randomseed(SEED)
    local random, v0, v1 = run(s, seq, opts.rounds, function() return math.random(1, L) end)
    print(format("sqlite-o random lengths 1..%d (seed %d), %d rounds: %.0f rows/s, RSS %.0f -> "
                 .. "%.0f MB, %.2f of the fixed length's rows/s (load %s)", L, SEED,
                 opts.rounds, random, v0, v1, random / fixed, B.loadavg()))
    emit(format('{"bench":"ledger-sqlite-lengths","rounds":%d,"max_len":%d,"seed":%d,'
                .. '"fixed_rows_per_s":%.0f,"random_rows_per_s":%.0f,"ratio":%.3f,'
                .. '"rss_start_mb":%.0f,"rss_fixed_end_mb":%.0f,"rss_end_mb":%.0f,'
                .. '"loadavg":"%s"}', opts.rounds, L, SEED, fixed, random, random / fixed,
                f0, f1, v1, B.loadavg()))
    s:close()
end)
