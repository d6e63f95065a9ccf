-- ron.base.offload: the one gateway to the libuv threadpool (uv.new_work), so the loop
-- thread never blocks (issue 4, docs/CONCURRENCY.md). Each system registers the module of
-- its own pool bodies and calls them by name; the gateway knows none of them:
--
--   local pool = offload.pool("ron.accounting.runtime.offload_work")
--   pool.call(kind, keep, ...) -> { id, body's results... } | nil, err
--   pool.call_late(kind, keep, deadline_ms, on_late, ...)   (the same, with an I/O deadline)
--   offload.in_flight() -> requests whose answer has not come back yet (all pools)
--
-- The bodies module (e.g. ron.accounting.runtime.offload_work: the meter's rollover and
-- ACKs, the file ledger; ron.audit.offload_work: the trail's group commit) is required once
-- by each pool thread's Lua VM (kept by luv) and kept there, so a body's code is not shipped
-- with every call and its loops keep their JIT traces.
--
-- Every call must come from a task (ron.base.task): it queues the work, then waits on a
-- one-slot channel that the after-work callback (loop thread) fills. Only plain values
-- cross between the VMs (pointers as numbers, strings, integers, booleans); `keep` holds
-- the objects behind the pointers alive until the after-work callback ran, even when the
-- waiting task was aborted meanwhile.
--
-- luv hands a work function at most 10 arguments and drops the rest without a word; the
-- gateway takes 3 (the body, the request id, package.path), so a body gets at most
-- MAX_ARGS, and a call with more raises (an 11th argument, accept_loss's now_s, was once
-- dropped that way).
--
-- After task.shutdown() every wait returns "Canceled" at once; the wait for a result in
-- flight then polls (one loop turn per try) until the pool answers: a few milliseconds at
-- most (one fsync), never a lost result.
local uv = require("luv")
local task = require("ron.base.task")

local tostring, type, error, pairs, select, setmetatable =
      tostring, type, error, pairs, select, setmetatable

local _M = { MAX_ARGS = 7 }

-- Requests in flight: id -> { ch = channel, keep = objects kept alive }.
local inflight, next_id = {}, 0
local work

local function after(id, ...)
    if id == nil then return end -- cannot happen: every work body is protected
    local req = inflight[id]
    inflight[id] = nil
    if req and not req.ch:is_closed() then req.ch:try_send({ id, ... }) end
end

-- The one work function (dumped once, run by every pool VM): requires the bodies module
-- once per VM and runs one body (target: "<module>:<body>") under pcall, so the answer
-- always carries the request id (a raising body would otherwise leave its caller waiting).
-- It has no upvalues: luv ships it to the pool's VMs as bytecode.
local function PROTECTED(target, id, path, ...)
    local mod, kind = _G.string.match(target, "^(.*):([^:]*)$")
    local all = _G.RA_OFFLOAD_BODIES
    if not all then
        all = {}
        _G.RA_OFFLOAD_BODIES = all
    end
    local bodies = all[mod]
    if not bodies then
        _G.package.path = path
        local ok, w = _G.pcall(_G.require, mod)
        if not ok then return id, nil, "Failed: " .. _G.tostring(w) end
        bodies = w
        all[mod] = w
    end
    local r = { _G.pcall(bodies[kind], ...) }
    if not r[1] then return id, nil, "Failed: " .. _G.tostring(r[2]) end
    return id, _G.unpack(r, 2, _G.table.maxn(r))
end

-- Queues the body target(...) in the pool and waits (inside a task) for its results. With
-- deadline_ms, on_late() is called once when the answer is not there by then (an I/O
-- deadline: the wait goes on, since the call cannot be taken back).
local function call_late(target, keep, deadline_ms, on_late, ...)
    if select("#", ...) > _M.MAX_ARGS then
        error("offload: " .. target .. ": at most " .. _M.MAX_ARGS .. " arguments reach a "
              .. "pool body (luv drops the rest)", 3)
    end
    if not work then work = uv.new_work(PROTECTED, after) end
    next_id = next_id + 1
    local id = next_id
    local ch = task.channel(1, "offload")
    inflight[id] = { ch = ch, keep = keep }
    local ok, err = work:queue(target, id, package.path, ...)
    if not ok then
        inflight[id] = nil
        return nil, "IoError: uv work queue failed: " .. tostring(err)
    end
    while true do
        -- shut down: keep waiting for the answer in flight (see the header)
        local res, rerr = ch:recv_through_shutdown(deadline_ms)
        if res then return res end
        if rerr ~= "Timeout" then return nil, rerr end
        deadline_ms = nil
        on_late()
    end
end

-- A system's pool: its bodies module, by name (required in the pool VMs, never here).
function _M.pool(mod)
    if type(mod) ~= "string" then error("offload.pool: expects the bodies' module name", 2) end
    local targets = setmetatable({}, { __index = function(t, kind)
        local v = mod .. ":" .. kind
        t[kind] = v
        return v
    end })
    return {
        call = function(kind, keep, ...)
            return call_late(targets[kind], keep, nil, nil, ...)
        end,
        call_late = function(kind, keep, deadline_ms, on_late, ...)
            return call_late(targets[kind], keep, deadline_ms, on_late, ...)
        end,
    }
end

-- Requests still in flight (0 once every answer came back).
function _M.in_flight()
    local n = 0
    for _ in pairs(inflight) do n = n + 1 end
    return n
end

return _M
