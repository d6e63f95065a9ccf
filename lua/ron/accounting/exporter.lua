-- ron.accounting.exporter: the exporter interface of docs/EXPORT.md, checked.
--
--   local exporter = require "ron.accounting.exporter"
--   exporter.check(e)            -- raises on a malformed exporter, returns e
--   exporter.STATUS.ok           -- "ok"; every answer of put() is a key of STATUS
--   exporter.is_status(s)        -- true for the seven answers of the contract
--   exporter.RETRYABLE[s]        -- true for retry_network, retry_remote_5xx, retry_timeout
--   exporter.ACKED[s]            -- true for ok and dup: the caller ACKs the slice
--
-- An exporter is a table (or any indexable value) with
--   put(self, slice) -> status[, detail]   required
--   head(self, tenant, dimension) -> { seq = n, b3 = hex } | nil   optional
--   close(self)                            required
-- A put() that raises or answers nil, err is a local failure ("fail" in the export
-- metrics): the caller backs off and retries, as for retry_*.
local type = type
local error = error
local tostring = tostring

local _M = {}

_M.STATUS = {
    ok = "ok",
    dup = "dup",
    conflict = "conflict",
    gap = "gap",
    retry_network = "retry_network",
    retry_remote_5xx = "retry_remote_5xx",
    retry_timeout = "retry_timeout",
}

_M.RETRYABLE = { retry_network = true, retry_remote_5xx = true, retry_timeout = true }
_M.ACKED = { ok = true, dup = true }

function _M.is_status(s)
    return type(s) == "string" and _M.STATUS[s] == s
end

local function field(e, name)
    local ok, v = pcall(function() return e[name] end)
    if not ok then return nil end
    return v
end

-- Raises (level 2: the caller of check) when e is not an exporter; returns e.
function _M.check(e)
    local t = type(e)
    if t ~= "table" and t ~= "userdata" then
        error("ron.accounting.exporter: an exporter must be a table, got " .. t, 2)
    end
    if type(field(e, "put")) ~= "function" then
        error("ron.accounting.exporter: exporter.put must be a function, got "
              .. type(field(e, "put")), 2)
    end
    if type(field(e, "close")) ~= "function" then
        error("ron.accounting.exporter: exporter.close must be a function, got "
              .. type(field(e, "close")), 2)
    end
    local head = field(e, "head")
    if head ~= nil and type(head) ~= "function" then
        error("ron.accounting.exporter: exporter.head must be a function or nil, got "
              .. tostring(type(head)), 2)
    end
    return e
end

return _M
