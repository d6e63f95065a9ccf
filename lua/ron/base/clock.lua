-- ron.base.clock: the wall clock in whole milliseconds, one rule for every system that
-- stamps with it (a transfer's created_at_ms, the stores' leases, the trail's events, the
-- wallet). luv's gettimeofday inside the host; os.time()'s whole seconds only where luv is
-- absent (plain LuaJIT): os.time() alone gave every transfer of a second the same time, a
-- multiple of 1000 (issue 24).
local has_uv, uv = pcall(require, "luv")

local floor, time = math.floor, os.time

local _M = {}

function _M.wall_ms()
    if has_uv then
        local s, us = uv.gettimeofday()
        return s * 1000 + floor(us / 1000)
    end
    return time() * 1000
end

return _M
