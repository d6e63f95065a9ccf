-- bench-ledger-plan.lua: the engine's own CPU and garbage per transfer on the batch path
-- (Ledger:commit_many, issue 25's "the ledger's per-transfer work"), without a database.
--
--   ron-accounting run tests/bench/bench-ledger-plan.lua [--quick] [--out FILE]
--       [--sizes 32,64] [--payers 1,16] [--groups N] [--rounds R] [--profile FILE]
--
-- Each group is `size` payments of 1 unit from K funded payers (round robin; 1: one hot
-- payer spending its own change through the batch) to one sink, each with its body hash
-- (as the wallet's and the exporter's requests), committed by one commit_many over the
-- memory store. The store's primitives are timed and their garbage
-- counted apart, so "engine" is what a transfer costs the loop in Lua whatever the store.
-- Printed per size and payers (the best of R rounds, default 3: the machine is shared):
--   engine     this thread's CPU per transfer (os.clock), the store's subtracted
--   garbage    bytes the Lua heap grew per transfer with the collector stopped, the store's
--              subtracted (every table, string and cdata the engine made)
--   baseline   the C core's validate_and_plan alone (ron.ledger.validate_and_plan) per
--              transfer, on the same transfers and inputs, measured in the same run; the
--              ratio is engine / baseline (the issue: "the engine around it must not cost
--              100x more")
-- beside the load average. --profile FILE: LuaJIT's profiler (jit.p, RA_PROFILE_MODE or
-- "Fi1") over the last round of each case into FILE.<case>.
package.path = (debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "?.lua;" .. package.path
local B = require("bench_common") -- and lua/ on package.path
local L = require("ron.ledger.ledger")
local ledger = require("ron.ledger")
local memory = require("ron.ledger.store.memory")

local opts = { sizes = { 32, 64 }, payers = { 1, 16 }, groups = 200, rounds = 3 }
B.args(arg, opts, { { "--sizes", "sizes", "nums" }, { "--payers", "payers", "nums" },
                    { "--groups", "groups", "num" }, { "--rounds", "rounds", "num" },
                    { "--profile", "profile", "str" } },
       "ron-accounting run bench-ledger-plan.lua [--quick] [--out FILE] [--sizes 32,64] "
           .. "[--payers 1,16] [--groups N] [--rounds R] [--profile FILE]")
if opts.quick then opts.groups, opts.rounds = 20, 1 end
local emit = B.emitter(opts.out)

local USD = { code = "USD", scale = 2 }
local EXT, SINK = ("E"):rep(16), ("S"):rep(16)

-- The store's primitives timed (os.clock) and their heap growth counted: -> counters
local function measured(s) return B.instrument(s, os.clock) end

local function world(k)
    local s = memory.new()
    local led = L.new { store = s, book = "main", node = "bench", nonce = "plan" }
    local payers = {}
    for i = 1, k do payers[i] = ("P%015d"):format(i) end
    B.fund_payers(led, EXT, SINK, payers, USD)
    return s, led, payers
end

local function group_of(payers, size, n0)
    local reqs = {}
    for j = 1, size do
        local n = n0 + j
        -- (with its body hash, as the wallet's and the exporter's requests come)
        reqs[j] = { intent = "t" .. n, body_hash = ("%032d"):format(n), movements = {
            { from = payers[n % #payers + 1], to = SINK, amount = 1, asset = USD } } }
    end
    return reqs
end

local function commit(led, reqs)
    local res = led:commit_many(reqs)
    for i = 1, #reqs do assert(res[i][1], tostring(res[i][2])) end
end

-- One round: -> engine us/transfer, garbage B/transfer
local function round(name, size, k, last)
    local s, led, payers = world(k)
    local n = 0
    for _ = 1, 20 do -- (warm: the traces, the plan cache)
        commit(led, group_of(payers, size, n))
        n = n + size
    end
    local groups = {}
    for g = 1, opts.groups do groups[g] = group_of(payers, size, n + (g - 1) * size) end
    local c = measured(s)
    if last and opts.profile then
        require("jit.p").start(os.getenv("RA_PROFILE_MODE") or "Fi1", opts.profile .. "." .. name)
    end
    collectgarbage("collect")
    local c0 = os.clock()
    for _, reqs in ipairs(groups) do commit(led, reqs) end
    local cpu = os.clock() - c0 - c.t
    if last and opts.profile then require("jit.p").stop() end
    n = n + opts.groups * size
    local tx = opts.groups * size
    -- the garbage: a tenth of the groups with the collector stopped
    local g = math.max(1, math.floor(opts.groups / 10))
    local more = {}
    for i = 1, g do more[i] = group_of(payers, size, n + (i - 1) * size) end
    collectgarbage("collect")
    collectgarbage("stop")
    c.kb = 0
    local k0 = collectgarbage("count")
    for _, reqs in ipairs(more) do commit(led, reqs) end
    local kb = collectgarbage("count") - k0 - c.kb
    collectgarbage("restart")
    return cpu * 1e6 / tx, kb * 1024 / (g * size)
end

-- The baseline: validate_and_plan alone on a payment like the bench's (one input posting
-- of the payer, its change, the sink's credit): the C core's plan through the FFI.
local function baseline_us(n)
    local s, led, payers = world(1)
    commit(led, group_of(payers, 1, 0))
    local p = s:get_postings_by_pairs({ { account = payers[1], asset = USD, status = "active",
                                          limit = 1 } })[1][1]
    local a1 = led:account(payers[1])
    local a2 = led:account(SINK)
    local t = { version = 1, intent = "x", book = "main", created_at_ms = 1700000000000,
                inputs = { p.id }, metadata = "",
                outputs = { { account = payers[1], asset = USD, amount = p.amount - 1 },
                            { account = SINK, asset = USD, amount = 1 } },
                pins = { { account = payers[1], version = a1.version },
                         { account = SINK, version = a2.version } } }
    local accts = { a1, a2 }
    local bal = { { account = payers[1], asset = USD, amount = p.amount },
                  { account = SINK, asset = USD, amount = 1 } }
    assert(ledger.validate_and_plan(t, accts, { p }, bal, true))
    collectgarbage("collect")
    local c0 = os.clock()
    for i = 1, n do
        t.intent = i % 2 == 0 and "x" or "y"
        assert(ledger.validate_and_plan(t, accts, { p }, bal, true))
    end
    return (os.clock() - c0) * 1e6 / n
end

print(("bench-ledger-plan: %d groups per round, %d rounds, loadavg %s")
      :format(opts.groups, opts.rounds, B.loadavg()))
local base = baseline_us(20000)
for _ = 2, opts.rounds do base = math.min(base, baseline_us(20000)) end
for _, k in ipairs(opts.payers) do
    for _, size in ipairs(opts.sizes) do
        local name = ("p%d_s%d"):format(k, size)
        local us, gb = round(name, size, k, opts.rounds == 1)
        for r = 2, opts.rounds do
            local u2, g2 = round(name, size, k, r == opts.rounds)
            if u2 < us then us, gb = u2, g2 end
        end
        print(("batch %3d, %2d payer%s: engine %6.1f us CPU/transfer (%7.0f/s), garbage %6.0f "
               .. "B/transfer; validate_and_plan alone %5.2f us, ratio %5.1f  loadavg %s")
              :format(size, k, k == 1 and " " or "s", us, 1e6 / us, gb, base, us / base,
                      B.loadavg()))
        emit(('{"bench":"ledger-plan","name":"%s","params":{"batch":%d,"payers":%d,"groups":%d},'
              .. '"us_per_transfer":%.2f,"garbage_bytes_per_transfer":%.0f,"baseline":'
              .. '"validate_and_plan","baseline_us":%.3f,"ratio":%.2f,"loadavg":"%s"}')
             :format(name, size, k, opts.groups, us, gb, base, us / base, B.loadavg()))
    end
end
