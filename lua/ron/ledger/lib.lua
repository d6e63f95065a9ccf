-- Finds libronledger and returns its FFI namespace (with the cdef loaded).
--
-- Search order; the first that exports every function of cdef.lua (at the header's
-- major.minor) wins:
--   1. $RON_LEDGER_LIB, a path: when set it is the only candidate (an operator who names a
--      library expects that library, not a silent fallback);
--   2. paths relative to this file: a source tree (<repo>/lua/ron/ledger/lib.lua →
--      <repo>/build/libronledger.so) and an install (<prefix>/share/lua/5.1/ron/ledger/lib.lua
--      → <prefix>/lib/libronledger.so, <prefix>/lib/<multiarch>/…, <prefix>/lib64/…);
--   3. ffi.load("ronledger"): the dynamic linker's search path.
-- When none works, the error lists every candidate and why it was refused.
local ffi = require "ffi"
local cdef = require "ron.ledger.cdef"

local concat = table.concat
local format = string.format
local getenv = os.getenv
local io_open = io.open
local pcall = pcall

local _M = {}

local LIBNAME = "libronledger.so"
local MULTIARCH = {
    x64 = "x86_64-linux-gnu",
    arm64 = "aarch64-linux-gnu",
}

local function refusal(ns)
    for _, name in ipairs(cdef.functions) do
        if not pcall(function() return ns[name] end) then
            return "does not export " .. name
        end
    end
    local v = ffi.string(ns.rl_version())
    if v:match("^(%d+%.%d+)%.") ~= cdef.version:match("^(%d+%.%d+)%.") then
        return format("library version %s, binding generated for %s", v, cdef.version)
    end
end

local function file_exists(path)
    local f = io_open(path, "rb")
    if f then f:close() end
    return f ~= nil
end

function _M.candidates()
    local list = {}
    local src = debug.getinfo(1, "S").source
    local dir = src:sub(1, 1) == "@" and (src:sub(2):match("^(.*)/[^/]*$") or ".") or nil
    local luaroot = dir and dir:match("^(.*)/ron/ledger$")
    if luaroot then
        local prefix = luaroot:match("^(.*)/share/lua/5%.1$")
        if prefix then
            list[#list + 1] = prefix .. "/lib/" .. LIBNAME
            if MULTIARCH[jit.arch] then
                list[#list + 1] = prefix .. "/lib/" .. MULTIARCH[jit.arch] .. "/" .. LIBNAME
            end
            list[#list + 1] = prefix .. "/lib64/" .. LIBNAME
        else
            local repo = luaroot:match("^(.*)/lua$") or (luaroot .. "/..")
            list[#list + 1] = repo .. "/build/" .. LIBNAME
        end
    end
    return list
end

local function try(path, tried)
    local ok, lib = pcall(ffi.load, path)
    if not ok then
        tried[#tried + 1] = format("%s: %s", path, tostring(lib))
        return nil
    end
    local bad = refusal(lib)
    if bad then
        tried[#tried + 1] = format("%s: %s", path, bad)
        return nil
    end
    return lib, path
end

-- Returns the namespace and where it came from; raises when nothing works (a binding
-- without its library is a deployment error, not a runtime condition).
function _M.load()
    local tried = {}
    local env = getenv("RON_LEDGER_LIB")
    if env and env ~= "" then
        local ns, label = try(env, tried)
        if ns then return ns, label end
        error("ron.ledger: cannot use RON_LEDGER_LIB:\n  " .. concat(tried, "\n  "), 0)
    end
    tried[#tried + 1] = "RON_LEDGER_LIB: not set"
    for _, path in ipairs(_M.candidates()) do
        if file_exists(path) then
            local ns, label = try(path, tried)
            if ns then return ns, label end
        else
            tried[#tried + 1] = path .. ": no such file"
        end
    end
    local ns, label = try("ronledger", tried)
    if ns then return ns, label end
    error("ron.ledger: cannot find libronledger; tried:\n  " .. concat(tried, "\n  ")
          .. "\nset RON_LEDGER_LIB to the library's path", 0)
end

local loaded, loaded_from
function _M.namespace()
    if not loaded then loaded, loaded_from = _M.load() end
    return loaded, loaded_from
end

return _M
