-- ron.accounting.runtime.acks: meter ACKs of exported slices, batched through the threadpool,
-- and the WAL compaction that follows them. Methods of the runtime object
-- (ron.accounting.runtime.rt); init.lua composes them.
local rt = require "ron.accounting.runtime.rt"
local offload = require "ron.accounting.runtime.offload"
local uv = require "luv"

local ipairs, tostring =
      ipairs, tostring
local RT, slice_key, log = rt.RT, rt.slice_key, rt.log
-- The meter ACK of an exported slice (then WAL compaction). Queued to ack_loop, which
-- acks a batch in one pool call and compacts at most every compact_interval_ms (a
-- compaction per slice would rewrite a half-ACKed WAL segment on every ACK); inline
-- (offload.ack: ack + compaction) when the queue is full or closed.
-- The slice stays in `offered` until its ACK is done, so a re-offer cannot resend it.
function RT:ack(s)
    if self.ack_ch and self.ack_ch:try_send(s) then return end
    -- Inline ACKs run from many workers at once: they leave the feed to the batched path
    -- (ack_loop) and the rollover task, so the same fresh slices are not listed N times.
    local ok, aerr = offload.ack(self.meter, s)
    if not ok or aerr then log("ack %s: %s", slice_key(s), tostring(aerr)) end
    self:ack_done(s)
end

function RT:ack_done(s)
    self.acked_total = self.acked_total + 1
    self.offered[slice_key(s)] = nil
    self:acked(s)
end

function RT:ack_loop()
    local ch, max, every = self.ack_ch, self.cfg.ack_batch, self.cfg.compact_interval_ms
    local last, dirty = uv.now(), false
    while true do
        local s, err = ch:recv(dirty and every or nil)
        if not s then
            -- idle for compact_interval_ms, or the end: the compaction still owed
            if dirty then
                local _, cerr, fresh, fed = offload.ack_many(self.meter, {}, true, self.fed)
                if cerr then log("compaction: %s", cerr) end
                self:feed(fresh, fed)
                last, dirty = uv.now(), false
            end
            if err ~= "Timeout" then break end -- closed and empty (rt:wait), or shutdown
            goto continue
        end
        local batch = { s }
        while #batch < max and ch:depth() > 0 do batch[#batch + 1] = ch:recv() end
        local compact = uv.now() - last >= every
        local res, cerr, fresh, fed = offload.ack_many(self.meter, batch, compact, self.fed)
        if compact then last, dirty = uv.now(), false else dirty = true end
        if not res then
            log("ack of %d slices: %s", #batch, tostring(cerr))
        else
            if cerr then log("compaction: %s", cerr) end
            for i, sl in ipairs(batch) do
                if res[i] ~= true then log("ack %s: %s", slice_key(sl), tostring(res[i])) end
            end
        end
        for _, sl in ipairs(batch) do self:ack_done(sl) end
        self:feed(fresh, fed) -- the backlog's slices, read back as the ACKs made room
        ::continue::
    end
end
