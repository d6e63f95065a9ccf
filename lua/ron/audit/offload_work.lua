-- ron.audit.offload_work: the audit trail's bodies on the libuv threadpool (required by each
-- pool thread's Lua VM through ron.base.offload; ron.audit.offload is its loop side).
local ffi = require("ffi")
local A = require("ron.audit.lib")
local audit = require("ron.audit")
local proofs = require("ron.audit.proofs")

local tonumber = tonumber

local _M = {}

-- The group commit (ron.audit.host): the chunk of packed events (when given: its address
-- and length) appended with rau_log_append_packed, then rau_log_sync, on a log handle the
-- loop thread does not touch until this answers (its sink worker is the chain's one
-- writer). -> rc, appended, duplicates
local batch_res
function _M.audit_sync(lnum, bnum, blen)
    local l = ffi.cast("rau_log_t *", lnum)
    local appended, dups = 0, 0
    if bnum then
        batch_res = batch_res or ffi.new("rau_batch_result_t[1]")
        local rc = A.rau_log_append_packed(l, ffi.cast("const uint8_t *", bnum), blen, batch_res)
        appended, dups = tonumber(batch_res[0].appended), tonumber(batch_res[0].duplicates)
        if rc ~= 0 then return rc, appended, dups end
    end
    return A.rau_log_sync(l), appended, dups
end

-- ron.audit.recovery (AUD-I-42): close the failed handle, open the log again.
_M.audit_reopen = audit.open_spec_ptr

-- The daemon's proof routes (AUD-I-41): a proof's text from the log directory.
_M.audit_proof = proofs.text

return _M
