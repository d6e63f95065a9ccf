-- ron.base.lib, the one library finder, as libronacct's (ron.accounting.binding.lib). Each
-- case runs in a fresh luajit, since the search happens once per
-- Lua state and the environment decides it.
local S = require("support")

describe("ron.base.lib (libronacct: ron.accounting.binding.lib)", function()
    local lib = require("ron.accounting.binding.lib")
    local root = S.abs_root()

    -- Runs a chunk in a fresh luajit with the package on its path; env is a prefix such as
    -- "RON_ACCOUNTING_LIB=/x ".
    local function fresh(env, chunk)
        local setup = ("package.path=%q..package.path "):format(root .. "lua/?.lua;")
        return S.run(env .. "luajit -e " .. S.shell_quote(setup .. chunk))
    end

    it("loads the library named by RON_ACCOUNTING_LIB", function()
        local path = os.getenv("RON_ACCOUNTING_LIB")
        if not path or path == "" then
            pending("RON_ACCOUNTING_LIB is not set (ctest sets it)")
            return
        end
        local out, rc = fresh("", [[
            local a = require("ron.accounting")
            io.write(a.library, "|", a.version())]])
        assert.equal(0, rc, out)
        assert.equal(path .. "|" .. require("ron.accounting").version(), out)
    end)

    it("names every candidate when the library cannot be used", function()
        local out, rc = fresh("RON_ACCOUNTING_LIB=/nonexistent/libronacct.so ",
                              [[require("ron.accounting")]])
        assert.not_equal(0, rc)
        assert.matches("cannot use RON_ACCOUNTING_LIB", out, 1, true)
        assert.matches("ffi.C: ra_version not exported", out, 1, true)
        assert.matches("/nonexistent/libronacct.so:", out, 1, true)
    end)

    it("refuses a library that lacks the binding's functions", function()
        -- libc is a shared library without a single ra_* symbol.
        local out, rc = fresh("RON_ACCOUNTING_LIB=libc.so.6 ", [[require("ron.accounting")]])
        assert.not_equal(0, rc)
        assert.matches("libc.so.6: does not export ra_version, ra_strerror", out, 1, true)
    end)

    it("loads twice in one Lua state (package.loaded cleared, lua_code_cache off)", function()
        local out, rc = fresh("", [[
            local function load()
                for k in pairs(package.loaded) do
                    if k:match("^ron%.accounting") then package.loaded[k] = nil end
                end
                return require("ron.accounting")
            end
            local a1, a2 = load(), load()
            assert(a1 ~= a2)
            local m = assert(a2.open { capacity_rows = 16 })
            assert(m:record(assert(a1.tenant("00000000-0000-4000-8000-000000000001")),
                            m:subject("x"), "bytes", 1))
            io.write(tostring(a2.tenant("00000000-0000-4000-8000-000000000001")))
            m:close()]])
        assert.equal(0, rc, out)
        assert.equal("00000000-0000-4000-8000-000000000001", out)
    end)

    it("looks beside a source tree and an install prefix", function()
        local c = lib.candidates()
        assert.is_true(#c >= 1)
        -- The finder loaded from <repo>/lua/ron/base/lib.lua: the source tree's build directory.
        assert.matches("/build/libronacct%.so$", c[1])
        assert.is_nil(c[1]:find("/lua/", 1, true))
    end)

    it("finds an installed library relative to <prefix>/share/lua/5.1", function()
        local prefix = S.tmpname(".prefix")
        local dir = prefix .. "/share/lua/5.1/ron/base"
        local _, rc = S.run(("mkdir -p %s && cp %s %s"):format(S.shell_quote(dir),
            S.shell_quote(root .. "lua/ron/base/lib.lua"), S.shell_quote(dir)))
        assert.equal(0, rc)
        local out, rc2 = S.run("luajit -e " .. S.shell_quote(([[
            local lib = dofile(%q).finder { lib = "ronacct" }
            io.write(table.concat(lib.candidates(), "\n"))]]):format(dir .. "/lib.lua")))
        S.run("rm -rf " .. S.shell_quote(prefix))
        assert.equal(0, rc2, out)
        local lines = {}
        for l in out:gmatch("[^\n]+") do lines[#lines + 1] = l end
        assert.equal(prefix .. "/lib/libronacct.so", lines[1])
        if jit.arch == "x64" then
            assert.equal(prefix .. "/lib/x86_64-linux-gnu/libronacct.so", lines[2])
        end
        assert.equal(prefix .. "/lib64/libronacct.so", lines[#lines])
    end)
end)
