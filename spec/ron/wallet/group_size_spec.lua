-- ron.wallet.committer's group sizing (issue 25, docs/WALLET.md §8): closed-loop clients
-- (each sends its next request a little after its answer) must end up in one group, not in
-- two cohorts that alternate for good. A deterministic simulation: a virtual clock, the
-- lane a list of arrivals, a group's commit a fixed time, the committer's own worker loop.
local S = require("support")
local uv = require("luv")
local committer = require("ron.wallet.committer")
local pipeline = require("ron.ledger.engine.pipeline")

local COMMIT_MS = 20

-- -> a wallet whose lane delivers arrivals by the virtual clock; groups lists the sizes; a
-- client comes back cfg.think_ms (2) after its answer
local function sim(cfg, cohorts, max_groups)
    local think = cfg.think_ms or 2
    local now, arrivals, queued, id = { 0 }, {}, {}, 0
    local w = { group_max = cfg.group_max or 256, group_linger_ms = cfg.linger,
                group_pipeline = false,
                m = { worker_inflight = 0 }, groups = {},
                held = { suspect = function() end, apart_of = {} },
                log = function() end }
    w.clock = function() return now[1] end
    local function arrive(t)
        id = id + 1
        arrivals[#arrivals + 1] = { t = t, job = { kind = "money", id = id, r = { from = "P" } } }
        table.sort(arrivals, function(a, b) return a.t < b.t end)
    end
    local function deliver()
        while arrivals[1] and arrivals[1].t <= now[1] do
            queued[#queued + 1] = table.remove(arrivals, 1).job
        end
    end
    w.T = { sleep = function(ms)
        now[1] = now[1] + ms
        deliver()
        return true
    end }
    local q = {}
    function q.lane_depth() return #queued end
    function q.recv()
        if #w.groups >= max_groups then return nil end
        if #queued == 0 then -- blocks until the next arrival
            now[1] = math.max(now[1], arrivals[1].t)
            deliver()
        end
        return table.remove(queued, 1)
    end
    w.queue = q
    for _, c in ipairs(cohorts) do
        for _ = 1, c.n do arrive(c.t) end
    end
    local function commit(group)
        w.groups[#w.groups + 1] = #group
        now[1] = now[1] + COMMIT_MS
        deliver()
        for _ = 1, #group do arrive(now[1] + think) end -- answered: each comes back
    end
    function w:_run_job(job) commit { job } end
    committer.run_group = function(_, group) commit(group) end
    return w
end

describe("ron.wallet.committer: group sizing", function()
    local run_group
    before_each(function() run_group = committer.run_group end)
    after_each(function() committer.run_group = run_group end)

    it("merges two cohorts of closed-loop clients into one group", function()
        local w = sim({ linger = 10 }, { { t = 0, n = 32 }, { t = 10, n = 32 } }, 12)
        committer.worker(w, 1)
        assert.equal(12, #w.groups)
        assert.same({ 64, 64, 64 }, { w.groups[10], w.groups[11], w.groups[12] },
                    table.concat(w.groups, " "))
        assert.is_true(w.m.group_lingers > 0)
    end)

    it("without lingering the cohorts alternate for good (the case it fixes)", function()
        local w = sim({ linger = 0 }, { { t = 0, n = 32 }, { t = 10, n = 32 } }, 12)
        committer.worker(w, 1)
        assert.same({ 32, 32, 32 }, { w.groups[10], w.groups[11], w.groups[12] })
    end)

    it("costs a lone client nothing: its groups are of one, it never waits", function()
        local w = sim({ linger = 10 }, { { t = 0, n = 1 } }, 10)
        committer.worker(w, 1)
        assert.same({ 1, 1, 1, 1, 1, 1, 1, 1, 1, 1 }, w.groups)
        assert.is_nil(w.m.group_lingers)
    end)

    it("waits at most group_linger_ms and a quarter of the last commit", function()
        -- two cohorts whose clients come back late (30 ms): a linger ends at its bound
        for _, c in ipairs { { linger = 3, bound = 3 }, { linger = 100, bound = COMMIT_MS / 4 } } do
            local w = sim({ linger = c.linger, think_ms = 30 },
                          { { t = 0, n = 8 }, { t = 10, n = 8 } }, 8)
            committer.worker(w, 1)
            for _, n in ipairs(w.groups) do assert.equal(8, n) end
            assert.is_true(w.m.group_lingers >= 1)
            assert.is_true(w.m.group_linger_ms <= c.bound * w.m.group_lingers,
                           tostring(w.m.group_linger_ms))
        end
    end)
end)

-- The pipeline (group_pipeline, docs/WALLET.md §6): on the real scheduler (real time, so
-- the bounds are loose), n closed-loop clients of one payer, a group's ledger work a plan
-- of PLAN_MS (then its token's items are set, as commit_many sets them), the wait for the
-- group before it, then a phase of PHASE_MS; each member's client comes back 2 ms after its
-- answer.

local PLAN_MS, PHASE_MS = 3, 12

-- A wallet for committer.worker on task's scheduler, its groups through committer.run_group
-- (which the cases replace); a lone job with no group in flight takes the single path,
-- here the same fake.
local function pipelined_wallet(task, linger_ms)
    local w = { group_max = 256, group_linger_ms = linger_ms, m = { worker_inflight = 0 },
                held = { suspect = function() end, apart_of = {},
                         busy = function() return false end }, log = print,
                T = task, clock = function() return uv.now() end }
    w.queue = committer.queue(task, 1024, 1)
    function w:_spawn(_, fn) return task.spawn("group", fn) end
    function w:_run_job(job) committer.run_group(self, { job, tok = {} }) end
    return w
end

local function pipelined_run(n_clients, n_groups)
    local sizes, after_set, overlap = {}, 0, 0
    S.run_task(function(task)
        local w = pipelined_wallet(task, 10)
        local phase_busy = false
        local run_group = committer.run_group
        committer.run_group = function(_, group)
            sizes[#sizes + 1] = #group
            if group.after then after_set = after_set + 1 end
            task.sleep(PLAN_MS)
            if phase_busy then overlap = overlap + 1 end -- planned while the other's phase ran
            group.tok.items = {}
            pipeline.wait(group.after)
            assert(not phase_busy, "two phases at once")
            phase_busy = true
            task.sleep(PHASE_MS)
            phase_busy = false
            for _, job in ipairs(group) do job.answer:try_send(true) end
        end
        local done = false
        local clients = {}
        for c = 1, n_clients do
            clients[c] = task.spawn("client", function()
                while not done do
                    local job = { kind = "money", r = { from = "P" }, answer = task.channel(1) }
                    assert(w.queue:try_send(job))
                    job.answer:recv()
                    task.sleep(2)
                end
                return true
            end)
        end
        local wk = task.spawn("worker", committer.worker, w, 1)
        while #sizes < n_groups do task.sleep(5) end
        done = true
        for _, h in ipairs(clients) do h:join(5000) end
        w.queue:close()
        wk:join(5000)
        committer.run_group = run_group
    end)
    return sizes, after_set, overlap
end

describe("ron.wallet.committer: the pipeline's group sizing", function()
    it("settles closed-loop clients into two cohorts of half each, one planned while the "
       .. "other's phase runs", function()
        local sizes, after_set, overlap = pipelined_run(64, 40)
        print("pipelined group sizes: " .. table.concat(sizes, " "))
        -- Most of the last 12 groups hold a cohort (24..40) and none holds both. A timer of
        -- a loaded machine (a full make test on 2 cores) may split one cohort into two
        -- groups of 16: "32 ... 32 16 32 16" passed on a quiet run and failed there.
        local tail, cohorts = {}, 0
        for i = #sizes - 11, #sizes do tail[#tail + 1] = sizes[i] end
        for _, n in ipairs(tail) do
            assert.is_true(n <= 40, table.concat(tail, " "))
            if n >= 24 then cohorts = cohorts + 1 end
        end
        assert.is_true(cohorts >= 9, table.concat(tail, " "))
        assert.is_true(after_set >= #sizes / 2, after_set .. " of " .. #sizes)
        assert.is_true(overlap >= #sizes / 2, overlap .. " of " .. #sizes)
    end)

    it("costs a lone client nothing: its groups are of one", function()
        local sizes = pipelined_run(1, 6)
        for _, n in ipairs(sizes) do assert.equal(1, n) end
    end)

    it("starts a third group on the second's state once the first ended, the second still "
       .. "in flight", function()
        -- (it drained both before: the store's writer then had no phase while the third
        -- group read and planned)
        local seen = {}
        S.run_task(function(task)
            local w = pipelined_wallet(task, 0)
            local finish = { task.channel(1), task.channel(1) }
            local run_group = committer.run_group
            committer.run_group = function(_, group)
                local n = #seen + 1
                seen[n] = { after = group.after, tok = group.tok }
                task.sleep(2)
                group.tok.items = {}
                if finish[n] then finish[n]:recv(5000) end
            end
            local function money() return { kind = "money", r = { from = "P" } } end
            for _ = 1, 6 do assert(w.queue:try_send(money())) end
            local wk = task.spawn("worker", committer.worker, w, 1)
            while #seen < 2 do task.sleep(1) end
            assert(w.queue:try_send(money())) -- the third group's, both others in flight
            task.sleep(10)
            assert.equal(2, #seen)
            finish[1]:try_send(true) -- the first ends; the second is still in flight
            while #seen < 3 do task.sleep(1) end
            assert.is_falsy(seen[2].tok.done)
            assert.equal(seen[2].tok, seen[3].after)
            finish[2]:try_send(true)
            w.queue:close()
            assert(wk:join(5000))
            committer.run_group = run_group
        end)
        assert.equal(seen[1].tok, seen[2].after)
    end)
end)

describe("ron.wallet.jobs: a pipelined group's commit timeout", function()
    it("counts from the end of the group before it, not from its start", function()
        -- group A's commit takes 150 ms of a 200-ms timeout; group B's work waits for A's
        -- end, then its own phase takes 100 ms: 250 ms after B started, within its time
        -- (it timed out before: answered ledger_timeout for A's commit)
        local jobs = require("ron.wallet.jobs")
        local out = {}
        S.run_task(function(task)
            local w = setmetatable({ commit_timeout_ms = 200, calls = {}, log = print,
                                     T = task, clock = function() return uv.now() end,
                                     m = { io_timeouts = {} },
                                     breaker = { record = function(_, ok)
                                         out.breaker = ok
                                     end } }, { __index = jobs.methods })
            function w:_spawn(_, fn) return task.spawn("call", fn) end
            local tok_a = { hold = true }
            task.spawn("a", function()
                task.sleep(150)
                pipeline.done(tok_a)
                return true
            end)
            local group = { after = tok_a }
            out.in_time = w:_call("commit", function(_, g)
                pipeline.wait(g.after)
                task.sleep(100)
                return "answer"
            end, group, function(timed_out, a)
                out.timed_out, out.answer = timed_out, a
            end)
            while out.answer == nil do task.sleep(5) end
        end)
        assert.is_true(out.in_time)
        assert.is_false(out.timed_out)
        assert.equal("answer", out.answer)
        assert.is_nil(out.breaker) -- (_call records only a timeout; run_group the rest)
    end)
end)
