-- ron.wallet.committer's group sizing (issue 25, docs/WALLET.md §8): closed-loop clients
-- (each sends its next request a little after its answer) must end up in one group, not in
-- two cohorts that alternate for good. A deterministic simulation: a virtual clock, the
-- lane a list of arrivals, a group's commit a fixed time, the committer's own worker loop.
local committer = require("ron.wallet.committer")

local COMMIT_MS = 20

-- -> a wallet whose lane delivers arrivals by the virtual clock; groups lists the sizes; a
-- client comes back cfg.think_ms (2) after its answer
local function sim(cfg, cohorts, max_groups)
    local think = cfg.think_ms or 2
    local now, arrivals, queued, id = { 0 }, {}, {}, 0
    local w = { group_max = cfg.group_max or 256, group_linger_ms = cfg.linger,
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
