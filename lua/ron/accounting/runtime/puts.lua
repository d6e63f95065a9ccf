-- ron.accounting.runtime.puts: the puts of all streams batched, for an exporter with put_many
-- (offload.file, ron.ledger.exporter, exporters.postgres): a worker queues its slice and
-- waits on its stream's reply channel; a put_flush task (at most put_parallel at once) sends
-- up to put_batch queued slices in one put_many call (one threadpool or database round trip
-- instead of one per slice) and hands each answer back. The queue holds at most one slice
-- per stream (a worker waits for its own). Owns the queue and the flushers' count.
local rt = require("ron.accounting.runtime.rt")

local ipairs, pairs, tostring, pcall = ipairs, pairs, tostring, pcall

local _M = {}

local P = rt.class(_M, "Puts")

-- o.exporter: one with put_many
function _M.new(o)
    return rt.object(P, o, "task exporter put_batch put_parallel", {
        q = { n = 0 }, flushing = 0,
        flushers = {}, -- the put_flush tasks running (rt:wait joins)
    })
end

-- From the stream's worker: s through put_many. -> status, detail | nil, err
function P:put(reply, s)
    local q = self.q
    q.n = q.n + 1
    q[q.n] = { s, reply }
    if self.flushing < self.put_parallel then self:spawn_flush() end
    while true do
        local r, err = reply:recv()
        if not r then return nil, "Canceled: " .. tostring(err) end
        -- an answer for an earlier put whose wait was canceled is dropped
        if r[3] == s then return r[1], r[2] end
    end
end

function P:spawn_flush() -- (no closure in P:put, see router.lua's new_stream)
    self.flushing = self.flushing + 1
    -- (a token, not the handle: with a synchronous exporter the task may end before spawn
    -- returns its handle)
    local tok = {}
    self.flushers[tok] = true
    tok.h = self.task.spawn("put_flush", function()
        self:flush()
        self.flushers[tok] = nil
    end)
end

-- The put_flush tasks still running (a put_many in flight: a stop waits for them, so that
-- a commit is not cut half-way, then says what is left).
function P:running()
    local out = {}
    for tok in pairs(self.flushers) do
        if tok.h then out[#out + 1] = tok.h end
    end
    return out
end

function P:flush()
    local q, max = self.q, self.put_batch
    while q.n > 0 do
        local n = q.n < max and q.n or max
        local reqs, slices = {}, {}
        for i = 1, n do reqs[i] = q[i]; slices[i] = q[i][1] end
        for i = n + 1, q.n do q[i - n] = q[i] end
        for i = q.n - n + 1, q.n do q[i] = nil end
        q.n = q.n - n
        local ok, res, err = pcall(self.exporter.put_many, self.exporter, slices)
        if not ok then res, err = nil, tostring(res) end
        for i, req in ipairs(reqs) do
            local a = res and res[i]
            if a then
                req[2]:try_send({ a[1], a[2], req[1] })
            else
                req[2]:try_send({ nil, err or "put_many: no answer", req[1] })
            end
        end
    end
    self.flushing = self.flushing - 1
end

return _M
