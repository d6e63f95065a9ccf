-- The wallet's own loop work per transfer (issue 25, docs/WALLET.md §8 "The wallet's own
-- loop work"): what the cuts changed stays the same bytes (the canonical form, whose hash
-- the ledger stores, and the receipt), the UUID memo is bounded, and a transfer through the
-- wallet (tests/bench/wallet_loop.lua: a stub ledger, no HTTP) makes less garbage than it
-- did (~4.1 KB per request before the cuts, ~3.0 KB after). The garbage case needs the
-- host's decoder (ctest lua-wallet-host); the others run under plain busted too.
local S = require("support")
local dto = require("ron.wallet.dto")
local B = require("ron.ledger.bigint")
local money = require("ron.wallet.money")

local format, concat = string.format, table.concat
local in_host = pcall(function() return require("ffi").C.ra_wdto_decode end)

local A, BB = "6f1e3c52-7d0b-4b8e-9a51-0c2f4e8d9a10", "0a0b0c0d-0e0f-4101-8203-040506070809"
local MAX = 9007199254740991

-- The canonical form as it was built before issue 25's cut (a list of "name=value", joined
-- by line feeds after the route): the reference the body hashes stored in ledgers follow.
local function canon_ref(route, r)
    local c = { route }
    for _, f in ipairs(dto.SCHEMAS[route]) do
        local v = r[f[1] .. "_text"] or r[f[1]]
        c[#c + 1] = f[1] .. "=" .. (v == nil and "" or type(v) == "number" and B.dec(v) or v)
    end
    return concat(c, "\n")
end

-- The receipt as it was rendered before the cut (a format per field).
local function receipt_ref(r, res)
    local parts = { format('{"transfer_id":"%s","status":"committed","event_seq":%s,"route":"%s"',
                           require("ron.ledger").hex(res.transfer_id), B.dec(res.event_seq or 0),
                           r.route) }
    for _, f in ipairs { "from", "to", "asset", "amount", "nonce", "kind" } do
        local v = r[f .. "_text"] or r[f]
        if v ~= nil then
            if type(v) == "number" then parts[#parts + 1] = format(',"%s":%s', f, B.dec(v))
            else parts[#parts + 1] = format(',"%s":"%s"', f, dto.jstr(v)) end
        end
    end
    parts[#parts + 1] = "}\n"
    return concat(parts)
end

local REQUESTS = {
    { "transfer", { from = A, to = BB, asset = "USD", amount = 1, nonce = MAX } },
    { "transfer", { from = A, to = BB, asset = "USD", amount = MAX, nonce = 5,
                    memo = 'h\195\169llo\n"x"' } },
    { "issue", { to = BB, asset = "USD", amount = 100, nonce = 1 } },
    { "issue", { to = BB, asset = "EUR_2", amount = 100000000000001, nonce = 2, kind = "grant",
                 memo = "" } },
    { "burn", { from = A, asset = "USD", amount = 3, nonce = 77 } },
    { "account", { account = A } },
}

local function checked(route, fields)
    local r = {}
    for k, v in pairs(fields) do r[k] = v end
    return assert(dto.check(route, r, { USD = 2, EUR_2 = 0 }))
end

describe("the wallet's own loop work (issue 25)", function()
    it("the canonical form is the same bytes as the per-field join", function()
        for _, c in ipairs(REQUESTS) do
            local r = checked(c[1], c[2])
            assert.equal(canon_ref(c[1], r), r.canon)
        end
    end)

    it("a receipt is the same bytes as the per-field rendering, every route", function()
        local id = ("\1\35\69\103\137\171\205\239"):rep(4)
        for _, c in ipairs(REQUESTS) do
            if c[1] ~= "account" then
                local r = checked(c[1], c[2])
                for _, seq in ipairs { 1, MAX } do
                    local res = { transfer_id = id, event_seq = seq }
                    assert.equal(receipt_ref(r, res), money.methods._receipt(nil, r, res).body)
                end
            end
        end
    end)

    it("a UUID text converted once is remembered, UUID_MEMO at most", function()
        local U = "a1b2c3d4-0000-4abc-8def-0123456789ab" -- (converted nowhere else)
        local n0 = dto.uuid_memo_count()
        local b = dto.uuid_bytes(U)
        assert.equal(16, #b)
        local n1 = dto.uuid_memo_count()
        assert.is_true(n1 == n0 + 1 or n1 == 1) -- (1: it was full and emptied)
        assert.equal(b, dto.uuid_bytes(U))
        assert.equal(n1, dto.uuid_memo_count()) -- a hit: nothing more kept
        -- what is refused is never kept, and stays refused after its lowercase twin
        assert.is_nil(dto.uuid_bytes(U:upper()))
        assert.is_nil(dto.uuid_bytes(U:sub(1, 35) .. "g"))
        assert.equal(n1, dto.uuid_memo_count())
        local cap = dto.UUID_MEMO
        dto.UUID_MEMO = 8
        local ok, err = pcall(function()
            for i = 1, 20 do
                local t = format("%08x-0000-4000-8000-%012x", i, i)
                assert.equal(t, dto.uuid_text(dto.uuid_bytes(t)))
                assert.is_true(dto.uuid_memo_count() <= 8)
            end
        end)
        dto.UUID_MEMO = cap
        assert(ok, err)
    end)

    it("a transfer through the wallet makes under 3.6 KB of garbage (4.1 KB before)", function()
        if not in_host then return pending("needs the host: ctest -R lua-wallet-host") end
        local WL = dofile(S.root .. "tests/bench/wallet_loop.lua")
        S.run_task(function(T)
            local d = WL.new(T, { size = 64 })
            local ok, err = pcall(function()
                for _ = 1, 10 do d:run(d:requests()) end -- (the traces warm)
                local bytes, handler = d:garbage(20)
                print(format("loop_spec: %.0f B of garbage per transfer (handler %.0f)", bytes,
                             handler))
                assert.equal(30 * 64, d.statuses[201])
                assert.is_true(bytes < 3600, format("%.0f B per transfer", bytes))
            end)
            d:close()
            assert(ok, err)
        end)
    end)
end)
