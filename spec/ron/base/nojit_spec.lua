-- ron.base.nojit: a module required through it (and the modules under its prefixes) runs
-- interpreted; the others keep the JIT. Two fixture modules with the same hot loop, one
-- loaded each way; LuaJIT's trace events (jit.attach) name the functions traces start in.
local S = require("support")
local nojit = require("ron.base.nojit")

local SRC = "local M = {}\nfunction M.loop(n) local s = 0 for i = 1, n do s = s + i % 7 end "
            .. "return s end\nreturn M\n"

describe("ron.base.nojit", function()
    local dir, saved_path
    setup(function()
        dir = S.tmpname("-nojit")
        os.execute("mkdir -p " .. dir .. "/nojitfx")
        for _, name in ipairs { "off", "on", "under_off", "under_kept" } do
            local f = assert(io.open(dir .. "/nojitfx/" .. name .. ".lua", "w"))
            f:write(SRC)
            f:close()
        end
        saved_path = package.path
        package.path = dir .. "/?.lua;" .. package.path
    end)
    teardown(function()
        package.path = saved_path
        os.execute("rm -rf " .. dir)
    end)

    it("runs the module and those under its prefixes interpreted, no other; the "
       .. "exceptions keep the JIT", function()
        if not jit then return pending("not LuaJIT") end
        local jutil = require("jit.util")
        local started = {}
        local function on_trace(what, _, func)
            if what == "start" and func then
                local src = jutil.funcinfo(func).source or ""
                local m = src:match("nojitfx/([%w_]+)%.lua")
                if m then started[m] = (started[m] or 0) + 1 end
            end
        end
        jit.attach(on_trace, "trace")
        local off = nojit.require("nojitfx.off", { "nojitfx.under_" }, { "nojitfx.under_kept" })
        local under_off = require("nojitfx.under_off") -- loaded later, under a prefix
        local under_kept = require("nojitfx.under_kept") -- under it too, but excepted
        local on = require("nojitfx.on")
        for _ = 1, 20 do
            assert.equal(on.loop(10000), off.loop(10000))
            assert.equal(on.loop(10000), under_off.loop(10000))
            assert.equal(on.loop(10000), under_kept.loop(10000))
        end
        jit.attach(on_trace)
        assert.is_nil(started.off)
        assert.is_nil(started.under_off)
        assert.is_true((started.on or 0) >= 1)
        assert.is_true((started.under_kept or 0) >= 1)
    end)
end)
