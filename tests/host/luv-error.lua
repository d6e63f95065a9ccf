-- host-luv-callback-error: an error in a plain luv callback (not a task) is reported with
-- its traceback, stops the loop and makes the exit status 1 (not luv's exit(-1)).
local uv = require("luv")
local t = uv.new_timer()
t:start(1, 0, function() error("intentional failure in a luv callback") end)
local keep = uv.new_timer() -- would keep the loop alive for a minute without the stop
keep:start(60000, 0, function() end)
