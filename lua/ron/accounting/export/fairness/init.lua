-- ron.accounting.export.fairness: cross-tenant fairness policies for the exporter router (seed
-- 000 C-11, seed 001 §11, STYLE §12). docs/CONCURRENCY.md "Fairness" is the contract.
--
--   local fairness = require("ron.accounting.export.fairness")
--   local p = fairness.round_robin.new { cap = 65536 }
--   local p = fairness.wfq.new { weights = { [tenant] = 1..8 }, default_weight = 1 }
--   fairness.check(p)   -- raises unless p has the policy shape; returns p
--
-- A policy: p:enqueue(tenant, item) -> true | nil, "Busy"; p:dequeue() -> item, tenant |
-- nil; p:len() -> n; p:tenants() -> { tenant, ... }. An operator's own policy is a module
-- whose new() returns a value of that shape.
local check = require("ron.base.check")

local _M = {
    round_robin = require("ron.accounting.export.fairness.round_robin"),
    wfq = require("ron.accounting.export.fairness.wfq"),
    DEFAULT_CAP = require("ron.accounting.export.fairness.common").DEFAULT_CAP,
    METHODS = { "enqueue", "dequeue", "len", "tenants" },
}

function _M.check(p)
    check.policy(p, _M.METHODS, "ron.accounting.export.fairness") -- (no tail call: keeps the level)
    return p
end

return _M
