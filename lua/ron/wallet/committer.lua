-- ron.wallet.committer: the wallet's group commit (issue 25). A committer worker takes a job
-- from the commit queue and, when it is a money job, every money job queued behind it (up
-- to group_max; first lingering a little while more may come: "group sizing" below): ONE
-- group, answered per request with exactly what committing each alone answers.
--
--   local committer = require("ron.wallet.committer")
--   w.queue = committer.queue(T, capacity, lanes)  -- the commit queue: try_send, depth, close
--   committer.worker(w, k)   -- the loop of committer task k (service W:_worker calls it)
--
-- The commit queue is one lane (a bounded task channel) per committer, capacity jobs in all
-- (a full queue is try_send's nil, "Busy": 429 busy, WLT-7). A job goes to the lane of its
-- payer (the account it debits; account management: the account), so one payer's jobs are
-- committed in arrival order by one committer, and two groups committing at once never
-- share a payer (they would race for its postings: the later one handed over to the single
-- path, retried, late). A hot payer is one committer's: its groups spend their own change.
--
-- A group's ledger work (in one child task under commit_timeout_ms, as a single job's) is
-- ONE Ledger:commit_many, whose opts.check (checker below) runs the single path's checks on
-- the batch's own first read (issue 25: no read and no write transaction of the wallet's):
--   1. that read holds every member's Idempotency-Key row too (opts.read) and its nonce row
--      (the member's intent)
--   2. a key used with another body: 422 idempotency_mismatch (as the single path)
--   3. the keys not there yet are claimed (claimed, the nonce in message, the body hash) by
--      the batch's first write: in its one phase, all or nothing, or on their own before
--      its saga's claims; a key another process claimed meanwhile with another body fails
--      the whole group with a retry class before the ledger wrote anything
--   4. a nonce stored for another body: its stored 409 nonce_used
--   5. the rest is the engine's batch path (a payer spends its own change inside the group,
--      one flush for the group, each request its own intent, outcome and event), each
--      result answered through W:_money_outcome, the single path's own rendering
--      (byte-identical answers, replays included)
--   6. a member the engine hands back (hand_back: another saga, maybe a dead node's, holds
--      its payer's postings) is not waited for: the others are answered, then it is driven
--      apart (drive_apart, issue 29 item 3) and answered once
-- A member whose outcome is a retry class (the store failed for it), or a group whose reads
-- or claims failed, falls back to the single path (W:_money: its retries and backoff), one
-- member at a time: a failing member never fails the others, never answers wrongly. The
-- claims and the nonces are the single path's rows: a request answered by a group and its
-- replay through the single path (or the reverse) meet the same outcome.
--
-- Bounded: a group is at most group_max jobs, all already in the bounded commit queue (its
-- full queue answers 429 busy, WLT-7); nothing else is buffered. Jobs keep their order
-- within a group (commit_many commits in order). A non-money job (account management) ends
-- the group and runs alone after it.
local bit = require("bit")
local dec = require("ron.ledger.bigint").dec
local tnew = require("table.new")
local pipeline = require("ron.ledger.engine.pipeline")

local format, ipairs, pcall, tostring, byte, setmetatable =
      string.format, ipairs, pcall, tostring, string.byte, setmetatable

local _M = {}

-- ---- the commit queue: one lane per committer ----

local Q = {}
Q.__index = Q

function _M.queue(T, capacity, lanes)
    local self = setmetatable({ lanes = {}, cap = capacity, n = 0 }, Q)
    for k = 1, lanes do self.lanes[k] = T.channel(capacity, "wallet_commit") end
    return self
end

-- FNV-1a over the account id's bytes -> 1..#lanes
local function lane_of(self, id)
    if #self.lanes == 1 or not id then return 1 end
    local h = 2166136261
    for i = 1, #id do h = bit.tobit(bit.bxor(h, byte(id, i)) * 16777619) end
    return bit.band(h, 0x7fffffff) % #self.lanes + 1
end

local function payer(job)
    if job.kind == "money" then return job.r.from or job.r.to end
    return job.id
end

function Q:try_send(job)
    if self.n >= self.cap then return nil, "Busy" end
    local ok, err = self.lanes[lane_of(self, payer(job))]:try_send(job)
    if ok then self.n = self.n + 1 end
    return ok, err
end

function Q:depth() return self.n end

function Q:close()
    for _, ch in ipairs(self.lanes) do ch:close() end
end

-- lane k's next job (waits); nil when closed and empty, or canceled
function Q:recv(k)
    local job = self.lanes[k]:recv()
    if job ~= nil then self.n = self.n - 1 end
    return job
end

function Q:lane_depth(k) return self.lanes[k]:depth() end

local function claim_of(job)
    return { key = job.kkey,
             outcome = { status = "claimed", message = dec(job.r.nonce), body_hash = job.h } }
end

-- Steps 1-4 as the ledger's commit_many check (opts.check, on the batch's own first read):
-- -> drop (the members answered here, their answers in out[i]), claims (the Idempotency-Key
-- rows not there yet, which the batch writes with its own first write). job.prior: the
-- member's nonce row read (nil: none; a fallback's single path reads it again).
local function checker(self, jobs, out)
    return function(got)
        local drop, claims = {}, tnew(#jobs, 0) -- (sized: no growth, issue 25)
        for i, job in ipairs(jobs) do
            local cur, prior = got[job.kkey], got[job.nkey]
            if cur and cur.body_hash ~= job.h then
                out[i] = { self:_prob("idempotency_mismatch",
                                      "this Idempotency-Key was used with another body"), true }
                drop[i] = true
            elseif prior and prior.body_hash ~= job.h then
                out[i] = { self:_nonce_used(job, prior), true }
                drop[i] = true
            else
                job.prior = prior
                if not cur then claims[#claims + 1] = claim_of(job) end
            end
        end
        return drop, claims
    end
end

-- A member's ledger outcome r ({ res, err, code }) whose nonce row read prior -> answer,
-- healthy, replayed; nil: a retry class (the single path answers it).
local function member_answer(self, job, prior, r)
    local a, class, replayed = self:_money_outcome(job, prior, r[1], r[2], r[3])
    -- held by another saga (a dead node's): refused at intake for hold_ms, then its jobs
    -- run apart (below) until it commits again
    if class == "held" and job.r.from then self.held:mark(job.r.from) end
    if class == "retry" then return nil end
    return a, true, replayed
end

-- At most HANDED_MAX groups' handed-back members are driven at once, each group's in at most
-- DRIVE_WIDTH drives (drive_apart; each drive may hold a store connection for a whole
-- commit); a group that starts while HANDED_MAX are driven is committed without the
-- hand-back: its commit_many drives such members itself, as before issue 29.
_M.HANDED_MAX = 4
_M.DRIVE_WIDTH = 4

-- The group's ledger work: -> { [i] = { answer, healthy, replayed } | { handed = true } }.
-- A member the ledger hands back (another saga, maybe a dead node's, holds its payer's
-- postings) is not waited for: job.handed names it, run_group drives it apart.
function _M.work(self, jobs)
    local out, retry = {}, {}
    local reqs, kkeys = tnew(#jobs, 0), tnew(#jobs, 0)
    for i, job in ipairs(jobs) do
        reqs[i] = self:_money_request(job)
        kkeys[i] = job.kkey
    end
    local hand_back = self.held.handed_live < _M.HANDED_MAX
    if not hand_back then self.m.group_inline = (self.m.group_inline or 0) + 1 end
    -- (a store failure of the group's read or of the claims: every member's result is a
    -- retry class, and the single path below decides each)
    local results = self.led:commit_many(reqs, { hand_back = hand_back, read = kkeys,
                                                 check = checker(self, jobs, out),
                                                 after = jobs.after, pending = jobs.tok })
    for i, job in ipairs(jobs) do
        local r = results[i]
        if r.handed then
            job.handed = r.handed
            out[i] = { handed = true }
            -- its payer's next jobs run apart too, until it commits
            if job.r.from then self.held:watch(job.r.from) end
            self.m.group_handed = (self.m.group_handed or 0) + 1
        elseif not r.dropped then -- (a dropped one: answered by the check, out[i])
            local a, healthy, replayed = member_answer(self, job, job.prior, r)
            if a == nil then retry[#retry + 1] = i
            else out[i] = { a, healthy, replayed } end
        end
    end
    for _, i in ipairs(retry) do
        local a, healthy, replayed = self:_money(jobs[i])
        out[i] = { a, healthy, replayed }
    end
    self.m.groups = (self.m.groups or 0) + 1
    self.m.grouped = (self.m.grouped or 0) + #jobs
    self.m.group_fallbacks = (self.m.group_fallbacks or 0) + #retry
    return out
end

-- One group through W:_call (commit_timeout_ms, the breaker, the answer cache, the in-flight
-- keys), each member answered on its own.
function _M.run_group(self, jobs)
    if not self.breaker:allow() then
        for _, job in ipairs(jobs) do
            self:_clear(job)
            self:_send(job.req, self:_prob("ledger_unavailable", "the ledger's breaker is open",
                { ["Retry-After"] = tostring(self.breaker:retry_after_s()) }))
        end
        return
    end
    local answered = {}
    local in_time = self:_call("commit", _M.work, jobs, function(timed_out, res)
        local handed = {}
        for i, job in ipairs(jobs) do
            -- a thrown error in work: W:_call hands its one problem for every member
            local r = res.status and { res, true, false } or res[i]
            local a, healthy, replayed = r[1], r[2], r[3]
            -- (job.handed even when work threw after the hand-back: its saga is in flight)
            if job.handed then handed[#handed + 1] = job
            else
                if not timed_out then self.breaker:record(healthy) end
                self:_keep_answer(job, a)
                self:_clear(job)
                if not timed_out then
                    answered[i] = true
                    self:_send(job.req, a, replayed)
                end
            end
        end
        -- the others are answered: the handed-back members now, apart (answered by their
        -- drive; after a timeout, answered ledger_timeout already: driven, not answered)
        if #handed > 0 then _M.drive_apart(self, handed, not timed_out) end
    end)
    if not in_time then
        for i, job in ipairs(jobs) do
            if not answered[i] then
                self:_send(job.req, self:_prob("ledger_timeout", format("the commit did not " ..
                    "finish within %d ms; it may still finish: retry the same request",
                    self.commit_timeout_ms), { ["Retry-After"] = "1" }))
            end
        end
    end
end

-- A job of a payer found held (ron.wallet.held:suspect): in a task of its own, apart from
-- the lane and its groups, so that its drive, which may find the payer held again for a
-- whole commit (issue 29 item 3: a dead node's saga until a survivor recovers it), delays
-- no other payer's commit. One job per payer apart at once and APART_MAX in all (each may
-- hold a store connection for a whole commit); the others are answered 503 account_busy
-- at once, as intake answers a payer held now. A timeout of a job apart is not counted by
-- the breaker (a race, not the ledger failing).
_M.APART_MAX = 2
-- (the task's closure made apart from run_apart, which runs for every job gathered: made in
-- it, it aborted every trace through it, issue 25)
local function spawn_apart(self, h, job, from, m)
    self:_spawn("held", function()
        self:_run_job(job)
        h.apart_live = h.apart_live - 1
        h:leave(from, m)
        return true
    end)
end

local function run_apart(self, job)
    local h = self.held
    local from = job.kind == "money" and job.r.from
    -- (a job of a payer still driven apart, forgotten meanwhile, waits its turn: order)
    if not from or not (h.apart_of[from] or h:suspect(from)) then return false end
    if h.apart_live >= _M.APART_MAX or h.apart_of[from] then
        h.refused = h.refused + 1
        self:_clear(job)
        self:_send(job.req, self:_account_busy(1))
        return true
    end
    h.apart, h.apart_live = h.apart + 1, h.apart_live + 1
    job.apart = true
    spawn_apart(self, h, job, from, h:enter(from))
    return true
end
_M.run_apart = run_apart

-- The drive of a member commit_many handed back (job.handed), through the single path under
-- its own saga, answered as the group answers its members (W:_job's fn for such a job).
function _M.drive_handed(self, job)
    local a, healthy, replayed = member_answer(self, job, job.prior,
                                               { self.led:drive_handed(job.handed) })
    if a == nil then return self:_money(job) end
    return a, healthy, replayed
end

-- One handed-back member driven (W:_job's way when send, else to its outcome only: the
-- group timed out and answered it ledger_timeout already; for the answer cache and its
-- keys' in-flight marks).
local function drive_one(self, job, send)
    if send then return self:_run_job(job) end
    local ok, a = pcall(_M.drive_handed, self, job)
    if not ok then self.log("commit error: " .. tostring(a))
    else self:_keep_answer(job, a) end
    self:_clear(job)
end

-- The handed-back members of a group (jobs, in order), apart from the lane (task kind
-- held): each under commit_timeout_ms as a job apart (W:_job: the breaker counts its
-- outcome, not its timeout; answered exactly once), or, when the group timed out (send
-- false), driven to its outcome only (drive_one). One chain per payer (its members in
-- order), the chains at once in up to DRIVE_WIDTH drives (HANDED_MAX groups at once):
-- one after another, a group with the first requests of 8 payers a dead node holds drove
-- them for 8 drives in a row, each finding the payer held for all its attempts (or, after
-- the takeover, committing alone), so the last answered 8 drives late (issue 29 item 3).
-- A payer is apart while its chain runs: its next jobs are answered account_busy at once
-- (run_apart), so its jobs keep their order; a chain of a payer already apart (a job run
-- apart, or the chain of the group before in a pipeline) starts once that one ended
-- (held:enter).
function _M.drive_apart(self, jobs, send)
    local h = self.held
    local chains, of = {}, {}
    for _, job in ipairs(jobs) do
        local from = job.r.from
        local c = from and of[from]
        if not c then
            c = { from = from, mark = from and h:enter(from) }
            chains[#chains + 1] = c
            if from then of[from] = c end
        end
        c[#c + 1] = job
        job.apart = true
    end
    local next_c, width = 0, math.min(#chains, _M.DRIVE_WIDTH)
    local live = width
    local function driver()
        while next_c < #chains do
            next_c = next_c + 1
            local c = chains[next_c]
            while c.mark and not h:ready(c.mark) do
                if not self.T.sleep(1) then break end -- canceled: drive it now
            end
            for _, job in ipairs(c) do drive_one(self, job, send) end
            if c.mark then h:leave(c.from, c.mark) end
        end
        live = live - 1
        if live == 0 then h.handed_live = h.handed_live - 1 end
        return true
    end
    h.handed_live = h.handed_live + 1
    for _ = 1, width do self:_spawn("held", driver) end
end

-- ---- group sizing ----
--
-- A group's cost is mostly per group (the store's round trips, the flush's fsync), so the
-- cost of a transfer follows the size of its group. Taking only what is queued when the
-- committer frees up splits closed-loop clients into cohorts for good: the members answered
-- at the end of group n come back while group n+1 commits and make group n+2, so with 64
-- clients the groups alternate x and 64 - x (measured, 16 sources and 64 connections:
-- groups of <= 8 and of <= 64 in turn, or of 32 each, at up to twice the CPU per transfer
-- of groups of 64). So a committer lingers before taking its group while the lane is
-- shorter than what may come: the members it just answered (they may come back) plus what
-- was already queued when it freed up (that came in during its last commit: another
-- cohort), up to group_max; at most group_linger_ms and a quarter of its last commit, so a
-- lull costs at most that, and a lone client nothing (its groups are of 1: no wait).
local function linger(self, k, st, queued)
    local q = self.queue
    local want = math.min(self.group_max, st.last + queued) -- jobs in the group
    -- (a pipeline: two cohorts, each's group while the other's is in flight)
    if self.group_pipeline ~= false then want = math.ceil(want / 2) end
    if q:lane_depth(k) + 1 >= want then return end
    local now = self.clock()
    local t_end = now + math.min(self.group_linger_ms, math.floor(st.took_ms / 4))
    local waited = false
    while q:lane_depth(k) + 1 < want and self.clock() < t_end do
        if not self.T.sleep(1) then break end -- canceled: stop
        waited = true
    end
    if waited then
        self.m.group_lingers = (self.m.group_lingers or 0) + 1
        self.m.group_linger_ms = (self.m.group_linger_ms or 0) + self.clock() - now
    end
end

-- ---- the lane's pipeline (issue 25) ----
--
-- A lane keeps up to two groups in flight. While group A's ledger work runs, the committer
-- gathers group B from what queued meanwhile and starts it once A's plan is made (its
-- phase is about to go to the store): B reads and plans on the state A's plan leaves
-- (commit_many's opts.after, ron.ledger.engine.pipeline) while A's phase runs, and sends
-- its own phase once A's group ended: its fallbacks run, its handed-back members marked
-- (the token's hold), so a payer's requests still commit in arrival order; or as soon as
-- A's phase committed with every member decided (the engine releases A: then no fallback
-- nor hand-back can follow, and A's answers are made while B's phase runs in the store).
-- The store's writer and the loop thus work side by side: with closed-loop
-- clients, two cohorts, each's HTTP, plan and answers while the other's phase runs. A third
-- group waits for A's end. A single job, a non-money job, and any job while a payer is
-- held (ron.wallet.held: its marks decide which jobs run apart) wait for every group in
-- flight to end, as before. `group_pipeline = false`: one group at a time.

-- fl: the lane's groups in flight (each with its token, dispatch), oldest first
local function prune(fl)
    while fl[1] and fl[1].tok.done do table.remove(fl, 1) end
end

local function drain_all(fl)
    for _, g in ipairs(fl) do pipeline.wait(g.tok) end
    prune(fl)
end

-- With group g in flight, the next one is taken once g's plan is made (B plans on it;
-- before, B's plan would only wait) and the lane holds the other cohort (half the members of
-- the lane's last two groups), or once g ended. (Polled each millisecond, as linger.)
local function await_plan(self, k, st, g)
    local q, tok = self.queue, g.tok
    local want = st and math.min(self.group_max, math.ceil((st.last + st.prev) / 2)) or 1
    while not tok.done and (not tok.items or q:lane_depth(k) + 1 < want) do
        if not self.T.sleep(1) then return end -- canceled
    end
end

-- Lane k's next group (waits for its first job): -> group (money jobs, maybe none: the jobs
-- of a payer found held run apart), after (a non-money job that ended it, or nil); nil when
-- the lane is closed and empty, or canceled. fl: the lane's groups in flight.
local function gather(self, k, fl)
    local q = self.queue
    local st = (self.group_linger_ms or 0) > 0 and self.group_max > 1 and self.sizing[k]
    if st and #fl == 0 then st.took_ms = self.clock() - st.t_group end -- the last group's
    local queued = q:lane_depth(k)
    local job = q:recv(k)
    if job == nil then return nil end
    prune(fl)
    if job.kind ~= "money" or (#fl > 0 and self.held:busy()) then drain_all(fl)
    elseif #fl >= 2 then -- (a third group: after the oldest's end, on the other's state)
        pipeline.wait(fl[1].tok)
        prune(fl)
    end
    if #fl == 1 then await_plan(self, k, st, fl[1])
    elseif st and job.kind == "money" then linger(self, k, st, queued) end
    local group, after = {}, nil
    if not run_apart(self, job) then group[1] = job end
    -- (a pipeline: at most half of the lane's members queued and in flight, so that two
    -- cohorts of closed-loop clients even out instead of keeping the split they began with)
    local cap = self.group_max
    if self.group_pipeline ~= false then
        cap = math.min(cap, math.ceil((q:lane_depth(k) + 1 + (fl[1] and #fl[1] or 0)) / 2))
    end
    if job.kind == "money" and self.group_max > 1 then
        -- what is queued now (recv of a non-empty channel does not yield)
        while #group < cap and q:lane_depth(k) > 0 do
            local nxt = q:recv(k)
            if nxt.kind ~= "money" then after = nxt; break end
            if not run_apart(self, nxt) then group[#group + 1] = nxt end
        end
    end
    if st then st.prev, st.last, st.t_group = st.last, #group, self.clock() end
    return group, after
end

-- One group, each member answered, whatever run_group raised.
local function run_safe(self, group)
    local ok, err = pcall(_M.run_group, self, group)
    if not ok then
        self.log("worker error: " .. tostring(err))
        for _, j in ipairs(group) do
            self:_clear(j)
            pcall(self._send, self, j.req, self:_prob("internal", "wallet error"))
        end
    end
end

-- One group in the committer's own task (group_pipeline = false).
local function run_inline(self, group)
    self.m.worker_inflight = self.m.worker_inflight + #group
    run_safe(self, group)
    self.m.worker_inflight = self.m.worker_inflight - #group
end

-- One group in its own task (kind "group"), after the lane's group in flight (fl's last)
-- when there is one; its token released however it ends.
local function dispatch(self, fl, group)
    local prev = fl[#fl]
    local tok = { hold = true }
    group.tok, group.after = tok, prev and not prev.tok.done and prev.tok or nil
    if group.after then self.m.group_pipelined = (self.m.group_pipelined or 0) + 1 end
    fl[#fl + 1] = group
    self.m.worker_inflight = self.m.worker_inflight + #group
    self:_spawn("group", function()
        run_safe(self, group)
        self.m.worker_inflight = self.m.worker_inflight - #group
        pipeline.done(tok)
        return true
    end)
end

-- The loop of committer task k (its lane of the queue).
function _M.worker(self, k)
    self.sizing = self.sizing or {}
    self.sizing[k] = { last = 1, prev = 1, t_group = self.clock and self.clock() or 0,
                       took_ms = 0 }
    local fl = {}
    while true do
        local group, after = gather(self, k, fl)
        if group == nil then break end -- closed (stop) or canceled (shutdown)
        -- (a lone job behind a group in flight goes the group's way: it plans on that
        -- group's state, as the second of a pipeline)
        if #group == 1 and #fl == 0 then self:_run_job(group[1])
        elseif #group > 0 and self.group_pipeline ~= false then dispatch(self, fl, group)
        elseif #group > 1 then run_inline(self, group) end -- (0: every job ran apart)
        if after then
            drain_all(fl)
            self:_run_job(after)
        end
    end
    drain_all(fl)
end

return _M
