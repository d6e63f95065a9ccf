-- Slices as Lua objects. A slice holds one C reference (ra_slice_t *, released by ffi.gc
-- when the object is collected), so its bytes stay valid however long Lua keeps it, even
-- after the meter that sealed it is closed or the slice is ACKed.
--
-- Fields (PRODUCT.md §5):
--   tenant        UUID string, lowercase
--   dimension     dimension name
--   id            { window_start_s, window_len_s, seq }: Lua numbers (seq is a uint64_t
--                 cdata only from 2^53 on, which no real stream reaches)
--   rows          array of { subject = <32 lowercase hex>, inc = <uint64_t cdata> },
--                 ascending by subject bytes; built on first access (a slice may hold up to
--                 ~43k rows and an exporter that ships encode() never needs them)
--   b3, prev_b3   64 lowercase hex characters; b3 == BLAKE3(slice:encode())
--   amnesia       boolean
--   host          host name from the slice meta
-- Methods: slice:encode() -> the canonical bytes (encoding v1) as a Lua string;
--          slice:row_count() -> number of rows without materialising them.
local ffi = require("ffi")
local C = require("ron.accounting.binding.lib").namespace()

local ffi_gc = ffi.gc
local ffi_new = ffi.new
local ffi_string = ffi.string
local setmetatable = setmetatable
local tonumber = tonumber

local _M = {}

local Slice = {}
Slice.__index = function(self, k)
    if k == "rows" then
        local rows = _M.rows(self._ptr)
        rawset(self, "rows", rows)
        return rows
    end
    return Slice[k]
end

-- Out-parameters and scratch buffers, allocated once (lua-resty-core style).
local id_out = ffi_new("ra_slice_id_t")
local tenant_out = ffi_new("ra_tenant_t")
local subject_out = ffi_new("ra_subject_t")
local inc_out = ffi_new("uint64_t[1]")
local len_out = ffi_new("size_t[1]")
local uuid_buf = ffi_new("char[37]")
local hex_buf = ffi_new("char[65]")

local TWO53 = 2 ^ 53

local function hex(bytes, n)
    C.ra_hex(bytes, n, hex_buf)
    return ffi_string(hex_buf, 2 * n)
end
_M.hex = hex

function _M.tenant_string(t)
    C.ra_tenant_format(t, uuid_buf)
    return ffi_string(uuid_buf, 36)
end

-- uint64_t to a Lua number when exact, else the cdata itself.
local function u64_value(v)
    if v < TWO53 then return tonumber(v) end
    return v
end

function _M.rows(ptr)
    local n = tonumber(C.ra_slice_row_count(ptr))
    local rows = {}
    for i = 0, n - 1 do
        local rc = C.ra_slice_row(ptr, i, subject_out, inc_out)
        assert(rc == 0, "ra_slice_row failed inside row_count") -- slices are immutable
        rows[i + 1] = { subject = hex(subject_out.b, 16), inc = inc_out[0] }
    end
    return rows
end

-- Wraps a new reference (ownership passes to the object).
function _M.wrap(ptr)
    ptr = ffi_gc(ptr, C.ra_slice_unref)
    C.ra_slice_get_id(ptr, id_out)
    C.ra_slice_get_tenant(ptr, tenant_out)
    return setmetatable({
        _ptr = ptr,
        tenant = _M.tenant_string(tenant_out),
        dimension = ffi_string(C.ra_slice_dimension(ptr)),
        host = ffi_string(C.ra_slice_host(ptr)),
        amnesia = C.ra_slice_amnesia(ptr) ~= 0,
        id = {
            window_start_s = tonumber(id_out.window_start_s),
            window_len_s = tonumber(id_out.window_len_s),
            seq = u64_value(id_out.seq),
        },
        b3 = hex(C.ra_slice_b3(ptr), 32),
        prev_b3 = hex(C.ra_slice_prev_b3(ptr), 32),
    }, Slice)
end

function _M.is_slice(v)
    return getmetatable(v) == Slice
end

local function check(self)
    if getmetatable(self) ~= Slice then
        error("ron.accounting: expected a slice (use slice:method(), not slice.method())", 3)
    end
    return self._ptr
end

function Slice:encode()
    local ptr = check(self)
    local p = C.ra_slice_bytes(ptr, len_out)
    return ffi_string(p, len_out[0])
end

function Slice:row_count()
    return tonumber(C.ra_slice_row_count(check(self)))
end

function Slice:__tostring()
    return ("slice %s/%s window %d+%d seq %s b3 %s"):format(self.tenant, self.dimension,
        self.id.window_start_s, self.id.window_len_s, tostring(self.id.seq), self.b3)
end

-- The C pointer, for meter:ack() (and for hosts that hand slices to C code).
function _M.ptr(v)
    if getmetatable(v) ~= Slice then return nil end
    return v._ptr
end

return _M
