-- The engine (lua/ron/ledger/ledger.lua) over the in-memory store: the commit path's
-- behaviour, one case per rule of docs/LEDGER.md "The commit path" (LED-26..LED-34).
-- The crash/interleaving search is sim_spec.lua.
local S = require("support")
local L = require("ron.ledger.ledger")
local store = require("ron.ledger.store")
local ledger = require("ron.ledger")
local memory = require("ron.ledger.store.memory")
local sim = require("ron.ledger.sim")
local events = require("ron.ledger.events")
local scan = require("ron.ledger.store.scan")

local USD = { code = "USD", scale = 2 }
local EUR = { code = "EUR", scale = 2 }
local EXT, A, B, C, R = ("e"):rep(16), ("a"):rep(16), ("b"):rep(16), ("c"):rep(16), ("r"):rep(16)

local BACKEND = "memory"

local function setup(opts)
    opts = opts or {}
    local s
    if BACKEND == "sqlite" then
        s = assert(store.open { backend = "sqlite", path = S.tmpname(".sqlite"),
                                synchronous = "normal" })
    else
        s = memory.new { fault = opts.fault }
    end
    local led = L.new { store = s, book = "main", node = opts.node or "n1", nonce = "t",
                        clock = function() return 1000 end, one_tx = opts.one_tx }
    assert(led:create_account { id = EXT, policy = "uncapped" })
    assert(led:create_account { id = A })
    assert(led:create_account { id = B })
    assert(led:create_account { id = C, policy = "capped", floor = -50 })
    assert(led:create_account { id = R, policy = "uncapped" })
    return led, s
end

local function mv(from, to, amount, asset)
    return { from = from, to = to, amount = amount, asset = asset or USD }
end

local function pay(led, intent, ...)
    return led:commit { intent = intent, movements = { ... } }
end

-- An engine on store s (node n1, nonce a) with EXT (uncapped), A and B, A funded amount
-- from EXT (intent "dep").
local function funded(s, amount, extra)
    local led = L.new(S.merge({ store = s, node = "n1", nonce = "a" }, extra))
    assert(led:create_account { id = EXT, policy = "uncapped" })
    assert(led:create_account { id = A })
    assert(led:create_account { id = B })
    assert(pay(led, "dep", mv(EXT, A, amount)))
    return led
end

local function bal(led, id, asset) return led:balance(id, asset or USD) end

-- The behaviour cases run on the in-memory store and on SQLite (the same engine, the same
-- answers); the fault cases need the memory store's hook.
for _, backend in ipairs { "memory", "sqlite" } do
describe("ledger engine on " .. backend, function()
    before_each(function() BACKEND = backend end)
    after_each(function() BACKEND = "memory" end)
    it("commits: balances from postings, change back to the payer, gapless events", function()
        local led, s = setup()
        -- the five accounts' versions are the feed's first events (LED-68)
        local ev0 = led:events_since(0, 10)
        assert.equal(5, #ev0)
        for i, e in ipairs(ev0) do assert.same({ i, "account" }, { e.seq, e.kind }) end
        local r = assert(pay(led, "dep", mv(EXT, A, 100)))
        assert.equal(32, #r.transfer_id); assert.equal(6, r.event_seq)
        assert.is_false(r.replayed)
        local r2 = assert(pay(led, "pay", mv(A, B, 30)))
        assert.equal(7, r2.event_seq)
        assert.equal(70, bal(led, A)); assert.equal(30, bal(led, B))
        assert.equal(-100, bal(led, EXT))
        -- the 100 posting was consumed whole; B got 30 and A 70 change
        local t = led:transfer(r2.transfer_id).transfer
        assert.equal(1, #t.inputs); assert.equal(2, #t.outputs)
        assert.same({ 70, 30 }, { t.outputs[1].amount, t.outputs[2].amount }) -- change, credit
        local ev = led:events_since(5, 10)
        assert.same({ 6, 7 }, { ev[1].seq, ev[2].seq })
        assert.equal(0, #s:list_pending_sagas())
        assert.equal(2, #led:history(A))
    end)

    it("aggregates movements per (account, asset) and keeps assets apart", function()
        local led = setup()
        assert(pay(led, "d1", mv(EXT, A, 100), mv(EXT, A, 50, EUR)))
        assert(pay(led, "p", mv(A, B, 10), mv(A, C, 20), mv(A, B, 5, EUR), mv(B, A, 1)))
        assert.equal(71, bal(led, A)); assert.equal(9, bal(led, B)); assert.equal(20, bal(led, C))
        assert.equal(45, bal(led, A, EUR)); assert.equal(5, bal(led, B, EUR))
    end)

    it("a deterministic rejection is stored: the replay gets it again (LED-27)", function()
        local led = setup()
        assert(pay(led, "dep", mv(EXT, A, 10)))
        local n, err, code = pay(led, "big", mv(A, B, 11))
        assert.is_nil(n); assert.equal(L.ERR.InsufficientFunds, code)
        assert.matches("^InsufficientFunds: ", err)
        assert(pay(led, "dep2", mv(EXT, A, 10))) -- now A could pay: the outcome stays
        local n2, err2, code2 = pay(led, "big", mv(A, B, 11))
        assert.is_nil(n2); assert.equal(err, err2); assert.equal(code, code2)
        local _, err3, code3 = pay(led, "big", mv(A, B, 12))
        assert.equal(L.ERR.Conflict, code3); assert.matches("^Conflict", err3)
    end)

    it("a committed intent replays its outcome; another body is a Conflict", function()
        local led = setup()
        local r = assert(led:commit { intent = "k", body_hash = ("h"):rep(32),
                                      movements = { mv(EXT, A, 5) } })
        local again = assert(led:commit { intent = "k", body_hash = ("h"):rep(32),
                                          movements = { mv(EXT, A, 5) } })
        assert.is_true(again.replayed); assert.equal(r.transfer_id, again.transfer_id)
        assert.equal(r.event_seq, again.event_seq)
        assert.equal(5, bal(led, A))
        local _, _, code = led:commit { intent = "k", body_hash = ("x"):rep(32),
                                        movements = { mv(EXT, A, 5) } }
        assert.equal(L.ERR.Conflict, code)
        assert.equal(5, bal(led, A))
    end)

    it("overdraft: the payer is drained and the shortfall goes to the receivable", function()
        local led = setup()
        assert(pay(led, "dep", mv(EXT, A, 20)))
        local r = assert(led:commit { intent = "u", movements = { mv(A, B, 50) },
                                      overdraft = { [A] = R } })
        assert.equal(0, bal(led, A)); assert.equal(50, bal(led, B)); assert.equal(-30, bal(led, R))
        assert.truthy(r.transfer_id)
        -- without the policy a no-overdraft payer is refused
        local _, _, code = pay(led, "u2", mv(A, B, 1))
        assert.equal(L.ERR.InsufficientFunds, code)
    end)

    it("capped: down to the floor and not below; credits always pass (LED-7, LED-29)", function()
        local led, s = setup()
        assert(pay(led, "c1", mv(C, B, 50)))
        assert.equal(-50, bal(led, C))
        local _, _, code = pay(led, "c2", mv(C, B, 1))
        assert.equal(L.ERR.InsufficientFunds, code)
        assert(pay(led, "c3", mv(EXT, C, 20)))
        assert(pay(led, "c4", mv(C, B, 20)))
        assert.equal(-50, bal(led, C))
        -- the head was taken and given back each time
        local h = s:get_heads({ { account = C, asset = USD } })[1]
        assert.is_nil(h.holder); assert.equal(2, h.version)
    end)

    it("reverse: through the same path, once (LED-34)", function()
        local led = setup()
        assert(pay(led, "dep", mv(EXT, A, 100)))
        local r = assert(pay(led, "pay", mv(A, B, 30)))
        local rv = assert(led:reverse(r.transfer_id, "rev"))
        assert.equal(100, bal(led, A)); assert.equal(0, bal(led, B))
        local again = assert(led:reverse(r.transfer_id, "rev"))
        assert.is_true(again.replayed); assert.equal(rv.transfer_id, again.transfer_id)
        local _, _, code = led:reverse(r.transfer_id, "rev2")
        assert.equal(L.ERR.PostingSpent, code)
        local _, _, code2 = led:reverse(("z"):rep(32), "rev3")
        assert.equal(L.ERR.NotFound, code2)
        -- reversing the reversal re-applies the payment
        assert(led:reverse(rv.transfer_id, "rev4"))
        assert.equal(70, bal(led, A)); assert.equal(30, bal(led, B))
    end)

    it("freeze, unfreeze, close: versions appended; frozen and closed take no part", function()
        local led, s = setup()
        assert(pay(led, "dep", mv(EXT, A, 10)))
        assert.equal(2, assert(led:freeze(A)).version)
        assert.equal(2, assert(led:freeze(A)).version) -- already frozen: no new version
        local _, _, code = pay(led, "x", mv(A, B, 1))
        assert.equal(L.ERR.AccountFrozen, code)
        local _, _, code2 = pay(led, "y", mv(EXT, A, 1))
        assert.equal(L.ERR.AccountFrozen, code2)
        assert(led:unfreeze(A))
        assert(pay(led, "z", mv(A, B, 1)))
        assert(led:close(B))
        local _, _, code3 = led:unfreeze(B)
        assert.equal(L.ERR.AccountClosed, code3)
        local _, _, code4 = pay(led, "w", mv(A, B, 1))
        assert.equal(L.ERR.AccountClosed, code4)
        assert.equal(2, #s:get_account_history(B)) -- 1 open, 2 closed
        assert.equal(3, #s:get_account_history(A))
    end)

    it("refuses malformed requests without storing anything", function()
        local led, s = setup()
        for _, req in ipairs {
            { intent = "", movements = { mv(EXT, A, 1) } },
            { intent = ("k"):rep(256), movements = { mv(EXT, A, 1) } },
            { intent = "k", movements = {} },
            { intent = "k", movements = { mv(EXT, A, 0) } },
            { intent = "k", movements = { mv(EXT, A, 1.5) } },
            { intent = "k", movements = { mv(EXT, "short", 1) } },
            { intent = "k", body_hash = "x", movements = { mv(EXT, A, 1) } },
        } do
            local n, _, code = led:commit(req)
            assert.is_nil(n); assert.equal(L.ERR.InvalidRequest, code)
        end
        assert.is_nil(s:get_intent("k"))
        local _, _, code = pay(led, "unknown", mv(EXT, ("q"):rep(16), 1))
        assert.equal(L.ERR.UnknownAccount, code)
    end)

end)
end

describe("ledger engine: faults (memory store)", function()
    it("a store that keeps failing is Unavailable, never a rejection (LED-32)", function()
        for _, one_tx in ipairs { false, true } do
            local failing = true
            local led, s = setup { one_tx = one_tx, fault = function(phase, name)
                if failing and phase == "before" and name == "reserve_postings" then
                    return { err = "could not serialize access", class = "retry" }
                end
            end }
            failing = false
            assert(pay(led, "dep", mv(EXT, A, 10)))
            failing = true
            local n, err, code = pay(led, "p", mv(A, B, 5))
            assert.is_nil(n); assert.equal(L.ERR.Unavailable, code)
            assert.matches("^Unavailable", err)
            assert.is_true(L.RETRY[code])
            assert.is_nil(s:get_intent("p"))
            assert.equal(10, bal(led, A))
            -- the saga's record is kept: the retry (or recover) finishes it; the
            -- one-transaction commit (LED-72) left nothing at all
            assert.equal(one_tx and 0 or 1, #s:list_pending_sagas())
            failing = false
            local r = assert(pay(led, "p", mv(A, B, 5))) -- adopts the saga
            assert.truthy(r.transfer_id)
            assert.equal(5, bal(led, A)); assert.equal(0, #s:list_pending_sagas())
        end
    end)

    it("a partial reservation is released and resolved again", function()
        local limit
        local led = setup { fault = function(phase, name)
            if limit and phase == "before" and name == "reserve_postings" then
                local l = limit
                limit = nil
                return { limit = l }
            end
        end }
        assert(pay(led, "d1", mv(EXT, A, 10)))
        assert(pay(led, "d2", mv(EXT, A, 10)))
        limit = 1
        local r0 = led.stats.resolves -- (d2 may plan from the plan cache, LED-73)
        assert(pay(led, "p", mv(A, B, 15)))
        assert.equal(5, bal(led, A)); assert.equal(15, bal(led, B))
        assert.equal(2, led.stats.resolves - r0)
    end)

    it("a crash inside the finalize phase leaves none of it, after it all of it; recover() "
       .. "ends committed either way (LED-31, LED-67)", function()
        local crash_at, applies = nil, 0
        local s = memory.new { fault = function(phase, name)
            if phase == "after" and name == "apply" then applies = applies + 1 end
            -- inside the third phase of the commit, or right after it
            if phase == "after" and name == crash_at
               and applies == (name == "apply" and 3 or 2) then
                error("crash", 0)
            end
        end }
        local led = funded(s, 1000, { one_tx = false })
        -- the primitives of the finalize phase, then the phase's call itself (the third
        -- apply of a commit: open, reserve, finalize; the saga's phases, not LED-72's)
        local points = { "deactivate_postings", "insert_postings", "store_transfer",
                         "put_intent", "delete_saga", "append_event", "get_event", "apply" }
        for _, point in ipairs(points) do
            crash_at, applies = point, 0
            local ok = pcall(led.commit, led, { intent = "x-" .. point,
                                                movements = { mv(A, B, 7) } })
            assert.is_false(ok, point)
            crash_at = nil
            -- inside the phase: nothing of it applied (the saga is still reserving)
            local inside = point ~= "apply"
            assert.equal(inside and 1 or 0, #s:list_pending_sagas())
            if inside then assert.is_nil(s:get_intent("x-" .. point)) end
            led = L.new { store = s, node = "n1", nonce = "b" .. point, one_tx = false }
            local rep = assert(led:recover())
            -- after the phase the commit was complete: nothing left to recover
            assert.equal(inside and 1 or 0, #rep)
            if rep[1] then assert.is_true(rep[1].ok) end
            assert.equal("committed", s:get_intent("x-" .. point).status)
            assert.equal(0, #s:list_pending_sagas())
            local ok2, err = sim.verify(s, "main")
            assert(ok2, err)
        end
        assert.equal(#points * 7, bal(led, B)); assert.equal(1000 - #points * 7, bal(led, A))
        assert.equal(3 + #points + 1, s:head_seq("main")) -- 3 account versions, the transfers
    end)

    it("a reader between any two store calls sees balances that existed at an event seq and "
       .. "no posting before its transfer (issue 29, LED-67)", function()
        -- the reader looks at every point another connection could: between two calls to
        -- the store, never inside one (a phase is a transaction)
        local s, seen, bad = nil, {}, {}
        local looking = false
        s = memory.new { fault = function()
            if looking or s.in_apply then return end
            looking = true
            local b = s:get_balances { { account = A, asset = USD }, { account = B, asset = USD } }
            seen[#seen + 1] = b[1] .. "/" .. b[2]
            for _, p in ipairs(s:get_postings_by_account(A, USD, "active")) do
                if not s:get_transfer(p.id.transfer_id) then
                    bad[#bad + 1] = "posting of " .. ledger.hex(p.id.transfer_id):sub(1, 8)
                                    .. " before its transfer"
                end
            end
            looking = false
        end }
        local led = funded(s, 100)
        assert(pay(led, "p1", mv(A, B, 10)))
        assert(pay(led, "p2", mv(A, B, 10)))
        for _, r in ipairs(led:commit_many { { intent = "b1", movements = { mv(A, B, 10) } },
                                             { intent = "b2", movements = { mv(A, B, 10) } } }) do
            assert.truthy(r[1], tostring(r[2]))
        end
        -- the states the event feed names: before the deposit, then after each transfer
        local existed = { ["0/0"] = true, ["100/0"] = true, ["90/10"] = true, ["80/20"] = true,
                          ["60/40"] = true }
        for i, v in ipairs(seen) do
            if not existed[v] then bad[#bad + 1] = "read " .. i .. ": A/B " .. v end
        end
        assert.same({}, bad)
        assert.is_true(#seen > 10)
    end)

    it("recover() rolls forward a transfer an older binary left half-finalized, step by step "
       .. "(LED-31)", function()
        local s = memory.new()
        local led = funded(s, 1000)
        -- the phase's first guard misses every time (its inputs stay ours): the engine
        -- finalizes step by step, as a binary before phases did, and dies half-way
        s.fault = function(when, name)
            if when == "before" and name == "deactivate_postings" and s.in_apply then
                return { limit = 0 }
            end
            if when == "after" and name == "insert_postings" and not s.in_apply then
                error("crash", 0)
            end
        end
        assert.is_false(pcall(led.commit, led, { intent = "x", movements = { mv(A, B, 7) } }))
        s.fault = nil
        local pend = s:list_pending_sagas()
        assert.equal(1, #pend)
        assert.equal("finalizing", pend[1].phase)
        assert.is_nil(s:get_intent("x"))
        assert.equal(993 + 7, bal(led, A) + bal(led, B)) -- consumed, outputs in
        led = L.new { store = s, node = "n1", nonce = "b" }
        local rep = assert(led:recover())
        assert.is_true(rep[1].ok)
        assert.equal("committed", s:get_intent("x").status)
        assert.equal(993, bal(led, A)); assert.equal(7, bal(led, B))
        local ok, err = sim.verify(s, "main")
        assert(ok, err)
    end)

    it("a crash at any store call of an account change or a rejection leaves its row and its "
       .. "event both or neither (LED-67, LED-68)", function()
        -- row <-> event, both ways: every account version and its `account` event (the same
        -- bytes), every stored rejection and its `rejection` event
        local function unpaired(s)
            local evs, bad = {}, {}
            for _, e in ipairs(s:get_events_since("main", 0, 1000)) do
                evs[e.kind .. e.transfer_id] = e
            end
            local named = {}
            for _, a in ipairs(scan.all(s, "accounts")) do
                local k = events.ACCOUNT .. events.account_id(a.bytes)
                named[k] = true
                if not evs[k] or evs[k].data ~= a.bytes then
                    bad[#bad + 1] = "account version without its event"
                end
            end
            for _, o in ipairs(scan.all(s, "intents")) do
                if o.status == "rejected" then
                    local k = events.REJECTION .. events.rejection_id(o.key)
                    named[k] = true
                    if not evs[k] then bad[#bad + 1] = "rejection of " .. o.key .. " without its event" end
                end
            end
            for k, e in pairs(evs) do
                if (e.kind == events.ACCOUNT or e.kind == events.REJECTION) and not named[k] then
                    bad[#bad + 1] = e.kind .. " event at seq " .. e.seq .. " without its row"
                end
            end
            return bad
        end
        local ops = {
            function(led) return led:create_account { id = ("n"):rep(16) } end,
            function(led) return led:freeze(A) end,
            function(led) return pay(led, "big", mv(A, B, 11)) end,
        }
        local crashes = 0
        for k, op in ipairs(ops) do
            for at = 1, 200 do
                local calls, crash = 0, false
                local led, s = setup { fault = function()
                    if not crash then return end
                    calls = calls + 1
                    if calls == at then error("crash", 0) end
                end }
                assert(pay(led, "dep", mv(EXT, A, 10)))
                crash = true
                local ok = pcall(op, led)
                crash = false
                assert.same({}, unpaired(s), "op " .. k .. ", crash at call " .. at)
                -- recover() and the operation again: the same answer as without a crash
                led = L.new { store = s, book = "main", node = "n1", nonce = "r" .. at }
                assert(led:recover())
                op(led)
                assert.same({}, unpaired(s), "op " .. k .. " again after crash at call " .. at)
                if ok then break end
                crashes = crashes + 1
            end
        end
        assert.is_true(crashes >= 6)
    end)

    it("an intent in flight elsewhere is Unavailable; with another body a Conflict", function()
        local s = memory.new()
        local other = L.new { store = s, node = "n2", nonce = "o", one_tx = false }
        assert(other:create_account { id = EXT, policy = "uncapped" })
        assert(other:create_account { id = A })
        -- n2 claims the intent (the saga's open phase) and dies before reserving
        s.fault = function(phase, name)
            if phase == "after" and name == "apply" then error("crash", 0) end
        end
        assert.is_false(pcall(other.commit, other, { intent = "k", movements = { mv(EXT, A, 1) } }))
        s.fault = nil
        local led = L.new { store = s, node = "n1", nonce = "m" }
        local _, _, code = pay(led, "k", mv(EXT, A, 1))
        assert.equal(L.ERR.Unavailable, code)
        local _, _, code2 = pay(led, "k", mv(EXT, A, 2))
        assert.equal(L.ERR.Conflict, code2)
        -- n2's recover finishes it; then everyone sees the outcome
        other = L.new { store = s, node = "n2", nonce = "o2" }
        assert(other:recover())
        local r = assert(pay(led, "k", mv(EXT, A, 1)))
        assert.is_true(r.replayed); assert.equal(1, bal(led, A))
    end)

    -- node n2 (A funded 10) on a memory store whose reserve_postings fails while fail(true)
    local function failing_node()
        local failing = false
        local s = memory.new { fault = function(phase, name)
            if failing and phase == "before" and name == "reserve_postings" then
                return { err = "could not serialize access", class = "retry" }
            end
        end }
        return s, funded(s, 10, { node = "n2", one_tx = false }), function(on) failing = on end
    end

    it("a live node's saga a store failure left undecided is resumed by its scan, not "
       .. "in flight elsewhere for good (issue 29 item 4)", function()
        local s, n2, fail = failing_node()
        fail(true)
        local _, _, c0 = pay(n2, "k", mv(A, B, 4))
        assert.equal(L.ERR.Unavailable, c0)
        assert.equal(1, #s:list_pending_sagas())
        fail(false)
        -- the client fails over to n1: in flight in n2's saga, which n1 cannot adopt
        local n1 = L.new { store = s, node = "n1", nonce = "m" }
        local _, e1, c1 = pay(n1, "k", mv(A, B, 4))
        assert.equal(L.ERR.Unavailable, c1); assert.matches("in flight", e1)
        -- n2's scan (ron.ledger.lease calls it) decides it with nobody asking n2 again
        local rep = assert(n2:resume_idle())
        assert.equal(1, #rep); assert.is_true(rep[1].ok)
        assert.equal(0, #s:list_pending_sagas())
        local r = assert(pay(n1, "k", mv(A, B, 4)))
        assert.is_true(r.replayed)
        assert.equal(6, bal(n1, A)); assert.equal(4, bal(n1, B))
        assert.same({}, assert(n2:resume_idle())) -- decided: no longer noted
    end)

    it("a live node's batch a store failure left undecided is resumed by its scan too "
       .. "(issue 29 item 4)", function()
        local s, n2, fail = failing_node()
        fail(true)
        local res = n2:commit_many { { intent = "k1", movements = { mv(A, B, 1) } },
                                     { intent = "k2", movements = { mv(A, B, 2) } } }
        for i = 1, 2 do assert.equal(L.ERR.Unavailable, res[i][3]) end
        assert.is_true(#s:list_pending_sagas() >= 1)
        fail(false)
        local n1 = L.new { store = s, node = "n1", nonce = "m" }
        local _, e1, c1 = pay(n1, "k1", mv(A, B, 1))
        assert.equal(L.ERR.Unavailable, c1); assert.matches("in flight", e1)
        local rep = assert(n2:resume_idle())
        assert.is_true(#rep >= 1)
        for _, x in ipairs(rep) do assert.is_true(x.ok, tostring(x.err)) end
        assert.same({}, s:list_pending_sagas())
        local r1 = assert(pay(n1, "k1", mv(A, B, 1)))
        local r2 = assert(pay(n1, "k2", mv(A, B, 2)))
        assert.is_true(r1.replayed and r2.replayed)
        assert.equal(7, bal(n1, A)); assert.equal(3, bal(n1, B))
    end)

    it("the last-step validation sees what the core sees (check hook)", function()
        local seen = 0
        local s = memory.new()
        local led = L.new { store = s, check = function(t, accts, consumed, bals, plan)
            seen = seen + 1
            assert.truthy(plan)
            assert.same(plan, ledger.validate_and_plan(t, accts, consumed, bals))
        end }
        assert(led:create_account { id = EXT, policy = "uncapped" })
        assert(led:create_account { id = A })
        assert(pay(led, "a", mv(EXT, A, 3)))
        assert.equal(1, seen)
    end)
end)
