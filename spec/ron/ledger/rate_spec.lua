-- ron.ledger.rate, ron.ledger.bigint and ron.ledger.usage (docs/LEDGER-RATING.md): every
-- golden vector of that page (parsed from it), the card's validation, the file sandbox,
-- split invariance of the rounding (LED-R-3) and the metadata's canonical form.
local S = require("support")
local rate = require("ron.ledger.rate")
local B = require("ron.ledger.bigint")
local usage = require("ron.ledger.usage")
local ffi = require("ffi")

local function read(path)
    local f = assert(io.open(path, "rb"))
    local s = f:read("*a")
    f:close()
    return s
end

local DOC = read("docs/LEDGER-RATING.md")

local function cards()
    local out = {}
    for name, body in DOC:gmatch("```rating%-card (%w+)\n(.-)```") do
        out[name] = assert(rate.new(assert(loadstring(body))(), "card " .. name))
    end
    return out
end

local GOOD = { version = "v1", currency = { code = "USD", scale = 2 },
               dimensions = { bytes = { price = 1 } } }
local function with(patch)
    local t = { version = GOOD.version, currency = GOOD.currency, dimensions = GOOD.dimensions }
    for k, v in pairs(patch) do t[k] = v end
    return t
end

describe("rate card golden vectors (LED-R-2..4, docs/LEDGER-RATING.md §3)", function()
    it("every vector line gives exactly the documented amount, usage and period", function()
        local C = cards()
        assert.is_truthy(C.A and C.B and C.C)
        local n = 0
        for line in DOC:match("```rating%-vectors\n(.-)```"):gmatch("[^\n]+") do
            local c, d, w, u, q, rest = line:match("^(%w+) (%S+) (%d+) (%d+) (%d+) %-> (.+)$")
            assert.is_truthy(c, "malformed vector line: " .. line)
            local r, err = C[c]:rate { dimension = d, window_start_s = tonumber(w), used = u,
                                        quantity = q }
            if rest == "RatingError" then
                assert.is_nil(r, line)
                assert.matches("^RatingError: ", err)
            else
                assert.is_table(r, line .. ": " .. tostring(err))
                assert.equal(rest, r.amount_text .. " " .. r.used_after .. " " .. r.period, line)
                -- the amount as a ledger amount: exact number or int64_t
                assert.equal(r.amount_text, (tostring(r.amount):gsub("LL$", "")))
            end
            n = n + 1
        end
        assert.is_true(n >= 20)
    end)

    it("the usage vector: intent, metadata, accounts and movements byte for byte", function()
        local C = cards()
        local block = DOC:match("```usage%-vectors\n(.-)```")
        local v, movements = {}, {}
        for line in block:gmatch("[^\n]+") do
            local k, rest = line:match("^(%S+) (.+)$")
            if k == "movement" then movements[#movements + 1] = rest else v[k] = rest end
        end
        local ws, wl = v.window:match("^(%d+) (%d+)$")
        local info = { tenant = v.tenant, dimension = v.dimension, seq = tonumber(v.seq),
                       window_start_s = tonumber(ws), window_len_s = tonumber(wl),
                       b3 = v.b3, prev_b3 = usage.unhex(v.prev_b3), quantity = v.quantity }
        local req = assert(usage.request(info, C[v.card], v.used))
        assert.equal(v.intent, usage.hex(req.intent))
        assert.equal(v.metadata, usage.hex(req.metadata))
        assert.equal(usage.unhex(v.b3), req.body_hash)
        local ids = {}
        for _, k in ipairs { "wallet", "receivable", "usage" } do
            ids[k] = usage.account(k, v.tenant)
            assert.equal(v[k], usage.hex(ids[k]), k)
        end
        for _, k in ipairs { "revenue", "usage_source" } do
            ids[k] = usage.account(k)
            assert.equal(v[k], usage.hex(ids[k]), k)
        end
        assert.equal(#movements, #req.movements)
        for i, line in ipairs(movements) do
            local from, to, code, scale, amount = line:match("^(%S+) (%S+) (%S+) (%d+) (%d+)$")
            local m = req.movements[i]
            assert.equal(ids[from], m.from)
            assert.equal(ids[to], m.to)
            assert.same({ code = code, scale = tonumber(scale) }, m.asset)
            assert.equal(tonumber(amount), m.amount)
        end
        assert.equal(ids.receivable, req.overdraft[ids.wallet])
        -- the metadata decodes back to the slice and the rating
        local m = assert(usage.decode_metadata(req.metadata))
        assert.equal(2, m.seq)
        assert.equal(300, m.window_len_s)
        assert.equal("golden-a.1", m.version)
        assert.equal("2023-11", m.period)
        assert.same({ "1", "999", "1000", "1" }, { m.quantity, m.used, m.used_after, m.amount })
        local k = assert(usage.decode_intent(req.intent))
        assert.equal("requests", k.dimension)
        assert.equal(2, k.seq)
    end)

    it("remembers account ids within its bound, the same ids after dropping them (I-7)",
       function()
        local first = {}
        for i = 1, 9000 do
            first[i] = usage.account(i % 2 == 0 and "wallet" or "usage", ("%016d"):format(i))
            local n, max = usage._account_memo()
            assert.is_true(n <= max)
        end
        for i = 1, 9000, 7 do
            local kind, t = i % 2 == 0 and "wallet" or "usage", ("%016d"):format(i)
            local want = usage.b3("ron-ledger usage account v1\0" .. kind .. "\0" .. t):sub(1, 16)
            assert.equal(want, first[i])
            assert.equal(want, usage.account(kind, t))
        end
        assert.are_not.equal(usage.account("wallet", ("%016d"):format(1)),
                             usage.account("usage", ("%016d"):format(1)))
    end)
end)

describe("rate card validation (LED-R-1)", function()
    local cases = {
        { "not a table", 42, "must return a table, got number" },
        { "unknown key", with { colour = 1 }, ": unknown key colour" },
        { "no version", with { version = false }, "version: must be 1..64 bytes" },
        { "bad version", with { version = "a b" }, "version: must be" },
        { "bad currency", with { currency = { code = "US D", scale = 2 } }, "currency: must be" },
        { "currency scale", with { currency = { code = "USD", scale = 19 } }, "currency: must" },
        { "period", with { period = "week" }, "period: must be \"window\", \"day\" or \"month\"" },
        { "no dimensions", with { dimensions = {} }, "dimensions: must be a table" },
        { "bad name", with { dimensions = { Bytes = { price = 1 } } },
          "a dimension name must match" },
        { "no price", with { dimensions = { bytes = {} } }, "dimensions.bytes: needs price" },
        { "both", with { dimensions = { bytes = { price = 1, tiers = { { price = 1 } } } } },
          "either price or tiers" },
        { "float price", with { dimensions = { bytes = { price = 0.5 } } },
          "dimensions.bytes.tiers[1].price: must be an integer" },
        { "negative price", with { dimensions = { bytes = { price = -1 } } }, ".price: must be" },
        { "per 0", with { dimensions = { bytes = { price = 1, per = 0 } } },
          "dimensions.bytes.per: must be an integer 1 .. 2147483647" },
        { "free float", with { dimensions = { bytes = { price = 1, free = 1.5 } } },
          "dimensions.bytes.free: must be a non-negative integer" },
        { "tier order", with { dimensions = { bytes = { tiers = { { upto = 10, price = 1 },
          { upto = 10, price = 1 }, { price = 1 } } } } },
          "dimensions.bytes.tiers[2].upto: must be greater than the previous tier's bound (10)" },
        { "no upto", with { dimensions = { bytes = { tiers = { { price = 1 }, { price = 2 } } } } },
          "tiers[1].upto: must be a non-negative integer" },
        { "last upto", with { dimensions = { bytes = { tiers = { { upto = 5, price = 1 } } } } },
          "tiers[1].upto: the last tier has no upper bound" },
        { "tier key", with { dimensions = { bytes = { tiers = { { price = 1, max = 3 } } } } },
          "tiers[1]: unknown key max" },
        { "long asset", with { dimensions = { a_very_long_dimension = { price = 1 } } },
          "dimensions.a_very_long_dimension.asset: the quantity's asset code must be" },
        { "asset clash", with { dimensions = { a = { price = 1, asset = "X" },
                                                b = { price = 1, asset = "X" } } },
          "asset code \"X\" is already used by dimensions.a" },
    }
    for _, c in ipairs(cases) do
        it("refuses: " .. c[1], function()
            local card, err = rate.new(c[2], "cards/t.lua")
            S.fails("^RateCardError: cards/t.lua: ", card, err)
            assert.is_truthy(err:find(c[3], 1, true), err)
        end)
    end

    it("accepts a good card and keeps its version", function()
        local card = assert(rate.new(GOOD, "x"))
        assert.equal("v1", card.version)
        assert.equal("month", card.period)
        assert.same({ code = "u:bytes", scale = 0 }, card:asset_of("bytes"))
    end)

    -- period_of remembers its answers per window start (issue 25), and forgets them all at
    -- its bound: the same text before, after and across the reset, for each period kind.
    it("names a window's period the same whether remembered or not", function()
        local want = {
            window = function(t) return ("w%d"):format(t) end,
            day = function(t) return os.date("!%Y-%m-%d", t) end,
            month = function(t) return os.date("!%Y-%m", t) end,
        }
        for kind, f in pairs(want) do
            local card = assert(rate.new(with { period = kind }, "x"))
            for round = 1, 2 do
                for i = 0, 5000 do
                    local t = 1699999200 + i * 7260
                    assert.equal(f(t), card:period_of(t), kind .. " round " .. round)
                end
            end
            assert.is_true(card.nperiods <= 4096)
        end
    end)
end)

describe("rate card files", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. dir))
    local function card_file(name, text)
        local p = dir .. "/" .. name
        local f = assert(io.open(p, "wb"))
        f:write(text)
        f:close()
        return p
    end
    teardown(function() os.execute("rm -rf " .. dir) end)

    it("loads a file that computes its table", function()
        local p = card_file("ok.lua", [[
local tiers = {}
for i = 1, 3 do tiers[i] = { upto = i * 1000, price = 10 - i } end
tiers[4] = { price = 1 }
return { version = "file.1", currency = { code = "USD", scale = 2 },
         dimensions = { bytes = { tiers = tiers } } }]])
        local card = assert(rate.load(p))
        assert.equal("file.1", card.version)
        assert.equal(4, #card.dims.bytes.tiers)
    end)

    it("runs the file without globals (no os, no io, no require)", function()
        local p = card_file("os.lua", "os.exit(3) return {}")
        local card, err = rate.load(p)
        S.fails("^RateCardError: .*os.lua:1: attempt to index global 'os'", card, err)
    end)

    it("stops a card that never returns (instruction budget)", function()
        local card, err = rate.load(card_file("loop.lua", "while true do end"))
        S.fails("instruction budget exceeded", card, err)
    end)

    it("names a syntax error and a missing file", function()
        local card, err = rate.load(card_file("syntax.lua", "return {"))
        S.fails("^RateCardError: .*syntax.lua:1:", card, err)
        card, err = rate.load(dir .. "/none.lua")
        S.fails("^RateCardError: cannot read", card, err)
    end)
end)

describe("split invariance (LED-R-3)", function()
    it("a period's slices are charged exactly C(total), however it is sliced", function()
        S.seeded("RA_SEED", 20261125, "rate_spec split invariance seed ")
        for _ = 1, 200 do
            local tiers, bound = {}, 0
            for i = 1, math.random(1, 4) do
                if i > 1 then
                    bound = bound + math.random(1, 5000)
                    tiers[i - 1].upto = bound
                end
                tiers[i] = { price = math.random(0, 2147483647) }
            end
            local card = assert(rate.new({ version = "p", currency = { code = "X", scale = 0 },
                dimensions = { d = { per = math.random(1, 100000), free = math.random(0, 3000),
                                     tiers = tiers } } }, "prop"))
            local used, total = B.from(0), B.from(0)
            for _ = 1, math.random(1, 40) do
                local q = math.random(0, 3000)
                local r = assert(card:rate { dimension = "d", window_start_s = 0, used = used,
                                             quantity = q })
                total = B.add(total, B.from(r.amount_text))
                used = B.from(r.used_after)
            end
            local whole = assert(card:rate { dimension = "d", window_start_s = 0, used = 0,
                                             quantity = used })
            assert.equal(whole.amount_text, B.tostring(total))
        end
    end)
end)

-- The fast path (issue 25): C(Q) in Lua numbers below 2^52, the bigint way the definition.
-- Random cards (bounds small, near 2^52 and past 2^64; prices up to 2^31 - 1), quantities
-- picked around each card's qmax (the fast path's edge) and far below it: card:rate's whole
-- result is the same both ways, and the fast path took most of the cases.
describe("the fast path (issue 25)", function()
    local function big_or_small()
        local r = math.random(1, 4)
        if r == 1 then return math.random(1, 5000) end
        if r == 2 then return math.random(1, 2 ^ 31) * math.random(1, 2 ^ 20) end
        if r == 3 then return math.random(2 ^ 50, 2 ^ 52) end
        return tostring(math.random(1, 9)) .. string.rep("7", 20) -- past 2^64
    end
    local function random_card()
        local tiers, bound = {}, B.from(0)
        for i = 1, math.random(1, 4) do
            if i > 1 then
                bound = B.add(bound, B.from(big_or_small()))
                tiers[i - 1].upto = B.tostring(bound)
            end
            tiers[i] = { price = math.random(1, 3) == 1 and math.random(0, 20)
                                 or math.random(0, 2147483647) }
        end
        local free = math.random(1, 3) == 1 and 0 or big_or_small()
        return assert(rate.new({ version = "f", currency = { code = "X", scale = 0 },
            dimensions = { d = { per = math.random(1, 3) == 1 and 1 or math.random(1, 2 ^ 31 - 1),
                                 free = free, tiers = tiers } } }, "fast"))
    end
    local function both(card, used, q)
        local o = { dimension = "d", window_start_s = 0, used = used, quantity = q }
        rate.fast = false
        local ok1, big, e1 = pcall(card.rate, card, o)
        rate.fast = true
        local ok2, fast, e2 = pcall(card.rate, card, o)
        assert.equal(ok1, ok2)
        assert.same(big, fast)
        assert.equal(e1, e2)
    end

    it("rates exactly as the bigint way, on both sides of its edge (property)", function()
        S.seeded("RA_FAST_SEED", 20261201, "rate_spec fast path seed ")
        local fast, n = 0, 0
        for _ = 1, 300 do
            local card = random_card()
            local qmax = card.dims.d.fast.qmax
            for _ = 1, 20 do
                local r = math.random(1, 4)
                local used, q
                if r == 1 then -- at the edge: the last sums below qmax and the first past it
                    used = math.random(0, qmax - 1)
                    q = qmax - used - math.random(0, 2)
                elseif r == 2 then
                    used, q = math.random(0, 10 ^ 6), math.random(0, 10 ^ 6)
                elseif r == 3 then
                    used = math.random(0, qmax - 1)
                    q = math.random(0, qmax - 1 - used)
                else -- decimal text, up to 20 digits
                    used = tostring(math.random(0, 10 ^ 9)) .. tostring(math.random(0, 10 ^ 9))
                    q = tostring(math.random(0, 10 ^ 6))
                end
                if tonumber(q) >= 0 then
                    n = n + 1
                    local un, qn = tonumber(used), tonumber(q)
                    if #tostring(used) <= 15 and un + qn < qmax then fast = fast + 1 end
                    both(card, used, q)
                end
            end
        end
        print(string.format("rate_spec fast path: %d of %d cases fast", fast, n))
        assert.is_true(fast > n / 2 and fast < n)
    end)

    it("C(Q) in numbers is the bigint C(Q) just below qmax, with the largest prices", function()
        local card = assert(rate.new({ version = "f", currency = { code = "X", scale = 0 },
            dimensions = { d = { per = 2147483647, free = 3, tiers = {
                { upto = 5, price = 2147483647 }, { upto = "99999999999999999999999",
                                                    price = 2147483646 }, { price = 0 } } } } },
            "edge"))
        local d = card.dims.d
        for k = 1, 50 do
            local q = d.fast.qmax - k
            assert.equal(B.tostring(rate._charge(d, B.from(q))),
                         string.format("%d", rate._charge_n(d.fast, q)))
        end
        assert.is_true(d.fast.qmax * 2147483647 >= 2 ^ 52 - 2147483647)
        -- the floor of a double division below 2^52 (rate.lua's argument), against uint64_t's
        local u64 = ffi.typeof("uint64_t")
        math.randomseed(11)
        for _ = 1, 100000 do
            local per = math.random(1, 3) == 1 and math.random(1, 1000)
                        or math.random(1, 2147483647)
            local q = math.random(0, math.floor(2 ^ 52 / per))
            local sum = math.min(q * per + math.random(0, per - 1), 2 ^ 52 - 1)
            assert.equal(tonumber(u64(sum) / per), math.floor(sum / per))
        end
    end)
end)

describe("bigint", function()
    it("agrees with uint64_t arithmetic below 2^64", function()
        math.randomseed(7)
        local u64 = ffi.typeof("uint64_t")
        for _ = 1, 2000 do
            local a = u64(math.random(0, 2 ^ 31)) * math.random(0, 2 ^ 31)
                      + math.random(0, 2 ^ 30)
            local k = math.random(1, B.SMALL_MAX)
            local ba = B.from(a)
            assert.equal((tostring(a):gsub("ULL$", "")), B.tostring(ba))
            local q, r = B.div_small(ba, k)
            assert.equal((tostring(a / k):gsub("ULL$", "")), B.tostring(q))
            assert.equal(tonumber(a % k), r)
            assert.equal(a, B.to_u64(ba))
            local small = math.random(0, 2 ^ 11) -- a / 4096 * small stays below 2^64
            assert.equal((tostring(a / 4096 * small):gsub("ULL$", "")),
                         B.tostring(B.mul_small(B.div_small(ba, 4096), small)))
        end
        assert.is_nil(B.to_u64(B.add(B.U64_MAX, B.from(1))))
        assert.is_nil(B.to_amount(B.add(B.I64_MAX, B.from(1))))
        assert.equal("9223372036854775807", (tostring(B.to_amount(B.I64_MAX)):gsub("LL$", "")))
        assert.equal(9007199254740991, B.to_amount(B.from("9007199254740991")))
        assert.has_error(function() B.from(-1) end)
        assert.has_error(function() B.from(1.5) end)
        assert.has_error(function() B.from("12a") end)
    end)

    -- from's decimal text is read by a byte loop (issue 25), not by patterns: the same
    -- limbs as the text's own digits, leading zeros dropped, anything else refused.
    it("reads decimal text: leading zeros, limb edges, bad text refused", function()
        local cases = { ["0"] = "0", ["000"] = "0", ["007"] = "7", ["1000000"] = "1000000",
                        ["000001000000"] = "1000000", ["999999"] = "999999",
                        ["0000000000000000000000001"] = "1",
                        ["18446744073709551616"] = "18446744073709551616",
                        ["00018446744073709551616"] = "18446744073709551616" }
        for text, want in pairs(cases) do assert.equal(want, B.tostring(B.from(text))) end
        assert.same({ 0 }, B.from("0000"))
        assert.same({ 0, 1 }, B.from("0001000000"))
        for _, bad in ipairs { "", " 1", "1 ", "-1", "+1", "1e5", "0x10", "12a", "\0" } do
            assert.has_error(function() B.from(bad) end, nil, bad)
        end
    end)

    -- B.dec: the one rendering of an integer that names money or order (issue 24). Checked
    -- against int64_t's own decimal (a conversion that never goes through a double).
    it("dec is exact for numbers in 10^13..2^53 and for int64_t/uint64_t (property)", function()
        local seed = 5309
        print("bigint dec property: math.randomseed(" .. seed .. ")")
        math.randomseed(seed)
        local i64 = ffi.typeof("int64_t")
        local function want(v) return (tostring(i64(v)):gsub("LL$", "")) end
        local vals = { 1e13, 1e14, 1e14 + 1, 100000000000002, 2 ^ 53 - 1, 2 ^ 53, 0, 1 }
        for _ = 1, 5000 do
            local v = math.floor(1e13 + math.random() * (2 ^ 53 - 1e13))
            vals[#vals + 1] = v
            vals[#vals + 1] = -v
        end
        for _, v in ipairs(vals) do
            assert.equal(want(v), B.dec(v))
            assert.equal(want(v), B.dec(i64(v)))
        end
        assert.are_not.equal(tostring(1e14 + 1), B.dec(1e14 + 1)) -- (why dec exists)
        assert.equal("18446744073709551615", B.dec(ffi.new("uint64_t", 0) - 1))
        assert.equal("-9223372036854775808", B.dec(-2 ^ 63))
        assert.equal("12", B.dec("12"))
        assert.equal("123456789012345678901234", B.dec(B.from("123456789012345678901234")))
        assert.has_error(function() B.dec(1.5) end)
        assert.has_error(function() B.dec(0 / 0) end)
        assert.has_error(function() B.dec(1 / 0) end)
        assert.has_error(function() B.dec("1e5") end)
        assert.has_error(function() B.dec(nil) end)
    end)
end)

describe("usage metadata and intent (LED-R-5, LED-R-6)", function()
    local m = { tenant = "123e4567-e89b-12d3-a456-426614174000", dimension = "bytes", seq = 7,
                window_start_s = 1699999200, window_len_s = 60, b3 = string.rep("\1", 32),
                prev_b3 = string.rep("\2", 32), version = "v", period = "2023-11",
                quantity = "18446744073709551615", used = "0",
                used_after = "18446744073709551615", amount = "5" }
    it("decodes exactly what it encodes and nothing else", function()
        local bytes = usage.encode_metadata(m)
        -- (the bytes of the layout in usage.lua's encode_metadata, field by field)
        assert.equal("554d01" .. "123e4567e89b12d3a456426614174000" .. "05" .. "6279746573"
                     .. "0000000000000007" .. "000000006553ede0" .. "0000003c"
                     .. string.rep("01", 32) .. string.rep("02", 32) .. "01" .. "76"
                     .. "07" .. "323032332d3131" .. "ffffffffffffffff" .. "0000000000000000"
                     .. "ffffffffffffffff" .. "0000000000000005", usage.hex(bytes))
        local d = assert(usage.decode_metadata(bytes))
        assert.equal("18446744073709551615", d.quantity)
        assert.equal(1699999200, d.window_start_s)
        assert.equal(usage.encode_metadata(d), bytes)
        for cut = 0, #bytes - 1 do
            assert.is_nil(usage.decode_metadata(bytes:sub(1, cut)), "truncated at " .. cut)
        end
        assert.is_nil(usage.decode_metadata(bytes .. "\0"))
        assert.is_nil(usage.decode_metadata("UM\2" .. bytes:sub(4)))
        assert.has_error(function()
            local bad = {}
            for k, v in pairs(m) do bad[k] = v end
            bad.quantity = "18446744073709551616"
            usage.encode_metadata(bad)
        end)
    end)
    it("refuses a bad dimension however many good ones it has met", function()
        local t = usage.tenant_raw(m.tenant)
        for i = 1, 5000 do usage.intent(t, "d" .. i, 1, m.b3) end
        for _, bad in ipairs { "", "Bytes", "1x", "a-b", string.rep("a", 33), 7 } do
            assert.has_error(function() usage.intent(t, bad, 1, m.b3) end, nil, tostring(bad))
            assert.has_error(function()
                local b = {}
                for k, v in pairs(m) do b[k] = v end
                b.dimension = bad
                usage.encode_metadata(b)
            end, nil, tostring(bad))
        end
    end)
    it("intent keys are binary-safe and distinct per field", function()
        local t = usage.tenant_raw(m.tenant)
        local a = usage.intent(t, "ab", 1, m.b3)
        assert.not_equal(a, usage.intent(t, "a", 1, m.b3))
        assert.not_equal(a, usage.intent(t, "ab", 2, m.b3))
        assert.equal(2 + 16 + 1 + 2 + 8 + 32, #a)
        local d = assert(usage.decode_intent(a))
        assert.equal("ab", d.dimension)
        assert.is_nil(usage.decode_intent(a .. "x"))
    end)
    it("a free slice still moves its units, and nothing else", function()
        local card = assert(rate.new({ version = "f", currency = { code = "USD", scale = 2 },
            dimensions = { bytes = { free = 100, price = 1 } } }, "f"))
        local req = assert(usage.request({ tenant = m.tenant, dimension = "bytes", seq = 1,
            window_start_s = 0, window_len_s = 60, b3 = m.b3, prev_b3 = usage.ZERO32,
            quantity = "10" }, card, "0"))
        assert.equal(1, #req.movements)
        assert.equal(10, req.movements[1].amount)
        local r, err = usage.request({ tenant = m.tenant, dimension = "bytes", seq = 1,
            window_start_s = 0, window_len_s = 60, b3 = m.b3, prev_b3 = usage.ZERO32,
            quantity = "9223372036854775808" }, card, "0")
        S.fails("RatingError: .* exceed 2%^63 %- 1", r, err)
    end)
end)
