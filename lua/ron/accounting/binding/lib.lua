-- Finds libronacct and returns its FFI namespace (with the cdef loaded).
--
-- Search order; the first that exports every function of cdef.lua wins:
--   1. ffi.C: the `ron-accounting` host executable links the core statically and exports
--      its symbols, so nothing has to be found on disk (and no second copy of the core,
--      with its own globals, gets mapped into the process);
--   2. $RON_ACCOUNTING_LIB, a path: when set it is the only candidate, because an operator
--      who names a library expects that library and not a silent fallback to another one;
--   3. paths relative to this file: a source tree (<repo>/lua/ron/accounting/binding/lib.lua
--      → <repo>/build/libronacct.so) and an install (<prefix>/share/lua/5.1/ron/accounting/
--      binding/lib.lua → <prefix>/lib/libronacct.so, <prefix>/lib/<multiarch>/libronacct.so,
--      <prefix>/lib64/libronacct.so);
--   4. ffi.load("ronacct"): the dynamic linker's search path.
-- When none works, the error lists every candidate and why it was refused.
local ffi = require "ffi"
local cdef = require "ron.accounting.binding.cdef"

local concat = table.concat
local format = string.format
local getenv = os.getenv
local io_open = io.open
local pcall = pcall

local _M = {}

local LIBNAME = "libronacct.so"

-- Debian multiarch triplets for the architectures LuaJIT runs on.
local MULTIARCH = {
    x64 = "x86_64-linux-gnu",
    x86 = "i386-linux-gnu",
    arm64 = "aarch64-linux-gnu",
    arm = "arm-linux-gnueabihf",
    ppc = "powerpc-linux-gnu",
    mips64 = "mips64el-linux-gnuabi64",
}

local function missing_symbols(ns)
    local missing = {}
    for _, name in ipairs(cdef.functions) do
        if not pcall(function() return ns[name] end) then missing[#missing + 1] = name end
    end
    return missing
end

-- Major.minor must match the header the cdef was generated from: within one minor
-- version the ABI only grows, and the symbol check above catches a missing function.
local function version_mismatch(ns)
    local v = ffi.string(ns.ra_version())
    local want = cdef.version:match("^(%d+%.%d+)%.")
    if v:match("^(%d+%.%d+)%.") ~= want then
        return format("library version %s, binding generated for %s", v, cdef.version)
    end
end

local function file_exists(path)
    local f = io_open(path, "rb")
    if f then f:close() end
    return f ~= nil
end

-- Directory holding this file, or nil when it was not loaded from a file.
local function here()
    local src = debug.getinfo(1, "S").source
    if src:sub(1, 1) ~= "@" then return nil end
    return src:sub(2):match("^(.*)/[^/]*$") or "."
end

function _M.candidates()
    local list = {}
    local dir = here()
    local luaroot = dir and dir:match("^(.*)/ron/accounting/binding$")
    if luaroot then
        local prefix = luaroot:match("^(.*)/share/lua/5%.1$")
        if prefix then
            list[#list + 1] = prefix .. "/lib/" .. LIBNAME
            if MULTIARCH[jit.arch] then
                list[#list + 1] = prefix .. "/lib/" .. MULTIARCH[jit.arch] .. "/" .. LIBNAME
            end
            list[#list + 1] = prefix .. "/lib64/" .. LIBNAME
        else
            -- <repo>/lua → <repo>/build (the default build directory of the Makefile)
            local repo = luaroot:match("^(.*)/lua$") or (luaroot .. "/..")
            list[#list + 1] = repo .. "/build/" .. LIBNAME
        end
    end
    return list
end

local function try(ns_or_path, tried)
    local ns, label
    if type(ns_or_path) == "string" then
        label = ns_or_path
        local ok, lib = pcall(ffi.load, ns_or_path)
        if not ok then
            tried[#tried + 1] = format("%s: %s", label, tostring(lib))
            return nil
        end
        ns = lib
    else
        ns, label = ns_or_path, "ffi.C (host executable)"
    end
    local missing = missing_symbols(ns)
    if #missing > 0 then
        tried[#tried + 1] = format("%s: does not export %s", label, concat(missing, ", "))
        return nil
    end
    local bad = version_mismatch(ns)
    if bad then
        tried[#tried + 1] = format("%s: %s", label, bad)
        return nil
    end
    return ns, label
end

-- Returns the namespace and a description of where it came from; raises when nothing
-- works (a binding without its library is a deployment error, not a runtime condition).
function _M.load()
    local tried = {}

    -- Only probe ffi.C for one symbol first: a plain luajit has none of them, and the
    -- full check would list every function as missing.
    if pcall(function() return ffi.C.ra_version end) then
        local ns, label = try(ffi.C, tried)
        if ns then return ns, label end
    else
        tried[#tried + 1] = "ffi.C: ra_version not exported (not running in the host)"
    end

    local env = getenv("RON_ACCOUNTING_LIB")
    if env and env ~= "" then
        local ns, label = try(env, tried)
        if ns then return ns, label end
        error("ron.accounting: cannot use RON_ACCOUNTING_LIB:\n  " .. concat(tried, "\n  "), 0)
    end
    tried[#tried + 1] = "RON_ACCOUNTING_LIB: not set"

    for _, path in ipairs(_M.candidates()) do
        if file_exists(path) then
            local ns, label = try(path, tried)
            if ns then return ns, label end
        else
            tried[#tried + 1] = path .. ": no such file"
        end
    end

    local ns, label = try("ronacct", tried)
    if ns then return ns, label end

    error("ron.accounting: cannot find libronacct; tried:\n  " .. concat(tried, "\n  ")
          .. "\nset RON_ACCOUNTING_LIB to the library's path, or run under `ron-accounting run`",
          0)
end

-- The namespace, loaded once per Lua state (every module of the package shares it).
local loaded, loaded_from
function _M.namespace()
    if not loaded then loaded, loaded_from = _M.load() end
    return loaded, loaded_from
end

return _M
