-- host-tasks-sigterm: a task sleeps 10 s; tasks/host/signal.sh sends SIGTERM once "ready"
-- is printed. The sleep wakes with "Canceled", the drain finds nothing left, exit 0.
-- With the argument "stubborn" a second task ignores "Canceled" (it sleeps again at once),
-- so the drain (deadline 300 ms here) aborts it: still exit 0, aborted=1.
local task = require("ron.base.task")
local stubborn = ... == "stubborn"
task.DRAIN_DEADLINE_MS = 300
task.spawn("sleeper", function()
    local ok, err = task.sleep(10000)
    print("sleeper woke: " .. tostring(ok) .. " " .. tostring(err))
end)
if stubborn then
    task.spawn("stubborn-1", function()
        while true do task.sleep(50) end
    end)
end
task.spawn("announce", function()
    task.sleep(10)
    print("ready")
    io.stdout:flush()
end)
