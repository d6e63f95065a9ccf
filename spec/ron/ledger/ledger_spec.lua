-- ron.ledger, the Lua binding of libronledger (docs/LEDGER.md): the golden vectors of
-- docs/LEDGER-FORMAT.md rebuilt from Lua tables (LED-15, LED-2 with an independent
-- `openssl dgst`), strict decoding (LED-1), selection (LED-10), validation (LED-5..LED-9,
-- LED-12), amounts (LED-4) and the misuse/refusal conventions.
local S = require("support")
local ledger = require("ron.ledger")

local function id16(first)
    local t = {}
    for i = 0, 15 do t[#t + 1] = string.char(first + i) end
    return table.concat(t)
end

local function seq32()
    local t = {}
    for i = 0, 31 do t[#t + 1] = string.char(i) end
    return table.concat(t)
end

local ALICE, BOB, WORLD = id16(0xa0), id16(0xb0), id16(0x10)
local USD = { code = "USD", scale = 2 }

-- The ```golden blocks of the format page: name → { kind, bytes, id (hex), error }.
local function doc_vectors()
    local f = assert(io.open(S.root .. "docs/LEDGER-FORMAT.md", "rb"))
    local text = f:read("*a")
    f:close()
    local vectors = {}
    for block in text:gmatch("```golden\n(.-)```") do
        local v = { hex = {} }
        for line in block:gmatch("[^\n]+") do
            local name, kind = line:match("^vector (%S+) (%S+)$")
            if name then
                v.name, v.kind = name, kind
            elseif line:match("^id ") then
                v.id = line:match("^id (%x+)$")
            elseif line:match("^error ") then
                v.error = line:match("^error (%S+)$")
            elseif line ~= "end" then
                v.hex[#v.hex + 1] = line:gsub("%s", "")
            end
        end
        v.bytes = table.concat(v.hex):gsub("%x%x", function(h) return string.char(tonumber(h, 16)) end)
        vectors[v.name] = v
    end
    return vectors
end

local function openssl_sha256d(bytes)
    local path = S.tmp_file(bytes)
    local out, rc = S.run("openssl dgst -sha256 -binary " .. path .. " | openssl dgst -sha256 -r")
    os.remove(path)
    assert(rc == 0, out)
    return out:match("^(%x+)")
end

local PAY = {
    inputs = { { transfer_id = seq32(), index = 0 }, { transfer_id = seq32(), index = 1 } },
    outputs = { { account = BOB, asset = USD, amount = 700 },
                { account = ALICE, asset = USD, amount = 550 } },
    pins = { { account = ALICE, version = 1 }, { account = BOB, version = 2 } },
    metadata = '{"memo":"invoice 42"}',
    intent = "pay:alice:nonce:7",
}

local ISSUE = {
    outputs = { { account = ALICE, asset = USD, amount = 1000 },
                { account = WORLD, asset = USD, amount = -1000 } },
    pins = { { account = WORLD, version = 1 }, { account = ALICE, version = 1 } },
    intent = "deposit:bank-ref-0001",
}

describe("ron.ledger golden vectors (LED-15)", function()
    local doc = doc_vectors()

    it("rebuilds every positive vector from Lua tables, byte for byte", function()
        assert.are.equal(doc["asset-usd"].bytes, ledger.encode_asset(USD))
        assert.are.equal(doc["asset-usage-bytes"].bytes,
                         ledger.encode_asset({ code = "usage:bytes", scale = 0 }))
        assert.are.equal(doc["account-alice"].bytes, ledger.encode_account({ id = ALICE }))
        assert.are.equal(doc["account-bob-capped-frozen"].bytes, ledger.encode_account({
            id = BOB, version = 3, policy = "capped", floor = -5000, status = "frozen" }))
        assert.are.equal(doc["posting-alice"].bytes, ledger.encode_posting({
            id = { transfer_id = seq32(), index = 1 }, account = ALICE, asset = USD,
            amount = 1250 }))
        assert.are.equal(doc["transfer-pay"].bytes, ledger.encode_transfer(PAY))
        assert.are.equal(doc["transfer-issue"].bytes, ledger.encode_transfer(ISSUE))
    end)

    it("LED-2: transfer ids equal the doc's and an independent openssl dgst", function()
        for name, t in pairs({ ["transfer-pay"] = PAY, ["transfer-issue"] = ISSUE }) do
            local id = ledger.hex(assert(ledger.transfer_id(t)))
            assert.are.equal(doc[name].id, id)
            assert.are.equal(openssl_sha256d(doc[name].bytes), id)
        end
    end)

    it("LED-1: decodes the positive vectors back and refuses the negative ones by name", function()
        local n_pos, n_neg = 0, 0
        for name, v in pairs(doc) do
            local value, err = ledger["decode_" .. v.kind](v.bytes)
            if v.error then
                assert.is_nil(value, name)
                assert.are.equal(v.error, err:match("^(%w+):"), name)
                n_neg = n_neg + 1
            else
                assert.is_table(value, name .. ": " .. tostring(err))
                assert.are.equal(v.bytes, ledger["encode_" .. v.kind](value), name)
                n_pos = n_pos + 1
            end
        end
        assert.is_true(n_pos >= 7 and n_neg >= 5)
        local t = ledger.decode_transfer(doc["transfer-pay"].bytes)
        assert.are.equal(700, t.outputs[1].amount)
        assert.are.equal("pay:alice:nonce:7", t.intent)
    end)
end)

describe("ron.ledger.select_postings (LED-10)", function()
    local function p(tx, index, amount, status)
        return { id = { transfer_id = string.rep(string.char(tx), 32), index = index },
                 account = ALICE, asset = USD, amount = amount, status = status }
    end
    local postings = { p(5, 0, 100), p(4, 0, 500), p(3, 0, 300), p(2, 0, 300),
                       p(1, 0, 800, "pending_inactive") }

    it("picks largest first, ties by posting id, and reports the change", function()
        local picks, sum, change = ledger.select_postings(postings, ALICE, USD, 700)
        assert.are.same({ 2, 4 }, picks)
        assert.are.equal(800, sum)
        assert.are.equal(100, change)
    end)

    it("returns InsufficientFunds with the available sum", function()
        local picks, err, code, avail = ledger.select_postings(postings, ALICE, USD, 1201)
        S.fails("^InsufficientFunds: ", picks, err)
        assert.are.equal(ledger.ERR.InsufficientFunds, code)
        assert.are.equal(1200, avail)
    end)
end)

describe("ron.ledger.validate_and_plan (LED-5..LED-9)", function()
    local function state()
        local accounts = { { id = ALICE }, { id = BOB, version = 2, policy = "capped", floor = -2000 } }
        local consumed = {
            { id = PAY.inputs[1], account = ALICE, asset = USD, amount = 1000 },
            { id = PAY.inputs[2], account = ALICE, asset = USD, amount = 250 },
        }
        local balances = { { account = ALICE, asset = USD, amount = 1250 },
                           { account = BOB, asset = USD, amount = 300 } }
        return accounts, consumed, balances
    end

    it("plans a payment: deltas per pair and the transfer id", function()
        local plan = assert(ledger.validate_and_plan(PAY, state()))
        assert.are.equal(ledger.transfer_id(PAY), plan.transfer_id)
        assert.are.equal(2, #plan.deltas)
        assert.are.same({ 1250, 1250, 550, 550 }, { plan.deltas[1].before, plan.deltas[1].debit,
                                                    plan.deltas[1].credit, plan.deltas[1].after })
        assert.are.equal(1000, plan.deltas[2].after)
        -- the output postings it creates (LED-3)
        local p = ledger.output_posting(PAY, plan.transfer_id, 2)
        assert.are.equal(1, p.id.index)
        assert.are.equal(550, p.amount)
    end)

    it("refuses with stable codes: frozen, version, floor, conservation", function()
        local accounts, consumed, balances = state()
        accounts[2].status = "frozen"
        local plan, err, code = ledger.validate_and_plan(PAY, accounts, consumed, balances)
        assert.is_nil(plan)
        assert.are.equal(ledger.ERR.AccountFrozen, code)
        assert.matches("^AccountFrozen: ", err)

        accounts, consumed, balances = state()
        accounts[2].version = 3
        assert.are.equal(ledger.ERR.AccountVersionMismatch,
                         select(3, ledger.validate_and_plan(PAY, accounts, consumed, balances)))

        accounts, consumed, balances = state()
        balances[1].amount = 600 -- alice spends 12.50 of a 6.00 balance
        assert.are.equal(ledger.ERR.InsufficientFunds,
                         select(3, ledger.validate_and_plan(PAY, accounts, consumed, balances)))

        accounts, consumed, balances = state()
        consumed[2].amount = 251
        assert.are.equal(ledger.ERR.ConservationViolated,
                         select(3, ledger.validate_and_plan(PAY, accounts, consumed, balances)))
    end)
end)

describe("ron.ledger amounts (LED-4) and conventions", function()
    it("adds exactly and refuses overflow", function()
        assert.are.equal(3, ledger.amount_add(1, 2))
        local max = 9223372036854775807LL
        local r, err, code = ledger.amount_add(max, 1)
        S.fails("^AmountOverflow", r, err)
        assert.are.equal(ledger.ERR.AmountOverflow, code)
        assert.are.equal(max, ledger.amount_sub(max, 0))
        assert.are.equal("cdata", type(ledger.amount_sub(max, 0)))
        -- numbers past 2^53 are the core's (a double would round 2^53 + 1 to 2^53)
        assert.are.equal(9007199254740993LL, ledger.amount_add(2 ^ 53, 1))
        assert.are.equal(-9007199254740993LL, ledger.amount_sub(-2 ^ 53, 1))
        assert.are.equal("number", type(ledger.amount_add(2 ^ 53 - 2, 1)))
        assert.are.equal(2 ^ 53 - 1, ledger.amount_add(2 ^ 53 - 2, 1))
        assert.are.equal(-2, ledger.amount_sub(5, 7))
    end)

    it("raises on misuse: non-integer amounts, wrong id lengths, unknown enums", function()
        assert.has_error(function() ledger.amount_add(1.5, 1) end)
        assert.has_error(function() ledger.encode_account({ id = "short" }) end)
        assert.has_error(function() ledger.encode_account({ id = ALICE, policy = "lax" }) end)
    end)

    it("returns refusals of the core as nil, err, code", function()
        local bytes, err, code = ledger.encode_asset({ code = "U S", scale = 2 })
        assert.is_nil(bytes)
        assert.are.equal(ledger.ERR.InvalidArgument, code)
        assert.matches("^InvalidArgument", err)
        local t, e2 = ledger.decode_transfer("\1T")
        S.fails("^Truncated", t, e2)
    end)
end)
