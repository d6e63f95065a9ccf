-- ron.accounting.runtime.stuck: streams that cannot advance (issue 14 item 1, I-14). A
-- stream is stuck when its op budget ended on gap (the earlier seqs did not arrive in all
-- that time: the producer lost them, e.g. a WAL segment, or the downstream was restored
-- from an old backup) or when it answered conflict (two chains for one stream). Stuck is an
-- alert-class state: logged once with the remedy, counted (accounting_streams_stuck, the
-- per-stream gauge), a /readyz reason, until a slice of the stream is ACKed again.
--
-- The operator's remedy for a gap, accept_loss: the downstream records the missing seqs as
-- given up (exporter capability accept_loss, docs/EXPORT.md §2, "Accepted losses") and
-- the stream goes on; the log line says exactly which seqs were given up and that their
-- usage is unknown. Owns the streams' stuck marks (st.stuck), their count and the accepted
-- losses' counts.
local rt = require("ron.accounting.runtime.rt")
local uv = require("luv")

local format, pairs, sort, concat, tostring, tonumber, type =
      string.format, pairs, table.sort, table.concat, tostring, tonumber, type
local skey, log = rt.skey, rt.log

local _M = {}

local K = rt.class(_M, "Stuck")

local REMEDY = {
    gap = "the downstream misses the seqs before it (a WAL segment lost or damaged, or a "
          .. "restored downstream): check `ron-accounting verify` on the WAL; to give them up "
          .. "explicitly, `ron-accounting streams accept-loss` (docs/ops/failure-modes.md)",
    conflict = "the downstream holds another chain for this stream (two producers, or a "
               .. "restored WAL): compare `ron-accounting verify` on both sides; the stream's "
               .. "worker stopped (docs/ops/failure-modes.md)",
}

-- o.streams: the router's; o.feeder: its clock; workers wired after (their events log)
function _M.new(o)
    return rt.object(K, o, "streams exporter feeder audit",
                     { stuck_n = 0, losses_accepted = 0, lost_slices = 0 })
end

-- A stream that cannot advance (gap the op budget could not fill, conflict): an alert-class
-- state, logged once per stream with the remedy, counted in readiness and metrics until a
-- slice of the stream is ACKed again (I-14; issue 14 item 1).
function K:set(st, s, reason, detail)
    local prev = st.stuck
    if prev and prev.reason == reason and prev.seq == s.id.seq then return end
    if not prev then self.stuck_n = self.stuck_n + 1 end
    st.stuck = { reason = reason, seq = s.id.seq, since_ms = uv.now(), detail = detail,
                 prev_b3 = s.prev_b3 }
    log("STUCK: stream %s cannot advance at seq %s: %s (%s). %s", st.key, tostring(s.id.seq),
        reason, tostring(detail), REMEDY[reason])
    if self.audit then
        self.audit("stream", { event = "stuck", reason = reason, tenant = st.tenant,
                               dimension = st.dim, seq = tonumber(s.id.seq) })
    end
    self.workers:event { "stuck", st.key, s.id.seq, reason }
end

function K:clear(st)
    log("stream %s advances again (was stuck at seq %s: %s)", st.key, tostring(st.stuck.seq),
        st.stuck.reason)
    if self.audit then
        self.audit("stream", { event = "unstuck", reason = st.stuck.reason, tenant = st.tenant,
                               dimension = st.dim, seq = tonumber(st.stuck.seq) })
    end
    st.stuck = nil
    self.stuck_n = self.stuck_n - 1
end

-- "N streams stuck: <stream> at seq S (gap), ..." naming at most three (the log and the
-- per-stream gauge have them all).
function K:reason()
    local list = {}
    for _, st in pairs(self.streams) do
        if st.stuck then
            list[#list + 1] = format("%s at seq %s (%s)", st.key, tostring(st.stuck.seq),
                                     st.stuck.reason)
        end
    end
    sort(list)
    local more = #list > 3 and format(", and %d more", #list - 3) or ""
    for i = #list, 4, -1 do list[i] = nil end
    return format("%d stream%s stuck: %s%s", self.stuck_n, self.stuck_n == 1 and "" or "s",
                  concat(list, ", "), more)
end

-- The stuck streams, for the admin route: { { tenant, dimension, reason, seq, since_ms,
-- detail }, ... } sorted by stream.
function K:list()
    local out = {}
    for _, st in pairs(self.streams) do
        local k = st.stuck
        if k then
            out[#out + 1] = { tenant = st.tenant, dimension = st.dim, reason = k.reason,
                              seq = k.seq, stuck_ms = uv.now() - k.since_ms,
                              detail = tostring(k.detail) }
        end
    end
    sort(out, function(a, b)
        return a.tenant .. "/" .. a.dimension < b.tenant .. "/" .. b.dimension end)
    return out
end

-- Why a stream's loss cannot be accepted (nil: it can). -> err
local function refuse(self, st, tenant, dimension)
    local k = st and st.stuck
    if not k then return format("NotFound: stream %s/%s is not stuck", tenant, dimension) end
    if k.reason ~= "gap" then
        return format("InvalidArgument: stream %s/%s is stuck on %s, not on a gap: an "
                      .. "accepted loss resolves a gap only (see the remedy in the log)",
                      tenant, dimension, k.reason)
    end
    if type(self.exporter.accept_loss) ~= "function" then
        return "Unsupported: this exporter cannot record an accepted loss (the file, "
               .. "PostgreSQL and HTTP ledgers can: docs/EXPORT.md §2, Accepted losses)"
    end
end

-- From a task: gives up the seqs a stuck-on-gap stream waits for. -> { from, to } | nil, err
-- The seqs head+1 .. S-1 (S: the slice the stream waits at) are recorded downstream as an
-- accepted loss; the slice S links to what the producer sealed before it, so the loss
-- record of S-1 carries S's prev_b3. The worker's next try of S is then accepted. Usage
-- of the given-up seqs is unknown (their slices are gone): the log line says so.
function K:accept_loss(tenant, dimension, reason)
    if type(tenant) ~= "string" or type(dimension) ~= "string" then
        return nil, "InvalidArgument: accept_loss(tenant, dimension, reason)"
    end
    local st = self.streams[skey(tenant, dimension)]
    local why = refuse(self, st, tenant, dimension)
    if why then return nil, why end
    local k = st.stuck
    local r, err = self.exporter:accept_loss { tenant = tenant, dimension = dimension,
                                               through_seq = k.seq - 1, link_b3 = k.prev_b3,
                                               reason = reason, now_s = self.feeder:now_s() }
    if not r then return nil, err end
    self.losses_accepted = self.losses_accepted + 1
    self.lost_slices = self.lost_slices + (r.to - r.from + 1)
    log("LOSS ACCEPTED: stream %s/%s: seqs %d..%d (%d slices) given up by the operator (%s); "
        .. "their usage is unknown (the slices are gone); the stream goes on at seq %d",
        tenant, dimension, r.from, r.to, r.to - r.from + 1, reason or "no reason given",
        k.seq)
    self.workers:event { "loss_accepted", st.key, r.from, r.to }
    return r
end

return _M
