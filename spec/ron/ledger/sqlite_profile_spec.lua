-- ron.ledger.store.sqlite_profile (issue 25; bench-wallet --pool-profile): with
-- RON_SQLITE_PROFILE set before the store modules load, a SQLite phase of MIN_OPS ops or
-- more is timed from inside the thread that runs it (the whole phase, each primitive, each
-- statement's bind and steps, BEGIN and COMMIT) and written to <prefix>.<vm>; a shorter one
-- is not counted; collect() sums the files. The variable is read when the module loads, so
-- the store runs in a child process here.
local S = require("support")
local prof = require("ron.ledger.store.sqlite_profile")

local CHILD = [[
local p = require("ron.ledger.store.sqlite_profile")
assert(p.on, "RON_SQLITE_PROFILE not seen")
p.WRITE_EVERY = 1
local s = assert(require("ron.ledger.store.sqlite").open { path = arg[1] })
local ops = {}
for i = 1, p.MIN_OPS do ops[i] = { "create_book", "book" .. i, nil, expect = 1 } end
assert(assert(s:apply(ops)).ok)
assert(assert(s:apply({ { "create_book", "short", nil, expect = 1 } })).ok)
s:close()
]]

describe("ron.ledger.store.sqlite_profile", function()
    it("times a long phase from inside its thread and skips a short one", function()
        assert.is_false(prof.on) -- (this process: no variable, nothing counted)
        local dir = os.tmpname()
        os.remove(dir)
        assert(os.execute("mkdir -p " .. S.shell_quote(dir)) == 0)
        local script = dir .. "/child.lua"
        local f = assert(io.open(script, "w"))
        f:write(CHILD)
        f:close()
        local prefix = dir .. "/prof"
        local out, rc = S.run("RON_SQLITE_PROFILE=" .. S.shell_quote(prefix) .. " luajit "
                              .. S.shell_quote(script) .. " " .. S.shell_quote(dir .. "/l.db"))
        assert.equal(0, rc, out)
        local got = prof.collect(prefix)
        assert.equal(1, got["phase"][1])
        assert.equal(prof.MIN_OPS, got["op create_book"][1])
        assert.equal(1, got["exec COMMIT"][1])
        assert.equal(1, got["exec BEGIN IMMEDIATE"][1])
        assert.equal(prof.MIN_OPS, got["sql INSERT books step"][1])
        assert.equal(prof.MIN_OPS, got["sql INSERT books bind"][1])
        -- the phase holds its parts: wall and CPU add up
        local parts = got["op create_book"][2] + got["exec COMMIT"][2]
        assert.is_true(got["phase"][2] >= parts, "phase " .. got["phase"][2] .. " < " .. parts)
        for _, a in pairs(got) do assert.is_true(a[2] >= 0 and a[3] >= 0) end
        os.execute("rm -rf " .. S.shell_quote(dir))
    end)
end)
