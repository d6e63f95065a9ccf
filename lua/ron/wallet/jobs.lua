-- ron.wallet.jobs: the wallet's tasks and its commit queue (seed 004 §2, §6): a task counted
-- by kind, a job's ledger call under commit_timeout_ms, a job answered (breaker, answer
-- cache, keys in flight), the committers (ron.wallet.committer), a request queued or
-- refused (429 busy, WLT-7), and the drain's wait. Part of ron.wallet.service (its facade
-- copies .methods onto the service's class).
local A = require("ron.wallet.answer")
local committer = require("ron.wallet.committer")
local pipeline = require("ron.ledger.engine.pipeline")

local format = string.format
local pairs, ipairs, tostring, error, pcall, next = pairs, ipairs, tostring, error, pcall, next

local prob, ret = A.prob, A.ret

local M = {}
local W = {}
M.methods = W

-- A task of the wallet, counted by kind; its scheduler name is "wallet_<kind>" (the
-- scheduler's own tasks_* families keep their labels).
function W:_spawn(kind, fn)
    local tk = self.tasks
    tk.spawned[kind] = tk.spawned[kind] + 1
    local h
    h = self.T.spawn("wallet_" .. kind, function()
        local ok, a, b = pcall(fn)
        tk.live[h] = nil
        tk.finished[kind] = tk.finished[kind] + 1
        if not ok then error(a, 0) end
        return a, b
    end)
    tk.live[h] = kind
    return h
end

-- ---- workers ----

-- Runs fn(job) in a child task under commit_timeout_ms. On a timeout the child keeps
-- running; done(result...) is called when it ends, whichever came first.
function W:_call(op, fn, job, done)
    local t0 = self.clock()
    local finished, timed_out = false, false
    local holder = {}
    local child = self:_spawn("call", function()
        local ok, a, b, c = pcall(fn, self, job)
        self.calls[holder] = nil
        finished = true
        if not ok then
            self.log(op .. " error: " .. tostring(a))
            a, b, c = prob("internal", "wallet error"), true, false
        end
        done(timed_out, a, b, c)
        return true
    end)
    self.calls[holder] = t0
    -- A pipelined group (ron.wallet.committer: job.after, the token of the group before it
    -- in its lane) waits in the ledger for that group's end before its own phase: its time
    -- counts from then, else a store slow enough to take most of the timeout for the first
    -- group timed out the second for the first one's commit (answered ledger_timeout and
    -- counted by the breaker). The group before ends within its own timeout.
    if job.after then pcall(pipeline.wait, job.after) end
    local r1, r2 = child:join(self.commit_timeout_ms)
    if r1 == nil and r2 == "Timeout" and not finished then
        timed_out = true
        self.m.io_timeouts[op] = (self.m.io_timeouts[op] or 0) + 1
        -- a timeout is a ledger failure now, not when it ends; not a job run apart (its
        -- payer was found held by another saga: a race, issue 29 item 3, not the ledger)
        if not job.apart then self.breaker:record(false) end
        return false
    end
    return true
end

function W:_job(job)
    -- (a member a group commit handed back is in flight in the ledger: it is driven, breaker
    -- or not, ron.wallet.committer)
    if not job.handed and not self.breaker:allow() then
        self:_clear(job)
        return self:_send(job.req, prob("ledger_unavailable", "the ledger's breaker is open",
            { ["Retry-After"] = tostring(self.breaker:retry_after_s()) }))
    end
    local fn = job.handed and committer.drive_handed
        or (job.kind == "money" and self._money or self._account)
    local answered = false
    local in_time = self:_call("commit", fn, job, function(timed_out, a, healthy, replayed)
        if not timed_out then self.breaker:record(healthy) end
        self:_keep_answer(job, a)
        self:_clear(job)
        if not timed_out then
            answered = true
            self:_send(job.req, a, replayed)
        end
    end)
    if not in_time and not answered then
        self:_send(job.req, prob("ledger_timeout", format("the commit did not finish within %d " ..
            "ms; it may still finish: retry the same request", self.commit_timeout_ms),
            { ["Retry-After"] = "1" }))
    end
end

function W:_clear(job)
    if job.kkey then self.inflight[job.kkey] = nil end
    if job.nkey then self.inflight[job.nkey] = nil end
end

-- One job alone (ron.wallet.committer groups money jobs queued together).
function W:_run_job(job)
    self.m.worker_inflight = self.m.worker_inflight + 1
    local ok, err = pcall(self._job, self, job)
    self.m.worker_inflight = self.m.worker_inflight - 1
    if not ok then
        self.log("worker error: " .. tostring(err))
        self:_clear(job)
        pcall(self._send, self, job.req, prob("internal", "wallet error"))
    end
end

function W:_worker(k) return committer.worker(self, k) end

function W:_enqueue(req, job, endpoint)
    if self.stopping then return ret(self, prob("draining", "the wallet is shutting down")) end
    if not self.queue then
        return ret(self, prob("starting", "the wallet is starting", { ["Retry-After"] = "1" }))
    end
    if self.breaker:state() == "open" then
        return ret(self, prob("ledger_unavailable", "the ledger's breaker is open",
                              { ["Retry-After"] = tostring(self.breaker:retry_after_s()) }))
    end
    job.req = req
    local ok = self.queue:try_send(job)
    if not ok then
        self.m.busy[endpoint] = self.m.busy[endpoint] + 1
        return ret(self, prob("busy", "the commit queue is full; retry later",
                              { ["Retry-After"] = "1" }))
    end
    -- (the job itself: the cache's feed asks for a running request's accounts by its nonce
    -- row, W:_own_running)
    if job.kkey then self.inflight[job.kkey] = job end
    if job.nkey then self.inflight[job.nkey] = job end
    return nil -- answered later (req:respond)
end


-- From a task, after stop(): waits (at most deadline_ms) for the workers to empty the queue,
-- the feed to end and every ledger call and read to finish; then aborts what is still
-- running (seed 004 §6: Draining -> Aborting -> Stopped), counted in
-- wallet_tasks_aborted_total{kind}. An aborted commit leaves its saga in the store: the
-- next start's recover() finishes or releases it, and a client's retry of the same request
-- (same key and nonce) gets its one outcome. -> true | false, n aborted (deadline)
function W:wait(deadline_ms)
    local t_end = self.clock() + (deadline_ms or 5000)
    for _, h in ipairs(self.workers_h or {}) do
        h:join(math.max(1, t_end - self.clock()))
    end
    if self.feed_h then self.feed_h:join(math.max(1, t_end - self.clock())) end
    while next(self.tasks.live) ~= nil and self.clock() < t_end do
        self.T.sleep(10)
    end
    if next(self.tasks.live) == nil then return true end
    local n = 0
    for h, kind in pairs(self.tasks.live) do
        if h:abort() then
            n = n + 1
            self.tasks.aborted[kind] = self.tasks.aborted[kind] + 1
        end
    end
    self.tasks.live = {}
    self.calls, self.n_reads = {}, 0 -- their tasks are gone
    self.m.worker_inflight = 0
    self.log(format("drain deadline (%d ms): %d task(s) aborted", deadline_ms or 5000, n))
    return false, n
end

return M
