-- The binds blocks of the offloaded SQLite driver (lua/ron/ledger/store/sql_block.lua,
-- docs/LEDGER.md "The C batch path", step 2): the list primitives' rows crossing to the pool
-- as one string and bound there from its bytes.
--   - the oracle: a block binds exactly the values its primitive binds from the list;
--   - the Store conformance suite once more on SQLite, every call's lists passed as blocks
--     as the offloaded driver passes them (the offloaded driver itself runs the suite with
--     blocks on inside the host, spec/ron/ledger/store_host_spec.lua);
--   - the ops of a phase: a new list, the caller's untouched; what is not a list left as is.
local S = require("support")
local ffi = require("ffi")
local conformance = require("ron.ledger.store_conformance")
local store = require("ron.ledger.store")
local blk = require("ron.ledger.store.sql_block")
local sb = require("ron.ledger.store.sql_binds")
local claims = require("ron.ledger.store.sql_claims")

local function id16(s) return (s .. ("\0"):rep(16)):sub(1, 16) end
local function id32(s) return (s .. ("\0"):rep(32)):sub(1, 32) end

-- the values bind() gives SQLite, in order: { "null" } | { "int", n } | { "blob", s }
local function bound(block)
    local got = {}
    local C = {
        sqlite3_bind_null = function(_, i) got[i] = { "null" } return 0 end,
        sqlite3_bind_int64 = function(_, i, v) got[i] = { "int", tonumber(v) } return 0 end,
        sqlite3_bind_blob = function(_, i, p, n)
            got[i] = { "blob", ffi.string(p, n) }
            return 0
        end,
    }
    assert.equal(0, blk.bind(C, nil, block))
    return got
end

-- what sqlite_conn's bind gives SQLite for a binds table
local function from_table(binds)
    local want = {}
    for i = 1, binds.n or #binds do
        local v = binds[i]
        if v == nil then want[i] = { "null" }
        elseif type(v) == "string" then want[i] = { "blob", v }
        elseif type(v) == "boolean" then want[i] = { "int", v and 1 or 0 }
        else want[i] = { "int", tonumber(v) } end
    end
    return want
end

-- a deterministic PRNG (printed seed)
local SEED = 20261202
local function prng(seed)
    local s = seed
    return function(n)
        s = (s * 16807) % 2147483647
        return s % n
    end
end

local function posting(r, i)
    return { id = { transfer_id = id32("t" .. r(1000)), index = i }, account = id16("a" .. r(50)),
             asset = { code = r(2) == 0 and "USD" or "EUR", scale = 2 },
             amount = r(3) == 0 and ffi.new("int64_t", -2 ^ 60) or r(100000) - 50000,
             status = ({ "active", "pending_inactive", "inactive" })[r(3) + 1],
             reservation = r(2) == 0 and id32("rid") or nil,
             consumed_by = r(4) == 0 and id32("c" .. r(9)) or nil,
             created_by = r(2) == 0 and id32("cb") or nil }
end

describe("ron.ledger.store.sql_block", function()
    it("binds exactly the values the primitive binds from its list (seed " .. SEED .. ")",
       function()
        print("sql_block_spec seed " .. SEED)
        local r = prng(SEED)
        for round = 1, 50 do
            local ps, ins, tr, st, dv = {}, {}, {}, {}, {}
            for i = 1, 1 + r(40) do
                ps[i] = posting(r, i - 1)
                local key = (r(2) == 0 and claims.PREFIX or "") .. "key-" .. round .. "-" .. i
                ins[i] = { key = key, outcome = {
                    status = ({ "committed", "rejected", "claimed" })[r(3) + 1],
                    transfer_id = r(2) == 0 and id32("tid" .. i) or nil,
                    code = r(2) == 0 and r(40) or nil, message = r(2) == 0 and "m" .. i or nil,
                    body_hash = r(2) == 0 and id32("h") or nil } }
                local inv = {}
                for j = 1, r(4) do inv[j] = id16("inv" .. j) end
                tr[i] = { rec = { id = id32("x" .. i), bytes = ("b"):rep(r(300)),
                                  intent = "i" .. i, book = "bk", created_at_ms = r(1e9),
                                  metadata = r(2) == 0 and "{}" or nil }, involved = inv }
                st[i] = { tenant = "t" .. i, dimension = "d", seq = r(1e6), b3 = id32("b"),
                          prev_seq = r(1e6), prev_b3 = "" }
                dv[i] = { id = ps[i].id, consumed_by = id32("by" .. i) }
            end
            local a = blk.FORMS.insert_postings { "insert_postings", ps }
            assert.equal(#ps, blk.rows(a))
            assert.same(from_table(sb.postings(ps)), bound(a))
            local t1, t2 = blk.FORMS.store_transfers { "store_transfers", tr }
            local tb, ab, m = sb.transfers(tr)
            assert.same(from_table(tb), bound(t1))
            assert.same(from_table(ab), bound(t2))
            assert.equal(m, blk.rows(t2))
            local p1, p2 = blk.FORMS.put_intents { "put_intents", ins }
            local plain, held = sb.intents_split({ dialect = "sqlite" }, ins)
            assert.same(from_table(sb.intents(plain)), bound(p1))
            assert.same(from_table(sb.intents(held, function(k)
                return claims.intent_of({ dialect = "sqlite" }, k)
            end)), bound(p2))
            assert.equal(#plain + #held, #ins)
            assert.same(from_table(sb.streams("advance_streams", st, 6)),
                        bound(blk.FORMS.advance_streams { "advance_streams", st }))
            assert.same(from_table(sb.deactivate(dv, "rid")),
                        bound(blk.FORMS.deactivate_many { "deactivate_many", dv, "rid" }))
        end
    end)

    it("tells a claim key from an intent (claims.intent_of)", function()
        local sq, pg = { dialect = "sqlite" }, { dialect = "postgres" }
        local p = claims.PREFIX
        assert.equal("intent", claims.intent_of(sq, p .. "intent"))
        assert.equal("\255\255x", claims.intent_of(sq, p .. "\255\255x")) -- (an 0xff intent)
        assert.is_nil(claims.intent_of(sq, p:sub(2) .. "x" .. "intent"))     -- 255 of them
        assert.is_nil(claims.intent_of(sq, p:sub(1, 100) .. "x" .. p:sub(102) .. "i"))
        assert.is_nil(claims.intent_of(sq, p))                              -- no intent
        assert.is_nil(claims.intent_of(sq, "intent"))
        assert.is_nil(claims.intent_of(pg, p .. "intent"))                  -- (SQLite's only)
    end)

    it("refuses a block that does not end where its values do", function()
        local b = blk.encode(1, { n = 3, "abc", 7, nil })
        local C = { sqlite3_bind_null = function() return 0 end,
                    sqlite3_bind_int64 = function() return 0 end,
                    sqlite3_bind_blob = function() return 0 end }
        assert.equal(0, blk.bind(C, nil, b))
        assert.equal(21, blk.bind(C, nil, b:sub(1, -2)))     -- SQLITE_MISUSE
        assert.equal(21, blk.bind(C, nil, b .. "x"))
        assert.equal(21, blk.bind(C, nil, b:sub(1, 14)))     -- a blob past the end
        assert.is_false(blk.is("abc"))
        assert.is_false(blk.is({}))
        assert.has_error(function() blk.encode(1, { n = 1, {} }) end,
                         "ron.ledger.store: a binds block cannot hold a table")
    end)

    it("turns a phase's list ops into blocks in a new list, the caller's untouched", function()
        local ps = { posting(prng(1), 0) }
        local ev = { "append_events", "bk", { { transfer_id = id32("t"), kind = "k" } },
                     expect = 1, event = true }
        local ops = { { "insert_postings", ps, expect = 1 }, ev,
                      { "insert_postings", {}, expect = 0 },               -- empty: as it is
                      -- refused: the pool says so
                      { "insert_postings", { { id = "bad" } }, expect = 1 },
                      { "store_transfers", { { rec = { id = id32("x"), bytes = "b",
                                                       intent = "i", book = "bk" } } },
                        expect = 1, limit = true } }
        local out, opts = blk.args("apply", ops, { flush = true })
        assert.same({ flush = true }, opts)
        assert.are_not.equal(ops, out)
        assert.equal(ps, ops[1][2])                      -- the caller's op untouched
        assert.is_true(blk.is(out[1][2]))
        assert.equal(1, out[1].expect)
        assert.equal(ev, out[2])
        assert.equal(ops[3], out[3])
        assert.equal(ops[4], out[4])
        assert.is_true(blk.is(out[5][2]) and blk.is(out[5][3]))
        assert.same({ 1, 0 }, { blk.rows(out[5][2]), blk.rows(out[5][3]) })
        assert.is_true(out[5].limit)
        -- nothing to turn: the same list
        local plain = { ev }
        assert.equal(plain, (blk.args("apply", plain)))
        -- a primitive's own call
        local a, b = blk.args("deactivate_many", { { id = ps[1].id, consumed_by = id32("c") } },
                              "rid")
        assert.is_true(blk.is(a))
        assert.is_nil(b)
        assert.same({ "x", 1 }, { blk.args("get_book", "x", 1) })
    end)
end)

-- A store whose every call passes through blk.args, as the offloaded driver's calls do.
local function blocked(s)
    return setmetatable({}, { __index = function(_, k)
        local v = s[k]
        if type(v) ~= "function" then return v end
        return function(_, ...) return v(s, blk.args(k, ...)) end
    end })
end

conformance.run("sqlite, lists as binds blocks", function()
    return blocked(assert(store.open { backend = "sqlite", path = S.tmpname(".sqlite"),
                                       synchronous = "normal" }))
end, {
    reopen = function(s)
        return blocked(assert(store.open { backend = "sqlite", path = s.path }))
    end,
})
