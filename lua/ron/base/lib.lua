-- ron.base.lib: finds a library of this repository (libronacct, libronledger, libronaudit)
-- and returns its FFI namespace (with the cdef loaded). One finder for all three:
-- `finder(spec)` builds a loader (ron.accounting.binding.lib is libronacct's,
-- ron.ledger.lib libronledger's, ron.audit.lib libronaudit's).
--
-- Search order; the first that exports every function of the cdef (at the header's
-- major.minor) wins:
--   1. ffi.C, for libronacct only (spec.host): the `ron-accounting` host executable links
--      the core statically and exports its symbols, so nothing has to be found on disk (and
--      no second copy of the core, with its own globals, gets mapped into the process);
--   2. $<spec.env>, a path: when set it is the only candidate, because an operator who names
--      a library expects that library and not a silent fallback to another one;
--   3. paths relative to the Lua tree: a source tree (<repo>/lua/... → <repo>/build/lib<name>.so)
--      and an install (<prefix>/share/lua/5.1/... → <prefix>/lib/lib<name>.so,
--      <prefix>/lib/<multiarch>/..., <prefix>/lib64/...);
--   4. ffi.load(spec.lib): the dynamic linker's search path.
-- When none works, the error lists every candidate and why it was refused.
local ffi = require("ffi")

local concat = table.concat
local format = string.format
local getenv = os.getenv
local io_open = io.open
local pcall = pcall

local _M = {}

-- Debian multiarch triplets for the architectures LuaJIT runs on.
local MULTIARCH = {
    x64 = "x86_64-linux-gnu",
    x86 = "i386-linux-gnu",
    arm64 = "aarch64-linux-gnu",
    arm = "arm-linux-gnueabihf",
    ppc = "powerpc-linux-gnu",
    mips64 = "mips64el-linux-gnuabi64",
}

local function missing_symbols(cdef, ns)
    local missing = {}
    for _, name in ipairs(cdef.functions) do
        if not pcall(function() return ns[name] end) then missing[#missing + 1] = name end
    end
    return missing
end

-- Major.minor must match the header the cdef was generated from: within one minor
-- version the ABI only grows, and the symbol check above catches a missing function.
-- A cdef without a version (ron.base.b3: one function of libronacct) skips the check.
local function version_mismatch(cdef, version_fn, ns)
    if not cdef.version then return nil end
    local v = ffi.string(ns[version_fn]())
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

local function candidates(libname)
    local list = {}
    local dir = here()
    local luaroot = dir and dir:match("^(.*)/ron/base$")
    if luaroot then
        local prefix = luaroot:match("^(.*)/share/lua/5%.1$")
        if prefix then
            list[#list + 1] = prefix .. "/lib/" .. libname
            if MULTIARCH[jit.arch] then
                list[#list + 1] = prefix .. "/lib/" .. MULTIARCH[jit.arch] .. "/" .. libname
            end
            list[#list + 1] = prefix .. "/lib64/" .. libname
        else
            -- <repo>/lua → <repo>/build (the default build directory of the Makefile)
            local repo = luaroot:match("^(.*)/lua$") or (luaroot .. "/..")
            list[#list + 1] = repo .. "/build/" .. libname
        end
    end
    return list
end

local function try(spec, ns_or_path, tried)
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
    local missing = missing_symbols(spec.cdef, ns)
    if #missing > 0 then
        tried[#tried + 1] = format("%s: does not export %s", label, concat(missing, ", "))
        return nil
    end
    local bad = version_mismatch(spec.cdef, spec.version, ns)
    if bad then
        tried[#tried + 1] = format("%s: %s", label, bad)
        return nil
    end
    return ns, label
end

-- A loader for one library. spec = { name = "ron.ledger" (for errors), lib = "ronledger",
-- env = "RON_LEDGER_LIB", cdef = (the generated cdef module), version = "rl_version",
-- host = true when the host executable exports it (ffi.C) }. Returns { candidates(),
-- load() -> ns, label (raises: a binding without its library is a deployment error, not a
-- runtime condition), namespace() (loaded once per Lua state) }.
function _M.finder(spec)
    local F = {}
    local libname = "lib" .. spec.lib .. ".so"

    function F.candidates() return candidates(libname) end

    function F.load()
        local tried = {}
        if spec.host then
            -- Only probe ffi.C for one symbol first: a plain luajit has none of them, and
            -- the full check would list every function as missing.
            if pcall(function() return ffi.C[spec.version] end) then
                local ns, label = try(spec, ffi.C, tried)
                if ns then return ns, label end
            else
                tried[#tried + 1] = "ffi.C: " .. spec.version ..
                                    " not exported (not running in the host)"
            end
        end
        local env = getenv(spec.env)
        if env and env ~= "" then
            local ns, label = try(spec, env, tried)
            if ns then return ns, label end
            error(format("%s: cannot use %s:\n  %s", spec.name, spec.env, concat(tried, "\n  ")),
                  0)
        end
        tried[#tried + 1] = spec.env .. ": not set"
        for _, path in ipairs(candidates(libname)) do
            if file_exists(path) then
                local ns, label = try(spec, path, tried)
                if ns then return ns, label end
            else
                tried[#tried + 1] = path .. ": no such file"
            end
        end
        local ns, label = try(spec, spec.lib, tried)
        if ns then return ns, label end
        error(format("%s: cannot find %s; tried:\n  %s\nset %s to the library's path%s",
                     spec.name, "lib" .. spec.lib, concat(tried, "\n  "), spec.env,
                     spec.host and ", or run under `ron-accounting run`" or ""), 0)
    end

    local loaded, loaded_from
    function F.namespace()
        if not loaded then loaded, loaded_from = F.load() end
        return loaded, loaded_from
    end
    return F
end

return _M
