-- ron.node.notify: readiness told to the service manager (systemd's sd_notify protocol,
-- Type=notify; packaging/ron-accounting.service). Without $NOTIFY_SOCKET it does nothing.
--
--   notify.start(ready)  -- ready() -> bool, reasons: polled every POLL_MS until it first
--                        -- answers true, then "READY=1"; "STOPPING=1" at shutdown
--   notify.send(state[, path]) -> true | nil, err: one datagram to path (default
--                        -- $NOTIFY_SOCKET; nothing without either)
--
-- The protocol is one datagram of "KEY=value" lines on the AF_UNIX socket the manager names
-- (a path, or an abstract name written with a leading '@'); sent through LuaJIT's FFI since
-- libuv has no datagram Unix sockets. A failed send is logged once and never stops the
-- daemon: the manager then times the start out, which is what an operator sees anyway.
local ffi = require("ffi")
local task = require("ron.base.task")
local log = require("ron.node.log")

local C = ffi.C
local getenv, sub, concat, tostring = os.getenv, string.sub, table.concat, tostring

ffi.cdef [[
struct ra_sockaddr_un { unsigned short sun_family; char sun_path[108]; };
int socket(int domain, int type, int protocol);
long sendto(int fd, const void *buf, size_t len, int flags, const void *addr,
            unsigned int addrlen);
int close(int fd);
]]

local _M = {}

_M.POLL_MS = 100
local AF_UNIX, SOCK_DGRAM, SOCK_CLOEXEC = 1, 2, 524288

function _M.send(state, path)
    path = path or getenv("NOTIFY_SOCKET")
    if not path or path == "" then return true end
    if #path >= 108 then return nil, "NOTIFY_SOCKET too long" end
    local sa = ffi.new("struct ra_sockaddr_un")
    sa.sun_family = AF_UNIX
    local abstract = sub(path, 1, 1) == "@"
    if abstract then path = "\0" .. sub(path, 2) end
    ffi.copy(sa.sun_path, path, #path)
    -- an abstract name's length counts exactly; a path's includes its terminating NUL
    local len = 2 + #path + (abstract and 0 or 1)
    local fd = C.socket(AF_UNIX, SOCK_DGRAM + SOCK_CLOEXEC, 0)
    if fd < 0 then return nil, "socket: errno " .. tostring(ffi.errno()) end
    local n = C.sendto(fd, state, #state, 0, sa, len)
    local errno = ffi.errno()
    C.close(fd)
    if n < 0 then return nil, "sendto: errno " .. tostring(errno) end
    return true
end

local function say(state)
    local ok, err = _M.send(state)
    if not ok then log("WARN", "sd_notify: %s", tostring(err)) end
    return ok
end

function _M.start(ready)
    if not getenv("NOTIFY_SOCKET") then return true end
    task.on_shutdown(function() say("STOPPING=1\nSTATUS=draining") end)
    task.spawn("sd_notify", function()
        local last
        while true do
            local ok, reasons = ready()
            if ok then
                say("READY=1\nSTATUS=ready")
                return
            end
            local st = "STATUS=not ready: " .. concat(reasons or {}, "; ")
            if st ~= last then say(st) end
            last = st
            if not task.sleep(_M.POLL_MS) then return end
        end
    end)
    return true
end

return _M
