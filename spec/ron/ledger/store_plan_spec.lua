-- Every SQLite statement of the store (ron.ledger.store.sql_text's BUILD forms, lists of 1, 2
-- and 16 keys) reaches the rows it names through an index: no plan reads a whole table
-- except the listings that mean to. SQLite 3.40 planned `(a, b) IN (VALUES ...)` of two
-- keys or more as a scan of the table's key index, so a batch's reserve of 16 inputs read
-- every posting of the ledger (issue 25: the 16-source wallet's CPU per transfer, twice the
-- hot source's, and growing with the ledger).
local S = require("support")
local store = require("ron.ledger.store")
local sql_text = require("ron.ledger.store.sql_text")
local base = require("ron.ledger.store.sql_base")

-- the statements that list a table on purpose (the CLI's, recovery's sweep; the sagas in
-- flight are a few rows)
local LISTS = { list_books = true, list_accounts = true, list_leases = true,
                list_pending_sagas = true, list_finalizing_sagas = true }

describe("ron.ledger.store.sqlite plans", function()
    local s, tables
    setup(function()
        s = assert(store.open { backend = "sqlite", path = S.tmpname(".sqlite"),
                                synchronous = "normal" })
        tables = {}
        for _, r in ipairs(assert(s.drv:read(
            "SELECT name FROM sqlite_schema WHERE type = 'table'", { n = 0 }))) do
            tables[r[1]] = true
        end
        assert.truthy(tables.postings and tables.balances)
    end)
    teardown(function() s:close() end)

    it("probes an index for every key of every list statement", function()
        local names = {}
        for name in pairs(sql_text.BUILD) do
            if not LISTS[name] and not name:match("_pg$") then names[#names + 1] = name end
        end
        table.sort(names)
        local scans, checked = {}, 0
        for _, name in ipairs(names) do
            for _, n in ipairs { 1, 2, 16 } do
                local q = base.render("sqlite", "", sql_text.BUILD[name](n, 2))
                local rows, err = s.drv:read("EXPLAIN QUERY PLAN " .. q, { n = 0 })
                assert(rows, name .. ": " .. tostring(err))
                checked = checked + 1
                for _, r in ipairs(rows) do
                    local t = r[4]:match("^SCAN (%S+)")
                    if t and tables[t] then
                        scans[#scans + 1] = string.format("%s (%d keys): %s", name, n, r[4])
                    end
                end
            end
        end
        assert.is_true(checked > 60)
        assert.same({}, scans)
    end)
end)
