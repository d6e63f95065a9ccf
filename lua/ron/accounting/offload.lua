-- ron.accounting.offload: the blocking calls of the export path, run on the libuv
-- threadpool (uv.new_work) so the loop thread never blocks (issue 4, docs/CONCURRENCY.md).
-- The ONE place where the runtime does blocking I/O:
--
--   offload.rollover(meter, now_ms) -> slices | slices, err | nil, err   (WAL fsync)
--   offload.ack(meter, slice)       -> true | true, err | nil, err       (ack + compaction)
--   offload.ack_many(meter, slices[, compact = true])
--                                   -> { true | err per slice }, compaction err | nil, err
--                                      (every ack, then ONE compaction unless compact is
--                                      false: the runtime's batched ACK)
--   offload.file(opts)              -> an exporter: exporters.file whose put() runs in the
--                                      pool (append + fsync); head() and close() too; and
--                                      put_many(slices) (one pool call for several puts)
--
-- Every call must come from a task (ron.accounting.task): it queues the work, then waits
-- on a one-slot channel that the after-work callback (loop thread) fills.
--
-- The work function runs in another Lua VM (one per pool thread, kept by luv), so only
-- plain values cross: the meter's ra_meter_t * and a slice's ra_slice_t * as numbers
-- (uintptr_t), package.path, integers. The worker VM calls the C API through the host's
-- exported ra_* symbols (ron.accounting.lib finds ffi.C there). The objects behind the
-- pointers stay alive because the caller's side keeps them referenced (`keep`) until the
-- after-work callback ran, even when the waiting task was aborted meanwhile. The meter's
-- C calls are thread-safe (rollover and ack take its seal mutex); a meter must not be
-- closed while offloaded calls on it are in flight (runtime:wait() ends them first).
--
-- After task.shutdown() every wait returns "Canceled" at once; the wait for a result in
-- flight then polls (one loop turn per try) until the pool answers: a few milliseconds
-- at most (one fsync), never a lost result.
local uv = require "luv"
local ffi = require "ffi"

local tonumber, tostring, type, error, setmetatable, pairs, ipairs =
      tonumber, tostring, type, error, setmetatable, pairs, ipairs

local _M = {}

local function ptr_num(p)
    return tonumber(ffi.cast("uintptr_t", p))
end

-- Requests in flight: id -> { ch = channel, keep = objects kept alive }.
local inflight, next_id = {}, 0
local works = {}

local function after(id, ...)
    if id == nil then return end -- cannot happen: every work body is protected
    local req = inflight[id]
    inflight[id] = nil
    if req and not req.ch:is_closed() then req.ch:try_send({ id, ... }) end
end

-- The work bodies: no upvalues (they are dumped as bytecode for the pool's VMs). Each runs
-- inside PROTECTED below, so an error in a body still answers its request.
local WORK = {
    rollover = function(path, mnum, now_ms, cap)
        local tonumber, tostring, pcall, require, package, table = _G.tonumber, _G.tostring,
            _G.pcall, _G.require, _G.package, _G.table
        package.path = path
        local ffi_ = require "ffi"
        local C = require("ron.accounting.lib").namespace()
        local m = ffi_.cast("ra_meter_t *", mnum)
        local out = ffi_.new("ra_slice_t *[?]", cap)
        local n = ffi_.new("size_t[1]")
        local rc = C.ra_meter_rollover(m, now_ms, out, cap, n)
        local parts = {}
        for i = 0, tonumber(n[0]) - 1 do
            parts[#parts + 1] = _G.string.format("%.0f", tonumber(ffi_.cast("uintptr_t", out[i])))
        end
        return rc, table.concat(parts, ",")
    end,
    ack = function(path, mnum, snum)
        local tonumber, tostring, pcall, require, package, table = _G.tonumber, _G.tostring,
            _G.pcall, _G.require, _G.package, _G.table
        package.path = path
        local ffi_ = require "ffi"
        local C = require("ron.accounting.lib").namespace()
        local m = ffi_.cast("ra_meter_t *", mnum)
        local rc = C.ra_meter_ack(m, ffi_.cast("const ra_slice_t *", snum))
        local crc = 0
        if rc == 0 then crc = C.ra_meter_compact(m) end
        return rc, crc
    end,
    ack_many = function(path, mnum, list, compact)
        local tonumber, tostring, pcall, require, package, table = _G.tonumber, _G.tostring,
            _G.pcall, _G.require, _G.package, _G.table
        package.path = path
        local ffi_ = require "ffi"
        local C = require("ron.accounting.lib").namespace()
        local m = ffi_.cast("ra_meter_t *", mnum)
        local rcs = {}
        for num in list:gmatch("%d+") do
            rcs[#rcs + 1] = C.ra_meter_ack(m, ffi_.cast("const ra_slice_t *", tonumber(num)))
        end
        return table.concat(rcs, ","), compact and C.ra_meter_compact(m) or 0
    end,
    file_put_many = function(path, dir, fsync, list)
        local tonumber, tostring, pcall, require, package, table = _G.tonumber, _G.tostring,
            _G.pcall, _G.require, _G.package, _G.table
        package.path = path
        local ffi_ = require "ffi"
        local C = require("ron.accounting.lib").namespace()
        local slice = require "ron.accounting.slice"
        local key = dir .. (fsync and "\1" or "\0")
        _G.RA_LEDGERS = _G.RA_LEDGERS or {}
        local ledger = _G.RA_LEDGERS[key]
        if not ledger then
            local err
            ledger, err = require("ron.accounting.exporters.file").new { dir = dir,
                                                                        fsync = fsync }
            if not ledger then return nil, err end
            _G.RA_LEDGERS[key] = ledger
        end
        local sts, dts = {}, {}
        for num in list:gmatch("%d+") do
            local p = ffi_.cast("ra_slice_t *", tonumber(num))
            C.ra_slice_ref(p) -- wrap() takes ownership of one reference: our own
            local ok, status, detail = pcall(ledger.put, ledger, slice.wrap(p))
            if not ok then status, detail = "!", status end -- raised: a local failure
            if status == nil then status = "!" end          -- nil, err: a local failure
            sts[#sts + 1] = status
            dts[#dts + 1] = detail ~= nil and tostring(detail) or ""
        end
        return table.concat(sts, ","), table.concat(dts, "\0")
    end,
    file_head = function(path, dir, tenant, dimension)
        local tonumber, tostring, pcall, require, package, table = _G.tonumber, _G.tostring,
            _G.pcall, _G.require, _G.package, _G.table
        package.path = path
        local ledger, err = require("ron.accounting.exporters.file").new { dir = dir }
        if not ledger then return nil, nil, err end
        local h, herr = ledger:head(tenant, dimension)
        if not h then return nil, nil, herr end
        return h.seq, h.b3
    end,
    file_heads = function(path, dir)
        local require, package, table, ipairs, format = _G.require, _G.package, _G.table,
            _G.ipairs, _G.string.format
        package.path = path
        local ledger, err = require("ron.accounting.exporters.file").new { dir = dir }
        if not ledger then return nil, err end
        local hs, herr = ledger:list_heads()
        if not hs then return nil, herr end
        local parts = {}
        for i, h in ipairs(hs) do
            parts[i] = h.tenant .. " " .. h.dimension .. " " .. format("%.0f", h.seq)
                       .. " " .. h.b3
        end
        return table.concat(parts, "\n")
    end,
}

-- The one work function: loads the body's bytecode and runs it under pcall, so the answer
-- always carries the request id (a raising body would otherwise leave its caller waiting).
local function PROTECTED(code, id, ...)
    local body = _G.loadstring(code)
    local r = { _G.pcall(body, ...) }
    if not r[1] then return id, nil, "Failed: " .. _G.tostring(r[2]) end
    return id, _G.unpack(r, 2, _G.table.maxn(r))
end

local CODE = {}
for kind, fn in pairs(WORK) do CODE[kind] = string.dump(fn) end

-- Queues kind(...) in the pool and waits (inside a task) for its results.
local function call(kind, keep, ...)
    local task = require "ron.accounting.task"
    local w = works.protected
    if not w then
        w = uv.new_work(PROTECTED, after)
        works.protected = w
    end
    next_id = next_id + 1
    local id = next_id
    local ch = task.channel(1, "offload")
    inflight[id] = { ch = ch, keep = keep }
    local ok, err = w:queue(CODE[kind], id, package.path, ...)
    if not ok then
        inflight[id] = nil
        return nil, "IoError: uv work queue failed: " .. tostring(err)
    end
    while true do
        local res, rerr = ch:recv()
        if res then return res end
        if rerr ~= "Canceled" then return nil, rerr end
        -- shut down: keep polling for the answer in flight (see the header)
    end
end

local function errmsg(C, rc)
    return ffi.string(C.ra_err_name(rc)) .. ": " .. ffi.string(C.ra_strerror(rc))
end

function _M.rollover(meter, now_ms)
    local C = require("ron.accounting.lib").namespace()
    local slice = require "ron.accounting.slice"
    if type(now_ms) ~= "number" or now_ms < 0 then
        error("offload.rollover: now_ms must be a number >= 0", 2)
    end
    local m = meter:cdata()
    if m == nil then error("offload.rollover: the meter is closed", 2) end
    local res, err = call("rollover", { meter }, ptr_num(m), math.floor(now_ms),
                          meter:rollover_cap())
    if not res then return nil, err end
    local rc, list = res[2], res[3]
    local sealed = {}
    for num in list:gmatch("%d+") do
        sealed[#sealed + 1] = slice.wrap(ffi.cast("ra_slice_t *", tonumber(num)))
    end
    if rc ~= 0 then
        if #sealed == 0 then return nil, errmsg(C, rc) end
        return sealed, errmsg(C, rc)
    end
    return sealed
end

function _M.ack(meter, s)
    local C = require("ron.accounting.lib").namespace()
    local slice = require "ron.accounting.slice"
    local m = meter:cdata()
    if m == nil then error("offload.ack: the meter is closed", 2) end
    local p = slice.ptr(s)
    if p == nil then error("offload.ack: expected a slice", 2) end
    local res, err = call("ack", { meter, s }, ptr_num(m), ptr_num(p))
    if not res then return nil, err end
    local rc, crc = res[2], res[3]
    if rc == C.RA_ENOTFOUND then
        return nil, "NotFound: the slice is not pending on this meter (ACKed already?)"
    end
    if rc ~= 0 then return nil, errmsg(C, rc) end
    if crc ~= 0 then return true, errmsg(C, crc) end
    return true
end

-- Acks every slice of the list, then compacts once (unless compact == false): { true | "Code: message" per slice },
-- then the compaction's error if any; nil, err when the pool call itself failed.
function _M.ack_many(meter, slices, compact)
    local C = require("ron.accounting.lib").namespace()
    local slice = require "ron.accounting.slice"
    local m = meter:cdata()
    if m == nil then error("offload.ack_many: the meter is closed", 2) end
    local nums = {}
    for i, s in ipairs(slices) do
        local p = slice.ptr(s)
        if p == nil then error("offload.ack_many: expected a list of slices", 2) end
        nums[i] = string.format("%.0f", ptr_num(p))
    end
    local res, err = call("ack_many", { meter, slices }, ptr_num(m), table.concat(nums, ","),
                          compact ~= false)
    if not res then return nil, err end
    if res[2] == nil then return nil, res[3] end -- a failed body: "Failed: ..."
    local out, i = {}, 0
    for rc in res[2]:gmatch("-?%d+") do
        i = i + 1
        rc = tonumber(rc)
        if rc == 0 then
            out[i] = true
        elseif rc == C.RA_ENOTFOUND then
            out[i] = "NotFound: the slice is not pending on this meter (ACKed already?)"
        else
            out[i] = errmsg(C, rc)
        end
    end
    local crc = res[3]
    return out, crc ~= 0 and errmsg(C, crc) or nil
end

-- exporters.file with its blocking calls in the pool. Each pool thread keeps its own
-- ledger instance for dir; the ledger re-reads the head under flock on every put, so
-- those instances never disagree (that is what lets two exporters race on one stream).
local F = {}
F.__index = F

function _M.file(opts)
    if type(opts) ~= "table" or type(opts.dir) ~= "string" or opts.dir == "" then
        error("offload.file: expects { dir = path, fsync = true }", 2)
    end
    -- Create the directory and marker now (once, at configuration time, before the
    -- runtime runs) so a bad dir fails here.
    local ledger, err = require("ron.accounting.exporters.file").new(opts)
    if not ledger then return nil, err end
    ledger:close()
    return setmetatable({ dir = opts.dir, fsync = opts.fsync ~= false, puts = 0 }, F)
end

function F:put(s)
    local slice = require "ron.accounting.slice"
    if slice.ptr(s) == nil then error("offload.file: put expects a slice", 2) end
    -- one put is a batch of one: a single work body keeps the pool's ledger cache
    local res, err = self:put_many({ s })
    if not res then return nil, err end
    return res[1][1], res[1][2]
end

-- Several puts (of different streams: the runtime's batcher) in one pool call, in order.
-- -> { { status, detail } | { nil, err } per slice } | nil, err (the call itself failed)
function F:put_many(slices)
    local slice = require "ron.accounting.slice"
    local nums = {}
    for i, s in ipairs(slices) do
        local p = slice.ptr(s)
        if p == nil then error("offload.file: put_many expects a list of slices", 2) end
        nums[i] = string.format("%.0f", ptr_num(p))
    end
    self.puts = self.puts + #slices
    local res, err = call("file_put_many", { slices }, self.dir, self.fsync,
                          table.concat(nums, ","))
    if not res then return nil, err end
    if res[2] == nil then return nil, res[3] end
    local out, i = {}, 0
    for st in res[2]:gmatch("[^,]+") do
        i = i + 1
        out[i] = { st }
    end
    local dts, j, pos = res[3] or "", 0, 1
    while j < i do
        j = j + 1
        local z = dts:find("\0", pos, true)
        local d = dts:sub(pos, (z or #dts + 1) - 1)
        pos = (z or #dts) + 1
        if out[j][1] == "!" then
            out[j] = { nil, d }
        elseif d ~= "" then
            out[j][2] = d
        end
    end
    if i ~= #slices then return nil, "IoError: put_many: " .. i .. " answers for " .. #slices end
    return out
end

function F:head(tenant, dimension)
    local res, err = call("file_head", nil, self.dir, tenant, dimension)
    if not res then return nil, err end
    if res[2] == nil then return nil, res[4] end
    return { seq = res[2], b3 = res[3] }
end

-- Every stream's head: { { tenant =, dimension =, seq =, b3 = }, ... } | nil, err.
function F:list_heads()
    local res, err = call("file_heads", nil, self.dir)
    if not res then return nil, err end
    if res[2] == nil then return nil, res[3] end
    local out = {}
    for t, d, q, b in res[2]:gmatch("(%S+) (%S+) (%d+) (%x+)") do
        out[#out + 1] = { tenant = t, dimension = d, seq = tonumber(q), b3 = b }
    end
    return out
end

function F:close() return true end

-- Requests still in flight (0 once every answer came back).
function _M.in_flight()
    local n = 0
    for _ in pairs(inflight) do n = n + 1 end
    return n
end

return _M
