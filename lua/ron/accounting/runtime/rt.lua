-- ron.accounting.runtime.rt: the runtime object's class and the helpers its concern files
-- share (feed, router, worker, acks, readiness, bus, metrics each add methods to RT; init.lua
-- makes the object).
local format, tostring = string.format, tostring

local _M = {}

local RT = {}
RT.__index = RT
_M.RT = RT

function _M.skey(tenant, dim) return tenant .. "/" .. dim end
local skey = _M.skey

-- Cached on the slice object (built up to five times per slice otherwise).
function _M.slice_key(s)
    local k = s._rt_key
    if not k then
        k = skey(s.tenant, s.dimension) .. "/" .. tostring(s.id.seq)
        s._rt_key = k
    end
    return k
end

-- The concern files keep rt.log as a local; the line goes through rt.write, which a spec
-- may replace to read what was logged.
function _M.write(line)
    io.stderr:write("runtime: ", line, "\n")
end

function _M.log(fmt, ...)
    _M.write(format(fmt, ...))
end

return _M
