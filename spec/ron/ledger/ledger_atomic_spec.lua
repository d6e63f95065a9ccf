-- The one-transaction commit (lua/ron/ledger/engine/atomic.lua, LED-72): an uncontended
-- single commit in two store calls, and each of its guards missing when the state it
-- checks changed between its read and its commit (nothing applied; the saga then answers
-- as the last validation says). The crash search over it is sim_spec.lua.
require("support")
local L = require("ron.ledger.ledger")
local memory = require("ron.ledger.store.memory")
local requests = require("ron.ledger.engine.requests")
local sim = require("ron.ledger.sim")
local ffi = require("ffi")

local USD = { code = "USD", scale = 2 }
local EXT, A, B, C = ("e"):rep(16), ("a"):rep(16), ("b"):rep(16), ("c"):rep(16)

local function mv(from, to, amount) return { from = from, to = to, amount = amount, asset = USD } end

local I64 = ffi.typeof("int64_t")
local MAX = I64(2) ^ 62 - 1 + I64(2) ^ 62 -- 2^63 - 1

-- A memory store whose hook runs between(s) once, before the commit's second call to the
-- store (the one-transaction commit's write; opts.at: that call instead), when armed.
-- Another writer's move of amount from debit to credit, outside the engine: two postings
-- of one made-up transfer ("tag" x 32), the debit's negative.
local function moved_outside(s, tag, debit, credit, amount)
    assert.equal(2, s:insert_postings {
        { id = { transfer_id = tag:rep(32), index = 0 }, account = debit, asset = USD,
          amount = -amount },
        { id = { transfer_id = tag:rep(32), index = 1 }, account = credit, asset = USD,
          amount = amount } })
end

local function world(opts)
    opts = opts or {}
    local armed, applies, busy = false, 0, false
    local w = {}
    local s
    s = memory.new { fault = function(phase, name)
        if busy or not armed or phase ~= "before" or name ~= "apply" then return end
        applies = applies + 1
        if applies == (opts.at or 2) and w.between then
            busy = true
            w.between(s)
            busy = false
        end
    end }
    w.s = s
    w.led = L.new { store = s, book = "main", node = "n1", nonce = "t",
                    one_tx = opts.one_tx, plan_cache = opts.plan_cache,
                    lock_order = opts.lock_order, clock = function() return 1000 end }
    assert(w.led:create_account { id = EXT, policy = "uncapped" })
    assert(w.led:create_account { id = A })
    assert(w.led:create_account { id = B })
    assert(w.led:create_account { id = C, policy = "capped", floor = -100 })
    function w.arm() armed, applies = true, 0 end
    function w.applies() return applies end
    return w
end

describe("the one-transaction commit (LED-72)", function()
    it("commits an uncontended transfer in two store calls, no saga record ever", function()
        local w = world()
        assert(w.led:commit { intent = "dep", movements = { mv(EXT, A, 100) } })
        local saved = 0
        w.between = function(s) saved = saved + #s:list_pending_sagas() end
        w.arm()
        local r = assert(w.led:commit { intent = "p", movements = { mv(A, B, 30) } })
        assert.equal(2, w.applies())
        assert.equal(0, saved)
        assert.equal("committed", r.status)
        assert.equal(70, w.led:balance(A, USD)); assert.equal(30, w.led:balance(B, USD))
        assert.equal(2, w.led.stats.one_tx)
        -- the same answer on a replay, nothing written
        local r2 = assert(w.led:commit { intent = "p", movements = { mv(A, B, 30) } })
        assert.is_true(r2.replayed); assert.equal(r.transfer_id, r2.transfer_id)
        -- the saga's phases alone: three calls
        local v = world { one_tx = false }
        assert(v.led:commit { intent = "dep", movements = { mv(EXT, A, 100) } })
        v.arm()
        assert(v.led:commit { intent = "p", movements = { mv(A, B, 30) } })
        assert.equal(3, v.applies())
        assert.is_nil(v.led.stats.one_tx)
        assert(sim.verify(w.s, "main"))
    end)

    it("plans from the plan cache (LED-73): one store call once the payer is remembered; "
       .. "plan_cache = 0 reads every time", function()
        local w = world()
        assert(w.led:commit { intent = "dep", movements = { mv(EXT, A, 100) } })
        assert(w.led:commit { intent = "p1", movements = { mv(A, B, 30) } }) -- read: remembered
        w.arm()
        local r = assert(w.led:commit { intent = "p2", movements = { mv(A, B, 20) } })
        assert.equal(1, w.applies())
        assert.equal(1, w.led.stats.one_tx_cached)
        -- the same picks and the same transfer as a commit that reads first
        local v = world { plan_cache = 0 }
        assert(v.led:commit { intent = "dep", movements = { mv(EXT, A, 100) } })
        assert(v.led:commit { intent = "p1", movements = { mv(A, B, 30) } })
        v.arm()
        local r2 = assert(v.led:commit { intent = "p2", movements = { mv(A, B, 20) } })
        assert.equal(2, v.applies())
        assert.is_nil(v.led.stats.one_tx_cached)
        assert.equal(r.transfer_id, r2.transfer_id)
        -- a saga's write (here a reversal) empties the cache: the next commit reads
        assert(w.led:reverse(r.transfer_id, "rev"))
        w.arm()
        assert(w.led:commit { intent = "p3", movements = { mv(A, B, 5) } })
        assert.equal(2, w.applies())
        assert.equal(65, w.led:balance(A, USD))
        assert(sim.verify(w.s, "main"))
    end)

    it("an account version landing between its read and its commit: the pins' guard misses, "
       .. "nothing applied, the saga refuses the frozen account", function()
        local w = world()
        assert(w.led:commit { intent = "dep", movements = { mv(EXT, A, 100) } })
        w.between = function(s)
            local a = s:get_account(A)
            a.version, a.status, a.bytes = a.version + 1, "frozen", nil
            assert.equal(1, s:append_account_version(a))
        end
        w.arm()
        local r, err, code = w.led:commit { intent = "p", movements = { mv(A, B, 30) } }
        assert.is_nil(r)
        assert.equal(L.ERR.AccountFrozen, code, tostring(err))
        assert.equal(1, w.led.stats.one_tx_missed)
        assert.equal(100, w.led:balance(A, USD)); assert.equal(0, w.led:balance(B, USD))
        assert.equal("rejected", w.s:get_intent("p").status)
        assert.equal(0, #w.s:list_pending_sagas())
    end)

    it("a capped pair's balance lowered between its read and its commit: the floor's guard "
       .. "misses, and the floor holds (LED-29)", function()
        local w = world()
        -- C (capped, floor -100) pays 80 from nothing: a negative output, the pair at -80;
        -- meanwhile its balance went to -50 (a posting the hook puts in): -130 would breach
        w.between = function(s)
            moved_outside(s, "x", C, EXT, 50)
        end
        w.arm()
        local r, err, code = w.led:commit { intent = "c", movements = { mv(C, B, 80) } }
        assert.is_nil(r)
        assert.equal(L.ERR.InsufficientFunds, code, tostring(err))
        assert.equal(1, w.led.stats.one_tx_missed)
        assert.equal(-50, w.led:balance(C, USD)); assert.equal(0, w.led:balance(B, USD))
        -- and without the change the same commit goes through in one transaction, down to
        -- the floor's edge
        local v = world()
        v.arm()
        assert(v.led:commit { intent = "c", movements = { mv(C, B, 100) } })
        assert.equal(2, v.applies())
        assert.equal(-100, v.led:balance(C, USD))
    end)

    -- a credit that lands between the read and the write, taking the payee to MAX - 39
    local function raise_b(s)
        moved_outside(s, "y", EXT, B, MAX - 39)
    end

    -- After a deposit of 100 to A, intent "p" moving `movement` while `between` lands where
    -- w's hook is: refused as an overflow and stored so, nothing applied (A still 100)
    local function refused_in_race(w, between, movement)
        assert(w.led:commit { intent = "dep", movements = { mv(EXT, A, 100) } })
        w.between = between
        w.arm()
        local r, err, code = w.led:commit { intent = "p", movements = { movement } }
        assert.is_nil(r)
        assert.equal(L.ERR.AmountOverflow, code, tostring(err))
        assert.equal(100, w.led:balance(A, USD))
        assert.equal("rejected", w.s:get_intent("p").status)
    end

    -- A pays B 50 while raise_b lands
    local function credit_past_max(w)
        refused_in_race(w, raise_b, mv(A, B, 50))
        assert.is_true(I64(w.led:balance(B, USD)) == MAX - 39)
    end

    it("a credited pair raised toward 2^63 - 1 between its read and its commit: the "
       .. "ceiling's guard misses, and the overflow is refused as such", function()
        local w = world { plan_cache = 0 }
        credit_past_max(w)
        assert.equal(1, w.led.stats.one_tx_missed)
        -- what fits commits, to the limit's edge
        assert(w.led:commit { intent = "q", movements = { mv(A, B, 39) } })
        assert.is_true(I64(w.led:balance(B, USD)) == MAX)
    end)

    it("the saga alone: a credited pair raised between its last validation and its "
       .. "finalize: nothing applied, given back, the overflow refused", function()
        -- one_tx off: open (1), reserve with the last step's reads (2), finalize (3)
        local w = world { one_tx = false, plan_cache = 0, at = 3 }
        credit_past_max(w)
        assert.same({}, w.s:list_pending_sagas())
        assert.same({}, w.s:get_postings_by_account(A, USD, "pending_inactive"))
    end)

    -- The batch path, after a deposit of 100 to A: commit_many of "p" (`movements`) and "q"
    -- (A pays C 10) while `between` lands before the finalize: "p" refused as an overflow
    -- and stored so, "q" committed, nothing else applied. one_tx: the one-transaction batch
    -- (LED-74): the plan's reads (1), the phase (2), where the guard misses, then the
    -- saga's phases; else the saga alone: the plan's reads (1), the claims (2), the reserve
    -- with the last step's reads (3), the finalize (4).
    local function batch_refused(between, movements, one_tx)
        local w = world { plan_cache = 0, at = one_tx and 2 or 4, one_tx = one_tx }
        assert(w.led:commit { intent = "dep", movements = { mv(EXT, A, 100) } })
        w.between = between
        w.arm()
        local res = w.led:commit_many {
            { intent = "p", movements = movements },
            { intent = "q", movements = { mv(A, C, 10) } } }
        assert.is_nil(res[1][1])
        assert.equal(L.ERR.AmountOverflow, res[1][3], tostring(res[1][2]))
        assert.equal("committed", res[2][1].status)
        assert.equal(90, w.led:balance(A, USD)); assert.equal(10, w.led:balance(C, USD))
        assert.equal("rejected", w.s:get_intent("p").status)
        assert.equal(1, w.led.stats.batches)
        assert.equal(one_tx and 1 or nil, w.led.stats.atomic_batch_missed)
        assert.is_nil(w.led.stats.atomic_batches)
        assert.same({}, w.s:list_pending_sagas())
        assert.same({}, w.s:get_postings_by_account(A, USD, "pending_inactive"))
        assert(sim.verify(w.s, "main"))
        return w
    end

    it("the batch path: a pair its chain credits raised between its last step and its "
       .. "finalize: nothing applied, planned again, that member's overflow refused", function()
        for _, one_tx in ipairs { true, false } do
            local w = batch_refused(raise_b, { mv(A, B, 30), mv(A, B, 20) }, one_tx)
            assert.is_true(I64(w.led:balance(B, USD)) == MAX - 39)
        end
    end)

    -- a debit of the uncapped EXT that lands between the read and the write, taking it to
    -- -(2^63 - 1) + 100, 100 above the least balance (EXT is at -100 after the deposit)
    local function lower_ext(s)
        moved_outside(s, "z", EXT, B, MAX - 200)
    end

    -- EXT pays A 101 while lower_ext lands (EXT would land on -2^63, not an amount); what
    -- fits commits, to the edge
    local function debit_past_min(w)
        refused_in_race(w, lower_ext, mv(EXT, A, 101))
        assert.is_true(I64(w.led:balance(EXT, USD)) == -MAX + 100)
        assert(w.led:commit { intent = "q", movements = { mv(EXT, A, 100) } })
        assert.is_true(I64(w.led:balance(EXT, USD)) == -MAX)
        assert.same({}, w.s:list_pending_sagas())
    end

    it("an uncapped payer lowered toward -2^63 between its read and its commit: the "
       .. "limits' guard misses, the underflow is refused as such", function()
        local w = world { plan_cache = 0 }
        debit_past_min(w)
        assert.equal(1, w.led.stats.one_tx_missed)
        local v = world { one_tx = false, plan_cache = 0, at = 3 } -- the saga alone
        debit_past_min(v)
    end)

    it("the batch path: an uncapped payer lowered between its last step and its finalize: "
       .. "nothing applied, planned again, that member's underflow refused", function()
        for _, one_tx in ipairs { true, false } do
            local w = batch_refused(lower_ext, { mv(EXT, A, 101) }, one_tx)
            assert.is_true(I64(w.led:balance(EXT, USD)) == -MAX + 100)
        end
    end)

    it("the one-transaction batch: a payer's balance lowered between the plan and the "
       .. "phase, its postings untouched: the floor's guard misses, nothing applied, the "
       .. "saga's way refuses what no longer fits (LED-74)", function()
        local w = world { plan_cache = 0, at = 2 }
        assert(w.led:commit { intent = "d1", movements = { mv(EXT, A, 100) } })
        assert(w.led:commit { intent = "d2", movements = { mv(EXT, A, 50) } })
        -- another writer's debit of A by 80 that consumes none of A's postings
        w.between = function(st)
            moved_outside(st, "y", A, B, 80)
        end
        w.arm()
        -- planned on 150: both fit, p2 spending p1's change; on 70, p2 does not
        local res = w.led:commit_many {
            { intent = "p1", movements = { mv(A, C, 30) } },
            { intent = "p2", movements = { mv(A, C, 50) } } }
        assert.equal("committed", res[1][1].status)
        assert.is_nil(res[2][1])
        assert.equal(L.ERR.InsufficientFunds, res[2][3], tostring(res[2][2]))
        assert.equal(1, w.led.stats.atomic_batch_missed)
        assert.is_nil(w.led.stats.atomic_batches)
        assert.equal(40, w.led:balance(A, USD)); assert.equal(30, w.led:balance(C, USD))
        assert.same({}, w.s:list_pending_sagas())
        assert.same({}, w.s:get_postings_by_account(A, USD, "pending_inactive"))
        -- and without the debit, the same batch goes in one transaction
        local v = world { plan_cache = 0 }
        assert(v.led:commit { intent = "d1", movements = { mv(EXT, A, 100) } })
        assert(v.led:commit { intent = "d2", movements = { mv(EXT, A, 50) } })
        res = v.led:commit_many {
            { intent = "p1", movements = { mv(A, C, 30) } },
            { intent = "p2", movements = { mv(A, C, 50) } } }
        assert.equal("committed", res[2][1].status)
        assert.equal(1, v.led.stats.atomic_batches)
        assert.equal(70, v.led:balance(A, USD))
        assert(sim.verify(v.s, "main"))
    end)

    -- What w's phases send: the keys of each put_intents op, the ids reserved, the postings
    -- inserted (in the order sent).
    local function watch(w)
        local seen, reserved, outs = {}, {}, {}
        local apply = w.s.apply
        w.s.apply = function(st, ops, o)
            for _, op in ipairs(ops) do
                if op[1] == "put_intents" then
                    local ks = {}
                    for i, c in ipairs(op[2]) do ks[i] = c.key end
                    seen[#seen + 1] = ks
                elseif op[1] == "reserve_postings" then
                    for _, id in ipairs(op[2]) do reserved[#reserved + 1] = id end
                elseif op[1] == "insert_postings" then
                    for _, p in ipairs(op[2]) do outs[#outs + 1] = p end
                end
            end
            return apply(st, ops, o)
        end
        return seen, reserved, outs
    end

    -- z1, a2, m3 from A (a2: amount2) with the caller's claims k-z, k-a, k-m: all committed
    -- in one transaction
    local function three_members(w, amount2)
        local function claim(k) return { key = k, outcome = { status = "claimed" } } end
        local res = w.led:commit_many({
            { intent = "z1", movements = { mv(A, C, 60) } },
            { intent = "a2", movements = { mv(A, C, amount2) } },
            { intent = "m3", movements = { mv(A, C, 30) } } },
            { check = function() return {}, { claim("k-z"), claim("k-a"), claim("k-m") } end })
        for i = 1, 3 do assert.equal("committed", res[i][1].status) end
        return res
    end

    it("the one-transaction batch inserts its claims and the caller's in key order and "
       .. "reserves its postings in id order (two phases claiming or spending some of the "
       .. "same never wait for each other in a cycle: PostgreSQL's phase locks its balance "
       .. "rows after them, pg_phase)", function()
        -- three postings of A, spent by the members largest first, the 100 funded after
        -- the 50: its transfer id is the larger (the precondition below), so the members'
        -- order is not already the ids'
        local w = world { plan_cache = 0, lock_order = true }
        local ids = {}
        for i, amount in ipairs { 50, 100, 20 } do
            assert(w.led:commit { intent = "f" .. i, movements = { mv(EXT, A, amount) } })
        end
        for _, p in ipairs(w.s:get_postings_by_account(A, USD, "active")) do
            ids[p.amount] = p.id.transfer_id
        end
        assert.is_true(ids[100] > ids[50], "the precondition")
        local seen, reserved = watch(w)
        three_members(w, 45)
        assert.equal(1, w.led.stats.atomic_batches)
        local P = ("\255"):rep(256)
        assert.same({ { "k-a", "k-m", "k-z" }, { P .. "a2", P .. "m3", P .. "z1" } },
                    { seen[1], seen[2] })
        -- the 100 and the 50 of the store (the 30 spends z1's change of 40)
        assert.equal(2, #reserved)
        local a, b = reserved[1], reserved[2]
        assert.is_true(a.transfer_id < b.transfer_id
                       or (a.transfer_id == b.transfer_id and a.index < b.index))
        assert.equal(35, w.led:balance(A, USD))
        assert(sim.verify(w.s, "main"))
    end)

    it("without lock order (the default but on PostgreSQL: one writer never waits on a row "
       .. "lock) the batch sends its claims and its outputs in the members' order, unsorted",
       function()
        assert.is_false(L.new { store = memory.new() }.lock_order)
        assert.is_true(L.new { store = { backend = "postgres" } }.lock_order)
        assert.is_false(L.new { store = { backend = "postgres" }, lock_order = false }.lock_order)
        local w = world { plan_cache = 0 }
        assert(w.led:commit { intent = "f", movements = { mv(EXT, A, 300) } })
        local seen, _, outs = watch(w)
        local res = three_members(w, 45)
        assert.equal(1, w.led.stats.atomic_batches)
        local P = ("\255"):rep(256)
        assert.same({ { "k-z", "k-a", "k-m" }, { P .. "z1", P .. "a2", P .. "m3" } },
                    { seen[1], seen[2] })
        -- each member's outputs together, in the members' order (the first: z1's)
        assert.equal(res[1][1].transfer_id, outs[1].id.transfer_id)
        assert.equal(res[3][1].transfer_id, outs[#outs].id.transfer_id)
        assert.equal(165, w.led:balance(A, USD))
        assert(sim.verify(w.s, "main"))
    end)

    it("opts.also: the caller's own writes go in the one-transaction batch's phase, told "
       .. "the members planned there; a count short of their expect applies nothing and the "
       .. "saga's way commits without them; the saga's way alone leaves them to the caller",
       function()
        local w = world { plan_cache = 0 }
        assert(w.led:commit { intent = "d", movements = { mv(EXT, A, 100) } })
        assert(w.led:commit { intent = "p2", movements = { mv(A, B, 5) } })
        local function mine(k)
            return { { "put_intents", { { key = k, outcome = { status = "claimed" } } },
                       expect = 1 } }
        end
        local got, calls = nil, 0
        local function also(planned)
            got, calls = planned, calls + 1
            return mine("mine")
        end
        -- p2 a replay, p3 refused (InsufficientFunds): neither is planned in the phase
        local res = w.led:commit_many({
            { intent = "p1", movements = { mv(A, B, 10) } },
            { intent = "p2", movements = { mv(A, B, 5) } },
            { intent = "p3", movements = { mv(A, B, 1000) } },
            { intent = "p4", movements = { mv(A, C, 20) } } }, { also = also })
        assert.is_true(res.also_done)
        assert.equal(1, calls)
        assert.equal(1, w.led.stats.atomic_batches)
        assert.same({ "p1", "p4" }, { got[1].intent, got[4].intent })
        assert.is_nil(got[2]); assert.is_nil(got[3])
        assert.is_true(res[2][1].replayed)
        assert.equal(L.ERR.InsufficientFunds, res[3][3])
        assert.equal("claimed", w.s:get_intent("mine").status)
        assert.equal(65, w.led:balance(A, USD))
        -- "mine" is there: the op counts 0 of 1, nothing of the phase, the saga's way
        res = w.led:commit_many({ { intent = "q1", movements = { mv(A, B, 1) } } },
                                { also = function() return mine("mine") end })
        assert.equal("committed", res[1][1].status)
        assert.is_nil(res.also_done)
        assert.equal(1, w.led.stats.atomic_batch_missed_at.put_intents)
        assert.equal(64, w.led:balance(A, USD))
        -- nil: nothing of the caller's, the batch in one transaction as without the opt
        res = w.led:commit_many({ { intent = "q2", movements = { mv(A, B, 1) } } },
                                { also = function() return nil end })
        assert.equal("committed", res[1][1].status)
        assert.is_nil(res.also_done)
        assert.equal(2, w.led.stats.atomic_batches)
        -- the saga's phases alone: opts.also is never asked
        local v = world { one_tx = false }
        assert(v.led:commit { intent = "d", movements = { mv(EXT, A, 100) } })
        calls = 0
        res = v.led:commit_many({ { intent = "p1", movements = { mv(A, B, 10) } } },
                                { also = also })
        assert.equal("committed", res[1][1].status)
        assert.is_nil(res.also_done)
        assert.equal(0, calls)
        assert.is_nil(v.s:get_intent("mine"))
        assert.has_error(function() w.led:commit_many({}, { also = 1 }) end,
                         "ron.ledger: commit_many's opts.also must be a function")
        assert(sim.verify(w.s, "main"))
        assert(sim.verify(v.s, "main"))
    end)

    it("an input taken between its read and its commit: nothing applied, the saga resolves "
       .. "again and commits from what is left", function()
        local w = world()
        assert(w.led:commit { intent = "d1", movements = { mv(EXT, A, 100) } })
        assert(w.led:commit { intent = "d2", movements = { mv(EXT, A, 10) } })
        local other = L.new { store = w.s, book = "main", node = "n2", nonce = "o" }
        w.between = function() assert(other:commit { intent = "o", movements = { mv(A, B, 90) } }) end
        w.arm()
        assert(w.led:commit { intent = "p", movements = { mv(A, B, 15) } })
        assert.equal(1, w.led.stats.one_tx_missed)
        assert.equal(5, w.led:balance(A, USD)); assert.equal(105, w.led:balance(B, USD))
        assert(sim.verify(w.s, "main"))
    end)

    it("a claim by another saga between its read and its commit: nothing applied, the "
       .. "intent is in flight", function()
        local w = world()
        assert(w.led:commit { intent = "dep", movements = { mv(EXT, A, 100) } })
        local req = { intent = "p", movements = { mv(A, B, 30) } }
        w.between = function(s)
            assert.equal(1, s:put_intent(string.rep("\255", 256) .. "p",
                                         { status = "claimed", message = "n2:o:1",
                                           body_hash = requests.body_hash("commit", req) }))
        end
        w.arm()
        local r, err, code = w.led:commit(req)
        assert.is_nil(r)
        assert.equal(L.ERR.Unavailable, code)
        assert.truthy(L.is_in_flight(err, code), tostring(err))
        assert.equal(100, w.led:balance(A, USD))
    end)
end)
