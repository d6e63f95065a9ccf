-- ron.base.net.http_server (host/lua/httpd.c) and ron.node.http (the
-- daemon's routes), on the host's loop (ctest lua-http-host: `ron-accounting run
-- spec/run-busted.lua spec/ron/node/http_spec.lua`). Each case runs as a task
-- (S.run_task) and talks to a server on port 0 with a small luv TCP client (raw HTTP/1.1,
-- Connection: close): never a blocking client, which would block the very loop the server runs
-- on. Under plain busted (no host) the C module does not exist: the cases are pending.
local S = require("support")

if not S.needs_host("ron.base.net.http_server", "lua-http-host") then return end

local httpd = require("ron.base.net.http_server")
local http = require("ron.node.http")

local run = S.run_task

local request = S.http_request

local function get(task, port, path, method, extra)
    return request(task, port, (method or "GET") .. " " .. path .. " HTTP/1.1\r\n" ..
        "Host: 127.0.0.1\r\nConnection: close\r\n" .. (extra or "") .. "\r\n")
end

local function post(task, port, path, body, extra)
    return get(task, port, path, "POST",
               "Content-Length: " .. #body .. "\r\n" .. (extra or "") .. "\r\n" .. body)
end

-- A server whose handler hands each request (but the paths in sync, answered at once) to
-- the returned channel, to be answered later (req:respond). -> srv, port, the channel
local function deferring(task, sync)
    local got = task.channel(4, "http_spec_reqs")
    local srv = assert(httpd.listen { port = 0, handler = function(req)
        if sync and sync[req.path] then return 200, sync[req.path] end
        assert(got:try_send(req))
    end })
    return srv, srv:port(), got
end

-- S.run_task: body(task, srv, port, got) on a deferring server (sync as there).
local function on_deferring(sync, body)
    run(function(task) body(task, deferring(task, sync)) end)
end

-- Spawns task name: it takes the next request deferring's channel got holds and hands it
-- to fn(req). -> the task
local function answer_next(task, got, name, fn)
    return task.spawn(name, function() fn(assert(got:recv(10000))) end)
end

describe("ron.base.net.http_server", function()
    it("serves a synchronous handler: method, path, query, headers, body (200)", function()
        run(function(task)
            local seen
            local srv = assert(httpd.listen { port = 0, handler = function(req)
                seen = { method = req.method, path = req.path, query = req.query,
                         h = req.headers["x-test"], host = req.headers.host, body = req.body }
                return 200, "hello " .. req.body, "text/plain", { ["X-Extra"] = "yes" }
            end })
            local port = srv:port()
            assert.is_true(port > 0)
            local st, hs, body = request(task, port,
                "POST /a/b?x=1&y=2 HTTP/1.1\r\nHost: h\r\nX-Test: one\r\nConnection: close\r\n" ..
                "Content-Length: 5\r\n\r\nworld")
            assert.equal(200, st)
            assert.equal("hello world", body)
            assert.equal("yes", hs["x-extra"])
            assert.equal("text/plain", hs["content-type"])
            assert.same({ method = "POST", path = "/a/b", query = "x=1&y=2", h = "one",
                          host = "h", body = "world" }, seen)
            st, hs, body = get(task, port, "/plain")
            assert.equal(200, st)
            assert.equal("hello ", body)
            assert.is_nil(seen.query)
            srv:close()
        end)
    end)

    it("a handler error is a 500 with a short body; the server keeps serving", function()
        run(function(task)
            local n = 0
            local srv = assert(httpd.listen { port = 0, handler = function(req)
                n = n + 1
                if req.path == "/boom" then error("intentional handler failure") end
                if req.path == "/bad" then return "not a status" end
                return 200, "fine"
            end })
            local st, _, body = get(task, srv:port(), "/boom")
            assert.equal(500, st)
            assert.equal("internal server error\n", body)
            st = get(task, srv:port(), "/bad")
            assert.equal(500, st)
            st, _, body = get(task, srv:port(), "/ok")
            assert.equal(200, st)
            assert.equal("fine", body)
            assert.equal(3, n)
            srv:close()
        end)
    end)

    it("a body over max_body is a 413 without the body being read (h2o)", function()
        run(function(task)
            local called = false
            local srv = assert(httpd.listen { port = 0, max_body = 16, handler = function()
                called = true
                return 200, "no"
            end })
            -- 100 MB announced, 10 bytes sent: h2o answers from the header alone.
            local st = request(task, srv:port(),
                "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 100000000\r\n\r\n0123456789")
            assert.equal(413, st)
            st = post(task, srv:port(), "/x", string.rep("a", 17))
            assert.equal(413, st)
            assert.is_false(called)
            st = post(task, srv:port(), "/x", string.rep("a", 16))
            assert.equal(200, st)
            srv:close()
        end)
    end)

    it("async: the handler returns nothing and answers later with req:respond", function()
        on_deferring(nil, function(task, srv, port, got)
            local responder = answer_next(task, got, "http_spec_responder", function(req)
                assert.is_true(req:alive())
                -- the field reads' check (its metatable, held by __index): another userdata
                -- or a table is refused by name, whatever it holds
                local index = getmetatable(req).__index
                assert.equal("/slow", index(req, "path"))
                for _, v in ipairs { io.stdout, {} } do
                    local ok, err = pcall(index, v, "path")
                    assert.is_false(ok)
                    assert.matches("http_server.req expected", err, 1, true)
                end
                task.sleep(10) -- the answer comes from another task, later
                assert.is_true(req:respond(201, "later", "text/plain", { ["X-Async"] = "1" }))
                assert.has_error(function() req:respond(200, "twice") end)
            end)
            local st, hs, body = get(task, port, "/slow")
            assert.equal(201, st)
            assert.equal("later", body)
            assert.equal("1", hs["x-async"])
            assert(responder:join(10000))
            srv:close()
        end)
    end)

    it("a client that closed before the async answer: answered all the same (it cannot be "
       .. "told from a half-close), the server keeps serving", function()
        -- (a client that resets is gone: http_hardening_spec.lua)
        on_deferring({ ["/next"] = "still serving" }, function(task, srv, port, got)
            assert(request(task, port, "GET /gone HTTP/1.1\r\nHost: h\r\n\r\n",
                           { close_after_send = true }))
            local req = assert(got:recv(10000))
            task.sleep(20)
            assert.is_boolean(req:respond(200, "nobody listens"))
            assert.has_error(function() req:respond(200, "twice") end)
            local st, _, body = get(task, port, "/next") -- the server is fine
            assert.equal(200, st)
            assert.equal("still serving", body)
            srv:close()
        end)
    end)

    it("close answers 503 to waiting requests; afterwards connections are refused", function()
        on_deferring(nil, function(task, srv, port, got)
            local closer = answer_next(task, got, "http_spec_closer", function(req)
                srv:close()
                assert.is_false(req:alive())
                assert.is_false(req:respond(200, "too late"))
                srv:close() -- idempotent
            end)
            local st = get(task, port, "/wait")
            assert.equal(503, st)
            assert(closer:join(10000))
            local ok, err = get(task, port, "/after")
            assert.is_nil(ok)
            assert.truthy(tostring(err):find("ECONNREFUSED", 1, true))
            assert.has_error(function() srv:port() end)
        end)
    end)

    it("bad binds return nil and one clear message; misuse raises", function()
        run(function()
            local srv = assert(httpd.listen { port = 0, handler = function() end })
            local again, err = httpd.listen { port = srv:port(), handler = function() end }
            assert.is_nil(again)
            assert.truthy(err:find("cannot listen on 127.0.0.1:" .. srv:port(), 1, true))
            assert.truthy(err:find("EADDRINUSE", 1, true))
            again, err = httpd.listen { host = "not-an-address", port = 0,
                                        handler = function() end }
            assert.is_nil(again)
            assert.truthy(err:find("not a numeric IPv4 or IPv6 address", 1, true))
            again, err = httpd.listen { host = "192.0.2.1", port = 0, handler = function() end }
            assert.is_nil(again) -- TEST-NET-1: not an address of this host
            assert.truthy(err:find("EADDRNOTAVAIL", 1, true))
            assert.has_error(function() httpd.listen { port = 0 } end)
            assert.has_error(function() httpd.listen { port = 70000, handler = print } end)
            assert.has_error(function() httpd.listen { prot = 0, handler = print } end)
            srv:close()
        end)
    end)
end)

describe("ron.node.http", function()
    local META = "# HELP accounting_rejected_total Records refused.\n" ..
                 "# TYPE accounting_rejected_total counter\n" ..
                 'accounting_rejected_total{reason="capacity"} 0\n' ..
                 "# HELP accounting_degraded 1 while degraded.\n" ..
                 "# TYPE accounting_degraded gauge\naccounting_degraded 0\n"
    local RT_TEXT = "# HELP accounting_rejected_total Slices shed.\n" ..
                    "# TYPE accounting_rejected_total counter\n" ..
                    'accounting_rejected_total{reason="busy"} 2\n' ..
                    "# HELP ron_tasks_live Tasks.\n# TYPE ron_tasks_live gauge\nron_tasks_live 3\n"

    it("merge_exposition: one HELP/TYPE per family, samples kept together", function()
        local out = http.merge_exposition { META, RT_TEXT }
        local _, helps = out:gsub("# HELP accounting_rejected_total", "")
        assert.equal(1, helps)
        assert.truthy(out:find('accounting_rejected_total{reason="capacity"} 0\n' ..
                               'accounting_rejected_total{reason="busy"} 2\n', 1, true))
        assert.truthy(out:find("ron_tasks_live 3\n", 1, true))
        -- histogram samples stay with their family
        local h = http.merge_exposition { "# TYPE a histogram\na_bucket{le=\"1\"} 1\n" ..
                                          "a_sum 1\na_count 1\n# TYPE b gauge\nb 1\n" }
        assert.equal('# TYPE a histogram\na_bucket{le="1"} 1\na_sum 1\na_count 1\n' ..
                     "# TYPE b gauge\nb 1\n", h)
    end)

    it("routes: /metrics, /healthz, /readyz (200 and 503), 404, 405", function()
        run(function(task)
            local ready, reasons = true, {}
            local meter = { metrics = function() return META end }
            local rt = { metrics_text = function() return RT_TEXT end,
                         ready = function() return ready, reasons end }
            local srv = assert(http.serve { meter = meter, runtime = rt, port = 0 })
            local port = srv:port()
            local st, hs, body = get(task, port, "/metrics")
            assert.equal(200, st)
            assert.equal("text/plain; version=0.0.4; charset=utf-8", hs["content-type"])
            -- then the server's own connection families (accounting_http_*)
            local want = http.merge_exposition { META, RT_TEXT }
            assert.equal(want, body:sub(1, #want))
            assert.truthy(body:find("\n# TYPE accounting_http_connections gauge\n", 1, true))
            st, hs, body = get(task, port, "/healthz")
            assert.equal(200, st)
            assert.equal("ok\n", body)
            st, hs, body = get(task, port, "/readyz")
            assert.equal(200, st)
            assert.equal("ready\n", body)
            ready, reasons = false, { "stopping", "backlog p95 12 > 10" }
            st, hs, body = get(task, port, "/readyz")
            assert.equal(503, st)
            assert.equal("stopping\nbacklog p95 12 > 10\n", body)
            st = get(task, port, "/nope")
            assert.equal(404, st)
            st, hs = get(task, port, "/metrics", "DELETE")
            assert.equal(405, st)
            assert.equal("GET, HEAD", hs.allow)
            st, hs, body = get(task, port, "/metrics", "HEAD")
            assert.equal(200, st)
            assert.equal("", body)
            srv:close()
        end)
    end)

    it("status_page: GET / renders it from /metrics' exposition; 404 without one", function()
        run(function(task)
            local meter = { metrics = function() return META end }
            local rt = { metrics_text = function() return RT_TEXT end,
                         ready = function() return false, { "starting" } end }
            local seen
            local page = { render = function(_, text, ready, reasons)
                seen = { text = text, ready = ready, reasons = reasons }
                return "<!DOCTYPE html><p>page</p>\n"
            end }
            local srv = assert(http.serve { meter = meter, runtime = rt, port = 0,
                                            status_page = page })
            local st, hs, body = get(task, srv:port(), "/")
            assert.equal(200, st)
            assert.equal("<!DOCTYPE html><p>page</p>\n", body)
            assert.equal("text/html; charset=utf-8", hs["content-type"])
            assert.matches("default-src 'none'", hs["content-security-policy"], 1, true)
            assert.equal("no-store", hs["cache-control"])
            -- the very exposition /metrics serves, and /readyz's answer
            local want = http.merge_exposition { META, RT_TEXT }
            assert.equal(want, seen.text:sub(1, #want))
            assert.is_false(seen.ready)
            assert.same({ "starting" }, seen.reasons)
            st = get(task, srv:port(), "/", "POST")
            assert.equal(405, st)
            srv:close()
            srv = assert(http.serve { meter = meter, runtime = rt, port = 0 })
            st = get(task, srv:port(), "/")
            assert.equal(404, st)
            srv:close()
        end)
    end)

    it("extra routes: method + path pattern, first match wins, 405 for another method,"
       .. " async answers; built-in routes still served", function()
        run(function(task)
            local seen = {}
            local srv = assert(http.serve {
                meter = { metrics = function() return META end }, port = 0,
                routes = {
                    { method = "POST", path = "^/v1/records$", handler = function(req)
                        seen[#seen + 1] = req.body
                        return 202, "accepted " .. #req.body .. "\n"
                    end },
                    { method = "PUT", path = "^/v1/slices/", handler = function(req)
                        task.spawn("late_answer", function()
                            task.sleep(5)
                            req:respond(201, "stored " .. req.path .. "\n")
                        end)
                    end },
                } })
            local port = srv:port()
            local st, _, body = post(task, port, "/v1/records", "abc")
            assert.equal(202, st)
            assert.equal("accepted 3\n", body)
            assert.same({ "abc" }, seen)
            st, _, body = get(task, port, "/v1/slices/t/bytes/7", "PUT",
                              "Content-Length: 0\r\n")
            assert.equal(201, st)
            assert.equal("stored /v1/slices/t/bytes/7\n", body)
            local hs
            st, hs = get(task, port, "/v1/records")
            assert.equal(405, st)
            assert.equal("POST", hs.allow)
            st = get(task, port, "/v1/other")
            assert.equal(404, st)
            st = get(task, port, "/healthz")
            assert.equal(200, st)
            srv:close()
            assert.has_error(function()
                http.serve { meter = {}, port = 0, routes = { { method = "GET" } } }
            end, "http.serve: routes[1] needs method, path (a Lua pattern) and handler")
        end)
    end)

    it("a route's handler gets its pattern's first capture; each path's routing is "
       .. "remembered, at most ROUTED_MAX paths, the same answers", function()
        run(function(task)
            local saved = http.ROUTED_MAX
            http.ROUTED_MAX = 2
            local ok, err = pcall(function()
                local srv = assert(http.serve {
                    meter = { metrics = function() return META end }, port = 0,
                    routes = {
                        { method = "GET", path = "^/v1/n/(%d+)$", handler = function(_, cap)
                            return 200, "n " .. tostring(cap) .. "\n"
                        end },
                        { method = "POST", path = "^/v1/n/%d+$", handler = function(_, cap)
                            return 201, "whole " .. tostring(cap) .. "\n"
                        end } } })
                local port = srv:port()
                for _ = 1, 2 do -- (5 paths through a memo of 2: emptied, filled again)
                    for i = 1, 5 do
                        local st, _, body = get(task, port, "/v1/n/" .. i)
                        assert.equal(200, st)
                        assert.equal("n " .. i .. "\n", body)
                        st, _, body = post(task, port, "/v1/n/" .. i, "")
                        assert.equal(201, st)
                        assert.equal("whole /v1/n/" .. i .. "\n", body)
                        local hs
                        st, hs = get(task, port, "/v1/n/" .. i, "PUT", "Content-Length: 0\r\n")
                        assert.equal(405, st)
                        assert.equal("GET, POST", hs.allow)
                    end
                    assert.equal(404, (get(task, port, "/v1/n/x")))
                end
                srv:close()
            end)
            http.ROUTED_MAX = saved
            assert(ok, err)
        end)
    end)

    it("literal_ends: every path a route's pattern matches starts and ends with them "
       .. "(fixed seed)", function()
        local pats = { "^/v1/records$", "^/v1/accounts/([%x%-]+)/balance$", "^/v1/slices/",
                       "^/v1/foo-bar$", "%d$", "x%.y$", "^/a/b?c$", "^$", "a*bc$", "^/v1/%a+$",
                       "^/v[12]/x$", "^/p%%q$", "^(/v1)/z$", "^/a.b$", "^/ab*c/d+$" }
        local want = { ["^/v1/accounts/([%x%-]+)/balance$"] = { "/v1/accounts/", "/balance" },
                       ["^/v1/foo-bar$"] = { "/v1/fo", "bar" }, ["^/a/b?c$"] = { "/a/", "c" },
                       ["%d$"] = { "", "" }, ["^/p%%q$"] = { "/p", "" } }
        for p, e in pairs(want) do assert.same(e, { http.literal_ends(p) }, p) end
        -- the property: a path a pattern matches never fails its ends (random paths from
        -- the patterns' own characters, and the patterns' own literal examples)
        local seed = 2025
        print("http_spec literal_ends: math.randomseed(" .. seed .. ")")
        math.randomseed(seed)
        local alphabet = "/v12accounts-balnceordsfb.xyzpq%0123456789abcdef"
        local paths = { "/v1/records", "/v1/accounts/6f1e3c52-7d0b-4b8e-9a51-0c2f4e8d9a10/balance",
                        "/v1/slices/t/7", "/v1/fbar", "/v1/foobar", "/v1/fooobar", "/a/c",
                        "/a/bc", "", "bc", "abc", "aabc", "/v1/x", "/v2/x", "/p%q", "/v1/z",
                        "/a-b", "/ac/dd", "/abbc/d", "x.y", "xzy", "9" }
        for _ = 1, 20000 do
            local t = {}
            for i = 1, math.random(0, 12) do
                local k = math.random(#alphabet)
                t[i] = alphabet:sub(k, k)
            end
            paths[#paths + 1] = table.concat(t)
        end
        local hits = 0
        for _, p in ipairs(pats) do
            local pre, suf = http.literal_ends(p)
            for _, path in ipairs(paths) do
                if path:match(p) then
                    hits = hits + 1
                    assert.equal(pre, path:sub(1, #pre), p .. " on " .. path)
                    if suf ~= "" then assert.equal(suf, path:sub(-#suf), p .. " on " .. path) end
                end
            end
        end
        assert.is_true(hits > 40, "only " .. hits .. " matches to check")
    end)

    it("without a runtime: ready; loopback by default; unknown options raise", function()
        run(function(task)
            local srv = assert(http.serve { meter = { metrics = function() return META end },
                                            port = 0 })
            local st, _, body = get(task, srv:port(), "/readyz")
            assert.equal(200, st)
            assert.equal("ready\n", body)
            st, _, body = get(task, srv:port(), "/metrics")
            assert.equal(200, st)
            assert.equal(META, body:sub(1, #META))
            assert.truthy(body:find("accounting_http_header_timeouts_total 0\n", 1, true))
            srv:close()
            assert.is_true(http.is_loopback("127.0.0.1"))
            assert.is_true(http.is_loopback("::1"))
            assert.is_false(http.is_loopback("0.0.0.0"))
            assert.has_error(function() http.serve { meter = {}, prot = 1 } end)
            assert.has_error(function() http.serve { port = 0 } end)
        end)
    end)
end)
