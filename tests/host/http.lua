-- The daemon's HTTP surface with a real meter, the export runtime and a file ledger, for
-- tests/host/http.sh:   ron-accounting run http.lua WORK_DIR
-- Prints "http: port N" once serving; then polls WORK_DIR for control files (the shell
-- side creates them): "stop" stops the runtime (/readyz turns 503), "quit" ends the
-- script's tasks. The server is never closed by the script: the host must close it on
-- its way out (ra_host_httpd_close_all) and exit 0.
local acct = require("ron.accounting")
local task = require("ron.base.task")
local offload = require("ron.accounting.runtime.offload")
local runtime = require("ron.accounting.runtime")
local http = require("ron.node.http")

local work = assert(arg[1], "usage: http.lua WORK_DIR")
local T0 = 1700000000 - 1700000000 % 3600
local now = T0 + 5
local m = assert(acct.open { window_len_s = 60, capacity_rows = 1024, shards = 4,
                             clock = function() return now end,
                             wal = { dir = work .. "/wal" } })
local ledger = assert(offload.file { dir = work .. "/ledger" })
local tenants = { "123e4567-e89b-12d3-a456-426614174000", "00000000-0000-4000-8000-00000000000b" }
for _, t in ipairs(tenants) do
    assert(m:record(t, "alice", "bytes", 100))
    assert(m:record(t, "alice", "requests", 1))
end
now = T0 + 61 -- the first window has ended: the runtime seals and exports it

local function exists(name)
    local f = io.open(work .. "/" .. name, "rb")
    if f then f:close() end
    return f ~= nil
end

task.spawn("http_test_main", function()
    local rt = runtime.start { meter = m, exporter = ledger, tick_ms = 20 }
    local srv = assert(http.serve { meter = m, runtime = rt, port = 0 })
    io.stdout:write("http: port ", srv:port(), "\n")
    io.stdout:flush()
    while not exists("stop") do task.sleep(20) end
    rt:stop()
    rt:wait()
    io.stdout:write("http: runtime stopped\n")
    io.stdout:flush()
    while not exists("quit") do task.sleep(20) end
    io.stdout:write("http: quitting\n")
    io.stdout:flush()
end)
