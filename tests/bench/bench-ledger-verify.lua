-- bench-ledger-verify.lua: what `ledger verify` (ron.ledger.verify) costs on a large book:
-- seconds, peak RSS, the Lua heap's high-water and bytes per transfer (I-7: verify's memory
-- is what it must keep, docs/LEDGER.md "What verify proves", "Verify's memory").
--
--   build/ron-accounting run tests/bench/bench-ledger-verify.lua [--transfers N]
--       [--payers K] [--db FILE] [--verify-from DIR] [--phases] [--no-baseline]
--       [--out FILE] [--quick]
--
-- Builds a SQLite book (a temporary file, removed after; or --db FILE, kept, and reused when
-- it holds N transfers already) of N transfers (default 100000; --quick 2000): K funded
-- payers (16) each pay 1 unit to one sink in turn, in commit_many batches of 256, so every
-- transfer spends its payer's change and the sink's credits stay unspent, each request
-- wallet-shaped (its nonce's intent, body hash and Idempotency-Key row, as ron.wallet's
-- committer writes them).
-- Then each case runs in a child process of its own (its peak RSS is the case's alone),
-- the store opened read-only as the CLI opens it:
--   verify       verify.run over the book: transfers, problems (must be 0), seconds, peak
--                RSS (VmHWM) and its growth over the child's RSS before, the Lua heap's
--                high-water (collectgarbage("count") at every page read), both per transfer;
--   rows_whole   the baseline, the simplest reader: every table verify reads, whole, into
--                Lua tables at once (scan.all: what verify held before it read by pages),
--                the same figures.
-- --verify-from DIR loads ron.ledger.verify and ron.ledger.verify.* from DIR (another
-- checkout's lua/, e.g. the code before a change): the verify case then runs that code.
-- --phases prints the live Lua heap (after a full collection) as each of verify's phases
-- starts (the collections cost time: not for the figures).
-- Prints one `BENCH {json}` line per case (tests/bench/README.md).
local B = require("bench_common") -- (package.path: this directory and ../../lua)

local format = string.format

local o = { transfers = 100000, payers = 16, baseline = true }
B.args(arg, o, { { "--transfers", "transfers", "num" }, { "--payers", "payers", "num" },
                 { "--db", "db", "str" }, { "--verify-from", "verify_from", "str" },
                 { "--phases", "phases", "on" }, { "--no-baseline", "baseline", "off" },
                 { "--child", "child", "str" } },
       "bench-ledger-verify.lua [--transfers N] [--payers K] [--db FILE] [--verify-from DIR] "
       .. "[--phases] [--no-baseline] [--out FILE] [--quick]")
if o.quick then o.transfers = 2000 end

-- The tables verify reads whole (the baseline holds them all at once).
local TABLES = { "events", "accounts", "transfers", "postings", "balances", "intents", "heads",
                 "transfer_accounts" }

-- ---- a child: one case, measured ----

-- --phases: the live heap as each phase starts (what the ones before left: verify drops
-- what no later phase reads between phases), this code's modules or another tree's.
local function phases()
    local t0 = os.clock()
    local function wrap(mod, name, label)
        local f = mod and mod[name]
        if not f then return end
        mod[name] = function(...)
            local c = os.clock()
            collectgarbage()
            collectgarbage()
            t0 = t0 + os.clock() - c -- (the collections' CPU not counted)
            print(format("  before %-20s live heap %7.1f MB  (CPU %.1f s)", label,
                         collectgarbage("count") / 1024, os.clock() - t0))
            return f(...)
        end
    end
    local function try(name)
        local ok, m = pcall(require, name)
        return ok and m or nil
    end
    local feed, walk = try("ron.ledger.verify.feed"), try("ron.ledger.verify.walk")
    local money, rows = try("ron.ledger.verify.money"), try("ron.ledger.verify.rows")
    wrap(feed, "read", "the feed")
    wrap(walk, "read", "the transfers' rows")
    wrap(walk, "replay", "the replay")
    wrap(money, "postings", "postings")
    wrap(money, "balances", "balances")
    wrap(rows, "intents", "intents")
    wrap(rows, "heads", "heads")
    wrap(feed, "check_shortfalls", "shortfalls")
end

local function child(case)
    if o.verify_from then -- (before anything requires ron.ledger.verify)
        package.path = o.verify_from .. "/?.lua;" .. o.verify_from .. "/?/init.lua;"
                       .. package.path
    end
    local sqlite = require("ron.ledger.store.sqlite")
    local scan = require("ron.ledger.store.scan")
    if o.phases and case == "verify" then phases() end
    local verify = require("ron.ledger.verify")
    local uv = require("luv")
    local s = assert(sqlite.open { path = o.db, readonly = true })
    collectgarbage()
    collectgarbage()
    local rss0, heap0 = B.status_kb("VmRSS"), collectgarbage("count")
    local heap_max, pages = heap0, 0
    local page = s.scan
    s.scan = function(self, ...) -- every page read: the heap sampled
        pages = pages + 1
        local h = collectgarbage("count")
        if h > heap_max then heap_max = h end
        return page(self, ...)
    end
    local problems, t0 = {}, uv.hrtime()
    local n
    if case == "verify" then
        local sum = verify.run(s, { book = "bench", report = function(where, what)
            if #problems < 5 then problems[#problems + 1] = where .. ": " .. what end
        end })
        n = sum.transfers
        problems.n = sum.problems
    else -- rows_whole: every table whole, held at once (one snapshot, as verify reads)
        local held = {}
        assert(s:snapshot(function()
            for _, name in ipairs(TABLES) do held[name] = assert(scan.all(s, name)) end
            return true
        end))
        n, problems.n = #held.transfers, 0
    end
    local secs = (uv.hrtime() - t0) / 1e9
    local h = collectgarbage("count")
    if h > heap_max then heap_max = h end
    local hwm = B.status_kb("VmHWM")
    s:close()
    print(format("RESULT %d %d %.3f %d %d %d %.0f %.0f", n, problems.n, secs, hwm, rss0, pages,
                 heap_max, heap0))
    for _, p in ipairs(problems) do print("PROBLEM " .. p) end
end

-- ---- the parent: the book, then a child per case ----

local function build(path, n, payers_n)
    local L = require("ron.ledger.ledger")
    local codec = require("ron.ledger.codec")
    local sqlite = require("ron.ledger.store.sqlite")
    local uv = require("luv")
    local s = assert(sqlite.open { path = path })
    local led = L.new { store = s, book = "bench", node = "bench-verify" }
    local USD = { code = "USD", scale = 2 }
    local payers = {}
    for k = 1, payers_n do payers[k] = format("P%015d", k) end
    local EXT, SINK = ("E"):rep(16), ("S"):rep(16)
    B.fund_payers(led, EXT, SINK, payers, USD)
    local t0, done, b = uv.hrtime(), payers_n, 0
    while done < n do
        b = b + 1
        local reqs, claims = {}, {}
        for k = 1, math.min(256, n - done) do
            -- wallet-shaped (ron.wallet.committer): the nonce's intent, the body hash, the
            -- Idempotency-Key row claimed with the batch's first write and named by its event
            local nonce, key = format("n%08d-%03d", b, k), format("k%08d-%03d", b, k)
            local h = codec.sha256(key .. nonce)
            reqs[k] = { intent = "wlt:n:p:" .. nonce, body_hash = h, keys = { "wlt:k:p:" .. key },
                        movements = { { from = payers[k % payers_n + 1], to = SINK, asset = USD,
                                        amount = 1 } } }
            claims[k] = { key = "wlt:k:p:" .. key,
                          outcome = { status = "claimed", message = nonce, body_hash = h } }
        end
        local res = led:commit_many(reqs, { check = function() return {}, claims end })
        for k = 1, #reqs do assert(res[k][1], res[k][2]) end
        done = done + #reqs
    end
    s:close()
    print(format("book: %d transfers (%d payers -> 1 sink) in %.1f s: %s", done, payers_n,
                 (uv.hrtime() - t0) / 1e9, path))
end

local function has_book(path, n)
    local f = io.open(path, "rb")
    if not f then return false end
    f:close()
    local sqlite = require("ron.ledger.store.sqlite")
    local s = sqlite.open { path = path, readonly = true }
    if not s then return false end
    local rows = s.drv:read("SELECT count(*) FROM transfers", { n = 0 })
    s:close()
    return rows and tonumber(rows[1][1]) == n
end

local function shell_quote(x) return "'" .. tostring(x):gsub("'", "'\\''") .. "'" end

local emit = B.emitter(o.out)

local function run_case(case, path)
    local exe = assert(io.popen("readlink /proc/" .. require("luv").os_getpid() .. "/exe"))
                :read("*l")
    local cmd = { shell_quote(exe), "run", shell_quote(B.here .. "bench-ledger-verify.lua"),
                  "--child", case, "--db", shell_quote(path) }
    if o.verify_from then cmd[#cmd + 1] = "--verify-from " .. shell_quote(o.verify_from) end
    if o.phases then cmd[#cmd + 1] = "--phases" end
    local p = assert(io.popen(table.concat(cmd, " ") .. " 2>&1"))
    local r
    for line in p:lines() do
        if line:match("^RESULT ") then r = line else print(line) end
    end
    p:close()
    assert(r, case .. ": the child printed no RESULT")
    local f = {}
    for x in r:sub(8):gmatch("%S+") do f[#f + 1] = assert(tonumber(x)) end
    local n, problems, secs, hwm, rss0, pages, heap_max, heap0 = unpack(f, 1, 8)
    local per_rss, per_heap = (hwm - rss0) * 1024 / n, (heap_max - heap0) * 1024 / n
    local name = case == "verify" and o.verify_from and "verify (" .. o.verify_from .. ")"
                 or case
    print(format("%-12s %d transfers, %d problems, %.1f s; peak RSS %.1f MB (%.1f MB before: "
                 .. "%.0f bytes per transfer); Lua heap high-water %.1f MB (+%.1f MB: %.0f bytes "
                 .. "per transfer); %d pages read; load %s", name, n, problems, secs, hwm / 1024,
                 rss0 / 1024, per_rss, heap_max / 1024, (heap_max - heap0) / 1024, per_heap,
                 pages, B.loadavg()))
    emit(format('{"bench":"ledger-verify","case":"%s","from":"%s","transfers":%d,"payers":%d,'
                .. '"seconds":%.3f,"transfers_per_s":%.0f,"peak_rss_kb":%d,"rss_before_kb":%d,'
                .. '"rss_bytes_per_transfer":%.0f,"heap_max_kb":%.0f,'
                .. '"heap_bytes_per_transfer":%.0f,"problems":%d,"loadavg":"%s"}', case,
                o.verify_from or "", n, o.payers, secs, n / secs, hwm, rss0, per_rss, heap_max,
                per_heap, problems, B.loadavg()))
    return problems, hwm
end

local function parent()
    local path = o.db or (os.tmpname() .. ".verify.db")
    if not has_book(path, o.transfers) then
        B.fresh_sqlite(path)
        build(path, o.transfers, o.payers)
    end
    local problems, hwm = run_case("verify", path)
    if o.baseline then
        local _, base = run_case("rows_whole", path)
        print(format("ratio       verify's peak RSS / rows_whole's: %.2f", hwm / base))
    end
    if not o.db then B.fresh_sqlite(path) end
    if problems ~= 0 then os.exit(1) end
end

if o.child then child(o.child) else parent() end
