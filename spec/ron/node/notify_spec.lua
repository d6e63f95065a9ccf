-- ron.node.notify: the sd_notify datagram, received on a real Unix datagram socket (a path
-- and an abstract name), as systemd's manager would.
local S = require("support")
local ffi = require("ffi")
local notify = require("ron.node.notify")

ffi.cdef [[
int bind(int fd, const void *addr, unsigned int addrlen);
long recv(int fd, void *buf, size_t len, int flags);
int unlink(const char *path);
]]
local C = ffi.C

-- a bound receiver: fd, and close()
local function receiver(name)
    local fd = C.socket(1, 2, 0)
    assert(fd >= 0)
    local sa = ffi.new("struct ra_sockaddr_un")
    sa.sun_family = 1
    local abstract = name:sub(1, 1) == "@"
    local raw = abstract and ("\0" .. name:sub(2)) or name
    ffi.copy(sa.sun_path, raw, #raw)
    assert(C.bind(fd, sa, 2 + #raw + (abstract and 0 or 1)) == 0, "bind " .. name)
    return fd
end

local function recv(fd)
    local buf = ffi.new("char[256]")
    local n = C.recv(fd, buf, 256, 64) -- MSG_DONTWAIT: sent already, or a failure
    assert(n >= 0, "nothing received")
    return ffi.string(buf, n)
end

describe("ron.node.notify", function()
    it("sends READY=1 to a socket path", function()
        local path = os.tmpname()
        os.remove(path)
        local fd = receiver(path)
        assert.is_true(notify.send("READY=1\nSTATUS=ready", path))
        assert.equal("READY=1\nSTATUS=ready", recv(fd))
        C.close(fd)
        C.unlink(path)
    end)

    it("sends to an abstract name (a leading @)", function()
        local name = "@ron-notify-spec-" .. tostring(os.time()) .. "-" .. tostring(math.random(1e6))
        local fd = receiver(name)
        assert.is_true(notify.send("STOPPING=1", name))
        assert.equal("STOPPING=1", recv(fd))
        C.close(fd)
    end)

    it("answers an error, never raises, when nobody listens", function()
        local ok, err = notify.send("READY=1", "/nonexistent/notify.sock")
        S.fails("sendto: errno", ok, err)
    end)
end)
