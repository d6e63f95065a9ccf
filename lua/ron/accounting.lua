-- ron.accounting: the LuaJIT binding of libronacct (PRODUCT.md §5, "Contracts / Lua").
--
--   local acct = require("ron.accounting")
--   local meter = assert(acct.open { window_len_s = 60, dimensions = { "egress" } })
--   local tenant = assert(acct.tenant "123e4567-e89b-12d3-a456-426614174000")
--   local subject = meter:subject "user-42"
--   meter:record(tenant, subject, "bytes", 1500)           -- true | nil, err
--   for _, s in ipairs(assert(meter:rollover())) do ship(s:encode()); meter:ack(s) end
--
-- Errors (STYLE.md rule 11, luv style): runtime failures return nil, "<Name>: <detail>",
-- where <Name> is a taxonomy name from acct.errors (CapacityExceeded, Busy, …,
-- InvalidArgument). Misuse (a closed meter, meter.record instead of meter:record, a
-- non-table config) raises error(msg, 2). On the record path every error is a value.
--
-- record(tenant, subject, dimension, inc):
--   tenant     UUID string (either case) or an acct.tenant() handle (ra_tenant_t cdata)
--   subject    opaque string, hashed with keyed BLAKE3 (ra_meter_subject), or a
--              meter:subject() handle (ra_subject_t cdata)
--   dimension  registered name, or its numeric id (meter:dimension(name))
--   inc        integer Lua number in 0..2^53-1, or uint64_t cdata, or int64_t cdata >= 0
-- key(tenant, subject, dimension) -> key handle, and record_key(key, inc): the same record
-- with the key resolved once (a handle caches its plane entry: no key hash per record).
-- Every bad argument returns nil, "InvalidArgument: …" and is counted in
-- accounting_rejected_total{reason="invalid"} (ra_meter_count_invalid). The call
-- allocates nothing and a record loop compiles to
-- one looping trace with the FFI call inside it (spec/ron/accounting_hotpath_spec.lua);
-- tenant and subject strings are parsed into module-level buffers, pre-parsed handles
-- skip that work (a subject string costs one keyed BLAKE3 per call).
--
-- Time: with cfg.clock, record() and rollover() pass floor(clock() * 1000) ms to the core
-- (ra_meter_record_at, ra_meter_rollover); the Lua function is never handed to C. Without
-- it the core reads the system UTC clock.
--
-- rollover([now_s]) -> slices | slices, err | nil, err:
--   seals every ended window; slices are those sealed by this call (an empty table when no
--   boundary was crossed), in seal order (per stream in seq order).
--   * now_s (UTC seconds) wins over cfg.clock, which wins over the system clock.
--   * With cfg.shm, only one meter (process) on the plane may seal: the others get
--     nil, "Busy: …" and should leave sealing to the sealer.
--   * When the core stops early (CapacityExceeded: the pending ring or the stream-head
--     table is full; NoMemory), the slices it did seal are already in the pending ring, so
--     they are returned as the first value and the error as the second: slices, err. The
--     streams that did not fit stay in the counter plane, counted, and a later rollover
--     seals them (nothing is lost). The first value is nil only when nothing was sealed,
--     so `local s, err = m:rollover(); if not s then …` never drops sealed slices; callers
--     that care about backpressure check err as well.
--
-- Slices: see ron/accounting/slice.lua (tenant, dimension, id, rows, b3, prev_b3, amnesia,
-- host, :encode()). Configuration and defaults: ron/accounting/config.lua.
local ffi = require("ffi")
local b3 = require("ron.base.b3")
local config = require("ron.accounting.binding.config")
local libmod = require("ron.accounting.binding.lib")
local slice = require("ron.accounting.binding.slice")

local C, C_from = libmod.namespace()

local error = error
local ffi_gc = ffi.gc
local ffi_new = ffi.new
local ffi_string = ffi.string
local floor = math.floor
local getmetatable = getmetatable
local istype = ffi.istype
local tonumber = tonumber
local tostring = tostring
local type = type

local _M = { _VERSION = "0.1.0" }

-- Where the library came from ("ffi.C (host executable)" or a path), for diagnostics.
_M.library = C_from

-- The defaults of acct.open(), documented in ron/accounting/config.lua.
_M.DEFAULTS = config.DEFAULTS

---------------------------------------------------------------------------------------
-- errors
---------------------------------------------------------------------------------------

-- "Name: message" for every code, built once: the record path returns these strings
-- without concatenating (no garbage on the hot path, even when failing).
local ERRMSG = {}
_M.errors = {}
for code = C.RA_ERRNO_MIN, -1 do
    local name = ffi_string(C.ra_err_name(code))
    _M.errors[name] = name
    ERRMSG[code] = name .. ": " .. ffi_string(C.ra_strerror(code))
end

local function errmsg(rc)
    return ERRMSG[rc] or ("Unknown: error code " .. tostring(rc))
end

---------------------------------------------------------------------------------------
-- handles and module-level buffers (allocated once, lua-resty-core style)
---------------------------------------------------------------------------------------

-- A metatable is permanent: when the module is loaded again in the same Lua state, the
-- first load's metatable (equivalent) stays and ffi.metatype raises; use the type as is.
local function metatype(name, mt)
    local ok, ct = pcall(ffi.metatype, name, mt)
    if ok then return ct end
    return ffi.typeof(name)
end

local tenant_t = metatype("ra_tenant_t", {
    __tostring = function(t) return slice.tenant_string(t) end,
})
local subject_t = metatype("ra_subject_t", {
    __tostring = function(s) return slice.hex(s.b, 16) end,
})
local key_t = metatype("ra_key_t", {
    __tostring = function(k)
        return "ron.accounting key " .. slice.tenant_string(k.tenant) .. " " ..
               slice.hex(k.subject.b, 16) .. " dimension " .. tonumber(k.dim)
    end,
})
local u64_t = ffi.typeof("uint64_t")
local i64_t = ffi.typeof("int64_t")

local tenant_buf = ffi_new(tenant_t)   -- record() with a tenant string parses into this
local subject_buf = ffi_new(subject_t) -- record() with a subject string hashes into this
local n_sealed_out = ffi_new("size_t[1]")
local slice_out = ffi_new("ra_slice_t *[1]")
local len_out = ffi_new("size_t[1]")
local last_out = ffi_new("uint64_t[1]")
local backlog_out = ffi_new("ra_backlog_t")
local REFUSALS_MAX = 256
local refusals_out = ffi_new("ra_refusal_t[?]", REFUSALS_MAX)
local refusals_n, refusals_lost = ffi_new("size_t[1]"), ffi_new("uint64_t[1]")
local ZERO16 = string.rep("\0", 16)
local ERRBUF_LEN = 512

local metrics_cap = 4096 -- grows to what the core asks for (RA_EBUFSIZE)
local metrics_buf = ffi_new("char[?]", metrics_cap)

local TWO53 = 2 ^ 53
local NULL = nil -- a NULL pointer cdata compares equal to nil

---------------------------------------------------------------------------------------
-- module functions
---------------------------------------------------------------------------------------

function _M.version()
    return ffi_string(C.ra_version())
end

-- A pre-parsed tenant handle (ra_tenant_t cdata) for the record path.
function _M.tenant(s)
    if type(s) ~= "string" then
        return nil, "InvalidArgument: tenant must be a UUID string, got " .. type(s)
    end
    local t = ffi_new(tenant_t)
    if C.ra_tenant_parse(s, #s, t) ~= 0 then
        return nil, "InvalidArgument: tenant is not a UUID string"
    end
    return t
end

-- BLAKE3 of a Lua string as 64 lowercase hex characters (what b3sum prints).
_M.b3hex = b3.hex

-- Strict decode of canonical slice bytes (encoding v1).
function _M.decode(bytes)
    if type(bytes) ~= "string" then error("ron.accounting.decode: expected a string", 2) end
    local rc = C.ra_slice_decode(bytes, #bytes, slice_out)
    if rc ~= 0 then return nil, errmsg(rc) end
    local ptr = slice_out[0]
    slice_out[0] = NULL
    return slice.wrap(ptr)
end

---------------------------------------------------------------------------------------
-- meters
---------------------------------------------------------------------------------------

local Meter = {}
Meter.__index = Meter

-- The meter's C handle; raises on misuse (level 3: the caller of the method), and once
-- closed unless closed_ok (then nil).
local function handle(self, closed_ok)
    if getmetatable(self) ~= Meter then
        error("ron.accounting: expected a meter (use meter:method(), not meter.method())", 3)
    end
    local m = self._m
    if m == nil and not closed_ok then error("ron.accounting: the meter is closed", 3) end
    return m
end

-- Misuse: an argument v not of Lua type t raises msg (level as error's, from the caller).
local function expect(v, t, msg, level)
    if type(v) ~= t then error("ron.accounting: " .. msg, level + 1) end
end

local function hexkey(s)
    local key = ffi_new("uint8_t[32]")
    for i = 0, 31 do key[i] = tonumber(s:sub(2 * i + 1, 2 * i + 2), 16) end
    return key
end

-- cfg (checked by config.validate) as a ra_config_t; keep: what its pointers point into,
-- to be kept alive until the C call returns (in ANCHOR during the call: a local the
-- compiler sees unused may be collected). -> cc, keep | nil, err
local WAL_U32 = { "max_entries", "max_age_s" } -- wal keys whose ra_config_t field is uint32_t
local ANCHOR = {} -- luacheck: ignore 241 (written, never read: that is its point)
local function c_config(cfg)
    local c, err = config.validate(cfg)
    if not c then return nil, err end

    local cc = ffi_new("ra_config_t")
    C.ra_config_init(cc)
    cc.window_len_s = c.window_len_s
    cc.shards = c.shards
    cc.capacity_rows = c.capacity_rows
    cc.pending_slices_cap = c.pending_slices_cap
    cc.amnesia = c.amnesia and 1 or 0
    -- The C side copies every string and the key during ra_meter_open; these locals (and
    -- c, which holds the Lua strings) keep them alive until it returns.
    local ndims = #c.dimensions
    local dims = ffi_new("const char *[?]", ndims + 1)
    for i = 1, ndims do dims[i - 1] = c.dimensions[i] end
    cc.dimensions = dims
    cc.n_dimensions = ndims
    if c.shm then cc.shm_path = c.shm end
    local wal = c.wal
    if wal then
        cc.wal_dir = wal.dir
        if wal.max_bytes then cc.wal_max_bytes = wal.max_bytes end
        for _, k in ipairs(WAL_U32) do
            local v = wal[k]
            if v and v > 4294967295 then
                return nil, "InvalidArgument: wal." .. k .. " must fit 32 bits"
            end
            if v then cc["wal_" .. k] = v end
        end
    end
    if c.host then cc.host = c.host end
    local key = c.subject_key and hexkey(c.subject_key)
    if key then cc.subject_key = key end
    return cc, { c, dims, key }
end

-- "Name: detail" from a failed call's code and its error buffer (or the code's message).
local function c_error(rc, errbuf)
    local detail = ffi_string(errbuf)
    if detail == "" then return errmsg(rc) end
    return ffi_string(C.ra_err_name(rc)) .. ": " .. detail
end

-- cfg checked (misuse raises at the caller of _M[fname]) and converted, then
-- call(cc, errbuf, ERRBUF_LEN) with what cc points into anchored. -> keep | nil, err
local function with_config(fname, cfg, call)
    if cfg ~= nil and type(cfg) ~= "table" then
        error("ron.accounting." .. fname .. ": cfg must be a table or nil", 3)
    end
    local cc, keep = c_config(cfg)
    if not cc then return nil, keep end
    local errbuf = ffi_new("char[?]", ERRBUF_LEN)
    ANCHOR[1] = keep
    local rc = call(cc, errbuf, ERRBUF_LEN)
    ANCHOR[1] = nil
    if rc ~= 0 then return nil, c_error(rc, errbuf) end
    return keep
end

-- check_config(cfg) -> true | nil, err: what open(cfg) would refuse, by the same checks
-- (config.validate, then the core's ra_config_check), without opening anything.
function _M.check_config(cfg)
    local keep, err = with_config("check_config", cfg, C.ra_config_check)
    if not keep then return nil, err end
    return true
end

function _M.open(cfg)
    local out = ffi_new("ra_meter_t *[1]")
    local keep, err = with_config("open", cfg, function(cc, errbuf, n)
        return C.ra_meter_open(cc, out, errbuf, n)
    end)
    if not keep then return nil, err end
    local c = keep[1]
    local m = ffi_gc(out[0], C.ra_meter_close)

    -- Dimension ids resolved once: record() looks names up in this table, never in C.
    -- The meter's own list is authoritative (with cfg.shm it is the plane's).
    local ids, names = {}, {}
    for id = 0, C.RA_DIM_MAX - 1 do
        local p = C.ra_meter_dimension_name(m, id)
        if p == NULL then break end
        local name = ffi_string(p)
        ids[name] = id
        ids[id] = id
        names[id + 1] = name
    end

    return setmetatable({
        _m = m,
        _dims = ids,
        _dim_names = names,
        _clock = c.clock,
        -- rollover() receives the slices it sealed here, under the core's seal mutex, so
        -- no ACK from another thread can shift them (one array per meter, not per call).
        _sealed_cap = c.pending_slices_cap,
        _sealed = ffi_new("ra_slice_t *[?]", c.pending_slices_cap),
    }, Meter)
end

-- Counts one bad record in accounting_rejected_total{reason="invalid"}.
local function reject(m, msg)
    C.ra_meter_count_invalid(m)
    return nil, msg
end

-- The argument checks of the hot path: each returns the value for the core, or nil and a
-- constant message (no string building, no garbage, even when failing).
local function tenant_arg(tenant)
    if type(tenant) == "string" then
        if C.ra_tenant_parse(tenant, #tenant, tenant_buf) ~= 0 then
            return nil, "InvalidArgument: tenant is not a UUID string"
        end
        return tenant_buf
    elseif istype(tenant_t, tenant) then
        return tenant
    end
    return nil, "InvalidArgument: tenant must be a UUID string or an acct.tenant() handle"
end

local function subject_arg(m, subject)
    if type(subject) == "string" then
        C.ra_meter_subject(m, subject, #subject, subject_buf)
        return subject_buf
    elseif istype(subject_t, subject) then
        return subject
    end
    return nil, "InvalidArgument: subject must be a string or a meter:subject() handle"
end

-- nil when inc is a valid increment, else the message.
local function inc_error(inc)
    if type(inc) == "number" then
        -- NaN fails the first comparison; 2^53 and above are not exact integers.
        if not (inc >= 0 and inc < TWO53 and floor(inc) == inc) then
            return "InvalidArgument: inc must be an integer in 0..2^53-1"
        end
    elseif istype(u64_t, inc) then -- luacheck: ignore 542 (any uint64_t is valid)
    elseif istype(i64_t, inc) then
        if inc < 0 then return "InvalidArgument: inc must not be negative" end
    else
        return "InvalidArgument: inc must be a number or a uint64_t cdata"
    end
    return nil
end

-- The key of record() and key(): tenant, subject, dimension id | nil, message.
local function key_args(self, m, tenant, subject, dimension)
    local t, terr = tenant_arg(tenant)
    if t == nil then return nil, terr end
    local s, serr = subject_arg(m, subject)
    if s == nil then return nil, serr end
    local dim = self._dims[dimension]
    if dim == nil then return nil, "InvalidArgument: unknown dimension" end
    return t, s, dim
end

-- One record at the meter's injected clock (cfg.clock, in seconds) or else at the core's
-- own time: the rule of record() and of the nginx path (ron.accounting.nginx). -> rc
local function record_rc(m, clock, t, s, dim, inc)
    if clock then return C.ra_meter_record_at(m, floor(clock() * 1000), t, s, dim, inc) end
    return C.ra_meter_record(m, t, s, dim, inc)
end
_M.record_rc = record_rc

-- The hot path. No allocation, no closure, no string building: every error message is
-- a constant; buffers are module-level.
function Meter:record(tenant, subject, dimension, inc)
    local m = handle(self)
    local t, s, dim = key_args(self, m, tenant, subject, dimension)
    if t == nil then return reject(m, s) end
    local ierr = inc_error(inc)
    if ierr then return reject(m, ierr) end

    local rc = record_rc(m, self._clock, t, s, dim, inc)
    if rc == 0 then return true end
    return nil, ERRMSG[rc] or errmsg(rc)
end

-- A key handle (ra_key_t cdata): tenant, subject and dimension (the arguments of record)
-- resolved once, for record_key. It caches the plane entry of its key, so a record through
-- it skips the key hash, probe and compare (ra_meter_record_key). Use a handle from one
-- thread at a time; a handle made by one meter may be used with another (it re-caches).
function Meter:key(tenant, subject, dimension)
    local m = handle(self)
    local t, s, dim = key_args(self, m, tenant, subject, dimension)
    if t == nil then return reject(m, s) end
    local k = ffi_new(key_t)
    local rc = C.ra_key_init(k, m, t, s, dim)
    if rc ~= 0 then return nil, errmsg(rc) end
    return k
end

-- record() through a key handle: true | nil, err, with record()'s checks of inc, clock and
-- errors. Allocation-free like record().
function Meter:record_key(key, inc)
    local m = handle(self)
    if not istype(key_t, key) then
        return reject(m, "InvalidArgument: key must be a meter:key() handle")
    end
    local ierr = inc_error(inc)
    if ierr then return reject(m, ierr) end
    local clock = self._clock
    local rc
    if clock then
        rc = C.ra_meter_record_key_at(m, floor(clock() * 1000), key, inc)
    else
        rc = C.ra_meter_record_key(m, key, inc)
    end
    if rc == 0 then return true end
    return nil, ERRMSG[rc] or errmsg(rc)
end

-- A pre-parsed subject handle (ra_subject_t cdata): keyed BLAKE3 of the identifier under
-- this meter's subject key.
function Meter:subject(id)
    local m = handle(self)
    if type(id) ~= "string" then
        return nil, "InvalidArgument: subject must be a string, got " .. type(id)
    end
    local s = ffi_new(subject_t)
    local rc = C.ra_meter_subject(m, id, #id, s)
    if rc ~= 0 then return nil, errmsg(rc) end
    return s
end

-- Numeric id of a registered dimension (record() accepts it in place of the name).
function Meter:dimension(name)
    handle(self)
    local id = self._dims[name]
    if id == nil or type(name) ~= "string" then
        return nil, "NotFound: no dimension named " .. tostring(name)
    end
    return id
end

-- Registered dimension names, in id order (the built-ins first).
function Meter:dimensions()
    handle(self)
    local out = {}
    for i, n in ipairs(self._dim_names) do out[i] = n end
    return out
end

-- now_ms for rollover: nil, err when the time is unusable. RA_NOW (-1) asks the core to
-- read its own clock; that must never happen by accident (a double too large for int64_t
-- converts to a negative one).
local NOW_S_MAX = 2 ^ 53 / 1000
local function rollover_ms(self, now_s)
    if now_s ~= nil then
        expect(now_s, "number", "rollover(now_s): now_s must be UTC seconds (a number)", 3)
        if not (now_s >= 0 and now_s < NOW_S_MAX) then
            return nil, "InvalidArgument: now_s must be a number of seconds in [0, 2^53/1000)"
        end
        return floor(now_s * 1000)
    end
    local clock = self._clock
    if clock then
        local t = clock()
        if type(t) ~= "number" or not (t >= 0 and t < NOW_S_MAX) then
            return nil, "InvalidArgument: cfg.clock returned " .. tostring(t)
                        .. ", not non-negative UTC seconds"
        end
        return floor(t * 1000)
    end
    return C.RA_NOW
end

-- Wraps out[0..n-1] (new references from the core) as slice objects; a NULL entry (a
-- sealed slice that waits in the WAL's backlog) is left out.
local function wrap_all(out, n)
    local list = {}
    for i = 0, n - 1 do
        if out[i] ~= NULL then list[#list + 1] = slice.wrap(out[i]) end
        out[i] = NULL
    end
    return list
end

function Meter:rollover(now_s)
    local m = handle(self)
    local now_ms, err = rollover_ms(self, now_s)
    if not now_ms then return nil, err end
    local out, cap = self._sealed, self._sealed_cap
    local rc = C.ra_meter_rollover(m, now_ms, out, cap, n_sealed_out)
    local n = tonumber(n_sealed_out[0])
    if n == 0 then
        if rc ~= 0 then return nil, errmsg(rc) end
        return {}
    end
    -- The ones in the pending ring (at most cap, its capacity); with a WAL, the others wait
    -- in the backlog and come back through pending_since().
    local sealed = wrap_all(out, n < cap and n or cap)
    if rc ~= 0 then return sealed, errmsg(rc) end
    return sealed
end

-- Every sealed, un-ACKed slice of this meter, oldest first (per stream in seq order), in
-- one pass over the ring.
function Meter:pending()
    local m = handle(self)
    local count = tonumber(C.ra_meter_pending_count(m))
    if count == 0 then return {} end
    local out = ffi_new("ra_slice_t *[?]", count)
    C.ra_meter_pending_list(m, 0, out, count, len_out)
    return wrap_all(out, tonumber(len_out[0]))
end

-- The pending slices that entered the ring after push number `after` (0 or nil: all), oldest
-- first: newly sealed ones and, with a WAL, those read back from the backlog. Returns the
-- list and the push number to pass next time (so a caller sees each slice once).
function Meter:pending_since(after)
    local m = handle(self)
    after = after or 0
    local count = tonumber(C.ra_meter_pending_count(m))
    if count == 0 then return {}, after end
    local out = ffi_new("ra_slice_t *[?]", count)
    C.ra_meter_pending_since(m, after, out, count, len_out, last_out)
    return wrap_all(out, tonumber(len_out[0])), last_out[0]
end

-- The backlog: { spilled =, spilled_total =, refilled_total =, refill_errors = } (numbers).
function Meter:backlog()
    local b = backlog_out
    C.ra_meter_backlog(handle(self), b)
    return { spilled = tonumber(b.spilled), spilled_total = tonumber(b.spilled_total),
             refilled_total = tonumber(b.refilled_total),
             refill_errors = tonumber(b.refill_errors) }
end

-- Refused records not yet read through this meter, from every process of the plane (I-14;
-- ra_meter_refusals): a list of { n =, at_ms =, tenant = uuid or nil, subject = 32 hex
-- digits or nil, pid =, dimension = name or nil, reason = } oldest first (at most `max`,
-- default and at most 256), and how many were lost before this meter read them.
function Meter:refusals(max)
    local m = handle(self)
    max = math.min(tonumber(max) or REFUSALS_MAX, REFUSALS_MAX)
    local rc = C.ra_meter_refusals(m, refusals_out, max, refusals_n, refusals_lost)
    if rc ~= 0 then return nil, errmsg(rc) end
    local list = {}
    for i = 0, tonumber(refusals_n[0]) - 1 do
        local r = refusals_out[i]
        local t = ffi.string(r.tenant.b, 16)
        local sub = ffi.string(r.subject.b, 16)
        list[#list + 1] = {
            n = tonumber(r.n), at_ms = tonumber(r.at_ms), pid = tonumber(r.pid),
            tenant = t ~= ZERO16 and slice.tenant_string(r.tenant) or nil,
            subject = sub ~= ZERO16 and slice.hex(r.subject.b, 16) or nil,
            dimension = r.dim >= 0 and self._dim_names[r.dim + 1] or nil,
            reason = ffi.string(r.reason),
        }
    end
    return list, tonumber(refusals_lost[0])
end

-- How many sealed slices wait for an ACK: the core's count, without wrapping them (cheap
-- enough for a metrics scrape or a health tick on the loop thread; no lock taken).
function Meter:pending_count()
    return tonumber(C.ra_meter_pending_count(handle(self)))
end

-- Records through this meter go to the keys' entries of `stripe` (0..1023; 0: the shared
-- one): processes that record the same hot keys into one shm plane (nginx workers) then
-- never contend for a cache line. Sealing sums a key's entries; a key recorded through k
-- stripes takes up to k entries of capacity_rows. See ra_meter_set_stripe.
function Meter:set_stripe(stripe)
    local m = handle(self)
    if type(stripe) ~= "number" or stripe ~= math.floor(stripe) or stripe < 0 or stripe > 1023 then
        return nil, "InvalidArgument: stripe must be an integer in 0..1023"
    end
    local rc = C.ra_meter_set_stripe(m, stripe)
    if rc ~= 0 then return nil, errmsg(rc) end
    return true
end

-- The downstream stored the slice: drop it from the pending ring.
function Meter:ack(s)
    local m = handle(self)
    local ptr = slice.ptr(s)
    if ptr == nil then error("ron.accounting: ack(slice): expected a slice", 2) end
    local rc = C.ra_meter_ack(m, ptr)
    if rc == C.RA_ENOTFOUND then
        return nil, "NotFound: the slice is not pending on this meter (ACKed already?)"
    end
    if rc ~= 0 then return nil, errmsg(rc) end
    -- Compaction follows (PRODUCT.md §5): with a WAL, a segment whose slices are all ACKed
    -- goes now. The ACK itself has happened either way; a failed compaction is retried by
    -- the next ack() or compact() and reported as a second value.
    rc = C.ra_meter_compact(m)
    if rc ~= 0 then return true, errmsg(rc) end
    return true
end

-- Continues a stream's chain from the downstream's head (a node that lost its own heads:
-- amnesia, a new plane), before this meter sealed anything of the stream:
--   meter:seed_head(tenant, dimension, { seq = n, b3 = "<64 hex>", window_start_s = s })
--   -> true | nil, "Incompatible: ..." (the meter has a chain of its own) | nil, err
-- ron.node does it at start for every head the exporter lists (list_heads()).
function Meter:seed_head(tenant, dimension, head)
    local m = handle(self)
    local t, terr = tenant, nil
    if type(tenant) == "string" then t, terr = _M.tenant(tenant) end
    if not t then return nil, terr end
    local dim = self._dims[dimension]
    if dim == nil then return nil, "InvalidArgument: unknown dimension " .. tostring(dimension) end
    if type(head) ~= "table" or type(head.seq) ~= "number" or head.seq < 1
       or head.seq ~= math.floor(head.seq) or type(head.b3) ~= "string"
       or not head.b3:match("^%x+$") or #head.b3 ~= 64 then
        return nil, "InvalidArgument: head must be { seq = integer >= 1, b3 = 64 hex }"
    end
    local rc = C.ra_meter_seed_head(m, t, dim, head.seq, hexkey(head.b3:lower()),
                                    head.window_start_s or 0)
    if rc == C.RA_EINCOMPAT then
        return nil, "Incompatible: this meter already has a chain of its own for "
                    .. tostring(dimension) .. " of that tenant"
    end
    if rc ~= 0 then return nil, errmsg(rc) end
    return true
end

-- With a WAL: removes the segments whose slices are all ACKed (blocking I/O, fsync).
function Meter:compact()
    local rc = C.ra_meter_compact(handle(self))
    if rc ~= 0 then return nil, errmsg(rc) end
    return true
end

-- Prometheus text exposition.
function Meter:metrics()
    local m = handle(self)
    -- Bounded: the text only grows between two calls by the digits of counters.
    for _ = 1, 4 do
        local rc = C.ra_meter_metrics(m, metrics_buf, metrics_cap, len_out)
        if rc == 0 then return ffi_string(metrics_buf, len_out[0]) end
        if rc ~= C.RA_EBUFSIZE then return nil, errmsg(rc) end
        metrics_cap = tonumber(len_out[0]) + 1024
        metrics_buf = ffi_new("char[?]", metrics_cap)
    end
    return nil, errmsg(C.RA_EBUFSIZE)
end

-- G-21: the window length is fixed for the life of the meter (and of a shm plane). The
-- same value is accepted; any other is refused, logged by the core at WARN and counted in
-- accounting_rejected_total{reason="config_change"}.
function Meter:set_window_len(window_len_s)
    local m = handle(self)
    expect(window_len_s, "number", "set_window_len(n): n must be a number", 2)
    local v = window_len_s
    -- A value that does not fit uint32_t is still a change request: let the core refuse
    -- (and count) it as 0, which no meter uses, rather than letting the FFI wrap it.
    if v ~= floor(v) or v < 0 or v > 4294967295 then v = 0 end
    if C.ra_meter_set_window_len(m, v) == 0 then return true end
    return nil, "InvalidArgument: window_len_s cannot change on a live meter; restart required"
end

function Meter:window_len()
    return tonumber(C.ra_meter_window_len(handle(self)))
end

function Meter:degraded()
    return C.ra_meter_degraded(handle(self)) ~= 0
end

-- I-8: while degraded, record() fails first with "DegradedExporter: …".
function Meter:set_degraded(on)
    local m = handle(self)
    expect(on, "boolean", "set_degraded(on): on must be a boolean", 2)
    C.ra_meter_set_degraded(m, on and 1 or 0)
    return true
end

-- For code that drives the C API itself, e.g. on another thread (ron.accounting.runtime.offload):
-- the meter's ra_meter_t * (nil once closed; valid until meter:close(), so the caller keeps
-- the meter referenced while it uses the pointer), and how many slices one rollover may
-- seal (the size of the ra_meter_rollover out-array, = pending_slices_cap).
function Meter:cdata()
    local m = handle(self, true) -- not a tail call: handle's error level counts this frame
    return m
end

function Meter:rollover_cap()
    return self._sealed_cap
end

-- Releases the meter now rather than at garbage collection; idempotent. Slices already
-- handed out stay valid (they hold their own references).
function Meter:close()
    local m = handle(self, true)
    if m == nil then return true end
    self._m = nil
    ffi_gc(m, nil)
    C.ra_meter_close(m)
    return true
end

function Meter:__tostring()
    if self._m == nil then return "ron.accounting meter (closed)" end
    return "ron.accounting meter " .. tostring(self._m)
end

return _M
