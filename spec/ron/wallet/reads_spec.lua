-- ron.wallet.reads inside the host (ctest lua-wallet-host): the misses of one balance share
-- one ledger read (issue 25: 64 connections that missed at once made 64 store reads, queued
-- on the offloaded SQLite store's one connection; bench-wallet's balance p99).
local S = require("support")

if not S.runs_if(package.preload["ron.base.net.http_server"], "ron.wallet reads",
                 "runs inside the host only (ctest lua-wallet-host)") then
    return
end

local cjson = require("cjson.safe")
local F = dofile(S.root .. "spec/ron/wallet/fixture.lua")

local TA, A = F.TA, F.A

describe("ron.wallet reads", function()
    it("16 balance reads that miss at once: one ledger read, the same answer to each",
       F.fresh(function(task, ctx, port)
        local led, real = ctx.led, ctx.led.store
        -- the ledger's balance reads counted, and the first one held until all 16 missed
        local n, held = 0, true
        led.store = setmetatable({}, { __index = function(_, k)
            local v = real[k]
            if type(v) ~= "function" then return v end
            if k ~= "get_balances" then return function(_, ...) return v(real, ...) end end
            return function(_, ...)
                n = n + 1
                while held do task.sleep(2) end
                return v(real, ...)
            end
        end })
        ctx.w.cache:clear()
        local hs, out = {}, {}
        for i = 1, 16 do
            hs[i] = task.spawn("client", function()
                local st, _, body = S.http_get(task, port, "/v1/accounts/" .. A
                                               .. "/balance?asset=USD", TA)
                out[i] = { st, body }
                return true
            end)
        end
        assert(S.eventually(task, function() return ctx.w.n_reads == 16 end, 5000))
        task.sleep(20)
        held = false
        for i = 1, 16 do assert(hs[i]:join(10000)) end
        led.store = real
        assert.equal(1, n)
        for i = 1, 16 do
            assert.equal(200, out[i][1], out[i][2])
            assert.equal(0, cjson.decode(out[i][2]).balance)
        end
        assert.is_nil(next(ctx.w.balance_flights))
    end))
    it("an Authorization value is hashed once: only known tokens are remembered, at most "
       .. "TOKEN_MEMO of them; the answers are the same", F.fresh(function(task, ctx, port)
        local request = require("ron.wallet.request")
        local b3 = require("ron.base.b3")
        local hex, n = b3.hex, 0
        b3.hex = function(...) n = n + 1 return hex(...) end
        local saved = request.TOKEN_MEMO
        request.TOKEN_MEMO = 2
        local ok, err = pcall(function()
            local path = "/v1/accounts/" .. A .. "/balance?asset=USD"
            local function get(auth)
                return S.http_request(task, port, "GET " .. path .. " HTTP/1.1\r\nHost: x\r\n" ..
                                      "Connection: close\r\nAuthorization: " .. auth ..
                                      "\r\n\r\n")
            end
            -- the same value twice: one hash
            for _ = 1, 2 do assert.equal(200, (get("Bearer " .. TA))) end
            assert.equal(1, n)
            -- an unknown token: refused every time, never remembered
            for _ = 1, 2 do assert.equal(401, (get("Bearer not-a-token"))) end
            assert.equal(3, n)
            assert.is_nil(ctx.w.token_memo["Bearer not-a-token"])
            -- other spellings of a known token: each remembered, the memo stays bounded
            for _, auth in ipairs { "bearer " .. TA, "BEARER " .. TA, "Bearer  " .. TA } do
                assert.equal(200, (get(auth)))
                assert.is_true(ctx.w.n_token_memo <= 2)
            end
            local st, _, body = get("Bearer " .. TA)
            assert.equal(200, st)
            assert.equal(0, cjson.decode(body).balance)
            -- another account's token still reads only its own account
            assert.equal(403, (get("Bearer " .. F.TB)))
        end)
        b3.hex, request.TOKEN_MEMO = hex, saved
        assert(ok, err)
    end))

    it("a cached read of one's own balance parses no UUID (an operator's read does); the "
       .. "answers the same", F.fresh(function(task, ctx, port)
        local dto = require("ron.wallet.dto")
        local parse, n = dto.uuid_bytes, 0
        dto.uuid_bytes = function(...) n = n + 1 return parse(...) end
        local ok, err = pcall(function()
            local path = "/v1/accounts/" .. A .. "/balance?asset=USD"
            local bodies = {}
            for i = 1, 3 do
                local st, hs, body = S.http_get(task, port, path, TA)
                assert.equal(200, st, body)
                assert.equal("no-store", hs["cache-control"])
                bodies[i] = cjson.decode(body)
                assert.equal(A, bodies[i].account)
                assert.equal(hs["x-ledger-seq"], string.format("%d", bodies[i].ledger_seq))
            end
            assert.equal(0, n)
            local st, _, body = S.http_get(task, port, path, F.OP)
            assert.equal(200, st, body)
            assert.equal(1, n)
            assert.equal(A, cjson.decode(body).account)
            assert.equal(bodies[1].balance, cjson.decode(body).balance)
        end)
        dto.uuid_bytes = parse
        assert(ok, err)
    end))

    it("the query: asset alone or among others, the same answer; a bad one a 400",
       F.fresh(function(task, ctx, port)
        local base = "/v1/accounts/" .. A .. "/balance?"
        for _, q in ipairs { "asset=USD", "x=1&asset=USD", "asset=USD&x=",
                             "asset=USD&asset=USD" } do
            local st, _, body = S.http_get(task, port, base .. q, TA)
            assert.equal(200, st, q .. ": " .. tostring(body))
            assert.equal("USD", cjson.decode(body).asset)
        end
        for _, q in ipairs { "asset=usd", "asset=", "asset=EUR", "assets=USD", "" } do
            local st, _, body = S.http_get(task, port, base .. q, TA)
            assert.equal(400, st, q .. ": " .. tostring(body))
            assert.equal("bad_query", cjson.decode(body).code)
        end
    end))
end)
