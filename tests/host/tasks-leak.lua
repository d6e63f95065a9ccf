-- host-tasks-leak: a task waits on a channel nobody will ever send to, with no timeout.
-- Once the loop has nothing left to run the task is still live: a task leak (I-async-8),
-- named on stderr, exit 1.
local task = require("ron.base.task")
local ch = task.channel(1, "forgotten")
task.spawn("forgotten_reader", function() return ch:recv() end)
