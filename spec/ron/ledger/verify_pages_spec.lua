-- `ledger verify` reads every table a page at a time and keeps no transfer whole (I-7,
-- docs/LEDGER.md "Verify's memory"): the findings do not depend on where the pages break,
-- and a transfer row read before its turn in the feed (rows and feed in different orders)
-- waits for it.
local S = require("support")
local M = require("ron.ledger.mutate")
local feed = require("ron.ledger.verify.feed")
local sqlite = require("ron.ledger.store.sqlite")

local function copy(from, to)
    S.write_file(to, assert(S.read_file(from)))
    os.remove(to .. "-wal")
    os.remove(to .. "-shm")
end

-- The problems of the file at page size `page`, one a line, sorted (the order of problems
-- of one table may follow a map's), and the summary.
local function verify_at(path, page)
    local ro, err = sqlite.open { path = path, readonly = true }
    if not ro then return "open: " .. tostring(err) end -- (a mutation of the meta: refused)
    local saved = feed.PAGE
    feed.PAGE = page
    local ok, problems, sum = pcall(M.verify, ro)
    ro:close()
    feed.PAGE = saved
    assert(ok, problems)
    local lines = {}
    for i, p in ipairs(problems) do lines[i] = p.where .. ": " .. p.what end
    table.sort(lines)
    return table.concat(lines, "\n"), sum
end

local BASE
local function base()
    if BASE then return BASE end
    BASE = S.tmpname(".pages.db")
    local s = assert(sqlite.open { path = BASE })
    M.workload(s)
    s:close()
    return BASE
end

describe("ledger verify by pages", function()
    it("finds the same on the healthy workload whatever the page size", function()
        local text, sum = verify_at(base(), 1000)
        assert.equal("", text)
        for _, page in ipairs { 1, 2, 3, 7 } do
            local t, s2 = verify_at(base(), page)
            assert.equal("", t, "page " .. page)
            for _, k in ipairs { "transfers", "postings", "balances", "events", "intents",
                                 "usage", "unchecked" } do
                assert.equal(sum[k], s2[k], k .. " at page " .. page)
            end
        end
    end)

    it("names each mutation the same with pages of 1 and 3 rows as of 1000", function()
        local s = assert(sqlite.open { path = base() })
        local cases = M.cases(s.drv)
        s:close()
        local checked = 0
        for i, c in ipairs(cases) do
            if i % 4 == 1 and c.op ~= "duplicate" then -- (a sample: every table, every op)
                local path = S.tmpname(".pages.mut.db")
                copy(base(), path)
                local w = assert(sqlite.open { path = path })
                local n = w.drv:write(c.sql, c.binds or { n = 0 })
                w:close()
                if n then
                    local want = verify_at(path, 1000)
                    assert.equal(want, (verify_at(path, 3)), c.op .. " " .. c.table)
                    assert.equal(want, (verify_at(path, 1)), c.op .. " " .. c.table)
                    checked = checked + 1
                end
                os.remove(path)
            end
        end
        assert.is_true(checked > 20)
    end)

    it("replays in the feed's order when the rows are in another (a row waits its turn)",
       function()
        local path = S.tmpname(".pages.order.db")
        copy(base(), path)
        -- the first and the last transfer rows swap places (their n), the feed stays: the
        -- last row is read first, before its turn, and waits for its event
        local s = assert(sqlite.open { path = path })
        local rows = assert(s.drv:read("SELECT min(n), max(n) FROM transfers", { n = 0 }))
        local lo, hi = rows[1][1], rows[1][2]
        for _, tbl in ipairs { "transfers", "transfer_accounts" } do
            assert(s.drv:write("UPDATE " .. tbl .. " SET n = -1 WHERE n = ?", { n = 1, lo }))
            assert(s.drv:write("UPDATE " .. tbl .. " SET n = ? WHERE n = ?", { n = 2, lo, hi }))
            assert(s.drv:write("UPDATE " .. tbl .. " SET n = ? WHERE n = -1", { n = 1, hi }))
        end
        s:close()
        for _, page in ipairs { 1000, 2 } do
            assert.equal("", (verify_at(path, page)), "page " .. page)
        end
        os.remove(path)
    end)
end)
