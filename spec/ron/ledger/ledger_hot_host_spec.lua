-- A hot account (issue 29 items 1 and 2, PRODUCT.md §9, LED-67), inside the host (ctests
-- ledger-hot-account-sqlite and ledger-hot-account-pg: `ron-accounting run
-- spec/run-busted.lua spec/ron/ledger/ledger_hot_host_spec.lua` with RON_HOT_BACKEND):
-- two engines (two nodes, each on its own store connection) and three committers each spend
-- one payer's change over and over, one unit at a time, in single commits and in batches
-- (commit_many: a payer spends its own change inside a batch), until RON_HOT_TRANSFERS
-- (3000) are committed; meanwhile a reader on a third connection polls
--   - the payer's balance (what a wallet's cache miss, the CLI and a statement read): it
--     must never go up while the account only pays (a balance that never existed: the state
--     between a saga's consumption of the payer's posting and the insertion of its change);
--   - the payer's Active postings and, for each, the transfer that created it: no posting
--     may be visible (spendable) before the transfer that creates it is stored;
-- then `ledger verify` (ron.ledger.verify) must find nothing, and the balances must be the
-- committed transfers exactly. Fixed seed, printed (RON_HOT_SEED). Under plain busted (no
-- host) it is pending.
local S = require("support")

if not S.needs_host("hot account", "ledger-hot-account") then return end

local uv = require("luv")
local task = require("ron.base.task")
local store = require("ron.ledger.store")
local L = require("ron.ledger.ledger")
local verify = require("ron.ledger.verify")
local H = dofile(S.root .. "tests/pg/harness.lua")

local BACKEND = os.getenv("RON_HOT_BACKEND") or "sqlite"
local TRANSFERS = tonumber(os.getenv("RON_HOT_TRANSFERS") or "") or 3000
local SEED = tonumber(os.getenv("RON_HOT_SEED") or "") or 20261129
local USD = { code = "USD", scale = 2 }
local EXT, PAYER = ("E"):rep(16), ("P"):rep(16)
local PAYEES = { ("a"):rep(16), ("b"):rep(16), ("c"):rep(16), ("d"):rep(16) }
local FUND = 1000000000

-- The world: how to open a store connection on it, and how to tear it down.
local function world()
    if BACKEND == "postgres" then
        local available, why = H.available()
        if not available then return nil, why end
        local cluster = assert(H.start())
        return {
            open = function(node)
                return assert(store.open { backend = "postgres", conninfo = cluster.conninfo,
                                           schema = "hot", connections = 3, node = node,
                                           connect_timeout_ms = 20000,
                                           query_timeout_ms = 20000 })
            end,
            stop = function() cluster:stop() end,
        }
    end
    local path = S.tmpname(".sqlite")
    os.remove(path)
    return {
        open = function()
            return assert(store.open { backend = "sqlite", path = path, offload = true })
        end,
        stop = function()
            for _, x in ipairs { "", "-wal", "-shm" } do os.remove(path .. x) end
        end,
    }
end

local w, why = world()
if not w then
    describe("hot account on " .. BACKEND, function() pending(why) end)
    return
end

describe("hot account on " .. BACKEND, function()
    teardown(function() w.stop() end)

    it(string.format("%d transfers spending one payer's change from 6 committers on 2 nodes: "
                     .. "its balance never goes up, no posting before its transfer, verify "
                     .. "exact (issue 29)", TRANSFERS), function()
        S.run_task(function()
            local x = SEED
            local function rnd(k)
                x = (x * 16807) % 2147483647
                return x % k + 1
            end
            local stores, leds = {}, {}
            for k = 1, 2 do
                stores[k] = w.open("hot-" .. k)
                -- (a race is waited out a little longer each time, as the wallet does)
                leds[k] = L.new { store = stores[k], node = "hot-" .. k, nonce = "h" .. k,
                                  pause = function(i) task.sleep(math.min(2 * i, 10)) end }
                assert(leds[k]:recover())
            end
            local led = leds[1]
            assert(led:create_account { id = EXT, policy = "uncapped" })
            assert(led:create_account { id = PAYER })
            for _, p in ipairs(PAYEES) do assert(led:create_account { id = p }) end
            assert(led:commit { intent = "fund", movements = {
                { from = EXT, to = PAYER, asset = USD, amount = FUND } } })
            local committed, done, n_intent = 0, false, 0
            local batches, singles, retries = 0, 0, 0
            local function req()
                n_intent = n_intent + 1
                return { intent = "hot-" .. n_intent, movements = {
                    { from = PAYER, to = PAYEES[rnd(#PAYEES)], asset = USD, amount = 1 } } }
            end
            -- one committer: single commits and batches, each retried while it races
            local function committer(l)
                while committed < TRANSFERS do
                    if rnd(10) <= 3 then
                        local list = {}
                        for j = 1, rnd(6) + 1 do list[j] = req() end
                        while #list > 0 do
                            local again = {}
                            for j, r in ipairs(l:commit_many(list)) do
                                if r[1] then
                                    -- (replayed: its earlier answer was lost, not a second
                                    -- transfer: verify counts them below)
                                    committed = committed + 1
                                else
                                    assert(L.RETRY[r[3]], tostring(r[2]))
                                    again[#again + 1] = list[j]
                                end
                            end
                            if #again > 0 then
                                retries = retries + 1
                                task.sleep(rnd(3))
                            end
                            list = again
                        end
                        batches = batches + 1
                    else
                        local r0 = req()
                        while true do
                            local r, err, code = l:commit(r0)
                            if r then
                                committed = committed + 1
                                break
                            end
                            assert(L.RETRY[code], tostring(err))
                            retries = retries + 1
                            task.sleep(rnd(3))
                        end
                        singles = singles + 1
                    end
                end
            end
            -- the reader: its own connection, the wallet's read of a balance and the payer's
            -- spendable postings with the transfers that created them
            local rs = w.open("hot-reader")
            local reader = L.new { store = rs, node = "hot-reader", nonce = "r" }
            local reads, ups, early, checked = 0, {}, {}, 0
            local function poll()
                local last = FUND
                local shown = uv.now()
                while not done do
                    if os.getenv("RON_HOT_VERBOSE") and uv.now() - shown > 2000 then
                        shown = uv.now()
                        print(string.format("  %d committed, %d retries, %d reads", committed,
                                            retries, reads))
                    end
                    local b = assert(reader:balance(PAYER, USD))
                    reads = reads + 1
                    if b > last and #ups < 5 then
                        ups[#ups + 1] = string.format("read %d: %s after %s", reads,
                                                      tostring(b), tostring(last))
                    end
                    last = b
                    if reads % 4 == 0 then
                        for _, p in ipairs(assert(rs:get_postings_by_account(PAYER, USD,
                                                                             "active"))) do
                            checked = checked + 1
                            if not rs:get_transfer(p.id.transfer_id) and #early < 5 then
                                early[#early + 1] = require("ron.ledger").hex(p.id.transfer_id)
                            end
                        end
                    end
                    task.sleep(0)
                end
            end
            local t0 = uv.hrtime()
            local hs = { task.spawn("hot-reader", poll) }
            local cs = {}
            for k = 1, 6 do cs[k] = task.spawn("hot-committer-" .. k, committer, leds[k % 2 + 1]) end
            for _, h in ipairs(cs) do assert(h:join()) end
            done = true
            for _, h in ipairs(hs) do assert(h:join()) end
            local dt = (uv.hrtime() - t0) / 1e9
            print(string.format("hot account (%s, seed %d): %d transfers (%d single commits, %d "
                                .. "batches, %d retries of a race) in %.1f s; the reader: %d "
                                .. "balance reads, %d spendable postings checked", BACKEND, SEED,
                                committed, singles, batches, retries, dt, reads, checked))
            -- ups: the payer's balance went up while it only paid (a state between a
            -- saga's writes); early: postings spendable before their transfer was stored
            assert.same({ ups = {}, early = {} }, { ups = ups, early = early })
            assert.is_true(reads > 100)
            -- exact: every committed transfer moved one unit, nothing else moved
            assert.equal(FUND - committed, led:balance(PAYER, USD))
            local paid = 0
            for _, p in ipairs(PAYEES) do paid = paid + led:balance(p, USD) end
            assert.equal(committed, paid)
            for _, l in ipairs(leds) do assert.same({}, assert(l.store:list_pending_sagas(l.node))) end
            local problems = {}
            local sum = verify.run(stores[1], { book = "main", report = function(where, what)
                if #problems < 10 then problems[#problems + 1] = where .. ": " .. what end
            end })
            assert.same({}, problems)
            assert.equal(0, sum.problems)
            assert.equal(committed + 1, sum.transfers)
            rs:close()
            for _, s in ipairs(stores) do s:close() end
        end)
    end)
end)
