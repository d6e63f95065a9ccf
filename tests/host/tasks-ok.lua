-- host-tasks-ok: tasks that sleep and pass values through a channel; the host runs the loop
-- after this chunk returns and exits 0 once every task has ended.
local task = require("ron.base.task")
local ch = task.channel(4, "host_tasks_ok")
task.spawn("producer", function()
    for i = 1, 3 do
        task.sleep(5)
        assert(ch:try_send(i))
    end
    ch:close()
end)
task.spawn("consumer", function()
    local sum = 0
    while true do
        local v, err = ch:recv(1000)
        if v == nil then
            assert(err == "Closed", err)
            break
        end
        sum = sum + v
    end
    print("host-tasks-ok: sum " .. sum)
end)
print("host-tasks-ok: main chunk done, live " .. task.live())
