-- ron.accounting.export.exporters.http: export slices to a ledger over HTTP (docs/EXPORT.md, "HTTP
-- exporter and ledger receiver"): one PUT per slice with its canonical bytes, the slice's
-- identity in headers as the idempotency key, the answer mapped onto the export contract.
-- The other end is any ledger speaking this protocol; ron.node.receiver is one (a
-- daemon with `receiver = {...}` is the HTTP ledger of other daemons).
--
--   local http = require("ron.accounting.export.exporters.http")
--   local e = http.new {
--       url = "http://127.0.0.1:9464/v1/slices",   -- the ledger's slice collection
--       token = nil,                 -- a bearer token (Authorization: Bearer ...)
--       connect_timeout_ms = 5000,   -- seed 001 §5 I/O deadlines
--       timeout_ms = 5000,           -- one request, whole (a put's; head's too)
--       proxy = nil,                 -- a proxy URL; default none (the environment's
--                                    -- http_proxy is ignored)
--   }
--   e:put(slice)  -> ok | dup | conflict | gap | retry_network | retry_remote_5xx |
--                    retry_timeout [, detail], or nil, err (a local failure)
--   e:head(tenant, dimension) -> { seq = n, b3 = hex } | nil | nil, err
--   e:stats()     -> { puts, ok, dup, conflict, gap, retry_network, retry_remote_5xx,
--                      retry_timeout, fail, heads }
--   e:close()
--
-- The wire (docs/EXPORT.md has the table):
--   PUT <url>/<tenant>/<dimension>/<seq>
--     Content-Type: application/octet-stream      body: slice:encode() (FORMAT.md §1)
--     Idempotency-Key: <tenant>/<dimension>/<window_start_s>/<seq>/<b3>
--     X-Ron-B3: <b3>   X-Ron-Prev-B3: <prev_b3>   [Authorization: Bearer <token>]
--   answers: 201 (or 200, 204) -> ok; 200 or 208 with X-Ron-Status: dup -> dup;
--            409 with X-Ron-Status: conflict, or without X-Ron-Status -> conflict;
--            409 with X-Ron-Status: gap -> gap; 5xx, 429 -> retry_remote_5xx;
--            no answer in time -> retry_timeout; no connection / broken -> retry_network;
--            anything else (401, 403, 400, 404, 413, a 2xx that names another slice...) ->
--            nil, "ExporterError: ..." (a local failure: the runtime retries and logs it).
--   GET <url>/<tenant>/<dimension>/head -> 200 with X-Ron-Head-Seq (0: nothing stored) and
--            X-Ron-Head-B3.
--
-- put() and head() wait for the network: call them from a task (the runtime's workers do).
-- new() does no I/O (it may run in the main chunk: the daemon's configuration).
local exporters = require("ron.accounting.export.exporters")
local loss = require("ron.accounting.export.loss")
local httpc = require("ron.base.net.http_client")
local check = require("ron.base.check")

local type, error, ipairs, tostring, tonumber, setmetatable, format, floor =
      type, error, ipairs, tostring, tonumber, setmetatable, string.format, math.floor

local _M = {}

_M.DEFAULTS = { connect_timeout_ms = 5000, timeout_ms = 5000 }
_M.CONTENT_TYPE = "application/octet-stream"
-- The answers of a receiver: the contract's status, in a header of their own so that a
-- proxy's or a foreign server's 200/409 is never read as a ledger's decision by accident.
_M.STATUS_HEADER = "X-Ron-Status"

local OPTS = { url = true, token = true, connect_timeout_ms = true, timeout_ms = true,
               proxy = true }

local STATS = { "puts", "ok", "dup", "conflict", "gap", "retry_network", "retry_remote_5xx",
                "retry_timeout", "fail", "heads" }

local function check_ms(opts, k)
    local v = opts[k]
    if v ~= nil and (type(v) ~= "number" or v ~= floor(v) or v < 1 or v > 86400000) then
        error(format("http.new: %s must be an integer in 1..86400000, got %s", k,
                     tostring(v)), 3)
    end
end

local E = {}
E.__index = E

function _M.new(opts)
    check.options("http.new", opts, OPTS)
    local url = opts.url
    if type(url) ~= "string" or not url:match("^https?://[^/%s]+") or url:match("[%s%?#]") then
        error("http.new: url must be an http:// or https:// URL without query or fragment "
              .. "(the ledger's slice collection, e.g. http://127.0.0.1:9464/v1/slices)", 2)
    end
    url = url:gsub("/+$", "")
    if opts.token ~= nil and (type(opts.token) ~= "string" or opts.token == ""
                              or opts.token:match("[%c ]")) then
        error("http.new: token must be a non-empty string without spaces or control "
              .. "characters", 2)
    end
    if opts.proxy ~= nil and type(opts.proxy) ~= "string" then
        error("http.new: proxy must be a URL string", 2)
    end
    check_ms(opts, "connect_timeout_ms")
    check_ms(opts, "timeout_ms")
    local self = setmetatable({
        url = url,
        auth = opts.token and ("Bearer " .. opts.token) or nil,
        connect_timeout_ms = opts.connect_timeout_ms or _M.DEFAULTS.connect_timeout_ms,
        timeout_ms = opts.timeout_ms or _M.DEFAULTS.timeout_ms,
        proxy = opts.proxy,
        closed = false,
        counts = {},
    }, E)
    for _, k in ipairs(STATS) do self.counts[k] = 0 end
    return self
end

E.stats = exporters.stats

local function count(self, status)
    local k = status or "fail"
    self.counts[k] = (self.counts[k] or 0) + 1
end

-- A short, single-line excerpt of a response body for details and errors.
local function excerpt(body)
    if type(body) ~= "string" or body == "" then return "" end
    local s = body:sub(1, 200):gsub("[%c]+", " "):gsub("%s+$", "")
    return ": " .. s
end

-- The failure classes of ron.base.net.http_client onto the contract.
local RETRY = { network = "retry_network", timeout = "retry_timeout",
                protocol = "retry_network", busy = "retry_network" }

-- (res | nil, err, class) of a put -> status, detail | nil, err. Exposed for specs.
function _M.classify(res, err, class, b3)
    if not res then
        local st = RETRY[class]
        if st then return st, err end
        return nil, "ExporterError: " .. tostring(err) -- tls, client, canceled
    end
    local code, h = res.status, res.headers or {}
    local mark = h["x-ron-status"]
    local echoed = h["x-ron-b3"]
    if code >= 200 and code < 300 or code == 409 then
        if echoed and b3 and echoed ~= b3 then
            -- an answer about another slice: a misrouted request or a broken ledger
            return nil, format("ExporterError: HTTP %d names b3 %s, the slice is %s", code,
                               tostring(echoed):sub(1, 16), b3:sub(1, 16))
        end
    end
    if code == 200 or code == 201 or code == 204 or code == 208 then
        if mark == nil then
            if code == 208 then return "dup", "HTTP 208" end
            return "ok", nil
        end
        if mark == "ok" and code ~= 208 then return "ok", nil end
        if mark == "dup" then return "dup", h["x-ron-detail"] end
        return nil, format("ExporterError: HTTP %d with %s: %s", code, _M.STATUS_HEADER,
                           tostring(mark))
    end
    if code == 409 then
        if mark == nil or mark == "conflict" then
            return "conflict", "HTTP 409" .. (h["x-ron-detail"] and (": " .. h["x-ron-detail"])
                                              or excerpt(res.body))
        end
        if mark == "gap" then
            return "gap", "HTTP 409 gap" .. (h["x-ron-head-seq"]
                                             and (", ledger head seq " .. h["x-ron-head-seq"])
                                             or "")
        end
        return nil, format("ExporterError: HTTP 409 with %s: %s", _M.STATUS_HEADER,
                           tostring(mark))
    end
    if code >= 500 or code == 429 then
        local ra = h["retry-after"]
        return "retry_remote_5xx", format("HTTP %d%s%s", code,
                                          ra and (" (Retry-After " .. ra .. ")") or "",
                                          excerpt(res.body))
    end
    return nil, format("ExporterError: HTTP %d%s", code, excerpt(res.body))
end

local function request(self, method, url, headers, body)
    if self.auth then headers.Authorization = self.auth end
    return httpc.request { method = method, url = url, headers = headers, body = body,
                           connect_timeout_ms = self.connect_timeout_ms,
                           timeout_ms = self.timeout_ms, proxy = self.proxy }
end

function E:put(s)
    if self.closed then return nil, "Closed: the exporter was closed" end
    self.counts.puts = self.counts.puts + 1
    local seq = format("%.0f", tonumber(s.id.seq))
    local res, err, class = request(self, "PUT",
        format("%s/%s/%s/%s", self.url, s.tenant, s.dimension, seq), {
            ["Content-Type"] = _M.CONTENT_TYPE,
            ["Idempotency-Key"] = format("%s/%s/%d/%s/%s", s.tenant, s.dimension,
                                         s.id.window_start_s, seq, s.b3),
            ["X-Ron-B3"] = s.b3,
            ["X-Ron-Prev-B3"] = s.prev_b3,
        }, s:encode())
    local status, detail = _M.classify(res, err, class, s.b3)
    count(self, status)
    return status, detail
end

function E:head(tenant, dimension)
    if self.closed then return nil, "Closed: the exporter was closed" end
    self.counts.heads = self.counts.heads + 1
    local res, err = request(self, "GET", format("%s/%s/%s/head", self.url, tenant, dimension),
                             {})
    if not res then return nil, "ExporterError: head: " .. tostring(err) end
    local h = res.headers
    if res.status ~= 200 then
        return nil, format("ExporterError: head: HTTP %d%s", res.status, excerpt(res.body))
    end
    local seq, b3 = tonumber(h["x-ron-head-seq"]), h["x-ron-head-b3"]
    if not seq or seq < 0 or seq ~= floor(seq) or (seq > 0 and not (type(b3) == "string"
                                                                    and b3:match("^%x+$")
                                                                    and #b3 == 64)) then
        return nil, "ExporterError: head: no X-Ron-Head-Seq/X-Ron-Head-B3 in the answer"
    end
    if seq == 0 then return nil end
    return { seq = seq, b3 = b3:lower() }
end

-- accept_loss{ tenant, dimension, through_seq, link_b3, reason, now_s } -> { from, to } |
-- nil, err: the receiver's backend records the accepted loss (docs/EXPORT.md §2, "Accepted
-- losses"; POST <url>/<tenant>/<dimension>/accept-loss, with this exporter's token).
function E:accept_loss(o)
    if self.closed then return nil, "Closed: the exporter was closed" end
    local ok, err = loss.check(o)
    if not ok then return nil, err end
    local cjson = require("cjson.safe")
    local res, rerr = request(self, "POST",
        format("%s/%s/%s/accept-loss", self.url, o.tenant, o.dimension),
        { ["Content-Type"] = "application/json" },
        cjson.encode { through_seq = o.through_seq, link_b3 = o.link_b3, reason = o.reason,
                       now_s = o.now_s })
    if not res then return nil, "ExporterError: accept-loss: " .. tostring(rerr) end
    local body = cjson.decode(res.body or "")
    if res.status == 200 and type(body) == "table" and tonumber(body.from)
       and tonumber(body.to) then
        return { from = tonumber(body.from), to = tonumber(body.to) }
    end
    local name = type(body) == "table" and body.error or "ExporterError"
    local message = type(body) == "table" and body.message or ("HTTP " .. res.status)
    if res.status == 501 then name = "Unsupported" end
    return nil, format("%s: accept-loss: HTTP %d: %s", tostring(name), res.status,
                       tostring(message):gsub("^%a+: ", ""))
end

function E:close()
    self.closed = true
end

return _M
