-- The wallet's group commit (ron.wallet.committer, issue 25; ctest lua-wallet-host) on
-- SQLite and on PostgreSQL (a server tests/pg/harness.lua starts), through the daemon's HTTP
-- server. A burst is sent while the ledger is stalled (the fixture's gate), each request
-- queued after the one before, so the committer takes them as ONE group in a known order:
--   - every member's answer is the single path's: committed or insufficient_funds exactly as
--     one-by-one commits in queue order decide, event_seq in queue order, replays (in a
--     group too) byte-identical, a used key with another body 422, a used nonce with another
--     body its stored 409 nonce_used, byte-identical to the same request sent alone;
--   - no balance goes negative and money is conserved under concurrent bursts of two payers
--     (random amounts, fixed seed printed);
--   - a group whose store calls fail falls back to the single path: every member answered
--     as alone.
local S = require("support")

if not S.needs_host("ron.wallet group commit", "lua-wallet-host") then return end

local cjson = require("cjson.safe")
local store_mod = require("ron.ledger.store")
local F = dofile(S.root .. "spec/ron/wallet/fixture.lua")

local OP, TA, TB, A, B = F.OP, F.TA, F.TB, F.A, F.B
local post, get = S.http_post, S.http_get
local transfer, issue = F.transfer, F.issue

local WCFG = { workers = 1, idempotency_cache = 0, commit_timeout_ms = 30000 }

local function balance(task, port, id, token)
    local st, _, body = get(task, port, "/v1/accounts/" .. id .. "/balance?asset=USD&min_seq=0",
                            token)
    assert.equal(200, st, body)
    return cjson.decode(body).balance
end

-- settled balances: the feed has applied every commit (the cache may lag a poll)
local function settled(task, ctx, id, token, want)
    local b
    S.eventually(task, function()
        b = balance(task, ctx.port, id, token)
        return b == want
    end, 5000)
    return b
end

local burst = F.burst

local function code_of(body) return (cjson.decode(body) or {}).code end

-- accounts A and B, A funded with a, B with b (when given); then the case's seed, printed
local function funded(task, ctx, a, b, what, seed)
    F.setup_accounts(task, ctx.port)
    assert.equal(201, (post(task, ctx.port, "/v1/issue", OP, issue(A, a, 1), "i1")))
    if b then assert.equal(201, (post(task, ctx.port, "/v1/issue", OP, issue(B, b, 2), "i2"))) end
    print("wallet group_spec: " .. what .. ", math.randomseed(" .. seed .. ")")
    math.randomseed(seed)
end

local function group_answers(open_store)
    F.run(function(task)
        local ctx = F.open(task, open_store, WCFG, { closed = false })
        local port = ctx.port
        funded(task, ctx, 1000, nil, "answers", 2511)
        local reqs, amounts = {}, {}
        for i = 1, 12 do
            amounts[i] = math.random(1, 200)
            reqs[i] = { "/v1/transfer", TA, transfer(A, B, amounts[i], 100 + i), "g" .. i }
        end
        local groups0 = ctx.w.m.groups or 0
        local got = burst(task, ctx, reqs)
        assert.is_true((ctx.w.m.groups or 0) > groups0, "no group was committed")
        -- one by one in queue order: what each must have answered
        local left, last_seq, moved = 1000, 0, 0
        for i, r in ipairs(got) do
            if amounts[i] <= left then
                assert.equal(201, r[1], r[3])
                local seq = cjson.decode(r[3]).event_seq
                assert.is_true(seq > last_seq, "event_seq out of queue order")
                last_seq, left, moved = seq, left - amounts[i], moved + amounts[i]
            else
                assert.equal(422, r[1], r[3])
                assert.equal("insufficient_funds", code_of(r[3]))
            end
        end
        assert.equal(left, settled(task, ctx, A, TA, left))
        assert.equal(moved, settled(task, ctx, B, TB, moved))
        -- replays of g3..g12 (a group too), a used key with another body, a used nonce
        local conflicts = { { "/v1/transfer", TA, transfer(A, B, 7, 301), "g1" },
                            { "/v1/transfer", TA, transfer(A, B, 8, 102), "x2" } }
        local r2 = {}
        for i = 3, 12 do r2[#r2 + 1] = reqs[i] end
        for _, c in ipairs(conflicts) do r2[#r2 + 1] = c end
        groups0 = ctx.w.m.groups
        local again = burst(task, ctx, r2)
        assert.is_true(ctx.w.m.groups > groups0, "the replays were not a group")
        for i = 3, 12 do
            local a = again[i - 2]
            assert.equal(got[i][1], a[1])
            assert.equal(got[i][3], a[3]) -- byte-identical
            assert.equal("true", a[2]["idempotent-replayed"])
        end
        local mm, nu = again[#again - 1], again[#again]
        assert.equal(422, mm[1], mm[3])
        assert.equal("idempotency_mismatch", code_of(mm[3]))
        assert.equal(409, nu[1], nu[3])
        assert.equal("nonce_used", code_of(nu[3]))
        -- the same two alone (the single path): the same bytes
        for k, c in ipairs(conflicts) do
            local st, _, body = post(task, port, c[1], c[2], c[3], c[4])
            assert.equal(again[#again - 2 + k][1], st)
            assert.equal(again[#again - 2 + k][3], body)
        end
        assert.equal(left, settled(task, ctx, A, TA, left))
        ctx.close()
    end)
end

local function no_negative(open_store)
    F.run(function(task)
        -- 48 connections at once from this one peer: above the daemon's default 32
        local ctx = F.open(task, open_store, { workers = 2, commit_timeout_ms = 30000 },
                           { closed = false }, { http = { max_conns_per_peer = 64 } })
        local port = ctx.port
        funded(task, ctx, 300, 300, "no negative balance", 2512)
        local hs, sent = {}, {}
        for i = 1, 48 do
            local ab = i % 2 == 0
            local amt = math.random(1, 40)
            sent[i] = { ab = ab, amt = amt }
            local body = ab and transfer(A, B, amt, 1000 + i) or transfer(B, A, amt, 1000 + i)
            hs[i] = task.spawn("spec_conc", function()
                return { post(task, port, "/v1/transfer", ab and TA or TB, body, "c" .. i) }
            end)
        end
        local net = 0 -- A's change
        for i, h in ipairs(hs) do
            local ok, r = h:join(60000)
            assert(ok, tostring(r))
            if r[1] == 201 then
                net = net + (sent[i].ab and -sent[i].amt or sent[i].amt)
            else
                assert.equal(422, r[1], r[3])
                assert.equal("insufficient_funds", code_of(r[3]))
            end
        end
        local a = settled(task, ctx, A, TA, 300 + net)
        local b = settled(task, ctx, B, TB, 300 - net)
        assert.equal(300 + net, a)
        assert.equal(300 - net, b)
        assert.is_true(a >= 0 and b >= 0)
        ctx.close()
    end)
end

local function fallback(open_store)
    F.run(function(task)
        local fail = { n = 0 }
        local ctx = F.open(task, function()
            local s = open_store()
            -- the group's reads fail while fail.on: the single path (get_intent) still works
            return setmetatable({}, { __index = function(_, k)
                local f = s[k]
                if type(f) ~= "function" then return f end
                return function(_, ...)
                    if k == "get_intents" and fail.on then
                        fail.n = fail.n + 1
                        return nil, "IoError: injected", "io"
                    end
                    return f(s, ...)
                end
            end })
        end, WCFG, { closed = false })
        local port = ctx.port
        funded(task, ctx, 100, nil, "fallback", 2513)
        local reqs = {}
        for i = 1, 6 do reqs[i] = { "/v1/transfer", TA, transfer(A, B, 30, 10 + i), "f" .. i } end
        fail.on = true
        local got = burst(task, ctx, reqs)
        fail.on = false
        assert.is_true(fail.n > 0, "no group read was made")
        assert.is_true(ctx.w.m.group_fallbacks >= 5)
        for i, r in ipairs(got) do
            if i <= 3 then assert.equal(201, r[1], r[3])
            else
                assert.equal(422, r[1], r[3])
                assert.equal("insufficient_funds", code_of(r[3]))
            end
            -- the answer the ledger stored: the same again
            local st, _, body = post(task, port, reqs[i][1], reqs[i][2], reqs[i][3], reqs[i][4])
            assert.equal(r[1], st)
            assert.equal(r[3], body)
        end
        assert.equal(10, settled(task, ctx, A, TA, 10))
        ctx.close()
    end)
end

-- factory() -> a function opening a fresh ledger's store (one per case)
local function cases(factory)
    it("a group answers each request as committing it alone, byte for byte", function()
        group_answers(factory())
    end)
    it("no balance goes negative under concurrent groups (property)", function()
        no_negative(factory())
    end)
    it("a group whose store reads fail falls back to the single path", function()
        fallback(factory())
    end)
end

describe("ron.wallet group commit on SQLite (issue 25)", function()
    cases(function()
        local path = S.tmpname(".db")
        return function()
            return store_mod.open { backend = "sqlite", path = path, offload = true }
        end
    end)
end)

S.describe_pg("ron.wallet group commit on PostgreSQL (issue 25)", function(pg)
    local n = 0
    cases(function()
        n = n + 1
        local schema = "wallet_group_" .. n -- a fresh ledger per case
        return function()
            return store_mod.open { backend = "postgres", conninfo = pg.cluster.conninfo,
                                    schema = schema, connections = 4,
                                    connect_timeout_ms = 20000, query_timeout_ms = 20000 }
        end
    end)
end)
