-- record.lua: record usage into a running daemon's counter plane.
--
--   build/ron-accounting run examples/record.lua [--var DIR] [--window S] [--config FILE]
--       TENANT SUBJECT DIMENSION VALUE          one record
--   build/ron-accounting run examples/record.lua [...] -    records from stdin, one
--                                               "TENANT SUBJECT DIMENSION VALUE" per line
--
-- TENANT is a UUID, SUBJECT any string (hashed with keyed BLAKE3 before it is counted),
-- DIMENSION bytes, requests, cpu_units or a configured one, VALUE a non-negative integer.
-- Give it the daemon's --var/--window/--config: the plane refuses other settings. The
-- plane file outlives this process: the daemon seals what it counted at the end of the
-- window, whether or not it was running while the records were made.
local acct = require("ron.accounting")
local daemon = require("ron.node")

local cfg, pos, code = daemon.configure(arg)
if not cfg then
    if pos == "help" then
        io.stdout:write("usage: ron-accounting run examples/record.lua [--var DIR] ",
                        "[--window S] [--config FILE] TENANT SUBJECT DIMENSION VALUE | -\n")
        os.exit(0)
    end
    io.stderr:write("record: ", pos, "\n")
    os.exit(code or 2)
end
local rc = daemon.recorder_config(cfg)
if not io.open(rc.shm, "rb") then
    io.stderr:write("record: no counter plane at ", rc.shm,
                    ": start the daemon first (make run), or give its --var\n")
    os.exit(1)
end
local m, err = acct.open(rc)
if not m then
    io.stderr:write("record: ", err, "\n")
    os.exit(1)
end

local n, bad = 0, 0
local function one(line_no, tenant, subject, dim, value)
    local v = tonumber(value)
    local ok, rerr
    if not v then
        ok, rerr = nil, "InvalidArgument: VALUE must be a non-negative integer, got " ..
                        tostring(value)
    else
        ok, rerr = m:record(tenant, subject, dim, v)
    end
    if ok then
        n = n + 1
    else
        bad = bad + 1
        io.stderr:write("record: ", line_no and ("line " .. line_no .. ": ") or "",
                        rerr, "\n")
    end
end

if #pos == 1 and pos[1] == "-" then
    local i = 0
    for line in io.stdin:lines() do
        i = i + 1
        if line:match("%S") and not line:match("^%s*#") then
            local t, s, d, v = line:match("^%s*(%S+)%s+(%S+)%s+(%S+)%s+(%S+)%s*$")
            if t then one(i, t, s, d, v) else
                bad = bad + 1
                io.stderr:write("record: line ", i, ": expected TENANT SUBJECT DIMENSION VALUE\n")
            end
        end
    end
elseif #pos == 4 then
    one(nil, pos[1], pos[2], pos[3], pos[4])
else
    io.stderr:write("record: expected TENANT SUBJECT DIMENSION VALUE, or - (see --help)\n")
    os.exit(2)
end
m:close()
io.stderr:write(string.format("record: %d recorded, %d rejected\n", n, bad))
os.exit(bad == 0 and 0 or 1)
