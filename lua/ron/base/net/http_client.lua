-- ron.base.net.http_client: HTTP requests for tasks (ron.base.task) on the
-- host's loop, on top of the C module ron.base.net.http_client_c (host/lua/curl.c:
-- libcurl's multi-socket API, sockets polled by libuv, never a blocking call on the loop). Only
-- inside `ron-accounting run`.
--
--   local httpc = require("ron.base.net.http_client")
--   local res, err, class = httpc.request {
--       method = "PUT", url = "http://127.0.0.1:9464/v1/slices/...",
--       headers = { ["Content-Type"] = "application/octet-stream" },
--       body = bytes,
--       connect_timeout_ms = 5000, timeout_ms = 10000,  -- seed 001 §5: I/O deadlines
--       read_timeout_ms = nil, max_response = 1048576, proxy = nil }
--   -- res = { status = 201, headers = { ["x-ron-status"] = "ok", ... }, body = "..." }
--   -- or nil, "Code: message", class
--   httpc.available()  -> true inside the host (the C module exists)
--
-- Failures: nil, "Code: message", class with class (curl.c) one of "network" (Network),
-- "timeout" (Timeout), "protocol" (Protocol), "tls" (Tls), "client" (Client), "busy"
-- (Busy: too many requests in flight), "canceled" (Canceled). An HTTP answer is never a
-- failure here, whatever its status: the caller maps statuses.
--
-- Waiting: the call waits on a one-slot task channel that the C callback fills. After
-- task.shutdown() the wait keeps polling (one loop turn per try) until the answer came:
-- it comes within timeout_ms, and a request in flight is never abandoned half-way (the
-- HTTP exporter's put is idempotent, but an answer is still better than "unknown"). A task
-- aborted while it waits leaves the callback to fill a channel nobody reads: harmless.
local type, error, select, unpack, pcall, tostring =
      type, error, select, unpack, pcall, tostring

local task = require("ron.base.task")
-- (a C module of the host, missing outside `ron-accounting run`: curl() says so)
local has_curl, curl_c = pcall(require, "ron.base.net.http_client_c")

local _M = {}

local function curl()
    if not has_curl then
        error("ron.base.net.http_client: needs the ron-accounting host "
              .. "(ron.base.net.http_client_c is its C module): run the script with "
              .. "`ron-accounting run`", 3)
    end
    return curl_c
end

function _M.available()
    return has_curl
end

local CODE_CLASS = { Busy = "busy", Client = "client" }

-- One request; from a task. Misuse (a bad option) raises at the caller.
function _M.request(opts)
    if type(opts) ~= "table" then error("httpc.request: expects an options table", 2) end
    local c = curl()
    local ch = task.channel(1, "httpc_answer")
    local ok, started, serr = pcall(c.request, opts, function(...)
        ch:try_send({ n = select("#", ...), ... })
    end)
    if not ok then error(started, 2) end
    if not started then
        return nil, serr, CODE_CLASS[tostring(serr):match("^(%a+):")] or "client"
    end
    local res
    while true do
        local v, err = ch:recv()
        if v then
            res = v
            break
        end
        if err ~= "Canceled" then
            return nil, "Canceled: " .. tostring(err), "canceled"
        end
        -- shut down: the request in flight still answers within its timeout (header)
    end
    if res[1] == nil then return nil, res[2], res[3] end
    return { status = res[1], headers = res[2], body = res[3] }
end

local _ = unpack
return _M
