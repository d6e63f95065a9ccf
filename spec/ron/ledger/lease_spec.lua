-- Node leases and a survivor's recovery of a dead node (lua/ron/ledger/lease.lua, LED-71;
-- issue 29 item 3) over the in-memory store and SQLite: the engine of node x stops in the
-- middle of a commit, holding its payer's posting (a saga stopped after its reserve phase:
-- a process SIGSTOPped, or killed, before its finalize); node s's commits from that payer
-- answer "postings held by saga x:..." (not a ledger failure); once x's lease stayed
-- expired for a renew period, s takes it over, recovers x's saga (driven to its outcome under
-- s) and frees the row. x then comes back: its suspended finalize, its compensation and any
-- new commit are refused by the store (the lease's guard: fenced), so the saga s finished
-- is never driven twice; a new engine of x rejoins under a new epoch.
local S = require("support")
local L = require("ron.ledger.ledger")
local exporter = require("ron.ledger.exporter")
local xlease = require("ron.ledger.exporter_lease")
local memory = require("ron.ledger.store.memory")
local store_mod = require("ron.ledger.store")
local sim = require("ron.ledger.sim")
local uv = require("luv")

local LF = dofile(S.root .. "spec/ron/ledger/lease_fixture.lua")

local USD = { code = "USD", scale = 2 }
local EXT, A, B = ("e"):rep(16), ("a"):rep(16), ("b"):rep(16)

local function noop() end

-- A store shared by the nodes, a clock the test moves, x's coroutine stopped after the
-- phase that reserved its inputs when `stop_x` is set.
local function world(backend)
    local w = { now = 1000000, stop = false }
    w.clock = function() return w.now end
    local function fault(when, name, _, ops)
        if when == "after" and name == "apply" and w.stop and coroutine.running() == w.xco then
            for _, op in ipairs(ops) do
                if op[1] == "reserve_postings" then
                    w.stop = false
                    coroutine.yield("held")
                end
            end
        end
    end
    if backend == "sqlite" then
        -- (SQLite's clock is the wall clock: the test waits instead of moving it)
        w.store = assert(store_mod.open { backend = "sqlite", path = S.tmpname(".sqlite") })
        w.sqlite = true
    else
        w.store = memory.new { clock = w.clock, fault = fault }
    end
    return w
end

local function engine(w, node) return LF.leased(w.store, node, LF.timing(w)) end

local function pay(led, intent, from, to, amount)
    return led:commit { intent = intent, movements = { { from = from, to = to, asset = USD,
                                                         amount = amount } } }
end

local function reserved(s)
    local n = 0
    for _, id in ipairs { A, B } do
        for _, p in ipairs(s:get_postings_by_account(id, USD)) do
            if p.status == "pending_inactive" then n = n + 1 end
        end
    end
    return n
end

-- s's accounts, A funded with 100 by s, then led's commit of 30 from A stopped right after
-- the phase that reserved A's posting (w.xco: resume it to go on).
local function held_saga(w, s, led, intent)
    assert(s:create_account { id = EXT, policy = "uncapped" })
    assert(s:create_account { id = A })
    assert(s:create_account { id = B })
    assert(pay(s, "fund", EXT, A, 100))
    led.one_tx = false -- (the saga's phases: it stops between two, LED-72 has none)
    w.stop = true
    w.xco = coroutine.create(function() return pay(led, intent, A, B, 30) end)
    local ok, what = coroutine.resume(w.xco)
    assert.is_true(ok, what)
    assert.equal("held", what)
end

describe("node leases (LED-71)", function()
    it("a survivor recovers a stopped node's saga; the node, back, is fenced", function()
        local w = world("memory")
        local x, lx = engine(w, "x")
        local s, ls = engine(w, "s")
        -- x stops right after reserving A's posting
        held_saga(w, s, x, "pay-1")
        assert.equal(1, reserved(w.store))
        assert.equal(1, #w.store:list_pending_sagas("x"))
        -- s: the payer is held by x's saga for every attempt: a race, not a failure
        local r, err, code = pay(s, "pay-2", A, B, 5)
        assert.is_nil(r)
        assert.equal(L.ERR.Unavailable, code)
        assert.is_true(L.is_held(err, code), err)
        assert.is_true(L.is_contention(err, code))
        assert.truthy(err:find("x:x:", 1, true), err)
        -- x's lease expires; s renews its own. The first scan only notes x expired.
        w.now = w.now + 6000
        assert.is_true(ls:renew())
        assert.same({}, ls:scan(s))
        assert.equal(1, reserved(w.store))
        -- one renew period later, still expired and unchanged: taken over and recovered
        w.now = w.now + 1000
        assert.is_true(ls:renew())
        local rep = ls:scan(s)
        assert.equal(1, #rep)
        assert.same({ "x", 1 }, { rep[1].node, rep[1].sagas })
        assert.equal(0, reserved(w.store))
        assert.same({}, w.store:list_pending_sagas("x"))
        local row = w.store:list_leases()[2]
        assert.same({ "x", 2 }, { row.node, row.epoch })
        assert.is_nil(row.owner) -- free: nothing left to recover
        local outcome = w.store:get_intent("pay-1")
        assert.equal("committed", outcome.status)
        assert.equal(70, s:balance(A, USD))
        assert.equal(30, s:balance(B, USD))
        -- the payer is free again (s's retry adopts its own record of pay-2)
        assert(pay(s, "pay-2", A, B, 5))
        assert.same({}, w.store:list_pending_sagas())
        -- x comes back: its finalize is refused by the store, nothing is driven twice
        local ok2, r2, err2, code2 = coroutine.resume(w.xco)
        assert.is_true(ok2, r2)
        assert.is_nil(r2)
        assert.equal(L.ERR.Unavailable, code2)
        assert.truthy(err2:find("Fenced", 1, true), err2)
        assert.is_true(lx.lost)
        local n3, err3 = pay(x, "pay-3", A, B, 1)
        assert.is_nil(n3)
        assert.truthy(err3:find("Fenced", 1, true), err3)
        assert.equal(65, s:balance(A, USD))
        assert.equal(35, s:balance(B, USD))
        assert.equal(0, reserved(w.store))
        local ok3, verr = sim.verify(w.store, "main")
        assert.is_true(ok3, verr)
        -- a new engine of x rejoins under a new epoch and commits
        local x2, lx2 = engine(w, "x")
        assert.equal(3, lx2.epoch)
        assert.same({}, x2:recover())
        assert(pay(x2, "pay-3", A, B, 1))
        assert.equal(64, s:balance(A, USD))
    end)

    it("a lease renewed within the renew period is not taken over (a stalled store)", function()
        local w = world("memory")
        local _, lx = engine(w, "x")
        local s, ls = engine(w, "s")
        w.now = w.now + 6000 -- everyone's lease expired (nobody could renew)
        assert.is_true(ls:renew())
        assert.same({}, ls:scan(s))
        assert.is_true(lx:renew()) -- x is back within the period
        w.now = w.now + 1000
        assert.same({}, ls:scan(s))
        assert.equal(0, ls.stats.takeovers)
        assert.is_true(lx:renew())
    end)

    it("two survivors: one takes the dead node over", function()
        local w = world("memory")
        engine(w, "x")
        local s, ls = engine(w, "s")
        local t, lt = engine(w, "t")
        w.now = w.now + 6000
        assert.is_true(ls:renew()); assert.is_true(lt:renew())
        ls:scan(s); lt:scan(t)
        w.now = w.now + 1000
        assert.is_true(ls:renew()); assert.is_true(lt:renew())
        local a, b = ls:scan(s), lt:scan(t)
        assert.equal(1, #a + #b)
        assert.equal(1, ls.stats.takeovers + lt.stats.takeovers)
    end)

    it("on SQLite: the guard fences the old epoch; a takeover needs the row expired", function()
        local w = world("sqlite")
        local x, lx = engine(w, "x")
        local s, ls = engine(w, "s")
        assert(s:create_account { id = EXT, policy = "uncapped" })
        assert(s:create_account { id = A })
        assert(pay(x, "fund", EXT, A, 100))
        assert.same({}, ls:scan(s))
        local t_end = os.time() + 10
        repeat -- x stops renewing: expired, then unchanged for a renew period
            assert.is_true(ls:renew())
            ls:scan(s)
            uv.sleep(20)
        until ls.stats.takeovers > 0 or os.time() > t_end
        assert.equal(1, ls.stats.takeovers)
        assert.is_false(lx:renew())
        local r, err = pay(x, "late", A, EXT, 1)
        assert.is_nil(r)
        assert.truthy(err:find("Fenced", 1, true), err)
        assert.is_nil(w.store:get_intent("late"))
        assert.equal(100, s:balance(A, USD))
        w.store:close()
    end)

    it("the rater holds a lease too: a survivor recovers a dead rater's saga (29.3)", function()
        local w = world("memory")
        local e = assert(exporter.new { store = w.store, card = "examples/cards/default.lua",
                                        node = "rater",
                                        lease = { ttl_ms = 5000, sleep = noop, clock = w.clock,
                                                  heartbeat = false, log = noop } })
        assert(e:ready())
        assert.same({ "rater", 1 }, { e.lease.node, e.lease.epoch })
        assert.equal(e.lease, e.led.lease) -- its engine's writes carry the guard
        local s, ls = engine(w, "s")
        -- the rater stops in a charge, holding the tenant wallet's posting, and dies
        held_saga(w, s, e.led, "charge-1")
        assert.equal(1, #w.store:list_pending_sagas("rater"))
        -- a wallet node's scan takes the rater over and recovers its saga
        w.now = w.now + 6000
        assert.is_true(ls:renew())
        ls:scan(s)
        w.now = w.now + 1000
        assert.is_true(ls:renew())
        local rep = ls:scan(s)
        assert.same({ "rater", 1 }, { rep[1].node, rep[1].sagas })
        assert.same({}, w.store:list_pending_sagas("rater"))
        assert.equal(0, reserved(w.store))
        assert.equal(70, s:balance(A, USD))
        -- the rater comes back: its lease is lost, its engine dropped; the next put makes
        -- a new one under a new epoch
        assert.is_false(xlease.renew(e))
        assert.is_nil(e.led)
        assert.equal(1, e.lease_lost)
        assert(e:ready())
        assert.equal(3, e.lease.epoch)
        assert(pay(e.led, "charge-2", A, B, 1))
        assert.equal(69, s:balance(A, USD))
        local ok3, verr = sim.verify(w.store, "main")
        assert.is_true(ok3, verr)
    end)

    it("the rater's lease option is checked", function()
        local card = "examples/cards/default.lua"
        local _, err = exporter.new { store = memory.new {}, card = card, lease = { ttl_ms = 1 } }
        assert.truthy(err:find("lease.ttl_ms must be", 1, true), err)
        _, err = exporter.new { store = memory.new {}, card = card, lease = { ttl = 5000 } }
        assert.truthy(err:find("unknown key 'lease.ttl'", 1, true), err)
    end)
end)
