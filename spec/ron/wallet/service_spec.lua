-- ron.wallet.service inside the host (ctest lua-wallet-host): the routes through the
-- daemon's HTTP server (real sockets, port 0) over the ledger engine on an offloaded SQLite
-- store in a temp file. WLT-3..WLT-8: tokens and ownership; idempotency and nonces stored in
-- the ledger (replays byte-identical, also after the wallet and its store are reopened);
-- nonce atomicity under concurrent requests; backpressure with exact counters; a stalled
-- ledger (a gate in front of the store): timeouts, readiness, POST 503, GET 200 from the
-- cache, drain after; read-your-writes with min_seq and the measured invalidation lag.
local S = require("support")

if not S.needs_host("ron.wallet.service", "lua-wallet-host") then return end

local uv = require("luv")
local cjson = require("cjson.safe")
local acct = require("ron.accounting")
local store_mod = require("ron.ledger.store")
local service = require("ron.wallet.service")
local F = dofile(S.root .. "spec/ron/wallet/fixture.lua")
local _ -- results a case does not read

local OP, TA, TB, A, B = F.OP, F.TA, F.TB, F.A, F.B

print("wallet service_spec: math.randomseed(17)")
math.randomseed(17)

local post, get = S.http_post, S.http_get
local transfer, issue, open, run, setup_accounts = F.transfer, F.issue, F.open, F.run,
                                                   F.setup_accounts

-- Inside a task: a wallet on a fresh store whose ledger sits behind a gate (F.open), with
-- the spec's accounts set up. -> ctx, gate
local function gated(task, opts)
    local gate = { closed = false }
    local ctx = open(task, S.tmpname(".db"), opts, gate)
    setup_accounts(task, ctx.port)
    return ctx, gate
end

local function restart_case(path)
    return function()
        local saved = {}
        run(function(task)
            local ctx = open(task, path)
            local port = ctx.port
            setup_accounts(task, port)
            local st, _, body = post(task, port, "/v1/issue", OP, issue(A, 100, 1), "i1")
            assert.equal(201, st, body)
            saved.i1 = body
            st, _, body = post(task, port, "/v1/transfer", TA, transfer(A, B, 500, 7), "big")
            assert.equal(422, st, body)
            assert.truthy(body:find('"code":"insufficient_funds"', 1, true))
            saved.big = body
            -- the rejected nonce is consumed: another body with nonce 7 is nonce_used
            st, _, body = post(task, port, "/v1/transfer", TA, transfer(A, B, 1, 7), "small")
            assert.equal(409, st, body)
            assert.truthy(body:find('"code":"nonce_used"', 1, true))
            assert.truthy(body:find('"original":{"status":"rejected","code":"insufficient_funds"',
                                    1, true), body)
            st, _, body = post(task, port, "/v1/transfer", TA, transfer(A, B, 40, 8), "ok8")
            assert.equal(201, st, body)
            saved.ok8 = body
            ctx.close()
        end)
        run(function(task)
            -- a new wallet over the same file: nothing in RAM survived
            local ctx = open(task, path)
            local port = ctx.port
            local st, h, body = post(task, port, "/v1/issue", OP, issue(A, 100, 1), "i1")
            assert.equal(201, st)
            assert.equal(saved.i1, body)
            assert.equal("true", h["idempotent-replayed"])
            st, h, body = post(task, port, "/v1/transfer", TA, transfer(A, B, 500, 7), "big")
            assert.equal(422, st)
            assert.equal(saved.big, body)
            assert.equal("true", h["idempotent-replayed"])
            st, _, body = post(task, port, "/v1/transfer", TA, transfer(A, B, 40, 8), "ok8")
            assert.equal(saved.ok8, body)
            st, _, body = post(task, port, "/v1/transfer", TA, transfer(A, B, 41, 8), "other8")
            assert.equal(409, st)
            assert.truthy(body:find('"original":{"status":"committed"', 1, true), body)
            st, _, body = get(task, port, "/v1/accounts/" .. A .. "/balance?asset=USD", TA)
            assert.equal(60, cjson.decode(body).balance)
            ctx.close()
        end)
    end
end

describe("ron.wallet.service (inside the host)", function()
    it("WLT-3/WLT-4/WLT-6: issue, transfer, replays, ownership, balance, statement", function()
        run(function(task)
            local ctx = open(task, S.tmpname(".db"))
            local port = ctx.port
            setup_accounts(task, port)
            -- issue needs the operator, a key, a strict body
            local st, h, body = post(task, port, "/v1/issue", TA, issue(A, 1000, 1), "i1")
            assert.equal(403, st, body)
            assert.equal("application/problem+json", h["content-type"])
            st, _, body = post(task, port, "/v1/issue", OP, issue(A, 1000, 1))
            assert.equal(400, st)
            assert.truthy(body:find('"code":"missing_idempotency_key"', 1, true))
            st, _, body = post(task, port, "/v1/issue", OP, issue(A, 1000, 1):sub(1, -2) ..
                               ',"x":1}', "i1")
            assert.equal(400, st)
            assert.truthy(body:find('"code":"unknown_field"', 1, true), body)
            st, _, body = post(task, port, "/v1/issue", nil, issue(A, 1000, 1), "i1")
            assert.equal(401, st)
            local st1, h1, b1 = post(task, port, "/v1/issue", OP, issue(A, 1000, 1), "i1")
            assert.equal(201, st1, b1)
            assert.is_nil(h1["idempotent-replayed"])
            local r1 = cjson.decode(b1)
            assert.equal(1000, r1.amount)
            assert.equal(64, #r1.transfer_id)
            -- the replay: same status, same bytes, marked; member order of the body is free
            local st2, h2, b2 = post(task, port, "/v1/issue", OP,
                '{"nonce":1,"amount":1000,"asset":"USD","to":"' .. A .. '"}', "i1")
            assert.equal(201, st2)
            assert.equal(b1, b2)
            assert.equal("true", h2["idempotent-replayed"])
            assert.equal(h1["content-type"], h2["content-type"])
            -- (from the answer cache: off the Lua heap, ron.base.blobcache)
            assert.equal(1, ctx.w.m.replays)
            assert.is_true(ctx.w.answers:count() >= 1)
            -- same key, another body: 422
            st, _, body = post(task, port, "/v1/issue", OP, issue(A, 999, 1), "i1")
            assert.equal(422, st)
            assert.truthy(body:find('"code":"idempotency_mismatch"', 1, true))
            -- a grant too
            st, _, body = post(task, port, "/v1/issue", OP, issue(A, 50, 2, "grant"), "i2")
            assert.equal(201, st, body)
            -- A moves its own money only
            st = post(task, port, "/v1/transfer", TB, transfer(A, B, 10, 1), "t0")
            assert.equal(403, st)
            st, _, body = post(task, port, "/v1/transfer", TA, transfer(A, B, 300, 1), "t1")
            assert.equal(201, st, body)
            local rt = cjson.decode(body)
            -- read-your-writes: min_seq = the receipt's event
            st, h, body = get(task, port, "/v1/accounts/" .. A .. "/balance?asset=USD&min_seq=" ..
                              rt.event_seq, TA)
            assert.equal(200, st, body)
            local bal = cjson.decode(body)
            assert.equal(750, bal.balance)
            assert.is_true(bal.ledger_seq >= rt.event_seq)
            assert.equal(tostring(bal.ledger_seq), h["x-ledger-seq"])
            assert.truthy(tonumber(h["x-staleness-ms"]))
            st = get(task, port, "/v1/accounts/" .. A .. "/balance?asset=USD", TB)
            assert.equal(403, st)
            st, _, body = get(task, port, "/v1/accounts/" .. B .. "/balance?asset=USD", TB)
            assert.equal(200, st)
            assert.equal(300, cjson.decode(body).balance)
            -- a cached read, then a write elsewhere invalidates it through the feed
            st, _, body = get(task, port, "/v1/accounts/" .. B .. "/balance?asset=USD", OP)
            assert.equal(300, cjson.decode(body).balance)
            st, _, body = post(task, port, "/v1/transfer", TA, transfer(A, B, 5, 2), "t2")
            local r2 = cjson.decode(body)
            st, _, body = get(task, port, "/v1/accounts/" .. B .. "/balance?asset=USD&min_seq=" ..
                              r2.event_seq, TB)
            assert.equal(305, cjson.decode(body).balance)
            -- burn
            st, _, body = post(task, port, "/v1/burn", TB, '{"from":"' .. B ..
                               '","asset":"USD","amount":5,"nonce":3}', "b1")
            assert.equal(201, st, body)
            -- the statement: A's debit consumed the top-up's posting
            st, _, body = get(task, port, "/v1/accounts/" .. A .. "/statement?asset=USD", TA)
            assert.equal(200, st, body)
            local stm = assert(cjson.decode(body), body)
            local found = false
            for _, e in ipairs(stm.entries) do
                for _, c in ipairs(e.consumed) do
                    if c.funded_by == r1.transfer_id then
                        assert.equal("top_up", c.funded_by_kind)
                        found = true
                    end
                end
            end
            assert.is_true(found, body)
            -- metrics
            st, _, body = get(task, port, "/metrics")
            assert.equal(200, st)
            assert.truthy(body:find('wallet_queue_depth{queue="commit"} 0', 1, true))
            assert.truthy(body:find("wallet_invalidation_lag_seconds_count", 1, true))
            print(string.format("wallet: invalidation lag max %d ms over %d events",
                                ctx.w.cache.lag_max, ctx.w.cache.lag_count))
            -- measured and printed (the SLO is 250 ms); the bound here only catches a feed
            -- that stopped invalidating (timing is a benchmark's business, not a test's)
            assert.is_true(ctx.w.cache.lag_count >= 1)
            assert.is_true(ctx.w.cache.lag_max <= 2000)
            ctx.close()
        end)
    end)

    it("the statement says which top-up or grant paid which usage slice", function()
        run(function(task)
            local usage = require("ron.ledger.usage")
            local dry = {}
            local ctx = open(task, S.tmpname(".db"), { on_dry = function(t, amount, asset)
                dry[#dry + 1] = { t, amount, asset }
            end })
            local port = ctx.port
            -- the tenant's usage wallet (the account the rater charges), as a wallet UUID
            local tenant = S.TENANT_A
            local wid = usage.account("wallet", tenant)
            local wtext = require("ron.wallet.dto").uuid_text(wid)
            local st, _, body = post(task, port, "/v1/accounts", OP, '{"account":"' .. wtext .. '"}')
            assert.equal(200, st, body)
            st, _, body = post(task, port, "/v1/issue", OP, issue(wtext, 100, 1), "u1")
            assert.equal(201, st, body)
            local top = cjson.decode(body).transfer_id
            st, _, body = post(task, port, "/v1/issue", OP, issue(wtext, 30, 2, "grant"), "u2")
            local grant = cjson.decode(body).transfer_id
            -- a slice's charge as the rater commits it: wallet -> revenue, metadata citing it
            local revenue = usage.account("revenue")
            assert(ctx.led:create_account { id = revenue, policy = "uncapped" })
            local meta = usage.encode_metadata {
                tenant = tenant, dimension = "requests", seq = 7, window_start_s = 1700000000,
                window_len_s = 300, b3 = string.rep("\171", 32), prev_b3 = string.rep("\0", 32),
                version = "acme-1", period = "month", quantity = 5000, used = 0,
                used_after = 5000, amount = 110 }
            local r = assert(ctx.led:commit { intent = "slice-7", metadata = meta,
                movements = { { from = wid, to = revenue, amount = 110,
                                asset = { code = "USD", scale = 2 } } } })
            -- the rater's shortfall event: the wallet publishes that the tenant ran dry (WLT-9)
            assert.equal(1, ctx.store:append_event("wallet", r.transfer_id, "usage.shortfall",
                                                   "tenant=" .. tenant .. " amount=25 asset=USD"))
            assert(S.eventually(task, function() return #dry == 1 end, 5000))
            assert.same({ tenant, 25, "USD" }, dry[1])
            local _, _, m = get(task, port, "/metrics")
            assert.truthy(m:find('wallet_dry_total{asset="USD"} 1', 1, true))
            st, _, body = get(task, port, "/v1/accounts/" .. wtext .. "/statement?asset=USD", OP)
            assert.equal(200, st, body)
            local stm = assert(cjson.decode(body), body)
            local e = stm.entries[1] -- newest first: the usage charge
            assert.equal("usage", e.kind)
            assert.equal(-110, e.delta)
            assert.equal(7, e.metadata.slice.seq)
            assert.equal("requests", e.metadata.slice.dimension)
            assert.equal(string.rep("ab", 32), e.metadata.slice.b3)
            assert.equal("acme-1", e.metadata.slice.rate_card)
            local paid = {}
            for _, c in ipairs(e.consumed) do paid[c.funded_by] = c.funded_by_kind end
            assert.equal("top_up", paid[top])
            assert.equal("grant", paid[grant])
            assert.equal(2, #e.consumed)
            ctx.close()
        end)
    end)

    it("WLT-4/WLT-5: nonces and keys survive a restart; a rejection consumes its nonce",
       restart_case(S.tmpname(".db")))

    it("WLT-5: concurrent requests with one nonce: exactly one commits", function()
        run(function(task)
            local ctx = open(task, S.tmpname(".db"))
            local port = ctx.port
            setup_accounts(task, port)
            assert.equal(201, (post(task, port, "/v1/issue", OP, issue(A, 1000, 1), "i1")))
            local N = 16
            local codes, hs = {}, {}
            for i = 1, N do
                hs[i] = task.spawn("client", function()
                    local st, _, body = post(task, port, "/v1/transfer", TA,
                                             transfer(A, B, i, 42), "k" .. i)
                    codes[i] = st
                    return st, body
                end)
            end
            for i = 1, N do assert(hs[i]:join(20000)) end
            local ok = 0
            for i = 1, N do
                if codes[i] == 201 then ok = ok + 1 else assert.equal(409, codes[i]) end
            end
            assert.equal(1, ok)
            local st, _, body = get(task, port, "/v1/accounts/" .. B .. "/balance?asset=USD", TB)
            assert.equal(200, st)
            local b = cjson.decode(body).balance
            assert.is_true(b >= 1 and b <= N)
            ctx.close()
        end)
    end)

    it("WLT-7: a full commit queue answers 429 with Retry-After; counters exact", function()
        run(function(task)
            local ctx, gate = gated(task, { queue_capacity = 4, workers = 1,
                                            commit_timeout_ms = 10000,
                                            stall_ms = 60000 })
            local port = ctx.port
            assert.equal(201, (post(task, port, "/v1/issue", OP, issue(A, 1000, 1), "i1")))
            gate.closed = true
            local codes, hs = {}, {}
            hs[1] = task.spawn("client", function()
                codes[1] = post(task, port, "/v1/transfer", TA, transfer(A, B, 1, 100), "q1")
                return true
            end)
            assert(S.eventually(task, function() return ctx.w.m.worker_inflight == 1 end, 5000))
            for i = 2, 10 do
                hs[i] = task.spawn("client", function()
                    local st, h = post(task, port, "/v1/transfer", TA,
                                       transfer(A, B, 1, 100 + i), "q" .. i)
                    codes[i] = st
                    if st == 429 then assert.equal("1", h["retry-after"]) end
                    return true
                end)
            end
            assert(S.eventually(task, function()
                return ctx.w.m.busy.transfer + ctx.w.queue:depth() == 9
            end, 5000))
            assert.equal(4, ctx.w.queue:depth())
            assert.equal(5, ctx.w.m.busy.transfer)
            local _, _, m = get(task, port, "/metrics")
            assert.truthy(m:find('wallet_busy_rejections_total{endpoint="transfer"} 5', 1, true))
            assert.truthy(m:find('wallet_queue_depth{queue="commit"} 4', 1, true))
            gate.closed = false
            for i = 1, 10 do assert(hs[i]:join(20000)) end
            local n201, n429 = 0, 0
            for i = 1, 10 do
                if codes[i] == 201 then n201 = n201 + 1 elseif codes[i] == 429 then n429 = n429 + 1 end
            end
            assert.equal(5, n201)
            assert.equal(5, n429)
            ctx.close()
        end)
    end)

    it("WLT-8: a stalled ledger: timeout 503, readyz flips, POST 503, GET 200 cached; drains",
       function()
        run(function(task)
            local ctx, gate = gated(task, { commit_timeout_ms = 200, stall_ms = 300,
                                            breaker_threshold = 1,
                                            breaker_open_ms = 1000 })
            local port = ctx.port
            -- (under load the setup commit may pass the 200 ms timeout itself and open the
            -- breaker: the same key asks again until its one outcome is there)
            local st, _, body
            assert(S.eventually(task, function()
                st, _, body = post(task, port, "/v1/issue", OP, issue(A, 1000, 1), "i1")
                return st == 201
            end, 10000))
            local seq = cjson.decode(body).event_seq
            assert(S.eventually(task, function() return ctx.w.cache.seq >= seq end, 5000))
            -- until A's balance is in the cache (a read racing the feed's invalidation of
            -- the issue is not stored)
            assert(S.eventually(task, function()
                st, _, body = get(task, port, "/v1/accounts/" .. A .. "/balance?asset=USD", TA)
                return ctx.w.cache:get(ctx.w.tokens[acct.b3hex(TA)].account, "USD") ~= nil
            end, 5000))
            assert.equal(1000, cjson.decode(body).balance)
            assert(S.eventually(task, function()
                return (get(task, port, "/readyz")) == 200
            end, 5000))
            local timeouts0 = ctx.w.m.io_timeouts.commit or 0
            gate.closed = true
            local t0 = uv.now()
            st, _, body = post(task, port, "/v1/transfer", TA, transfer(A, B, 10, 5), "s1")
            assert.equal(503, st)
            assert.truthy(body:find('"code":"ledger_timeout"', 1, true), body)
            assert.is_true(uv.now() - t0 < 1000)
            assert.equal(timeouts0 + 1, ctx.w.m.io_timeouts.commit)
            -- still in flight: the same request is 409, not a second commit
            st, _, body = post(task, port, "/v1/transfer", TA, transfer(A, B, 10, 5), "s1")
            assert.equal(409, st)
            assert.truthy(body:find('"code":"in_flight"', 1, true))
            local flipped = S.eventually(task, function()
                return (get(task, port, "/readyz")) == 503
            end, 2000)
            assert.is_true(flipped)
            print(string.format("wallet: readyz flipped %d ms after the stall", uv.now() - t0))
            -- the breaker is open (threshold 1): POSTs fail fast
            st, _, body = post(task, port, "/v1/transfer", TA, transfer(A, B, 10, 6), "s2")
            assert.equal(503, st)
            assert.truthy(body:find('"code":"ledger_unavailable"', 1, true), body)
            -- a balance the cache lacks needs the ledger: 503 in time, not a hang
            st, _, body = get(task, port, "/v1/accounts/" .. B .. "/balance?asset=USD", TB)
            assert.equal(503, st)
            assert.truthy(body:find('"code":"ledger_timeout"', 1, true), body)
            -- GET balance from the cache, with its staleness
            local h
            st, h, body = get(task, port, "/v1/accounts/" .. A .. "/balance?asset=USD", TA)
            assert.equal(200, st)
            assert.equal(1000, cjson.decode(body).balance)
            assert.is_true(tonumber(h["x-staleness-ms"]) >= 200, h["x-staleness-ms"] .. " " .. body)
            -- recovery: the timed-out commit finishes, the feed catches up, ready again
            gate.closed = false
            assert(S.eventually(task, function()
                return (get(task, port, "/readyz")) == 200
            end, 5000))
            assert(S.eventually(task, function() return next(ctx.w.inflight) == nil end, 5000))
            st, h, body = post(task, port, "/v1/transfer", TA, transfer(A, B, 10, 5), "s1")
            assert.equal(201, st, body)
            assert.equal("true", h["idempotent-replayed"])
            st, _, body = get(task, port, "/v1/accounts/" .. A .. "/balance?asset=USD", TA)
            assert.equal(990, cjson.decode(body).balance)
            ctx.close()
        end)
    end)
end)

describe("ron.wallet.service drain (seed 004 §6, §9)", function()
    it("a commit stuck past the drain deadline is aborted; task counters balance", function()
        run(function(task)
            local ctx, gate = gated(task, { commit_timeout_ms = 100,
                                            stall_ms = 60000, workers = 4 })
            local port, w = ctx.port, ctx.w
            -- (the commit timeout is 100 ms for the stuck commit below: under load this one
            -- may pass it too, 503 once in CI; the same key asks again until its one
            -- outcome is there, and every call it started has ended)
            assert(S.eventually(task, function()
                return (post(task, port, "/v1/issue", OP, issue(A, 1000, 1), "i1")) == 201
            end, 10000))
            assert(S.eventually(task, function() return next(w.calls) == nil end, 10000))
            local _, _, m0 = get(task, port, "/metrics")
            assert.truthy(m0:find('wallet_tasks_inflight{kind="worker"} 4', 1, true), m0)
            assert.truthy(m0:find('wallet_tasks_inflight{kind="feed"} 1', 1, true))
            gate.closed = true
            local st, _, body = post(task, port, "/v1/transfer", TA, transfer(A, B, 10, 5), "d1")
            assert.equal(503, st)
            assert.truthy(body:find('"code":"ledger_timeout"', 1, true), body)
            assert.equal(1, next(w.calls) and 1 or 0)
            w:stop()
            local ok, n = w:wait(300)
            assert.is_false(ok)
            -- the stuck commit, and the feed stuck in its poll of the gated store
            assert.is_true(n >= 1)
            assert.equal(1, w.tasks.aborted.call)
            assert.is_nil(next(w.tasks.live))
            for _, k in ipairs(service.TASK_KINDS) do
                assert.equal(w.tasks.spawned[k], w.tasks.finished[k] + w.tasks.aborted[k], k)
            end
            local m = w:metrics_text()
            assert.truthy(m:find('wallet_tasks_aborted_total{kind="call"} 1', 1, true), m)
            assert.truthy(m:find('wallet_tasks_inflight{kind="call"} 0', 1, true), m)
            assert.truthy(m:find('wallet_tasks_spawned_total{kind="worker"} 4', 1, true), m)
            print(string.format("wallet drain: %d task(s) aborted at the deadline", n))
            gate.closed = false
            ctx.close()
        end)
        -- the aborted saga is the next start's: recover() finishes or releases it, and the
        -- same request gets its one outcome
    end)
end)

-- The same restart case on a real PostgreSQL (tests/pg/pg-harness.sh), when the host has it.
S.describe_pg("ron.wallet.service on PostgreSQL", function(pg)
    it("WLT-4/WLT-5: keys and nonces survive a reopen on PostgreSQL", function()
        restart_case(function()
            return store_mod.open { backend = "postgres", conninfo = pg.cluster.conninfo,
                                    schema = "wallet_spec", connections = 4,
                                    connect_timeout_ms = 20000, query_timeout_ms = 20000 }
        end)()
    end)
end)
