-- ron.node.ingest: POST /v1/records, the daemon's HTTP ingest (docs/ops/ingest.md;
-- seed 000 C-8, G-6.1, I-14). Runs inside `ron-accounting run`
-- only: the decoder (host/lua/ingest_dto.c) is part of the host and reached through ffi.C.
--
--   local ingest = require("ron.node.ingest")
--   local ing = assert(ingest.new { meter = m, tokens = { [b3hex(token)] = tenant_uuid } })
--   local srv = http.serve { meter = m, max_body = ing.max_body, routes = { ing:route() } }
--   ing:on_early(413)          -- a 413 the server answered before the handler (h2o's,
--                              -- for POST /v1/records: http.lua attributes early refusals
--                              -- by route) counted as oversize
--   ing:metrics_text()         -- accounting_ingest_* families, for /metrics
--
-- One request, in this order (each step's refusal is counted and logged, sampled, with
-- {tenant, dimension, reason} and never a subject or a token, I-14):
--   1. Authorization: Bearer <token>; BLAKE3(token) must be a key of `tokens` -> the
--      request's one tenant. Missing: 401 no_token; unknown: 401 bad_token.
--   2. Content-Type application/json (charset utf-8 if any): else 415 content_type.
--   3. The body within max_body (h2o answers 413 before reading a bigger one; a body that
--      got past a larger listener limit is refused here the same way): 413 oversize.
--   4. Idempotency-Key (optional): 1..128 visible ASCII characters, else 400.
--   5. The strict decoder: any fault in the batch refuses it whole, 400 SchemaViolation with
--      reason, field path and byte offset. Nothing is recorded.
--   6. Every record's tenant must be the token's: else 403 forbidden_tenant, nothing
--      recorded.
--   7. Idempotency-Key seen before for this tenant: the same body resumes where the last
--      attempt stopped (a completed batch is answered 200 again, nothing recorded twice);
--      another body with the same key is 409 idempotency_conflict.
--   8. A degraded meter (I-8): 503 degraded with Retry-After, nothing recorded.
--   9. Records applied in order through meter:record. When the meter refuses one
--      (CapacityExceeded, Busy: 429; DegradedExporter: 503; both with Retry-After) the
--      records before it stay recorded and the answer says how many ("applied"): the
--      client resends records[applied..] or, with an Idempotency-Key, the same body.
--      Nothing is lost silently and, with a key, nothing is counted twice.
-- The handler is synchronous (the httpd contract): requests run one at a time on the
-- loop thread, so a batch is never interleaved with another one.
--
-- Garbage: the buffers (decoded records, unescaped subjects, error, subject handle) are
-- allocated once per instance; a request allocates its body string (httpd), the token's
-- digest and the answer, not per record.
local ffi = require("ffi")
local acct = require("ron.accounting")
local check = require("ron.base.check")
local lru = require("ron.base.lru")
local FAM = require("ron.node.families")
local metrics = require("ron.base.metrics")
local cdef = require("ron.accounting.binding.ingest_cdef") -- host/lua/ingest_dto.h

local C = ffi.C
local format, match, lower = string.format, string.match, string.lower
local floor = math.floor
local pairs, ipairs, type, tostring, tonumber, error, pcall, setmetatable =
      pairs, ipairs, type, tostring, tonumber, error, pcall, setmetatable
local ffi_string = ffi.string

pcall(ffi.cdef, "int memcmp(const void *s1, const void *s2, size_t n);")

local INGEST_ABI = cdef.abi

local _M = {}

-- The defaults of the `ingest` table (docs/ops/ingest.md).
_M.DEFAULTS = {
    tokens = nil,              -- required: { ["<BLAKE3 hex of a token>"] = "<tenant uuid>" }
    max_body = 1048576,        -- bytes; larger bodies: 413 before they are read
    max_records = 10000,       -- records per batch; more: 400 too_many_records
    idempotency_keys = 10000,  -- Idempotency-Keys remembered (the most recent); 0: none
    retry_after_s = 5,         -- Retry-After of a 503 (degraded)
    log_every = 100,           -- reject log sampling: the first of each reason, then 1 in N
}

-- Every reason a request can be refused (or cut short) for: the metric's label set.
_M.REASONS = { "no_token", "bad_token", "forbidden_tenant", "content_type", "oversize",
               "bad_idempotency_key", "idempotency_conflict",
               "empty_body", "malformed_json", "unknown_field", "duplicate_field",
               "missing_field", "wrong_type", "bad_value", "bad_tenant", "unknown_dimension",
               "bad_subject", "no_records", "too_many_records",
               "capacity", "busy", "degraded", "internal" }
local CODES = { 200, 400, 401, 403, 409, 413, 415, 429, 500, 503 }

local LIMITS = {
    max_body = { 1024, 64 * 1024 * 1024 }, -- httpd's own ceiling is 64 MiB
    max_records = { 1, 1000000 },
    idempotency_keys = { 0, 1000000 },
    retry_after_s = { 1, 3600 },
    log_every = { 1, 1000000 },
}
local KEYS = { tokens = true } -- the keys of the `ingest` table
for k in pairs(LIMITS) do KEYS[k] = true end

-- -> true | nil, "ingest...: why" (the daemon prefixes "configuration: ").
function _M.check_config(v, key)
    key = key or "ingest"
    local ok, err = check.section(v, key, "{ tokens = { ... }, ... }", KEYS)
    if not ok or v == false then return ok, err end
    ok, err = check.ranges(v, LIMITS, key)
    if not ok then return nil, err end
    local tokens = v.tokens
    if type(tokens) ~= "table" then
        return nil, format("%s.tokens must be a table { [\"<b3 hex of a token>\"] = " ..
                           "\"<tenant uuid>\" } (printf %%s TOKEN | b3sum)", key)
    end
    local n = 0
    for h, t in pairs(tokens) do
        n = n + 1
        if type(h) ~= "string" or not match(h, "^%x+$") or #h ~= 64 or h ~= lower(h) then
            return nil, format("%s.tokens: key %q is not a BLAKE3 digest (64 lowercase hex " ..
                               "digits: printf %%s TOKEN | b3sum)", key, tostring(h))
        end
        if type(t) ~= "string" or not acct.tenant(t) then
            return nil, format("%s.tokens[%s...]: %q is not a tenant UUID", key, h:sub(1, 8),
                               tostring(t))
        end
    end
    if n == 0 then return nil, format("%s.tokens is empty: no one could ingest", key) end
    return true
end


-- JSON string contents (the decoder's details are ASCII; a backslash or quote may occur).
local function jstr(s)
    return (s:gsub('[%c"\\]', function(c) return format("\\u%04x", c:byte()) end))
end

local JSON = "application/json"

local I = {}
I.__index = I

-- o: meter (required), tokens (required), the optional keys of DEFAULTS, and
--    audit (function(kind, attrs): every reject also goes to the audit trail), clock
--    (UTC seconds, the meter's: Retry-After of a capacity refusal is the time to the
--    next window boundary on it), log (function(line); default: stderr).
function _M.new(o)
    if type(o) ~= "table" then error("ingest.new: options table expected", 2) end
    if o.meter == nil then error("ingest.new: meter is required", 2) end
    local cfg = {}
    for k, v in pairs(o) do
        if k ~= "meter" and k ~= "clock" and k ~= "log" and k ~= "audit" then cfg[k] = v end
    end
    local ok, err = _M.check_config(cfg, "ingest")
    if not ok then error("ingest.new: " .. err, 2) end
    if not pcall(function() return C.ra_ingest_decode end) then
        error("ingest.new: the decoder is part of the ron-accounting host (run inside it)", 2)
    end
    local rsz, esz = ffi.new("size_t[1]"), ffi.new("size_t[1]")
    local abi = C.ra_ingest_dto_abi(rsz, esz)
    if abi ~= INGEST_ABI or rsz[0] ~= ffi.sizeof("ra_ingest_record_t")
       or esz[0] ~= ffi.sizeof("ra_ingest_error_t") then
        error("ingest.new: the host's decoder ABI does not match ron.node.ingest", 2)
    end

    local self = setmetatable({}, I)
    for k, v in pairs(_M.DEFAULTS) do self[k] = v end
    for k, v in pairs(cfg) do self[k] = v end
    self.meter = o.meter
    self.clock = o.clock
    self.audit = o.audit -- function(kind, attrs): the audit trail (ron.audit.host:emit)
    self.log = o.log or function(line) io.stderr:write(line, "\n") end

    self.tokens = {}
    for h, uuid in pairs(cfg.tokens) do
        local t = assert(acct.tenant(uuid))
        self.tokens[h] = { tenant = t, uuid = tostring(t) }
    end

    -- dimension names in id order: the decoder's index is the meter's id
    self.dim_names = self.meter:dimensions()
    self.n_dims = #self.dim_names
    self.dims = ffi.new("const char *[?]", self.n_dims + 1)
    for i, name in ipairs(self.dim_names) do self.dims[i - 1] = name end -- anchored above

    self.out = ffi.new("ra_ingest_record_t[?]", self.max_records)
    self.scratch = ffi.new("char[?]", self.max_body)
    self.err = ffi.new("ra_ingest_error_t")
    self.n_out = ffi.new("size_t[1]")
    self.subject = ffi.new("ra_subject_t")

    -- Idempotency keys: the cap most recently used are remembered, at most 2 * cap held.
    self.lru = lru.new(self.idempotency_keys)
    self.rejected = {}
    for _, r in ipairs(_M.REASONS) do self.rejected[r] = 0 end
    self.codes = {}
    for _, c in ipairs(CODES) do self.codes[c] = 0 end
    self.records_total, self.skipped_total = 0, 0
    return self
end

-- I-14: one line per reject, sampled per reason: the first, then every log_every-th. The
-- audit trail, when configured, gets every one, unsampled (AUD-I-21: the durable evidence;
-- its emit never blocks: a full queue is counted and ends as a Gap record). A request is
-- refused whole or cut short, never record by record: ONE record per refused request,
-- whatever its size, with `records`, the count of its records not recorded, where the
-- decoder read them (a 10,000-record batch of another tenant is one emit, not 10,000).
local function log_reject(self, reason, status, tenant, dim, records)
    local audit = self.audit
    if audit then
        audit("reject", { source = "ingest", reason = reason, status = status,
                          tenant = tenant or "-", dimension = dim or "-", records = records })
    end
    local n = self.rejected[reason]
    if n == 1 or n % self.log_every == 0 then
        self.log(format("ron-accounting: WARN ingest: reject reason=%s status=%d tenant=%s " ..
                        "dimension=%s (%d with this reason so far)", reason, status,
                        tenant or "-", dim or "-", n))
    end
end

-- A 413 the server answered before this handler ran (a body over max_body, refused by h2o
-- from its Content-Length or while it was read): an oversize reject of POST /v1/records.
-- The server attributes early refusals to the route that was asked (http.lua): only this
-- route's are ingest's (before, every early 413 of the listener was counted here, a 1.1 MB
-- POST to the wallet's /v1/issue too). Other statuses are left to the server (false).
function I:on_early(status)
    if status ~= 413 then return false end
    self.rejected.oversize = self.rejected.oversize + 1
    self.codes[413] = self.codes[413] + 1
    log_reject(self, "oversize", 413, nil, nil)
    return true
end

-- A refusal: counted, logged, answered as JSON. extra: more "k":v pairs (already encoded);
-- records: how many of the request's decoded records were not recorded (nil: not decoded).
local function reject(self, status, reason, name, detail, tenant, dim, extra, headers, records)
    self.rejected[reason] = self.rejected[reason] + 1
    self.codes[status] = (self.codes[status] or 0) + 1
    log_reject(self, reason, status, tenant, dim, records)
    local body = format('{"error":"%s","reason":"%s","detail":"%s"%s}\n', name, reason,
                        jstr(detail), extra or "")
    return status, body, JSON, headers
end

local function dim_name(self, id)
    if id and id >= 0 then return self.dim_names[id + 1] end
    return nil
end

-- Seconds until the meter's current window ends (+1 for the sealer): a full counter plane
-- frees its rows when the window is sealed.
local function capacity_retry_s(self)
    local now = self.clock and self.clock() or os.time()
    local w = self.meter:window_len()
    return w - floor(now) % w + 1
end

local function is_json(ct)
    local mt, params = match(lower(ct), "^%s*([^;%s]+)%s*(.*)$")
    if mt ~= "application/json" then return false end
    if params == "" then return true end
    local cs = match(params, "^;%s*charset%s*=%s*\"?([%w%-]+)\"?%s*$")
    return cs == "utf-8"
end

local OK_FMT = '{"records":%d,"applied":%d,"skipped":%d}\n'

-- 1. who: the bearer token's tenant. -> who | nil, the rejection
local function authenticate(self, h)
    local auth = h.authorization
    if not auth then
        return nil, reject(self, 401, "no_token", "Unauthorized",
                           "Authorization: Bearer <token> is required", nil, nil, nil,
                           { ["WWW-Authenticate"] = 'Bearer realm="ron-accounting"' })
    end
    local token = match(auth, "^[Bb][Ee][Aa][Rr][Ee][Rr] +([%w%-%._~%+/]+=*) *$")
    local who = token and #token <= 4096 and self.tokens[acct.b3hex(token)]
    if not who then
        return nil, reject(self, 401, "bad_token", "Unauthorized", "unknown bearer token", nil,
                           nil, nil, { ["WWW-Authenticate"] =
                                           'Bearer realm="ron-accounting", error="invalid_token"' })
    end
    return who
end

-- 2. what: the request's form, before its body is decoded. -> nothing | the rejection
local function check_form(self, h, body, tenant)
    local ct = h["content-type"]
    if not ct or not is_json(ct) then
        return reject(self, 415, "content_type", "SchemaViolation",
                      "Content-Type must be application/json", tenant)
    end
    if #body > self.max_body then
        return reject(self, 413, "oversize", "OversizeFrame",
                      format("the body is over %d bytes: split the batch", self.max_body), tenant)
    end
    local key = h["idempotency-key"]
    if key and (#key > 128 or not match(key, "^[!-~]+$")) then
        return reject(self, 400, "bad_idempotency_key", "SchemaViolation",
                      "Idempotency-Key must be 1..128 visible ASCII characters", tenant)
    end
end

-- 3. decode, all or nothing; 4. one tenant per token. -> n | nil, the rejection
local function decode(self, body, who)
    local out, err, tenant = self.out, self.err, who.uuid
    local rc = C.ra_ingest_decode(body, #body, self.dims, self.n_dims, out, self.max_records,
                                  self.n_out, self.scratch, self.max_body, err)
    if rc ~= 0 then
        local reason = ffi_string(C.ra_ingest_reason(rc))
        if self.rejected[reason] == nil then reason = "internal" end -- usage: a bug here
        return nil, reject(self, reason == "internal" and 500 or 400, reason, "SchemaViolation",
                           ffi_string(err.detail), tenant, dim_name(self, err.dimension),
                           format(',"field":"%s","pos":%d', jstr(ffi_string(err.field)),
                                  tonumber(err.pos)))
    end
    local n = tonumber(self.n_out[0])
    local t = who.tenant
    for i = 0, n - 1 do
        if C.memcmp(out[i].tenant.b, t.b, 16) ~= 0 then
            return nil, reject(self, 403, "forbidden_tenant", "Forbidden",
                               "a record's tenant is not the token's tenant", tenant,
                               dim_name(self, out[i].dimension),
                               format(',"field":"records[%d].tenant","pos":%d', i,
                                      tonumber(out[i].pos)), nil, n)
        end
    end
    return n
end

-- 5. idempotency: where a batch sent again with its key resumes. -> start, entry | nil, the
-- rejection (another body under the key)
local function resume(self, key, tenant, body, n)
    if not key or self.idempotency_keys == 0 then return 0, nil end
    local k = tenant .. " " .. key
    local digest = acct.b3hex(body)
    local entry = self.lru:get(k)
    if not entry then
        entry = { digest = digest, applied = 0 }
        self.lru:put(k, entry)
        return 0, entry
    end
    if entry.digest ~= digest then
        return nil, reject(self, 409, "idempotency_conflict", "InvalidArgument",
                           "this Idempotency-Key was used with another body", tenant, nil, nil,
                           nil, n)
    end
    return entry.applied, entry
end

-- A record the meter refused: what was recorded before it stays, the answer says where to
-- resume.
local function refused(self, failure, n, start, applied, tenant)
    local name = match(failure, "^(%a+)") or "Unknown"
    local status, reason, retry = 500, "internal", nil
    if name == "CapacityExceeded" then
        status, reason, retry = 429, "capacity", capacity_retry_s(self)
    elseif name == "Busy" then
        status, reason, retry = 429, "busy", 1
    elseif name == "DegradedExporter" then
        status, reason, retry = 503, "degraded", self.retry_after_s
    end
    local extra = format(',"records":%d,"applied":%d,"skipped":%d%s', n, applied, start,
                         retry and format(',"retry_after_s":%d', retry) or "")
    return reject(self, status, reason, name,
                  format("%s; records[0..%d) are recorded, resend from records[%d] (or the same " ..
                         "body with the same Idempotency-Key)", failure, applied, applied),
                  tenant, dim_name(self, self.out[applied].dimension), extra,
                  retry and { ["Retry-After"] = tostring(retry) } or nil, n - applied)
end

-- 6. apply records start .. n-1 into the meter.
local function apply(self, n, start, entry, tenant)
    local m, out = self.meter, self.out
    if m:degraded() then
        return reject(self, 503, "degraded", "DegradedExporter",
                      "the meter is degraded (the export backlog is over its limit): retry later",
                      tenant, dim_name(self, out[start].dimension),
                      format(',"records":%d,"applied":%d,"retry_after_s":%d', n, start,
                             self.retry_after_s),
                      { ["Retry-After"] = tostring(self.retry_after_s) }, n - start)
    end
    local mc, subject, scratch = m:cdata(), self.subject, self.scratch
    local applied, failure = n, nil
    for i = start, n - 1 do
        local r = out[i]
        C.ra_meter_subject(mc, scratch + r.subject_off, r.subject_len, subject)
        local ok, e = m:record(r.tenant, subject, r.dimension, tonumber(r.value))
        if not ok then
            applied, failure = i, e
            break
        end
    end
    if entry then entry.applied = applied end
    self.records_total = self.records_total + (applied - start)
    self.skipped_total = self.skipped_total + start
    if failure then return refused(self, failure, n, start, applied, tenant) end
    self.codes[200] = self.codes[200] + 1
    return 200, format(OK_FMT, n, n, start), JSON
end

function I:handle(req)
    local h, body = req.headers, req.body
    local who, a, b, c, d = authenticate(self, h)
    if not who then return a, b, c, d end
    local tenant = who.uuid
    a, b, c, d = check_form(self, h, body, tenant)
    if a then return a, b, c, d end
    local n
    n, a, b, c, d = decode(self, body, who)
    if not n then return a, b, c, d end
    local start, entry
    start, entry, b, c, d = resume(self, h["idempotency-key"], tenant, body, n)
    if not start then return entry, b, c, d end
    if start == n then -- a completed batch sent again: answered, not recorded again
        self.skipped_total = self.skipped_total + n
        self.codes[200] = self.codes[200] + 1
        return 200, format(OK_FMT, n, n, n), JSON
    end
    return apply(self, n, start, entry, tenant)
end

function I:route()
    return { method = "POST", path = "^/v1/records$", name = "ingest",
             handler = function(req) return self:handle(req) end,
             on_early = function(status) return self:on_early(status) end }
end

-- Prometheus text of the accounting_ingest_* families (merged into /metrics).
function I:metrics_text()
    local out = {}
    FAM.ingest_requests:render_map(out, self.codes, CODES)
    FAM.ingest_records:render(out, self.records_total)
    FAM.ingest_rejected:render_map(out, self.rejected, _M.REASONS)
    FAM.ingest_skipped:render(out, self.skipped_total)
    FAM.ingest_keys:render(out, self.lru:count())
    return metrics.text(out)
end

-- Counters for tests and status lines.
function I:stats()
    local r = {}
    for k, v in pairs(self.rejected) do r[k] = v end
    local c = {}
    for k, v in pairs(self.codes) do c[k] = v end
    return { records = self.records_total, skipped = self.skipped_total, rejected = r,
             codes = c, keys = self.lru:count() }
end

return _M
