-- ron.wallet.committer with ron.wallet.held (issue 29 item 3, docs/WALLET.md §6): a payer a
-- group commit found held by another saga is marked; its later jobs run apart from the lane
-- and its groups (a task of their own), so that the drive finding it held again delays no
-- other payer's commit; it is a payer like the others again once it commits. The fleet
-- shape end to end: tests/host/fleet.lua (ctest host-wallet-fleet).
local committer = require("ron.wallet.committer")
local fleet = require("ron.wallet.fleet")
local held = require("ron.wallet.held")

local function fake_wallet(now)
    local w = { held = held.new { clock = function() return now[1] end, hold_ms = 1000 },
                group_max = 256, m = { worker_inflight = 0 }, ran = {}, groups = {},
                spawned = {}, group_pipeline = false } -- (one group at a time: the order
                                                          -- the cases below check)
    function w:_spawn(kind, fn)
        self.spawned[#self.spawned + 1] = kind
        fn()
    end
    function w:_run_job(job) self.ran[#self.ran + 1] = job.id end
    w.busy = {}
    function w:_clear() end
    function w:_account_busy() return { status = 503, code = "account_busy" } end
    function w:_send(req, a) self.busy[#self.busy + 1] = req .. ":" .. a.code end
    return w
end

-- w's ledger for committer.work: commit_many answers member_of(req, i, opts) or committed
local function group_ledger(w, member_of)
    w.led = { commit_many = function(_, reqs, opts)
        local out = {}
        for i, r in ipairs(reqs) do
            out[i] = member_of(r, i, opts or {}) or { { transfer_id = "t" }, nil, nil }
        end
        return out
    end, store = { get_intents = function() return {} end,
                   put_intents = function(_, claims) return #claims end } }
    w.log = function() end
    function w:_money_request(job) return { from = job.r.from } end
end

local function lane(jobs)
    local q = { jobs = jobs, i = 0 }
    function q.recv(_, _)
        q.i = q.i + 1
        return q.jobs[q.i]
    end
    function q.lane_depth(_, _) return #q.jobs - q.i end
    return q
end

local function money(id, from)
    return { kind = "money", id = id, r = { from = from, nonce = id }, kkey = "k" .. id,
             nkey = "n" .. id, h = "h", req = "req" .. id }
end

-- committer.run_group records each group's job ids in w.groups (restored by after_each)
local function record_groups(w)
    committer.run_group = function(_, group)
        local ids = {}
        for i, j in ipairs(group) do ids[i] = j.id end
        w.groups[#w.groups + 1] = ids
    end
end

describe("ron.wallet.committer: payers found held run apart", function()
    local run_group
    before_each(function()
        run_group = committer.run_group
    end)
    after_each(function() committer.run_group = run_group end)

    it("marks a payer a group commit found held, and keeps its jobs out of the groups",
       function()
        local now = { 0 }
        local w = fake_wallet(now)
        -- a group's commit_many answers the held payer's member "postings held by saga"
        group_ledger(w, function(r)
            return r.from == "H" and { nil, "postings held by saga x", 10 }
        end)
        function w:_money_outcome(job, _, res)
            if res then
                self.held:clear(job.r.from)
                return { status = 201 }
            end
            return { status = 503 }, "held"
        end
        local out = committer.work(w, { money(1, "U"), money(2, "H") })
        assert.equal(201, out[1][1].status)
        assert.equal(503, out[2][1].status)
        assert.is_true(w.held:suspect("H"))
        assert.is_false(w.held:suspect("U"))

        -- later: the held payer's jobs run apart, the others still group without it
        now[1] = 5000 -- past hold_ms: intake lets it through again, the committer isolates it
        w.queue = lane { money(3, "U"), money(4, "H"), money(5, "V"), money(6, "H") }
        record_groups(w)
        committer.worker(w, 1)
        assert.same({ { 3, 5 } }, w.groups)
        assert.same({ 4, 6 }, w.ran)
        assert.same({ "held", "held" }, w.spawned)
        assert.equal(2, w.held.apart)
        assert.equal(0, w.held.apart_live)

        -- it commits again: a payer like the others
        w.held:clear("H")
        w.groups, w.ran, w.spawned = {}, {}, {}
        w.queue = lane { money(7, "H"), money(8, "U") }
        committer.worker(w, 1)
        assert.same({ { 7, 8 } }, w.groups)
        assert.same({}, w.spawned)
    end)

    it("forgets the held payers once a survivor recovered a dead node's sagas", function()
        -- (before: each stayed apart until it committed there, APART_MAX at a time: with 8
        -- held payers and 2 s commits at load 20 the last resumed 14 s after the kill)
        local w = fake_wallet({ 0 })
        w.held:mark("H")
        w.held:watch("G")
        local f = fleet.new(w, { ttl_ms = 5000 })
        assert.is_false(f:_recovered({ { node = "wallet-2", sagas = 0 } }))
        assert.is_false(f:_recovered({ { node = "wallet-2", sagas = 1, err = "down" } }))
        assert.is_false(f:_recovered(nil))
        assert.is_true(w.held:suspect("H"))
        assert.is_true(f:_recovered({ { node = "wallet-2", sagas = 2 } }))
        assert.is_nil(w.held:retry_after_s("H"))
        assert.is_false(w.held:suspect("H"))
        assert.is_false(w.held:suspect("G"))
        -- their next jobs join the groups; one of a payer still driven apart waits its turn
        w.held:enter("G")
        w.queue = lane { money(1, "H"), money(2, "U"), money(3, "G") }
        record_groups(w)
        committer.worker(w, 1)
        assert.same({ { 1, 2 } }, w.groups)
        assert.same({ "req3:account_busy" }, w.busy)
    end)

    it("is bounded: one job apart per payer, APART_MAX in all; the rest account_busy",
       function()
        local w = fake_wallet({ 0 })
        w.held:mark("H")
        w.held:mark("G")
        local m = w.held:enter("H") -- a job of H is apart now
        assert.is_true(committer.run_apart(w, money(1, "H")))
        assert.same({ "req1:account_busy" }, w.busy)
        w.held:leave("H", m)
        w.held.apart_live = committer.APART_MAX
        assert.is_true(committer.run_apart(w, money(2, "G")))
        assert.same({ "req1:account_busy", "req2:account_busy" }, w.busy)
        w.held.apart_live = 0
        assert.is_true(committer.run_apart(w, money(3, "H")))
        assert.same({ 3 }, w.ran)
        assert.is_false(committer.run_apart(w, money(4, "U")))
        assert.is_false(committer.run_apart(w, { kind = "account", id = 5 }))
        assert.equal(2, w.held.refused)
    end)

    it("takes back a held payer's first request from its group (hand_back), bounded",
       function()
        local w = fake_wallet({ 0 })
        local opts_seen = {}
        group_ledger(w, function(r, i, opts)
            if i == 1 then opts_seen[#opts_seen + 1] = opts.hand_back end
            return r.from == "H" and opts.hand_back
                   and { nil, "handed back", 10, handed = { sid = "s/" .. i } }
        end)
        function w:_money_outcome() return { status = 201 } end
        local jobs = { money(1, "U"), money(2, "H"), money(3, "V") }
        local out = committer.work(w, jobs)
        assert.equal(201, out[1][1].status)
        assert.same({ handed = true }, out[2])
        assert.equal(201, out[3][1].status)
        assert.same({ sid = "s/2" }, jobs[2].handed)
        assert.is_true(w.held:suspect("H")) -- its next jobs run apart
        assert.is_nil(w.held:retry_after_s("H")) -- not refused at intake: maybe a race
        assert.equal(1, w.m.group_handed)
        -- HANDED_MAX drives apart already: the group's commit drives it itself
        w.held.handed_live = committer.HANDED_MAX
        jobs = { money(4, "U"), money(5, "H") }
        out = committer.work(w, jobs)
        assert.equal(201, out[2][1].status)
        assert.is_nil(jobs[2].handed)
        assert.same({ true, false }, opts_seen)
        assert.equal(1, w.m.group_inline)
    end)

    it("keeps a payer's order across chains apart: a later chain waits for the one before",
       function()
        -- two groups of a lane in flight each hand back a member of P while a job of P runs
        -- apart: P's three commit one after another, in order; Q's is not held up
        local w = fake_wallet({ 0 })
        local tasks, log = {}, {}
        function w:_spawn(kind, fn)
            self.spawned[#self.spawned + 1] = kind
            tasks[#tasks + 1] = coroutine.create(fn)
        end
        w.T = { sleep = function() coroutine.yield() return true end }
        function w:_run_job(job)
            log[#log + 1] = "start " .. job.id
            for _ = 1, 3 do coroutine.yield() end
            log[#log + 1] = "end " .. job.id
        end
        w.held:mark("P")
        assert.is_true(committer.run_apart(w, money(1, "P")))
        committer.drive_apart(w, { money(2, "P"), money(3, "Q") }, true)
        committer.drive_apart(w, { money(4, "P") }, true)
        assert.is_true(committer.run_apart(w, money(5, "P"))) -- intake meanwhile: refused
        assert.same({ "req5:account_busy" }, w.busy)
        local turns = 0
        repeat
            local alive = false
            for _, co in ipairs(tasks) do
                if coroutine.status(co) ~= "dead" then
                    assert(coroutine.resume(co))
                    alive = true
                end
            end
            turns = turns + 1
        until not alive or turns > 100
        local at = {}
        for i, e in ipairs(log) do at[e] = i end
        assert.is_true(at["end 1"] < at["start 2"])
        assert.is_true(at["end 2"] < at["start 4"])
        assert.is_true(at["start 3"] < at["end 1"])
        assert.equal(8, #log)
        assert.is_nil(next(w.held.apart_of))
        assert.equal(0, w.held.handed_live)
        assert.equal(0, w.held.apart_live)
    end)

    it("is busy while a job runs apart or a handed-back member is driven", function()
        local h = held.new { clock = function() return 0 end }
        assert.is_false(h:busy())
        h.apart_live = 1
        local m = h:enter("P")
        assert.is_true(h:busy())
        h.apart_live = 0
        h:leave("P", m)
        assert.is_false(h:busy())
        h.handed_live = 1
        assert.is_true(h:busy())
    end)

    it("forgets a suspect after suspect_ms", function()
        local now = { 0 }
        local h = held.new { clock = function() return now[1] end, hold_ms = 1000,
                             suspect_ms = 10000 }
        h:mark("H")
        assert.equal(1, h:retry_after_s("H"))
        now[1] = 2000
        assert.is_nil(h:retry_after_s("H"))
        assert.is_true(h:suspect("H"))
        now[1] = 10001
        assert.is_false(h:suspect("H"))
    end)
end)
