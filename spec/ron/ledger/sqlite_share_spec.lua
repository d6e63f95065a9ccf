-- One connection's prepared statements shared by the VMs that run its calls
-- (lua/ron/ledger/store/sqlite_share.lua): here two connection objects over one sqlite3 *,
-- as two pool threads' VMs attach to the offloaded driver's connection. A text is prepared
-- once and the other side takes it; a shed by either finalizes the least recently used and
-- moves the generation on, and the other side's map of statements is dropped before it
-- uses one again. (The offloaded driver runs on them: the store conformance suite inside the
-- host, spec/ron/ledger/store_host_spec.lua.)
local S = require("support")
local ok_sqlite, sconn = pcall(require, "ron.ledger.store.sqlite_conn")
if not ok_sqlite or not pcall(sconn.lib) then
    pending("ron.ledger.store.sqlite: libsqlite3 is not here")
    return
end
local share = require("ron.ledger.store.sqlite_share")

local function values(n)
    local rows = {}
    for i = 1, n do rows[i] = "(?)" end
    return "INSERT INTO t(v) VALUES " .. table.concat(rows, ",") .. " ON CONFLICT DO NOTHING"
end

local function binds(from, n)
    local b = { n = n }
    for i = 1, n do b[i] = from + i end
    return b
end

describe("ron.ledger.store.sqlite_share", function()
    local owner, addr

    before_each(function()
        owner = assert(sconn.open_db(S.tmpname(".db"), S.tmpname(".db"), sconn.OPEN_RW_CREATE,
                                     "", 1000))
        assert(owner:exec("CREATE TABLE t(v INTEGER PRIMARY KEY)"))
    end)

    after_each(function()
        owner:close()
        if addr then share.free(addr) end
        addr = nil
    end)

    it("prepares a text once for every VM of the connection", function()
        addr = share.new(1e6)
        local a, b = sconn.new(owner.db, addr), sconn.new(owner.db, addr)
        local sh = share.at(addr)
        assert.equal(3, a:write(values(3), binds(0, 3)))
        assert.equal(3, b:write(values(3), binds(3, 3)))    -- b takes a's statement
        assert.equal(0, a:write(values(3), binds(3, 3)))
        assert.same({ 1, 1, 0 }, { sh.prepared, sh.adopted, sh.shed })
        assert.equal(a.stmts[values(3)].st, b.stmts[values(3)].st)
        assert.equal(1, b:write(values(1), binds(100, 1)))
        assert.equal(1, a:write(values(1), binds(101, 1)))
        assert.same({ 2, 2 }, { sh.prepared, sh.adopted })
        assert.equal(2, sh.n)
        local rows = assert(owner:read("SELECT count(*) FROM t", { n = 0 }))
        assert.equal(8, rows[1][1])
    end)

    it("sheds the least recently used past its budget, and a stale map is dropped "
       .. "before use (I-7)", function()
        -- 32 a statement and one a parameter: room for ~10 statements of 1..20 rows
        addr = share.new(500)
        local a, b = sconn.new(owner.db, addr), sconn.new(owner.db, addr)
        local sh = share.at(addr)
        local next_v = 0
        for round = 1, 3 do
            for n = 1, 20 do
                local side = (n + round) % 2 == 0 and a or b
                assert.equal(n, side:write(values(n), binds(next_v, n)), "round " .. round)
                next_v = next_v + n
                assert.is_true(sh.cost <= 500, "cost " .. sh.cost)
            end
        end
        assert.is_true(sh.shed > 0)
        assert.is_true(sh.gen > 0)
        -- the statements alive are the table's: none either side's map still names is gone
        local C, alive = sconn.lib(), {}
        local st = C.sqlite3_next_stmt(owner.db, nil)
        while st ~= nil do
            alive[tostring(st)] = true
            st = C.sqlite3_next_stmt(owner.db, st)
        end
        for _, side in ipairs { a, b } do
            if side.gen == sh.gen then
                for text, e in pairs(side.stmts) do
                    assert.is_true(alive[tostring(e.st)], "finalized but kept: " .. text)
                end
            end
        end
        assert.equal(20, a:write(values(20), binds(next_v, 20)))
        local rows = assert(owner:read("SELECT count(*) FROM t", { n = 0 }))
        assert.equal(next_v + 20, rows[1][1])
        print(string.format("sqlite_share: %d prepared, %d taken from the other side, "
                            .. "%d shed, generation %d", sh.prepared, sh.adopted, sh.shed,
                            sh.gen))
    end)

    it("hashes a text the same every time and its lengths apart", function()
        local t = values(50)
        assert.equal(share.hash(t), share.hash(t .. ""))
        assert.are_not.equal(share.hash(values(49)), share.hash(values(50)))
        assert.are_not.equal(share.hash("abc"), share.hash("abd"))
    end)
end)
