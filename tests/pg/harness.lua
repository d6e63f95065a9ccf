-- tests/pg/harness.lua: tests/pg/pg-harness.sh from Lua (specs, benchmarks, end-to-end
-- scripts). Load it with dofile:
--
--   local H = dofile(root .. "tests/pg/harness.lua")
--   local ok, why = H.available()      -- false, reason when PostgreSQL is not installed
--   local pg = assert(H.start { fsync = false })   -- owner: this process (see below)
--   pg.conninfo, pg.url, pg.dir, pg.port
--   pg:psql(sql) -> output, rc          -- blocking (setup, checks)
--   pg:stop_server() / pg:start_server() -- blocking: an outage, same port and data
--   pg:freeze() / pg:thaw()             -- SIGSTOP / SIGCONT the server's processes (a stall:
--                                          connections stay open, nothing answers)
--   pg:argv("stop-server")              -- {"sh", script, "stop-server", dir}: for uv.spawn
--                                          inside a task (never block the loop mid-run)
--   pg:stop()                           -- teardown (idempotent)
--
-- H.start registers this process as the cluster's owner (pg-harness.sh --owner): if the
-- process dies without pg:stop(), the cluster is torn down within a second or so anyway.
local H = {}

H.dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
H.script = H.dir .. "pg-harness.sh"

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end
H.quote = q

local function run(cmd)
    local p = assert(io.popen("(" .. cmd .. ") 2>&1; echo \"::rc=$?\""))
    local out = p:read("*a")
    p:close()
    local body, rc = out:match("^(.-)::rc=(%d+)%s*$")
    return body, tonumber(rc)
end
H.run = run

local function getpid()
    local ok, ffi = pcall(require, "ffi")
    if ok then
        pcall(ffi.cdef, "int getpid(void);")
        local ok2, pid = pcall(function() return ffi.C.getpid() end)
        if ok2 then return tonumber(pid) end
    end
    local f = io.open("/proc/self/stat")
    if f then
        local pid = f:read("*l"):match("^(%d+)")
        f:close()
        return tonumber(pid)
    end
end

function H.available()
    local out, rc = run("sh " .. q(H.script) .. " conninfo /nonexistent")
    if rc == 3 then return false, (out:gsub("%s+$", "")) end
    return true
end

local Cluster = {}
Cluster.__index = Cluster

-- opts: fsync (default false), owner (pid, default this process), dir, max_conns (the
-- server's max_connections, default 60), wal_init_zero (default true: PostgreSQL's own;
-- false for benchmarks that time commits: pg-harness.sh has the why).
function H.start(opts)
    opts = opts or {}
    local args = { "sh", q(H.script), "start", "--fsync", opts.fsync and "on" or "off" }
    local owner = opts.owner == nil and getpid() or opts.owner
    if owner then args[#args + 1] = "--owner " .. tonumber(owner) end
    if opts.max_conns then args[#args + 1] = "--max-conns " .. math.floor(opts.max_conns) end
    if opts.wal_init_zero == false then args[#args + 1] = "--wal-init-zero off" end
    if opts.dir then args[#args + 1] = q(opts.dir) end
    local out, rc = run(table.concat(args, " "))
    if rc ~= 0 then return nil, "pg-harness start failed (" .. rc .. "): " .. out end
    local dir, conninfo = out:match("([^\n\t]+)\t([^\n]+)\n?$")
    if not dir then return nil, "pg-harness start: unexpected output: " .. out end
    local self = setmetatable({ dir = dir, conninfo = conninfo }, Cluster)
    self.port = tonumber(conninfo:match("port=(%d+)"))
    self.url = ("postgresql://ron@127.0.0.1:%d/postgres"):format(self.port)
    return self
end

function Cluster:argv(cmd)
    return { "sh", H.script, cmd, self.dir }
end

function Cluster:psql(sql)
    return run("sh " .. q(H.script) .. " psql " .. q(self.dir) .. " -At -c " .. q(sql))
end

-- pg-harness.sh VERB on this cluster, which must succeed.
function Cluster:harness(verb)
    local out, rc = run("sh " .. q(H.script) .. " " .. verb .. " " .. q(self.dir))
    assert(rc == 0, "pg-harness " .. verb .. ": " .. out)
end

function Cluster:stop_server() self:harness("stop-server") end
function Cluster:start_server() self:harness("start-server") end -- the same data directory
function Cluster:freeze() self:harness("freeze") end -- the server's processes SIGSTOPped
function Cluster:thaw() self:harness("thaw") end

function Cluster:stop()
    if self.stopped then return end
    self.stopped = true
    self:harness("stop")
end

return H
