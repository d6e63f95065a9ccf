-- bench-wallet-loop.lua: the wallet's own loop work per transfer, above the ledger (issue 25).
--
--   build/ron-accounting run tests/bench/bench-wallet-loop.lua [--quick] [--groups N]
--       [--size N] [--rounds N] [--profile FILE] [--pmode MODE] [--out FILE]
--
-- One wallet service (ron.wallet.service, its committer and its cache) over a stub ledger,
-- driven without HTTP (tests/bench/wallet_loop.lua): each group is `size` POST /v1/transfer
-- requests handed to the route's handler, then answered by the committer as one group.
-- Printed per round (the first warms the traces up):
--   handler    this thread's CPU per request in the route's handler (token, headers, body
--              decode, body hash, the answer cache, the queue): synchronous, timed alone
--   committer  the rest per request (the group's gathering, task and timer, the intents'
--              keys, the ledger requests, the answers: receipts, the cache, the counters,
--              the send), the stub's own CPU subtracted
--   stub       the stub ledger's CPU per request (not the wallet's)
--   garbage    bytes the Lua heap grew per request over 20 groups run first with the
--              collector stopped (every table, string and closure made on the path)
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
local WL = require("wallet_loop")

local format = string.format

local o = { groups = 200, size = 64, rounds = 3 }
B.args(arg, o, { { "--groups", "groups", "num" }, { "--size", "size", "num" },
                 { "--rounds", "rounds", "num" }, { "--profile", "profile", "str" },
                 { "--pmode", "pmode", "str" } },
       "bench-wallet-loop.lua [--groups N] [--size N] [--rounds N] [--profile FILE] " ..
       "[--pmode MODE] [--out FILE]")
if o.quick then o.groups, o.rounds = 10, 2 end
local emit = B.emitter(o.out)

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

local function round_line(round, n, cpu, h_cpu, stub_cpu, gb, hgb, traces, n_tr, n_ab)
    print(format("round %d: %d requests, %.1f us cpu/request on the loop thread: handler %.1f, " ..
                 "committer %.1f, stub %.1f; garbage %.0f B/request (handler %.0f); %s; " ..
                 "loadavg %s", round, n, cpu / n * 1e6, h_cpu / n * 1e6,
                 (cpu - h_cpu - stub_cpu) / n * 1e6, stub_cpu / n * 1e6, gb, hgb, traces,
                 B.loadavg()))
    if round > 1 then print(format("round %d: trace aborts: %s", round, abort_line())) end
    emit(format('{"bench":"wallet_loop","round":%d,"requests":%d,"size":%d,"cpu_us":%.2f,' ..
                '"handler_us":%.2f,"committer_us":%.2f,"stub_us":%.2f,"garbage_b":%.0f,' ..
                '"handler_garbage_b":%.0f,"traces":%d,"aborts":%d,"loadavg":"%s"}', round, n,
                o.size, cpu / n * 1e6, h_cpu / n * 1e6, (cpu - h_cpu - stub_cpu) / n * 1e6,
                stub_cpu / n * 1e6, gb, hgb, n_tr, n_ab, B.loadavg()))
end

B.main("bench-wallet-loop", function(T)
    local d = WL.new(T, { size = o.size, cpu = function() return B.cpu_s(1) end })
    print(format("bench-wallet-loop: %d groups of %d per round, %d rounds, loadavg %s", o.groups,
                 o.size, o.rounds, B.loadavg()))
    for round = 1, o.rounds do
        local last = round == o.rounds
        if last and o.profile then require("jit.p").start(o.pmode or "Fi1", o.profile) end
        listening = round > 1
        jit_count()
        -- the garbage first (the collector stopped), then the CPU (the collector on: its
        -- cost counted)
        local gb, hgb = d:garbage(GARBAGE_GROUPS)
        collectgarbage("collect")
        local stub0, cpu, h_cpu = d.stub.cpu, 0, 0
        for _ = 1, o.groups do
            local c, h = d:run(d:requests()) -- (requests made off the clock: the server's)
            cpu, h_cpu = cpu + c, h_cpu + h
        end
        if last and o.profile then require("jit.p").stop() end
        local n = o.groups * o.size
        local traces, n_tr, n_ab = jit_count()
        assert(d.statuses[201] == (o.groups + GARBAGE_GROUPS) * o.size * round,
               "not every request was answered 201")
        round_line(round, n, cpu, h_cpu, d.stub.cpu - stub0, gb, hgb, traces, n_tr, n_ab)
    end
    d:close()
    return true
end)
