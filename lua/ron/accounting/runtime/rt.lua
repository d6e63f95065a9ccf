-- ron.accounting.runtime.rt: what the runtime's concern files share: the shape of a concern
-- (its class, its object), stream and slice keys, the log line, audit attribute text, a
-- slice's id, p95, a pause that ends at stop. No object: each concern owns its state
-- (init.lua composes them).
local percentile = require("ron.base.percentile")

local format, gmatch, tostring, setmetatable = string.format, string.gmatch, tostring,
                                               setmetatable

local _M = {}

-- A concern's class (its methods), published as mod[name]: init.lua's _classes and the
-- specs' JIT checks reach the methods there.
function _M.class(mod, name)
    local class = {}
    class.__index = class
    mod[name] = class
    return class
end

-- A concern's object: what init.lua's compose hands it (the others it calls, its
-- configuration), taken from o by the names in deps ("task cfg meter ..."), beside the
-- state it owns.
function _M.object(class, o, deps, state)
    for k in gmatch(deps, "%S+") do state[k] = o[k] end
    return setmetatable(state, class)
end

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

-- An attribute text: printable ASCII, at most 200 bytes (an exporter's detail may hold
-- anything; audit records hold NFC UTF-8 within 1 KiB of attributes).
function _M.audit_text(s)
    s = tostring(s):gsub("[^\32-\126]", "?")
    if #s > 200 then s = s:sub(1, 197) .. "..." end
    return s
end

function _M.slice_id(s)
    return { tenant = s.tenant, dimension = s.dimension, window_start_s = s.id.window_start_s,
             window_len_s = s.id.window_len_s, seq = s.id.seq }
end

-- The 95th percentile of a bounded sample ring { n =, i =, values... }.
function _M.p95(ring)
    return percentile(ring, 0.95, ring.n)
end

-- Sleeps ms on the runtime's scheduler unless the runtime stops; false when stopped.
function _M.pause(task, stop_ch, ms)
    local _, err = task.select({ stop_ch }, ms)
    return err == "Timeout"
end

return _M
