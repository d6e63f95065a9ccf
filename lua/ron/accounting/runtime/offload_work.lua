-- ron.accounting.runtime.offload_work: the bodies that ron.accounting.runtime.offload runs on
-- the libuv threadpool (through ron.base.offload, the one gateway). Each pool thread's Lua VM
-- (kept by luv) requires this module once and keeps it, so a body's code is not shipped with
-- every call (it was: ~21 KB of bytecode copied and interned per call) and its loops keep
-- their JIT traces from one call to the next.
--
-- Only plain values cross between the VMs: pointers as numbers (uintptr_t), strings,
-- integers, booleans. A body returns plain values too; ron.base.offload's PROTECTED wrapper
-- runs it under pcall, so an error still answers its request.
local ffi = require("ffi")
local file = require("ron.accounting.export.exporters.file")
local slice = require("ron.accounting.binding.slice")
local C = require("ron.accounting.binding.lib").namespace()

local tonumber, tostring, pcall, ipairs, format, concat =
      tonumber, tostring, pcall, ipairs, string.format, table.concat

local _M = {}

-- The put requests and the process's table of stream heads (offload.lua, F:put_many, says
-- who reads and writes an entry).
local CDEF = [[
typedef struct { double seq, size; uint32_t known, busy; uint8_t raw[32]; } ra_offload_head_t;
typedef struct { uint64_t slice; uint32_t head; uint32_t pad_; } ra_offload_put_t;
]]
if not pcall(ffi.typeof, "ra_offload_head_t") then ffi.cdef(CDEF) end

local SLICE_PTR = ffi.sizeof("ra_slice_t *")
local PUT_REQ = ffi.sizeof("ra_offload_put_t")

-- What entered the pending ring after push number `after` (new slices, and slices read back
-- from the WAL's backlog): the pointers' bytes and the newest push number. Asked here, in
-- the pool, because it takes the seal lock, which rollovers hold across fsyncs.
local function since(m, after)
    if not after then return "", nil end -- the caller does not feed from this call
    local cap = tonumber(C.ra_meter_pending_count(m))
    if cap == 0 then return "", after end
    local out = ffi.new("ra_slice_t *[?]", cap)
    local n, last = ffi.new("size_t[1]"), ffi.new("uint64_t[1]")
    C.ra_meter_pending_since(m, after, out, cap, n, last)
    return ffi.string(out, tonumber(n[0]) * SLICE_PTR), tonumber(last[0])
end

function _M.rollover(mnum, now_ms, cap, after)
    local m = ffi.cast("ra_meter_t *", mnum)
    local out = ffi.new("ra_slice_t *[?]", cap)
    local n = ffi.new("size_t[1]")
    local rc = C.ra_meter_rollover(m, now_ms, out, cap, n)
    local fresh, last = since(m, after)
    -- the pointers' bytes: the loop reads them back as an array, no parsing (a NULL entry
    -- is a sealed slice that waits in the backlog)
    local k = tonumber(n[0])
    return rc, ffi.string(out, (k < cap and k or cap) * SLICE_PTR), k, fresh, last
end

function _M.ack(mnum, snum, after)
    local m = ffi.cast("ra_meter_t *", mnum)
    local rc = C.ra_meter_ack(m, ffi.cast("const ra_slice_t *", snum))
    local crc = 0
    if rc == 0 then crc = C.ra_meter_compact(m) end
    local fresh, last = since(m, after)
    return rc, crc, fresh, last
end

function _M.ack_many(mnum, list, compact, after)
    local m = ffi.cast("ra_meter_t *", mnum)
    local ps = ffi.cast("const ra_slice_t * const *", list)
    local n = #list / SLICE_PTR
    local rcs = ffi.new("int32_t[?]", n)
    for i = 0, n - 1 do rcs[i] = C.ra_meter_ack(m, ps[i]) end
    local crc = compact and C.ra_meter_compact(m) or 0
    local fresh, last = since(m, after)
    return ffi.string(rcs, 4 * n), crc, fresh, last
end

-- One exporters.file instance per (dir, fsync) in this VM: as many as the host configured
-- ledgers (bounded by its configuration, I-7).
local ledgers = {}

local function ledger_for(dir, fsync)
    local key = dir .. (fsync and "\1" or "\0")
    local ledger = ledgers[key]
    if not ledger then
        local err
        ledger, err = file.new {
            dir = dir, fsync = fsync }
        if not ledger then return nil, err end
        ledgers[key] = ledger
    end
    return ledger
end

-- One letter per answer (the runtime's loop reads it without a pattern match).
local LETTER = { ok = "o", dup = "d", conflict = "c", gap = "g", ["!"] = "!" }

function _M.file_put_many(dir, fsync, list, hnum)
    local ledger, err = ledger_for(dir, fsync)
    if not ledger then return nil, err end
    local heads = ffi.cast("ra_offload_head_t *", hnum)
    local req = ffi.cast("const ra_offload_put_t *", list)
    local sts, dts = {}, {}
    for i = 0, #list / PUT_REQ - 1 do
        local p = ffi.cast("ra_slice_t *", req[i].slice)
        C.ra_slice_ref(p) -- wrap() takes ownership of one reference: our own
        local s = slice.wrap(p)
        local e = req[i].head
        local hk
        if e > 0 then -- the process's last known head of the stream (see F:put_many)
            hk = s.tenant .. "/" .. s.dimension
            local h = heads[e]
            ledger.heads[hk] = h.known ~= 0 and
                { seq = h.seq, raw = ffi.string(h.raw, 32), size = h.size } or nil
        end
        local ok, status, detail = pcall(ledger.put, ledger, s)
        if not ok then status, detail = "!", status end -- raised: a local failure
        if status == nil then status = "!" end          -- nil, err: a local failure
        if hk then
            local nh, h = ledger.heads[hk], heads[e]
            if nh then
                h.seq, h.size, h.known = nh.seq, nh.size, 1
                ffi.copy(h.raw, nh.raw, 32)
            else
                h.known = 0
            end
        end
        local code = LETTER[status]
        if not code then code, detail = "?", tostring(status) .. "\1" .. tostring(detail) end
        sts[i + 1] = code
        dts[i + 1] = detail ~= nil and tostring(detail) or ""
    end
    return concat(sts), concat(dts, "\0")
end

function _M.file_head(dir, tenant, dimension)
    local ledger, err = file.new { dir = dir }
    if not ledger then return nil, nil, err end
    local h, herr = ledger:head(tenant, dimension)
    if not h then return nil, nil, herr end
    return h.seq, h.b3
end

function _M.file_accept_loss(dir, fsync, stream, through, link, reason, now_s)
    local tenant, dimension = stream:match("^([^/]*)/(.*)$")
    local ledger, err = file.new {
        dir = dir, fsync = fsync }
    if not ledger then return nil, nil, err end
    local r, rerr = ledger:accept_loss { tenant = tenant, dimension = dimension,
                                         through_seq = through, link_b3 = link,
                                         reason = reason, now_s = now_s }
    if not r then return nil, nil, rerr end
    return r.from, r.to
end

function _M.file_heads(dir)
    local ledger, err = file.new { dir = dir }
    if not ledger then return nil, err end
    local hs, herr = ledger:list_heads()
    if not hs then return nil, herr end
    local parts = {}
    for i, h in ipairs(hs) do
        parts[i] = h.tenant .. " " .. h.dimension .. " " .. format("%.0f", h.seq) .. " " .. h.b3
    end
    return concat(parts, "\n")
end

return _M
