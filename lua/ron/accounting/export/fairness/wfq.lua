-- ron.accounting.export.fairness.wfq: weighted fair queueing by deficit round robin (seed 000
-- C-11, seed 001 §11: per-tenant weights 1..8); FIFO within a tenant.
-- docs/CONCURRENCY.md "Fairness".
--
--   local p = require("ron.accounting.export.fairness.wfq").new {
--       weights = { [tenant_uuid] = 1..8 }, default_weight = 1, cap = 65536 }
--   p:enqueue(tenant, item) -> true | nil, "Busy"
--   p:dequeue([eligible])   -> item, tenant | nil
--   p:len(), p:tenants()
--
-- Every item costs 1. Tenants holding items form a rotation; at its turn a tenant gets
-- `weight` credits and is served until they are spent or it runs empty (then it leaves
-- the rotation and its credit is dropped, so an idle tenant saves nothing up). Over every
-- full rotation backlogged tenants are served exactly in proportion to their weights.
-- Bound: a tenant's next item is served within the sum of the other active tenants'
-- weights (at most 8 per other tenant) dequeues, whatever their backlog.
-- eligible(tenant) -> bool (optional): serve the first tenant in rotation order for which it
-- holds; the ones skipped keep their place and their credit (the router skips tenants at
-- their in-flight cap). opts.tenant_cap: items one tenant may hold (default cap); beyond it
-- enqueue is Busy.
local C = require("ron.accounting.export.fairness.common")
local setmetatable, pairs, type, error, tostring = setmetatable, pairs, type, error, tostring

local _M = { name = "wfq", MIN_WEIGHT = 1, MAX_WEIGHT = 8 }

local P = C.methods({})
P.__index = P

local OPTS = { cap = true, tenant_cap = true, weights = true, default_weight = true }
local FN = "fairness.wfq.new"

function _M.new(opts)
    opts = C.check_opts(FN, opts, OPTS)
    local cap, tcap = C.caps(FN, opts)
    local dw = opts.default_weight
    if dw == nil then dw = 1 end
    C.check_int(FN, "default_weight", dw, _M.MIN_WEIGHT, _M.MAX_WEIGHT)
    local weights = {}
    if opts.weights ~= nil then
        if type(opts.weights) ~= "table" then
            error(FN .. ": weights must be a table, got " .. type(opts.weights), 2)
        end
        for t, w in pairs(opts.weights) do
            if type(t) ~= "string" or t == "" then
                error(FN .. ": weights keys must be tenant strings, got " .. tostring(t), 2)
            end
            C.check_int(FN, "weights[" .. t .. "]", w, _M.MIN_WEIGHT, _M.MAX_WEIGHT)
            weights[t] = w
        end
    end
    return setmetatable({ st = C.new_state(cap, tcap), weights = weights, default_weight = dw }, P)
end

function P:weight(tenant)
    return self.weights[tenant] or self.default_weight
end

function P:enqueue(tenant, item)
    return C.enqueue(self.st, "wfq", tenant, item, self:weight(tenant))
end

function P:dequeue(eligible)
    local st = self.st
    local q, i = C.ring_next(st, eligible)
    if not q then return nil end
    if q.deficit < 1 then q.deficit = q.deficit + q.weight end -- its turn starts
    local item, empty = C.take(st, q)
    q.deficit = q.deficit - 1
    if empty then
        C.ring_remove(st, i)      -- leaves the rotation, credit dropped
    elseif q.deficit < 1 then
        C.ring_remove(st, i)      -- turn over: to the back
        C.ring_push(st, q)
    end
    return item, q.tenant
end

return _M
