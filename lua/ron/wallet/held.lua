-- ron.wallet.held: payers whose postings one other saga kept reserved for a whole commit
-- (issue 29 item 3, docs/WALLET.md §6): a saga of a node that died or stopped mid-commit,
-- until a survivor recovers it (ron.ledger.lease), or one of this node's commits that
-- outlived its timeout. For hold_ms a money request from such a payer is answered 503
-- account_busy at once (Retry-After), without a worker: the fleet degrades per account, and
-- the payers nobody holds keep the workers. Bounded (two generations of `capacity`).
--
--   local held = require("ron.wallet.held")
--   local h = held.new { clock = fn_ms, hold_ms = 1000, capacity = 4096 }
--   h:mark(account)                 -- its commit ended "postings held by saga ..."
--   h:retry_after_s(account)        -> seconds | nil (not held now)
--   h:suspect(account)              -> true: held within suspect_ms (default 60 s) and not
--                                      committed since: its jobs run apart from the group
--                                      commit (ron.wallet.committer), so that the drive that
--                                      finds it held again delays nobody else
--   h:watch(account)                -- a group commit handed a member of its back (another
--                                      saga holds its postings): suspect from now (its jobs
--                                      run apart), not refused at intake (it may be a race)
--   h:enter(account) -> m           -- a job or chain apart of it starts (after h:ready(m):
--   h:ready(m), h:leave(account, m)    the one before it left); h:leave when it ends
--   h:clear(account)                -- it committed: no longer suspect
--   h:forget()                      -- a survivor recovered a dead node's sagas: the
--                                      postings they held are free, so no payer is held
--                                      or suspect now (one still held is found again by
--                                      its next group's hand-back)
--   h.refused                       -- requests answered account_busy from here
local lru = require("ron.base.lru")

local ceil, max = math.ceil, math.max

local _M = {}

local H = {}
H.__index = H

function _M.new(o)
    return setmetatable({ clock = o.clock, hold_ms = o.hold_ms or 1000,
                          suspect_ms = o.suspect_ms or 60000, capacity = o.capacity or 4096,
                          until_ms = lru.new(o.capacity or 4096),
                          seen_ms = lru.new(o.capacity or 4096), refused = 0, marked = 0,
                          -- the jobs run apart (ron.wallet.committer): in all, now, by payer
                          apart = 0, apart_live = 0, apart_of = {},
                          -- the tasks driving handed-back members (ron.wallet.committer)
                          handed_live = 0 }, H)
end

function H:watch(account)
    self.seen_ms:put(account, self.clock())
end

function H:mark(account)
    self.marked = self.marked + 1
    local now = self.clock()
    self.until_ms:put(account, now + self.hold_ms)
    self.seen_ms:put(account, now)
end

function H:suspect(account)
    if account == nil then return false end
    local t = self.seen_ms:get(account)
    if t == nil then return false end
    if self.clock() - t > self.suspect_ms then
        self.seen_ms:delete(account)
        return false
    end
    return true
end

-- Anything run apart or driven now (ron.wallet.committer: a lane then commits one group at
-- a time, so that run_apart sees every mark of the group before).
function H:busy()
    return self.handed_live > 0 or self.apart_live > 0 or next(self.apart_of) ~= nil
end

-- A payer's work apart keeps its order (docs/WALLET.md §6): each job run apart and each
-- chain of handed-back members enters behind the one of the same payer before it (its mark,
-- apart_of[account] the last) and starts once that one left. Two groups of a lane in flight
-- can each hand back a member of one payer; the later chain used to start beside the
-- earlier one, so the two could commit in either order.
function H:enter(account)
    local m = { prev = self.apart_of[account] }
    self.apart_of[account] = m
    return m
end

function H:leave(account, m)
    m.done, m.prev = true, nil
    if self.apart_of[account] == m then self.apart_of[account] = nil end
end

function H:ready(m)
    return m.prev == nil or m.prev.done == true
end

function H:clear(account)
    if account ~= nil and self.seen_ms:get(account) ~= nil then self.seen_ms:delete(account) end
end

function H:forget()
    self.until_ms, self.seen_ms = lru.new(self.capacity), lru.new(self.capacity)
end

function H:retry_after_s(account)
    local t = self.until_ms:get(account)
    if t == nil then return nil end
    local left = t - self.clock()
    if left <= 0 then
        self.until_ms:delete(account)
        return nil
    end
    self.refused = self.refused + 1
    return max(1, ceil(left / 1000))
end

return _M
