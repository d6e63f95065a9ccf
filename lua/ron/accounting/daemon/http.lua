-- ron.accounting.daemon.http: the daemon's HTTP surface (docs/ops/http.md), on
-- ron.accounting.net.http_server (host/lua/httpd.c: H2O on the host's libuv loop). Runs inside
-- `ron-accounting run` only: the C module comes with the host.
--
--   local http = require "ron.accounting.daemon.http"
--   local srv, err = http.serve {
--       meter = m,              -- required: meter:metrics() is the core registry
--       runtime = rt,           -- optional: rt:metrics_text(), rt:ready()
--       host = "127.0.0.1",     -- default loopback; any other address is an explicit choice
--       port = 9464,            -- 0 picks a free port: srv:port()
--       public = false,         -- true: bind 0.0.0.0 when no host is given
--       metrics_public = false, -- on a non-loopback bind, /metrics /healthz /readyz answer
--                               -- loopback peers only (403 otherwise) unless true
--       max_body = 65536,       -- request bodies above it: 413, before they are read
--       max_conns = 256, max_conns_per_peer = 32, reserved_conns = 8,
--       header_timeout_ms = 10000, body_timeout_ms = 30000,
--                               -- connection limits and read deadlines (httpd.listen;
--                               -- docs/ops/http.md, "Connections and deadlines")
--       routes = { { method = "POST", path = "^/v1/records$", handler = fn }, ... },
--       on_early = fn }         -- optional, below
--   srv:port(); srv:close()
--
-- routes: more endpoints (ingest, the ledger receiver) in front of the built-in ones: the
-- first whose method equals req.method and whose Lua pattern `path` matches req.path gets
-- the request, with the httpd contract (return status, body[, ctype[, headers]], or
-- nothing and req:respond(...) later). A path a route matches with another method: 405.
--
-- Routes: GET (or HEAD) /metrics  -> 200 Prometheus text 0.0.4: the meter's families, then
--                                    the runtime's, merged so each family appears once
--         GET /healthz            -> 200 "ok" while the process serves
--         GET /readyz             -> 200 "ready", or 503 with rt:ready()'s reasons, one a
--                                    line (without a runtime: ready)
--         a known path, another method -> 405 (Allow: GET, HEAD); anything else -> 404.
-- A non-loopback bind logs one WARN line on stderr: /metrics tells tenant activity. There
-- (ingest is the reason to listen publicly) the built-in routes answer only requests whose
-- peer (req.peer) is a loopback address, 403 to others, unless metrics_public = true; the
-- extra routes answer everyone (they do their own authentication).
-- A connection admitted into the loopback reserve (req.reserved: the server was full, or
-- the peer at its limit) serves only the built-in routes: 503 for the extra ones.
-- /metrics also carries the server's connection families (accounting_http_*).
-- Early refusals (answered by the server before any handler: a body over max_body is 413, a
-- malformed request 400) belong to the route that was asked, by method and path (a route
-- of that path with another method when none has that method): that route's
-- on_early(status, method, path) counts it when it returns true (ingest: its oversize
-- rejects), else it is counted in accounting_http_early_refusals_total{route, status} (route:
-- the route's `name`, "-" for a path no route serves) and passed to o.on_early(status,
-- method, path, route_name) (the daemon audits it).
local httpd = require "ron.accounting.net.http_server"

local format, concat = string.format, table.concat
local pairs, ipairs, type, error, tostring, pcall = pairs, ipairs, type, error, tostring, pcall
local gmatch, match = string.gmatch, string.match

local _M = {}

_M.DEFAULT_HOST = "127.0.0.1"
_M.DEFAULT_PORT = 9464
_M.DEFAULT_MAX_BODY = 65536
_M.METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

local OPTIONS = { meter = true, runtime = true, host = true, port = true, public = true,
                  max_body = true, routes = true, metrics_public = true, on_early = true }
-- passed through to httpd.listen as they are
local LIMITS = { "max_conns", "max_conns_per_peer", "reserved_conns", "header_timeout_ms",
                 "body_timeout_ms" }
for _, k in ipairs(LIMITS) do OPTIONS[k] = true end

-- The server's connection counters (srv:stats()) as Prometheus text.
function _M.connection_metrics(st)
    return concat({
        "# HELP accounting_http_connections Connections open, by pool (general, or the "
        .. "loopback reserve).",
        "# TYPE accounting_http_connections gauge",
        format('accounting_http_connections{pool="general"} %d', st.general),
        format('accounting_http_connections{pool="reserved"} %d', st.reserved),
        "# HELP accounting_http_connections_refused_total Connections closed at accept: a "
        .. "peer over max_conns_per_peer, or the server full.",
        "# TYPE accounting_http_connections_refused_total counter",
        format('accounting_http_connections_refused_total{reason="per_peer"} %d',
               st.refused_per_peer),
        format('accounting_http_connections_refused_total{reason="full"} %d', st.refused_full),
        "# HELP accounting_http_connections_evicted_total Idle reserved connections closed "
        .. "to admit a new loopback one.",
        "# TYPE accounting_http_connections_evicted_total counter",
        format("accounting_http_connections_evicted_total %d", st.evicted),
        "# HELP accounting_http_header_timeouts_total Connections closed because no complete "
        .. "request head arrived within header_timeout_ms.",
        "# TYPE accounting_http_header_timeouts_total counter",
        format("accounting_http_header_timeouts_total %d", st.header_timeouts),
    }, "\n") .. "\n"
end

-- 127.0.0.0/8 and ::1: the addresses only this machine reaches.
function _M.is_loopback(host)
    return match(host, "^127%.%d+%.%d+%.%d+$") ~= nil or host == "::1"
           or match(host, "^::ffff:127%.%d+%.%d+%.%d+$") ~= nil -- IPv4-mapped (dual stack)
end

-- Merges Prometheus text expositions into one where each metric family (HELP, TYPE and
-- its samples) appears once, contiguous: the format forbids a family split in two or
-- described twice (the meter and the runtime both count accounting_rejected_total, with
-- different reasons). The first HELP/TYPE of a family wins; a sample whose name and labels
-- were already seen is dropped (first wins: a collision is a naming bug upstream).
function _M.merge_exposition(texts)
    local order, fam = {}, {}
    local seen = {}
    local function family(name)
        local f = fam[name]
        if not f then
            f = { samples = {} }
            fam[name] = f
            order[#order + 1] = name
        end
        return f
    end
    -- histogram/summary samples (_bucket, _sum, _count) belong to their base family.
    local function owner(sample_name)
        for _, suffix in ipairs { "_bucket", "_sum", "_count" } do
            local base = match(sample_name, "^(.-)" .. suffix .. "$")
            if base and fam[base] and (fam[base].type == "histogram" or
                                       fam[base].type == "summary") then
                return base
            end
        end
        return sample_name
    end
    for _, text in ipairs(texts) do
        for line in gmatch(text, "[^\n]+") do
            local kind, name, rest = match(line, "^#%s+(%u+)%s+([%w_:]+)%s*(.*)$")
            if kind == "HELP" then
                local f = family(name)
                f.help = f.help or rest
            elseif kind == "TYPE" then
                local f = family(name)
                f.type = f.type or rest
            elseif not match(line, "^#") then -- (another comment line is dropped)
                local sname, labels = match(line, "^([%w_:]+)(%b{})")
                if not sname then sname = match(line, "^([%w_:]+)") end
                if sname then
                    local id = sname .. (labels or "")
                    if not seen[id] then
                        seen[id] = true
                        local s = family(owner(sname)).samples
                        s[#s + 1] = line
                    end
                end
            end
        end
    end
    local out = {}
    for _, name in ipairs(order) do
        local f = fam[name]
        if f.help then out[#out + 1] = format("# HELP %s %s", name, f.help) end
        if f.type then out[#out + 1] = format("# TYPE %s %s", name, f.type) end
        for _, l in ipairs(f.samples) do out[#out + 1] = l end
    end
    return concat(out, "\n") .. "\n"
end

local ROUTES = { ["/metrics"] = true, ["/healthz"] = true, ["/readyz"] = true }

-- The early refusals' attribution (see the header): -> the function for httpd.listen's
-- on_early, and the counts by route and status.
local function early_refusals(o)
    local routes, counts = o.routes or {}, {}
    return function(status, method, path)
        local hit
        for i = 1, #routes do
            local r = routes[i]
            if match(path, r.path) then
                hit = hit or r
                if r.method == method then
                    hit = r
                    break
                end
            end
        end
        if hit and hit.on_early and hit.on_early(status, method, path) then return end
        local name = hit and (hit.name or hit.path) or "-"
        local k = name .. "\0" .. status
        counts[k] = (counts[k] or 0) + 1
        if o.on_early then o.on_early(status, method, path, name) end
    end, counts
end

-- accounting_http_early_refusals_total from the counts.
function _M.early_metrics(counts)
    local keys = {}
    for k in pairs(counts) do keys[#keys + 1] = k end
    table.sort(keys)
    local out = { "# HELP accounting_http_early_refusals_total Requests refused before any " ..
                  "handler (413: a body over max_body; 400: malformed), by the route asked.",
                  "# TYPE accounting_http_early_refusals_total counter" }
    for _, k in ipairs(keys) do
        local route, status = k:match("^(.*)%z(%d+)$")
        out[#out + 1] = format('accounting_http_early_refusals_total{route="%s",status="%s"} %d',
                               (route:gsub('[\\"]', "_")), status, counts[k])
    end
    return concat(out, "\n") .. "\n"
end

local function handler(o, loopback_only, holder)
    local meter, rt, routes = o.meter, o.runtime, o.routes or {}
    return function(req)
        local path, method = req.path, req.method
        if req.reserved and not ROUTES[path] then
            return 503, "busy: this connection is in the loopback reserve (health probes "
                        .. "and /metrics only)\n", nil, { ["Retry-After"] = "1" }
        end
        local allowed
        for i = 1, #routes do
            local r = routes[i]
            if match(path, r.path) then
                if r.method == method then return r.handler(req) end
                allowed = allowed and (allowed .. ", " .. r.method) or r.method
            end
        end
        if allowed and not ROUTES[path] then
            return 405, "method not allowed\n", nil, { Allow = allowed }
        end
        if not ROUTES[path] then return 404, "not found\n" end
        if loopback_only and not _M.is_loopback(req.peer or "") then
            return 403, "forbidden: loopback peers only (metrics_public = false)\n"
        end
        if method ~= "GET" and method ~= "HEAD" then
            return 405, "method not allowed\n", nil, { Allow = "GET, HEAD" }
        end
        if path == "/healthz" then return 200, "ok\n" end
        if path == "/readyz" then
            if not rt then return 200, "ready\n" end
            -- notes: what is wrong but does not make the process unready (a list, after
            -- "ready"; the daemon's audit trail failing with audit.required = false)
            local ready, reasons, notes = rt:ready()
            if ready then
                local n = type(notes) == "table" and #notes > 0 and concat(notes, "\n") .. "\n"
                return 200, "ready\n" .. (n or "")
            end
            return 503, concat(reasons or {}, "\n") .. "\n"
        end
        local texts = { meter:metrics() }
        if rt then texts[#texts + 1] = rt:metrics_text() end
        if holder.srv then texts[#texts + 1] = _M.connection_metrics(holder.srv:stats()) end
        texts[#texts + 1] = _M.early_metrics(holder.early)
        return 200, _M.merge_exposition(texts), _M.METRICS_CONTENT_TYPE
    end
end

-- -> server | nil, err (a bind failure: the port in use, an address not of this host)
function _M.serve(o)
    if type(o) ~= "table" then error("http.serve: options table expected", 2) end
    for k in pairs(o) do
        if not OPTIONS[k] then error("http.serve: unknown option '" .. tostring(k) .. "'", 2) end
    end
    if o.meter == nil then error("http.serve: meter is required", 2) end
    if o.routes ~= nil then
        if type(o.routes) ~= "table" then error("http.serve: routes must be a list", 2) end
        for i, r in ipairs(o.routes) do
            if type(r) ~= "table" or type(r.method) ~= "string" or type(r.path) ~= "string"
               or type(r.handler) ~= "function" then
                error(format("http.serve: routes[%d] needs method, path (a Lua pattern) and "
                             .. "handler", i), 2)
            end
        end
    end
    local host = o.host
    if host == nil then host = o.public and "0.0.0.0" or _M.DEFAULT_HOST end
    if type(host) ~= "string" then error("http.serve: host must be a string", 2) end
    local port = o.port
    if port == nil then port = _M.DEFAULT_PORT end
    local loopback_only = not _M.is_loopback(host) and not o.metrics_public
    local holder = {}
    local on_early
    on_early, holder.early = early_refusals(o)
    local lo = { host = host, port = port, max_body = o.max_body or _M.DEFAULT_MAX_BODY,
                 handler = handler(o, loopback_only, holder), on_early = on_early }
    for _, k in ipairs(LIMITS) do lo[k] = o[k] end
    local ok, srv, err = pcall(httpd.listen, lo)
    if not ok then error(srv, 2) end -- misuse (a bad port) raises at the caller
    holder.srv = srv
    if srv and not _M.is_loopback(host) then
        io.stderr:write(format("http: WARN: serving /metrics on non-loopback address %s:%d%s\n",
                               host, srv:port(), loopback_only and
                               " (to loopback peers only: metrics_public = false)" or ""))
    end
    return srv, err
end

return _M
