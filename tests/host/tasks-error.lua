-- host-tasks-error: a task raises and nobody joins it: logged with its name, exit 1. A
-- joined failure (observed by its joiner) does not change the exit status.
local task = require("ron.base.task")
local joined = task.spawn("joined_failure", function() error("seen by the joiner") end)
task.spawn("joiner", function()
    local ok, err = joined:join()
    print("joiner saw: " .. tostring(ok) .. " " .. tostring(err):match("^[^\n]*"))
end)
task.spawn("doomed-1", function()
    task.sleep(5)
    error("intentional failure in a task")
end)
