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
local FAM = require "ron.base.families"
local metrics = require "ron.base.metrics"
local uv = require "luv"

local coroutine_create, coroutine_resume, coroutine_yield, coroutine_running,
      coroutine_status = coroutine.create, coroutine.resume, coroutine.yield,
                         coroutine.running, coroutine.status
local debug_traceback = debug.traceback
local error, pairs, ipairs, next, select, setmetatable, getmetatable, tostring, type, unpack,
      pcall = error, pairs, ipairs, next, select, setmetatable, getmetatable, tostring, type,
              unpack, pcall
local floor, huge = math.floor, math.huge
local concat, sort, remove, maxn = table.concat, table.sort, table.remove, table.maxn
local format = string.format
local stderr = io.stderr

local M = { _VERSION = "0.1.0" }

M.MAX_CAP = 1048576               -- largest channel capacity
M.DRAIN_DEADLINE_MS = 5000        -- seed 001 §6 drain_deadline; used on a host signal

local owners = setmetatable({}, { __mode = "k" }) -- coroutine -> the scheduler running it

-- One scheduler: everything below is its own state and the functions over it.
local function new_scheduler()
    local _M = { MAX_CAP = M.MAX_CAP, DRAIN_DEADLINE_MS = M.DRAIN_DEADLINE_MS }

    -- ---------------------------------------------------------------------------------------
    -- state (this scheduler's)

    local runners = setmetatable({}, { __mode = "k" }) -- coroutine -> runner (task or internal)
    local tasks = {}          -- live task handles (set)
    local n_live = 0
    local cancellable = {}    -- waiters that shutdown wakes with "Canceled" (set)
    local ready_head, ready_tail = 1, 0 -- the FIFO of runners to resume (see schedule)
    local drain_waiters = {}  -- waiters woken whenever a task ends (set)
    local hooks = {}          -- on_shutdown functions, in registration order
    local reason_            -- the shutdown reason once the token flipped
    local unobserved = 0      -- failed tasks no join has seen yet
    local failed_names = {}   -- names of those, for the host's exit message

    local spawned_total, aborted_total, failed_total = {}, {}, {}
    local channels = setmetatable({}, { __mode = "k" }) -- live channels (weak set)
    local dropped_total = {}  -- queue name -> try_send rejected as Busy

    local pump -- the idle handle that empties the ready queue

    local function log(fmt, ...)
        stderr:write("task: ", format(fmt, ...), "\n")
        stderr:flush()
    end

    local function kind_of(name)
        return name:match("^([^-]+)") or name
    end

    local function check_ms(v, what, fname, optional)
        if v == nil and optional then return nil end
        if type(v) ~= "number" or v ~= v or v < 0 or v == huge then
            error(format("%s: %s must be a finite number >= 0, got %s", fname, what,
                         tostring(v)), 3)
        end
        return floor(v)
    end

    -- ---------------------------------------------------------------------------------------
    -- waiting and waking

    local resume_runner -- forward

    -- The ready queue as parallel arrays (runner, count, two values), so a wake allocates
    -- nothing: n >= 0 values are a, b; n < 0 means a is a table holding -n values (a task's
    -- results for its joiners). The hot paths (channel waits) have no closures and no vararg
    -- tables, so LuaJIT compiles them.
    local ready_r, ready_n, ready_a, ready_b = {}, {}, {}, {}

    -- One idle handle empties the ready queue once per loop turn, the wakes queued before the
    -- turn only: what they wake in turn waits for the next turn, so timers and I/O always get
    -- the loop (a zero timer would not do: libuv 1.44 runs a timer re-armed at 0 in the same
    -- timer pass, forever).
    local function run_ready()
        local last = ready_tail
        while ready_head <= last do
            local i = ready_head
            local r, n, a, b = ready_r[i], ready_n[i], ready_a[i], ready_b[i]
            ready_r[i], ready_a[i], ready_b[i] = nil, nil, nil
            ready_head = i + 1
            if n >= 0 then
                resume_runner(r, a, b)
            else
                resume_runner(r, unpack(a, 1, -n))
            end
        end
        if ready_head > ready_tail then
            ready_head, ready_tail = 1, 0
            pump:stop()
        elseif ready_head > 1 then
            -- I-7: wakes queued during this turn move down to 1, so a loop that never goes
            -- idle (thousands of workers retrying through an outage) reuses the same slots
            -- instead of growing the arrays by one per wake (host-backlog-day-outage caught
            -- ~17 B of Lua heap per slice before this).
            local k = 0
            for i = ready_head, ready_tail do
                k = k + 1
                ready_r[k], ready_n[k], ready_a[k], ready_b[k] =
                    ready_r[i], ready_n[i], ready_a[i], ready_b[i]
                ready_r[i], ready_a[i], ready_b[i] = nil, nil, nil
            end
            ready_head, ready_tail = 1, k
        end
    end

    local function schedule(runner, n, a, b)
        local i = ready_tail + 1
        ready_tail = i
        ready_r[i], ready_n[i], ready_a[i], ready_b[i] = runner, n, a, b
        if not pump:is_active() then pump:start(run_ready) end
    end

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
    local function unwait(w)
        if w.fired then return false end
        w.fired = true
        close_timer(w)
        cancellable[w] = nil
        local chs = w.chs
        if chs then
            for i = 1, #chs do remove_waiter(chs[i].receivers, w) end
        elseif w.cleanup then
            w.cleanup(w)
        end
        if w.runner.wait == w then w.runner.wait = nil end
        return true
    end

    -- Wakes w with two results, a and b (next loop turn). False when w was already woken.
    local function wake(w, a, b)
        if not unwait(w) then return false end
        schedule(w.runner, 2, a, b)
        return true
    end

    -- Wakes w with any number of results.
    local function wake_n(w, ...)
        if not unwait(w) then return false end
        local n = select("#", ...)
        if n <= 2 then
            schedule(w.runner, n, ...)
        else
            schedule(w.runner, -n, { ... })
        end
        return true
    end

    local function current(fname)
        local co = coroutine_running()
        local r = co and runners[co]
        if not r then error(fname .. ": called outside a task (use task.spawn)", 3) end
        return r
    end

    local function new_waiter(r)
        local w = { runner = r }
        r.wait = w
        return w
    end

    local function arm_timer(w, timeout_ms)
        local t = uv.new_timer()
        w.timer = t
        t:start(timeout_ms, 0, function() wake(w, nil, "Timeout") end)
    end

    -- Blocks the running task on w (already registered where it will be found) until woken.
    -- With timeout_ms the wait ends with nil, "Timeout"; when is_cancellable, shutdown ends it
    -- with nil, "Canceled" (at once when already shut down, still after one yield so a loop
    -- ignoring "Canceled" can be drained and aborted).
    local function block(w, timeout_ms, is_cancellable)
        if is_cancellable then
            if reason_ then
                wake(w, nil, "Canceled")
            else
                cancellable[w] = true
            end
        end
        if timeout_ms and not w.fired then arm_timer(w, timeout_ms) end
        return coroutine_yield()
    end

    -- block() for the cold paths: setup(w) registers w and sets w.cleanup(w) to undo that.
    local function wait(r, setup, timeout_ms, is_cancellable)
        local w = new_waiter(r)
        if setup then setup(w) end
        return block(w, timeout_ms, is_cancellable)
    end

    -- ---------------------------------------------------------------------------------------
    -- tasks

    local Task = {}
    Task.__index = Task

    local function wake_set(set, ...)
        for w in pairs(set) do wake_n(w, ...) end
    end

    local function finish(t, status, ...)
        tasks[t] = nil
        n_live = n_live - 1
        t.status = status
        runners[t.co] = nil
        local joiners = t.joiners
        t.joiners = {}
        if status == "ok" then
            t.n, t.results = select("#", ...), { ... }
            wake_set(joiners, true, ...)
        elseif status == "failed" then
            t.err = ...
            failed_total[t.kind] = (failed_total[t.kind] or 0) + 1
            log("%s failed: %s", t.name, tostring(t.err))
            if next(joiners) then
                wake_set(joiners, nil, "Failed: " .. tostring(t.err))
            else
                t.unobserved = true
                unobserved = unobserved + 1
                failed_names[t] = t.name
            end
        else -- aborted
            wake_set(joiners, nil, "Aborted")
        end
        wake_set(drain_waiters, true)
    end

    function Task:join(timeout_ms)
        timeout_ms = check_ms(timeout_ms, "timeout_ms", "join", true)
        if self.status == "running" then
            local r = current("join")
            if r == self then error("join: a task cannot join itself", 2) end
            return wait(r, function(w)
                self.joiners[w] = true
                w.cleanup = function() self.joiners[w] = nil end
            end, timeout_ms, false)
        end
        if self.status == "ok" then return true, unpack(self.results, 1, self.n) end
        if self.status == "failed" then
            if self.unobserved then
                self.unobserved = false
                unobserved = unobserved - 1
                failed_names[self] = nil
            end
            return nil, "Failed: " .. tostring(self.err)
        end
        return nil, "Aborted"
    end

    -- Never resumed again: its wait is undone (timer closed), joiners get "Aborted".
    function Task:abort()
        if self.status ~= "running" then return false end
        if coroutine_running() == self.co then error("abort: a task cannot abort itself", 2) end
        if self.wait then unwait(self.wait) end
        aborted_total[self.kind] = (aborted_total[self.kind] or 0) + 1
        finish(self, "aborted")
        return true
    end

    function Task:__tostring()
        return format("task %s (%s)", self.name, self.status)
    end

    -- A coroutine we resume; its wrapper keeps fn's results for finish().
    local function new_runner(name, fn, is_task, ...)
        local r = { name = name, status = "running", is_task = is_task }
        local n, args = select("#", ...), { ... }
        local function keep(...) r.ret_n, r.ret = select("#", ...), { ... } end
        r.co = coroutine_create(function() keep(fn(unpack(args, 1, n))) end)
        runners[r.co] = r
        owners[r.co] = _M
        return r
    end

    function _M.spawn(name, fn, ...)
        if type(name) ~= "string" or name == "" then
            error("spawn: name must be a non-empty string", 2)
        end
        if type(fn) ~= "function" then error("spawn: fn must be a function", 2) end
        local t = new_runner(name, fn, true, ...)
        setmetatable(t, Task)
        t.kind = kind_of(name)
        t.joiners = {}
        tasks[t] = true
        n_live = n_live + 1
        spawned_total[t.kind] = (spawned_total[t.kind] or 0) + 1
        schedule(t, 0) -- starts on the next loop turn, like a tokio spawn
        return t
    end

    -- Resumes r; when its coroutine ends, a task finishes with the results its wrapper kept.
    resume_runner = function(r, ...)
        if r.status ~= "running" then return end -- aborted while on the ready queue
        local co = r.co
        local ok, err = coroutine_resume(co, ...)
        if coroutine_status(co) ~= "dead" then return end
        if not r.is_task then
            runners[co] = nil
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

    function _M.live() return n_live end

    -- Failed tasks whose error no join has seen yet (the host exits 1 while this is not 0).
    function _M.unjoined_failures() return unobserved end

    -- ---------------------------------------------------------------------------------------
    -- sleep, timeouts

    function _M.sleep(ms)
        ms = check_ms(ms, "ms", "sleep")
        local r = current("sleep")
        local ok, err = wait(r, nil, ms, true)
        if err == "Timeout" then return true end -- the timer is the sleep's normal end
        return ok, err
    end

    -- fn(...) in a child task named "with_timeout"; aborted (and counted) when ms pass first.
    function _M.with_timeout(ms, fn, ...)
        ms = check_ms(ms, "ms", "with_timeout")
        if type(fn) ~= "function" then error("with_timeout: fn must be a function", 2) end
        current("with_timeout")
        local child = _M.spawn("with_timeout", fn, ...)
        local res = { child:join(ms) }
        if res[1] == nil and res[2] == "Timeout" then
            child:abort()
            return nil, "Timeout"
        end
        return unpack(res, 1, maxn(res))
    end

    -- ---------------------------------------------------------------------------------------
    -- bounded channels

    local Channel = {}
    Channel.__index = Channel

    function _M.channel(cap, name)
        if type(cap) ~= "number" or cap ~= floor(cap) or cap < 1 or cap > _M.MAX_CAP then
            error(format("channel: cap must be an integer in 1..%d, got %s", _M.MAX_CAP,
                         tostring(cap)), 2)
        end
        if name == nil then name = "queue" end
        if type(name) ~= "string" or name == "" then
            error("channel: name must be a non-empty string", 2)
        end
        local ch = setmetatable({ name = name, _cap = cap, buf = {}, head = 1, n = 0,
                                  receivers = {}, closed = false }, Channel)
        ch.alone = { ch } -- recv's channel list
        channels[ch] = true
        dropped_total[name] = dropped_total[name] or 0
        return ch
    end

    function Channel:cap() return self._cap end
    function Channel:depth() return self.n end
    function Channel:is_closed() return self.closed end

    -- Hands v to the oldest waiting receiver; false when none waits.
    local function hand_over(ch, v)
        local rs = ch.receivers
        while #rs > 0 do
            local w = remove(rs, 1)
            if wake(w, v, ch) then return true end
        end
        return false
    end

    function Channel:try_send(v)
        if v == nil then error("try_send: value must not be nil", 2) end
        if self.closed then return nil, "Closed" end
        if self.n == 0 and hand_over(self, v) then return true end
        if self.n >= self._cap then
            dropped_total[self.name] = dropped_total[self.name] + 1
            return nil, "Busy"
        end
        local cap = self._cap
        self.buf[(self.head - 1 + self.n) % cap + 1] = v
        self.n = self.n + 1
        return true
    end

    local function pop(ch)
        local v = ch.buf[ch.head]
        ch.buf[ch.head] = nil
        ch.head = ch.head % ch._cap + 1
        ch.n = ch.n - 1
        return v
    end

    -- Receivers still wake with "Closed" once the buffer is empty; buffered values stay
    -- receivable.
    function Channel:close()
        if self.closed then return false end
        self.closed = true
        local rs = self.receivers
        self.receivers = {}
        for _, w in ipairs(rs) do wake(w, nil, "Closed") end
        return true
    end

    -- The first value of any of chs (in argument order when several hold one). Buffered
    -- values are still delivered after shutdown (the drain empties queues); only an empty
    -- wait is canceled. The waiter keeps chs (w.chs) to leave their receiver lists.
    local function select_recv(fname, chs, timeout_ms)
        local n = #chs
        for i = 1, n do
            if getmetatable(chs[i]) ~= Channel then
                error(fname .. ": argument " .. i .. " is not a channel", 3)
            end
        end
        local all_closed = true
        for i = 1, n do
            local ch = chs[i]
            if ch.n > 0 then return pop(ch), ch end
            if not ch.closed then all_closed = false end
        end
        if all_closed then return nil, "Closed" end
        local w = new_waiter(current(fname))
        w.chs = chs
        for i = 1, n do
            if not chs[i].closed then
                local rs = chs[i].receivers
                rs[#rs + 1] = w
            end
        end
        return block(w, timeout_ms, true)
    end

    -- select({ ch }) through the channel's own one-element list (made once, not per call).
    function Channel:recv(timeout_ms)
        timeout_ms = check_ms(timeout_ms, "timeout_ms", "recv", true)
        local v, err = select_recv("recv", self.alone or { self }, timeout_ms)
        if v == nil then return nil, err end
        return v
    end

    -- select({ch1, ch2, ...}[, timeout_ms]): receive-or-shutdown over several channels.
    -- "Closed" only when every channel is closed and empty.
    function _M.select(chs, timeout_ms)
        if type(chs) ~= "table" or #chs == 0 then
            error("select: expects a non-empty list of channels", 2)
        end
        timeout_ms = check_ms(timeout_ms, "timeout_ms", "select", true)
        return select_recv("select", chs, timeout_ms)
    end

    -- ---------------------------------------------------------------------------------------
    -- shutdown and drain

    function _M.shutdown_reason() return reason_ end

    function _M.on_shutdown(fn)
        if type(fn) ~= "function" then error("on_shutdown: fn must be a function", 2) end
        if reason_ then
            local ok, err = pcall(fn, reason_)
            if not ok then log("on_shutdown hook failed: %s", tostring(err)) end
            return
        end
        hooks[#hooks + 1] = fn
    end

    -- Flips the token once: hooks run (in order, errors logged), then every cancellable wait
    -- wakes with "Canceled". Later blocking calls return "Canceled" after one yield.
    function _M.shutdown(reason)
        if reason_ then return false end
        reason_ = reason ~= nil and tostring(reason) or "shutdown"
        for _, fn in ipairs(hooks) do
            local ok, err = pcall(fn, reason_)
            if not ok then log("on_shutdown hook failed: %s", tostring(err)) end
        end
        hooks = {}
        local ws = {}
        for w in pairs(cancellable) do ws[#ws + 1] = w end
        for _, w in ipairs(ws) do wake(w, nil, "Canceled") end
        return true
    end

    -- Waits (from a task) until every other live task has ended or deadline_ms have passed,
    -- then aborts the rest. Not canceled by the shutdown it usually follows.
    function _M.drain(deadline_ms)
        deadline_ms = check_ms(deadline_ms, "deadline_ms", "drain")
        local r = current("drain")
        local start = uv.now()
        local until_ms = start + deadline_ms
        local function others()
            local n = n_live
            if tasks[r] then n = n - 1 end
            return n
        end
        local before = others()
        while others() > 0 do
            local left = until_ms - uv.now()
            if left <= 0 then break end
            wait(r, function(w)
                drain_waiters[w] = true
                w.cleanup = function() drain_waiters[w] = nil end
            end, left, false)
        end
        local stragglers = {}
        for t in pairs(tasks) do
            if t ~= r then stragglers[#stragglers + 1] = t end
        end
        sort(stragglers, function(a, b) return a.name < b.name end)
        local kinds = {}
        for _, t in ipairs(stragglers) do
            kinds[t.kind] = (kinds[t.kind] or 0) + 1
            t:abort()
        end
        local finished = before - #stragglers
        return { finished = finished, aborted = #stragglers, aborted_kinds = kinds,
                 elapsed_ms = uv.now() - start }
    end

    local function describe_drain(res)
        local ks = {}
        for k, n in pairs(res.aborted_kinds) do ks[#ks + 1] = k .. "=" .. n end
        sort(ks)
        return format("finished=%d aborted=%d%s elapsed_ms=%d", res.finished, res.aborted,
                      #ks > 0 and " (" .. concat(ks, " ") .. ")" or "", res.elapsed_ms)
    end
    _M.describe_drain = describe_drain

    -- Host hook (SIGINT/SIGTERM): the token, then a drain to DRAIN_DEADLINE_MS in an internal
    -- coroutine (not a task: it is not waited for, and never drains itself), its result on
    -- stderr.
    function _M._host_signal(signame)
        if not _M.shutdown(signame) then return end
        local r = new_runner("shutdown_drain", function()
            local res = _M.drain(_M.DRAIN_DEADLINE_MS)
            log("drain after %s: %s", signame, describe_drain(res))
        end, false)
        schedule(r, 0)
    end

    -- Host hook once the loop is idle: 1 when a failed task was never joined or tasks are
    -- still live (blocked on something that can no longer happen), else 0.
    function _M._host_exit_status()
        local rc = 0
        if unobserved > 0 then
            local names = {}
            for _, name in pairs(failed_names) do names[#names + 1] = name end
            sort(names)
            log("%d task(s) failed and were never joined: %s", unobserved, concat(names, ", "))
            rc = 1
        end
        if n_live > 0 then
            local names = {}
            for t in pairs(tasks) do names[#names + 1] = t.name end
            sort(names)
            log("%d task(s) still live when the loop ran out of work: %s", n_live,
                concat(names, ", "))
            rc = 1
        end
        return rc
    end

    -- ---------------------------------------------------------------------------------------
    -- metrics

    function _M.metrics()
        local depth = {}
        for name in pairs(dropped_total) do depth[name] = 0 end
        for ch in pairs(channels) do
            if not ch.closed or ch.n > 0 then depth[ch.name] = (depth[ch.name] or 0) + ch.n end
        end
        local function copy(t)
            local c = {}
            for k, v in pairs(t) do c[k] = v end
            return c
        end
        return { tasks_spawned_total = copy(spawned_total),
                 tasks_aborted_total = copy(aborted_total),
                 tasks_failed_total = copy(failed_total), tasks_live = n_live,
                 queue_depth = depth, queue_dropped_total = copy(dropped_total) }
    end

    function _M.metrics_text()
        local m = _M.metrics()
        local out = {}
        FAM.tasks_spawned:render_map(out, m.tasks_spawned_total)
        FAM.tasks_aborted:render_map(out, m.tasks_aborted_total)
        FAM.tasks_failed:render_map(out, m.tasks_failed_total)
        FAM.tasks_live:render(out, m.tasks_live)
        FAM.lua_heap:render(out, floor(collectgarbage("count") * 1024))
        FAM.queue_depth:render_map(out, m.queue_depth)
        local keys, rows = {}, {}
        for k in pairs(m.queue_dropped_total) do keys[#keys + 1] = k end
        sort(keys)
        for i, k in ipairs(keys) do rows[i] = { k, "busy", m.queue_dropped_total[k] } end
        FAM.queue_dropped:render(out, rows)
        return metrics.text(out)
    end

    -- -----------------------------------------------------------------------------------

    pump = uv.new_idle()
    return _M
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
