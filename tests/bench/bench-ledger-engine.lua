-- bench-ledger-engine.lua: commits/s of the engine (lua/ron/ledger/ledger.lua) on the
-- in-memory store and on SQLite (synchronous NORMAL and FULL), one saga at a time: each
-- commit is a deposit or a payment with change (about 20 primitives: intent, claim, saga
-- record, resolve reads, reserve, last-step reads, deactivate, insert, transfer, intent,
-- event, delete).
--
--   RON_LEDGER_LIB=build/libronledger.so luajit tests/bench/bench-ledger-engine.lua [N]
-- Prints one `BENCH {json}` line per store (tests/bench/README.md).
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = here .. "../../lua/?.lua;" .. here .. "../../lua/?/init.lua;" .. package.path
local L = require "ron.ledger.ledger"
local store = require "ron.ledger.store"
local memory = require "ron.ledger.store.memory"

local N = tonumber(arg and arg[1]) or 2000
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

run("memory", memory.new(), N)
for _, sync in ipairs { "normal", "full" } do
    local p = os.tmpname()
    os.remove(p)
    local s = assert(store.open { backend = "sqlite", path = p, synchronous = sync })
    run("sqlite-" .. sync, s, sync == "full" and math.floor(N / 4) or N)
    s:close()
    os.remove(p)
end
