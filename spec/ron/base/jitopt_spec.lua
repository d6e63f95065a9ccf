-- ron.base.jitopt (issue 25): the daemon's loop VM gets LuaJIT machine-code areas of
-- SIZEMCODE_KB (fewer mprotect calls per compiled trace: docs/WALLET.md §8), bounded by
-- MAXMCODE_KB; ron.node.start applies them before any system starts. jit.opt.start is
-- stubbed: LuaJIT has no call that reads its options back.
local jitopt = require("ron.base.jitopt")

local opt = jit and jit.opt -- (the stub goes on this table: the one jitopt calls into)

describe("ron.base.jitopt", function()
    local saved
    local seen
    before_each(function()
        if not opt then return pending("not LuaJIT") end
        saved = opt.start
        seen = {}
        opt.start = function(...) seen[#seen + 1] = { ... } end
    end)
    after_each(function()
        if saved then opt.start = saved end
        jitopt.applied = nil
    end)

    it("sets the machine-code area's size and the bound on all areas", function()
        assert.is_true(jitopt.apply())
        assert.same({ { "sizemcode=512", "maxmcode=8192" } }, seen)
        assert.is_true(jitopt.applied)
        assert.is_true(jitopt.MAXMCODE_KB >= jitopt.SIZEMCODE_KB)
        -- the real call takes them (an unknown or malformed option raises)
        saved(unpack(jitopt.OPTIONS))
    end)

    it("is applied by the daemon's start, before its first step", function()
        local node = require("ron.node")
        local cli = require("ron.node.cli")
        -- a state directory that cannot be made: the start fails at its first step
        local cfg = assert(cli.configure { [0] = "examples/daemon.lua", "--meter-only",
                                           "--var", "/proc/self/no-such-dir/var" })
        local d, err = node.start(cfg)
        assert.is_nil(d)
        assert.truthy(tostring(err):find("state directory", 1, true), err)
        assert.same({ { "sizemcode=512", "maxmcode=8192" } }, seen)
        assert.is_true(jitopt.applied)
    end)
end)
