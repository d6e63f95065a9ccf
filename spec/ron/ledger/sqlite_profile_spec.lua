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

-- The offloaded driver (a ron-accounting host, for its loop and pool): every call, counted
-- or not, is timed by the connection the loop routes it to (the writer's, the reader's).
local OFFLOADED = [[
local task = require("ron.base.task")
local T = task.new()
local ok, err
T.spawn("child", function()
    ok, err = pcall(function()
        local s = assert(require("ron.ledger.store.sqlite").open {
            path = arg[1], offload = true, reader = arg[2] ~= "noreader" })
        local p = require("ron.ledger.store.sqlite_profile")
        local ops = {}
        for i = 1, p.MIN_OPS do ops[i] = { "create_book", "book" .. i, nil, expect = 1 } end
        assert(assert(s:apply(ops)).ok)
        assert(assert(s:apply({ { "create_book", "short", nil, expect = 1 } })).ok)
        assert(s:get_intents({ "k" }))
        assert(s:get_intents({ "k2" }))
        s:close()
    end)
end)
require("luv").run("default")
if not ok then io.stderr:write(tostring(err), "\n") os.exit(1) end
]]

local function child_dir(text)
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. S.shell_quote(dir)) == 0)
    local f = assert(io.open(dir .. "/child.lua", "w"))
    f:write(text)
    f:close()
    return dir, dir .. "/child.lua"
end

describe("ron.ledger.store.sqlite_profile", function()
    it("times every offloaded call by the connection it runs on", function()
        local bin = os.getenv("RA_BIN") or "build/ron-accounting"
        if not io.open(bin) then return pending("no ron-accounting binary at " .. bin) end
        local dir, script = child_dir(OFFLOADED)
        local prefix = dir .. "/prof"
        local out, rc = S.run("RON_SQLITE_PROFILE=" .. S.shell_quote(prefix)
                              .. " RON_SQLITE_PROFILE_EVERY=1 " .. S.shell_quote(bin) .. " run "
                              .. S.shell_quote(script) .. " " .. S.shell_quote(dir .. "/l.db"))
        assert.equal(0, rc, out)
        local got = prof.collect(prefix)
        assert.equal(1, got["call write apply phase"][1])
        assert.equal(1, got["call write apply"][1]) -- (the short phase: not counted as one)
        assert.equal(2, got["call read get_intents"][1])
        assert.equal(2, got["pool read calls"][1])
        -- the writer's calls: the two applies and the store's own (opening, closing)
        local w = got["pool write calls"]
        assert.is_true(w[1] >= 2, "writer calls " .. w[1])
        assert.is_true(w[2] >= got["call write apply phase"][2] + got["call write apply"][2])
        -- the phase's call holds the phase
        assert.is_true(got["call write apply phase"][2] >= got["phase"][2])
        -- without the reader, the reads run on the writer's connection and count there
        local prefix2 = dir .. "/prof2"
        out, rc = S.run("RON_SQLITE_PROFILE=" .. S.shell_quote(prefix2)
                        .. " RON_SQLITE_PROFILE_EVERY=1 " .. S.shell_quote(bin) .. " run "
                        .. S.shell_quote(script) .. " " .. S.shell_quote(dir .. "/l2.db")
                        .. " noreader")
        assert.equal(0, rc, out)
        local got2 = prof.collect(prefix2)
        assert.is_nil(got2["pool read calls"])
        assert.equal(2, got2["call write get_intents"][1])
        os.execute("rm -rf " .. S.shell_quote(dir))
    end)

    it("times a long phase from inside its thread and skips a short one", function()
        assert.is_false(prof.on) -- (this process: no variable, nothing counted)
        local dir, script = child_dir(CHILD)
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
        assert.equal(1, got["sql INSERT books prepare"][1]) -- (then kept: one text)
        -- the phase holds its parts: wall and CPU add up
        local parts = got["op create_book"][2] + got["exec COMMIT"][2]
        assert.is_true(got["phase"][2] >= parts, "phase " .. got["phase"][2] .. " < " .. parts)
        for _, a in pairs(got) do assert.is_true(a[2] >= 0 and a[3] >= 0) end
        os.execute("rm -rf " .. S.shell_quote(dir))
    end)
end)
