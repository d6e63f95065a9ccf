-- ron.wallet.reads inside the host (ctest lua-wallet-host): the misses of one balance share
-- one ledger read (issue 25: 64 connections that missed at once made 64 store reads, queued
-- on the offloaded SQLite store's one connection; bench-wallet's balance p99).
local S = require "support"

if not package.preload["ron.base.net.http_server"] then
    describe("ron.wallet reads", function()
        pending("runs inside the host only (ctest lua-wallet-host)")
    end)
    return
end

local cjson = require "cjson.safe"
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
end)
