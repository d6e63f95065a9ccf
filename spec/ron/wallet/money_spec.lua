-- The wallet's silent-loss holes (issue 24 §1; ctest lua-wallet-host), each through the
-- daemon's HTTP server over a real SQLite ledger:
--   - integers of 15+ digits (nonces, amounts, balances) are exact: in the intent key, the
--     canonical body (its hash), receipts, balances and statements;
--   - the answer cache never overrides the ledger: a 422 idempotency_mismatch is never
--     cached (nor under the other body's hash), both orders, and across a restart;
--   - query integers are decimal digits only;
--   - a transfer's created_at_ms is its commit's real time in milliseconds.
local S = require("support")

if not S.needs_host("ron.wallet money holes", "lua-wallet-host") then return end

local uv = require("luv")
local cjson = require("cjson.safe")
local F = dofile(S.root .. "spec/ron/wallet/fixture.lua")

local OP, TA, TB, A, B = F.OP, F.TA, F.TB, F.A, F.B
local post, get = S.http_post, S.http_get
local transfer, issue = F.transfer, F.issue
local MAX = 9007199254740991 -- 2^53 - 1
local _ -- results a case does not read

local function find(body, s) return body:find(s, 1, true) ~= nil end

local function balance_body(task, port, id, token)
    local st, _, body = get(task, port, "/v1/accounts/" .. id .. "/balance?asset=USD", token)
    assert.equal(200, st, body)
    return body
end

describe("ron.wallet: integers of 15+ digits are exact (issue 24)", function()
    it("nonce 100000000000002 after 100000000000001 is a second transfer",
       F.fresh(function(task, ctx, port)
        assert.equal(201, (post(task, port, "/v1/issue", OP, issue(A, 1000, 1), "i1")))
        local st1, _, b1 = post(task, port, "/v1/transfer", TA,
                                transfer(A, B, 5, 100000000000001), "n1")
        assert.equal(201, st1, b1)
        local st2, h2, b2 = post(task, port, "/v1/transfer", TA,
                                 transfer(A, B, 5, 100000000000002), "n2")
        assert.equal(201, st2, b2)
        assert.is_nil(h2["idempotent-replayed"], b2)
        assert.are_not.equal(cjson.decode(b1).transfer_id, cjson.decode(b2).transfer_id)
        assert.truthy(find(b1, '"nonce":100000000000001}'), b1)
        assert.truthy(find(b2, '"nonce":100000000000002}'), b2)
        -- the largest nonce, and its neighbour, are two more
        for i, n in ipairs { MAX, MAX - 1 } do
            local st, _, body = post(task, port, "/v1/transfer", TA, transfer(A, B, 5, n),
                                     "m" .. i)
            assert.equal(201, st, body)
            assert.truthy(find(body, '"nonce":' .. string.format("%d", n) .. "}"), body)
        end
        local seq = cjson.decode(b2).event_seq
        st1, _, b1 = get(task, port, "/v1/accounts/" .. B .. "/balance?asset=USD&min_seq=" ..
                         seq + 2, TB)
        assert.equal(200, st1, b1)
        assert.equal(20, cjson.decode(b1).balance)
        -- the statement names each, with its exact nonce
        local _, _, sb = get(task, port, "/v1/accounts/" .. A .. "/statement?asset=USD", TA)
        assert.truthy(find(sb, '"nonce":100000000000002'), sb)
        assert.truthy(find(sb, '"nonce":9007199254740991'), sb)
        assert.equal(5, #cjson.decode(sb).entries)
    end))

    -- The same through HTTP for random neighbours v, v + 1 in 10^13..2^53-1 (issues: the
    -- issuance account is uncapped): two intents, two transfers, each receipt naming its own
    -- nonce and amount exactly, and the balance their exact sum (int64 in the ledger).
    it("random neighbours in 10^13..2^53-1 are two transfers (property)",
       F.fresh(function(task, _, port)
        local seed = 4711
        print("wallet money_spec: neighbours property, math.randomseed(" .. seed .. ")")
        math.randomseed(seed)
        local ffi = require("ffi")
        local sum, ids, seq = ffi.new("int64_t", 0), {}, 0
        for i = 1, 8 do
            local v = math.floor(1e13 + math.random() * (MAX - 1 - 1e13))
            for j, n in ipairs { v, v + 1 } do
                local st, h, body = post(task, port, "/v1/issue", OP, issue(A, n, n),
                                         "p" .. i .. "." .. j)
                assert.equal(201, st, body)
                assert.is_nil(h["idempotent-replayed"], body)
                local want = string.format("%d", n)
                assert.truthy(find(body, '"amount":' .. want .. ',"nonce":' .. want .. ","),
                              want .. " " .. body)
                local r = cjson.decode(body)
                assert.is_nil(ids[r.transfer_id], body)
                ids[r.transfer_id] = true
                sum, seq = sum + n, math.max(seq, r.event_seq)
            end
        end
        local st, _, body = get(task, port, "/v1/accounts/" .. A ..
                                "/balance?asset=USD&min_seq=" .. seq, TA)
        assert.equal(200, st, body)
        assert.truthy(find(body, '"balance":' .. tostring(sum):gsub("LL$", "") .. ","), body)
    end))

    it("two amounts near 2^53 under one Idempotency-Key are 422; balances beyond 2^53 exact",
       F.fresh(function(task, ctx, port)
        local st, _, body = post(task, port, "/v1/issue", OP, issue(A, MAX, 1), "i1")
        assert.equal(201, st, body)
        assert.truthy(find(body, '"amount":9007199254740991,'), body)
        st, _, body = post(task, port, "/v1/transfer", TA, transfer(A, B, MAX - 1, 3), "K")
        assert.equal(201, st, body)
        assert.truthy(find(body, '"amount":9007199254740990,'), body)
        st, _, body = post(task, port, "/v1/transfer", TA, transfer(A, B, MAX - 2, 3), "K")
        assert.equal(422, st, body)
        assert.truthy(find(body, '"code":"idempotency_mismatch"'), body)
        -- and the same nonce with that other amount under a new key: nonce_used
        st, _, body = post(task, port, "/v1/transfer", TA, transfer(A, B, MAX - 2, 3), "K2")
        assert.equal(409, st, body)
        assert.truthy(find(body, '"code":"nonce_used"'), body)
        assert.truthy(find(body, "nonce 3 was used"), body)
        -- a balance beyond 2^53 (the ledger's int64): exact in the body and its header
        st, _, body = post(task, port, "/v1/issue", OP, issue(B, MAX, 2), "i2")
        assert.equal(201, st, body)
        local seq = cjson.decode(body).event_seq
        local st2, h, bb = get(task, port, "/v1/accounts/" .. B ..
                               "/balance?asset=USD&min_seq=" .. seq, TB)
        assert.equal(200, st2, bb)
        assert.truthy(find(bb, '"balance":18014398509481981,'), bb)
        assert.equal(tostring(cjson.decode(bb).ledger_seq), h["x-ledger-seq"])
    end))

    it("the decoder refuses 2^53 and above with a typed problem, nothing committed",
       F.fresh(function(task, ctx, port)
        for _, body in ipairs {
            '{"to":"' .. A .. '","asset":"USD","amount":9007199254740992,"nonce":1}',
            '{"to":"' .. A .. '","asset":"USD","amount":1,"nonce":9007199254740992}',
            '{"to":"' .. A .. '","asset":"USD","amount":1,"nonce":18446744073709551616}',
        } do
            local st, h, b = post(task, port, "/v1/issue", OP, body, "big")
            assert.equal(400, st, b)
            assert.equal("application/problem+json", h["content-type"])
            assert.truthy(find(b, '"code":"bad_number"'), b)
        end
        assert.equal(0, ctx.w.m.commits)
    end))
end)

-- K + A committed, then K + B (422): K + A must still replay its 201, from the cache and
-- from the ledger after a restart, and K + B stay 422. The cache keeps only what the
-- ledger answers for the key (the stored body hash is the request's).
describe("ron.wallet: the answer cache never overrides the ledger (issue 24)", function()
    it("A, B, A and B-first, across a restart", function()
        local path = S.tmpname(".db")
        local saved = {}
        local function check(task, port, replay_expected)
            local st, h, body = post(task, port, "/v1/transfer", TA, transfer(A, B, 10, 20), "K")
            assert.equal(201, st, body)
            assert.equal(saved.KA, body)
            assert.equal("true", h["idempotent-replayed"])
            for _ = 1, 2 do
                st, _, body = post(task, port, "/v1/transfer", TA, transfer(A, B, 11, 20), "K")
                assert.equal(422, st, body)
                assert.truthy(find(body, '"code":"idempotency_mismatch"'), body)
                st, h, body = post(task, port, "/v1/transfer", TA, transfer(A, B, 10, 20), "K")
                assert.equal(201, st, body)
                assert.equal(saved.KA, body)
            end
            -- B first under K2: the same, the other way round
            st, h, body = post(task, port, "/v1/transfer", TA, transfer(A, B, 12, 21), "K2")
            assert.equal(201, st, body)
            assert.equal(saved.K2B, body)
            if replay_expected then assert.equal("true", h["idempotent-replayed"]) end
            st, _, body = post(task, port, "/v1/transfer", TA, transfer(A, B, 13, 21), "K2")
            assert.equal(422, st, body)
            st, _, body = post(task, port, "/v1/transfer", TA, transfer(A, B, 12, 21), "K2")
            assert.equal(201, st, body)
            assert.equal(saved.K2B, body)
            -- a used nonce under a third key: the stored nonce_used, every time
            st, _, body = post(task, port, "/v1/transfer", TA, transfer(A, B, 14, 20), "K3")
            assert.equal(409, st, body)
            assert.equal(saved.K3, body)
            -- money moved once per key
            local bal = cjson.decode(balance_body(task, port, A, TA)).balance
            assert.equal(1000 - 10 - 12, bal)
        end
        F.run(function(task)
            local ctx = F.open(task, path)
            local port = ctx.port
            F.setup_accounts(task, port)
            assert.equal(201, (post(task, port, "/v1/issue", OP, issue(A, 1000, 1), "i1")))
            local st, body
            st, _, saved.KA = post(task, port, "/v1/transfer", TA, transfer(A, B, 10, 20), "K")
            assert.equal(201, st, saved.KA)
            st, _, body = post(task, port, "/v1/transfer", TA, transfer(A, B, 11, 20), "K")
            assert.equal(422, st, body)
            st, _, saved.K2B = post(task, port, "/v1/transfer", TA, transfer(A, B, 12, 21), "K2")
            assert.equal(201, st, saved.K2B)
            st, _, saved.K3 = post(task, port, "/v1/transfer", TA, transfer(A, B, 14, 20), "K3")
            assert.equal(409, st, saved.K3)
            assert.truthy(find(saved.K3, '"code":"nonce_used"'), saved.K3)
            check(task, port, true)
            ctx.close()
        end)
        F.run(function(task) -- a new service on the same file: nothing in RAM survived
            local ctx = F.open(task, path)
            local port = ctx.port
            -- B first after the restart: the empty cache must not learn K's answer from B
            local st, _, body = post(task, port, "/v1/transfer", TA, transfer(A, B, 11, 20), "K")
            assert.equal(422, st, body)
            check(task, port, true)
            ctx.close()
        end)
    end)
end)

describe("ron.wallet: query integers (issue 24)", function()
    it("min_seq and limit take decimal digits only, bounded; a typed 400 otherwise",
       F.fresh(function(task, ctx, port)
        local base = "/v1/accounts/" .. A
        for _, q in ipairs { "/balance?asset=USD&min_seq=0x10", "/balance?asset=USD&min_seq=1e1",
                             "/balance?asset=USD&min_seq=-1", "/balance?asset=USD&min_seq=%201",
                             "/balance?asset=USD&min_seq=9007199254740992",
                             "/balance?asset=USD&min_seq=", "/statement?asset=USD&limit=0x10",
                             "/statement?asset=USD&limit=1.0", "/statement?asset=USD&limit=0",
                             "/statement?asset=USD&limit=201" } do
            local st, h, body = get(task, port, base .. q, TA)
            assert.equal(400, st, q .. " " .. body)
            assert.equal("application/problem+json", h["content-type"])
            assert.truthy(find(body, '"code":"bad_query"'), body)
        end
        local st, _, body = get(task, port, base .. "/statement?asset=USD&limit=16", TA)
        assert.equal(200, st, body)
        st, _, body = get(task, port, base .. "/balance?asset=USD&min_seq=0", TA)
        assert.equal(200, st, body)
    end))
end)

describe("ron.wallet: created_at_ms (issue 24)", function()
    it("is the commit's real time in milliseconds", F.fresh(function(task, ctx, port)
        assert.equal(201, (post(task, port, "/v1/issue", OP, issue(A, 1000, 1), "i1")))
        local function now_ms()
            local s, us = uv.gettimeofday()
            return s * 1000 + math.floor(us / 1000)
        end
        local bracket = {}
        for i = 1, 8 do
            local t0 = now_ms()
            local st, _, body = post(task, port, "/v1/transfer", TA, transfer(A, B, 1, 100 + i),
                                     "c" .. i)
            assert.equal(201, st, body)
            bracket[cjson.decode(body).transfer_id] = { t0, now_ms() }
            task.sleep(3)
        end
        local st, _, body = get(task, port, "/v1/accounts/" .. A .. "/statement?asset=USD", TA)
        assert.equal(200, st, body)
        local n = 0
        for _, e in ipairs(cjson.decode(body).entries) do -- newest first
            local b = bracket[e.transfer_id]
            if b then
                n = n + 1
                -- within its request's round trip: the commit's time, to the ms (a clock
                -- of whole seconds falls before t0 unless t0 is on a second boundary)
                assert.is_true(e.created_at_ms >= b[1] and e.created_at_ms <= b[2],
                               string.format("%d not in %d..%d", e.created_at_ms, b[1], b[2]))
            end
        end
        assert.equal(8, n)
    end))
end)
