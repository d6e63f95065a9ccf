-- The engine (lua/ron/ledger/ledger.lua) on a real PostgreSQL, inside the host (ctest
-- lua-ledger-engine-pg-host: `ron-accounting run spec/run-busted.lua
-- spec/ron/ledger/ledger_pg_host_spec.lua`), kuatia's concurrency tests made ours (LED-36):
--   - two commits racing for the same postings: exactly one wins;
--   - many commits racing a capped floor: the floor holds, exactly as many as fit commit;
--   - replays, identical (the first outcome) and altered (Conflict), also concurrently;
--   - kill -9 of a committing process (tests/ledger/ledger-kill-child.lua, three sagas in
--     flight) at a random moment, RON_LEDGER_KILLS times (20 here; `make soak-ledger`: 500),
--     each followed by recover() and every invariant of spec/ron/ledger/sim.lua (balances
--     recomputed from the postings, floors, no posting consumed twice, nothing held).
-- Under plain busted (no host) it is pending.
local S = require("support")

if not S.needs_host("ledger engine on PostgreSQL", "lua-ledger-engine-pg-host") then return end

local uv = require("luv")
local task = require("ron.base.task")
local store = require("ron.ledger.store")
local L = require("ron.ledger.ledger")
local sim = require("ron.ledger.sim")

local KILLS = tonumber(os.getenv("RON_LEDGER_KILLS") or "") or 20
local SEED = tonumber(os.getenv("RON_LEDGER_SEED") or "") or 20261125

local USD = { code = "USD", scale = 2 }
local EXT, A, B, C, K = ("E"):rep(16), ("A"):rep(16), ("B"):rep(16), ("C"):rep(16), ("K"):rep(16)

local in_task, concurrent = S.in_task, S.concurrent

S.describe_pg("ledger engine on a real PostgreSQL", function(pg)
    local n = 0

    setup(function()
        print(string.format("ledger pg: %s, seed %d, %d kills", pg.cluster.conninfo, SEED,
                            KILLS))
    end)

    local function open_store(schema, conns, node)
        return assert(S.pg_store(pg, { schema = schema, connections = conns or 4,
                                       connect_timeout_ms = 20000, query_timeout_ms = 20000,
                                       node = node }))
    end
    local function fresh()
        n = n + 1
        local schema = "engine_" .. n
        return open_store(schema), schema
    end
    local function ledger_on(s, node)
        return L.new { store = s, node = node, nonce = node .. n,
                       pause = function(i) task.sleep(math.min(1 + i, 10)) end }
    end
    local function accounts(led)
        assert(led:create_account { id = EXT, policy = "uncapped" })
        for _, id in ipairs { A, B, C } do assert(led:create_account { id = id }) end
        assert(led:create_account { id = K, policy = "capped", floor = -100 })
    end
    local function mv(from, to, amount) return { from = from, to = to, asset = USD, amount = amount } end
    local function verified(s)
        local ok, err = sim.verify(s, "main")
        assert(ok, err)
    end
    -- Drives an answer to its final outcome: retries while it is Unavailable.
    local function settle(led, req)
        for _ = 1, 200 do
            local r, err, code = led:commit(req)
            if r or not L.RETRY[code] then return r, err, code end
            task.sleep(5)
        end
        error("never settled: " .. req.intent)
    end

    it("ron.ledger.exporter: two put_many calls at once take turns, both answered (LED-64)",
       function()
        in_task(function()
            local s = fresh()
            local acct = require("ron.accounting")
            local lexp = require("ron.ledger.exporter")
            local card = assert(require("ron.ledger.rate").new({
                version = "spec.1", currency = USD, period = "month",
                dimensions = { bytes = { price = 1 } } }, "spec card"))
            local T0 = 1700000000 - 1700000000 % 3600
            local m = assert(acct.open { capacity_rows = 4096, shards = 4, window_len_s = 60,
                                         host = "spec", clock = function() return T0 + 5 end })
            for t = 1, 8 do
                assert(m:record(("00000000-0000-4000-8000-%012x"):format(t), "s", "bytes", 1000))
            end
            local w = assert(m:rollover(T0 + 60))
            m:close()
            assert.equal(8, #w)
            local e = assert(lexp.new { store = s, card = card, node = "spec", book = "main" })
            assert(e:ready())
            local a, b = {}, {}
            for i, sl in ipairs(w) do
                if i <= 4 then a[#a + 1] = sl else b[#b + 1] = sl end
            end
            local out = concurrent {
                function() return e:put_many(a) end,
                function() return e:put_many(b) end,
            }
            for k = 1, 2 do
                assert.equal(4, #out[k][1])
                for _, r in ipairs(out[k][1]) do assert.equal("ok", r[1], tostring(r[2])) end
            end
            -- the second call found the first running and waited for it
            assert.equal(1, e.put_many_waited)
            assert.equal(1, e.last_lanes) -- 4 slices: one lane (LED-66: lanes of >= 128)
            -- answered again: every slice a dup, one call at a time as well
            out = concurrent { function() return e:put_many(b) end }
            for _, r in ipairs(out[1][1]) do assert.equal("dup", r[1], tostring(r[2])) end
            -- lanes of at least lane_min slices, at most parallel of them (LED-66)
            local e2 = assert(lexp.new { store = s, card = card, node = "spec", book = "main",
                                         lane_min = 2, parallel = 3 })
            assert(e2:ready())
            out = concurrent { function() return e2:put_many(w) end }
            for _, r in ipairs(out[1][1]) do assert.equal("dup", r[1], tostring(r[2])) end
            assert.equal(3, e2.last_lanes) -- 8 slices of 8 tenants: min(3, 8 / 2)
            out = concurrent { function() return e2:put_many(a) end }
            assert.equal(2, e2.last_lanes) -- 4 slices: 4 / 2
            e2:close()
            -- (sim.verify knows transfer events only; the rated feed also has shortfalls:
            -- the exporter spec runs ron.ledger.verify on put_many's histories)
            e:close()
            s:close()
        end)
    end)

    -- Ten rounds of two ledgers on their own connections (intents px.., py..) racing for
    -- A's one posting of 100, deposited each round: round(r, lx, ly) -> whether x and y
    -- each settled; exactly one does, and A ends at 0. -> the store, the setup ledger,
    -- the wins of x and of y.
    local function race(px, py, round)
        local s, schema = fresh()
        local led = ledger_on(s, "setup")
        accounts(led)
        local s2, s3 = open_store(schema, 2), open_store(schema, 2)
        local wins = { 0, 0 }
        for r = 1, 10 do
            assert(led:commit { intent = "d" .. r, movements = { mv(EXT, A, 100) } })
            local rx, ry = round(r, ledger_on(s2, px .. r), ledger_on(s3, py .. r))
            assert.is_true((rx and 1 or 0) + (ry and 1 or 0) == 1, "round " .. r)
            wins[rx and 1 or 2] = wins[rx and 1 or 2] + 1
            assert.equal(0, led:balance(A, USD))
        end
        s2:close(); s3:close()
        return s, led, wins
    end

    it("two commits racing for the same postings: exactly one wins", function()
        in_task(function()
            local s, led, wins = race("x", "y", function(round, lx, ly)
                local out = concurrent {
                    function() return lx:commit { intent = "x" .. round,
                                                  movements = { mv(A, B, 100) } } end,
                    function() return ly:commit { intent = "y" .. round,
                                                  movements = { mv(A, C, 100) } } end,
                }
                local ok = (out[1][1] and 1 or 0) + (out[2][1] and 1 or 0)
                assert.is_true(ok <= 1, "both won round " .. round)
                -- the loser (or both, Unavailable while the other was in flight) settles
                return settle(lx, { intent = "x" .. round, movements = { mv(A, B, 100) } }),
                       settle(ly, { intent = "y" .. round, movements = { mv(A, C, 100) } })
            end)
            assert.equal(100 * wins[1], led:balance(B, USD))
            assert.equal(100 * wins[2], led:balance(C, USD))
            verified(s)
            print(string.format("ledger pg race: B won %d, C won %d of 10", wins[1], wins[2]))
            s:close()
        end)
    end)

    it("commit_many racing a commit for the same posting: exactly one wins (LED-54)",
       function()
        in_task(function()
            local s, led, wins = race("bx", "by", function(round, lx, ly)
                -- A holds exactly one posting of 100: the batch's second request and the
                -- single commit both want all of it
                local batch = {
                    { intent = "bx" .. round .. ".1", movements = { mv(EXT, C, 5) } },
                    { intent = "bx" .. round .. ".2", movements = { mv(A, B, 100) } },
                    { intent = "bx" .. round .. ".3", movements = { mv(EXT, B, 1) } },
                }
                local single = { intent = "by" .. round, movements = { mv(A, C, 100) } }
                local out = concurrent {
                    function() return lx:commit_many(batch) end,
                    function() return ly:commit(single) end,
                }
                local res = out[1][1]
                assert.truthy(res[1][1], "round " .. round .. ": " .. tostring(res[1][2]))
                assert.truthy(res[3][1], "round " .. round .. ": " .. tostring(res[3][2]))
                local got = (res[2][1] and 1 or 0) + (out[2][1] and 1 or 0)
                assert.is_true(got <= 1, "both won round " .. round)
                -- never InsufficientFunds for a race: the loser is Unavailable or settles
                -- on the state the winner left (then InsufficientFunds is the truth)
                local rb, rs = settle(lx, batch[2]), settle(ly, single)
                -- a batch's writes are phases, each one transaction in one round trip: the
                -- one-transaction batch's one (LED-74), or, where a guard of it missed (the
                -- single commit took A's posting), the saga's claims, reserve and finalize
                -- (LED-67), with the last step's reads in the reserve phase (issue 25)
                local st = lx.stats
                if (st.atomic_batches or 0) == 0 then
                    assert.is_true((st.phases or 0) >= 3, "round " .. round)
                    assert.is_true((st.last_reads_in_reserve or 0) >= 1, "round " .. round)
                end
                -- the plan's reads at once (LED-62)
                assert.is_true((st.reads_at_once or 0) >= 1, "round " .. round)
                return rb, rs
            end)
            assert.equal(100 * wins[1] + 10, led:balance(B, USD))
            assert.equal(100 * wins[2] + 50, led:balance(C, USD))
            verified(s)
            print(string.format("ledger pg batch race: the batch won %d, the commit %d of 10",
                                wins[1], wins[2]))
            s:close()
        end)
    end)

    it("many commits racing a capped floor: the floor holds (LED-29)", function()
        in_task(function()
            local s, schema = fresh()
            local led = ledger_on(s, "setup")
            accounts(led)
            local stores = { s, open_store(schema, 4), open_store(schema, 4) }
            local fns = {}
            for i = 1, 12 do
                local l = ledger_on(stores[i % 3 + 1], "k" .. i)
                fns[i] = function()
                    return settle(l, { intent = "k" .. i, movements = { mv(K, B, 30) } })
                end
            end
            local out = concurrent(fns)
            local committed, refused = 0, 0
            for i = 1, 12 do
                if out[i][1] then committed = committed + 1
                else
                    assert.equal(L.ERR.InsufficientFunds, out[i][3], out[i][2])
                    refused = refused + 1
                end
            end
            assert.equal(3, committed) -- -90 fits the floor of -100, -120 does not
            assert.equal(-90, led:balance(K, USD))
            verified(s)
            stores[2]:close(); stores[3]:close(); s:close()
        end)
    end)

    it("replays: identical -> the first outcome, altered -> Conflict, concurrent -> once",
       function()
        in_task(function()
            local s, schema = fresh()
            local led = ledger_on(s, "setup")
            accounts(led)
            local r1 = assert(led:commit { intent = "dep", movements = { mv(EXT, A, 50) } })
            local r2 = assert(led:commit { intent = "dep", movements = { mv(EXT, A, 50) } })
            assert.is_true(r2.replayed); assert.equal(r1.transfer_id, r2.transfer_id)
            local _, _, code = led:commit { intent = "dep", movements = { mv(EXT, A, 51) } }
            assert.equal(L.ERR.Conflict, code)
            local _, e1, c1 = led:commit { intent = "big", movements = { mv(A, B, 500) } }
            local _, e2, c2 = led:commit { intent = "big", movements = { mv(A, B, 500) } }
            assert.equal(L.ERR.InsufficientFunds, c1); assert.equal(c1, c2); assert.equal(e1, e2)
            -- eight processes' worth of ledgers replaying one intent at once
            local s2 = open_store(schema, 4)
            local fns = {}
            for i = 1, 8 do
                local l = ledger_on(i % 2 == 0 and s or s2, "r" .. i)
                fns[i] = function()
                    return settle(l, { intent = "same", movements = { mv(A, C, 20) } })
                end
            end
            local out = concurrent(fns)
            local tid = out[1][1].transfer_id
            for i = 1, 8 do assert.equal(tid, out[i][1].transfer_id) end
            assert.equal(30, led:balance(A, USD)); assert.equal(20, led:balance(C, USD))
            verified(s)
            s2:close(); s:close()
        end)
    end)

    it("LED-65: recover() ends what another process of its node still runs on the server, "
       .. "and nothing of another node", function()
        in_task(function()
            local s, schema = fresh()
            -- "the dead process": a statement of node v still running on the server
            local dead = open_store(schema, 1, "v")
            local other = open_store(schema, 1, "w")
            local function running(st)
                local rows = assert(s.drv.db:query("SELECT count(*) AS n FROM pg_stat_activity "
                    .. "WHERE application_name = '" .. st.fence_me .. "' AND state = 'active'"))
                return tonumber(rows[1].n) == 1
            end
            local out = concurrent {
                function() return dead.drv.db:query("SELECT pg_sleep(60)") end,
                function() return other.drv.db:query("SELECT pg_sleep(1)") end,
                function()
                    for _ = 1, 500 do
                        if running(dead) and running(other) then break end
                        task.sleep(10)
                    end
                    assert.is_true(running(dead) and running(other))
                    local t0 = uv.now()
                    local heir_store = open_store(schema, 2, "v")
                    local heir = ledger_on(heir_store, "v")
                    assert.same({}, assert(heir:recover()))
                    assert.equal(1, heir.stats.fenced)
                    assert.is_false(running(dead))
                    assert.is_true(uv.now() - t0 < 30000)
                    -- again: nothing of v left to end; an engine of another node on this
                    -- store fences nothing (the store is v's)
                    assert.equal(0, assert(heir_store:fence()))
                    local led_w = ledger_on(heir_store, "w")
                    assert(led_w:recover())
                    assert.is_nil(led_w.stats.fenced)
                    heir_store:close()
                    return true
                end,
            }
            -- the dead one's statement was ended, not answered; w's was not touched
            assert.is_nil(out[1][1])
            assert.truthy(out[2][1], tostring(out[2][2]))
            assert.is_true(out[3][1])
            -- a store without a node has no fence; node and db together are misuse
            assert.is_nil(s.fence)
            assert.has_error(function()
                store.open { backend = "postgres", db = s.drv.db, node = "v" }
            end)
            assert.has_error(function()
                S.pg_store(pg, { node = "v", fence_timeout_ms = -1 })
            end)
            dead:close(); other:close(); s:close()
        end)
    end)

    it(string.format("kill -9 mid-commit, %d times: recover() and every invariant", KILLS),
       function()
        in_task(function()
            local s, schema = fresh()
            local led = ledger_on(s, "setup")
            accounts(led)
            local bin = assert(os.getenv("RA_BIN"), "RA_BIN")
            local child = S.abs_root() .. "tests/ledger/ledger-kill-child.lua"
            local x = SEED
            local function rnd(k)
                x = (x * 16807) % 2147483647
                return x % k
            end
            local t0, before = uv.hrtime(), 0
            local mid, mid_batch, fenced = 0, 0, 0
            for i = 1, KILLS do
                local out = uv.new_pipe(false)
                local ready = task.channel(1, "ready")
                local exited = task.channel(1, "exited")
                local handle
                handle = uv.spawn(bin, {
                    args = { "run", child, "--conninfo", pg.cluster.conninfo,
                             "--schema", schema,
                             "--node", "victim", "--seed", tostring(SEED + i) },
                    stdio = { nil, out, 2 },
                }, function(code, signal)
                    handle:close()
                    exited:try_send({ code, signal })
                end)
                assert(handle, "spawn " .. bin)
                out:read_start(function(err, data)
                    if data and data:find("ready", 1, true) then ready:try_send(true) end
                    if err or not data then out:close() end
                end)
                assert(ready:recv(30000), "the child never committed (iteration " .. i .. ")")
                task.sleep(rnd(120))
                uv.process_kill(handle, "sigkill")
                local st = exited:recv(30000)
                assert(st and st[2] == 9, "the child was not killed by SIGKILL: " ..
                       tostring(st and st[1]) .. "/" .. tostring(st and st[2]))
                if not out:is_closing() then out:close() end
                -- a new process of the same node finishes what the dead one left: its
                -- store carries the node, so recover() first ends the dead process's
                -- statements still running on the server (LED-65: fencing; without it a
                -- late save_saga of the dead one could land after recover())
                local hs = open_store(schema, 2, "victim")
                local pending = s:list_pending_sagas("victim")
                if #pending > 0 then mid = mid + 1 end
                for _, sg in ipairs(pending) do
                    -- a batch's record (the child's last task commits batches, LED-53)
                    if sg.data and sg.data:find("batch", 1, true) then
                        mid_batch = mid_batch + 1
                        break
                    end
                end
                local heir = ledger_on(hs, "victim")
                local rep = assert(heir:recover())
                local others = assert(s.drv.db:query("SELECT count(*) AS n FROM "
                    .. "pg_stat_activity WHERE application_name LIKE '" .. hs.fence_tag
                    .. "%' AND application_name <> '" .. hs.fence_me .. "'"))
                assert.equal(0, tonumber(others[1].n)) -- fenced
                fenced = fenced + (heir.stats.fenced or 0)
                for _, r in ipairs(rep) do
                    assert(r.ok or not L.RETRY[r.code], "recover: " .. tostring(r.err))
                end
                local left = s:list_pending_sagas()
                if #left > 0 then -- say what was left and what recover() answered
                    local why = {}
                    for _, sg in ipairs(left) do
                        why[#why + 1] = string.format("saga %s node %s phase %s", tostring(sg.id),
                                                      tostring(sg.node), tostring(sg.phase))
                    end
                    for _, r in ipairs(rep) do
                        why[#why + 1] = string.format("recovered %s %s ok=%s %s %s", tostring(r.id),
                            tostring(r.phase), tostring(r.ok), tostring(r.code), tostring(r.err))
                    end
                    print("kill " .. i .. ": " .. table.concat(why, "; "))
                end
                assert.equal(0, #left)
                local ok, err = sim.verify(s, "main")
                assert(ok, string.format("seed %d, kill %d: %s", SEED + i, i, tostring(err)))
                local now = s:head_seq("main")
                assert.is_true(now >= before)
                before = now
                hs:close()
            end
            local dt = (uv.hrtime() - t0) / 1e9
            print(string.format("ledger pg kill -9: %d kills (%d mid-saga, %d with a batch's "
                                .. "record; %d backends of the dead child ended by recover()) "
                                .. "in %.1f s, %d transfers committed and verified",
                                KILLS, mid, mid_batch, fenced, dt, before))
            assert.is_true(mid > 0, "no kill landed mid-saga")
            s:close()
        end)
    end)
end)
