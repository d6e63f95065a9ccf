-- A dead node's saga that a survivor's recovery could not decide yet (issue 29 item 4,
-- LED-71; docs/LEDGER.md "Recovery"), over the in-memory store and SQLite. Node x dies in a
-- group commit: (1) after its finalize, one member handed back (its payer's posting held by
-- node y's saga in flight) and never driven; (2) after its claims phase, before its reserve.
-- Survivor s takes x's lease over and recovers x's sagas while y still holds the payer: the
-- member's drive ends Unavailable (held) and its record stays. Then y commits.
--
-- Before the fix (the fleet's "stuck 409 in_flight on the survivor", host-wallet-fleet run 4):
-- in (1) the member's record stayed x's (its drive's open phase, refused because the claim
-- was there, never moved it to s; nor did a reserve), the lease row was freed anyway, and s's
-- retry of the request answered "intent in flight" for good (s lists only its own sagas to
-- adopt one); in (2) the record was s's but nobody drove it, so x restarted answered "intent
-- in flight" until the request came to s. Now the record is s's before the drive, and s's
-- scan resumes its own sagas nobody drives (Ledger:resume_idle): decided without any retry,
-- every node answers the same stored outcome, one transfer per intent.
local S = require("support")
local L = require("ron.ledger.ledger")
local memory = require("ron.ledger.store.memory")
local store_mod = require("ron.ledger.store")
local sim = require("ron.ledger.sim")
local uv = require("luv")

local LF = dofile(S.root .. "spec/ron/ledger/lease_fixture.lua")

local USD = LF.USD
local EXT, A, B = ("e"):rep(16), ("a"):rep(16), ("b"):rep(16)

local function world(backend)
    local w = { now = 1000000, sqlite = backend == "sqlite" }
    w.clock = function() return w.now end
    if w.sqlite then
        -- (SQLite's lease clock is the wall clock: the test waits instead of moving it)
        w.store = assert(store_mod.open { backend = "sqlite", path = S.tmpname(".sqlite") })
    else
        w.store = memory.new { clock = w.clock }
    end
    return w
end

-- The store as one engine sees it: every method forwarded to the shared one, and its phase
-- (apply) followed by a stop (a yield of the engine's coroutine) when stop(ops) says so.
local function view_of(w, stop)
    local real = w.store
    local v = {}
    return setmetatable(v, { __index = function(_, k)
        if k == "apply" then
            return function(_, ops, opts)
                local res, err, cls = real:apply(ops, opts)
                if res and res.ok and stop.when and stop.when(ops) then
                    stop.when = nil
                    coroutine.yield("stopped")
                end
                return res, err, cls
            end
        end
        local x = real[k]
        if type(x) == "function" then return function(_, ...) return x(real, ...) end end
        return x
    end })
end

local function engine(w, node, leased, stop)
    local st = stop and view_of(w, stop) or w.store
    if not leased then return L.new { store = st, book = "main", node = node, nonce = node } end
    return LF.leased(w.store, node, LF.timing(w), st)
end

local req = LF.req

local function has(ops, name)
    for _, op in ipairs(ops) do if op[1] == name then return true end end
    return false
end

-- A and B funded with 100 each; node y's commit of 30 from A stopped right after the phase
-- that reserved A's only posting (y's coroutine: resume it to go on).
local function y_holds_a(w, s)
    assert(s:create_account { id = EXT, policy = "uncapped" })
    assert(s:create_account { id = A })
    assert(s:create_account { id = B })
    assert(s:commit(req("fund-a", EXT, A, 100)))
    assert(s:commit(req("fund-b", EXT, B, 100)))
    local stop = { when = function(ops) return has(ops, "reserve_postings") end }
    local y = engine(w, "y", false, stop)
    y.one_tx = false -- (the saga's phases: it stops between two, LED-72 has none)
    local co = coroutine.create(function() return y:commit(req("y-1", A, B, 30)) end)
    local ok, what = coroutine.resume(co)
    assert.is_true(ok, what)
    assert.equal("stopped", what)
    return co
end

-- x's lease expires and s takes it over: s's scan recovers x's sagas. -> its report
local function take_over(w, ls, s)
    if not w.sqlite then
        w.now = w.now + 6000
        assert.is_true(ls:renew())
        ls:scan(s)
        w.now = w.now + 1000
        assert.is_true(ls:renew())
        return ls:scan(s)
    end
    local t_end = os.time() + 10
    repeat
        assert.is_true(ls:renew())
        local rep = ls:scan(s)
        if ls.stats.takeovers > 0 then return rep end
        uv.sleep(20)
    until os.time() > t_end
    error("x was never taken over")
end

local function y_commits(co)
    local ok, r, err = coroutine.resume(co)
    assert.is_true(ok, r)
    assert.is_table(r, err)
    assert.equal("committed", r.status)
end

-- Every engine answers intent with the same stored outcome (a replay of one transfer).
local function same_outcome(engines, intent, rq)
    local first
    for _, led in ipairs(engines) do
        local r, err = led:commit(rq)
        assert.is_table(r, intent .. ": " .. tostring(err))
        assert.is_true(r.replayed)
        first = first or r
        assert.same({ first.transfer_id, first.event_seq }, { r.transfer_id, r.event_seq })
    end
    return first
end

local function settled(w, s)
    assert.same({}, w.store:list_pending_sagas())
    -- one transfer per intent: the balances (funding, y's 30, B's 1 and A's 10 once each)
    assert.equal(100 - 30 + 1 - 10, s:balance(A, USD))
    assert.equal(100 + 30 - 1 + 10, s:balance(B, USD))
    local ok, verr = sim.verify(w.store, "main")
    assert.is_true(ok, verr)
end

-- y holds A; x's group: B's member commits, A's is handed back (y holds A's posting); x
-- dies before driving it. -> w, s, its lease, y's coroutine, A's request
local function handed_back(backend)
    local w = world(backend)
    local x = engine(w, "x", true)
    local s, ls = engine(w, "s", true)
    local co = y_holds_a(w, s)
    local pay1 = req("pay-1", A, B, 10)
    local res = x:commit_many({ req("pay-b", B, A, 1), pay1 }, { hand_back = true })
    assert.is_table(res[1][1], res[1][2])
    assert.is_table(res[2].handed, res[2][2])
    return w, s, ls, co, pay1
end

for _, backend in ipairs { "memory", "sqlite" } do
    describe("a dead node's saga still racing when a survivor recovers it (" .. backend .. ")",
             function()
        it("a handed-back member: the survivor's, decided by its scan, the same everywhere",
           function()
            local w, s, ls, co, pay1 = handed_back(backend)
            assert.equal(1, #w.store:list_pending_sagas("x"))
            -- s recovers x while y still holds A: the member's drive is held, undecided
            local rep = take_over(w, ls, s)
            assert.same({ "x", 1 }, { rep[1].node, rep[1].sagas })
            assert.is_nil(w.store:get_intent("pay-1"))
            -- nothing is left the dead node's (its row is free): the record is s's
            assert.same({}, w.store:list_pending_sagas("x"))
            assert.is_nil(w.store:list_leases()[2].owner)
            assert.equal(1, #w.store:list_pending_sagas("s"))
            -- y goes on; s's next scan decides the member with nobody asking
            y_commits(co)
            local rep2 = ls:scan(s)
            assert.equal(1, #rep2.idle)
            assert.is_true(rep2.idle[1].ok, rep2.idle[1].err)
            assert.equal("committed", w.store:get_intent("pay-1").status)
            -- x restarted and s answer the request alike
            local x2 = engine(w, "x", true)
            assert.same({}, x2:recover())
            same_outcome({ s, x2 }, "pay-1", pay1)
            settled(w, s)
        end)

        it("a retry on the survivor adopts the member before its scan", function()
            local w, s, ls, co, pay1 = handed_back(backend)
            take_over(w, ls, s)
            y_commits(co)
            -- before: "intent in flight in saga x:x:..." for good (s could not adopt it)
            local r, err = s:commit(pay1)
            assert.is_table(r, err)
            assert.is_false(r.replayed)
            same_outcome({ s }, "pay-1", pay1)
            settled(w, s)
        end)

        it("a group stopped after its claims: the member left racing is decided by the "
           .. "survivor; the dead node, back, replays it", function()
            local w = world(backend)
            local stop = { when = nil }
            local x = engine(w, "x", true, stop)
            local s, ls = engine(w, "s", true)
            local co = y_holds_a(w, s)
            local pay1 = req("pay-1", A, B, 10)
            -- x stops (dies) right after the phase that wrote its record and the claims
            stop.when = function(ops) return has(ops, "put_intents") end
            local xco = coroutine.create(function()
                return x:commit_many({ req("pay-b", B, A, 1), pay1 })
            end)
            local ok, what = coroutine.resume(xco)
            assert.is_true(ok, what)
            assert.equal("stopped", what)
            local rep = take_over(w, ls, s)
            assert.same({ "x", 1 }, { rep[1].node, rep[1].sagas })
            assert.equal("committed", w.store:get_intent("pay-b").status)
            assert.is_nil(w.store:get_intent("pay-1"))
            assert.same({}, w.store:list_pending_sagas("x"))
            y_commits(co)
            ls:scan(s)
            -- x restarts: its request is decided (before: "intent in flight" on x until
            -- the request came to s)
            local x2 = engine(w, "x", true)
            assert.same({}, x2:recover())
            same_outcome({ x2, s }, "pay-1", pay1)
            same_outcome({ s, x2 }, "pay-b", req("pay-b", B, A, 1))
            settled(w, s)
        end)
    end)
end
