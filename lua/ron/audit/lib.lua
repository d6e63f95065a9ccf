-- Finds libronaudit and returns its FFI namespace (with the cdef loaded).
--
-- Search order; the first that exports every function of cdef.lua wins:
--   1. $RON_AUDIT_LIB, a path: when set it is the only candidate (an operator who names a
--      library expects that one, not a silent fallback);
--   2. paths relative to this file: a source tree (<repo>/lua/ron/audit/lib.lua ->
--      <repo>/build/libronaudit.so) and an install (<prefix>/share/lua/5.1/ron/audit/lib.lua
--      -> <prefix>/lib/libronaudit.so);
--   3. ffi.load("ronaudit"): the dynamic linker's search path.
local ffi = require "ffi"
local cdef = require "ron.audit.cdef"

local concat = table.concat
local getenv = os.getenv
local io_open = io.open
local pcall = pcall

local function missing_symbols(ns)
    local missing = {}
    for _, name in ipairs(cdef.functions) do
        if not pcall(function() return ns[name] end) then missing[#missing + 1] = name end
    end
    return missing
end

local function file_exists(path)
    local f = io_open(path, "rb")
    if f then f:close() end
    return f ~= nil
end

local function candidates()
    local env = getenv("RON_AUDIT_LIB")
    if env and env ~= "" then return { env } end
    local here = debug.getinfo(1, "S").source:match("^@(.*)lib%.lua$") or "./"
    local list = {}
    local repo = here:match("^(.*)lua/ron/audit/$")
    if repo then list[#list + 1] = repo .. "build/libronaudit.so" end
    local prefix = here:match("^(.*)share/lua/5%.1/ron/audit/$")
    if prefix then list[#list + 1] = prefix .. "lib/libronaudit.so" end
    list[#list + 1] = "ronaudit"
    return list
end

local errors = {}
for _, c in ipairs(candidates()) do
    if c == "ronaudit" or file_exists(c) then
        local ok, ns = pcall(ffi.load, c)
        if ok then
            local missing = missing_symbols(ns)
            if #missing == 0 then return ns end
            errors[#errors + 1] = c .. ": missing " .. concat(missing, ", ")
        else
            errors[#errors + 1] = c .. ": " .. tostring(ns)
        end
    else
        errors[#errors + 1] = c .. ": no such file"
    end
end
error("ron.audit: libronaudit not found (" .. concat(errors, "; ") .. ")", 2)
