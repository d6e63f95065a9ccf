-- The in-memory store (lua/ron/ledger/store/memory.lua): the counts and conditions of the
-- store contract, the balance projection, heads, intents, sagas, events, usage streams and
-- the fault hook (LED-35). The shared conformance suite runs on it too (store helper).
require("support")
local memory = require("ron.ledger.store.memory")

local USD = { code = "USD", scale = 2 }
local A, B = string.rep("a", 16), string.rep("b", 16)
local T1 = string.rep("\1", 32)

local function p(i, acct, amount)
    return { id = { transfer_id = T1, index = i }, account = acct, asset = USD, amount = amount }
end
local function ids(...)
    local r = {}
    for i, x in ipairs { ... } do r[i] = { transfer_id = T1, index = x } end
    return r
end

describe("ron.ledger.store.memory", function()
    it("accounts: version 1 once, then exactly current + 1", function()
        local s = memory.new()
        local a = { id = A, version = 1, policy = "no_overdraft", status = "open" }
        assert.equal(1, s:create_account(a))
        assert.equal(0, s:create_account(a))
        assert.equal(0, s:append_account_version { id = A, version = 3, status = "frozen" })
        assert.equal(1, s:append_account_version { id = A, version = 2, status = "frozen" })
        assert.equal(0, s:append_account_version { id = A, version = 2, status = "open" })
        assert.equal("frozen", s:get_account(A).status)
        assert.equal(2, #s:get_account_history(A))
        assert.is_string(s:get_account(A).bytes)
        assert.has_error(function() s:create_account { id = B, version = 2 } end)
    end)

    it("postings: conditional counts and the projection", function()
        local s = memory.new()
        assert.equal(3, s:insert_postings { p(0, A, 100), p(1, A, 50), p(2, B, 7) })
        assert.equal(0, s:insert_postings { p(0, A, 100) })
        assert.same({ 150, 7 }, s:get_balances { { account = A, asset = USD },
                                                 { account = B, asset = USD } })
        assert.equal(2, s:reserve_postings(ids(0, 1), "r1"))
        assert.equal(0, s:reserve_postings(ids(0, 1), "r2"))
        assert.equal(0, s:release_postings(ids(0), "r2"))
        assert.equal(1, s:release_postings(ids(0), "r1"))
        assert.same({ 150 }, s:get_balances { { account = A, asset = USD } })
        assert.equal(0, s:deactivate_postings(ids(0), "r1", "x"))
        assert.equal(1, s:deactivate_postings(ids(1), "r1", "x"))
        assert.equal(1, s:deactivate_postings(ids(0), nil, "y"))
        assert.equal(0, s:deactivate_postings(ids(0), nil, "y"))
        assert.same({ 0 }, s:get_balances { { account = A, asset = USD } })
        local got = s:get_postings(ids(0, 1, 9))
        assert.equal(2, #got)
        assert.equal("inactive", got[1].status); assert.equal("y", got[1].consumed_by)
        assert.equal("x", got[2].consumed_by)
        s:insert_postings { p(3, A, 5), p(4, A, 9), p(5, A, 9) }
        local l = s:get_postings_by_account(A, USD, "active", nil, "largest")
        assert.same({ 4, 5, 3 }, { l[1].id.index, l[2].id.index, l[3].id.index })
        assert.equal(2, #s:get_postings_by_account(A, USD, "active", 2))
    end)

    it("heads: one holder at a time", function()
        local s = memory.new()
        assert.equal(1, s:ensure_head(A, USD)); assert.equal(0, s:ensure_head(A, USD))
        assert.equal(1, s:acquire_head(A, USD, "s1"))
        assert.equal(0, s:acquire_head(A, USD, "s2"))
        assert.equal(0, s:release_head(A, USD, "s2"))
        assert.equal(1, s:release_head(A, USD, "s1"))
        assert.equal(1, s:acquire_head(A, USD, "s2"))
        assert.equal(2, s:get_heads({ { account = A, asset = USD } })[1].version)
    end)

    it("intents, sagas, events, streams", function()
        local s = memory.new()
        assert.equal(1, s:put_intent("k", { status = "committed", transfer_id = T1 }))
        assert.equal(0, s:put_intent("k", { status = "rejected" }))
        assert.equal("committed", s:get_intent("k").status)
        assert.equal(1, s:save_saga("s1", "reserving", "d", "n1"))
        assert.equal(1, s:save_saga("s1", "finalizing", "d2", "n1"))
        assert.equal(1, s:save_saga("s2", "reserving", "d", "n2"))
        assert.equal(2, #s:list_pending_sagas())
        assert.same({ { id = "s1", phase = "finalizing", data = "d2", node = "n1" } },
                    s:list_pending_sagas("n1"))
        assert.equal(1, s:delete_saga("s1")); assert.equal(0, s:delete_saga("s1"))
        assert.equal(1, s:append_event("main", T1, "transfer", "x"))
        assert.equal(0, s:append_event("main", T1, "transfer", "x"))
        assert.equal(1, s:append_event("main", string.rep("\2", 32), "transfer", "y"))
        assert.equal(2, s:head_seq("main"))
        assert.equal(2, s:get_event("main", string.rep("\2", 32), "transfer").seq)
        local ev = s:get_events_since("main", 1, 10)
        assert.equal(1, #ev); assert.equal(2, ev[1].seq)
        assert.equal(1, s:advance_stream("t", "d", 1, "b1"))
        assert.equal(0, s:advance_stream("t", "d", 1, "b1"))
        assert.equal(0, s:advance_stream("t", "d", 2, "b2", 1, "bX"))
        assert.equal(1, s:advance_stream("t", "d", 2, "b2", 1, "b1"))
        assert.same({ seq = 2, b3 = "b2" }, s:get_stream("t", "d"))
    end)

    it("the fault hook: errors before/after, partial batches, crashes", function()
        local plan
        local s = memory.new { fault = function(phase, name)
            if plan and plan.name == name and plan.phase == phase then return plan.act end
        end }
        s:insert_postings { p(0, A, 1), p(1, A, 2), p(2, A, 3) }
        plan = { name = "reserve_postings", phase = "before", act = { limit = 2 } }
        assert.equal(2, s:reserve_postings(ids(0, 1, 2), "r"))
        plan = { name = "release_postings", phase = "before", act = { err = "x", class = "retry" } }
        local n, err, class = s:release_postings(ids(0, 1), "r")
        assert.is_nil(n); assert.equal("x", err); assert.equal("retry", class)
        assert.equal("pending_inactive", s:get_postings(ids(0))[1].status)
        plan = { name = "release_postings", phase = "after", act = { err = "lost" } }
        n, err, class = s:release_postings(ids(0, 1), "r")
        assert.is_nil(n); assert.equal("io", class)
        assert.equal("active", s:get_postings(ids(0))[1].status) -- applied, reply lost
        plan = nil
        s.fault = function(phase, name) if name == "delete_saga" then error("crash") end end
        assert.has_error(function() s:delete_saga("x") end)
    end)
end)
