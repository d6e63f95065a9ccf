-- ron.wallet.fleet: the wallet daemon's node lease on the ledger (ron.ledger.lease, LED-71;
-- issue 29 item 3, docs/WALLET.md §6). Several wallet daemons on one PostgreSQL ledger
-- (the fleet shape) each hold a lease under their node name; when one dies mid-commit, a
-- survivor takes its lease over once it expired and recovers its sagas, so the dead
-- node's reservations are released within a bound instead of until it restarts.
--
--   local fleet = require("ron.wallet.fleet")
--   local f = fleet.new(w, { ttl_ms = 5000, engine = fn() -> a new engine, log = fn })
--   f:start()       -- in a task, the store open: acquire the lease (w.led guarded), then
--                   -- the heartbeat and the survivor's scan run as the wallet's tasks
--   f:render(out)   -- wallet_lease_* (service.metrics_text)
--
-- The heartbeat renews every ttl_ms / 5. When the renewal finds the lease taken over (this
-- process stopped, or lost the database, for longer than the lease), the engine is fenced
-- for good (every write refused by the store, whatever it still had in flight): the wallet
-- is not ready ("lease lost"), answers money routes 503, and rejoins with a NEW engine
-- under a new epoch once the row is free again (the survivor released it), after
-- recovering what is still its node's. The old engine's sagas were the survivor's to
-- finish; nothing of them is driven twice.
local FAM = require("ron.wallet.families")
local lease = require("ron.ledger.lease")
local task = require("ron.base.task")
local uv = require("luv")

local format, ipairs, pairs, pcall, tostring = string.format, ipairs, pairs, pcall, tostring

local _M = {}

local F = {}
F.__index = F

function _M.new(w, o)
    return setmetatable({ w = w, ttl_ms = o.ttl_ms, renew_ms = math.floor(o.ttl_ms / 5),
                          engine = o.engine, log = o.log or w.log, rejoins = 0, totals = {} },
                        F)
end

function F:_lease(store, node)
    return lease.new { store = store, node = node, ttl_ms = self.ttl_ms,
                       renew_ms = self.renew_ms, sleep = task.sleep, clock = uv.now,
                       log = self.log }
end

-- The lease events of lost leases (a rejoin starts a new lease object) add up here.
function F:_fold(l)
    for k, v in pairs(l.stats) do self.totals[k] = (self.totals[k] or 0) + v end
end

function F:start()
    local w = self.w
    local l = self:_lease(w.store, w.led.node)
    if not l:acquire(function() return w.stopping end) then return nil end
    w.led.lease, self.l = l, l
    w.fleet = self
    w:_spawn("lease", function() return self:_heartbeat() end)
    w:_spawn("lease", function() return self:_scan() end)
    return true
end

function F:_heartbeat()
    local w = self.w
    local said = false
    while not w.stopping do
        if not task.sleep(self.renew_ms) then break end
        if w.stopping then break end
        local ok, err = self.l:renew()
        if ok == false then
            self:_rejoin()
        elseif ok == nil and not said then
            said = true
            self.log(format("lease: renewing failed: %s (retrying)", tostring(err)))
        elseif ok then
            said = false
        end
    end
    return true
end

function F:_scan()
    local w = self.w
    while not w.stopping do
        if not task.sleep(self.renew_ms) then break end
        if w.stopping then break end
        if not self.l.lost then
            local ok, got = pcall(self.l.scan, self.l, w.led)
            if not ok then self.log("lease: scan error: " .. tostring(got))
            else self:_recovered(got) end
        end
    end
    return true
end

-- After a scan (its list, or nil): once a peer's sagas are recovered, the postings they
-- held are free, so the payers this node found held (by them, most likely) commit again
-- from their next request, in the groups: without this each stayed suspect until it
-- committed apart, APART_MAX (2) at a time (ron.wallet.committer), and with 8 such payers
-- and commits of 2 s (load average 20) the last resumed 14 s after the kill, not 7-9 s.
function F:_recovered(list)
    for _, r in ipairs(list or {}) do
        if not r.err and (r.sagas or 0) > 0 then
            self.w.held:forget()
            return true
        end
    end
    return false
end

-- This node's lease was taken over: a new engine under a new epoch, once the row is free.
function F:_rejoin()
    local w = self.w
    w.not_ready.lease = "wallet: this node's ledger lease was taken over (fenced); rejoining"
    self:_fold(self.l)
    local led = self.engine()
    led.store = w.store
    local l = self:_lease(w.store, led.node)
    if not l:acquire(function() return w.stopping end) then return end
    led.lease = l
    local res, err = led:recover()
    if not res then
        self.log(format("lease: rejoined at epoch %s, recover failed: %s", tostring(l.epoch),
                        tostring(err)))
    end
    w.led, self.l = led, l
    self.rejoins = self.rejoins + 1
    self.log(format("lease: node %s rejoined at epoch %s (%d saga(s) of its own recovered)",
                    led.node, tostring(l.epoch), res and #res or 0))
    w.not_ready.lease = nil
end

function F:render(out)
    local l = self.l
    FAM.lease_epoch:render(out, l and l.epoch or 0)
    local rows = {}
    for _, k in ipairs { "renewals", "renew_failures", "takeovers", "recovered", "released",
                         "lost" } do
        rows[#rows + 1] = { k, (self.totals[k] or 0) + (l and l.stats[k] or 0) }
    end
    rows[#rows + 1] = { "rejoins", self.rejoins }
    FAM.lease_events:render(out, rows)
end

return _M
