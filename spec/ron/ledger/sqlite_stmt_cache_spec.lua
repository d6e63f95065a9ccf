-- The SQLite store's prepared statements, bounded (I-7; ron.ledger.store.sqlite_conn
-- STMT_BUDGET): a list primitive's statement is one per list length, and a batch path whose
-- lengths vary met every one of them in time, each kept prepared for good (advance_streams
-- at every length 1..1024: 351 MB on one connection). Lengths that vary past the budget
-- now shed the least recently used statements; the answers stay those of the primitives.
local S = require("support")
local ffi = require("ffi")
local ok_sqlite, sqlite = pcall(require, "ron.ledger.store.sqlite")
local sql_base = require("ron.ledger.store.sql_base")
local sconn = ok_sqlite and require("ron.ledger.store.sqlite_conn")

if not ok_sqlite then
    pending("ron.ledger.store.sqlite: libsqlite3 is not here")
    return
end

pcall(ffi.cdef, "long long sqlite3_memory_used(void);")

local function used() return tonumber(sqlite.lib().sqlite3_memory_used()) end

-- stream i's move from seq `from` to from + 1 (its b3: the seq's byte, mod 256)
local function move(i, from)
    return { tenant = string.format("%016d", i), dimension = "bytes", seq = from + 1,
             b3 = string.rep(string.char((from + 1) % 256), 32), prev_seq = from,
             prev_b3 = string.rep(string.char(from % 256), 32) }
end

-- the list of n streams' moves from seq `from` to from + 1
local function moves(n, from)
    local list = {}
    for i = 1, n do list[i] = move(i, from) end
    return list
end

describe("ron.ledger.store.sqlite's prepared statements", function()
    local budget0, text0, store

    before_each(function()
        budget0, text0 = sconn.STMT_BUDGET, sql_base.TEXT_BUDGET
        store = assert(sqlite.open { path = S.tmpname(".db"), synchronous = "normal" })
    end)

    after_each(function()
        sconn.STMT_BUDGET, sql_base.TEXT_BUDGET = budget0, text0
        store:close()
    end)

    it("stay within their budget when a list primitive's lengths vary, and answer as "
       .. "before (I-7)", function()
        sconn.STMT_BUDGET = 20000
        local conn = store.drv
        local first = {}
        for i = 1, 300 do first[i] = { tenant = string.format("%016d", i), dimension = "bytes",
                                       seq = 1, b3 = string.rep("\1", 32) } end
        assert.equal(300, store:insert_streams(first))
        local m0 = used()
        -- every length 1..300 once, each moving its prefix of the streams one seq on; the
        -- first 299 streams move further than the last ones: each length's own count
        local seq = {}
        for n = 300, 1, -1 do
            local list = {}
            for i = 1, n do
                local from = seq[i] or 1
                list[i] = move(i, from)
                seq[i] = from + 1
            end
            assert.equal(n, store:advance_streams(list), "length " .. n)
            assert.is_true(conn.stmt_cost <= sconn.STMT_BUDGET, "cost " .. conn.stmt_cost)
        end
        assert.is_true(conn.shed > 0)
        -- 300 lengths of 6 parameters a row held ~30 MB before; the budget holds ~2 MB
        local grown = used() - m0
        print(string.format("sqlite statements: 300 lengths, %d shed, %.1f MB kept "
                            .. "(budget %d parameters)", conn.shed, grown / 1e6,
                            sconn.STMT_BUDGET))
        assert.is_true(grown < 8e6, "grew " .. grown)
        -- the heads where the moves left them
        local got = assert(store:get_streams { { tenant = string.format("%016d", 1),
                                                 dimension = "bytes" },
                                               { tenant = string.format("%016d", 300),
                                                 dimension = "bytes" } })
        assert.equal(301, got[string.format("%016d", 1) .. "\0bytes"].seq)
        assert.equal(2, got[string.format("%016d", 300) .. "\0bytes"].seq)
    end)

    it("and their texts: the store's texts start anew past their budget, and the "
       .. "statements prepared of them are found again (I-7)", function()
        sql_base.TEXT_BUDGET = 100000
        sconn.STMT_BUDGET = 1e9 -- (every statement kept: the texts alone are bounded here)
        local conn = store.drv
        local list = moves(300, 1)
        -- 300 lengths' texts: ~50 bytes a row, ~2.2 MB in all before the budget
        for n = 300, 1, -1 do
            local part = {}
            for i = 1, n do part[i] = list[i] end
            assert.equal(0, store:advance_streams(part), "length " .. n)
        end
        assert.is_true((store.sql_cache_resets or 0) > 0)
        local bytes = 0
        for k, v in pairs(store.sql_cache) do
            if type(k) == "string" then bytes = bytes + #v end
        end
        assert.is_true(bytes <= sql_base.TEXT_BUDGET, "texts " .. bytes)
        -- a length whose text was dropped: made again, its statement found, not prepared
        local cost = conn.stmt_cost
        assert.equal(0, store:advance_streams(list))
        assert.equal(cost, conn.stmt_cost)
    end)

    it("keep the statements in use: a length met again is not prepared again", function()
        local conn = store.drv
        assert.equal(0, store:advance_streams(moves(64, 1)))
        local n0 = 0
        for _ in pairs(conn.stmts) do n0 = n0 + 1 end
        local cost0 = conn.stmt_cost
        for _ = 1, 50 do assert.equal(0, store:advance_streams(moves(64, 1))) end
        local n1 = 0
        for _ in pairs(conn.stmts) do n1 = n1 + 1 end
        assert.equal(n0, n1)
        assert.equal(cost0, conn.stmt_cost)
        assert.equal(0, conn.shed)
    end)
end)
