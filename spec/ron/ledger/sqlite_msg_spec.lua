-- A call's arguments handed to the offloaded SQLite driver's pool in place
-- (lua/ron/ledger/store/sqlite_msg.lua): what the pool reads from a message is what the
-- string path gives it (the same values, the same binds blocks byte for byte); a message
-- that does not hold together is refused; the buffers kept are bounded (I-7). The offloaded
-- driver runs the store conformance suite over messages inside the host
-- (spec/ron/ledger/store_host_spec.lua).
local ffi = require("ffi")
local msg = require("ron.ledger.store.sqlite_msg")
local blk = require("ron.ledger.store.sql_block")

local function id16(s) return (s .. ("\0"):rep(16)):sub(1, 16) end
local function id32(s) return (s .. ("\0"):rep(32)):sub(1, 32) end

local function posting(i)
    return { id = { transfer_id = id32("t" .. i), index = i }, account = id16("a" .. i),
             asset = { code = "USD", scale = 2 }, amount = i * 7 - 3, status = "active" }
end

-- the args as the pool reads them from a message written for method, and the bytes of
-- the message's blocks (the lists' blocks went there, not into strings on the loop)
local function round_trip(method, ...)
    local m = msg.take()
    local addr, len = msg.write(m, method, ...)
    assert.is_number(addr)
    local blocks = ffi.cast("const uint32_t *", ffi.cast("const uint8_t *", addr) + 4)[0]
    local out = { n = 0 }
    local function keep(...) out = { n = select("#", ...), ... } end
    keep(msg.read(addr, len, method))
    msg.give(m)
    return out, blocks
end

local function the_ops()
    local ps, more = {}, {}
    for i = 1, 40 do ps[i] = posting(i) end
    for i = 1, 3 do more[i] = posting(100 + i) end
    local ops = {
        { "insert_postings", ps, expect = 40 },
        { "append_events", "bk", { { transfer_id = id32("t"), kind = "k", data = "d" } },
          expect = 1, event = true },
        { "insert_postings", more, expect = 3 },
        { "deactivate_many", { { id = ps[1].id, consumed_by = id32("c") } }, "rid", expect = 1 },
        { "put_intents", { { key = "k1", outcome = { status = "committed",
                                                    transfer_id = id32("x") } } }, expect = 1 },
        { "insert_postings", {}, expect = 0 },
    }
    return ops, { flush = true }
end

describe("ron.ledger.store.sqlite_msg", function()
    it("gives the pool the string path's arguments, the blocks byte for byte", function()
        local ops, opts = the_ops()
        local want_ops, want_opts = blk.args("apply", ops, opts)
        local got, blocks = round_trip("apply", ops, opts)
        assert.equal(2, got.n)
        local sum = 0
        for _, op in ipairs(want_ops) do
            for k = 2, 3 do
                if blk.is(op[k]) and blk.rows(op[k]) > 0 then sum = sum + #op[k] end
            end
        end
        assert.equal(sum, blocks) -- (every non-empty block by reference, none as a string)
        assert.same(want_opts, got[2])
        assert.equal(#want_ops, #got[1])
        for i, op in ipairs(want_ops) do
            assert.same(op, got[1][i]) -- (blocks compared as strings: the same bytes)
        end
        assert.is_true(blk.is(got[1][1][2]) and blk.is(got[1][3][2]))
        assert.equal(40, blk.rows(got[1][1][2]))
        assert.is_true(blk.is(got[1][5][2]) and blk.is(got[1][5][3])) -- (two: plain, held)
        -- a primitive called alone, and one that has no list
        local l = { { id = posting(1).id, consumed_by = id32("c") } }
        local a, b = blk.args("deactivate_many", l, "rid")
        assert.same({ n = 2, a, b }, round_trip("deactivate_many", l, "rid"))
        assert.same({ n = 3, "x", 1, true }, round_trip("get_book", "x", 1, true))
        assert.same({ n = 0 }, round_trip("list_books"))
        -- the caller's lists untouched
        assert.equal(40, #ops[1][2])
        assert.is_nil(ops[1][2][blk.REF])
    end)

    it("refuses a reference outside its blocks, and values not where the blocks end",
       function()
        local ps = { posting(1) }
        local m = msg.take()
        local addr, len = msg.write(m, "insert_postings", ps, 256)
        local copy = ffi.new("uint8_t[?]", len)
        ffi.copy(copy, ffi.cast("const uint8_t *", addr), len)
        local caddr = tonumber(ffi.cast("uintptr_t", copy))
        assert.is_true(blk.is((msg.read(caddr, len, "insert_postings"))))
        -- the blocks' length one byte short: the values are not where it says
        local nb = ffi.cast("uint32_t *", copy + 4)
        nb[0] = nb[0] - 1
        assert.has_error(function() msg.read(caddr, len, "insert_postings") end,
                         "sqlite_msg: a message's values are not where its blocks end")
        nb[0] = nb[0] + 1
        -- a reference that points past the blocks
        local f = msg.take()
        local faddr, flen = msg.write(f, "insert_postings",
                                      { [blk.REF] = 4096, len = 16 }, 256)
        assert.has_error(function() msg.read(faddr, flen, "insert_postings") end,
                         "sqlite_msg: a block reference outside the message's blocks")
        assert.has_error(function() msg.read(caddr, 4, "insert_postings") end,
                         "sqlite_msg: not a message")
        msg.give(f)
        msg.give(m)
    end)

    it("says so when a value cannot be encoded (the caller passes a string instead)", function()
        local m = msg.take()
        assert.is_nil((msg.write(m, "get_book", function() end)))
        msg.give(m)
    end)

    it("keeps at most KEEP buffers, none grown past KEEP_BYTES (I-7)", function()
        local keep, bytes = msg.KEEP, msg.KEEP_BYTES
        msg.KEEP, msg.KEEP_BYTES = 2, 64 * 1024
        local ms = {}
        for i = 1, 5 do ms[i] = msg.take() end
        local ps = {}
        for i = 1, 2000 do ps[i] = posting(i) end
        assert.is_number((msg.write(ms[5], "insert_postings", ps, 4096)))
        assert.is_true(ms[5].size > 64 * 1024)
        for i = 1, 5 do msg.give(ms[i]) end
        assert.equal(2, msg.stats().kept)
        -- the big one was let go: the two kept are the first two given
        local a, b = msg.take(), msg.take()
        assert.is_true((a == ms[1] or a == ms[2]) and (b == ms[1] or b == ms[2]))
        msg.give(a)
        msg.give(b)
        msg.KEEP, msg.KEEP_BYTES = keep, bytes
    end)
end)
