-- Issue 14 items 6-8: the HTTP surface (host/lua/httpd.c on H2O, ron.accounting.daemon.http)
-- against hostile and odd peers, on the host's loop (ctest lua-http-hardening-host: `ron-accounting
-- run spec/run-busted.lua spec/ron/accounting/daemon/http_hardening_spec.lua`). Every case
-- talks raw HTTP/1.1 over a luv TCP socket (never a blocking client: it would block the
-- loop the server runs on). Under plain busted (no host) the cases are pending.
local S = require "support"

if not package.preload["ron.accounting.net.http_server"] then
    describe("ron.accounting.net.http_server hardening", function()
        pending("runs inside the host only (ctest lua-http-hardening-host)")
    end)
    return
end

local ffi = require "ffi"
local uv = require "luv"
local httpd = require "ron.accounting.net.http_server"

local run, eventually = S.run_task, S.eventually

pcall(ffi.cdef, [[
struct ra_spec_linger { int l_onoff; int l_linger; };
int setsockopt(int fd, int level, int name, const void *val, unsigned int len);
]])

-- Sends raw bytes and reads until EOF (or timeout_ms): status, headers (lower-case), body,
-- and the whole text (every response on the connection).
-- opts.half_close: shutdown(SHUT_WR) right after the write (`nc -N`), then read.
-- opts.reset: after the write, close with SO_LINGER 0 (an RST: a client that is gone).
-- opts.timeout_ms: default 5000.
local function request(task, port, raw, opts)
    opts = opts or {}
    local ch = task.channel(64, "hardening_client")
    local tcp = uv.new_tcp()
    local chunks = {}
    tcp:connect("127.0.0.1", port, function(err)
        if err then ch:try_send({ err = err }) return end
        tcp:write(raw, function(werr)
            if werr then ch:try_send({ err = werr }) return end
            if opts.reset then
                local l = ffi.new("struct ra_spec_linger", 1, 0)
                ffi.C.setsockopt(tcp:fileno(), 1, 13, l, ffi.sizeof(l)) -- SOL_SOCKET, SO_LINGER
                tcp:close()
                ch:try_send({ sent = true })
            elseif opts.half_close then
                tcp:shutdown()
            end
        end)
        if opts.reset then return end
        tcp:read_start(function(rerr, data)
            if rerr then ch:try_send({ err = rerr })
            elseif data then chunks[#chunks + 1] = data
            else ch:try_send({ eof = true }) end
        end)
    end)
    local v, e = ch:recv(opts.timeout_ms or 5000)
    if not tcp:is_closing() then tcp:close() end
    ch:close()
    local text = table.concat(chunks)
    if not v then return nil, tostring(e) .. " (read so far: " .. text .. ")" end
    if v.err then return nil, v.err end
    if v.sent then return true end
    local head, body = text:match("^(.-)\r\n\r\n(.*)$")
    if not head then return nil, "no response: " .. text end
    local status = tonumber(head:match("^HTTP/1%.%d (%d%d%d)"))
    local headers = {}
    for name, value in head:gmatch("\r\n([^:\r\n]+):%s*([^\r\n]*)") do
        headers[name:lower()] = value
    end
    return status, headers, body, text
end

-- A chunked body: the given chunks, then the last chunk.
local function chunked(...)
    local out = {}
    for _, c in ipairs { ... } do out[#out + 1] = string.format("%x\r\n%s\r\n", #c, c) end
    return table.concat(out) .. "0\r\n\r\n"
end

describe("ron.accounting.net.http_server request framing (issue 14 item 8)", function()
    it("two different Content-Length headers are a 400 that closes the connection: "
       .. "nothing behind them is read as a request (no smuggling)", function()
        run(function(task)
            local seen = {}
            local srv = assert(httpd.listen { port = 0, handler = function(req)
                seen[#seen + 1] = req.path
                return 200, "ok"
            end })
            local smuggled = "GET /smuggled HTTP/1.1\r\nHost: h\r\n\r\n"
            -- first wins in h2o: 5 bytes of body, then the smuggled request
            local st, hs, _, text = request(task, srv:port(),
                "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: "
                .. (5 + #smuggled) .. "\r\n\r\nhello" .. smuggled)
            assert.equal(400, st, text)
            assert.equal("close", hs.connection)
            assert.is_nil(text:find("HTTP/1.1 200", 1, true))
            -- the other order: the larger one first
            st = request(task, srv:port(),
                "POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 6\r\nContent-Length: 5\r\n\r\n"
                .. "hello!")
            assert.equal(400, st)
            -- Content-Length with Transfer-Encoding: refused as well (RFC 9112 6.1)
            st = request(task, srv:port(),
                "POST /c HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nTransfer-Encoding: chunked"
                .. "\r\n\r\n" .. chunked("hello"))
            assert.equal(400, st)
            assert.same({}, seen)
            -- the same value twice is one length (RFC 9110 8.6): served
            st = request(task, srv:port(),
                "POST /d HTTP/1.1\r\nHost: h\r\nConnection: close\r\nContent-Length: 5\r\n"
                .. "content-length: 5\r\n\r\nhello")
            assert.equal(200, st)
            assert.same({ "/d" }, seen)
            local early = srv:early_rejects()
            assert.equal(3, early.other)
            srv:close()
        end)
    end)

    it("a chunked body of exactly max_body is accepted like a Content-Length one; one byte "
       .. "more is 413 for both", function()
        run(function(task)
            local bodies = {}
            local srv = assert(httpd.listen { port = 0, max_body = 16, handler = function(req)
                bodies[#bodies + 1] = req.body
                return 200, "got " .. #req.body
            end })
            local port = srv:port()
            local function send(framing, body)
                local raw = "POST /x HTTP/1.1\r\nHost: h\r\nConnection: close\r\n"
                if framing == "length" then
                    raw = raw .. "Content-Length: " .. #body .. "\r\n\r\n" .. body
                else
                    raw = raw .. "Transfer-Encoding: chunked\r\n\r\n"
                          .. chunked(body:sub(1, 8), body:sub(9))
                end
                return (request(task, port, raw))
            end
            local at, over = string.rep("a", 16), string.rep("b", 17)
            assert.equal(200, send("length", at))
            assert.equal(200, send("chunked", at))
            assert.equal(413, send("length", over))
            assert.equal(413, send("chunked", over))
            assert.same({ at, at }, bodies)
            assert.equal(2, srv:early_rejects().too_large)
            srv:close()
        end)
    end)
end)

describe("ron.accounting.net.http_server half-closed peers (issue 14 item 7)", function()
    it("a peer that half-closes after sending (nc -N) gets its answer: sync and async",
       function()
        run(function(task)
            local got = task.channel(4, "hardening_reqs")
            local srv = assert(httpd.listen { port = 0, handler = function(req)
                if req.path == "/sync" then return 200, "sync " .. req.body end
                assert(got:try_send(req))
            end })
            local port = srv:port()
            local st, _, body = request(task, port,
                "POST /sync HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc",
                { half_close = true })
            assert.equal(200, st, body)
            assert.equal("sync abc", body)
            local responder = task.spawn("hardening_responder", function()
                local req = assert(got:recv(5000))
                task.sleep(50) -- the FIN has arrived by now
                assert.is_true(req:alive())
                assert.is_true(req:respond(201, "async"))
            end)
            st, _, body = request(task, port, "GET /async HTTP/1.1\r\nHost: h\r\n\r\n",
                                  { half_close = true })
            assert.equal(201, st, body)
            assert.equal("async", body)
            assert(responder:join(5000))
            srv:close()
        end)
    end)

    it("a peer that resets before the async answer is gone: respond returns false", function()
        run(function(task)
            local got = task.channel(4, "hardening_reqs")
            local srv = assert(httpd.listen { port = 0, handler = function(req)
                if req.path == "/next" then return 200, "still serving" end
                assert(got:try_send(req))
            end })
            local port = srv:port()
            assert(request(task, port, "GET /gone HTTP/1.1\r\nHost: h\r\n\r\n", { reset = true }))
            local req = assert(got:recv(5000))
            assert.is_true(eventually(task, function() return not req:alive() end, 5000))
            assert.is_false(req:alive()) -- and it stays gone
            assert.is_false(req:respond(200, "nobody listens"))
            local st, _, body = request(task, port,
                "GET /next HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
            assert.equal(200, st)
            assert.equal("still serving", body)
            srv:close()
        end)
    end)
end)
