-- ron.base.net.http_client_c (host/lua/curl.c), ron.base.net.http_client,
-- ron.accounting.export.exporters.http and ron.node.receiver, on the host's loop
-- (ctest lua-httpexp-host: `ron-accounting run spec/run-busted.lua
-- spec/ron/accounting/export/exporters/http_spec.lua`). Each case runs as a task (S.run_task):
-- the HTTP servers (ron.base.net.http_server) and the client share the one loop. Under
-- plain busted (ctest lua) only the pure parts run (options, the status mapping); the rest is
-- pending.
--
-- Cases: the curl glue (round trip, headers, refused, a server that never answers, a
-- response over its limit, keep-alive, misuse, no leaked transfers or watchers); the
-- exporter's status mapping against a scripted ledger (2xx, 208, 409 conflict/gap, 5xx,
-- 429, 401, timeouts, connection refused); the exporter into a receiver backed by the file
-- ledger (ok, G-3 replays -> dup, a fork -> conflict, gap, head; the stored bytes are
-- slice:encode() and verify passes); the receiver's rejects (bad bodies 400
-- SchemaViolation, mismatching path or digest 400, wrong content type 415, tokens 401/403,
-- over max_body 413, queue full 503) and its backend's failures (503/504/500 -> retry);
-- G-16 over HTTP (two exporters racing on the same stream: one chain, the rest dup); the
-- export runtime end to end through HTTP. No wall-clock assertions: waits are bounded
-- "eventually"s, timeouts only make things fail sooner.
local S = require("support")
local exp_http = require("ron.accounting.export.exporters.http")

local T0, TA, TB = S.T0, S.TENANT_A, S.TENANT_B
local HAS_CURL = pcall(require, "ron.base.net.http_client_c")

local function res(status, headers, body)
    return { status = status, headers = headers or {}, body = body or "" }
end

describe("ron.accounting.export.exporters.http (no server)", function()
    it("validates its options; new() does no I/O", function()
        S.refuses(exp_http.new, {
            { {} },
            { { url = "ftp://x/y" } },
            { { url = "http://h/v1/slices?x=1" } },
            { { url = "http://h/x", bogus = 1 }, 'http.new: unknown option "bogus"' },
            { { url = "http://h/x", token = "a b" } },
            { { url = "http://h/x", timeout_ms = 0 } },
        })
        local e = exp_http.new { url = "http://127.0.0.1:1/v1/slices/", token = "t" }
        assert.equal("http://127.0.0.1:1/v1/slices", e.url)
        require("ron.accounting.export.exporters").check(e)
    end)

    it("maps answers onto the export contract", function()
        local B3 = string.rep("ab", 32)
        local c = exp_http.classify
        local cases = {
            { res(201), "ok" },
            { res(200), "ok" },
            { res(204), "ok" },
            { res(201, { ["x-ron-status"] = "ok" }), "ok" },
            { res(200, { ["x-ron-status"] = "dup" }), "dup" },
            { res(208), "dup" },
            { res(409), "conflict" },
            { res(409, { ["x-ron-status"] = "conflict" }), "conflict" },
            { res(409, { ["x-ron-status"] = "gap" }), "gap" },
            { res(500), "retry_remote_5xx" },
            { res(502), "retry_remote_5xx" },
            { res(503, { ["retry-after"] = "1" }), "retry_remote_5xx" },
            { res(504), "retry_remote_5xx" },
            { res(429), "retry_remote_5xx" },
        }
        for _, k in ipairs(cases) do
            assert.equal(k[2], (c(k[1], nil, nil, B3)), k[1].status .. " " ..
                         tostring(k[1].headers["x-ron-status"]))
        end
        assert.equal("retry_network", (c(nil, "Network: refused", "network")))
        assert.equal("retry_timeout", (c(nil, "Timeout: 5000 ms", "timeout")))
        assert.equal("retry_network", (c(nil, "Protocol: not HTTP", "protocol")))
        -- not the contract: local failures (the runtime retries them and logs)
        for _, r in ipairs { res(400), res(401), res(403), res(404), res(413), res(301),
                             res(200, { ["x-ron-status"] = "conflict" }),
                             res(409, { ["x-ron-status"] = "ok" }),
                             res(201, { ["x-ron-b3"] = string.rep("cd", 32) }) } do
            local st, err = c(r, nil, nil, B3)
            assert.is_nil(st, r.status)
            assert.matches("^ExporterError: HTTP " .. r.status, err)
        end
        local st, err = c(nil, "Tls: certificate", "tls")
        S.fails("^ExporterError: Tls", st, err)
    end)
end)

describe("ron.node.receiver (no server)", function()
    it("validates its options", function()
        local receiver = require("ron.node.receiver")
        local be = { put = function() return "ok" end, close = function() end }
        S.refuses(receiver.new, {
            { {} },
            { { backend = be, producers = { a = { token_hash = "abc", tenants = "*" } } } },
            { { backend = be, prefix = "v1", allow_unauthenticated = true } },
            { { backend = be, bogus = true, allow_unauthenticated = true },
              'receiver.new: unknown option "bogus"' },
        })
        assert.equal(S.b3sum("secret"), receiver.token_hash("secret"))
    end)

    it("a receiver needs producers (tokens bound to tenants) or an explicit "
       .. "allow_unauthenticated (issue 14 item 5)", function()
        local receiver = require("ron.node.receiver")
        local h1, h2 = S.b3sum("one"), S.b3sum("two")
        -- the daemon's configuration check
        local ok, err = receiver.check_config({ backend = "file" })
        S.fails("receiver%.producers is required", ok, err)
        ok, err = receiver.check_config({ token_hash = h1 })
        S.fails("token_hash is replaced by receiver%.producers", ok, err)
        assert.is_true(receiver.check_config({ allow_unauthenticated = true }))
        assert.is_true(receiver.check_config({
            producers = { ["node-a"] = { token_hash = h1, tenants = { TA } },
                          agg = { token_hash = { h2 }, tenants = "*" } } }))
        for i, bad in ipairs {
            { producers = { a = { token_hash = h1 } } },                      -- no tenants
            { producers = { a = { token_hash = h1, tenants = {} } } },         -- empty
            { producers = { a = { token_hash = h1, tenants = { "ACME" } } } }, -- not a uuid
            { producers = { a = { token_hash = h1, tenants = "*", x = 1 } } }, -- unknown key
            { producers = { a = { token_hash = h1, tenants = "*" },
                            b = { token_hash = h1, tenants = "*" } } },        -- shared token
            { producers = {} },
            { producers = { a = { token_hash = h1, tenants = "*" } },
              allow_unauthenticated = true },
            { allow_unauthenticated = "yes" },
        } do
            ok, err = receiver.check_config(bad)
            assert.is_nil(ok, "case " .. i)
            assert.matches("^receiver%.", err)
        end
        local map = assert(receiver.parse_producers({ a = { token_hash = h1:upper(),
                                                             tenants = { TA } } }))
        assert.equal("a", map[h1].name)
        assert.is_true(map[h1].tenants[TA])
    end)
end)

if not S.runs_if(HAS_CURL, "ron.base.net.http_client_c / exporters.http / receiver (HTTP)",
                 "needs the ron-accounting host (ron.base.net.http_client_c): ctest -R lua-httpexp-host") then
    return
end

local uv = require("luv")
local acct = require("ron.accounting")
local curl = require("ron.base.net.http_client_c")
local httpc = require("ron.base.net.http_client")
local httpd = require("ron.base.net.http_server")
local http = require("ron.node.http")
local receiver = require("ron.node.receiver")
local offload = require("ron.accounting.runtime.offload")
local file = require("ron.accounting.export.exporters.file")
local runtime = require("ron.accounting.runtime")
local backoff = require("ron.base.backoff")

local run, eventually = S.run_task, S.eventually

local chain = S.chain

-- No transfer in flight, no socket watcher left once the case is over.
local function no_leaks()
    local xfers, polls = curl.live()
    assert.equal(0, xfers, "transfers in flight")
    assert.equal(0, polls, "socket watchers open")
end

-- A ledger receiver over the file ledger (no fsync) on a free port:
-- -> srv, r, url, dir
local function start_receiver(opts)
    opts = opts or {}
    local dir = S.tmpname(".ledger")
    local backend = opts.backend or assert(offload.file { dir = dir, fsync = false })
    local r = receiver.new { backend = backend, producers = opts.producers,
                             allow_unauthenticated = opts.producers == nil or nil,
                             workers = opts.workers, queue_cap = opts.queue_cap,
                             log = opts.log or function() end }
    local meter = assert(acct.open(S.cfg()))
    local srv = assert(http.serve { meter = meter, port = 0, routes = r:routes(),
                                    max_body = receiver.MAX_BODY })
    return srv, r, "http://127.0.0.1:" .. srv:port() .. "/v1/slices", dir, meter
end

local function stop_receiver(srv, r, meter)
    srv:close()
    r:close()
    if meter then meter:close() end
end

-- A raw PUT of a slice body to the receiver (specs of the receiver's checks).
local function raw_put(url, s, headers, body)
    local h = { ["Content-Type"] = "application/octet-stream", ["X-Ron-B3"] = s.b3 }
    for k, v in pairs(headers or {}) do h[k] = v or nil end
    return httpc.request { method = "PUT", body = body or s:encode(), headers = h,
                           url = ("%s/%s/%s/%d"):format(url, s.tenant, s.dimension, s.id.seq),
                           timeout_ms = 5000 }
end

describe("ron.base.net.http_client_c", function()
    it("round trip: method, headers, body both ways; lower-case response headers", function()
        run(function(task)
            local seen
            local srv = assert(httpd.listen { port = 0, handler = function(req)
                seen = { method = req.method, path = req.path, ct = req.headers["content-type"],
                         x = req.headers["x-one"], expect = req.headers["expect"],
                         body = req.body }
                return 201, "made " .. #req.body, "text/plain", { ["X-Ron-Status"] = "ok",
                                                                  ["Set-Thing"] = "a" }
            end })
            local url = "http://127.0.0.1:" .. srv:port()
            local body = string.rep("x", 70000) -- over 1 KiB: no 100-continue round trip
            local r = assert(httpc.request { method = "PUT", url = url .. "/a/b", body = body,
                                             headers = { ["X-One"] = "1" } })
            assert.equal(201, r.status)
            assert.equal("made 70000", r.body)
            assert.equal("ok", r.headers["x-ron-status"])
            assert.equal("text/plain", r.headers["content-type"])
            assert.same({ method = "PUT", path = "/a/b", ct = "application/octet-stream",
                          x = "1", body = body }, seen)
            -- GET, a second request on the kept-alive connection
            r = assert(httpc.request { url = url .. "/g" })
            assert.equal(201, r.status)
            assert.equal("GET", seen.method)
            assert.equal("", seen.body)
            srv:close()
            assert.is_true(eventually(task, function() return (curl.live()) == 0 end, 2000))
        end)
        no_leaks()
    end)

    it("failures: refused -> network, never answered -> timeout, too big -> protocol",
       function()
        run(function(task)
            -- a port nobody listens on: bind one, close it
            local probe = uv.new_tcp()
            probe:bind("127.0.0.1", 0)
            local dead = probe:getsockname().port
            probe:close()
            local r, err, class = httpc.request { url = "http://127.0.0.1:" .. dead .. "/" }
            assert.is_nil(r)
            assert.equal("network", class)
            assert.matches("^Network: ", err)

            -- a TCP server that accepts and never answers
            local silent = uv.new_tcp()
            silent:bind("127.0.0.1", 0)
            local conns = {}
            silent:listen(8, function()
                local c = uv.new_tcp()
                silent:accept(c)
                conns[#conns + 1] = c
            end)
            r, err, class = httpc.request { url = "http://127.0.0.1:" .. silent:getsockname().port,
                                            timeout_ms = 200 }
            assert.is_nil(r)
            assert.equal("timeout", class)
            assert.matches("^Timeout: ", err)
            for _, c in ipairs(conns) do c:close() end
            silent:close()

            -- an HTTP handler that never responds (async, forgotten until close)
            local held = {}
            local srv = assert(httpd.listen { port = 0, handler = function(req)
                if req.path == "/big" then return 200, string.rep("b", 5000) end
                held[#held + 1] = req
            end })
            local base = "http://127.0.0.1:" .. srv:port()
            r, err, class = httpc.request { url = base .. "/hang", timeout_ms = 200 }
            assert.equal("timeout", class)
            r, err, class = httpc.request { url = base .. "/big", max_response = 1000 }
            assert.is_nil(r)
            assert.equal("protocol", class)
            assert.matches("^Protocol: ", err)
            r = assert(httpc.request { url = base .. "/big" })
            assert.equal(5000, #r.body)
            srv:close()
            held = nil
            assert.is_true(eventually(task, function() return (curl.live()) == 0 end, 2000))
        end)
        no_leaks()
    end)

    it("misuse raises; refusals are values", function()
        run(function()
            assert.has_error(function() curl.request({ url = "ftp://x" }, function() end) end)
            assert.has_error(function() curl.request({ url = "http://x", body = "b" },
                                                     function() end) end)
            assert.has_error(function() curl.request({ url = "http://x", method = "P T" },
                                                     function() end) end)
            assert.has_error(function() curl.request({ url = "http://x", timeout_ms = 0 },
                                                     function() end) end)
            assert.has_error(function()
                curl.request({ url = "http://x", headers = { ["X"] = "a\r\nB: c" } },
                             function() end)
            end)
            assert.has_error(function() httpc.request { url = 1 } end)
        end)
        no_leaks()
    end)
end)

-- A scripted ledger: each request answered by script(req) (status, body, headers), or
-- never (nil).
local function fake_ledger(script)
    local held = {}
    local srv = assert(httpd.listen { port = 0, handler = function(req)
        local st, body, h = script(req)
        if not st then
            held[#held + 1] = req
            return
        end
        return st, body or "", "text/plain", h
    end })
    return srv, "http://127.0.0.1:" .. srv:port() .. "/v1/slices"
end

describe("ron.accounting.export.exporters.http: status mapping", function()
    it("against a scripted ledger: 2xx, 208, 409, 5xx, 429, 401, timeouts, refused", function()
        local s = chain(1)[1]
        run(function(task)
            local answer
            local seen
            local srv, url = fake_ledger(function(req)
                seen = req
                return answer[1], answer[2], answer[3]
            end)
            local e = exp_http.new { url = url, token = "tok", timeout_ms = 300 }
            local cases = {
                { { 201 }, "ok" },
                { { 200, "", { ["X-Ron-Status"] = "dup" } }, "dup" },
                { { 208 }, "dup" },
                { { 409, "fork" }, "conflict" },
                { { 409, "", { ["X-Ron-Status"] = "gap" } }, "gap" },
                { { 500, "boom" }, "retry_remote_5xx" },
                { { 503, "", { ["Retry-After"] = "2" } }, "retry_remote_5xx" },
                { { 429 }, "retry_remote_5xx" },
                { {}, "retry_timeout" }, -- never answered
            }
            for _, k in ipairs(cases) do
                answer = k[1]
                local st = e:put(s)
                assert.equal(k[2], st, tostring(answer[1]))
            end
            -- what the exporter sent
            assert.equal("PUT", seen.method)
            assert.equal(("/v1/slices/%s/bytes/1"):format(TA), seen.path)
            assert.equal("Bearer tok", seen.headers.authorization)
            assert.equal(s.b3, seen.headers["x-ron-b3"])
            assert.equal(s.prev_b3, seen.headers["x-ron-prev-b3"])
            assert.equal(("%s/bytes/%d/1/%s"):format(TA, s.id.window_start_s, s.b3),
                         seen.headers["idempotency-key"])
            assert.equal("application/octet-stream", seen.headers["content-type"])
            assert.equal(s:encode(), seen.body)
            -- not the contract: a local failure
            answer = { 401, "no" }
            local st, err = e:put(s)
            S.fails("^ExporterError: HTTP 401", st, err)
            local stats = e:stats()
            assert.equal(10, stats.puts)
            assert.equal(3, stats.retry_remote_5xx)
            assert.equal(1, stats.retry_timeout)
            assert.equal(1, stats.fail)
            srv:close()
            -- refused: the ledger is gone
            st = e:put(s)
            assert.equal("retry_network", st)
            assert.is_true(eventually(task, function() return (curl.live()) == 0 end, 2000))
        end)
        no_leaks()
    end)
end)

describe("ron.accounting.export.exporters.http into ron.node.receiver (file ledger)", function()
    it("ok, G-3 replays -> dup, a fork -> conflict, gap, head; bytes stored as sent", function()
        local c1 = chain(4)
        local fork = chain(3, 100) -- same stream, other counts: another chain
        local dir
        run(function(task)
            local srv, r, url, d, meter = start_receiver()
            dir = d
            local e = exp_http.new { url = url }
            assert.is_nil(e:head(TA, "bytes")) -- nothing stored
            for i = 1, 3 do assert.equal("ok", (e:put(c1[i]))) end
            for _ = 1, 3 do -- G-3: replays are no-ops, answered dup
                assert.equal("dup", (e:put(c1[2])))
            end
            assert.equal("dup", (e:put(c1[3])))
            local st, detail = e:put(fork[2])
            assert.equal("conflict", st)
            assert.matches("409", detail)
            assert.equal("conflict", (e:put(fork[3]))) -- seq 3 is taken by another b3
            local s5 = chain(5)[5]
            assert.equal("gap", (e:put(s5)))
            local h = assert(e:head(TA, "bytes"))
            assert.same({ seq = 3, b3 = c1[3].b3 }, h)
            assert.equal("ok", (e:put(c1[4])))
            local stats = r:stats()
            assert.equal(4, stats.ok)
            assert.equal(4, stats.dup)
            assert.equal(2, stats.conflict)
            assert.equal(1, stats.gap)
            assert.equal(2, stats.heads)
            local text = r:metrics_text()
            assert.truthy(text:find('accounting_receiver_slices_total{status="ok"} 4', 1, true))
            assert.truthy(text:find('accounting_receiver_slices_total{status="dup"} 4', 1, true))
            stop_receiver(srv, r, meter)
        end)
        no_leaks()
        -- the ledger holds exactly the chain c1, byte for byte
        local ledger = assert(file.new { dir = dir })
        assert.same({ seq = 4, b3 = c1[4].b3 }, { seq = ledger:head(TA, "bytes").seq,
                                                  b3 = ledger:head(TA, "bytes").b3 })
        local bytes = S.read_file(dir .. "/" .. TA .. "/bytes.ledger")
        local off = 1
        for i = 1, 4 do
            local n = bytes:byte(off) + 256 * bytes:byte(off + 1) + 65536 * bytes:byte(off + 2)
            assert.equal(c1[i]:encode(), bytes:sub(off + 4, off + 3 + n))
            assert.equal(S.b3sum(c1[i]:encode()), c1[i].b3)
            off = off + 4 + n + 32
        end
        assert.equal(#bytes + 1, off)
        assert.equal(0, (S.verify(dir)))
    end)

    it("rejects bad requests with typed errors, counted; tokens 401/403", function()
        local s = chain(2)
        run(function(task)
            local srv, r, url, _, meter = start_receiver {
                producers = { one = { token_hash = { receiver.token_hash("right"),
                                                     receiver.token_hash("other") },
                                      tenants = "*" } } }
            local auth = { Authorization = "Bearer right" }
            local function with(extra)
                local h = { Authorization = "Bearer right" }
                for k, v in pairs(extra) do h[k] = v end
                return h
            end
            -- tokens
            local a = assert(raw_put(url, s[1], {}))
            assert.equal(401, a.status)
            assert.equal("Unauthorized", a.headers["x-ron-error"])
            assert.truthy(a.headers["www-authenticate"])
            a = assert(raw_put(url, s[1], { Authorization = "Bearer wrong" }))
            assert.equal(403, a.status)
            local st0, err0 = exp_http.new { url = url, token = "wrong" }:put(s[1])
            S.fails("^ExporterError: HTTP 403", st0, err0)
            -- a garbage body: 400 SchemaViolation
            a = assert(raw_put(url, s[1], auth, "not a slice at all"))
            assert.equal(400, a.status)
            assert.equal("SchemaViolation", a.headers["x-ron-error"])
            assert.matches('"error":"SchemaViolation"', a.body)
            -- a truncated body
            a = assert(raw_put(url, s[1], auth, s[1]:encode():sub(1, -2)))
            assert.equal(400, a.status)
            assert.equal("SchemaViolation", a.headers["x-ron-error"])
            -- the path names another slice
            a = assert(httpc.request { method = "PUT", body = s[1]:encode(),
                url = ("%s/%s/bytes/2"):format(url, TA), headers = with {
                    ["Content-Type"] = "application/octet-stream", ["X-Ron-B3"] = s[1].b3 } })
            assert.equal(400, a.status)
            assert.equal("InvalidArgument", a.headers["x-ron-error"])
            -- the digest header: missing, wrong
            a = assert(raw_put(url, s[1], with { ["X-Ron-B3"] = false }))
            assert.equal(400, a.status)
            assert.matches("X%-Ron%-B3", a.body)
            a = assert(raw_put(url, s[1], with { ["X-Ron-B3"] = s[2].b3 }))
            assert.equal(400, a.status)
            a = assert(raw_put(url, s[1], with { ["X-Ron-Prev-B3"] = s[2].b3 }))
            assert.equal(400, a.status)
            a = assert(raw_put(url, s[1], with { ["Idempotency-Key"] = "x" }))
            assert.equal(400, a.status)
            -- content type
            a = assert(raw_put(url, s[1], with { ["Content-Type"] = "application/json" }))
            assert.equal(415, a.status)
            -- outside the layout
            a = assert(httpc.request { method = "PUT", url = url .. "/x", body = "",
                                       headers = with {} })
            assert.equal(404, a.status)
            a = assert(httpc.request { method = "PUT", url = url .. "/NOT-A-UUID/bytes/1",
                                       body = "", headers = with {} })
            assert.equal(400, a.status)
            -- over max_body (1 MiB): 413 from the server, before the body is read
            a = assert(httpc.request { method = "PUT", body = string.rep("z", 1048577),
                url = ("%s/%s/bytes/1"):format(url, TA), headers = with {
                    ["Content-Type"] = "application/octet-stream" } })
            assert.equal(413, a.status)
            -- and the right request still works
            a = assert(raw_put(url, s[1], auth))
            assert.equal(201, a.status)
            assert.equal("ok", a.headers["x-ron-status"])
            assert.equal(s[1].b3, a.headers["x-ron-b3"])
            local e = exp_http.new { url = url, token = "other" }
            assert.equal("ok", (e:put(s[2])))
            assert.same({ seq = 2, b3 = s[2].b3 }, e:head(TA, "bytes"))
            local st = r:stats()
            assert.equal(1, st.rejected.unauthorized)
            assert.equal(2, st.rejected.forbidden)
            assert.equal(2, st.rejected.schema_violation)
            assert.equal(6, st.rejected.bad_request)
            assert.equal(1, st.rejected.unsupported_media_type)
            assert.equal(1, st.rejected.not_found)
            assert.equal(2, st.ok)
            assert.truthy(r:metrics_text():find(
                'accounting_receiver_rejected_total{reason="schema_violation"} 2', 1, true))
            stop_receiver(srv, r, meter)
            assert.is_true(eventually(task, function() return (curl.live()) == 0 end, 2000))
        end)
        no_leaks()
    end)

    it("a token bound to tenant A cannot write or read tenant B's streams: 403 "
       .. "forbidden_tenant, counted, logged, nothing stored, so a forged seq 1 cannot pre-empt "
       .. "B's chain (issue 14 item 5)", function()
        local a1 = chain(1, 0, TA)[1]
        local b1 = chain(1, 100, TB)[1] -- what the holder of A's token forges for B
        run(function(task)
            local lines = {}
            local srv, r, url, d, meter = start_receiver {
                producers = { ["node-a"] = { token_hash = receiver.token_hash("token-a"),
                                             tenants = { TA } },
                              ["node-b"] = { token_hash = receiver.token_hash("token-b"),
                                             tenants = { TB } },
                              agg = { token_hash = receiver.token_hash("token-agg"),
                                      tenants = "*" } },
                log = function(line) lines[#lines + 1] = line end }
            local function auth(t) return { Authorization = "Bearer " .. t } end
            local a = assert(raw_put(url, b1, auth("token-a")))
            assert.equal(403, a.status)
            assert.equal("Forbidden", a.headers["x-ron-error"])
            assert.truthy(a.body:find("producer node-a may not write tenant " .. TB, 1, true))
            a = assert(httpc.request { method = "GET", headers = auth("token-a"),
                                       url = ("%s/%s/bytes/head"):format(url, TB) })
            assert.equal(403, a.status)
            -- no token: 401 with the scheme, on a stream request as on a PUT (one admission)
            a = assert(httpc.request { method = "GET", url = ("%s/%s/bytes/head"):format(url, TA) })
            assert.equal(401, a.status)
            assert.equal('Bearer realm="ron-accounting"', a.headers["www-authenticate"])
            -- the exporter of node A sees a local failure (a misconfiguration), not a retry
            local st, err = exp_http.new { url = url, token = "token-a" }:put(b1)
            S.fails("^ExporterError: HTTP 403", st, err)
            -- the real producers write their own streams
            assert.equal(201, assert(raw_put(url, a1, auth("token-a"))).status)
            local real_b1 = chain(1, 7, TB)[1]
            assert.equal(201, assert(raw_put(url, real_b1, auth("token-b"))).status)
            -- "*": an aggregator may write any tenant (a replay here: dup)
            assert.equal(200, assert(raw_put(url, real_b1, auth("token-agg"))).status)
            local stats = r:stats()
            assert.equal(3, stats.rejected.forbidden_tenant)
            assert.equal(2, stats.ok)
            assert.truthy(r:metrics_text():find(
                'accounting_receiver_rejected_total{reason="forbidden_tenant"} 3', 1, true))
            assert.truthy(lines[1]:find("reject forbidden_tenant (1 so far): tenant=" .. TB, 1,
                                        true), lines[1])
            stop_receiver(srv, r, meter)
            -- B's chain starts from B's own seq 1, not the forgery
            local be = assert(file.new { dir = d })
            assert.same({ seq = 1, b3 = real_b1.b3 }, be:head(TB, "bytes"))
            be:close()
            assert.is_true(eventually(task, function() return (curl.live()) == 0 end, 2000))
        end)
        no_leaks()
    end)

    it("accept_loss over HTTP (issue 14 item 1): the producer's exporter asks, the receiver's "
       .. "backend records the given-up seqs, only for a tenant the token may write", function()
        local c = chain(4)
        local dir
        run(function(task)
            local lines = {}
            local srv, r, url, d, meter = start_receiver {
                producers = { ["node-a"] = { token_hash = receiver.token_hash("token-a"),
                                             tenants = { TA } } },
                log = function(line) lines[#lines + 1] = line end }
            dir = d
            local e = exp_http.new { url = url, token = "token-a" }
            assert.equal("ok", (e:put(c[1])))
            assert.equal("gap", (e:put(c[4])))
            -- another tenant's stream: refused (403, not a loss of A's)
            local x, xerr = e:accept_loss { tenant = TB, dimension = "bytes", through_seq = 3,
                                            link_b3 = c[4].prev_b3 }
            assert.is_nil(x)
            assert.truthy(xerr:find("HTTP 403", 1, true), xerr)
            -- nothing missing: 409 InvalidArgument (the runtime's admin route answers 409)
            x, xerr = e:accept_loss { tenant = TA, dimension = "bytes", through_seq = 1,
                                      link_b3 = c[2].prev_b3 }
            assert.is_nil(x)
            assert.truthy(xerr:find("^InvalidArgument: accept%-loss: HTTP 409"), xerr)
            local got = assert(e:accept_loss { tenant = TA, dimension = "bytes", through_seq = 3,
                                                link_b3 = c[4].prev_b3, reason = "wal lost" })
            assert.same({ from = 2, to = 3 }, got)
            assert.equal("ok", (e:put(c[4])))
            local logged = false
            for _, l in ipairs(lines) do
                logged = logged or l:find("LOSS ACCEPTED by producer node-a: " .. TA
                                          .. "/bytes seqs 2..3 (wal lost)", 1, true) ~= nil
            end
            assert.is_true(logged, table.concat(lines, "\n"))
            stop_receiver(srv, r, meter)
            assert.is_true(eventually(task, function() return (curl.live()) == 0 end, 2000))
        end)
        no_leaks()
        local rc, out = S.verify(dir)
        assert.equal(0, rc, out)
    end)

    it("without producers, only allow_unauthenticated = true starts a receiver, and it says "
       .. "so on its log", function()
        run(function()
            local lines = {}
            local be = { put = function() return "ok" end, close = function() end }
            local r = receiver.new { backend = be, allow_unauthenticated = true,
                                     log = function(line) lines[#lines + 1] = line end }
            assert.matches("^NO AUTHENTICATION %(allow_unauthenticated = true%)", lines[1])
            r:close()
            assert.has_error(function() receiver.new { backend = be } end)
        end)
    end)

    it("backend failures and a full queue answer 5xx: the exporter retries", function()
        local s = chain(1)[1]
        run(function(task)
            local mode = "retry_network"
            local gate = task.channel(16, "spec_gate")
            local backend = {
                put = function(_, sl)
                    if mode == "block" then gate:recv() return "ok" end
                    if mode == "io" then return nil, "IoError: disk on fire" end
                    if mode == "full" then return nil, "PersistenceFull: ENOSPC" end
                    if mode == "raise" then error("backend bug") end
                    return mode, "from the backend " .. sl.dimension
                end,
                head = function() return nil, "IoError: no head today" end,
                close = function() end,
            }
            local srv, r, url, _, meter = start_receiver { backend = backend, workers = 1,
                                                           queue_cap = 1 }
            local e = exp_http.new { url = url, timeout_ms = 5000 }
            assert.equal("retry_remote_5xx", (e:put(s))) -- 503
            mode = "retry_timeout"
            local a = assert(raw_put(url, s))
            assert.equal(504, a.status)
            assert.equal("1", a.headers["retry-after"])
            assert.equal("retry_remote_5xx", (e:put(s)))
            for _, m in ipairs { "io", "raise" } do
                mode = m
                a = assert(raw_put(url, s))
                assert.equal(500, a.status)
                assert.equal("retry_remote_5xx", (e:put(s)))
            end
            mode = "full"
            a = assert(raw_put(url, s))
            assert.equal(507, a.status)
            assert.equal("PersistenceFull", a.headers["x-ron-error"])
            local _, herr = e:head(TA, "bytes")
            assert.matches("HTTP 503", herr)
            -- a full queue: one put blocked in the worker, one queued, the third refused
            mode = "block"
            local answers = {}
            for i = 1, 3 do
                task.spawn("spec_put-" .. i, function()
                    local st, err = e:put(s)
                    answers[#answers + 1] = st or ("nil, " .. tostring(err))
                end)
            end
            assert.is_true(eventually(task, function() return #answers == 1 end, 5000))
            assert.equal("retry_remote_5xx", answers[1])
            assert.equal(1, r:stats().rejected.busy)
            gate:try_send(true)
            gate:try_send(true)
            assert.is_true(eventually(task, function() return #answers == 3 end, 5000))
            assert.same({ "retry_remote_5xx", "ok", "ok" }, answers)
            assert.equal(5, r:stats().fail) -- io, raise (raw and exporter), full
            stop_receiver(srv, r, meter)
        end)
        no_leaks()
    end)

    it("G-16 over HTTP: two exporters race on the same streams; one chain, the rest dup",
       function()
        local a, b = chain(6, 0, TA), chain(6, 0, TB)
        local dir
        run(function(task)
            local srv, r, url, d, meter = start_receiver { workers = 4 }
            dir = d
            local results = { ok = 0, dup = 0 }
            local hs = {}
            for x = 1, 2 do
                hs[#hs + 1] = task.spawn("racer-" .. x, function()
                    local e = exp_http.new { url = url }
                    for i = 1, 6 do
                        for _, c in ipairs { a, b } do
                            local st = e:put(c[i])
                            assert(st == "ok" or st == "dup", st)
                            results[st] = results[st] + 1
                        end
                    end
                end)
            end
            for _, h in ipairs(hs) do assert(h:join()) end
            assert.equal(12, results.ok)
            assert.equal(12, results.dup)
            stop_receiver(srv, r, meter)
        end)
        no_leaks()
        assert.equal(0, (S.verify(dir)))
        local ledger = assert(file.new { dir = dir })
        assert.equal(a[6].b3, ledger:head(TA, "bytes").b3)
        assert.equal(b[6].b3, ledger:head(TB, "bytes").b3)
    end)

    it("the export runtime end to end over HTTP: every slice once, in order", function()
        local clock = S.clock(T0 + 5)
        local m = assert(acct.open(S.cfg { clock = clock.fn, wal = { dir = S.tmpname(".wal") } }))
        local dir, rt, e
        run(function(task)
            local srv, r, url, d, meter = start_receiver()
            dir = d
            e = exp_http.new { url = url }
            rt = runtime.start { meter = m, exporter = e, tick_ms = 5,
                                 backoff = backoff.exponential.new { base_ms = 5, cap_ms = 50,
                                                                     seed = 1 } }
            for w = 1, 4 do
                S.rt_window(m, clock, w)
                assert.is_true(eventually(task, function()
                    return rt.exports.ok == 3 * w and #m:pending() == 0 end, 10000))
            end
            S.rt_stop(rt)
            assert.equal(12, r:stats().ok)
            stop_receiver(srv, r, meter)
        end)
        no_leaks()
        m:close()
        assert.equal(12, e:stats().ok)
        assert.equal(0, (S.verify(dir)))
        for _, t in ipairs { S.TENANT_A, S.TENANT_B, S.TENANT_C } do
            assert.equal(4, assert(file.new { dir = dir }):head(t, "bytes").seq)
        end
    end)
end)
