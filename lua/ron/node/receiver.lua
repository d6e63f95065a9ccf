-- ron.node.receiver: the ledger-receiver role (docs/EXPORT.md, "HTTP exporter and
-- ledger receiver"): HTTP routes, for ron.node.http's serve{ routes = ... }, that
-- take the PUTs of ron.accounting.export.exporters.http and store the slices into a backend
-- exporter (the file ledger through offload.file, or exporters.postgres) with the same
-- contract, so one daemon can be the HTTP ledger of others. Runs inside `ron-accounting
-- run` (the HTTP server is a C module of the host).
--
--   local receiver = require("ron.node.receiver")
--   local r = receiver.new {
--       backend = exporter,          -- required: an exporter (docs/EXPORT.md §1) whose put
--                                    -- and head may wait (called from tasks)
--       prefix = "/v1/slices",       -- the slice collection's path
--       producers = {                -- who may write which streams (docs/EXPORT.md §6,
--           ["node-a"] = {           -- "Trust model"): a producer's name (logs) ->
--               token_hash = "<64 hex>",  -- BLAKE3 of its bearer token (or a list: rotation)
--               tenants = { "<uuid>", ... }, -- the tenants it may write, or "*": all
--           }, ... },
--       allow_unauthenticated = false, -- true (and no producers): anyone reaching the
--                                    -- listener may write any stream; logged at WARN
--       workers = 4,                 -- tasks storing into the backend at once
--       queue_cap = 1024,            -- requests waiting for a worker; more: 503 + Retry-After
--       batch = 64,                  -- a backend with put_many (offload.file) stores up to
--                                    -- batch waiting PUTs in one call
--       log = fn(line),              -- rejects, sampled (default: stderr)
--   }
--   http.serve { meter = m, routes = r:routes(), max_body = receiver.MAX_BODY, ... }
--   r:metrics_text()  -- Prometheus text: accounting_receiver_* families
--   r:stats()         -- { ok, dup, conflict, gap, retry, fail, heads, rejected = {...} }
--   r:close()         -- stops the workers; queued and later requests get 503
--   receiver.token_hash(token) -> the hex to configure (= b3sum of the token's bytes)
--
-- Routes (prefix /v1/slices):
--   PUT <prefix>/<tenant>/<dimension>/<seq>   body: the canonical bytes of the slice
--       The body is decoded strictly (acct.decode: FORMAT.md §1; its BLAKE3 computed), and
--       must be that slice: tenant, dimension and seq of the path; X-Ron-B3 (required) =
--       BLAKE3 of the body; X-Ron-Prev-B3 and Idempotency-Key, when sent, = the slice's.
--       Then a worker task stores it (backend:put) and the answer goes back (req:respond):
--         ok 201, dup 200 (X-Ron-Status says which), conflict 409, gap 409;
--         backend retry_network / retry_remote_5xx -> 503, retry_timeout -> 504 (with
--         Retry-After: 1); a local failure of the backend -> 500 (PersistenceFull: 507).
--       Every answer about a slice carries X-Ron-Status and X-Ron-B3 (the slice's digest)
--       and a small JSON body.
--   GET <prefix>/<tenant>/<dimension>/head -> 200, X-Ron-Head-Seq (0: nothing stored) and
--       X-Ron-Head-B3, and the same as JSON.
--   Rejects (counted in accounting_receiver_rejected_total{reason}, logged sampled with
--   {tenant, dimension, reason}, never a token): 400 SchemaViolation (the body is not a
--   slice), 400 InvalidArgument (path, digest or headers do not match the body), 401 (no
--   bearer token) / 403 (a wrong one; forbidden_tenant: a token whose producer may not
--   write the path's tenant), 404 (a path outside the layout), 415 (a body that
--   is not application/octet-stream), 503 + Retry-After (queue full, or shutting down).
--   A body over the server's max_body is a 413 from the HTTP server before it is read.
local cjson = require("cjson.safe")
local acct = require("ron.accounting")
local check = require("ron.base.check")
local exporters = require("ron.accounting.export.exporters")
local offload = require("ron.accounting.runtime.offload")
local task = require("ron.base.task")
local FAM = require("ron.node.families")
local metrics = require("ron.base.metrics")
local plugins = require("ron.node.plugins")

local type, error, pairs, ipairs, tostring, tonumber, setmetatable, pcall, format, floor =
      type, error, pairs, ipairs, tostring, tonumber, setmetatable, pcall, string.format,
      math.floor

local _M = {}

_M.DEFAULT_PREFIX = "/v1/slices"
_M.MAX_BODY = 1048576 -- a slice's canonical bytes are at most 1 MiB (I-11)
_M.CONTENT_TYPE = "application/octet-stream"
_M.DEFAULTS = { workers = 4, queue_cap = 1024, batch = 64 }

local OPTS = { backend = true, prefix = true, producers = true, allow_unauthenticated = true,
               workers = true, queue_cap = true, batch = true, log = true }

local UUID = "^%x%x%x%x%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%x%x%x%x%x%x%x%x$"
local ZERO_B3 = string.rep("0", 64)

-- What a backend's answer becomes on the wire: status code, X-Ron-Status.
local ANSWER = {
    ok = { 201, "ok" }, dup = { 200, "dup" }, conflict = { 409, "conflict" },
    gap = { 409, "gap" }, retry_network = { 503, "retry_network" },
    retry_remote_5xx = { 503, "retry_remote_5xx" }, retry_timeout = { 504, "retry_timeout" },
}

local REJECT_REASONS = { "bad_request", "schema_violation", "unauthorized", "forbidden",
                         "forbidden_tenant", "not_found", "unsupported_media_type", "busy",
                         "stopping" }
local STORE_STATUSES = { "ok", "dup", "conflict", "gap", "retry", "fail" }

function _M.token_hash(token)
    if type(token) ~= "string" or token == "" then
        error("receiver.token_hash: expects a non-empty string", 2)
    end
    return acct.b3hex(token)
end

local function int_opt(opts, k, lo, hi)
    local v = opts[k]
    if v == nil then return _M.DEFAULTS[k] end
    if type(v) ~= "number" or v ~= floor(v) or v < lo or v > hi then
        error(format("receiver.new: %s must be an integer in %d..%d, got %s", k, lo, hi,
                     tostring(v)), 3)
    end
    return v
end

-- producers (the option, or the daemon's key) -> { [token hex] = { name =, tenants = set
-- | "*" } } | nil, "why" (one line). allow: allow_unauthenticated. Both nil/false: an error.
function _M.parse_producers(producers, allow)
    if allow ~= nil and type(allow) ~= "boolean" then
        return nil, "allow_unauthenticated must be a boolean"
    end
    if producers == nil then
        if allow then return false end
        return nil, "producers is required: { [\"name\"] = { token_hash = \"<b3sum of the "
                    .. "token>\", tenants = { \"<uuid>\", ... } | \"*\" } } (or, on a "
                    .. "trusted network only, allow_unauthenticated = true)"
    end
    if allow then
        return nil, "producers and allow_unauthenticated = true exclude each other"
    end
    if type(producers) ~= "table" then
        return nil, "producers must be a table { [\"name\"] = { token_hash =, tenants = } }"
    end
    local by_hash, n = {}, 0
    local names = {}
    for name in pairs(producers) do names[#names + 1] = tostring(name) end
    table.sort(names)
    for _, name in ipairs(names) do
        local p = producers[name]
        if type(name) ~= "string" or not name:match("^[%w][%w_.:%-]*$") or #name > 64 then
            return nil, format("producers: %q is not a producer name ([A-Za-z0-9_.:-], at "
                               .. "most 64)", name)
        end
        if type(p) ~= "table" then
            return nil, format("producers.%s must be { token_hash =, tenants = }", name)
        end
        for k in pairs(p) do
            if k ~= "token_hash" and k ~= "tenants" then
                return nil, format("producers.%s: unknown key '%s'", name, tostring(k))
            end
        end
        local list = type(p.token_hash) == "table" and p.token_hash or { p.token_hash }
        if #list == 0 then return nil, format("producers.%s.token_hash is empty", name) end
        local tenants
        if p.tenants == "*" then
            tenants = "*"
        elseif type(p.tenants) == "table" and #p.tenants > 0 then
            tenants = {}
            for i, t in ipairs(p.tenants) do
                if type(t) ~= "string" or not t:match(UUID) then
                    return nil, format("producers.%s.tenants[%d] must be a lowercase tenant "
                                       .. "UUID", name, i)
                end
                tenants[t] = true
            end
        else
            return nil, format("producers.%s.tenants must be a list of tenant UUIDs, or \"*\" "
                               .. "(every tenant: a trusted aggregator)", name)
        end
        for i, h in ipairs(list) do
            if type(h) ~= "string" or #h ~= 64 or not h:match("^%x+$") then
                return nil, format("producers.%s.token_hash[%d] must be 64 hex characters "
                                   .. "(b3sum of the token: receiver.token_hash(token))",
                                   name, i)
            end
            h = h:lower()
            if by_hash[h] then
                return nil, format("producers.%s and producers.%s share a token: a token "
                                   .. "names one producer", by_hash[h].name, name)
            end
            by_hash[h] = { name = name, tenants = tenants }
        end
        n = n + 1
    end
    if n == 0 then return nil, "producers is empty: no one could write" end
    return by_hash
end

local function pattern_escape(s)
    return (s:gsub("[%^%$%(%)%%%.%[%]%*%+%-%?]", "%%%0"))
end

local R = {}
R.__index = R

function _M.new(opts)
    check.options("receiver.new", opts, OPTS)
    local ok, e = pcall(exporters.check, opts.backend)
    if not ok then error("receiver.new: backend: " .. tostring(e), 2) end
    local prefix = opts.prefix or _M.DEFAULT_PREFIX
    if type(prefix) ~= "string" or not prefix:match("^/[%w/_%-%.]*$") or prefix:match("//")
       or prefix:match("/$") then
        error("receiver.new: prefix must be a path like /v1/slices (no trailing slash)", 2)
    end
    local hashes, perr = _M.parse_producers(opts.producers, opts.allow_unauthenticated)
    if hashes == nil then error("receiver.new: " .. perr, 2) end
    if opts.log ~= nil and type(opts.log) ~= "function" then
        error("receiver.new: log must be a function", 2)
    end
    local self = setmetatable({
        backend = opts.backend,
        prefix = prefix,
        hashes = hashes or nil, -- nil: no authentication (allow_unauthenticated)
        workers_n = int_opt(opts, "workers", 1, 256),
        queue_cap = int_opt(opts, "queue_cap", 1, 1048576),
        batch = int_opt(opts, "batch", 1, 4096),
        log = opts.log or function(line) io.stderr:write("receiver: ", line, "\n") end,
        stored = {}, rejected = {}, heads = 0, log_n = {},
        stopping = false,
    }, R)
    for _, k in ipairs(STORE_STATUSES) do self.stored[k] = 0 end
    for _, k in ipairs(REJECT_REASONS) do self.rejected[k] = 0 end
    self.put_path = "^" .. pattern_escape(prefix) .. "/([^/]+)/([^/]+)/([^/]+)$"
    self.head_path = "^" .. pattern_escape(prefix) .. "/([^/]+)/([^/]+)/head$"
    self.loss_path = "^" .. pattern_escape(prefix) .. "/([^/]+)/([^/]+)/accept%-loss$"
    self.queue = task.channel(self.queue_cap, "receiver_queue")
    self.workers = {}
    for i = 1, self.workers_n do
        self.workers[i] = task.spawn("receiver_worker-" .. i, R.work, self)
    end
    task.on_shutdown(function() self.stopping = true end)
    if not self.hashes then
        self.log("NO AUTHENTICATION (allow_unauthenticated = true): anyone who reaches this "
                 .. "listener may write any tenant's stream, and a forged seq 1 pre-empts "
                 .. "the real producer's chain (docs/EXPORT.md §6, \"Trust model\")")
    end
    return self
end

-- ---------------------------------------------------------------------------------------
-- answers

local function json_escape(s)
    return (tostring(s):gsub('[%c"\\]', function(c)
        return format("\\u%04x", c:byte())
    end))
end

-- One line, printable, bounded: what may go into a header.
local function header_safe(s)
    return (tostring(s):sub(1, 200):gsub("[%c]", " "))
end

local function respond(req, code, body, headers)
    headers = headers or {}
    headers["Cache-Control"] = "no-store"
    -- false: the client went away meanwhile (the slice is stored all the same)
    return req:respond(code, body, "application/json", headers)
end

function R:reject(_, code, reason, err_code, msg, tenant, dimension, headers)
    self.rejected[reason] = (self.rejected[reason] or 0) + 1
    -- I-14: {tenant, dimension, reason}, sampled (1st, then every 1000th per reason)
    local n = self.rejected[reason]
    if n == 1 or n % 1000 == 0 then
        self.log(format("reject %s (%d so far): tenant=%s dimension=%s: %s", reason, n,
                        tostring(tenant or "-"), tostring(dimension or "-"), msg))
    end
    headers = headers or {}
    headers["X-Ron-Error"] = err_code
    headers["Cache-Control"] = "no-store"
    -- the handler's synchronous answer (httpd: status, body, content type, headers)
    return code, format('{"error":"%s","message":"%s"}\n', err_code, json_escape(msg)),
           "application/json", headers
end

-- ---------------------------------------------------------------------------------------
-- the handlers (synchronous part: checks, then the queue)

-- -> producer (or true without authentication) | false, code, reason, message
function R:authorized(req)
    if not self.hashes then return true end
    local auth = req.headers.authorization
    local token = auth and auth:match("^[Bb][Ee][Aa][Rr][Ee][Rr]%s+(%S+)%s*$")
    if not token then
        return false, 401, "unauthorized", "a bearer token is required"
    end
    local p = self.hashes[acct.b3hex(token)]
    if not p then
        return false, 403, "forbidden", "the bearer token is not accepted"
    end
    return p
end

-- The producer may write (or read the head of) this tenant's streams: true | the reject.
function R:may_write(req, p, tenant, dimension)
    if p == true or p.tenants == "*" or p.tenants[tenant] then return true end
    return false, self:reject(req, 403, "forbidden_tenant", "Forbidden",
                              format("producer %s may not write tenant %s", p.name, tenant),
                              tenant, dimension)
end

local function busy_headers() return { ["Retry-After"] = "1" } end

-- Every request first: the receiver running, then the bearer token -> the producer | nil
-- and the reject's answer.
function R:admit(req)
    if self.stopping then
        return nil, self:reject(req, 503, "stopping", "Unavailable", "the receiver is stopping",
                                nil, nil, busy_headers())
    end
    local producer, code, reason, msg = self:authorized(req)
    if not producer then
        local h = code == 401 and { ["WWW-Authenticate"] = 'Bearer realm="ron-accounting"' }
        return nil, self:reject(req, code, reason, code == 401 and "Unauthorized" or "Forbidden",
                                msg, nil, nil, h)
    end
    return producer
end

-- A place in the workers' queue for item (a worker answers it: req:respond), or 503 busy.
function R:enqueue(req, item, tenant, dimension)
    if self.queue:try_send(item) then return end
    return self:reject(req, 503, "busy", "Busy",
                       format("%d requests are waiting for the ledger", self.queue_cap),
                       tenant, dimension, busy_headers())
end

function R:handle_put(req)
    local producer, r1, r2, r3, r4 = self:admit(req)
    if not producer then return r1, r2, r3, r4 end
    local tenant, dimension, seq_s = req.path:match(self.put_path)
    if not tenant then
        return self:reject(req, 404, "not_found", "NotFound",
                           "expected PUT " .. self.prefix .. "/<tenant>/<dimension>/<seq>")
    end
    if not tenant:match(UUID) or not dimension:match("^[a-z][a-z0-9_]*$") or #dimension > 32
       or not seq_s:match("^[1-9]%d*$") or #seq_s > 18 then
        return self:reject(req, 400, "bad_request", "InvalidArgument",
                           "the path must be <lowercase uuid>/<dimension>/<seq >= 1>",
                           nil, nil)
    end
    -- the token binds the tenant (issue 14 item 5); the body must then be the path's slice
    -- (checked below), so the body's tenant is bound as well
    local allowed, a1, a2, a3, a4 = self:may_write(req, producer, tenant, dimension)
    if not allowed then return a1, a2, a3, a4 end
    local ctype = req.headers["content-type"]
    if not ctype or not ctype:lower():match("^application/octet%-stream%s*;?") then
        return self:reject(req, 415, "unsupported_media_type", "UnsupportedMediaType",
                           "the body must be application/octet-stream (the slice's "
                           .. "canonical bytes)", tenant, dimension)
    end
    local s, derr = acct.decode(req.body)
    if not s then
        return self:reject(req, 400, "schema_violation", "SchemaViolation",
                           "the body is not a slice: " .. tostring(derr), tenant, dimension)
    end
    local want_b3 = req.headers["x-ron-b3"]
    local why
    if s.tenant ~= tenant or s.dimension ~= dimension or s.id.seq ~= tonumber(seq_s) then
        why = format("the body is slice %s/%s/%s, the path says %s/%s/%s", s.tenant,
                     s.dimension, tostring(s.id.seq), tenant, dimension, seq_s)
    elseif not want_b3 then
        why = "X-Ron-B3 (the BLAKE3 of the body, 64 hex) is required"
    elseif want_b3:lower() ~= s.b3 then
        why = "X-Ron-B3 does not match the BLAKE3 of the body (" .. s.b3 .. ")"
    elseif req.headers["x-ron-prev-b3"] and req.headers["x-ron-prev-b3"]:lower() ~= s.prev_b3 then
        why = "X-Ron-Prev-B3 does not match the slice's prev_b3"
    elseif req.headers["idempotency-key"] and req.headers["idempotency-key"]:lower()
           ~= format("%s/%s/%d/%s/%s", s.tenant, s.dimension, s.id.window_start_s, seq_s,
                     s.b3) then
        why = "Idempotency-Key is not <tenant>/<dimension>/<window_start_s>/<seq>/<b3> of the "
              .. "slice"
    end
    if why then
        return self:reject(req, 400, "bad_request", "InvalidArgument", why, tenant, dimension)
    end
    return self:enqueue(req, { "put", req, s }, tenant, dimension)
end

-- A stream request (head, accept-loss): the receiver running, the token, the path, the
-- producer's right to the tenant, a place in the queue. item(tenant, dimension) -> the
-- queue item, or nil and the usage line of a bad request.
function R:queue_stream_request(req, path_pat, item)
    local producer, r1, r2, r3, r4 = self:admit(req)
    if not producer then return r1, r2, r3, r4 end
    local tenant, dimension = req.path:match(path_pat)
    local it, usage
    if tenant and tenant:match(UUID) and dimension:match("^[a-z][a-z0-9_]*$")
       and #dimension <= 32 then
        it, usage = item(tenant, dimension, producer)
    else
        usage = select(2, item())
    end
    if not it then return self:reject(req, 400, "bad_request", "InvalidArgument", usage) end
    local allowed, a1, a2, a3, a4 = self:may_write(req, producer, tenant, dimension)
    if not allowed then return a1, a2, a3, a4 end
    return self:enqueue(req, it, tenant, dimension)
end

function R:handle_head(req)
    return self:queue_stream_request(req, self.head_path, function(tenant, dimension)
        if not tenant then
            return nil, "the path must be " .. self.prefix .. "/<lowercase uuid>/<dimension>/head"
        end
        return { "head", req, tenant, dimension }
    end)
end

-- POST <prefix>/<tenant>/<dimension>/accept-loss {"through_seq":n,"link_b3":hex,
-- "reason":text,"now_s":n}: a producer's operator accepts a loss (docs/EXPORT.md §2,
-- "Accepted losses") on the stream it may write; the backend records it (accept_loss).
function R:handle_loss(req)
    return self:queue_stream_request(req, self.loss_path, function(tenant, dimension, producer)
        local o = tenant and cjson.decode(req.body or "")
        if type(o) ~= "table" then
            return nil, "POST " .. self.prefix .. "/<lowercase uuid>/<dimension>/accept-loss"
                        .. ' with {"through_seq":n,"link_b3":hex,"reason":text}'
        end
        return { "loss", req, tenant, dimension, o, producer }
    end)
end

function R:answer_loss(req, tenant, dimension, o, producer)
    local be = self.backend
    if type(be.accept_loss) ~= "function" then
        return respond(req, 501, '{"error":"Unsupported","message":"this ledger cannot record '
                       .. 'an accepted loss"}\n', { ["X-Ron-Error"] = "Unsupported" })
    end
    local ok, r, err = pcall(be.accept_loss, be, {
        tenant = tenant, dimension = dimension, through_seq = o.through_seq,
        link_b3 = o.link_b3, reason = o.reason, now_s = o.now_s })
    if not ok or not r then
        local e = tostring(ok and err or r)
        local name = e:match("^(%a+):") or "Unavailable"
        local code = name == "InvalidArgument" and 409 or 503
        return respond(req, code, format('{"error":"%s","message":"%s"}\n', name,
                                         json_escape(e)), { ["X-Ron-Error"] = name })
    end
    local who = type(producer) == "table" and producer.name or "(no authentication)"
    self.log(format("LOSS ACCEPTED by producer %s: %s/%s seqs %.0f..%.0f (%s)", tostring(who),
                    tenant, dimension, r.from, r.to, tostring(o.reason or "")))
    return respond(req, 200, format('{"tenant":"%s","dimension":"%s","from":%.0f,"to":%.0f}\n',
                                    tenant, dimension, r.from, r.to))
end

-- ---------------------------------------------------------------------------------------
-- workers

function R:answer_put(req, s, status, detail)
    local a = ANSWER[status]
    local headers = { ["X-Ron-B3"] = s.b3 }
    local body
    if a then
        local k = (status == "ok" or status == "dup" or status == "conflict" or status == "gap")
                  and status or "retry"
        self.stored[k] = self.stored[k] + 1
        headers["X-Ron-Status"] = a[2]
        if detail ~= nil then headers["X-Ron-Detail"] = header_safe(detail) end
        if a[1] >= 500 then headers["Retry-After"] = "1" end
        body = format('{"status":"%s","tenant":"%s","dimension":"%s","seq":%s,"b3":"%s"%s}\n',
                      a[2], s.tenant, s.dimension, format("%.0f", s.id.seq), s.b3,
                      detail ~= nil and (',"detail":"' .. json_escape(detail) .. '"') or "")
        return respond(req, a[1], body, headers)
    end
    -- nil, err (or a malformed answer): a local failure of the backend
    self.stored.fail = self.stored.fail + 1
    local err = tostring(detail or status)
    local code = err:match("^PersistenceFull") and 507 or 500
    headers["Retry-After"] = "1"
    headers["X-Ron-Error"] = err:match("^(%a+):") or "Failed"
    self.log(format("backend failure for %s/%s seq %s: %s", s.tenant, s.dimension,
                    tostring(s.id.seq), err))
    return respond(req, code, format('{"error":"%s","message":"%s"}\n',
                                     headers["X-Ron-Error"], json_escape(err)), headers)
end

function R:answer_head(req, tenant, dimension)
    self.heads = self.heads + 1
    local ok, h, err = pcall(self.backend.head, self.backend, tenant, dimension)
    if not ok or (h == nil and err ~= nil) then
        local e = tostring(ok and err or h)
        self.log(format("backend head failure for %s/%s: %s", tenant, dimension, e))
        return respond(req, 503, format('{"error":"Unavailable","message":"%s"}\n',
                                        json_escape(e)),
                       { ["Retry-After"] = "1", ["X-Ron-Error"] = "Unavailable" })
    end
    local seq, b3 = 0, ZERO_B3
    if h then seq, b3 = tonumber(h.seq), h.b3 end
    return respond(req, 200, format('{"tenant":"%s","dimension":"%s","seq":%s,"b3":"%s"}\n',
                                    tenant, dimension, format("%.0f", seq), b3),
                   { ["X-Ron-Head-Seq"] = format("%.0f", seq), ["X-Ron-Head-B3"] = b3 })
end

function R:store(items)
    local be = self.backend
    if #items > 1 and type(be.put_many) == "function" then
        local slices = {}
        for i, it in ipairs(items) do slices[i] = it[3] end
        local ok, res, err = pcall(be.put_many, be, slices)
        if ok and type(res) == "table" then
            for i, it in ipairs(items) do
                local a = res[i]
                if a then
                    self:answer_put(it[2], it[3], a[1], a[2])
                else
                    self:answer_put(it[2], it[3], nil, "put_many: no answer")
                end
            end
            return
        end
        err = ok and err or res
        for _, it in ipairs(items) do self:answer_put(it[2], it[3], nil, err) end
        return
    end
    for _, it in ipairs(items) do
        local ok, status, detail = pcall(be.put, be, it[3])
        if not ok then status, detail = nil, "Failed: " .. tostring(status) end
        self:answer_put(it[2], it[3], status, detail)
    end
end

function R.work(self)
    local q = self.queue
    while true do
        local it = q:recv()
        if not it then break end -- closed (r:close) or shut down with nothing queued
        local puts, others = { it }, {}
        if it[1] ~= "put" then puts, others = {}, { it } end
        while #puts + #others < self.batch and q:depth() > 0 do
            local more = q:recv()
            if more[1] ~= "put" then others[#others + 1] = more else puts[#puts + 1] = more end
        end
        if #puts > 0 then self:store(puts) end
        for _, h in ipairs(others) do
            if h[1] == "head" then
                self:answer_head(h[2], h[3], h[4])
            else
                self:answer_loss(h[2], h[3], h[4], h[5], h[6])
            end
        end
    end
end

-- ---------------------------------------------------------------------------------------

function R:routes()
    return {
        { method = "GET", path = self.head_path, handler = function(req)
            return self:handle_head(req)
        end },
        { method = "PUT", path = "^" .. pattern_escape(self.prefix) .. "/", handler = function(req)
            return self:handle_put(req)
        end },
        { method = "POST", path = self.loss_path, handler = function(req)
            return self:handle_loss(req)
        end },
    }
end

function R:stats()
    local s = { heads = self.heads, rejected = {}, queued = self.queue:depth() }
    for k, v in pairs(self.stored) do s[k] = v end
    for k, v in pairs(self.rejected) do s.rejected[k] = v end
    return s
end

function R:metrics_text()
    local out = {}
    FAM.receiver_slices:render_map(out, self.stored, STORE_STATUSES)
    FAM.receiver_rejected:render_map(out, self.rejected, REJECT_REASONS)
    FAM.receiver_heads:render(out, self.heads)
    FAM.receiver_queue:render(out, self.queue:depth())
    return metrics.text(out)
end

-- Stops the workers once the queue is empty; later requests get 503. close_backend: also
-- close the backend (the daemon's, which it built from the configuration).
function R:close(close_backend)
    if self.closed then return end
    self.closed = true
    self.stopping = true
    self.queue:close()
    if close_backend then pcall(self.backend.close, self.backend) end
end

-- ---------------------------------------------------------------------------------------
-- the daemon's `receiver = { ... }` (docs/ops/daemon.md, "Ledger receiver")

local CONFIG = { backend = true, dir = true, fsync = true, producers = true,
                 allow_unauthenticated = true, prefix = true, workers = true, queue_cap = true,
                 batch = true }

-- -> true | nil, err (one line). v: false, or the table of the daemon's configuration.
function _M.check_config(v, k)
    k = k or "receiver"
    if type(v) == "table" and v.token_hash ~= nil then
        return nil, format("%s.token_hash is replaced by %s.producers = { [\"name\"] = { "
                           .. "token_hash = ..., tenants = { ... } | \"*\" } }: a token is "
                           .. "bound to the tenants it may write (docs/EXPORT.md §6)", k, k)
    end
    local ok, err = check.section(v, k, "{ backend = \"file\" | { module = ... }, ... }", CONFIG)
    if not ok or v == false then return ok, err end
    local be = v.backend
    if be ~= nil and be ~= "file" and (type(be) ~= "table" or type(be.module) ~= "string") then
        return nil, format("%s.backend must be \"file\" or { module = \"name\", ... } (e.g. "
                           .. "ron.accounting.export.exporters.postgres)", k)
    end
    if (v.dir ~= nil or v.fsync ~= nil) and be ~= nil and be ~= "file" then
        return nil, format("%s.dir and %s.fsync are for the file backend", k, k)
    end
    if v.dir ~= nil and (type(v.dir) ~= "string" or v.dir == "") then
        return nil, format("%s.dir must be a directory path", k)
    end
    if v.fsync ~= nil and type(v.fsync) ~= "boolean" then
        return nil, format("%s.fsync must be a boolean", k)
    end
    -- the rest as receiver.new checks it, with a stand-in backend and no task started
    ok, err = pcall(function()
        local probe = {}
        for key, x in pairs(v) do
            if OPTS[key] and key ~= "backend" then probe[key] = x end
        end
        local prefix = probe.prefix or _M.DEFAULT_PREFIX
        if type(prefix) ~= "string" or not prefix:match("^/[%w/_%-%.]*$") or prefix:match("//")
           or prefix:match("/$") then
            error("prefix must be a path like /v1/slices (no trailing slash)", 0)
        end
        for _, key in ipairs { "workers", "queue_cap", "batch" } do
            local lim = { workers = 256, queue_cap = 1048576, batch = 4096 }
            local x = probe[key]
            if x ~= nil and (type(x) ~= "number" or x ~= floor(x) or x < 1 or x > lim[key]) then
                error(format("%s must be an integer in 1..%d", key, lim[key]), 0)
            end
        end
        local hashes, perr = _M.parse_producers(probe.producers, probe.allow_unauthenticated)
        if hashes == nil then error(perr, 0) end
    end)
    if not ok then return nil, format("%s.%s", k, tostring(err)) end
    return true
end

-- The receiver of the daemon's configuration v (checked), storing into its backend:
-- "file" -> offload.file { dir = v.dir or defaults.dir, fsync = v.fsync or defaults.fsync },
-- { module = name, ... } -> require(name).new(the other keys). defaults: { dir, fsync,
-- mkdir = fn(path) -> true | nil, err, log }. -> receiver, description | nil, err
function _M.from_config(v, defaults)
    local backend, what, err
    if v.backend == nil or v.backend == "file" then
        local dir = v.dir or defaults.dir
        local fsync = v.fsync
        if fsync == nil then fsync = defaults.fsync end
        if defaults.mkdir then
            local ok, merr = defaults.mkdir(dir)
            if not ok then return nil, format("backend dir %s: %s", dir, tostring(merr)) end
        end
        backend, err = offload.file { dir = dir, fsync = fsync }
        what = format("file ledger %s (fsync %s)", dir, tostring(fsync))
    else
        backend, err = plugins.new("backend", v.backend, "")
        if not backend then return nil, err end
        what = v.backend.module
    end
    if not backend then return nil, "backend: " .. tostring(err) end
    local o = { backend = backend, log = defaults.log }
    for key, x in pairs(v) do
        if OPTS[key] and key ~= "backend" then o[key] = x end
    end
    local ok, r = pcall(_M.new, o)
    if not ok then
        pcall(backend.close, backend)
        return nil, tostring(r)
    end
    return r, what
end

return _M
