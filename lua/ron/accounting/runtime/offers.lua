-- ron.accounting.runtime.offers: the one owner of what is offered (issue 26; STYLE.md 9b,
-- the C core's meter.c facade over a pure ring is the model). A slice is "offered" while it
-- is in the pipeline (pending_slices, the fairness policy, a lane, a worker's export, its
-- meter ACK); only this object writes what is offered, since when, what must be re-offered,
-- the streams' order marks and what was delivered. The feed, the router, the workers and
-- the ACK batches call it:
--
--   offers:offer(s)                    -> false when pending_slices is full (a busy shed)
--   offers:reoffer_list(list[, fresh]) -- pending slices, oldest first, until full
--   offers:reoffer()                   -- every pending slice of the meter not offered
--   offers:feed(fresh)                 -- what entered the meter's ring since the last call
--   offers:shed(s, reason)             -- the router: out of the pipeline, re-offered later
--   offers:block(key, seq)             -- a stream waits for seq (I-5)
--   offers:route_check(key, seq)       -- "conflict" | "blocked" | nil (route it)
--   offers:waits(key, seq)             -- seq is behind the slice its stream waits for
--   offers:undelivered(key, s, dead)   -- a worker's op ended without delivery
--   offers:dropped(s)                  -- a slice a failed lane held behind it
--   offers:was_delivered(s), offers:delivered(key, s)   -- ok/dup answered (I-17)
--   offers:acked(s)                    -> ms since first offered: the meter ACK is done
--
-- Nothing is ever lost by a shed: every slice stays in the meter's pending ring (and its
-- WAL) until an ACK. A shed slice is simply not offered any more; `need` says some pending
-- slice may not be in the pipeline, and the next walk of meter:pending() (O(pending), only
-- then) offers it again. A stream whose slice N was shed is blocked at N: its later slices
-- are shed too until N comes back (I-5). Per-slice state is bounded by the slices in the
-- pipeline; the ACK LRU by ack_lru.
local rt = require("ron.accounting.runtime.rt")
local uv = require("luv")

local ipairs, tonumber = ipairs, tonumber
local skey, slice_key = rt.skey, rt.slice_key

local _M = {}

local O = rt.class(_M, "Offers")

-- o = { pending = the pending_slices channel, list_pending = fn() -> the meter's pending
--       slices, ack_lru = n, audit = fn(kind, attrs) | nil }
function _M.new(o)
    return rt.object(O, o, "pending list_pending audit", {
        lru_cap = o.ack_lru,
        offered = {},    -- slice key -> true while in the pipeline
        offered_at = {}, -- slice key -> uv.now() when first offered
        need = true,     -- some pending slice may not be in the pipeline (need_reoffer)
        stream = {},     -- stream key -> { delivered = seq, blocked = seq, dead = true }
        lru = {}, lru_q = {}, lru_head = 1, lru_tail = 0, -- ACKed (key/b3), I-17
        rejected = { order_overflow = 0, busy = 0, blocked = 0 }, -- sheds by reason
        stale_listed = 0, -- fresh listings of slices already delivered (specs read it)
    })
end

local function ost(self, k)
    local x = self.stream[k]
    if not x then
        x = {}
        self.stream[k] = x
    end
    return x
end

-- Out of the pipeline, counted by reason, re-offered later.
function O:shed(s, reason)
    self.rejected[reason] = (self.rejected[reason] or 0) + 1
    if self.audit then
        self.audit("shed", { source = "runtime", reason = reason, tenant = s.tenant,
                             dimension = s.dimension, seq = tonumber(s.id.seq) })
    end
    self.offered[slice_key(s)] = nil
    self.need = true
end

-- Offers one slice to pending_slices; false when full (counted, stays pending).
function O:offer(s)
    local k = slice_key(s)
    if self.offered[k] then return true end
    if not self.pending:try_send(s) then
        self:shed(s, "busy")
        return false
    end
    self.offered[k] = true
    if not self.offered_at[k] then self.offered_at[k] = uv.now() end
    return true
end

-- Offers a list of pending slices, oldest first, until pending_slices is full (the rest is
-- re-offered later: need). fresh (the feed's lists): a slice its stream has already
-- delivered (seq <= the last one answered ok or dup) is not offered again. The rollover's
-- and the ACK batch's pool calls both list "since push number fed" and may overlap: a late
-- list can hold a slice the other one fed, that was exported and ACKed meanwhile. Offered
-- again, it went to the ledger past the ACK LRU: a dup, but after its stream's later seqs
-- (G-17's order check caught it, "63 -> 1").
function O:reoffer_list(list, fresh)
    for _, s in ipairs(list) do
        local x = self.stream[skey(s.tenant, s.dimension)]
        if fresh and x and x.delivered and s.id.seq <= x.delivered then
            self.stale_listed = self.stale_listed + 1
        elseif x and x.blocked and s.id.seq > x.blocked then
            self.need = true -- after the one its stream waits for (I-5)
        elseif not (x and x.dead) and not self:offer(s) then
            break
        end
    end
end

-- Every pending slice of the meter not in the pipeline yet, oldest first.
function O:reoffer()
    self.need = false
    self:reoffer_list(self.list_pending())
end

-- What entered the pending ring since the last pool call (newly sealed slices, and slices
-- the WAL's backlog gave back as ACKs made room): offered in order. While older slices wait
-- for a re-offer (need) these wait too: the re-offer walks the ring in order, so a stream's
-- later slice can never pass its earlier one (I-5).
function O:feed(fresh)
    if fresh and #fresh > 0 and not self.need then self:reoffer_list(fresh, true) end
end

-- A stream waits for seq (I-5): its later slices are shed until seq comes back.
function O:block(k, seq)
    local x = ost(self, k)
    if not x.blocked or seq < x.blocked then x.blocked = seq end
end

-- seq is behind the slice its stream waits for.
function O:waits(k, seq)
    local x = self.stream[k]
    return x ~= nil and x.blocked ~= nil and seq > x.blocked
end

-- Before a lane: the stream is dead ("conflict"), seq waits behind the blocked one
-- ("blocked"), or it goes on (nil; the blocked seq itself unblocks its stream). Earlier
-- slices, still in the policy when the blocked one was shed, go on.
function O:route_check(k, seq)
    local x = self.stream[k]
    if not x then return nil end
    if x.dead then return "conflict" end
    local b = x.blocked
    if b then
        if seq > b then return "blocked" end
        if seq == b then x.blocked = nil end
    end
    return nil
end

-- A worker's op on s ended without delivery (fail, conflict): s leaves the pipeline and its
-- stream waits for it (what the lane held behind it goes back too: dropped); a conflict
-- kills the stream (its worker ends).
function O:undelivered(k, s, dead)
    self.offered[slice_key(s)] = nil
    local x = ost(self, k)
    x.blocked = s.id.seq
    if dead then x.dead = true end
    self.need = true
end

function O:dropped(s)
    self.offered[slice_key(s)] = nil
end

local function ack_key(s)
    local k = s._rt_ack
    if not k then
        k = slice_key(s) .. "/" .. s.b3
        s._rt_ack = k
    end
    return k
end

-- Delivered and ACKed before: a re-offer is answered dup without a put (I-17).
function O:was_delivered(s)
    return self.lru[ack_key(s)] ~= nil
end

-- Answered ok or dup. A stream exports in seq order: everything up to s is delivered.
function O:delivered(k, s)
    local ak = ack_key(s)
    if not self.lru[ak] then
        self.lru[ak] = true
        self.lru_tail = self.lru_tail + 1
        self.lru_q[self.lru_tail] = ak
        if self.lru_tail - self.lru_head + 1 > self.lru_cap then
            self.lru[self.lru_q[self.lru_head]] = nil
            self.lru_q[self.lru_head] = nil
            self.lru_head = self.lru_head + 1
        end
    end
    local x = ost(self, k)
    if not x.delivered or s.id.seq > x.delivered then x.delivered = s.id.seq end
end

-- The meter has s's ACK: it leaves the pipeline (until then a re-offer cannot resend it).
-- -> the ms since it was first offered (nil if it never was: a spec's direct ACK)
function O:acked(s)
    local k = slice_key(s)
    self.offered[k] = nil
    local t0 = self.offered_at[k]
    self.offered_at[k] = nil
    return t0 and uv.now() - t0
end

return _M
