-- ron.node.demo: built-in demo traffic (--demo RATE: records/s over three
-- tenants into the plane) and the periodic status line on stderr (--status S).
local acct = require("ron.accounting")
local task = require("ron.base.task")
local log = require("ron.node.log")

local concat, ipairs, tostring, assert = table.concat, ipairs, tostring, assert

local _M = {}

local DEMO_TENANTS = { "6f1c3c1e-2b7a-4d5e-9a43-0c8e5b1f7a21",
                       "b2d4e6f8-1a3c-4e5f-8b7d-9c0e2f4a6b8d",
                       "3e9a1b5c-7d2f-4a6e-b1c8-5f0d3e7a9b24" }
_M.TENANTS = DEMO_TENANTS

function _M.task(d, rate)
    local m = d.meter
    local tenants, subjects = {}, {}
    for i, t in ipairs(DEMO_TENANTS) do
        tenants[i] = assert(acct.tenant(t))
        subjects[i] = m:subject("demo-user-" .. i)
    end
    local per_tick = rate / 10
    local owed, n = 0, 0
    while not d.stopping do
        owed = owed + per_tick
        while owed >= 1 do
            owed = owed - 1
            n = n + 1
            local k = n % 3 + 1
            local ok, err = m:record(tenants[k], subjects[k], "requests", 1)
            if ok then ok, err = m:record(tenants[k], subjects[k], "bytes", 512 + n % 1024) end
            if not ok then
                d.demo_errors = d.demo_errors + 1
                if d.demo_errors == 1 or d.demo_errors % 10000 == 0 then
                    log("WARN", "demo record: %s (%d so far)", tostring(err), d.demo_errors)
                end
            end
        end
        if not task.sleep(100) then break end
    end
end

function _M.status_line(d)
    if not d.rt then
        log("INFO", "status: starting (seeding stream heads from the ledger)")
        return
    end
    local rm = d.rt:metrics()
    local ready, reasons = d.rt:ready()
    local e = rm.exports
    log("INFO", "status: backlog=%d exported ok=%d dup=%d fail=%d retries=%d ready=%s%s",
        rm.backlog, e.ok, e.dup, e.fail, rm.retries, ready and "yes" or "no",
        ready and "" or (" (" .. concat(reasons, "; ") .. ")"))
end

function _M.status_task(d, every_s)
    while task.sleep(every_s * 1000) do _M.status_line(d) end
end

return _M
