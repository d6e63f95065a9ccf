-- ron.wallet.held: payers whose postings one other saga kept reserved for a whole commit
-- (issue 29 item 3, docs/WALLET.md §6): a saga of a node that died or stopped mid-commit,
-- until a survivor recovers it (ron.ledger.lease), or one of this node's commits that
-- outlived its timeout. For hold_ms a money request from such a payer is answered 503
-- account_busy at once (Retry-After), without a worker: the fleet degrades per account, and
-- the payers nobody holds keep the workers. Bounded (two generations of `capacity`).
--
--   local held = require "ron.wallet.held"
--   local h = held.new { clock = fn_ms, hold_ms = 1000, capacity = 4096 }
--   h:mark(account)                 -- its commit ended "postings held by saga ..."
--   h:retry_after_s(account)        -> seconds | nil (not held now)
--   h.refused                       -- requests answered account_busy from here
local lru = require "ron.base.lru"

local ceil, max = math.ceil, math.max

local _M = {}

local H = {}
H.__index = H

function _M.new(o)
    return setmetatable({ clock = o.clock, hold_ms = o.hold_ms or 1000,
                          until_ms = lru.new(o.capacity or 4096), refused = 0, marked = 0 }, H)
end

function H:mark(account)
    self.marked = self.marked + 1
    self.until_ms:put(account, self.clock() + self.hold_ms)
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
