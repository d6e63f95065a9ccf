-- Slice objects (ron/accounting/slice.lua); the contract fields themselves are covered
-- with rollover in spec/ron/accounting_spec.lua.
local S = require("support")
local ffi = require("ffi")
local acct = require("ron.accounting")
local slice = require("ron.accounting.binding.slice")

describe("ron.accounting.binding.slice", function()
    local m, s
    before_each(function()
        local clock = S.clock(S.T0)
        m = assert(acct.open(S.cfg { clock = clock.fn }))
        for i = 1, 3 do assert(m:record(S.TENANT_A, "s" .. i, "cpu_units", i)) end
        s = assert(m:rollover(S.T0 + 60))[1]
    end)
    after_each(function() m:close() end)

    it("builds rows once, on first access", function()
        assert.is_nil(rawget(s, "rows"))
        local rows = s.rows
        assert.equal(3, #rows)
        assert.equal(rows, s.rows)
        assert.equal(3, s:row_count())
    end)

    it("prints as a one-line summary", function()
        local text = tostring(s)
        assert.matches(S.TENANT_A .. "/cpu_units", text, 1, true)
        assert.matches("seq 1 b3 " .. s.b3, text, 1, true)
    end)

    it("holds its own C reference", function()
        local ptr = slice.ptr(s)
        assert.is_true(ffi.istype("ra_slice_t *", ptr))
        assert.is_nil(slice.ptr({}))
        assert.is_true(slice.is_slice(s))
        assert.is_false(slice.is_slice({}))
        -- ACKing drops the ring's reference; the object's own keeps the bytes valid.
        assert.is_true(m:ack(s))
        collectgarbage()
        assert.equal(S.b3sum(s:encode()), s.b3)
    end)

    it("raises when a method is called without a slice (misuse)", function()
        assert.has_error(function() s.encode({}) end,
                         "ron.accounting: expected a slice (use slice:method(), not slice.method())")
        assert.has_error(function() s.row_count(nil) end)
    end)

    it("formats tenants and hex like the core", function()
        local t = assert(acct.tenant(S.TENANT_A:upper()))
        assert.equal(S.TENANT_A, slice.tenant_string(t))
        assert.equal("00ff10", slice.hex(ffi.new("uint8_t[3]", { 0, 255, 16 }), 3))
    end)
end)
