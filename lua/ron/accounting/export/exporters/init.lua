-- ron.accounting.export.exporters: the exporter interface of docs/EXPORT.md, checked.
--
--   local exporter = require("ron.accounting.export.exporters")
--   exporter.check(e)            -- raises on a malformed exporter, returns e
--   exporter.STATUS.ok           -- "ok"; every answer of put() is a key of STATUS
--   exporter.is_status(s)        -- true for the seven answers of the contract
--   exporter.RETRYABLE[s]        -- true for retry_network, retry_remote_5xx, retry_timeout
--   exporter.ACKED[s]            -- true for ok and dup: the caller ACKs the slice
--   exporter.STATUSES            -- the seven answers, in the order metrics list them
--   exporter.COUNTED             -- STATUSES and "fail": the export counter's label set
--   exporter.is_blocking(e)      -- true when e declares blocking = true (see below)
--
-- An exporter is a table (or any indexable value) with
--   put(self, slice) -> status[, detail]   required
--   head(self, tenant, dimension) -> { seq = n, b3 = hex } | nil   optional
--   close(self)                            required
--   blocking = true                        optional capability: put() does its I/O on the
--                                          calling thread (e.g. write + fsync), so the
--                                          export runtime refuses it on the loop thread
--                                          (wrap it for the threadpool, as offload.file
--                                          does for exporters.file)
-- A put() that raises or answers nil, err is a local failure ("fail" in the export
-- metrics): the caller backs off and retries, as for retry_*.
--
-- This module owns the contract: every other module takes the statuses from here.
local type = type
local error = error
local tostring = tostring
local pairs = pairs

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

_M.STATUSES = { "ok", "dup", "conflict", "gap", "retry_network", "retry_remote_5xx",
                "retry_timeout" }
_M.COUNTED = { "ok", "dup", "conflict", "gap", "retry_network", "retry_remote_5xx",
               "retry_timeout", "fail" }

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

-- An exporter's stats() over its counts table: a copy, which the caller may keep or change.
function _M.stats(e)
    local out = {}
    for k, v in pairs(e.counts) do out[k] = v end
    return out
end

-- True when e declares that its put() blocks the calling thread.
function _M.is_blocking(e)
    return field(e, "blocking") == true
end

-- Raises (level 2: the caller of check) when e is not an exporter; returns e.
function _M.check(e)
    local t = type(e)
    if t ~= "table" and t ~= "userdata" then
        error("ron.accounting.export.exporters: an exporter must be a table, got " .. t, 2)
    end
    if type(field(e, "put")) ~= "function" then
        error("ron.accounting.export.exporters: exporter.put must be a function, got "
              .. type(field(e, "put")), 2)
    end
    if type(field(e, "close")) ~= "function" then
        error("ron.accounting.export.exporters: exporter.close must be a function, got "
              .. type(field(e, "close")), 2)
    end
    local head = field(e, "head")
    if head ~= nil and type(head) ~= "function" then
        error("ron.accounting.export.exporters: exporter.head must be a function or nil, got "
              .. tostring(type(head)), 2)
    end
    local blocking = field(e, "blocking")
    if blocking ~= nil and type(blocking) ~= "boolean" then
        error("ron.accounting.export.exporters: exporter.blocking must be a boolean or nil, "
              .. "got " .. type(blocking), 2)
    end
    return e
end

return _M
