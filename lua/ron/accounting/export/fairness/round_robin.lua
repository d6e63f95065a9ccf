-- ron.accounting.export.fairness.round_robin: strict rotation over the tenants holding items
-- (seed 000 C-11, seed 001 §11); FIFO within a tenant. docs/CONCURRENCY.md "Fairness".
--
--   local p = require("ron.accounting.export.fairness.round_robin").new { cap = 65536 }
--   p:enqueue(tenant, item) -> true | nil, "Busy"
--   p:dequeue([eligible])   -> item, tenant | nil
--   p:len(), p:tenants()
--
-- Bound: with k tenants holding items, a tenant's next item is served within k - 1
-- dequeues of any other tenant, whatever their backlog.
-- eligible(tenant) -> bool (optional): serve the first tenant in rotation order for which it
-- holds; the ones skipped keep their place (the router skips tenants at their in-flight cap).
-- opts.tenant_cap: items one tenant may hold (default cap); beyond it enqueue is Busy.
local C = require("ron.accounting.export.fairness.common")
local setmetatable = setmetatable

local _M = { name = "round_robin" }

local P = C.methods({})
P.__index = P

local OPTS = { cap = true, tenant_cap = true }

function _M.new(opts)
    opts = C.check_opts("fairness.round_robin.new", opts, OPTS)
    local cap, tcap = C.caps("fairness.round_robin.new", opts)
    return setmetatable({ st = C.new_state(cap, tcap) }, P)
end

function P:enqueue(tenant, item)
    return C.enqueue(self.st, "round_robin", tenant, item, 1)
end

function P:dequeue(eligible)
    local st = self.st
    local q, i = C.ring_next(st, eligible)
    if not q then return nil end
    C.ring_remove(st, i)
    local item, empty = C.take(st, q)
    if not empty then C.ring_push(st, q) end -- to the back of the rotation
    return item, q.tenant
end

return _M
