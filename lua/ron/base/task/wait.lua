-- Waiting and waking for one scheduler (ron.base.task). A waiter w = { runner = r } is where
-- a blocked runner will be found (a channel's receivers, a task's joiners, the drain's
-- waiters); a wake ends the wait and puts the runner on the ready queue, never resuming it
-- from inside another coroutine.
local ready = require("ron.base.task.ready")
local uv = require("luv")

local coroutine_running, coroutine_yield = coroutine.running, coroutine.yield
local error, pairs, select, remove = error, pairs, select, table.remove

local M = {}

local function close_timer(w)
    local t = w.timer
    if t then
        w.timer = nil
        t:stop()
        t:close()
    end
end

local function remove_waiter(list, w)
    for i = #list, 1, -1 do
        if list[i] == w then
            remove(list, i)
            return
        end
    end
end

-- Ends a wait without resuming anybody: the timer closed, the waiter out of every list
-- (w.chs: the channels it waits on; w.cleanup(w): anything else).
function M.unwait(S, w)
    if w.fired then return false end
    w.fired = true
    close_timer(w)
    S.cancellable[w] = nil
    local chs = w.chs
    if chs then
        for i = 1, #chs do remove_waiter(chs[i].receivers, w) end
    elseif w.cleanup then
        w.cleanup(w)
    end
    if w.runner.wait == w then w.runner.wait = nil end
    return true
end
local unwait = M.unwait

-- Wakes w with two results, a and b (next loop turn). False when w was already woken.
function M.wake(S, w, a, b)
    if not unwait(S, w) then return false end
    ready.schedule(S, w.runner, 2, a, b)
    return true
end
local wake = M.wake

-- Wakes w with any number of results.
function M.wake_n(S, w, ...)
    if not unwait(S, w) then return false end
    local n = select("#", ...)
    if n <= 2 then
        ready.schedule(S, w.runner, n, ...)
    else
        ready.schedule(S, w.runner, -n, { ... })
    end
    return true
end

function M.wake_set(S, set, ...)
    for w in pairs(set) do M.wake_n(S, w, ...) end
end

-- The running task's runner; a blocking call from elsewhere raises (at the caller of the
-- public function: level 3).
function M.current(S, fname)
    local co = coroutine_running()
    local r = co and S.runners[co]
    if not r then error(fname .. ": called outside a task (use task.spawn)", 3) end
    return r
end

function M.new_waiter(r)
    local w = { runner = r }
    r.wait = w
    return w
end

local function arm_timer(S, w, timeout_ms)
    local t = uv.new_timer()
    w.timer = t
    t:start(timeout_ms, 0, function() wake(S, w, nil, "Timeout") end)
end

-- Blocks the running task on w (already registered where it will be found) until woken.
-- With timeout_ms the wait ends with nil, "Timeout"; when is_cancellable, shutdown ends it
-- with nil, "Canceled" (at once when already shut down, still after one yield so a loop
-- ignoring "Canceled" can be drained and aborted).
function M.block(S, w, timeout_ms, is_cancellable)
    if is_cancellable then
        if S.reason then
            wake(S, w, nil, "Canceled")
        else
            S.cancellable[w] = true
        end
    end
    if timeout_ms and not w.fired then arm_timer(S, w, timeout_ms) end
    return coroutine_yield()
end

-- block() for the cold paths: setup(w) registers w and sets w.cleanup(w) to undo that.
function M.wait(S, r, setup, timeout_ms, is_cancellable)
    local w = M.new_waiter(r)
    if setup then setup(w) end
    return M.block(S, w, timeout_ms, is_cancellable)
end

return M
