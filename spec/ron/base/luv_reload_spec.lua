-- One plain busted process over several spec files must not crash in luv (item 4 of issue
-- 26's Lua side: six ledger specs in one process ended in SIGSEGV, rc 139). busted unloads
-- the modules a file loaded; luv's default loop lives in its first module table, so once
-- that table was collected the next file's first handle ran on a freed loop. spec/helper.lua
-- (.busted's helper) keeps luv loaded for the run. This case runs two fixture files in a
-- child busted the way ctest's `lua` test runs busted, with a GC between them.
local S = require("support")

describe("busted over several files (spec/helper.lua)", function()
    it("a later file's luv handle survives the earlier file's modules being collected", function()
        if package.preload["ron.base.net.http_server"] then
            return -- inside the host luv is the host's and outlives every file
        end
        local busted = S.run("command -v busted"):match("^(%S+)")
        assert.truthy(busted, "busted not found")
        local out, rc = S.run("cd " .. S.shell_quote(S.abs_root()) .. " && luajit "
                              .. S.shell_quote(busted) .. " --output=plainTerminal"
                              .. " --pattern=luv_reload_ spec/fixtures/luv_reload_a.lua"
                              .. " spec/fixtures/luv_reload_b.lua")
        assert.equal(0, rc, out)
        assert.truthy(out:find("2 successes / 0 failures", 1, true), out)
    end)
end)
