-- The ready queue of one scheduler (ron.base.task): the runners to resume on the next loop
-- turn, as parallel arrays (runner, count, two values), so a wake allocates nothing: n >= 0
-- values are a, b; n < 0 means a is a table holding -n values (a task's results for its
-- joiners). The hot paths (channel waits) have no closures and no vararg tables, so LuaJIT
-- compiles them.
--
-- One idle handle (S.pump) empties the queue once per loop turn, the wakes queued before
-- the turn only: what they wake in turn waits for the next turn, so timers and I/O always
-- get the loop (a zero timer would not do: libuv 1.44 runs a timer re-armed at 0 in the same
-- timer pass, forever). S.resume(r, ...) resumes a runner (ron.base.task.runner).
local uv = require("luv")

local unpack = unpack

local M = {}

function M.init(S)
    S.ready_head, S.ready_tail = 1, 0
    S.ready_r, S.ready_n, S.ready_a, S.ready_b = {}, {}, {}, {}
    S.pump = uv.new_idle()
    S.run_ready = function() M.run(S) end
end

-- I-7: wakes queued during this turn move down to 1, so a loop that never goes idle
-- (thousands of workers retrying through an outage) reuses the same slots instead of
-- growing the arrays by one per wake (host-backlog-day-outage caught ~17 B of Lua heap per
-- slice before this).
local function compact(S)
    local ready_r, ready_n, ready_a, ready_b = S.ready_r, S.ready_n, S.ready_a, S.ready_b
    local k = 0
    for i = S.ready_head, S.ready_tail do
        k = k + 1
        ready_r[k], ready_n[k], ready_a[k], ready_b[k] =
            ready_r[i], ready_n[i], ready_a[i], ready_b[i]
        ready_r[i], ready_a[i], ready_b[i] = nil, nil, nil
    end
    S.ready_head, S.ready_tail = 1, k
end

function M.run(S)
    local ready_r, ready_n, ready_a, ready_b = S.ready_r, S.ready_n, S.ready_a, S.ready_b
    local resume = S.resume
    local last = S.ready_tail
    while S.ready_head <= last do
        local i = S.ready_head
        local r, n, a, b = ready_r[i], ready_n[i], ready_a[i], ready_b[i]
        ready_r[i], ready_a[i], ready_b[i] = nil, nil, nil
        S.ready_head = i + 1
        if n >= 0 then
            resume(r, a, b)
        else
            resume(r, unpack(a, 1, -n))
        end
    end
    if S.ready_head > S.ready_tail then
        S.ready_head, S.ready_tail = 1, 0
        S.pump:stop()
    elseif S.ready_head > 1 then
        compact(S)
    end
end

function M.schedule(S, runner, n, a, b)
    local i = S.ready_tail + 1
    S.ready_tail = i
    S.ready_r[i], S.ready_n[i], S.ready_a[i], S.ready_b[i] = runner, n, a, b
    local pump = S.pump
    if not pump:is_active() then pump:start(S.run_ready) end
end

return M
