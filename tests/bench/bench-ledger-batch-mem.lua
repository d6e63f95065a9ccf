-- bench-ledger-batch-mem.lua: the engine's and the exporter's own CPU per rated slice on the
-- batch path (LED-51..LED-56), without a database: ron.ledger.exporter:put_many of B slices
-- through commit_many into the memory store (docs/LEDGER.md "Where the time goes").
--
--   ron-accounting run tests/bench/bench-ledger-batch-mem.lua [--quick] [--out FILE]
--       [--batch B] [--slices N] [--streams M] [--rounds R] [--profile FILE] [--jv FILE]
--
-- Cases: chain (1 stream, B consecutive slices of one tenant per put_many), streams (M
-- tenants, B/M windows of each per put_many), and payer (commit_many alone: batches of B
-- payments from one payer holding P postings, default 1,000, against the same from a payer
-- holding one: a payer's list was copied into the core for each of its payments before
-- the batch's view in the core, issue 25; and payer_rejects, the same with every other
-- member a rejection, decided the long way), and payers (256 payers holding 100 postings
-- each, one payment from each per batch, against the same payers holding one: a payer
-- whose first page is full had its second page read for every batch), nohash (commit_many
-- of B payments from B payers without body hashes, against the same with them given: the
-- engine's own body hash) and body (a request's body bytes, codec.encode_body against the
-- generic walk). Prints CPU microseconds per slice (os.clock)
-- of the engine and the exporter (the memory store's primitives timed apart) and slices/s,
-- and as the baseline measured in the same run, the rating alone (usage.request per slice:
-- the exporter's rate card and request building), so the ratio says how many times a
-- slice's whole batch path costs its rating. Each case runs R times
-- (default 3) on a fresh store, and the best round is reported (the machine is shared: the
-- best round is the one least disturbed).
-- --profile FILE: LuaJIT's sampling profiler (jit.p, mode "Fl", 1 ms) over the cases into
-- FILE.<case>; --jv FILE: jit.v (trace aborts, NYI) into FILE.<case>.
package.path = (debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "?.lua;" .. package.path
local B = require("bench_common") -- and lua/ on package.path
local usage = require("ron.ledger.usage")
local memory = require("ron.ledger.store.memory")
local lexp = require("ron.ledger.exporter")

local opts = { batch = 256, slices = 4096, streams = 64, rounds = 3, postings = 1000 }
B.args(arg, opts, { { "--batch", "batch", "num" }, { "--slices", "slices", "num" },
             { "--streams", "streams", "num" }, { "--rounds", "rounds", "num" },
             { "--postings", "postings", "num" },
             { "--profile", "profile", "str" }, { "--jv", "jv", "str" } },
       "ron-accounting run bench-ledger-batch-mem.lua [--quick] [--out FILE] [--batch B] "
           .. "[--slices N] [--streams M] [--rounds R] [--postings P] [--profile FILE] "
           .. "[--jv FILE]")
if opts.quick then opts.slices = 1024 end
local emit = B.emitter(opts.out)

local card = B.rate_card()

-- Slices of a real meter: W windows x T tenants (one stream each), in window order.
local function make_slices(T, W)
    local all = {}
    for _, win in ipairs(B.meter_windows(T, W)) do
        for _, sl in ipairs(win) do all[#all + 1] = sl end
    end
    return all
end

local batches_of = require("ron.ledger.view").chunks


-- the baseline: the rating alone (card + usage.request) over the same slices
local function rating_us(all)
    local accounts = function(kind, t16) return usage.account(kind, t16) end
    local infos = {}
    for i, s in ipairs(all) do infos[i] = usage.from_slice(s) end
    local c0 = os.clock()
    local used = "0"
    for _, info in ipairs(infos) do
        local req, rated = usage.request(info, card, used, accounts)
        assert(req, rated)
    end
    return (os.clock() - c0) * 1e6 / #all
end

-- The memory store's own CPU is not what a database-backed store costs the loop: every
-- primitive is timed (os.clock) and reported apart, so "engine" is the engine's and the
-- exporter's own work, what a slice costs in Lua whatever the store.
local function timed(s) return B.instrument(s, os.clock) end

-- One round: a fresh exporter over a fresh memory store -> CPU us per slice, of which in
-- the store, heap kB.
local function round(name, all)
    local s = memory.new()
    local st = timed(s)
    local e = assert(lexp.new { store = s, card = card, node = "bench", book = "main" })
    assert(e:ready())
    local bs = batches_of(all, opts.batch)
    collectgarbage()
    local k0 = collectgarbage("count")
    -- the profilers see the put_many calls only (not the meter, nor the baseline)
    if opts.jv then require("jit.v").on(opts.jv .. "." .. name) end
    if opts.profile then
        require("jit.p").start(os.getenv("RA_PROFILE_MODE") or "Fi1",
                               opts.profile .. "." .. name)
    end
    local c0 = os.clock()
    for _, b in ipairs(bs) do
        local r = e:put_many(b)
        for i = 1, #b do assert(r[i][1] == "ok", tostring(r[i][1]) .. " " .. tostring(r[i][2])) end
    end
    local cpu = os.clock() - c0
    local in_store = st.t
    if opts.profile then require("jit.p").stop() end
    if opts.jv then require("jit.v").off() end
    local kb = collectgarbage("count") - k0
    e:close()
    return cpu * 1e6 / #all, in_store * 1e6 / #all, kb
end

local function case(name, streams)
    local W = math.max(1, math.floor(opts.slices / streams))
    local all = make_slices(streams, W)
    local us, sus, kb = round(name, all)
    for _ = 2, opts.profile and 1 or opts.rounds do
        local u2, s2, k2 = round(name, all)
        if u2 - s2 < us - sus then us, sus, kb = u2, s2, k2 end
    end
    local eng = us - sus
    local base = rating_us(all)
    for _ = 2, opts.rounds do base = math.min(base, rating_us(all)) end
    print(("%-8s batch %4d, %2d stream%s, %5d slices: engine + exporter %6.1f us CPU/slice "
           .. "(%6.0f slices/s; memory store %5.1f us more), rating alone %5.1f us/slice, "
           .. "ratio %.1f, heap +%.0f kB")
          :format(name, opts.batch, streams, streams == 1 and " " or "s", #all, eng, 1e6 / eng,
                  sus, base, eng / base, kb))
    emit(('{"bench":"ledger-batch-mem","name":"%s_%d","params":{"batch":%d,"streams":%d,'
          .. '"slices":%d},"us_per_slice":%.2f,"store_us_per_slice":%.2f,"slices_per_s":%.1f,'
          .. '"baseline":"rating","baseline_us_per_slice":%.2f,"ratio":%.3f,"loadavg":"%s"}')
         :format(name, opts.batch, opts.batch, streams, #all, eng, sus, 1e6 / eng, base,
                 eng / base, B.loadavg()))
end

-- ---- a payer holding many postings (the engine alone, commit_many) ----
local L = require("ron.ledger.ledger")
local USD = { code = "USD", scale = 2 }
local EXT, PAYER, SINK, EMPTY = ("E"):rep(16), ("P"):rep(16), ("S"):rep(16), ("Z"):rep(16)

-- A fresh engine over the memory store with EXT (uncapped, the funds' issuer), SINK and
-- ids, each id funded with its list of amounts (one posting each) -> the store, the engine.
local function funded(ids, amounts_of)
    local s = memory.new()
    local led = L.new { store = s, book = "main", node = "bench", nonce = "b",
                        clock = function() return 1700000000000 end }
    assert(led:create_account { id = EXT, policy = "uncapped" })
    assert(led:create_account { id = SINK })
    local fund = {}
    for _, id in ipairs(ids) do
        assert(led:create_account { id = id })
        for j, a in ipairs(amounts_of(id)) do
            fund[#fund + 1] = { intent = "f" .. id .. j, movements = {
                { from = EXT, to = id, asset = USD, amount = a } } }
        end
    end
    for _, c in ipairs(batches_of(fund, 1024)) do assert(led:commit_many(c)) end
    return s, led
end

-- Six batches of batch(round) through led:commit_many, each answer checked by ok(req,
-- answer) -> CPU us per member of the last four, less the time st (timed(store), or nil)
-- spent in the store.
local function warm_rounds(led, st, batch, ok)
    local cpu, sin, count = 0, 0, 0
    for round_ = 1, 6 do
        local b = batch(round_)
        local t0, c0 = st and st.t or 0, os.clock()
        local r = led:commit_many(b)
        if round_ > 2 then
            cpu, count = cpu + os.clock() - c0, count + #b
            sin = sin + (st and st.t - t0 or 0)
        end
        for j = 1, #b do assert(ok(b[j], r[j]), tostring(r[j][2])) end
    end
    return (cpu - sin) * 1e6 / count
end

-- The best of opts.rounds of run(a) and of run(b) (alternated).
local function best_pair(run, a, b)
    local x, y = run(a), run(b)
    for _ = 2, opts.rounds do x, y = math.min(x, run(a)), math.min(y, run(b)) end
    return x, y
end

-- One round: PAYER funded with n postings of 1,000,001 .. 1,000,000 + n, then batches of
-- opts.batch payments of 1 to SINK (each picks the largest posting and gives its change
-- back to the list, at its head: the walk of the whole list) -> the engine's
-- CPU us per payment (the memory store's timed apart), warm batches only. rejects: every
-- other member pays from an empty account instead (InsufficientFunds: decided the long way
-- beside the payer's list).
local function payer_round(n, rejects)
    local s, led = funded({ PAYER, EMPTY }, function(id)
        local a = {}
        for i = 1, id == PAYER and n or 0 do a[i] = 1000000 + i end
        return a
    end)
    return warm_rounds(led, timed(s), function(round_)
        local b = {}
        for j = 1, opts.batch do
            local from = rejects and j % 2 == 0 and EMPTY or PAYER
            b[j] = { intent = "p" .. round_ .. "." .. j,
                     movements = { { from = from, to = SINK, asset = USD, amount = 1 } } }
        end
        return b
    end, function(req, r) return (r[1] ~= nil) == (req.movements[1].from == PAYER) end)
end

local function payer_case(rejects)
    local us, base = best_pair(function(n) return payer_round(n, rejects) end, opts.postings, 1)
    local name = rejects and "payer_rejects" or "payer"
    print(("%-13s batch %4d, one payer holding %d postings%s: engine %6.1f us CPU/member; "
           .. "holding one posting: %6.1f us, ratio %.2f")
          :format(name, opts.batch, opts.postings, rejects and ", every other member rejected"
                  or "", us, base, us / base))
    emit(('{"bench":"ledger-batch-mem","name":"%s_%d","params":{"batch":%d,"postings":%d},'
          .. '"us_per_payment":%.2f,"baseline":"one_posting","baseline_us_per_payment":%.2f,'
          .. '"ratio":%.3f,"loadavg":"%s"}')
         :format(name, opts.postings, opts.batch, opts.postings, us, base, us / base,
                 B.loadavg()))
end

-- One round of the payers case: 256 payers, each funded with k postings, then batches of
-- one payment of 7 from each (a rating's tenant wallets topped up k times) -> CPU us per
-- payment, the memory store's included (its reads are what a second page costs), warm
-- batches only.
local function payers_round(k)
    local ids = {}
    for i = 1, 256 do ids[i] = ("P%015d"):format(i) end
    local _, led = funded(ids, function()
        local a = {}
        for j = 1, k do a[j] = 1000 + j end
        return a
    end)
    return warm_rounds(led, nil, function(round_)
        local b = {}
        for i = 1, 256 do
            b[i] = { intent = "p" .. round_ .. "." .. i,
                     movements = { { from = ids[i], to = SINK, asset = USD, amount = 7 } } }
        end
        return b
    end, function(_, r) return r[1] ~= nil end)
end

local function payers_case()
    local us, base = best_pair(payers_round, 100, 1)
    print(("payers        batch  256, 256 payers holding 100 postings each, one payment each: "
           .. "%6.1f us CPU/payment with the store; holding one posting each: %6.1f us, ratio %.2f")
          :format(us, base, us / base))
    emit(('{"bench":"ledger-batch-mem","name":"payers_100","params":{"batch":256,'
          .. '"payers":256,"postings":100},"us_per_payment":%.2f,"baseline":"one_posting",'
          .. '"baseline_us_per_payment":%.2f,"ratio":%.3f,"loadavg":"%s"}')
         :format(us, base, us / base, B.loadavg()))
end

-- ---- the engine's body hash (a caller that gives none: commit_many computes it) ----
local codec = require("ron.ledger.codec")

-- One round: opts.batch payers holding one posting each, batches of one payment of 1 from
-- each, without body hashes (hash: with them, given) -> the engine's CPU us per payment,
-- the memory store's timed apart.
local function nohash_round(hash)
    local ids = {}
    for i = 1, opts.batch do ids[i] = ("H%015d"):format(i) end
    local s, led = funded(ids, function() return { 1000 } end)
    return warm_rounds(led, timed(s), function(round_)
        local b = {}
        for i = 1, opts.batch do
            b[i] = { intent = "h" .. round_ .. "." .. i, metadata = "m",
                     movements = { { from = ids[i], to = SINK, asset = USD, amount = 1 } } }
            if hash then b[i].body_hash = codec.sha256(b[i].intent) end
        end
        return b
    end, function(_, r) return r[1] ~= nil end)
end

-- The body's bytes alone, per request: codec.encode_body against the generic walk
-- (codec.encode of the same fields' table, what the engine ran before): CPU us, bytes
-- allocated (the collector stopped), best of opts.rounds.
local function body_us(generic)
    local reqs = {}
    for i = 1, 4096 do
        reqs[i] = { kind = "commit", metadata = "m" .. i, movements = {
            { from = ("F"):rep(16), to = ("T"):rep(16), asset = USD, amount = i },
            { from = ("T"):rep(16), to = ("R"):rep(16), asset = USD, amount = 1 } } }
    end
    local best, kb = math.huge, 0
    for _ = 1, opts.rounds do
        collectgarbage()
        collectgarbage("stop")
        local k0, c0 = collectgarbage("count"), os.clock()
        for _, r in ipairs(reqs) do
            if generic then
                codec.encode { kind = r.kind, metadata = r.metadata, movements = r.movements }
            else
                codec.encode_body(r.kind, r.metadata, r.movements)
            end
        end
        local us = (os.clock() - c0) * 1e6 / #reqs
        kb = (collectgarbage("count") - k0) * 1024 / #reqs
        collectgarbage("restart")
        best = math.min(best, us)
    end
    return best, kb
end

local function nohash_case()
    local us, base = best_pair(nohash_round, false, true)
    print(("nohash        batch %4d, %d payers, one payment each, no body hash given: engine "
           .. "%6.1f us CPU/payment; the same with body hashes given: %6.1f us, ratio %.2f")
          :format(opts.batch, opts.batch, us, base, us / base))
    emit(('{"bench":"ledger-batch-mem","name":"nohash_%d","params":{"batch":%d},'
          .. '"us_per_payment":%.2f,"baseline":"body_hash_given","baseline_us_per_payment":%.2f,'
          .. '"ratio":%.3f,"loadavg":"%s"}')
         :format(opts.batch, opts.batch, us, base, us / base, B.loadavg()))
    local gb, gkb = body_us(true)
    local bb, bkb = body_us(false)
    print(("body          a request's body bytes (two movements): encode_body %5.2f us, %4.0f "
           .. "bytes allocated; the generic walk (encode) %5.2f us, %4.0f bytes, ratio %.2f")
          :format(bb, bkb, gb, gkb, bb / gb))
    emit(('{"bench":"ledger-batch-mem","name":"body","params":{"movements":2},'
          .. '"us_per_body":%.3f,"bytes_per_body":%.0f,"baseline":"generic_encode",'
          .. '"baseline_us_per_body":%.3f,"baseline_bytes_per_body":%.0f,"ratio":%.3f,'
          .. '"loadavg":"%s"}'):format(bb, bkb, gb, gkb, bb / gb, B.loadavg()))
end

case("chain", 1)
case("streams", opts.streams)
payer_case(false)
payer_case(true)
payers_case()
nohash_case()
