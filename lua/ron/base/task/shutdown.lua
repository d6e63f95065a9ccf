-- The shutdown token, the drain and the host's hooks for one scheduler (ron.base.task).
local check = require("ron.base.task.check")
local ready = require("ron.base.task.ready")
local runner = require("ron.base.task.runner")
local wait = require("ron.base.task.wait")
local uv = require("luv")

local error, ipairs, pairs, pcall, tostring, type = error, ipairs, pairs, pcall, tostring, type
local concat, sort, format = table.concat, table.sort, string.format
local check_ms, log = check.check_ms, check.log

local M = {}

function M.shutdown_reason(S) return S.reason end

local function run_hook(fn, reason)
    local ok, err = pcall(fn, reason)
    if not ok then log("on_shutdown hook failed: %s", tostring(err)) end
end

function M.on_shutdown(S, fn)
    if type(fn) ~= "function" then error("on_shutdown: fn must be a function", 2) end
    if S.reason then return run_hook(fn, S.reason) end
    S.hooks[#S.hooks + 1] = fn
end

-- Flips the token once: hooks run (in order, errors logged), then every cancellable wait
-- wakes with "Canceled". Later blocking calls return "Canceled" after one yield.
function M.shutdown(S, reason)
    if S.reason then return false end
    S.reason = reason ~= nil and tostring(reason) or "shutdown"
    for _, fn in ipairs(S.hooks) do run_hook(fn, S.reason) end
    S.hooks = {}
    local ws = {}
    for w in pairs(S.cancellable) do ws[#ws + 1] = w end
    for _, w in ipairs(ws) do wait.wake(S, w, nil, "Canceled") end
    return true
end

-- Aborts every live task but r (by name), counting them by kind.
local function abort_others(S, r)
    local stragglers = {}
    for t in pairs(S.tasks) do
        if t ~= r then stragglers[#stragglers + 1] = t end
    end
    sort(stragglers, function(a, b) return a.name < b.name end)
    local kinds = {}
    for _, t in ipairs(stragglers) do
        kinds[t.kind] = (kinds[t.kind] or 0) + 1
        t:abort()
    end
    return #stragglers, kinds
end

-- Waits (from a task) until every other live task has ended or deadline_ms have passed,
-- then aborts the rest. Not canceled by the shutdown it usually follows.
function M.drain(S, deadline_ms)
    deadline_ms = check_ms(deadline_ms, "deadline_ms", "drain")
    local r = wait.current(S, "drain")
    local start = uv.now()
    local until_ms = start + deadline_ms
    local function others()
        return S.n_live - (S.tasks[r] and 1 or 0)
    end
    local before = others()
    while others() > 0 do
        local left = until_ms - uv.now()
        if left <= 0 then break end
        wait.wait(S, r, function(w)
            S.drain_waiters[w] = true
            w.cleanup = function() S.drain_waiters[w] = nil end
        end, left, false)
    end
    local aborted, kinds = abort_others(S, r)
    return { finished = before - aborted, aborted = aborted, aborted_kinds = kinds,
             elapsed_ms = uv.now() - start }
end

function M.describe_drain(res)
    local ks = {}
    for k, n in pairs(res.aborted_kinds) do ks[#ks + 1] = k .. "=" .. n end
    sort(ks)
    return format("finished=%d aborted=%d%s elapsed_ms=%d", res.finished, res.aborted,
                  #ks > 0 and " (" .. concat(ks, " ") .. ")" or "", res.elapsed_ms)
end

-- Host hook (SIGINT/SIGTERM): the token, then a drain to DRAIN_DEADLINE_MS in an internal
-- coroutine (not a task: it is not waited for, and never drains itself), its result on
-- stderr.
function M.host_signal(S, signame)
    if not M.shutdown(S, signame) then return end
    local r = runner.new_runner(S, "shutdown_drain", function()
        local res = M.drain(S, S._M.DRAIN_DEADLINE_MS)
        log("drain after %s: %s", signame, M.describe_drain(res))
    end, false)
    ready.schedule(S, r, 0)
end

local function sorted_names(set, name_of)
    local names = {}
    for k, v in pairs(set) do names[#names + 1] = name_of(k, v) end
    sort(names)
    return concat(names, ", ")
end

-- Host hook once the loop is idle: 1 when a failed task was never joined or tasks are
-- still live (blocked on something that can no longer happen), else 0.
function M.host_exit_status(S)
    local rc = 0
    if S.unobserved > 0 then
        log("%d task(s) failed and were never joined: %s", S.unobserved,
            sorted_names(S.failed_names, function(_, name) return name end))
        rc = 1
    end
    if S.n_live > 0 then
        log("%d task(s) still live when the loop ran out of work: %s", S.n_live,
            sorted_names(S.tasks, function(t) return t.name end))
        rc = 1
    end
    return rc
end

return M
