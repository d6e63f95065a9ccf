-- ron.audit.offload: the audit trail's blocking calls on the libuv threadpool, through the one
-- gateway (ron.base.offload; the bodies are ron.audit.offload_work's). Every call must come
-- from a task (ron.base.task).
--
--   offload.audit_sync(log, deadline_ms, on_late[, chunk])
--       -> rc (0 or a RAU_E* code), appended, duplicates | nil, err
--   log: a ron.audit log whose one writer waits here; chunk (optional): a chunk taken from
--   its queue (log:take()), appended in the same pool call before the sync
--   (rau_log_append_packed: the hashing, off the loop). on_late() runs once when the answer
--   is not there after deadline_ms (seed 002 I-4: the WAL I/O deadline). The chunk's bytes
--   are read by the pool until the answer: the caller reuses them only after an rc.
--   offload.audit_reopen(old, spec) -> the handle's number | nil, err
--   A failed audit log reopened (ron.audit.recovery, AUD-I-42): the failed handle `old` (a
--   number from log:detach(), or nil) closed, a new one opened from spec (ron.audit.open_spec:
--   its recovery reads and syncs).
--   offload.audit_proof(kind, dir, a, b) -> text, tenant (the record's, inclusion) | nil, err
--   An RFC 6962 proof read from a log directory (the daemon's proof routes, AUD-I-41;
--   ron.audit.proofs): kind "inclusion" (a = seq, b = size) or "consistency" (a = size1,
--   b = size2).
local ffi = require("ffi")
local offload = require("ron.base.offload")

local tonumber = tonumber

local _M = {}

local pool = offload.pool("ron.audit.offload_work")

local function ptr_num(p)
    return tonumber(ffi.cast("uintptr_t", p))
end

function _M.audit_sync(log, deadline_ms, on_late, chunk)
    local p = log:ptr()
    if not p then return nil, "Closed: log closed" end
    local res, err
    if chunk then
        res, err = pool.call_late("audit_sync", { log, chunk }, deadline_ms, on_late, p,
                                  ptr_num(chunk.buf), chunk.len)
    else
        res, err = pool.call_late("audit_sync", { log }, deadline_ms, on_late, p)
    end
    if not res then return nil, err end
    if res[2] == nil then return nil, res[3] end
    return res[2], res[3], res[4]
end

function _M.audit_reopen(old, spec)
    local res, err = pool.call("audit_reopen", nil, old, spec)
    if not res then return nil, err end
    if res[2] == nil then return nil, res[3] end
    return res[2]
end

function _M.audit_proof(kind, dir, a, b)
    local res, err = pool.call("audit_proof", nil, kind, dir, a, b)
    if not res then return nil, err end
    if res[2] == nil then return nil, res[3] end
    return res[2], res[3]
end

return _M
