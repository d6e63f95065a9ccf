-- The wallet's HTTP answers keep their promises (issue 24 §3; ctest lua-wallet-host): every
-- error on a wallet path is application/problem+json with its documented code, including
-- the answers the HTTP server makes itself — no route (404), another method (405 + Allow),
-- a body over the limit (413, declared or sent), a head over the limit or with too many
-- lines (431), a control byte in Authorization (401, as an unknown token: H2O's parser
-- answered a text/plain 400), a connection in the loopback reserve (503) — and a string
-- that is not Unicode text is bad_string. Paths that are not the wallet's keep the
-- daemon's plain answers.
local S = require("support")

if not S.needs_host("ron.wallet HTTP answers", "lua-wallet-host") then return end

local uv = require("luv")
local cjson = require("cjson.safe")
local F = dofile(S.root .. "spec/ron/wallet/fixture.lua")

local OP, TA, A, B = F.OP, F.TA, F.A, F.B
local PROBLEM = "application/problem+json"
local _ -- results a case does not read

local function raw(task, port, head, body)
    return S.http_request(task, port, head .. "\r\n" .. (body or ""), 10000)
end

-- st, h, body must be the problem code with status.
local function problem(st, h, body, status, code)
    assert.equal(status, st, body)
    assert.equal(PROBLEM, h["content-type"], body)
    local p = assert(cjson.decode(body), body)
    assert.equal(code, p.code, body)
    assert.equal(status, p.status)
    assert.equal("urn:ron-wallet:problem:" .. code, p.type)
end

local function transfer_head(extra, len)
    return "POST /v1/transfer HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" ..
           "Content-Type: application/json\r\nAuthorization: Bearer " .. TA .. "\r\n" ..
           "Idempotency-Key: h1\r\nContent-Length: " .. len .. "\r\n" .. (extra or "")
end

describe("ron.wallet HTTP answers (issue 24 §3)", function()
    it("404, 405 with Allow, 413 (declared and sent) are problems on the wallet's paths",
       F.fresh(function(task, ctx, port)
        for _, path in ipairs { "/v1/accounts/" .. A .. "/nothing", "/v1/issue/x",
                                "/v1/accounts/not-a-uuid/balance?asset=USD",
                                "/v1/transfer/" } do
            local st, h, body = S.http_get(task, port, path, TA)
            problem(st, h, body, 404, "not_found")
        end
        local st, h, body = S.http_get(task, port, "/v1/transfer", TA)
        problem(st, h, body, 405, "method_not_allowed")
        assert.equal("POST", h["allow"])
        st, h, body = raw(task, port, "DELETE /v1/accounts/" .. A ..
                          "/balance HTTP/1.1\r\nHost: x\r\nConnection: close\r\n")
        problem(st, h, body, 405, "method_not_allowed")
        assert.equal("GET", h["allow"])
        -- declared over 1 MiB: refused from the head, before the body
        st, h, body = raw(task, port, transfer_head(nil, 2000000))
        problem(st, h, body, 413, "oversize")
        -- sent: 1 MiB + 1 bytes (the server's own check after reading)
        st, h, body = raw(task, port, transfer_head(nil, 1048577), string.rep(" ", 1048577))
        problem(st, h, body, 413, "oversize")
        -- not the wallet's paths: the daemon's plain answers
        st, h = S.http_get(task, port, "/nothing")
        assert.equal(404, st)
        assert.truthy(h["content-type"]:find("text/plain", 1, true))
        local m = ctx.w:metrics_text()
        assert.truthy(m:find('wallet_requests_total{code="404"} 4', 1, true), m)
    end))

    it("a garbled Authorization is 401; a head over 16 KiB or 100 lines is 431",
       F.fresh(function(task, ctx, port)
        local body = F.transfer(A, B, 1, 1)
        for _, auth in ipairs { "Bearer \1abc", "Bearer a\rb", "Bearer \127", "\0" } do
            local st, h, b = raw(task, port,
                "POST /v1/transfer HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" ..
                "Content-Type: application/json\r\nAuthorization: " .. auth .. "\r\n" ..
                "Idempotency-Key: g1\r\nContent-Length: " .. #body .. "\r\n", body)
            problem(st, h, b, 401, "bad_token")
            assert.truthy(h["www-authenticate"]:find("invalid_token", 1, true))
        end
        -- the same on a read (and a bearer token with bytes H2O takes: our own 401)
        local st, h, b = raw(task, port, "GET /v1/accounts/" .. A .. "/balance?asset=USD " ..
                             "HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" ..
                             "Authorization: Bearer \255\254\r\n")
        problem(st, h, b, 401, "bad_token")
        -- 200 KiB of one header (H2O alone took it), 20 KiB, 101 header lines: 431
        for _, extra in ipairs { "X-Big: " .. string.rep("a", 200 * 1024) .. "\r\n",
                                 "X-Big: " .. string.rep("a", 20 * 1024) .. "\r\n" } do
            st, h, b = raw(task, port, transfer_head(extra, #body), body)
            problem(st, h, b, 431, "headers_too_large")
        end
        local lines = {}
        for i = 1, 101 do lines[i] = "X-" .. i .. ": v\r\n" end
        st, h, b = raw(task, port, transfer_head(table.concat(lines), #body), body)
        problem(st, h, b, 431, "headers_too_large")
        -- not a wallet path: the same limit, the server's plain text
        st, h = raw(task, port, "GET /nothing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" ..
                    "X-Big: " .. string.rep("a", 20 * 1024) .. "\r\n")
        assert.equal(431, st)
        assert.truthy(h["content-type"]:find("text/plain", 1, true))
        -- a header line H2O cannot parse: 400 bad_request, a problem too
        st, h, b = raw(task, port, transfer_head("Bad Name: x\r\n", #body), body)
        problem(st, h, b, 400, "bad_request")
        -- nothing of these reached the ledger; a good request still commits
        assert.equal(0, ctx.w.m.commits)
        assert.equal(201, (S.http_post(task, port, "/v1/issue", OP, F.issue(A, 5, 1), "i")))
        -- a head just under the limit is served
        st, _, b = raw(task, port, transfer_head("X-Big: " .. string.rep("a", 15 * 1024) ..
                                                 "\r\n", #body), body)
        assert.equal(201, st, b)
    end))

    it("a string that is not Unicode text is bad_string, not malformed_json",
       F.fresh(function(task, ctx, port)
        for _, memo in ipairs { "\\ud800", "x\\udc00", "\255", "\237\160\128" } do
            local body = '{"from":"' .. A .. '","to":"' .. B .. '","asset":"USD",' ..
                         '"amount":1,"nonce":1,"memo":"' .. memo .. '"}'
            local st, h, b = S.http_post(task, port, "/v1/transfer", TA, body, "u1")
            problem(st, h, b, 400, "bad_string")
            assert.equal("memo", cjson.decode(b).field)
        end
    end))

    it("a wallet request on a connection of the loopback reserve: 503 connection_limit",
       function()
        F.run(function(task)
            local ctx = F.open(task, S.tmpname(".db"), nil, nil,
                               { http = { max_conns_per_peer = 1, reserved_conns = 2 } })
            local port = ctx.port
            -- one idle connection holds 127.0.0.1's one general slot
            local idle = uv.new_tcp()
            local up = false
            idle:connect("127.0.0.1", port, function() up = true end)
            assert(S.eventually(task, function()
                return up and ctx.srv:stats().general == 1
            end, 5000))
            local st, h, b = S.http_get(task, port, "/v1/accounts/" .. A .. "/balance?asset=USD",
                                        TA)
            problem(st, h, b, 503, "connection_limit")
            assert.equal("1", h["retry-after"])
            assert.equal(200, (S.http_get(task, port, "/healthz"))) -- probes still pass
            idle:close()
            ctx.close()
        end)
    end)
end)
