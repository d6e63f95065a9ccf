-- ron.accounting.nginx: meter every nginx request into the process-shared counter plane
-- (issue 6, the Lua path). Debian's nginx with libnginx-mod-http-lua and lua-resty-core.
--
--   lua_package_path "/usr/share/lua/5.1/?.lua;;";      -- where ron/accounting.lua lives
--   init_by_lua_block {                                 -- master, before the fork
--       require("ron.accounting.nginx").init {
--           config = "/etc/ron-accounting/gateway.lua",  -- the sidecar's own settings file
--           tenant = { header = "X-Tenant-Id" },
--           subject = { header = "X-Api-User", default = "anonymous" },
--       }
--   }
--   log_by_lua_block { require("ron.accounting.nginx").log() }
--
-- examples/nginx/nginx.conf is a complete configuration; docs/ops/nginx.md the design.
--
-- Where the plane is mapped: init() in init_by_lua* runs in the nginx master, as root,
-- before the workers are forked and drop their privileges: the master opens (or creates,
-- mode 0600, owner root) the plane file and maps it; every worker inherits the mapping
-- and records into it without ever opening the file. So the plane stays 0600 and owned
-- by root, the workers' user (www-data) cannot open it, and the sidecar that seals it
-- runs as root too (the core refuses a plane of another user, and any group- or
-- world-writable one). `nginx -s reload` runs init() again in the master (a new Lua VM
-- maps the same file); old workers finish on their own mapping. init() in
-- init_worker_by_lua* also works (each worker opens the file itself), for an nginx that
-- runs entirely as one unprivileged user together with its sidecar.
--
-- Per request (log()): no yield, no blocking call, no garbage once the JIT has compiled it,
-- no ngx.var table access. Variables are read through lua-nginx-module's FFI primitive
-- (ngx_http_lua_ffi_var_get, what ngx.var uses) into a pointer and a length, and the
-- bytes go to the core as they are: the tenant UUID is parsed by ra_tenant_parse, the
-- subject hashed by ra_meter_subject (both through a small per-worker cache keyed by the
-- bytes), $bytes_sent read by strtoull. No Lua string is made (the API-key map interns the
-- key, which for a known key finds the existing string: no allocation). Then two
-- lock-free adds: `bytes` and `requests`.
--
-- Errors never affect the request (the log phase runs after the response) and are always
-- counted:
--   * per reason, in this worker: _M.errors() / the `ron_accounting_nginx_errors_total`
--     lines of _M.metrics();
--   * node-wide per reason, when `errors_dict` names a lua_shared_dict (dict:incr on the
--     error path only);
--   * node-wide in the plane: bad input (no tenant, bad tenant, unknown key, no subject,
--     no bytes) is accounting_rejected_total{reason="invalid"}, and the core counts its
--     own refusals (capacity, degraded), so the sidecar's /metrics shows them;
--   * logged at WARN, at most once per reason per worker every `log_interval_s`.
local ffi = require("ffi")
local acct = require("ron.accounting")
local libmod = require("ron.accounting.binding.lib")
local FAM = require("ron.accounting.families")
local metrics = require("ron.base.metrics")

local C = ffi.C            -- nginx and its Lua module
local R = libmod.namespace() -- libronacct (ffi.load'ed, or the host's ffi.C)

-- nginx's functions, bound by init() (so that the module loads outside nginx too, for
-- recorder_config() and the specs).
local ngx_log, WARN, ngx_now, get_request, var_get
local function bind_nginx()
    if ngx_log then return end
    local ngx = ngx
    if type(ngx) ~= "table" or not ngx.config or ngx.config.subsystem ~= "http" then
        error("ron.accounting.nginx: init() runs inside nginx's http Lua module", 3)
    end
    local base = require("resty.core.base")
    require("resty.core.var") -- declares ngx_http_lua_ffi_var_get
    ngx_log, WARN, ngx_now = ngx.log, ngx.WARN, ngx.now
    get_request = base.get_request
    var_get = C.ngx_http_lua_ffi_var_get
end
local ffi_new, ffi_string, ffi_copy = ffi.new, ffi.string, ffi.copy
local format = string.format
local record_rc = acct.record_rc -- the meter's clock rule (ron.accounting)
local pairs, ipairs, type, tostring, tonumber, error, pcall, setmetatable, setfenv, loadfile =
      pairs, ipairs, type, tostring, tonumber, error, pcall, setmetatable, setfenv, loadfile

local _M = { _VERSION = "0.1.0" }

-- The plane settings a recorder must share with the sidecar, with the sidecar's defaults
-- (ron.node DEFAULTS; spec/ron/accounting/nginx_spec.lua checks they agree).
-- The plane refuses a process whose settings differ, with a message naming the field.
_M.PLANE_DEFAULTS = {
    var_dir = "var", plane = false, window_len_s = 300, shards = 64,
    capacity_rows = 200000, pending_slices_cap = 8192, dimensions = {},
    profile = "macronode", clock = false,
}

-- init()'s options and their defaults, in one place.
_M.DEFAULTS = {
    config = false,          -- the sidecar's settings file (a Lua chunk returning a table)
    meter = false,           -- or an acct.open() table with `shm` (instead of config)
    tenant = { header = "X-Tenant-Id" }, -- a source (below)
    subject = { value = "-" },           -- a source; "-": one subject per tenant
    bytes = "bytes_sent",    -- variable counted as `bytes`; false: do not record bytes
    requests = true,         -- record requests = 1 per request
    errors_dict = false,     -- a lua_shared_dict name: node-wide error counts per reason
    log_interval_s = 10,     -- at most one WARN per reason per worker per interval
    stripes = false,         -- true: each worker records into its own entries of a key
                             -- (no cache line shared between workers on hot keys; a key
                             -- takes up to one entry per worker of capacity_rows)
    fail_open = false,       -- false: init() raises when the plane cannot be opened (nginx
                             -- does not start; a reload keeps the old configuration);
                             -- true: serve unmetered, count every request `not_ready`
}

-- A source says where a tenant or subject comes from:
--   { header = "X-Tenant-Id" }           the request header (variable $http_x_tenant_id)
--   { var = "tenant" }                   any nginx variable: a `map`, `set`, $remote_user…
--   { var = "http_x_api_key", map = { ["key…"] = "uuid…" } }   an API-key map (tenant)
--   { value = "…" }                      a constant
-- plus `default = "…"` (subject only): used when the variable is missing or empty.

-- Error reasons, in output order.
-- One label set with the native module (nginx/ngx_http_ron_accounting_module.c): same
-- names, same order, every one printed by both even where a path cannot produce it.
local REASONS = { "no_tenant", "bad_tenant", "unknown_key", "no_subject", "bad_value",
                  "record_failed", "not_ready" }
local R_NO_TENANT, R_BAD_TENANT, R_UNKNOWN_KEY, R_NO_SUBJECT, R_BAD_VALUE, R_RECORD,
      R_NOT_READY = 1, 2, 3, 4, 5, 6, 7
-- Bad input is counted in the plane too (accounting_rejected_total{reason="invalid"}).
local INPUT_ERROR = { true, true, true, true, true, false, false }
local MESSAGES = {
    "request without a tenant (the tenant variable is missing or empty)",
    "request with a malformed tenant (not a UUID)",
    "request with an API key that is not in the map",
    "request without a subject (the subject variable is missing or empty, no default)",
    "the bytes variable is missing or not a decimal number",
    "the counter plane refused a record (see accounting_rejected_total)",
    "the counter plane is not open (init failed with fail_open = true, or init not called)",
}

-- Module state (one per Lua VM: the master's, copied into each worker by fork()).
local S = {
    ready = false, meter = nil, m = nil, clock = nil,
    tenant = nil, subject = nil, bytes_name = nil, requests = true,
    dict = nil, log_interval_s = 10,
}
local counts = ffi_new("uint64_t[?]", #REASONS + 1)  -- this worker's errors per reason
local last_log = {}                                  -- reason -> ngx.now() of last WARN
for i = 1, #REASONS do last_log[i] = -1e18 end

-- Buffers, allocated once (lua-resty-core style).
local value_ptr = ffi_new("char *[1]")
local value_len = ffi_new("size_t[1]")
local errmsg_ptr = ffi_new("char *[1]")
local lowbuf = ffi_new("char[?]", 256) -- var_get writes the lowercased name here
local subject_buf = ffi_new("ra_subject_t")
local DIM_BYTES, DIM_REQUESTS = 0, 1 -- RA_DIM_BYTES, RA_DIM_REQUESTS (fixed ids)
local NGX_OK = 0
local DIGITS_MAX = 19 -- < 10^19 < 2^64
local end_ptr = ffi_new("char *[1]")
local numbuf = ffi_new("char[?]", DIGITS_MAX + 1)
-- Declared unless another module did (a second identical declaration raises).
if not pcall(function() return C.strtoull end) then
    ffi.cdef "unsigned long long strtoull(const char *nptr, char **endptr, int base);"
end
if not pcall(function() return C.memcmp end) then
    ffi.cdef "int memcmp(const void *s1, const void *s2, size_t n);"
end

-- Per-worker caches of the tenant parse and the subject hash (keyed BLAKE3, the costlier
-- of the two: ~0.1-0.2 us), keyed by the variable's bytes: direct-mapped, 256 slots, the
-- slot chosen from the length and three bytes (no loop, no allocation), a hit confirmed
-- by comparing every byte (memcmp). A miss computes the value into the slot. Values over
-- CACHE_KEY_MAX bytes are not cached. A hit can only return what the core computed for
-- the same bytes, so the cache cannot be poisoned; churn only costs the computation.
if not pcall(ffi.typeof, "ra_ngx_tenant_slot_t") then
    ffi.cdef [[
    typedef struct { uint32_t len; ra_tenant_t id; char key[64]; } ra_ngx_tenant_slot_t;
    typedef struct { uint32_t len; ra_subject_t id; char key[64]; } ra_ngx_subject_slot_t;
    ]]
end
local CACHE_KEY_MAX = 64
local CACHE_MASK = 255
local tenant_cache = ffi_new("ra_ngx_tenant_slot_t[?]", CACHE_MASK + 1)
local subject_cache = ffi_new("ra_ngx_subject_slot_t[?]", CACHE_MASK + 1)
local band = require("bit").band
local function cache_index(p, n)
    return band(p[0] + p[n - 1] * 7 + p[n - 2] * 13 + n * 31, CACHE_MASK)
end

---------------------------------------------------------------------------------------
-- configuration (init time: allocation is fine here)
---------------------------------------------------------------------------------------

local function bad(fmt, ...) error("ron.accounting.nginx: " .. format(fmt, ...), 3) end

local function load_file(path)
    local chunk, err = loadfile(path)
    if not chunk then bad("cannot load %s: %s", path, tostring(err)) end
    setfenv(chunk, setmetatable({}, { __index = _G }))
    local ok, t = pcall(chunk)
    if not ok then bad("%s: %s", path, tostring(t)) end
    if type(t) ~= "table" then bad("%s must return a table, got %s", path, type(t)) end
    return t
end

-- The acct.open() table of a recorder from the sidecar's settings (a table with the keys
-- of ron.node's configuration; the keys a recorder does not need are
-- ignored here and checked by the sidecar). Same result as daemon.recorder_config().
function _M.recorder_config(file_cfg)
    local c = {}
    for k, v in pairs(_M.PLANE_DEFAULTS) do
        if file_cfg[k] ~= nil then c[k] = file_cfg[k] else c[k] = v end
    end
    local plane = c.plane or (c.var_dir .. "/plane")
    return { window_len_s = c.window_len_s, shards = c.shards,
             capacity_rows = c.capacity_rows, pending_slices_cap = c.pending_slices_cap,
             dimensions = c.dimensions, shm = plane,
             amnesia = c.profile == "micronode", clock = c.clock or nil }
end

-- Variable name of a source (lowercase, as nginx indexes them).
local function source(which, src, allow_default)
    if type(src) ~= "table" then bad("%s must be a table (a source), got %s", which, type(src)) end
    local s = {}
    local n = 0
    for k, v in pairs(src) do
        if k == "header" then
            if type(v) ~= "string" or not v:match("^[%w%-_]+$") then
                bad("%s.header must be a header name, got %s", which, tostring(v))
            end
            s.var = "http_" .. v:lower():gsub("%-", "_")
            n = n + 1
        elseif k == "var" then
            if type(v) ~= "string" or not v:match("^[%w_]+$") then
                bad("%s.var must be a variable name without '$', got %s", which, tostring(v))
            end
            s.var = v:lower()
            n = n + 1
        elseif k == "value" then
            if type(v) ~= "string" then bad("%s.value must be a string", which) end
            s.value = v
            n = n + 1
        elseif k == "map" and which == "tenant" then
            if type(v) ~= "table" then bad("tenant.map must be a table key -> tenant UUID") end
            s.map = {}
            for key, t in pairs(v) do
                local h = type(key) == "string" and acct.tenant(t)
                if not h then
                    bad("tenant.map[%s] = %s: keys must be strings, values tenant UUIDs",
                        tostring(key), tostring(t))
                end
                s.map[key] = h
            end
        elseif k == "default" and allow_default then
            if type(v) ~= "string" then bad("%s.default must be a string", which) end
            s.default = v
        else
            bad("%s: unknown key '%s'", which, tostring(k))
        end
    end
    if n ~= 1 then bad("%s needs exactly one of header, var, value", which) end
    if s.map and not s.var then bad("tenant.map needs header or var (the API key)") end
    if s.var and #s.var > 255 then bad("%s: variable name too long", which) end
    return s
end

---------------------------------------------------------------------------------------
-- errors
---------------------------------------------------------------------------------------

local function fail(reason, detail)
    counts[reason] = counts[reason] + 1
    local m = S.m
    if m ~= nil and INPUT_ERROR[reason] then R.ra_meter_count_invalid(m) end
    local dict = S.dict
    if dict then dict:incr(REASONS[reason], 1, 0) end
    local now = ngx_now()
    if now - last_log[reason] >= S.log_interval_s then
        last_log[reason] = now
        ngx_log(WARN, "ron-accounting: ", MESSAGES[reason], detail or "",
                " (counted; further ones for ", S.log_interval_s, " s only counted)")
    end
end

---------------------------------------------------------------------------------------
-- the hot path
---------------------------------------------------------------------------------------

-- Reads variable `name` of request r into value_ptr/value_len; true when it is set and
-- not empty.
local function var(r, name)
    local rc = var_get(r, name, #name, lowbuf, 0, value_ptr, value_len, errmsg_ptr)
    return rc == NGX_OK and value_len[0] > 0
end

-- The request's tenant (a handle: a cache slot's, or the map's), or nil after counting.
local function resolve_tenant(r, src)
    if src.value then return src.handle end
    if not var(r, src.var) then return fail(R_NO_TENANT) end
    local map = src.map
    if map then
        -- A known key is interned already: no allocation.
        local h = map[ffi_string(value_ptr[0], value_len[0])]
        if h == nil then return fail(R_UNKNOWN_KEY) end
        return h
    end
    local p, n = value_ptr[0], tonumber(value_len[0])
    if n ~= 36 then return fail(R_BAD_TENANT) end -- RA_UUID_STR_LEN
    local e = tenant_cache[cache_index(p, n)]
    if e.len == n and C.memcmp(e.key, p, n) == 0 then return e.id end
    if R.ra_tenant_parse(p, n, e.id) ~= 0 then
        e.len = 0
        return fail(R_BAD_TENANT)
    end
    ffi_copy(e.key, p, n)
    e.len = n
    return e.id
end

local function resolve_subject(r, m, src)
    if src.value then return src.handle end
    if not var(r, src.var) then
        if src.default_handle then return src.default_handle end
        return fail(R_NO_SUBJECT)
    end
    local p, n = value_ptr[0], tonumber(value_len[0])
    if n > CACHE_KEY_MAX or n < 2 then
        R.ra_meter_subject(m, p, n, subject_buf)
        return subject_buf
    end
    local e = subject_cache[cache_index(p, n)]
    if e.len == n and C.memcmp(e.key, p, n) == 0 then return e.id end
    R.ra_meter_subject(m, p, n, e.id)
    ffi_copy(e.key, p, n)
    e.len = n
    return e.id
end

-- The bytes variable as a uint64_t, or nil. strtoull rather than a digit loop in Lua: an
-- inner loop would split the log phase's trace in two. nginx's variable values are not
-- NUL-terminated, so the digits are copied into numbuf first (ffi.copy: a memcpy). A value
-- accepted is 1..19 characters that start with a digit and that strtoull reads to the
-- end: a decimal number below 10^19 < 2^64 (no sign, no blank, no overflow).
local function bytes_of(r, name)
    if not var(r, name) then return nil end
    local p, n = value_ptr[0], value_len[0]
    if n > DIGITS_MAX then return nil end
    local c = p[0]
    if c < 48 or c > 57 then return nil end
    ffi_copy(numbuf, p, n)
    numbuf[n] = 0
    local v = C.strtoull(numbuf, end_ptr, 10)
    if end_ptr[0] ~= numbuf + n then return nil end
    return v
end

local function record(m, t, s, dim, inc)
    if record_rc(m, S.clock, t, s, dim, inc) ~= 0 then fail(R_RECORD) end
end

local function take_stripe()
    S.stripe_due = false
    local id = ngx.worker.id()
    if id then R.ra_meter_set_stripe(S.m, id % 1024) end
end

local function log_request()
    local m = S.m
    if m == nil then return fail(R_NOT_READY) end
    if S.stripe_due then take_stripe() end
    local r = get_request()
    if r == nil then return end -- not in a request (misuse); nothing to meter
    local t = resolve_tenant(r, S.tenant)
    if t == nil then return end
    local s = resolve_subject(r, m, S.subject)
    if s == nil then return end
    local bytes_name = S.bytes_name
    if bytes_name then
        local b = bytes_of(r, bytes_name)
        if b == nil then
            fail(R_BAD_VALUE)
        else
            record(m, t, s, DIM_BYTES, b)
        end
    end
    if S.requests then record(m, t, s, DIM_REQUESTS, 1) end
end

-- log_by_lua*: meters the current request; the request is never affected.
--
-- Not wrapped in pcall: a trace that starts inside a pcall'ed function cannot return
-- through it ("NYI: return to lower frame"), so the function would never compile as one
-- trace and its cdata would be boxed (garbage) on every request. Nothing in it raises
-- by construction: every failure is a value, counted by fail(). A raise would be a bug;
-- lua-nginx-module would log it at ERROR (the request is answered already).
_M.log = log_request

---------------------------------------------------------------------------------------
-- init and observability
---------------------------------------------------------------------------------------

-- init_by_lua* (recommended: the master maps the plane before the fork) or
-- init_worker_by_lua*. Raises on a bad option (misuse); on a plane that cannot be opened
-- raises too, unless fail_open.
function _M.init(opts)
    if type(opts) ~= "table" then bad("init(opts): opts must be a table") end
    bind_nginx()
    local o = {}
    for k, v in pairs(_M.DEFAULTS) do o[k] = v end
    for k, v in pairs(opts) do
        if _M.DEFAULTS[k] == nil then bad("init: unknown option '%s'", tostring(k)) end
        o[k] = v
    end
    local tenant = source("tenant", o.tenant, false)
    local subject = source("subject", o.subject, true)
    if o.bytes ~= false and (type(o.bytes) ~= "string" or not o.bytes:match("^[%w_]+$")) then
        bad("bytes must be a variable name (e.g. \"bytes_sent\") or false")
    end
    if type(o.requests) ~= "boolean" then bad("requests must be a boolean") end
    if type(o.stripes) ~= "boolean" then bad("stripes must be a boolean") end
    if type(o.log_interval_s) ~= "number" or o.log_interval_s < 0 then
        bad("log_interval_s must be a non-negative number")
    end
    local dict = nil
    if o.errors_dict then
        dict = ngx.shared[o.errors_dict]
        if not dict then
            bad("errors_dict: no lua_shared_dict named %s", tostring(o.errors_dict))
        end
    end
    local mcfg
    if o.config and o.meter then bad("give config or meter, not both") end
    if o.config then
        if type(o.config) ~= "string" then bad("config must be a file path") end
        mcfg = _M.recorder_config(load_file(o.config))
    elseif o.meter then
        if type(o.meter) ~= "table" then bad("meter must be an acct.open() table") end
        mcfg = {}
        for k, v in pairs(o.meter) do mcfg[k] = v end
    else
        bad("init needs config (the sidecar's settings file) or meter (an acct.open() table)")
    end
    if type(mcfg.shm) ~= "string" or mcfg.shm:sub(1, 1) ~= "/" then
        bad("the plane must be an absolute path (plane = \"/run/ron-accounting/plane\"), got %s",
            tostring(mcfg.shm))
    end
    -- A recorder never seals and never writes a WAL: amnesia follows the plane's profile.
    if mcfg.amnesia == nil then mcfg.amnesia = false end

    -- Replacing a previous init (a second call in the same VM): close the old meter.
    if S.meter then S.meter:close() end
    S.ready, S.meter, S.m = false, nil, nil
    S.tenant, S.subject, S.bytes_name, S.requests = tenant, subject, o.bytes or nil, o.requests
    S.dict, S.log_interval_s = dict, o.log_interval_s
    S.clock = mcfg.clock
    -- init runs in the master (before the fork) or in a worker: each worker takes its
    -- stripe at its first request, in its own copy of S and of the meter handle.
    S.stripe_due = o.stripes

    local meter, err = acct.open(mcfg)
    if not meter then
        local msg = "ron.accounting.nginx: cannot open the counter plane " .. mcfg.shm .. ": "
                    .. tostring(err)
        if not o.fail_open then error(msg, 2) end
        ngx_log(ngx.ALERT, msg, " (fail_open: serving unmetered; every request counted "
                .. "as not_ready)")
        return nil, err
    end
    local m = meter:cdata()
    if tenant.value then
        tenant.handle = acct.tenant(tenant.value)
        if not tenant.handle then bad("tenant.value %q is not a UUID", tenant.value) end
    end
    if subject.value then subject.handle = assert(meter:subject(subject.value)) end
    if subject.default then subject.default_handle = assert(meter:subject(subject.default)) end
    -- The subject key may differ from a previous init's plane: start with empty caches.
    ffi.fill(tenant_cache, ffi.sizeof(tenant_cache))
    ffi.fill(subject_cache, ffi.sizeof(subject_cache))
    S.meter, S.m, S.ready = meter, m, true
    return true
end

-- This worker's error counts per reason: { no_tenant = n, ... }.
function _M.errors()
    local out = {}
    for i, name in ipairs(REASONS) do out[name] = tonumber(counts[i]) end
    return out
end

-- The node-wide counts from errors_dict, or nil without one.
function _M.errors_node()
    if not S.dict then return nil end
    local out = {}
    for _, name in ipairs(REASONS) do out[name] = S.dict:get(name) or 0 end
    return out
end

function _M.meter() return S.meter end

-- Prometheus text: the error counts (node-wide with errors_dict, else this worker's,
-- labelled with its pid) and the plane's metrics (node-wide: they live in the plane).
function _M.metrics()
    local node = _M.errors_node()
    local mine = _M.errors()
    local rows, pid = {}, not node and ngx.worker.pid() or nil
    for i, name in ipairs(REASONS) do rows[i] = { name, pid, (node or mine)[name] } end
    local text = metrics.text(FAM.nginx_errors:render({}, rows))
    if S.meter then
        local mt, err = S.meter:metrics()
        text = text .. (mt or ("# metrics unavailable: " .. tostring(err) .. "\n"))
    end
    return text
end

_M.REASONS = REASONS
return _M
