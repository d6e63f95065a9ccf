-- bench-wallet-loop.lua: the wallet's own loop work per transfer, above the ledger (issue 25).
--
--   build/ron-accounting run tests/bench/bench-wallet-loop.lua [--groups N] [--size N]
--       [--rounds N] [--profile FILE] [--pmode MODE] [--out FILE]
--
-- One wallet service (ron.wallet.service, its committer and its cache) over a stub ledger
-- whose store answers get_intents/put_intents from a table and whose commit_many returns
-- the engine's batch results at once (no store, no engine, no yield), driven without HTTP:
-- each group is `size` POST /v1/transfer requests (one hot source, every request its own
-- Idempotency-Key and nonce) handed to the route's handler as the daemon's server hands
-- them (a request object with headers, body and respond), then answered by the committer
-- as one group. Printed per round (the first warms the traces up):
--   handler    this thread's CPU per request in the route's handler (token, headers, body
--              decode, body hash, the answer cache, the queue): synchronous, timed alone
--   committer  the rest per request (the group's gathering, task and timer, the intents'
--              keys, the ledger requests, the answers: receipts, the cache, the counters,
--              the send), the stub's own CPU subtracted
--   stub       the stub ledger's CPU per request (not the wallet's)
--   garbage    bytes the Lua heap grew per request with the collector stopped over the
--              first 20 groups (every
--              table, string and closure made on the path)
--   traces / aborts of the loop VM's trace compiler during the round, and (after the
--              first) where the aborts were, with their reasons
-- beside the load average. --profile FILE: LuaJIT's profiler over the last round (jit.p,
-- --pmode, default "Fi1": by function, 1 ms samples). One `BENCH {json}` line per round.
-- What it leaves out (the bench-wallet.lua figures hold them): the HTTP server (h2o's
-- parse and answer, the request object), the store's calls (the offloaded driver's
-- marshalling and the thread hop), the engine's commit_many, the cache's feed.
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = here .. "?.lua;" .. package.path
local B = require("bench_common") -- and lua/ on package.path
local acct = require("ron.accounting")
local service = require("ron.wallet.service")
local dto = require("ron.wallet.dto")
local codec = require("ron.ledger.codec")

local format = string.format

local o = { groups = 200, size = 64, rounds = 3 }
B.args(arg, o, { { "--groups", "groups", "num" }, { "--size", "size", "num" },
                 { "--rounds", "rounds", "num" }, { "--profile", "profile", "str" },
                 { "--pmode", "pmode", "str" } },
       "bench-wallet-loop.lua [--groups N] [--size N] [--rounds N] [--profile FILE] " ..
       "[--pmode MODE] [--out FILE]")
local emit = B.emitter(o.out)

local FROM, TO = "6f1e3c52-7d0b-4b8e-9a51-0c2f4e8d9a10", "0a0b0c0d-0e0f-4101-8203-040506070809"
local TOKEN = "bench-wallet-loop-token"
local FROM_B, TO_B = dto.uuid_bytes(FROM), dto.uuid_bytes(TO)

-- The stub ledger: every request new (no intent row found, every claim taken: the rows are
-- not kept, so the Lua heap holds what the wallet keeps, as with a real store), each commit
-- a receipt with the next event seq.
local stub_cpu, stub_kb = 0, 0
local function stub_ledger()
    local seq = 0
    local store = {}
    function store.get_intents() return {} end
    function store.put_intents(_, list) return #list end
    function store:head_seq() return seq end
    local led = { store = store, book = "bench", stats = {} }
    function led:create_account() return true end
    function led:events_since() return {} end
    function led:commit_many(reqs)
        local t0, k0 = B.cpu_s(1), collectgarbage("count")
        local out = {}
        for k, r in ipairs(reqs) do
            seq = seq + 1
            local m = r.movements[1]
            -- (ids as random as the engine's BLAKE3: strings that differ in a few digits
            -- only would all meet in one chain of LuaJIT's string table)
            out[k] = { { transfer_id = codec.sha256(format("%d", seq)), status = "committed",
                         event_seq = seq, replayed = false,
                         transfer = { pins = { { account = m.from }, { account = m.to } } } } }
        end
        stub_cpu, stub_kb = stub_cpu + B.cpu_s(1) - t0, stub_kb + collectgarbage("count") - k0
        return out
    end
    return led
end

local jit_count = B.jit_counter()
-- the trace aborts of a round by place and reason ("file:line: reason"), the listener on
local aborts, listening = {}, false
B.on_trace(function(what, _, func, pc, otr, oex)
    if what ~= "abort" or not listening then return end
    local info = require("jit.util").funcinfo(func, pc)
    local why = require("jit.vmdef").traceerr[otr] or tostring(otr)
    if why:find("%d", 1, true) then why = format(why, oex) end
    local k = tostring(info.loc) .. ": " .. why
    aborts[k] = (aborts[k] or 0) + 1
end)
local function abort_line()
    local list = {}
    for k, n in pairs(aborts) do list[#list + 1] = { k, n } end
    table.sort(list, function(a, b) return a[2] > b[2] end)
    for i = 1, #list do list[i] = format("%s (%d)", list[i][1], list[i][2]) end
    for k in pairs(aborts) do aborts[k] = nil end
    return #list > 0 and table.concat(list, "; ", 1, math.min(8, #list)) or "none"
end
local GARBAGE_GROUPS = 20

B.main("bench-wallet-loop", function(T)
    local w = service.new { ledger = stub_ledger(), assets = { USD = 2 },
                            tokens = { [acct.b3hex(TOKEN)] = FROM },
                            log = function(line) print("wallet: " .. line) end }
    w:start()
    while not w.system_ready do T.sleep(1) end
    local handler
    for _, r in ipairs(w:routes()) do
        if r.method == "POST" and r.path == "^/v1/transfer$" then handler = r.handler end
    end
    local answered = T.channel(o.size * 2, "answers")
    local statuses = {}
    local function respond(_, status)
        statuses[status] = (statuses[status] or 0) + 1
        answered:try_send(status)
        return true
    end
    local headers = { authorization = "Bearer " .. TOKEN, ["content-type"] = "application/json",
                      host = "127.0.0.1" }
    local nonce = 0
    local function request()
        nonce = nonce + 1
        local h = {}
        for k, v in pairs(headers) do h[k] = v end
        h["idempotency-key"] = format("b%d", nonce)
        return { method = "POST", path = "/v1/transfer", peer = "127.0.0.1", headers = h,
                 body = format('{"from":"%s","to":"%s","asset":"USD","amount":1,"nonce":%d}',
                               FROM, TO, nonce), respond = respond }
    end
    print(format("bench-wallet-loop: %d groups of %d per round, %d rounds, loadavg %s", o.groups,
                 o.size, o.rounds, B.loadavg()))
    for round = 1, o.rounds do
        local last = round == o.rounds
        if last and o.profile then require("jit.p").start(o.pmode or "Fi1", o.profile) end
        collectgarbage("collect")
        stub_cpu, listening = 0, round > 1
        jit_count()
        -- the first GARBAGE_GROUPS with the collector stopped: the heap's growth is the
        -- garbage made (then collected, the collector on for the rest: its cost counted)
        local cpu, h_cpu, kb, made, h_kb = 0, 0, 0, 0, 0
        collectgarbage("stop")
        local kb0 = collectgarbage("count")
        stub_kb = 0
        for g = 1, o.groups do
            -- each group's requests made off the clock (the server's work, not the wallet's)
            local k0 = collectgarbage("count")
            local reqs = {}
            for k = 1, o.size do reqs[k] = request() end
            made = made + collectgarbage("count") - k0
            local c0, hk0 = B.cpu_s(1), collectgarbage("count")
            for k = 1, o.size do assert(handler(reqs[k]) == nil) end
            local c1 = B.cpu_s(1)
            if g <= GARBAGE_GROUPS then h_kb = h_kb + collectgarbage("count") - hk0 end
            for _ = 1, o.size do assert(answered:recv(10000)) end
            cpu, h_cpu = cpu + B.cpu_s(1) - c0, h_cpu + c1 - c0
            if g == math.min(GARBAGE_GROUPS, o.groups) then
                kb = (collectgarbage("count") - kb0 - made - stub_kb) / g
                h_kb = h_kb / g
                collectgarbage("restart")
            end
        end
        if last and o.profile then require("jit.p").stop() end
        local n = o.groups * o.size
        local traces, n_tr, n_ab = jit_count()
        assert(statuses[201] == n * round, "not every request was answered 201")
        local line = format("round %d: %d requests, %.1f us cpu/request on the loop thread: " ..
                            "handler %.1f, committer %.1f, stub %.1f; garbage %.0f B/request (handler %.0f); " ..
                            "%s; loadavg %s", round, n, cpu / n * 1e6, h_cpu / n * 1e6,
                            (cpu - h_cpu - stub_cpu) / n * 1e6, stub_cpu / n * 1e6,
                            kb * 1024 / o.size, h_kb * 1024 / o.size, traces, B.loadavg())
        print(line)
        if round > 1 then print(format("round %d: trace aborts: %s", round, abort_line())) end
        emit(format('{"bench":"wallet_loop","round":%d,"requests":%d,"size":%d,' ..
                    '"cpu_us":%.2f,"handler_us":%.2f,"committer_us":%.2f,"stub_us":%.2f,' ..
                    '"garbage_b":%.0f,"handler_garbage_b":%.0f,"traces":%d,"aborts":%d,"loadavg":"%s"}', round, n,
                    o.size, cpu / n * 1e6, h_cpu / n * 1e6, (cpu - h_cpu - stub_cpu) / n * 1e6,
                    stub_cpu / n * 1e6, kb * 1024 / o.size, h_kb * 1024 / o.size, n_tr, n_ab, B.loadavg()))
    end
    w:stop()
    w:wait(1000)
    return true
end)
