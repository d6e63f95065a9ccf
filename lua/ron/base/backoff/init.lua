-- ron.base.backoff: retry delay policies (the export workers, seed 001 §5; the PostgreSQL
-- client's reconnects; STYLE §12). docs/EXPORT.md "Backoff" is the contract.
--
--   local backoff = require("ron.base.backoff")
--   local b = backoff.exponential.new { base_ms = 50, cap_ms = 5000, jitter = "full" }
--   backoff.within_budget(b, attempt, elapsed_ms[, budget_ms]) -> ms | nil, "Timeout"
--   backoff.check(b)    -- raises unless b has the policy shape; returns b
--
-- A policy: b:delay(attempt) -> ms (an integer >= 0; attempt 1, 2, ...) and b:reset().
-- An operator's own policy is a module whose new() returns a value of that shape.
local check = require("ron.base.check")

local type, error, tostring, format = type, error, tostring, string.format

local _M = {
    exponential = require("ron.base.backoff.exponential"),
    OP_BUDGET_MS = 10000, -- seed 001 §5: the global op deadline
    METHODS = { "delay", "reset" },
}

function _M.check(b)
    check.policy(b, _M.METHODS, "ron.base.backoff") -- (no tail call: keeps the level)
    return b
end

local function check_ms(what, v)
    if type(v) ~= "number" or v ~= v or v < 0 or v == math.huge then
        error(format("backoff.within_budget: %s must be a finite number >= 0, got %s", what,
                     tostring(v)), 3)
    end
    return v
end

-- The delay before retry number attempt, or nil, "Timeout" when waiting it would reach
-- the end of the op budget (a retry that could only start at or after the deadline is
-- not made). elapsed_ms: time spent on the operation so far, its tries and waits.
function _M.within_budget(b, attempt, elapsed_ms, budget_ms)
    check_ms("elapsed_ms", elapsed_ms)
    if budget_ms == nil then budget_ms = _M.OP_BUDGET_MS end
    check_ms("budget_ms", budget_ms)
    local remaining = budget_ms - elapsed_ms
    if remaining <= 0 then return nil, "Timeout" end
    local d = b:delay(attempt)
    if type(d) ~= "number" or d ~= d or d < 0 then
        error("backoff.within_budget: policy delay() returned " .. tostring(d)
              .. ", not a number >= 0", 2)
    end
    if d >= remaining then return nil, "Timeout" end
    return d
end

return _M
