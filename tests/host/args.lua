-- host-run-args: what `ron-accounting run` gives a script.
--   ron-accounting run args.lua <source lua dir> "two words" --not-an-option
-- with LUA_PATH=/ra-lua-path-probe/?.lua;; and RA_EXPECT_EXE=<path of the host>.
local ffi = require("ffi")

local lua_dir, exe = arg[1], os.getenv("RA_EXPECT_EXE")
local function check(cond, what, ...)
    if not cond then error(what:format(...), 2) end
end

-- arg: luajit CLI layout, and the same values as the chunk's varargs.
check(arg[-1] == exe, "arg[-1] is %q, expected the host %q", tostring(arg[-1]), tostring(exe))
check(arg[0]:match("args%.lua$"), "arg[0] is %q", tostring(arg[0]))
check(#arg == 3, "#arg is %d, expected 3", #arg)
check(arg[2] == "two words" and arg[3] == "--not-an-option", "arguments not passed verbatim")
check(arg[-2] == nil, "arg[-2] is %q: the command name leaked into arg", tostring(arg[-2]))
local n, a1, a2, a3 = select("#", ...), ...
check(n == 3 and a1 == arg[1] and a2 == arg[2] and a3 == arg[3], "... differs from arg")

-- package.path: the binding first, then the script's directory, then LUA_PATH.
local path = package.path
local function at(s)
    return path:find(s, 1, true)
end
local ours = lua_dir .. "/?.lua;" .. lua_dir .. "/?/init.lua;"
check(path:sub(1, #ours) == ours, "package.path does not start with %q: %s", ours, path)
local here = arg[0]:match("^(.*)/[^/]*$") or "."
local here_abs = io.popen("cd '" .. here .. "' && pwd -P"):read("*l")
check(at(here_abs .. "/?.lua"), "the script's directory %s is not on %s", here_abs, path)
check(at("/ra-lua-path-probe/?.lua"), "LUA_PATH is not honoured: %s", path)
check(at(here_abs .. "/?.lua") < at("/ra-lua-path-probe/?.lua"),
      "LUA_PATH comes before the script's directory: %s", path)
check(require("host_helper").answer == 42, "a module next to the script is not found")

-- The binding loads and reaches the core through ffi.C (the host exports libronacct).
local acct = require("ron.accounting")
check(type(acct) == "table" and type(acct.open) == "function", "ron.accounting has no open()")
local found = package.searchpath("ron.accounting", package.path)
check(found == lua_dir .. "/ron/accounting.lua", "ron.accounting came from %s", tostring(found))
local ok, sym = pcall(function() return ffi.C.ra_version end)
check(ok and sym ~= nil, "ffi.C.ra_version does not resolve: %s", tostring(sym))
check(ffi.string(ffi.C.ra_version()):match("^%d+%.%d+%.%d+"), "ra_version() is malformed")

-- The standard libraries, LuaJIT's included.
check(jit and jit.version and bit and string and table and io and os and debug,
      "a standard library is missing")

print(("host-run-args: ok (%s, libronacct %s)"):format(jit.version, ffi.string(ffi.C.ra_version())))
