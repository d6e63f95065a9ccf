-- ron.ledger.lease: a node's lease on its ledger store, with fencing, and the survivors'
-- recovery of a node whose lease expired (issue 29 item 3, docs/LEDGER.md "Recovery",
-- LED-71). A node that died mid-commit holds its sagas' reservations (and heads) until
-- someone recovers them; with leases that is a live node of the fleet, within a bound.
--
--   local lease = require("ron.ledger.lease")
--   local l = lease.new { store = s, node = "wallet-1", ttl_ms = 5000, renew_ms = 1000,
--                         sleep = task.sleep, clock = uv.now, log = fn? }
--   l:acquire(stop?)        -> epoch | nil (stop() turned true while another node held it);
--                              a lost lease stays lost: a new engine takes a new one
--   led.lease = l           -- the engine's every write carries the guard (lease.guard)
--   l:renew()               -> true | nil, err | false (lost: another node took it over)
--   l:scan(led)             -> list of { node, epoch, sagas, err? }: peers taken over now;
--                              .idle: led:resume_idle()'s report when it resumed any
--                              (this node's own sagas nobody drove: a recovered peer's
--                              still racing, say)
--
-- The lease is a row of the store's `leases` table: (node, epoch, owner, expires_ms) in the
-- store's clock (PostgreSQL's, so the nodes' clocks need not agree). A live node renews it
-- every renew_ms (expiry = now + ttl_ms). Every write of a leased engine runs in a
-- transaction with check_lease(node, epoch) (a phase's extra op; a lone primitive becomes a
-- phase of one): the write lands only while the epoch is the node's.
--
-- A survivor's scan takes over a peer whose row stayed expired and unchanged for a whole
-- renew period (a stalled database that came back is not a dead fleet: the peers renew
-- within that period): lease_takeover bumps the epoch and makes the survivor the owner in
-- one statement, on PostgreSQL under the node's exclusive advisory lock, which every phase
-- of that node holds shared while it checks its epoch, so the takeover waits for the phases
-- in flight and none of the old epoch commits after it. The survivor first ends the node's
-- backends (a dead process's statement still running, a stopped one's open transaction),
-- then recovers the node's sagas with its own engine (Ledger:recover { node = peer }:
-- released, finished or driven again, their records then the survivor's), then releases
-- the row (owner NULL: nothing to recover). A node that comes back, restarted or resumed
-- after a stop, finds its epoch taken: its writes count 0 at check_lease (its engine is
-- fenced for good: l.lost), and it acquires a new epoch with a new engine once the row is
-- free again. So a saga the survivor recovered is never driven twice: the old process can
-- no longer write, whatever it still holds in memory.
--
-- The bound: a node dead at t renewed at most renew_ms before; its row expires by
-- t + ttl_ms, a survivor sees it expired within renew_ms and takes it over after a further
-- renew_ms unchanged: its sagas are released by t + ttl_ms + 2 x renew_ms plus the
-- recovery's own time.
local format, ipairs, pairs, tostring, type = string.format, ipairs, pairs, tostring, type

local _M = {}

_M.DEFAULTS = { ttl_ms = 5000, renew_ms = 1000 }

-- The primitives that write: a leased engine runs each in a transaction with its guard
-- (the list lives with the phases' primitives, ron.ledger.store.phase).
_M.WRITES = require("ron.ledger.store.phase").WRITES

local Lease = {}
Lease.__index = Lease

function _M.new(o)
    if type(o) ~= "table" or not o.store or type(o.node) ~= "string" or o.node == "" then
        error("ron.ledger.lease.new: store and node are required", 2)
    end
    local self = setmetatable({ store = o.store, node = o.node,
                                ttl_ms = o.ttl_ms or _M.DEFAULTS.ttl_ms,
                                renew_ms = o.renew_ms or _M.DEFAULTS.renew_ms,
                                sleep = o.sleep, clock = o.clock, log = o.log or function() end,
                                epoch = nil, lost = false,
                                seen = {}, owned = {},
                                stats = { renewals = 0, renew_failures = 0, takeovers = 0,
                                          recovered = 0, lost = 0, released = 0 } }, Lease)
    if not (self.ttl_ms > 0 and self.renew_ms > 0 and self.renew_ms < self.ttl_ms) then
        error("ron.ledger.lease.new: 0 < renew_ms < ttl_ms", 2)
    end
    if type(self.sleep) ~= "function" or type(self.clock) ~= "function" then
        error("ron.ledger.lease.new: sleep(ms) and clock() (ms) are required", 2)
    end
    return self
end

-- The guard a phase of this lease's engine carries (ron.ledger.phases appends it).
function Lease:guard()
    return { "check_lease", self.node, self.epoch, expect = 1, lease = true }
end

-- The error a fenced engine raises instead of writing (a store failure: Unavailable).
function Lease:fenced_error()
    return { ledger_store_failure = true, name = "lease", class = "fenced",
             err = format("Fenced: node %s's lease (epoch %s) was taken over; this engine "
                          .. "writes no more", self.node, tostring(self.epoch)) }
end

-- Waits until this node holds its own lease (another node may be recovering it). -> epoch,
-- or nil when stop() turned true.
function Lease:acquire(stop)
    local said
    while not (stop and stop()) do
        local e, err = self.store:lease_acquire(self.node, self.ttl_ms)
        if e and e > 0 then
            self.epoch = e
            return e
        end
        if not said then
            said = true
            if e == 0 then
                local owner = "another node"
                for _, r in ipairs(self.store:list_leases() or {}) do
                    if r.node == self.node and r.owner then owner = r.owner end
                end
                self.log(format("lease: node %s is held by %s (recovering its sagas); waiting",
                                self.node, tostring(owner)))
            else
                self.log(format("lease: acquiring node %s's lease failed: %s (retrying)",
                                self.node, tostring(err)))
            end
        end
        self.sleep(self.renew_ms)
    end
    return nil
end

-- Renews this node's lease, and the rows of the peers it is recovering. -> true | false
-- (lost: the epoch is another's now; self.lost) | nil, err (the store failed: try again)
function Lease:renew()
    if self.lost then return false end
    local n, err = self.store:lease_renew(self.node, self.epoch, self.node, self.ttl_ms)
    if n == nil then
        self.stats.renew_failures = self.stats.renew_failures + 1
        return nil, err
    end
    if n == 0 then
        self.lost = true
        self.stats.lost = self.stats.lost + 1
        self.log(format("lease: node %s's lease (epoch %s) was taken over by another node: "
                        .. "this engine is fenced", self.node, tostring(self.epoch)))
        return false
    end
    self.stats.renewals = self.stats.renewals + 1
    for peer, e in pairs(self.owned) do
        self.store:lease_renew(peer, e, self.node, self.ttl_ms)
    end
    return true
end

-- The peers whose rows stayed expired and unchanged for a whole renew period.
function Lease:_due(rows)
    local now, due, live = self.clock(), {}, {}
    for _, r in ipairs(rows) do
        if r.node ~= self.node and r.owner ~= nil and r.expires_ms ~= nil then
            if r.expires_ms < r.now_ms then
                live[r.node] = true
                local s = self.seen[r.node]
                if s and s.epoch == r.epoch and s.expires_ms == r.expires_ms then
                    if now - s.at >= self.renew_ms then due[#due + 1] = r end
                else
                    self.seen[r.node] = { epoch = r.epoch, expires_ms = r.expires_ms, at = now }
                end
            end
        end
    end
    for node in pairs(self.seen) do if not live[node] then self.seen[node] = nil end end
    return due
end

-- Recovers a peer this node owns, then frees its row. -> the report entry
function Lease:_recover(led, peer, epoch)
    local store = self.store
    if store.fence_node then store:fence_node(peer) end -- what connected since the takeover
    local report, err = led:recover { node = peer }
    local out = { node = peer, epoch = epoch, sagas = report and #report or 0, err = err }
    if not report then
        self.log(format("lease: recovering node %s failed: %s (again at the next scan)", peer,
                        tostring(err)))
        return out
    end
    self.stats.recovered = self.stats.recovered + #report
    local n = store:lease_release(peer, epoch, self.node)
    if n == 1 then
        self.owned[peer] = nil
        self.stats.released = self.stats.released + 1
    end
    self.log(format("lease: node %s recovered by %s: %d saga(s)%s", peer, self.node, #report,
                    n == 1 and "; its lease is free" or "; its lease stays ours (release failed)"))
    return out
end

-- Takes over every peer due (dead for a renew period past its expiry) and recovers it with
-- led (this node's engine), then the peers still owned from an earlier scan. -> list
function Lease:scan(led)
    if self.lost then return {} end
    local store = self.store
    local rows, err = store:list_leases()
    if not rows then return nil, err end
    local out = {}
    for _, r in ipairs(self:_due(rows)) do
        -- a dead process's statement, or a stopped one's open transaction, would hold the
        -- takeover's lock: end them first
        if store.fence_node then store:fence_node(r.node) end
        local n = store:lease_takeover(r.node, r.epoch, r.expires_ms, self.node, self.ttl_ms)
        if n == 1 then
            self.seen[r.node] = nil
            self.owned[r.node] = r.epoch + 1
            self.stats.takeovers = self.stats.takeovers + 1
            self.log(format("lease: node %s's lease expired %d ms ago (owner %s, epoch %s): "
                            .. "taken over by %s", r.node, r.now_ms - r.expires_ms,
                            tostring(r.owner), tostring(r.epoch), self.node))
        end
    end
    for peer, e in pairs(self.owned) do
        if self.lost then break end
        out[#out + 1] = self:_recover(led, peer, e)
    end
    -- then this node's own sagas nobody drives: a peer's whose drive was still racing when
    -- recovered (its record this node's now), an own commit that answered Unavailable;
    -- each decided here, not only at a retry on this node (issue 29 item 4)
    if not self.lost and led.resume_idle then
        local idle = led:resume_idle()
        if idle and #idle > 0 then out.idle = idle end
    end
    return out
end

return _M
