-- `ledger verify` treats the database as hostile (issue 24 §2, PRODUCT.md §9, docs/LEDGER.md
-- "What verify proves", LED-68..LED-70): a real workload on SQLite (transfers with change,
-- rejections, a reversal, a capped account, freeze and unfreeze, a batch, the wallet's key
-- rows, usage rated by ron.ledger.exporter), then for every table and column: a value flipped,
-- a row deleted, a row inserted, a row duplicated. Verify must name each (its table and
-- key, what differs), or the schema must refuse it, or it must be one of the inputs verify
-- cannot check (ron.ledger.verify.inputs, which docs/LEDGER.md lists: checked equal here).
-- Also: the issue's cases by name, the read-only open and the refusal of what is no ledger,
-- the upgrade of a schema-2 store, the dependency order of the replay.
local S = require("support")
local M = require("ron.ledger.mutate")
local inputs = require("ron.ledger.verify.inputs")
local sqlite = require("ron.ledger.store.sqlite")

local function copy(from, to)
    local data = assert(S.read_file(from))
    S.write_file(to, data)
    os.remove(to .. "-wal")
    os.remove(to .. "-shm")
end

-- The base ledger, built once (its file closed: the WAL checkpointed into it).
local BASE
local function base()
    if BASE then return BASE end
    local path = S.tmpname(".ledger.db")
    local s = assert(sqlite.open { path = path })
    M.workload(s)
    s:close()
    BASE = path
    return BASE
end

-- A copy of the base with sql applied (nil, err when the database refuses it).
local function mutated(sql, binds)
    local path = S.tmpname(".mut.db")
    copy(base(), path)
    local s = assert(sqlite.open { path = path })
    local n, err = s.drv:write(sql, binds or { n = 0 })
    s:close()
    if not n then return nil, err end
    return path
end

local function verify_file(path)
    local ro, err = sqlite.open { path = path, readonly = true }
    if not ro then return { { where = "open", what = tostring(err) } }, nil, err end
    local problems, sum = M.verify(ro)
    ro:close()
    return problems, sum
end

describe("ledger verify: every row checked or listed (issue 24 §2)", function()
    it("passes the healthy workload, every table holding rows", function()
        local problems, sum = verify_file(base())
        assert.equal("", M.text(problems))
        assert.is_true(sum.transfers >= 9 and sum.usage == 2 and sum.accounts >= 8)
        assert.equal(1, sum.unchecked) -- the key row whose request reached no outcome
    end)

    it("names every mutation of every table and column, or lists it (the mutation suite)",
       function()
        local s = assert(sqlite.open { path = base() })
        local cases = M.cases(s.drv)
        s:close()
        cases[#cases + 1] = { table = "sagas", kind = "any", op = "insert", keys = { "s-forged" },
                              sql = "INSERT INTO sagas VALUES ('s-forged', 'reserving', "
                                    .. "x'00', 'n1')" }
        for _, op in ipairs { "flip", "delete", "insert" } do
            cases[#cases + 1] = { table = "sqlite_sequence", kind = "any", op = op,
                                  column = op == "flip" and "seq" or nil, keys = {},
                                  sql = ({ flip = "UPDATE sqlite_sequence SET seq = seq + 5",
                                           delete = "DELETE FROM sqlite_sequence",
                                           insert = "INSERT INTO sqlite_sequence VALUES "
                                                    .. "('transfers', 99)" })[op] }
        end
        local named, refused, listed, t0 = 0, 0, 0, os.clock()
        local missed = {}
        for _, c in ipairs(cases) do
            local path = mutated(c.sql, c.binds)
            local label = string.format("%s %s %s (%s)", c.op, c.table, c.column or "row", c.kind)
            if not path then
                refused = refused + 1 -- the schema refuses it (a key, NOT NULL)
            else
                assert.is_true(c.op ~= "duplicate", label .. " was not refused by the schema")
                local problems, _, oerr = verify_file(path)
                local e = inputs.covers(c.table, c.column or "*", c.op, c.kind)
                if M.named(problems, c) or (oerr and (oerr:find("schema", 1, true)
                                                     or oerr:find(c.table, 1, true))) then
                    named = named + 1
                    if os.getenv("RON_MUTATION_VERBOSE") then
                        local p = M.named(problems, c) or { where = "open", what = oerr }
                        print(string.format("  named: %s: %s: %s", label, p.where, p.what))
                    end
                elseif e then
                    listed = listed + 1
                    print(string.format("  listed: %s: %s", label, e.id))
                else
                    missed[#missed + 1] = label .. ": " .. (M.text(problems) ~= ""
                        and M.text(problems) or "verify says OK")
                end
                os.remove(path)
            end
        end
        print(string.format("verify mutations: %d cases, %d named, %d refused by the schema, "
                            .. "%d listed inputs, %.1f s CPU", #cases, named, refused, listed,
                            os.clock() - t0))
        assert.equal("", table.concat(missed, "\n"))
        assert.is_true(named > 120)
    end)

    it("names a tampered schema: a dropped trigger, a key removed and a row duplicated",
       function()
        local path = assert(mutated("DROP TRIGGER postings_balance_upd"))
        local problems = verify_file(path)
        assert.matches("schema postings_balance_upd: the trigger is missing", M.text(problems),
                       1, true)
        path = S.tmpname(".mut.db")
        copy(base(), path)
        local s = assert(sqlite.open { path = path })
        assert(s.drv:exec("CREATE TABLE i2 AS SELECT * FROM intents; DROP TABLE intents; "
                          .. "ALTER TABLE i2 RENAME TO intents; INSERT INTO intents "
                          .. "SELECT * FROM intents WHERE key = CAST('dep-a' AS BLOB)"))
        s:close()
        problems = verify_file(path)
        assert.matches("schema intents: is not the table this code creates", M.text(problems),
                       1, true)
    end)

    it("docs/LEDGER.md lists exactly ron.ledger.verify.inputs", function()
        local doc = assert(S.read_file(S.root .. "docs/LEDGER.md"))
        local section = assert(doc:match("\n### Inputs verify cannot check\n(.-)\n#"),
                               "docs/LEDGER.md: no section \"Inputs verify cannot check\"")
        local listed = {}
        for id, tbl, col, ops in section:gmatch("\n| `([%w-]+)` | `([%w_]+)` | `?([%w_*]+)`? "
                                                .. "| [^|]+ | ([%w ]+) |") do
            listed[#listed + 1] = table.concat({ id, tbl, col, ops }, " ")
        end
        local want = {}
        for i, e in ipairs(inputs) do
            want[i] = table.concat({ e.id, e.table, e.column, e.ops }, " ")
        end
        assert.same(want, listed)
    end)
end)
