-- ron.wallet.dto (WLT-1, WLT-2): the route schemas over the host's strict decoder, the
-- fields' meaning, the problem bodies. ctest lua-wallet-host runs it inside the host (the
-- decoder is part of it); under plain busted the decoder cases are pending.
local dto = require("ron.wallet.dto")

local A = "6f1e3c52-7d0b-4b8e-9a51-0c2f4e8d9a10"
local B = "0a0b0c0d-0e0f-4101-8203-040506070809"
local in_host = pcall(function() return require("ffi").C.ra_wdto_decode end)

-- A burn body from A in USD: the members after "asset" as written (amount, nonce, more).
local function burn_body(rest) return '{"from":"' .. A .. '","asset":"USD",' .. rest .. "}" end

describe("ron.wallet.dto text helpers", function()
    it("maps lowercase UUID text to 16 bytes and back; refuses other spellings", function()
        local b = dto.uuid_bytes(A)
        assert.equal(16, #b)
        assert.equal(A, dto.uuid_text(b))
        assert.is_nil(dto.uuid_bytes(A:upper()))
        assert.is_nil(dto.uuid_bytes(A:gsub("%-", "")))
        assert.is_nil(dto.uuid_bytes(A:sub(1, 35) .. "g"))
        assert.is_nil(dto.uuid_bytes(nil))
    end)

    it("checks asset codes and idempotency keys", function()
        assert.is_true(dto.asset_ok("USD"))
        assert.is_true(dto.asset_ok("CREDIT_2"))
        assert.is_false(dto.asset_ok("usd"))
        assert.is_false(dto.asset_ok("1USD"))
        assert.is_false(dto.asset_ok(string.rep("A", 17)))
        assert.is_true(dto.key_ok("k-1"))
        assert.is_false(dto.key_ok("has space"))
        assert.is_false(dto.key_ok(string.rep("k", 129)))
        assert.is_false(dto.key_ok(""))
    end)

    it("renders problems deterministically with their stable status", function()
        local p = dto.problem("unknown_field", 'no "x" here', "x", 12)
        assert.equal(400, p.status)
        local body = dto.problem_body(p)
        assert.equal('{"type":"urn:ron-wallet:problem:unknown_field","title":"Bad Request",' ..
                     '"status":400,"code":"unknown_field","detail":"no \\u0022x\\u0022 here",' ..
                     '"field":"x","pos":12}\n', body)
        assert.equal(body, dto.problem_body(dto.problem("unknown_field", 'no "x" here', "x", 12)))
        assert.equal(429, dto.problem("busy").status)
        assert.equal(422, dto.problem("idempotency_mismatch").status)
        assert.equal(503, dto.problem("ledger_unavailable").status)
        assert.has_error(function() dto.problem("no_such_code") end)
        for code, status in pairs(dto.PROBLEMS) do
            assert.truthy(dto.TITLES[status], code)
        end
    end)

    it("checks the fields' meaning and builds a canonical form", function()
        local r = assert(dto.check("transfer", { from = A, to = B, asset = "USD", amount = 5,
                                                  nonce = 1 }, { USD = 2 }))
        assert.equal(16, #r.from)
        assert.equal(A, r.from_text)
        assert.equal(2, r.scale)
        assert.equal("transfer\nfrom=" .. A .. "\nto=" .. B ..
                     "\nasset=USD\namount=5\nnonce=1\nmemo=", r.canon)
        local _, p = dto.check("transfer", { from = A, to = A, asset = "USD", amount = 5,
                                             nonce = 1 })
        assert.equal("same_account", p.code)
        _, p = dto.check("transfer", { from = A:upper(), to = B, asset = "USD", amount = 5,
                                       nonce = 1 })
        assert.equal("bad_uuid", p.code)
        assert.equal("from", p.field)
        _, p = dto.check("burn", { from = A, asset = "EUR", amount = 5, nonce = 1 }, { USD = 2 })
        assert.equal("unknown_asset", p.code)
        _, p = dto.check("issue", { to = A, asset = "USD", amount = 5, nonce = 1, kind = "x" })
        assert.equal("bad_kind", p.code)
        r = assert(dto.check("issue", { to = A, asset = "USD", amount = 5, nonce = 1 }))
        assert.equal("top_up", r.kind)
    end)

    -- issue 24: a Lua number's own conversion keeps 14 significant digits, so nonces and
    -- amounts of 15+ digits collapsed (v and v + 1 had one canonical form, one body hash).
    -- A reference decimal written here (digit by digit, no string.format) for each value.
    local function ref_dec(v)
        local digits = {}
        repeat
            local d = v % 10
            digits[#digits + 1] = string.char(48 + d)
            v = (v - d) / 10
        until v == 0
        return string.reverse(table.concat(digits))
    end
    it("canonical forms are exact for every integer in 10^13..2^53-1 (property)", function()
        local seed = 2403
        print("wallet dto_spec: exact canon property, math.randomseed(" .. seed .. ")")
        math.randomseed(seed)
        local lo, hi = 1e13, dto.MAX_INT
        local vals = { lo, 1e14, 1e14 + 1, 100000000000002, 1e15 - 1, 1e15, hi - 1, hi }
        for _ = 1, 2000 do
            -- uniform in the decade, then in the range: every digit count is exercised
            local e = 13 + math.random(0, 2)
            local v = math.floor(10 ^ e * (1 + 9 * math.random()))
            vals[#vals + 1] = math.min(hi, math.max(lo, v))
        end
        for _, v in ipairs(vals) do
            for _, w in ipairs { v, v == hi and v - 1 or v + 1 } do
                local r = assert(dto.check("transfer", { from = A, to = B, asset = "USD",
                                                          amount = w, nonce = w }))
                local want = ref_dec(w)
                assert.equal(want, (r.canon:match("\namount=(%d+)\n")), w)
                assert.equal(want, (r.canon:match("\nnonce=(%d+)\n")), w)
            end
            local r1 = dto.check("transfer", { from = A, to = B, asset = "USD", amount = 1,
                                               nonce = v })
            local other = v == hi and v - 1 or v + 1
            local r2 = dto.check("transfer", { from = A, to = B, asset = "USD", amount = 1,
                                               nonce = other })
            assert.are_not.equal(r1.canon, r2.canon, v)
        end
        -- the bound itself: 2^53 is refused (not exactly a JSON client's integer), with a
        -- typed problem that names the exact bound
        local _, p = dto.check("transfer", { from = A, to = B, asset = "USD", amount = 2 ^ 53,
                                             nonce = 1 })
        assert.equal("bad_number", p.code)
        assert.equal("amount must be an integer in 1..9007199254740991", p.detail)
    end)

    it("query integers are decimal digits only, bounded", function()
        assert.equal(16, dto.query_uint("16", 0, 100))
        assert.equal(0, dto.query_uint("0", 0, 100))
        assert.equal(dto.MAX_INT, dto.query_uint("9007199254740991", 0, dto.MAX_INT))
        for _, bad in ipairs { "0x10", "1e2", "-1", "+1", " 1", "1 ", "", "1.0", "inf", "nan",
                               "0X10", "101", "%31" } do
            assert.is_nil(dto.query_uint(bad, 0, 100), bad)
        end
        for _, big in ipairs { "9007199254740992", "9007199254740993", "99999999999999999" } do
            assert.is_nil(dto.query_uint(big, 0, dto.MAX_INT), big)
        end
        assert.is_nil(dto.query_uint("0", 1, 100))
    end)
end)

describe("ron.wallet.dto decoder (inside the host)", function()
    local d
    before_each(function()
        if not in_host then return end
        d = dto.new { assets = { USD = 2, CREDIT = 0 } }
    end)

    local function host_it(name, fn)
        if in_host then it(name, fn) else pending(name) end
    end

    host_it("accepts each route's body", function()
        local r = assert(d:decode("transfer", '{"from":"' .. A .. '","to":"' .. B ..
                                  '","asset":"USD","amount":1250,"nonce":7,"memo":"caf\\u00e9"}'))
        assert.equal(1250, r.amount)
        assert.equal(7, r.nonce)
        assert.equal("caf\195\169", r.memo)
        assert.equal(A, dto.uuid_text(r.from))
        r = assert(d:decode("issue", ' {"nonce":1,"amount":9007199254740991,"asset":"CREDIT",' ..
                            '"to":"' .. A .. '","kind":"grant"} '))
        assert.equal(9007199254740991, r.amount)
        assert.equal("grant", r.kind)
        assert.equal(0, r.scale)
        assert(d:decode("burn", burn_body('"amount":1,"nonce":2')))
        assert(d:decode("account", '{"account":"' .. A .. '"}'))
    end)

    host_it("one meaning, one canonical form (whitespace and member order aside)", function()
        local a = assert(d:decode("burn", burn_body('"amount":1,"nonce":2')))
        local b = assert(d:decode("burn", '{ "nonce" : 2, "amount":1, "asset":"USD", "from":"' .. A .. '" }'))
        assert.equal(a.canon, b.canon)
    end)

    host_it("refuses with the decoder's typed errors, field and offset", function()
        local cases = {
            { "", "empty_body", "" },
            { "{", "malformed_json" },
            { "[]", "not_object" },
            { burn_body('"amount":1,"nonce":2,"x":1'), "unknown_field", "x" },
            { '{"from":"' .. A .. '","from":"' .. A .. '","asset":"USD","amount":1,"nonce":2}', "duplicate_field", "from" },
            { burn_body('"amount":1'), "missing_field", "nonce" },
            { burn_body('"amount":"1","nonce":2'), "wrong_type", "amount" },
            { burn_body('"amount":1,"nonce":2,"memo":null'), "wrong_type", "memo" },
            { '{"from":"abc","asset":"USD","amount":1,"nonce":2}', "bad_string", "from" },
            { burn_body('"amount":1,"nonce":9007199254740992'), "bad_number", "nonce" },
            { '{"from":"' .. A:upper() .. '","asset":"USD","amount":1,"nonce":2}', "bad_uuid", "from" },
            { '{"from":"' .. A .. '","asset":"usd","amount":1,"nonce":2}', "bad_asset", "asset" },
            { '{"from":"' .. A .. '","asset":"EUR","amount":1,"nonce":2}', "unknown_asset", "asset" },
        }
        -- amounts refused: zero, negative, fractional, 2^53 and past it
        for _, v in ipairs { "0", "-1", "1.5", "9007199254740992", "9007199254740993" } do
            cases[#cases + 1] = { burn_body('"amount":' .. v .. ',"nonce":2'), "bad_number",
                                  "amount" }
        end
        -- memos that are JSON but not text (issue 24 §3): bad_string, not malformed_json
        for _, v in ipairs { '"\\ud800"', '"a\\udc00b"', '"\255\254"', '"\237\160\128"' } do
            cases[#cases + 1] = { burn_body('"amount":1,"nonce":2,"memo":' .. v), "bad_string",
                                  "memo" }
        end
        for _, c in ipairs(cases) do
            local r, p = d:decode("burn", c[1])
            assert.is_nil(r, c[1])
            assert.equal(c[2], p.code, c[1])
            assert.equal(400, p.status)
            if c[3] then assert.equal(c[3], p.field or "", c[1]) end
            assert.truthy(dto.problem_body(p):find('"code":"' .. c[2] .. '"', 1, true))
        end
        local _, p = d:decode("burn", burn_body('"amount":1,"nonce":2,"x":1'))
        assert.equal(#('{"from":"' .. A .. '","asset":"USD","amount":1,"nonce":2,'), p.pos)
    end)

    host_it("refuses a body over the limit before decoding it", function()
        local small = dto.new { max_body = 64 }
        local _, p = small:decode("account", string.rep(" ", 65))
        assert.equal("oversize", p.code)
        assert.equal(413, p.status)
    end)
end)
