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

-- One audit record (AUD-I-21) when the runtime was started with opts.audit (the daemon's
-- audit trail: ron.audit.host emit, which never blocks); a no-op otherwise.
function RT:audit_emit(kind, attrs)
    local a = self.audit
    if a then a(kind, attrs) end
end

-- An attribute text: printable ASCII, at most 200 bytes (an exporter's detail may hold
-- anything; audit records hold NFC UTF-8 within 1 KiB of attributes).
function _M.audit_text(s)
    s = tostring(s):gsub("[^\32-\126]", "?")
    if #s > 200 then s = s:sub(1, 197) .. "..." end
    return s
end

return _M
