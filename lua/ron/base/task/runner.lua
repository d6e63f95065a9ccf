-- Runners and tasks of one scheduler (ron.base.task): a runner is a coroutine the scheduler
-- resumes; a task is a runner with a handle (join, abort) that is counted and drained. Each
-- runner keeps its scheduler state as r.S.
local check = require("ron.base.task.check")
local ready = require("ron.base.task.ready")
local wait = require("ron.base.task.wait")

local coroutine_create, coroutine_resume, coroutine_running, coroutine_status =
    coroutine.create, coroutine.resume, coroutine.running, coroutine.status
local debug_traceback = debug.traceback
local error, next, select, setmetatable, tostring, type, unpack =
    error, next, select, setmetatable, tostring, type, unpack
local format = string.format
local check_ms, log = check.check_ms, check.log

local M = {}

-- coroutine -> the scheduler (its API table) running it, over every scheduler.
M.owners = setmetatable({}, { __mode = "k" })

local Task = {}
Task.__index = Task

local function kind_of(name)
    return name:match("^([^-]+)") or name
end

local function count(map, key)
    map[key] = (map[key] or 0) + 1
end

local function finish_failed(S, t, joiners)
    count(S.failed_total, t.kind)
    log("%s failed: %s", t.name, tostring(t.err))
    if next(joiners) then
        wait.wake_set(S, joiners, nil, "Failed: " .. tostring(t.err))
    else
        t.unobserved = true
        S.unobserved = S.unobserved + 1
        S.failed_names[t] = t.name
    end
end

local function finish(t, status, ...)
    local S = t.S
    S.tasks[t] = nil
    S.n_live = S.n_live - 1
    t.status = status
    S.runners[t.co] = nil
    local joiners = t.joiners
    t.joiners = {}
    if status == "ok" then
        t.n, t.results = select("#", ...), { ... }
        wait.wake_set(S, joiners, true, ...)
    elseif status == "failed" then
        t.err = ...
        finish_failed(S, t, joiners)
    else -- aborted
        wait.wake_set(S, joiners, nil, "Aborted")
    end
    wait.wake_set(S, S.drain_waiters, true)
end

function Task:join(timeout_ms)
    timeout_ms = check_ms(timeout_ms, "timeout_ms", "join", true)
    local S = self.S
    if self.status == "running" then
        local r = wait.current(S, "join")
        if r == self then error("join: a task cannot join itself", 2) end
        return wait.wait(S, r, function(w)
            self.joiners[w] = true
            w.cleanup = function() self.joiners[w] = nil end
        end, timeout_ms, false)
    end
    if self.status == "ok" then return true, unpack(self.results, 1, self.n) end
    if self.status == "failed" then
        if self.unobserved then
            self.unobserved = false
            S.unobserved = S.unobserved - 1
            S.failed_names[self] = nil
        end
        return nil, "Failed: " .. tostring(self.err)
    end
    return nil, "Aborted"
end

-- Never resumed again: its wait is undone (timer closed), joiners get "Aborted".
function Task:abort()
    if self.status ~= "running" then return false end
    if coroutine_running() == self.co then error("abort: a task cannot abort itself", 2) end
    if self.wait then wait.unwait(self.S, self.wait) end
    count(self.S.aborted_total, self.kind)
    finish(self, "aborted")
    return true
end

function Task:__tostring()
    return format("task %s (%s)", self.name, self.status)
end

-- A coroutine we resume; its wrapper keeps fn's results for finish().
function M.new_runner(S, name, fn, is_task, ...)
    local r = { S = S, name = name, status = "running", is_task = is_task }
    local n, args = select("#", ...), { ... }
    local function keep(...) r.ret_n, r.ret = select("#", ...), { ... } end
    r.co = coroutine_create(function() keep(fn(unpack(args, 1, n))) end)
    S.runners[r.co] = r
    M.owners[r.co] = S._M
    return r
end

function M.spawn(S, name, fn, ...)
    if type(name) ~= "string" or name == "" then
        error("spawn: name must be a non-empty string", 2)
    end
    if type(fn) ~= "function" then error("spawn: fn must be a function", 2) end
    local t = setmetatable(M.new_runner(S, name, fn, true, ...), Task)
    t.kind = kind_of(name)
    t.joiners = {}
    S.tasks[t] = true
    S.n_live = S.n_live + 1
    count(S.spawned_total, t.kind)
    ready.schedule(S, t, 0) -- starts on the next loop turn, like a tokio spawn
    return t
end

-- Resumes r; when its coroutine ends, a task finishes with the results its wrapper kept.
function M.resume(r, ...)
    if r.status ~= "running" then return end -- aborted while on the ready queue
    local co = r.co
    local ok, err = coroutine_resume(co, ...)
    if coroutine_status(co) ~= "dead" then return end
    if not r.is_task then
        r.S.runners[co] = nil
        r.status = ok and "ok" or "failed"
        if not ok then log("%s failed: %s", r.name, debug_traceback(co, tostring(err))) end
        return
    end
    if ok then
        finish(r, "ok", unpack(r.ret, 1, r.ret_n))
    else
        finish(r, "failed", debug_traceback(co, tostring(err)))
    end
end

function M.live(S) return S.n_live end

-- Failed tasks whose error no join has seen yet (the host exits 1 while this is not 0).
function M.unjoined_failures(S) return S.unobserved end

return M
