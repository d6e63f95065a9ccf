-- ron.base.b3: BLAKE3 of a Lua string, for every package (token digests, account ids, the
-- ledger's record links). The digest is libronacct's ra_b3 (the official BLAKE3 C
-- implementation the core links; b3sum computes the same), found by the one library
-- finder (ron.base.lib) the first time it is used; nothing else of the meter is loaded.
--
--   b3.raw(s) -> 32 bytes        b3.hex(s) -> 64 lowercase hex characters (what b3sum prints)
local ffi = require("ffi")
local lib = require("ron.base.lib")

local type, error = type, error
local ffi_new, ffi_string = ffi.new, ffi.string

-- The same declarations as ron.accounting.binding.cdef (an identical redeclaration is
-- allowed, so either may load first).
ffi.cdef [[
const char *ra_version(void);
void ra_b3(const void *buf, size_t len, uint8_t *out);
void ra_hex(const uint8_t *bytes, size_t n, char *out);
]]

local _M = {}

local finder = lib.finder { name = "ron.base.b3", lib = "ronacct", env = "RON_ACCOUNTING_LIB",
                            cdef = { functions = { "ra_b3", "ra_hex" } },
                            version = "ra_version", host = true }
local C
local out = ffi_new("uint8_t[32]")
local hex_buf = ffi_new("char[65]")

local function digest(s, who)
    if type(s) ~= "string" then error("ron.base.b3." .. who .. ": expected a string", 3) end
    if not C then C = finder.namespace() end
    C.ra_b3(s, #s, out)
end

function _M.raw(s)
    digest(s, "raw")
    return ffi_string(out, 32)
end

function _M.hex(s)
    digest(s, "hex")
    C.ra_hex(out, 32, hex_buf)
    return ffi_string(hex_buf, 64)
end

return _M
