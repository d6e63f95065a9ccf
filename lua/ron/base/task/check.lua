-- Argument checks and the log line shared by the scheduler's concern files (ron.base.task).
local error, floor, huge, format, tostring, type = error, math.floor, math.huge,
                                                   string.format, tostring, type
local stderr = io.stderr

local M = {}

function M.log(fmt, ...)
    stderr:write("task: ", format(fmt, ...), "\n")
    stderr:flush()
end

-- A duration argument: a finite number >= 0, floored; nil passes when optional. The error
-- names the caller of the public function (level 3: check_ms, the function, its caller).
function M.check_ms(v, what, fname, optional)
    if v == nil and optional then return nil end
    if type(v) ~= "number" or v ~= v or v < 0 or v == huge then
        error(format("%s: %s must be a finite number >= 0, got %s", fname, what, tostring(v)), 3)
    end
    return floor(v)
end

return M
