-- A raw HTTP/1.1 client for the server specs (spec/ron/node/http_spec.lua,
-- http_hardening_spec.lua): the bytes a test writes go on the wire as they are, so a test
-- can send what no real client would.
--
-- request(task, port, raw, opts) -> status, headers (lower-case names), body, text (every
-- response on the connection) | true (the request was only sent) | nil, err
--   opts.close_after_send: close the socket right after the write (a client that leaves)
--   opts.reset: after the write, close with SO_LINGER 0 (an RST: a client that is gone)
--   opts.half_close: shutdown(SHUT_WR) right after the write (`nc -N`), then read
--   opts.timeout_ms: how long to read until EOF (default 10000)
local ffi = require "ffi"
local uv = require "luv"

pcall(ffi.cdef, [[
struct ra_spec_linger { int l_onoff; int l_linger; };
int setsockopt(int fd, int level, int name, const void *val, unsigned int len);
]])

local M = {}

local function reset(tcp)
    local l = ffi.new("struct ra_spec_linger", 1, 0)
    ffi.C.setsockopt(tcp:fileno(), 1, 13, l, ffi.sizeof(l)) -- SOL_SOCKET, SO_LINGER
    tcp:close()
end

local function parse(text)
    local head, body = text:match("^(.-)\r\n\r\n(.*)$")
    if not head then return nil, "no response: " .. text end
    local status = tonumber(head:match("^HTTP/1%.%d (%d%d%d)"))
    local headers = {}
    for name, value in head:gmatch("\r\n([^:\r\n]+):%s*([^\r\n]*)") do
        headers[name:lower()] = value
    end
    return status, headers, body, text
end

function M.request(task, port, raw, opts)
    opts = opts or {}
    local only_send = opts.close_after_send or opts.reset
    local ch = task.channel(64, "raw_http_client")
    local tcp = uv.new_tcp()
    local chunks = {}
    tcp:connect("127.0.0.1", port, function(err)
        if err then ch:try_send({ err = err }) return end
        tcp:write(raw, function(werr)
            if werr then ch:try_send({ err = werr }) return end
            if opts.reset then reset(tcp) end
            if only_send then ch:try_send({ sent = true })
            elseif opts.half_close then tcp:shutdown() end
        end)
        if only_send then return end
        tcp:read_start(function(rerr, data)
            if rerr then ch:try_send({ err = rerr })
            elseif data then chunks[#chunks + 1] = data
            else ch:try_send({ eof = true }) end
        end)
    end)
    local v, e = ch:recv(opts.timeout_ms or 10000)
    if not tcp:is_closing() then tcp:close() end
    ch:close()
    local text = table.concat(chunks)
    if not v then return nil, tostring(e) .. " (read so far: " .. text .. ")" end
    if v.err then return nil, v.err end
    if v.sent then return true end
    return parse(text)
end

return M
