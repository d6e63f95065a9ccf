-- Tasks on the host's libuv loop: coroutines resumed by luv callbacks (PRODUCT.md §4, seed
-- 001). docs/CONCURRENCY.md is the design page; in short:
--
--   task.spawn(name, fn, ...)   -> handle       join-tracked; kind = name up to the first "-"
--   handle:join([timeout_ms])   -> true, ...    | nil, "Timeout" | nil, "Failed: ..."
--                                               | nil, "Aborted"
--   handle:abort()                               never resumed again; ron_tasks_aborted_total
--   task.sleep(ms)              -> true         | nil, "Canceled"
--   task.channel(cap[, name])   -> ch           bounded FIFO; cap 1..MAX_CAP
--     ch:try_send(v)            -> true         | nil, "Busy" (full, counted) | nil, "Closed"
--     ch:recv([timeout_ms])     -> v            | nil, "Timeout" | nil, "Canceled" | nil, "Closed"
--     ch:recv_through_shutdown([timeout_ms])    the same, not canceled by shutdown (an
--                                               answer certain to come; abort still ends it)
--   task.select(chs[, timeout_ms]) -> v, ch     | nil, "Timeout" | nil, "Canceled" | nil, "Closed"
--   task.with_timeout(ms, fn, ...) -> true, ... | nil, "Timeout" | nil, "Failed: ..."
--   task.shutdown(reason)       -> true once    the token: hooks run, every cancellable wait
--                                               wakes with "Canceled"
--   task.on_shutdown(fn)        hook fn(reason); runs at once when already shut down
--   task.drain(deadline_ms)     -> {finished=, aborted=, aborted_kinds=, elapsed_ms=}
--   task.live(), task.unjoined_failures(), task.shutdown_reason(), task.metrics_text()
--
-- Rules: the loop thread never blocks; state is only touched between yields (there are no
-- locks, so none is held across a yield); every queue is bounded. Blocking calls must come
-- from a task (misuse raises otherwise). A wake never resumes a coroutine from inside
-- another one: it puts the coroutine on a ready queue that one loop timer empties, so a
-- try_send never runs the receiver's code before it returns.
--
-- The scheduler is an explicit object: task.new() makes an independent one (its own tasks,
-- ready queue, shutdown token and metrics; specs use one per case for isolation), and
-- task.default is the process's. The module's functions (task.spawn, task.sleep, ...) act
-- on the scheduler of the running task, else on the default: a library module requires
-- this module once at its top and its calls land on whichever scheduler runs it. The host
-- (host/cli/run.c) calls _host_signal(name) on SIGINT/SIGTERM and _host_exit_status() once
-- the loop is idle, both on the default scheduler.
--
-- One concern per file under ron.base.task: ready (the ready queue and its idle pump), wait
-- (waiters, wakes, blocking), runner (tasks: spawn, join, abort, finish), sleep (sleep,
-- with_timeout), channel (bounded channels, select), shutdown (the token, drain, host
-- hooks), stats (metrics). Each function takes the scheduler's state S first; this file
-- makes S and binds the functions to it.
local channel = require("ron.base.task.channel")
local ready = require("ron.base.task.ready")
local runner = require("ron.base.task.runner")
local shutdown = require("ron.base.task.shutdown")
local sleep = require("ron.base.task.sleep")
local stats = require("ron.base.task.stats")

local coroutine_running = coroutine.running
local ipairs, pairs, setmetatable = ipairs, pairs, setmetatable

local M = { _VERSION = "0.1.0" }

M.MAX_CAP = 1048576               -- largest channel capacity
M.DRAIN_DEADLINE_MS = 5000        -- seed 001 §6 drain_deadline; used on a host signal

local owners = runner.owners -- coroutine -> the scheduler running it

-- A scheduler's API: each function called with the scheduler's state first.
local API = {
    spawn = runner.spawn, live = runner.live, unjoined_failures = runner.unjoined_failures,
    sleep = sleep.sleep, with_timeout = sleep.with_timeout,
    channel = channel.channel, select = channel.select,
    shutdown_reason = shutdown.shutdown_reason, on_shutdown = shutdown.on_shutdown,
    shutdown = shutdown.shutdown, drain = shutdown.drain,
    _host_signal = shutdown.host_signal, _host_exit_status = shutdown.host_exit_status,
    metrics = stats.metrics, metrics_text = stats.metrics_text,
}

-- One scheduler's state (S): everything its functions read and write.
local function new_state(api)
    local S = {
        _M = api,
        runners = setmetatable({}, { __mode = "k" }), -- coroutine -> runner (task or internal)
        tasks = {},          -- live task handles (set)
        n_live = 0,
        cancellable = {},    -- waiters that shutdown wakes with "Canceled" (set)
        drain_waiters = {},  -- waiters woken whenever a task ends (set)
        hooks = {},          -- on_shutdown functions, in registration order
        reason = nil,        -- the shutdown reason once the token flipped
        unobserved = 0,      -- failed tasks no join has seen yet
        failed_names = {},   -- names of those, for the host's exit message
        spawned_total = {}, aborted_total = {}, failed_total = {}, -- kind -> count
        channels = setmetatable({}, { __mode = "k" }), -- live channels (weak set)
        dropped_total = {},  -- queue name -> try_send rejected as Busy
        resume = runner.resume, -- what the ready queue calls
    }
    ready.init(S)
    return S
end

local function new_scheduler()
    local api = { MAX_CAP = M.MAX_CAP, DRAIN_DEADLINE_MS = M.DRAIN_DEADLINE_MS,
                  describe_drain = shutdown.describe_drain }
    local S = new_state(api)
    for name, f in pairs(API) do
        api[name] = function(...) return f(S, ...) end
    end
    return api
end

-- A new, independent scheduler.
M.new = new_scheduler

M.default = M.new()

-- The scheduler of the running task, or the default one (the main chunk, a luv callback).
function M.current()
    local co = coroutine_running()
    return co and owners[co] or M.default
end

-- The module's API acts on the current scheduler (see the header).
for _, name in ipairs { "spawn", "live", "unjoined_failures", "sleep", "with_timeout",
                        "channel", "select", "shutdown_reason", "on_shutdown", "shutdown",
                        "drain", "describe_drain", "metrics", "metrics_text" } do
    M[name] = function(...)
        local co = coroutine_running()
        local s = co and owners[co] or M.default
        return s[name](...)
    end
end

-- Host hooks: the process's scheduler (one made with task.new() is its creator's to drain
-- and to check, as the specs do).
function M._host_signal(signame)
    M.default.DRAIN_DEADLINE_MS = M.DRAIN_DEADLINE_MS -- the module's setting is the default's
    return M.default._host_signal(signame)
end
function M._host_exit_status() return M.default._host_exit_status() end

return M
