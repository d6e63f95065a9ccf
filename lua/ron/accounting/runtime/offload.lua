-- ron.accounting.runtime.offload: the meter's blocking calls and the file ledger, run on the
-- libuv threadpool through ron.base.offload (its bodies: ron.accounting.runtime.offload_work)
-- so the loop thread never blocks (issue 4, docs/CONCURRENCY.md). The ONE place where the
-- export runtime does blocking I/O:
--
--   offload.rollover(meter, now_ms[, since]) -> slices, err, fresh, last | nil, err
--                                      (WAL fsync; slices: the sealed ones now in the
--                                      pending ring, err or nil)
--   offload.ack(meter, slice[, since])       -> true, err, fresh, last | nil, err
--                                      (ack + compaction)
--   offload.ack_many(meter, slices[, compact = true[, since]])
--                                   -> { true | err per slice }, compaction err, fresh,
--                                      last | nil, err (every ack, then ONE compaction
--                                      unless compact is false: the runtime's batched ACK)
--   fresh, last: the slices that entered the pending ring after push number `since`
--   (meter:pending_since in the pool: newly sealed ones and, with a WAL, those read back
--   from the backlog as ACKs made room), and the number to pass next time.
--   offload.file(opts)              -> an exporter: exporters.file whose put() runs in the
--                                      pool (append + fsync); head() and close() too; and
--                                      put_many(slices) (one pool call for several puts),
--                                      accept_loss{...} (the operator's, see file.lua)
--   offload.in_flight()             -> pool requests not answered yet (ron.base.offload's)
--
-- Every call must come from a task (ron.base.task). The pool VMs get the meter's
-- ra_meter_t * and a slice's ra_slice_t * as numbers (uintptr_t) and call the C API through
-- the host's exported ra_* symbols (ron.accounting.binding.lib finds ffi.C there). The
-- meter's C calls are thread-safe (rollover and ack take its seal mutex); a meter must not
-- be closed while offloaded calls on it are in flight (runtime:wait() ends them first).
local ffi = require("ffi")
local offload = require("ron.base.offload")
local slice = require("ron.accounting.binding.slice")
local file = require("ron.accounting.export.exporters.file")
require("ron.accounting.runtime.offload_work") -- defines ra_offload_head_t, ra_offload_put_t
local C = require("ron.accounting.binding.lib").namespace()

local tonumber, type, error, setmetatable, ipairs = tonumber, type, error, setmetatable, ipairs

local _M = {}

local function ptr_num(p)
    return tonumber(ffi.cast("uintptr_t", p))
end

local pool = offload.pool("ron.accounting.runtime.offload_work")
local call = pool.call
_M.in_flight = offload.in_flight

local function errmsg(rc)
    return ffi.string(C.ra_err_name(rc)) .. ": " .. ffi.string(C.ra_strerror(rc))
end

-- Slice objects from the pointers' bytes a pool call returned (NULL entries left out).
local function wrap_ptrs(bytes)
    local list = {}
    if not bytes or #bytes == 0 then return list end
    local ps = ffi.cast("ra_slice_t * const *", bytes)
    for i = 0, #bytes / ffi.sizeof("ra_slice_t *") - 1 do
        if ps[i] ~= nil then list[#list + 1] = slice.wrap(ps[i]) end
    end
    return list
end

function _M.rollover(meter, now_ms, since)
    if type(now_ms) ~= "number" or now_ms < 0 then
        error("offload.rollover: now_ms must be a number >= 0", 2)
    end
    local m = meter:cdata()
    if m == nil then error("offload.rollover: the meter is closed", 2) end
    since = since or 0
    local res, err = call("rollover", { meter }, ptr_num(m), math.floor(now_ms),
                          meter:rollover_cap(), since)
    if not res then return nil, err end
    local rc, list = res[2], res[3]
    if rc == nil then return nil, list end -- a failed body: "Failed: ..."
    local sealed, fresh, last = wrap_ptrs(list), wrap_ptrs(res[5]), res[6] or since
    if rc ~= 0 then
        if #sealed == 0 and res[4] == 0 then return nil, errmsg(rc), fresh, last end
        return sealed, errmsg(rc), fresh, last
    end
    return sealed, nil, fresh, last
end

function _M.ack(meter, s, since) -- since nil: no fresh list (see RT:ack)
    local m = meter:cdata()
    if m == nil then error("offload.ack: the meter is closed", 2) end
    local p = slice.ptr(s)
    if p == nil then error("offload.ack: expected a slice", 2) end
    local res, err = call("ack", { meter, s }, ptr_num(m), ptr_num(p), since)
    if not res then return nil, err end
    local rc, crc = res[2], res[3]
    if rc == nil then return nil, crc end -- a failed body: "Failed: ..."
    local fresh, last = wrap_ptrs(res[4]), res[5] or since
    if rc == C.RA_ENOTFOUND then
        return nil, "NotFound: the slice is not pending on this meter (ACKed already?)"
    end
    if rc ~= 0 then return nil, errmsg(rc) end
    return true, crc ~= 0 and errmsg(crc) or nil, fresh, last
end

-- Acks every slice of the list, then compacts once (unless compact == false): { true | "Code:
-- message" per slice }, then the compaction's error if any; nil, err when the pool call itself
-- failed.
function _M.ack_many(meter, slices, compact, since)
    local m = meter:cdata()
    if m == nil then error("offload.ack_many: the meter is closed", 2) end
    local n = #slices
    local ps = ffi.new("const ra_slice_t *[?]", n)
    for i, s in ipairs(slices) do
        local p = slice.ptr(s)
        if p == nil then error("offload.ack_many: expected a list of slices", 2) end
        ps[i - 1] = p
    end
    since = since or 0
    local res, err = call("ack_many", { meter, slices }, ptr_num(m),
                          ffi.string(ps, n * ffi.sizeof("ra_slice_t *")), compact ~= false, since)
    if not res then return nil, err end
    if res[2] == nil then return nil, res[3] end -- a failed body: "Failed: ..."
    local rcs = ffi.cast("const int32_t *", res[2])
    local out = {}
    for i = 1, #res[2] / 4 do
        local rc = rcs[i - 1]
        if rc == 0 then
            out[i] = true
        elseif rc == C.RA_ENOTFOUND then
            out[i] = "NotFound: the slice is not pending on this meter (ACKed already?)"
        else
            out[i] = errmsg(rc)
        end
    end
    local crc = res[3]
    return out, crc ~= 0 and errmsg(crc) or nil, wrap_ptrs(res[4]), res[5] or since
end

-- exporters.file with its blocking calls in the pool. Each pool thread keeps its own
-- ledger instance for dir; the ledger checks the head under flock on every put (the
-- file's size against the head it knows), so those instances never disagree (that is
-- what lets two exporters race on one stream). The heads they learn are shared through
-- the object's head table (see put_many), so a stream whose puts land on different
-- threads is not re-read each time.
local F = {}
F.__index = F

function _M.file(opts)
    if type(opts) ~= "table" or type(opts.dir) ~= "string" or opts.dir == "" then
        error("offload.file: expects { dir = path, fsync = true }", 2)
    end
    -- Create the directory and marker now (once, at configuration time, before the
    -- runtime runs) so a bad dir fails here.
    local ledger, err = file.new(opts)
    if not ledger then return nil, err end
    ledger:close()
    return setmetatable({ dir = opts.dir, fsync = opts.fsync ~= false, puts = 0, calls = 0,
                          ix = {}, nix = 0 }, F)
end

function F:put(s)
    if slice.ptr(s) == nil then error("offload.file: put expects a slice", 2) end
    -- one put is a batch of one: a single work body keeps the pool's ledger cache
    local res, err = self:put_many({ s })
    if not res then return nil, err end
    return res[1][1], res[1][2]
end

-- The put requests and the process's table of stream heads, shared by the pool threads.
-- Each pool thread runs its own Lua VM with its own exporters.file instance, and an
-- instance trusts its cached head only while the file's size is the one it saw; so when a
-- stream's puts land on different threads (the pool picks any), every put used to re-read
-- and re-verify the stream's last record (~2x the cost of the put itself). The table lives
-- in C memory owned by this object; entry i belongs to one stream and is read and written
-- only by the one put of that stream in flight (`busy`, kept by the loop thread: a second
-- put of the stream while one is in flight, which the runtime never sends, goes without
-- the table); the ledger still checks the size under the stream's lock before trusting
-- it, as it does its own cache.
local CODES = { [string.byte("o")] = "ok", [string.byte("d")] = "dup",
                [string.byte("c")] = "conflict", [string.byte("g")] = "gap",
                [string.byte("!")] = "!", [string.byte("?")] = "?" }
local byte, find, sub = string.byte, string.find, string.sub
local HEADS_CAP = 65536 -- streams with a shared entry (I-7); later ones: entry 0, no sharing
local put_buf, put_cap = nil, 0

-- Several puts (of different streams: the runtime's batcher) in one pool call, in order.
-- -> { { status, detail } | { nil, err } per slice } | nil, err (the call itself failed)
function F:put_many(slices)
    local n = #slices
    if n > put_cap then
        put_cap = math.max(n, 256)
        put_buf = ffi.new("ra_offload_put_t[?]", put_cap)
    end
    if not self.heads then -- 3.5 MiB, zeroed: only for an exporter that is used
        self.heads = ffi.new("ra_offload_head_t[?]", HEADS_CAP)
    end
    local ix = self.ix
    for i, s in ipairs(slices) do
        local p = slice.ptr(s)
        if p == nil then error("offload.file: put_many expects a list of slices", 2) end
        local r = put_buf[i - 1]
        r.slice = ffi.cast("uintptr_t", p)
        local t = ix[s.tenant]
        if not t then
            t = {}
            ix[s.tenant] = t
        end
        local e = t[s.dimension]
        if not e then
            e = 0
            if self.nix < HEADS_CAP - 1 then
                self.nix = self.nix + 1
                e = self.nix
            end
            t[s.dimension] = e
        end
        if e > 0 and self.heads[e].busy ~= 0 then e = 0 end
        if e > 0 then self.heads[e].busy = 1 end
        r.head = e
    end
    self.puts, self.calls = self.puts + n, self.calls + 1
    local reqs = ffi.string(put_buf, n * ffi.sizeof("ra_offload_put_t"))
    local res, err = call("file_put_many", { slices, self.heads }, self.dir, self.fsync, reqs,
                          ptr_num(self.heads))
    local rq = ffi.cast("const ra_offload_put_t *", reqs)
    for i = 0, n - 1 do
        if rq[i].head > 0 then self.heads[rq[i].head].busy = 0 end
    end
    if not res then return nil, err end
    if res[2] == nil then return nil, res[3] end
    local codes, dts = res[2], res[3] or ""
    if #codes ~= n then return nil, "IoError: put_many: " .. #codes .. " answers for " .. n end
    local out, quiet, pos = {}, #dts == n - 1, 1 -- quiet: every detail is empty
    for j = 1, n do
        local st, d = CODES[byte(codes, j)], nil
        if not quiet then
            local z = find(dts, "\0", pos, true) or #dts + 1
            if z > pos then d = sub(dts, pos, z - 1) end
            pos = z + 1
        end
        if st == "!" then
            out[j] = { nil, d or "IoError: put failed" }
        elseif st == "?" then -- another status word: "word\1detail"
            local w, rest = d:match("^(.-)\1(.*)$")
            out[j] = { w, rest ~= "nil" and rest or nil }
        else
            out[j] = { st, d }
        end
    end
    return out
end

function F:head(tenant, dimension)
    local res, err = call("file_head", nil, self.dir, tenant, dimension)
    if not res then return nil, err end
    if res[2] == nil then return nil, res[4] end
    return { seq = res[2], b3 = res[3] }
end

-- exporters.file's accept_loss (it writes and fsyncs: in the pool) -> { from, to } | nil, err
function F:accept_loss(o)
    if type(o) ~= "table" then error("offload.file: accept_loss expects a table", 2) end
    -- (the stream as one argument: a pool body takes at most offload.MAX_ARGS)
    local res, err = call("file_accept_loss", nil, self.dir, self.fsync,
                          tostring(o.tenant) .. "/" .. tostring(o.dimension), o.through_seq,
                          o.link_b3, o.reason, o.now_s)
    if not res then return nil, err end
    if res[2] == nil then return nil, res[4] end
    return { from = res[2], to = res[3] }
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

return _M
