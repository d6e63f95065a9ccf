-- Sleeping and time limits for one scheduler (ron.base.task).
local check = require("ron.base.task.check")
local runner = require("ron.base.task.runner")
local wait = require("ron.base.task.wait")

local error, type, unpack, maxn = error, type, unpack, table.maxn
local check_ms = check.check_ms

local M = {}

function M.sleep(S, ms)
    ms = check_ms(ms, "ms", "sleep")
    local r = wait.current(S, "sleep")
    local ok, err = wait.wait(S, r, nil, ms, true)
    if err == "Timeout" then return true end -- the timer is the sleep's normal end
    return ok, err
end

-- fn(...) in a child task named "with_timeout"; aborted (and counted) when ms pass first.
function M.with_timeout(S, ms, fn, ...)
    ms = check_ms(ms, "ms", "with_timeout")
    if type(fn) ~= "function" then error("with_timeout: fn must be a function", 2) end
    wait.current(S, "with_timeout")
    local child = runner.spawn(S, "with_timeout", fn, ...)
    local res = { child:join(ms) }
    if res[1] == nil and res[2] == "Timeout" then
        child:abort()
        return nil, "Timeout"
    end
    return unpack(res, 1, maxn(res))
end

return M
