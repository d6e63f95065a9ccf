-- ron.accounting.runtime.acks: meter ACKs of exported slices, batched through the threadpool,
-- and the WAL compaction that follows them. Owns the ACK queue and the ACK count; each
-- ACK done takes the slice out of the offers (offers:acked) and samples its latency.
local rt = require("ron.accounting.runtime.rt")
local offload = require("ron.accounting.runtime.offload")
local uv = require("luv")

local ipairs, next, tostring = ipairs, next, tostring
local slice_key, log = rt.slice_key, rt.log

local _M = {}

local A = rt.class(_M, "Acks")

function _M.new(o)
    local self = rt.object(A, o, "task cfg meter offers feeder readiness bus",
                           { acked_total = 0 })
    if o.cfg.ack_batch > 1 then self.ch = o.task.channel(o.cfg.pending_cap, "ack_queue") end
    return self
end

-- The meter ACK of an exported slice (then WAL compaction). Queued to loop(), which acks
-- a batch in one pool call and compacts at most every compact_interval_ms (a compaction per
-- slice would rewrite a half-ACKed WAL segment on every ACK); inline (offload.ack: ack +
-- compaction) when the queue is full or closed. The slice stays offered until its ACK is
-- done, so a re-offer cannot resend it.
function A:ack(s)
    if self.ch and self.ch:try_send(s) then return end
    -- Inline ACKs run from many workers at once: they leave the feed to the batched path
    -- (loop) and the rollover task, so the same fresh slices are not listed N times.
    local ok, aerr = offload.ack(self.meter, s)
    if not ok or aerr then log("ack %s: %s", slice_key(s), tostring(aerr)) end
    self:done(s)
end

function A:done(s)
    self.acked_total = self.acked_total + 1
    local lat = self.offers:acked(s)
    if lat then self.readiness:sample_latency(lat) end
    local bus = self.bus
    if next(bus.subs) then
        bus:publish({ type = "SliceExported", slice_id = rt.slice_id(s), latency_ms = lat })
    end
end

-- One batch: every ACK in one pool call, the compaction when due. -> the pool call's fresh
-- list and push number
function A:ack_batch(batch, compact)
    local res, cerr, fresh, fed = offload.ack_many(self.meter, batch, compact, self.feeder.fed)
    if not res then
        log("ack of %d slices: %s", #batch, tostring(cerr))
    else
        if cerr then log("compaction: %s", cerr) end
        for i, sl in ipairs(batch) do
            if res[i] ~= true then log("ack %s: %s", slice_key(sl), tostring(res[i])) end
        end
    end
    for _, sl in ipairs(batch) do self:done(sl) end
    return fresh, fed
end

function A:loop()
    local ch, max, every = self.ch, self.cfg.ack_batch, self.cfg.compact_interval_ms
    local last, dirty = uv.now(), false
    while true do
        local s, err = ch:recv(dirty and every or nil)
        if not s then
            -- idle for compact_interval_ms, or the end: the compaction still owed
            if dirty then
                local _, cerr, fresh, fed = offload.ack_many(self.meter, {}, true,
                                                             self.feeder.fed)
                if cerr then log("compaction: %s", cerr) end
                self.feeder:feed(fresh, fed)
                last, dirty = uv.now(), false
            end
            if err ~= "Timeout" then break end -- closed and empty (rt:wait), or shutdown
        else
            local batch = { s }
            while #batch < max and ch:depth() > 0 do batch[#batch + 1] = ch:recv() end
            local compact = uv.now() - last >= every
            local fresh, fed = self:ack_batch(batch, compact)
            if compact then last, dirty = uv.now(), false else dirty = true end
            self.feeder:feed(fresh, fed) -- the backlog's slices, read back as ACKs made room
        end
    end
end

return _M
