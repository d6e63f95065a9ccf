-- An operator's SQLite ledger from before schema 4 (issue 25: the engine's claims moved from
-- intents to their own table, ron.ledger.store.sql_claims) opens with this code, is
-- migrated once, verifies, and its commit in flight is recovered. The ledger is
-- spec/fixtures/ledger-v3.sql: what main at 5e92aa8 wrote (spec/fixtures/ledger_v3_make.lua:
-- the mutation suite's workload, then a commit whose process died at its finalize), dumped
-- by the sqlite3 shell.
local S = require("support")
local M = require("ron.ledger.mutate")
local L = require("ron.ledger.ledger")
local sqlite = require("ron.ledger.store.sqlite")

local CLAIM = ("\255"):rep(256)

-- A file holding exactly the fixture's database (its tables, indexes, triggers, rows).
local function v3_file()
    local path = S.tmpname(".v3.db")
    local s = assert(sqlite.open { path = path })
    local conn = s.drv
    local drop = {}
    for _, r in ipairs(assert(conn:read("SELECT type, name FROM sqlite_master WHERE type IN "
                                        .. "('table', 'trigger') AND name NOT LIKE 'sqlite_%' ORDER BY type DESC",
                                        { n = 0 }))) do
        drop[#drop + 1] = string.format("DROP %s %s;", r[1]:upper(), r[2])
    end
    assert(conn:exec(table.concat(drop, " ")))
    assert(conn:exec(assert(S.read_file(S.root .. "spec/fixtures/ledger-v3.sql"))))
    local rows = {}
    for _, t in ipairs { "intents", "transfer_accounts" } do
        rows[t] = assert(conn:read("SELECT * FROM " .. t .. " ORDER BY 1, 2", { n = 0 }))
    end
    s:close()
    return path, rows
end

local function count(conn, sql)
    return assert(conn:read(sql, { n = 0 }))[1][1]
end

local function problems_of(path)
    local ro = assert(sqlite.open { path = path, readonly = true })
    local problems, sum = M.verify(ro)
    ro:close()
    return M.text(problems), sum
end

describe("a schema-3 SQLite ledger (issue 25: the claims' own table)", function()
    it("is refused read-only until opened once, then holds its claims apart", function()
        local path, before = v3_file()
        local ro, err = sqlite.open { path = path, readonly = true }
        assert.is_nil(ro)
        assert.matches("schema version 3, older than this code's 4: open it once", err)

        local s = assert(sqlite.open { path = path }) -- the migration
        local conn = s.drv
        assert.equal(0, count(conn, "SELECT count(*) FROM intents WHERE length(key) > 255"))
        local claims = count(conn, "SELECT count(*) FROM claims")
        assert.equal(13, claims) -- the fixture's (every intent the workload claimed, and the
                                 -- one in flight)
        assert.equal("4", s:get_meta("schema_version"))
        -- intents and transfer_accounts rebuilt WITHOUT ROWID under this code's statements,
        -- every row kept (the claims moved, their keys without the prefix)
        for _, t in ipairs { "intents", "transfer_accounts" } do
            local ddl = count(conn, "SELECT sql FROM sqlite_master WHERE name = '" .. t .. "'")
            assert.matches("WITHOUT ROWID$", ddl)
            local now = assert(conn:read("SELECT * FROM " .. t .. " ORDER BY 1, 2", { n = 0 }))
            if t == "intents" then
                for _, r in ipairs(assert(conn:read("SELECT * FROM claims ORDER BY 1",
                                                    { n = 0 }))) do
                    r[1] = CLAIM .. r[1]
                    now[#now + 1] = r
                end
            end
            assert.same(before[t], now)
        end
        -- the claim of the commit in flight, where the engine asks for it
        local c = assert(s:get_intent(CLAIM .. "in-flight"))
        assert.equal("claimed", c.status)
        assert.equal(1, #assert(s:list_pending_sagas()))
        s:close()

        -- verify names the commit in flight (its record, its reserved input) and nothing else
        local text = problems_of(path)
        local lines = {}
        for l in text:gmatch("[^\n]+") do lines[#lines + 1] = l end
        assert.equal(2, #lines, text)
        assert.matches("^sagas wl:x:1: pending in phase reserving", lines[1])
        assert.matches(": is pending_inactive reserved, no transfer spends it", lines[2])

        -- recover() finds the saga's claim and drives it; verify is exact after it
        s = assert(sqlite.open { path = path })
        local led = L.new { store = s, book = "main", node = "wl", nonce = "r",
                            clock = function() return M.CLOCK end }
        led:recover()
        assert.equal(0, #assert(s:list_pending_sagas()))
        -- a replay of the intent in flight: one outcome, whatever recover did with it
        local again = led:commit { intent = "in-flight", movements = { M.mv(M.A, M.B, 7) } }
        assert.is_truthy(again)
        assert.equal(1, count(s.drv, "SELECT count(*) FROM claims WHERE intent = "
                                     .. "CAST('in-flight' AS BLOB)"))
        s:close()
        local text2, sum = problems_of(path)
        assert.equal("", text2)
        assert.is_true(sum.transfers >= 10)

        -- opened again: nothing more moves, the version stays
        s = assert(sqlite.open { path = path })
        assert.equal(claims + 0, count(s.drv, "SELECT count(*) FROM claims"))
        assert.equal("4", s:get_meta("schema_version"))
        s:close()
    end)
end)
