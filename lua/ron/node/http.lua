-- ron.node.http: the daemon's HTTP surface (docs/ops/http.md), on
-- ron.base.net.http_server (host/lua/httpd.c: H2O on the host's libuv loop). Runs inside
-- `ron-accounting run` only: the C module comes with the host.
--
--   local http = require("ron.node.http")
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
--       max_header_bytes = 16384, -- a larger request head: 431 (docs/ops/http.md, "The
--                               -- first look")
--       routes = { { method = "POST", path = "^/v1/records$", handler = fn }, ... },
--       on_early = fn,          -- optional, below
--       status_page = page }    -- optional: GET / renders page:render(exposition, ready,
--                               -- reasons) (ron.node.status), under /metrics' rules
--   srv:port(); srv:close()
--
-- routes: more endpoints (ingest, the ledger receiver) in front of the built-in ones: the
-- first whose method equals req.method and whose Lua pattern `path` matches req.path gets
-- the request, with the httpd contract (return status, body[, ctype[, headers]], or
-- nothing and req:respond(...) later); handler(req, capture): capture is the pattern's first
-- capture (the whole match when it has none). A path a route matches with another method: 405.
-- An entry may carry errors = function(status, detail, headers, header) -> status, body,
-- ctype, headers: the answers the server gives on its paths (404, 405 with Allow, the
-- loopback reserve's 503, and httpd's refusals before any handler: 400, 413, 431 — header
-- names the header at fault), so a service answers in its own format (the wallet's
-- problem+json, issue 24 §3). An entry { path = pattern, errors = fn } without method and
-- handler claims a namespace: its paths that no route takes are its 404s.
--
-- Routes: GET (or HEAD) /metrics  -> 200 Prometheus text 0.0.4: the meter's families, then
--                                    the runtime's, merged so each family appears once
--         GET /healthz            -> 200 "ok" while the process serves
--         GET /readyz             -> 200 "ready", or 503 with rt:ready()'s reasons, one a
--                                    line (without a runtime: ready)
--         GET /                   -> 200 the status page (with status_page; 404 otherwise)
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
-- (a C module of the host: the page loads anywhere, serve() needs `ron-accounting run`)
local has_httpd, httpd = pcall(require, "ron.base.net.http_server")
local FAM = require("ron.node.families")
local metrics = require("ron.base.metrics")
local statuspage = require("ron.node.status")

local format, concat, sort = string.format, table.concat, table.sort
local pairs, ipairs, type, error, tostring, pcall, setmetatable =
      pairs, ipairs, type, error, tostring, pcall, setmetatable
local match, sub, find = string.match, string.sub, string.find

local _M = {}

_M.DEFAULT_HOST = "127.0.0.1"
_M.DEFAULT_PORT = 9464
_M.DEFAULT_MAX_BODY = 65536
_M.METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

local OPTIONS = { meter = true, runtime = true, host = true, port = true, public = true,
                  max_body = true, routes = true, metrics_public = true, on_early = true,
                  status_page = true }
-- passed through to httpd.listen as they are
local LIMITS = { "max_conns", "max_conns_per_peer", "reserved_conns", "header_timeout_ms",
                 "body_timeout_ms", "max_header_bytes" }
for _, k in ipairs(LIMITS) do OPTIONS[k] = true end

-- The server's connection counters (srv:stats()) as Prometheus text.
function _M.connection_metrics(st)
    local out = {}
    FAM.http_conns:render(out, { { "general", st.general }, { "reserved", st.reserved } })
    FAM.http_refused:render(out, { { "per_peer", st.refused_per_peer },
                                   { "full", st.refused_full } })
    FAM.http_evicted:render(out, st.evicted)
    FAM.http_header_timeouts:render(out, st.header_timeouts)
    return metrics.text(out)
end

-- 127.0.0.0/8 and ::1: the addresses only this machine reaches.
function _M.is_loopback(host)
    return match(host, "^127%.%d+%.%d+%.%d+$") ~= nil or host == "::1"
           or match(host, "^::ffff:127%.%d+%.%d+%.%d+$") ~= nil -- IPv4-mapped (dual stack)
end

-- (one exposition of several, each family once: ron.base.metrics)
_M.merge_exposition = metrics.merge

local ROUTES = { ["/metrics"] = true, ["/healthz"] = true, ["/readyz"] = true }

-- The errors function of the first entry that matches path and has one, or nil.
local function errors_of(routes, path)
    for i = 1, #routes do
        local r = routes[i]
        if r.errors and match(path, r.path) then return r.errors end
    end
end

-- An answer of the server itself on path: the path's owner shapes it, or plain text.
local function server_answer(routes, path, status, text, headers)
    local e = errors_of(routes, path)
    if e then return e(status, text, headers) end
    return status, text .. "\n", nil, headers
end

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
    sort(keys)
    local rows = {}
    for i, k in ipairs(keys) do
        local route, status = match(k, "^(.*)%z(%d+)$")
        rows[i] = { route, status, counts[k] }
    end
    return metrics.text(FAM.http_early_refusals:render({}, rows))
end

-- /metrics' exposition: the meter's families, the runtime's, the server's connections, the
-- early refusals.
local function exposition(meter, rt, srv, early)
    local texts = { meter:metrics() }
    if rt then texts[#texts + 1] = rt:metrics_text() end
    if srv then texts[#texts + 1] = _M.connection_metrics(srv:stats()) end
    if early then texts[#texts + 1] = _M.early_metrics(early) end
    return metrics.merge(texts)
end

-- The literal text every match of a route's pattern starts with and ends with ("" where
-- the pattern does not fix one): a route whose ends differ from the path's is passed over
-- without running the pattern. A wallet GET balance ran five account-id patterns before
-- its own (issue 25's cached-read ratio); a necessary condition only: match decides.
local MAGIC, QUANT = "[%^%$%(%)%%%.%[%]%*%+%-%?]", "[%*%+%-%?]"
local function literal_ends(pat)
    local prefix, suffix = "", ""
    if sub(pat, 1, 1) == "^" then
        local i = 2
        while i <= #pat and not find(sub(pat, i, i), MAGIC)
              and not find(sub(pat, i + 1, i + 1), QUANT) do
            i = i + 1
        end
        prefix = sub(pat, 2, i - 1)
    end
    if #pat >= 2 and sub(pat, -1) == "$" and sub(pat, -2, -2) ~= "%" then
        local j = #pat - 1
        while j >= 1 and not find(sub(pat, j, j), MAGIC) and sub(pat, j - 1, j - 1) ~= "%" do
            j = j - 1
        end
        suffix = sub(pat, j + 1, #pat - 1)
    end
    return prefix, suffix
end
_M.literal_ends = literal_ends

local function may_match(ends, r, path)
    local e = ends[r]
    if not e then
        e = { literal_ends(r.path) }
        ends[r] = e
    end
    local p, s = e[1], e[2]
    return (p == "" or sub(path, 1, #p) == p) and (s == "" or sub(path, -#s) == s)
end

-- A path's routing, for every method at once: { [method] = { route, its pattern's first
-- capture }, allowed = the methods of every route that matches, in order ("GET, POST") }.
local function routing(routes, ends, path)
    local out, allowed = {}, nil
    for i = 1, #routes do
        local r = routes[i]
        if r.method and may_match(ends, r, path) then
            local cap = match(path, r.path)
            if cap then
                if not out[r.method] then out[r.method] = { r, cap } end
                allowed = allowed and (allowed .. ", " .. r.method) or r.method
            end
        end
    end
    out.allowed = allowed
    return out
end

-- The routings of the paths seen last (a cached balance read and /healthz repeat theirs:
-- issue 25's cached-read ratio): paths up to ROUTED_PATH_MAX bytes, ROUTED_MAX of them,
-- emptied when full (paths are the client's: bounded, I-7). The routes never change.
_M.ROUTED_MAX, _M.ROUTED_PATH_MAX = 1024, 256

local function handler(o, loopback_only, holder)
    local meter, rt, routes, page = o.meter, o.runtime, o.routes or {}, o.status_page
    local known = setmetatable({ ["/"] = page and true or nil }, { __index = ROUTES })
    local ends = setmetatable({}, { __mode = "k" }) -- route -> its literal ends
    local routed, n_routed = {}, 0
    return function(req)
        local path, method = req.path, req.method
        if req.reserved and not known[path] then
            return server_answer(routes, path, 503, "busy: this connection is in the loopback "
                                 .. "reserve (health probes and /metrics only)",
                                 { ["Retry-After"] = "1" })
        end
        local how = routed[path]
        if not how then
            how = routing(routes, ends, path)
            if #path <= _M.ROUTED_PATH_MAX then
                if n_routed >= _M.ROUTED_MAX then routed, n_routed = {}, 0 end
                routed[path], n_routed = how, n_routed + 1
            end
        end
        local take = how[method]
        if take then return take[1].handler(req, take[2]) end
        local allowed = how.allowed
        if allowed and not known[path] then
            return server_answer(routes, path, 405, "method not allowed", { Allow = allowed })
        end
        if not known[path] then return server_answer(routes, path, 404, "not found") end
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
        local text = exposition(meter, rt, holder.srv, holder.early)
        if path == "/" then
            local ready, reasons = true, nil
            if rt then ready, reasons = rt:ready() end
            return 200, page:render(text, ready, reasons), statuspage.CONTENT_TYPE,
                   statuspage.HEADERS
        end
        return 200, text, _M.METRICS_CONTENT_TYPE
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
            local route = type(r) == "table" and type(r.method) == "string"
                          and type(r.handler) == "function"
            local namespace = type(r) == "table" and r.method == nil and r.handler == nil
                              and type(r.errors) == "function"
            if not (route or namespace) or type(r.path) ~= "string"
               or (r.errors ~= nil and type(r.errors) ~= "function") then
                error(format("http.serve: routes[%d] needs method, path (a Lua pattern) and "
                             .. "handler", i), 2) -- (or, a namespace: path and errors)
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
    local routes = o.routes or {}
    for _, r in ipairs(routes) do
        if r.errors then -- httpd's refusals before any handler, shaped by the path's owner
            lo.refusal = function(path, status, detail, header)
                local e = errors_of(routes, path)
                if e then return e(status, detail, nil, header) end
            end
            break
        end
    end
    for _, k in ipairs(LIMITS) do lo[k] = o[k] end
    if not has_httpd then error("http.serve: " .. tostring(httpd), 2) end
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
