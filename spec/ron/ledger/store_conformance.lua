-- The Store contract (lua/ron/ledger/store/init.lua, docs/LEDGER.md "Store", LED-16..LED-24)
-- as ONE suite that every backend runs:
--
--   require("ron.ledger.store_conformance").run(name, make_store, opts)
--
-- make_store() -> a fresh, empty store. opts (all optional):
--   wrap(fn)         runs one case's body (inside a task for the PostgreSQL and offloaded
--                    SQLite stores; plainly otherwise)
--   concurrent(fns)  runs the functions at once (tasks) and returns when all ended; default:
--                    one after the other (a synchronous store cannot race itself)
--   reopen(s)        -> a second store on the same data (migrations run again)
--   seed             the projection's random seed (printed; default 20261125)
--
-- Called from spec/ron/ledger/store_spec.lua (SQLite, and memory when it exists, under
-- busted) and spec/ron/ledger/store_host_spec.lua (PostgreSQL and offloaded SQLite inside
-- the host: ctest lua-ledger-store-host).
local M = {}

local ffi = require("ffi")
local assert = require("luassert") -- this file is required, outside busted's spec environment

local function id16(s) return (s .. ("\0"):rep(16)):sub(1, 16) end
local function id32(s) return (s .. ("\0"):rep(32)):sub(1, 32) end

local USD = { code = "USD", scale = 2 }
local EUR = { code = "EUR", scale = 2 }
local A, B, C = id16("acct-a"), id16("acct-b"), id16("acct-c")

local function pid(t, i) return { transfer_id = t, index = i } end

local function posting(t, i, account, asset, amount, extra)
    local p = { id = pid(t, i), account = account, asset = asset, amount = amount }
    for k, v in pairs(extra or {}) do p[k] = v end
    return p
end

-- a tiny deterministic PRNG (the same sequence on every backend and machine)
local function prng(seed)
    local s = seed % 2147483647
    if s <= 0 then s = s + 2147483646 end
    return function(n)
        s = (s * 16807) % 2147483647
        return s % n
    end
end

local function books_case(s)
    assert.equal(1, s:create_book("main", "meta-1"))
    assert.equal(0, s:create_book("main", "meta-2"))
    assert.equal(1, s:create_book("other", nil))
    assert.same({ id = "main", meta = "meta-1" }, s:get_book("main"))
    assert.is_nil(s:get_book("nope"))
    local l = s:list_books()
    assert.equal(2, #l)
    assert.equal("main", l[1].id)
    assert.equal("other", l[2].id)
end

-- Claim keys beside outcomes, on every backend (SQLite keeps the claims in their own
-- table, schema 4, ron.ledger.store.sql_claims: the same answers).
local function claims_case(s)
    local function claim(i) return ("\255"):rep(256) .. i end
    local C1, C2 = claim("x"), claim("\255y")
    assert.equal(1, s:put_intent(C1, { status = "claimed", message = "s1",
                                       body_hash = id32("h") }))
    assert.equal(0, s:put_intent(C1, { status = "claimed", message = "s2" }))
    assert.equal(1, s:put_intent("x", { status = "committed", transfer_id = id32("t") }))
    local o = s:get_intent(C1)
    assert.same({ key = C1, status = "claimed", message = "s1", body_hash = id32("h") },
                { key = o.key, status = o.status, message = o.message,
                  body_hash = o.body_hash })
    assert.is_nil(o.transfer_id)
    assert.equal("committed", s:get_intent("x").status)
    assert.is_nil(s:get_intent(claim("none")))
    -- a list of both kinds, one of each already there
    assert.equal(3, s:put_intents {
        { key = C2, outcome = { status = "claimed", message = "s3" } },
        { key = "\255y", outcome = { status = "rejected", code = -7 } },
        { key = C1, outcome = { status = "claimed", message = "s4" } },
        { key = "x", outcome = { status = "rejected", code = -1 } },
        { key = ("\255"):rep(256), outcome = { status = "claimed", message = "s5" } } })
    local got = s:get_intents { C1, C2, "x", "\255y", claim("none"), ("\255"):rep(256) }
    assert.equal("s1", got[C1].message)
    assert.equal(C2, got[C2].key)
    assert.equal("s3", got[C2].message)
    assert.equal("committed", got.x.status)
    assert.equal(-7, got["\255y"].code)
    assert.equal("s5", got[("\255"):rep(256)].message)
    assert.is_nil(got[claim("none")])
    -- in a phase: the claim's guard, and the read of it in the same transaction
    local res = s:apply {
        { "put_intent", claim("z"), { status = "claimed", message = "s6" }, expect = 1 },
        { "get_intent", claim("z") },
        { "put_intent", C1, { status = "claimed", message = "s7" }, expect = 1 } }
    assert.is_false(res.ok)
    assert.is_nil(s:get_intent(claim("z"))) -- rolled back with the phase
    -- verify's scan: every row under its key, in key order (the claims last)
    local keys = {}
    for _, r in ipairs(assert(s:scan("intents", nil, 1000))) do keys[#keys + 1] = r.key end
    assert.same({ "x", "\255y", ("\255"):rep(256), C1, C2 }, keys)
    local p1 = assert(s:scan("intents", nil, 3))
    local p2 = assert(s:scan("intents", p1[3]._key, 3))
    assert.same({ C1, C2 }, { p2[1].key, p2[2].key })
end

-- LED-71: the node leases, on every backend (a spec of its own, outside M.run's list).
local function lease_case(s)
    local N, S = "n1", "n2"
    -- (a negative ttl: the row expires at once, no clock to wait for)
    assert.equal(1, s:lease_acquire(N, 60000))
    assert.equal(2, s:lease_acquire(N, 60000)) -- the node again: a restart
    assert.equal(1, s:lease_renew(N, 2, N, 60000))
    assert.equal(0, s:lease_renew(N, 1, N, 60000)) -- an older epoch: lost
    assert.equal(1, s:check_lease(N, 2))
    assert.equal(0, s:check_lease(N, 1))
    assert.equal(1, s:lease_acquire(S, 60000)) -- the survivor's own
    local l = s:list_leases()
    assert.equal(2, #l)
    assert.equal(N, l[1].node)
    assert.equal(2, l[1].epoch)
    assert.equal(N, l[1].owner)
    assert.is_true(l[1].expires_ms > l[1].now_ms)
    -- not expired: no takeover
    assert.equal(0, s:lease_takeover(N, 2, l[1].expires_ms, S, 60000))
    assert.equal(1, s:lease_renew(N, 2, N, -1000)) -- expired now
    local x = s:list_leases()[1]
    assert.is_true(x.expires_ms < x.now_ms)
    assert.equal(0, s:lease_takeover(N, 2, x.expires_ms + 1, S, 60000)) -- renewed since
    assert.equal(0, s:lease_takeover(N, 1, x.expires_ms, S, 60000))     -- older epoch
    assert.equal(1, s:lease_takeover(N, 2, x.expires_ms, S, 60000))
    assert.equal(0, s:lease_takeover(N, 2, x.expires_ms, "n3", 60000)) -- once
    local y = s:list_leases()[1]
    assert.same({ N, 3, S }, { y.node, y.epoch, y.owner })
    -- the node's old epoch is fenced; its new one is not the node's (S owns it)
    assert.equal(0, s:lease_renew(N, 2, N, 60000))
    assert.equal(0, s:check_lease(N, 2))
    assert.equal(0, s:check_lease(N, 3))
    assert.equal(0, s:lease_acquire(N, 60000)) -- S is recovering it
    assert.equal(1, s:lease_renew(N, 3, S, 60000))
    -- a phase guarded by the old epoch applies nothing
    local res = assert(s:apply { { "create_book", "fenced", nil },
                                 { "check_lease", N, 2, expect = 1 } })
    assert.is_false(res.ok)
    assert.equal(2, res.at)
    assert.is_nil(s:get_book("fenced"))
    assert.equal(0, s:lease_release(N, 3, N))
    assert.equal(1, s:lease_release(N, 3, S))
    local z = s:list_leases()[1]
    assert.is_nil(z.owner)
    assert.is_nil(z.expires_ms)
    assert.equal(0, s:lease_takeover(N, 3, 0, S, 60000)) -- a free row: nothing to take
    assert.equal(4, s:lease_acquire(N, 60000))
    assert.equal(1, s:check_lease(N, 4))
    res = assert(s:apply { { "create_book", "live", nil },
                           { "check_lease", N, 4, expect = 1 } })
    assert.is_true(res.ok)
    assert.same({ id = "live" }, s:get_book("live"))
end

local function accounts_case(s)
    local v1 = { id = A, version = 1, policy = "capped", floor = -500, status = "open" }
    assert.equal(1, s:create_account(v1))
    assert.equal(0, s:create_account(v1))                          -- create twice
    assert.has_error(function() s:create_account { id = B, version = 2 } end)
    local v3 = { id = A, version = 3, policy = "capped", floor = -500, status = "frozen" }
    assert.equal(0, s:append_account_version(v3))                  -- version gap
    local v2 = { id = A, version = 2, policy = "capped", floor = -500, status = "frozen" }
    assert.equal(1, s:append_account_version(v2))
    assert.equal(0, s:append_account_version(v2))                  -- overwrite
    assert.equal(0, s:append_account_version { id = B, version = 2 }) -- no v1
    assert.equal(1, s:append_account_version(v3))
    local cur = s:get_account(A)
    assert.equal(3, cur.version)
    assert.equal("frozen", cur.status)
    assert.equal("capped", cur.policy)
    assert.equal(-500, cur.floor)
    assert.equal(require("ron.ledger").encode_account(v3), cur.bytes)
    local h = s:get_account_history(A)
    assert.equal(3, #h)
    for i = 1, 3 do assert.equal(i, h[i].version) end
    assert.equal(1, s:create_account { id = B, version = 1, policy = "uncapped" })
    local m = s:get_accounts { A, B, C }
    assert.equal(3, m[A].version)
    assert.equal(1, m[B].version)
    assert.is_nil(m[C])
    local l = s:list_accounts()
    assert.equal(2, #l)
    assert.equal(A, l[1].id)
    assert.equal(3, l[1].version)
    assert.is_nil(s:get_account(C))
end

-- The one-transaction commit's guards (LED-72): counts, and as a phase's guards.
local function guards_case(s)
    assert.equal(1, s:create_account { id = A, version = 1, policy = "capped",
                                       floor = -500 })
    assert.equal(1, s:create_account { id = B, version = 1 })
    assert.equal(1, s:append_account_version { id = A, version = 2, policy = "capped",
                                               floor = -500, status = "frozen" })
    assert.equal(0, s:count_accounts_at {})
    assert.equal(1, s:count_accounts_at { { id = A, version = 2 } })
    assert.equal(0, s:count_accounts_at { { id = A, version = 1 } }) -- not current
    assert.equal(0, s:count_accounts_at { { id = C, version = 1 } }) -- no account
    assert.equal(2, s:count_accounts_at { { id = A, version = 2 }, { id = B, version = 1 },
                                         { id = C, version = 1 } })
    local T1 = id32("g1")
    assert.equal(3, s:insert_postings { posting(T1, 0, A, USD, 100),
                                        posting(T1, 1, A, USD, 40),
                                        posting(T1, 2, B, USD, -140) })
    assert.equal(1, s:reserve_postings({ pid(T1, 1) }, "saga-g")) -- still in the balance
    local function at_least(acct, min) return { account = acct, asset = USD, min = min } end
    assert.equal(0, s:count_balances_at_least {})
    assert.equal(1, s:count_balances_at_least { at_least(A, 140) })
    assert.equal(0, s:count_balances_at_least { at_least(A, 141) })
    assert.equal(1, s:count_balances_at_least { at_least(B, -140) })
    assert.equal(0, s:count_balances_at_least { at_least(B, -139) })
    -- a pair without postings is 0
    assert.equal(1, s:count_balances_at_least { { account = C, asset = EUR, min = 0 } })
    assert.equal(0, s:count_balances_at_least { { account = C, asset = EUR, min = 1 } })
    assert.equal(2, s:count_balances_at_least { at_least(A, -5), at_least(B, 0),
                                               at_least(B, -200) })
    local function at_most(acct, max) return { account = acct, asset = USD, max = max } end
    assert.equal(0, s:count_balances_at_most {})
    assert.equal(1, s:count_balances_at_most { at_most(A, 140) })
    assert.equal(0, s:count_balances_at_most { at_most(A, 139) })
    assert.equal(1, s:count_balances_at_most { at_most(B, -140) })
    assert.equal(0, s:count_balances_at_most { at_most(B, -141) })
    assert.equal(1, s:count_balances_at_most { { account = C, asset = EUR, max = 0 } })
    assert.equal(0, s:count_balances_at_most { { account = C, asset = EUR, max = -1 } })
    -- as a phase's guards: a miss applies nothing of the phase
    local ok = assert(s:apply {
        { "count_accounts_at", { { id = A, version = 2 } }, expect = 1 },
        { "count_balances_at_least", { at_least(A, 100) }, expect = 1 },
        { "count_balances_at_most", { at_most(A, 140) }, expect = 1 },
        { "save_saga", "g-1", "reserving", "d", "n1" } })
    assert.is_true(ok.ok)
    assert.equal(1, ok[1][1])
    local miss = assert(s:apply {
        { "save_saga", "g-2", "reserving", "d", "n1" },
        { "count_balances_at_least", { at_least(A, 141) }, expect = 1 } })
    assert.is_false(miss.ok)
    assert.equal(2, miss.at)
    local miss2 = assert(s:apply {
        { "save_saga", "g-3", "reserving", "d", "n1" },
        { "count_accounts_at", { { id = A, version = 1 } }, expect = 1 } })
    assert.is_false(miss2.ok)
    assert.equal(2, miss2.at)
    local miss3 = assert(s:apply {
        { "save_saga", "g-4", "reserving", "d", "n1" },
        { "count_balances_at_most", { at_most(A, 139) }, expect = 1 } })
    assert.is_false(miss3.ok)
    assert.equal(2, miss3.at)
    local ids = {}
    for _, r in ipairs(s:list_pending_sagas("n1")) do ids[#ids + 1] = r.id end
    assert.same({ "g-1" }, ids)
end

function M.run(name, make_store, opts)
    local env = getfenv(2) -- the calling spec's: busted's describe and it live there
    local describe, it = env.describe, env.it
    opts = opts or {}
    local wrap = opts.wrap or function(fn) fn() end
    local concurrent = opts.concurrent or function(fns) for _, f in ipairs(fns) do f() end end
    local seed = opts.seed or 20261125

    -- Runs write(w) for the writers w = 1..writers at once; then book "main" holds
    -- writers * per events, seqs 1, 2, 3, ... -> those events
    local function raced_events(s, writers, per, write)
        local fns = {}
        for w = 1, writers do fns[w] = function() write(w) end end
        concurrent(fns)
        local l = s:get_events_since("main", 0, 1000)
        assert.equal(writers * per, #l)
        for i, e in ipairs(l) do assert.equal(i, e.seq) end
        return l
    end

    local function case(title, body)
        it(title, function()
            wrap(function()
                local s = make_store()
                local ok, err = pcall(body, s)
                s:close()
                if not ok then error(err, 0) end
            end)
        end)
    end

    describe("store conformance: " .. name, function()
        case("books: create once, read back", books_case)

        case("accounts: append-only versions, a gap or an overwrite counts 0 (LED-17)",
             accounts_case)
        case("guards (LED-72): accounts at a version, balances at least, in a phase", guards_case)
        -- an engine's plan cache made stale by another engine, each way (LED-73)
        require("ron.ledger.plan_cache_conformance").add(case)
        case("postings: insert idempotent, reserve/release/deactivate conditional (LED-18)",
             function(s)
            local T1, T2 = id32("t1"), id32("t2")
            local ps = { posting(T1, 0, A, USD, 100), posting(T1, 1, A, USD, 40),
                         posting(T1, 2, B, USD, -140) }
            assert.equal(3, s:insert_postings(ps))
            assert.equal(0, s:insert_postings(ps))                          -- replay
            assert.equal(1, s:insert_postings { ps[1], posting(T2, 0, A, EUR, 7) })
            local ids = { pid(T1, 0), pid(T1, 1) }
            assert.equal(2, s:reserve_postings(ids, "saga-1"))
            assert.equal(0, s:reserve_postings(ids, "saga-1"))              -- reserve twice
            assert.equal(0, s:reserve_postings(ids, "saga-2"))
            assert.equal(0, s:release_postings(ids, "saga-2"))              -- foreign rid
            assert.equal(0, s:deactivate_postings(ids, "saga-2", T2))       -- foreign rid
            assert.equal(0, s:deactivate_postings(ids, nil, T2))            -- not active
            assert.equal(1, s:release_postings({ pid(T1, 1) }, "saga-1"))
            assert.equal(0, s:release_postings({ pid(T1, 1) }, "saga-1"))   -- release twice
            assert.equal(1, s:deactivate_postings(ids, "saga-1", T2))       -- only T1:0
            assert.equal(0, s:deactivate_postings(ids, "saga-1", T2))       -- deactivate twice
            assert.equal(1, s:deactivate_postings({ pid(T1, 1) }, nil, T2)) -- active -> inactive
            assert.equal(0, s:deactivate_postings({ pid(T1, 1) }, nil, T2))
            assert.equal(0, s:reserve_postings({ pid(T1, 0) }, "saga-3"))   -- inactive stays
            local got = s:get_postings { pid(T1, 2), pid(T1, 0), pid(T1, 1), pid(id32("x"), 0) }
            assert.equal(3, #got)
            assert.same({ transfer_id = T1, index = 0 }, got[1].id)
            assert.equal("inactive", got[1].status)
            assert.equal("saga-1", got[1].reservation)
            assert.equal(T2, got[1].consumed_by)
            assert.equal(T1, got[1].created_by)
            assert.equal("inactive", got[2].status)
            assert.is_nil(got[2].reservation)
            assert.equal("active", got[3].status)
            assert.equal(-140, got[3].amount)
            assert.same(USD, got[3].asset)
            assert.equal(B, got[3].account)
            assert.same({}, s:get_postings {})
        end)

        case("postings by account: filters, largest first, limit (LED-10)", function(s)
            local T = id32("by-acct")
            local amounts = { 5, 50, 20, 50, -3, 8 }
            local ps = {}
            for i, a in ipairs(amounts) do ps[i] = posting(T, i - 1, A, USD, a) end
            ps[#ps + 1] = posting(T, 6, A, EUR, 1000)
            ps[#ps + 1] = posting(T, 7, B, USD, 1)
            assert.equal(8, s:insert_postings(ps))
            assert.equal(1, s:reserve_postings({ pid(T, 2) }, "r"))
            local all = s:get_postings_by_account(A)
            assert.equal(7, #all)
            local usd = s:get_postings_by_account(A, USD, "active", nil, "largest")
            local seen = {}
            for i, p in ipairs(usd) do seen[i] = p.amount .. "@" .. p.id.index end
            assert.same({ "50@1", "50@3", "8@5", "5@0", "-3@4" }, seen)
            local top = s:get_postings_by_account(A, USD, "active", 2, "largest")
            assert.equal(2, #top)
            assert.equal(1, top[1].id.index)
            local pend = s:get_postings_by_account(A, nil, "pending_inactive")
            assert.equal(1, #pend)
            assert.equal(20, pend[1].amount)
            local byid = s:get_postings_by_account(A, USD, nil, 3, "id")
            assert.equal(0, byid[1].id.index)
            assert.equal(2, byid[3].id.index)
        end)

        case("balances: the projection, sharded, exact beyond 2^53 (LED-19)", function(s)
            local T = id32("big")
            local big = ffi.new("int64_t", 2) ^ 60 -- 1152921504606846976
            assert.equal(4, s:insert_postings {
                posting(T, 0, A, USD, big), posting(T, 1, A, USD, 1), posting(T, 2, A, EUR, -9),
                posting(T, 3, A, USD, 5, { status = "inactive" }) })
            local b = s:get_balances { { account = A, asset = USD }, { account = A, asset = EUR },
                                       { account = B, asset = USD } }
            assert.is_true(b[1] == big + 1)
            assert.equal("cdata", type(b[1]))
            assert.equal(-9, b[2])
            assert.equal(0, b[3])
            assert.equal(1, s:reserve_postings({ pid(T, 1) }, "r"))  -- still in the balance
            assert.is_true(s:get_balance(A, USD) == big + 1)
            assert.equal(1, s:deactivate_postings({ pid(T, 0) }, nil, id32("spend")))
            assert.equal(1, s:get_balance(A, USD))
            assert.equal(1, s:deactivate_postings({ pid(T, 1) }, "r", id32("spend")))
            assert.equal(0, s:get_balance(A, USD))
        end)

        case("balances: projection = sum of active + pending after random primitives", function(s)
            local rnd = prng(seed)
            print(("store conformance (%s): projection seed %d"):format(name, seed))
            local accts, assets = { A, B, C }, { USD, EUR }
            local model = {}    -- key -> { p = posting, status =, rid = }
            local keys = {}
            local function key(id) return id.transfer_id .. ":" .. id.index end
            local rids = { "r1", "r2", "r3" }
            for step = 1, 150 do
                local op = rnd(4)
                if op == 0 or #keys < 4 then
                    local T = id32(("rt%d"):format(step))
                    local ps = {}
                    for i = 0, rnd(3) do
                        local amt = rnd(2001) - 1000
                        if amt == 0 then amt = 1 end
                        ps[#ps + 1] = posting(T, i, accts[rnd(3) + 1], assets[rnd(2) + 1], amt)
                    end
                    if #keys > 0 and rnd(3) == 0 then -- a replay of an existing posting
                        ps[#ps + 1] = model[keys[rnd(#keys) + 1]].p
                    end
                    local want = 0
                    for _, p in ipairs(ps) do if not model[key(p.id)] then want = want + 1 end end
                    assert.equal(want, s:insert_postings(ps), "step " .. step)
                    for _, p in ipairs(ps) do
                        if not model[key(p.id)] then
                            model[key(p.id)] = { p = p, status = "active" }
                            keys[#keys + 1] = key(p.id)
                        end
                    end
                else
                    local ids, picked, seenk = {}, {}, {}
                    for _ = 0, rnd(3) do
                        local k = keys[rnd(#keys) + 1]
                        if not seenk[k] then
                            seenk[k] = true
                            ids[#ids + 1] = model[k].p.id
                            picked[#picked + 1] = model[k]
                        end
                    end
                    local rid = rids[rnd(3) + 1]
                    local want, from, to, need_rid = 0, nil, nil, nil
                    if op == 1 then
                        from, to = "active", "pending_inactive"
                        assert.equal(#picked, #ids)
                    elseif op == 2 then
                        from, to, need_rid = "pending_inactive", "active", rid
                    else
                        if rnd(2) == 0 then from, to = "active", "inactive"; rid = nil
                        else from, to, need_rid = "pending_inactive", "inactive", rid end
                    end
                    for _, m in ipairs(picked) do
                        if m.status == from and (not need_rid or m.rid == need_rid) then
                            want = want + 1
                        end
                    end
                    local got
                    if op == 1 then got = s:reserve_postings(ids, rid)
                    elseif op == 2 then got = s:release_postings(ids, rid)
                    else got = s:deactivate_postings(ids, rid, id32("c" .. step)) end
                    assert.equal(want, got, "step " .. step .. " op " .. op)
                    for _, m in ipairs(picked) do
                        if m.status == from and (not need_rid or m.rid == need_rid) then
                            m.status = to
                            if to == "pending_inactive" then m.rid = rid
                            elseif to == "active" then m.rid = nil end
                        end
                    end
                end
            end
            local sums, pairs_ = {}, {}
            for _, a in ipairs(accts) do
                for _, as in ipairs(assets) do
                    pairs_[#pairs_ + 1] = { account = a, asset = as }
                    sums[#pairs_] = 0
                end
            end
            for _, k in ipairs(keys) do
                local m = model[k]
                if m.status ~= "inactive" then
                    for i, pr in ipairs(pairs_) do
                        if pr.account == m.p.account and pr.asset.code == m.p.asset.code then
                            sums[i] = sums[i] + m.p.amount
                        end
                    end
                end
            end
            assert.same(sums, s:get_balances(pairs_))
            -- and the store's own postings agree with the model, status by status
            for i, pr in ipairs(pairs_) do
                local t = 0
                for _, p in ipairs(s:get_postings_by_account(pr.account, pr.asset)) do
                    assert.equal(model[key(p.id)].status, p.status)
                    if p.status ~= "inactive" then t = t + p.amount end
                end
                assert.equal(sums[i], t)
            end
        end)

        case("heads: a lease per (account, asset), only its holder releases (LED-20)",
             function(s)
            assert.equal(0, s:acquire_head(A, USD, "s1"))                  -- no row yet
            assert.equal(1, s:ensure_head(A, USD))
            assert.equal(0, s:ensure_head(A, USD))
            assert.equal(1, s:acquire_head(A, USD, "s1"))
            assert.equal(0, s:acquire_head(A, USD, "s2"))                  -- held
            assert.equal(0, s:acquire_head(A, USD, "s1"))                  -- not re-entrant
            assert.equal(0, s:release_head(A, USD, "s2"))                  -- not the holder
            local h = s:get_heads { { account = A, asset = USD }, { account = A, asset = EUR } }
            assert.equal(2, h.n)
            assert.same({ version = 1, holder = "s1" }, h[1])
            assert.is_nil(h[2])
            assert.equal(1, s:release_head(A, USD, "s1"))
            assert.equal(0, s:release_head(A, USD, "s1"))
            assert.equal(1, s:acquire_head(A, USD, "s2"))
            h = s:get_heads { { account = A, asset = USD } }
            assert.same({ version = 2, holder = "s2" }, h[1])
        end)

        case("heads: racing acquirers, exactly one wins", function(s)
            assert.equal(1, s:ensure_head(B, USD))
            local wins, fns = {}, {}
            for i = 1, 6 do
                fns[i] = function() wins[i] = assert(s:acquire_head(B, USD, "saga-" .. i)) end
            end
            concurrent(fns)
            local total = 0
            for i = 1, 6 do total = total + wins[i] end
            assert.equal(1, total)
        end)

        case("postings: racing reservations, exactly one rid holds each posting", function(s)
            local T = id32("race")
            local ps, ids = {}, {}
            for i = 0, 9 do
                ps[#ps + 1] = posting(T, i, A, USD, 10)
                ids[#ids + 1] = pid(T, i)
            end
            assert.equal(10, s:insert_postings(ps))
            local got, fns = {}, {}
            for i = 1, 5 do
                fns[i] = function() got[i] = assert(s:reserve_postings(ids, "r" .. i)) end
            end
            concurrent(fns)
            local total = 0
            for i = 1, 5 do total = total + got[i] end
            assert.equal(10, total)
            for _, p in ipairs(s:get_postings(ids)) do assert.equal("pending_inactive", p.status) end
            assert.equal(100, s:get_balance(A, USD))
        end)

        case("transfers: stored once with their accounts, paged", function(s)
            local recs = {}
            for i = 1, 5 do
                recs[i] = { id = id32("tr" .. i), bytes = "bytes" .. i, intent = "intent" .. i,
                            book = "main", created_at_ms = 1000 + i, metadata = "m" .. i }
                local inv = (i % 2 == 1) and { A, B } or { A }
                assert.equal(1, s:store_transfer(recs[i], inv))
                assert.equal(0, s:store_transfer(recs[i], inv))
            end
            local t = s:get_transfer(recs[3].id)
            assert.equal("bytes3", t.bytes)
            assert.equal("intent3", t.intent)
            assert.equal(1003, t.created_at_ms)
            assert.equal("m3", t.metadata)
            assert.is_nil(s:get_transfer(id32("none")))
            local pa = s:get_transfers_for_account(A, 2)
            assert.equal(2, #pa)
            assert.equal(recs[5].id, pa[1].id)
            assert.equal(recs[4].id, pa[2].id)
            local pa2 = s:get_transfers_for_account(A, 10, pa[2].n)
            assert.equal(3, #pa2)
            assert.equal(recs[1].id, pa2[3].id)
            local pb = s:get_transfers_for_account(B, 10)
            assert.equal(3, #pb)
            assert.equal(0, #s:get_transfers_for_account(C, 10))
            local l = s:list_transfers(0, 3)
            assert.equal(3, #l)
            assert.equal(recs[1].id, l[1].id)
            local l2 = s:list_transfers(l[3].n, 10)
            assert.equal(2, #l2)
            assert.equal(recs[5].id, l2[2].id)
        end)

        case("intents: the first outcome stays (LED-21)", function(s)
            local T = id32("tx")
            assert.equal(1, s:put_intent("k1", { status = "committed", transfer_id = T,
                                                  body_hash = id32("h") }))
            assert.equal(0, s:put_intent("k1", { status = "rejected", code = -19,
                                                  message = "InsufficientFunds: x" }))
            local o = s:get_intent("k1")
            assert.equal("committed", o.status)
            assert.equal(T, o.transfer_id)
            assert.equal(id32("h"), o.body_hash)
            assert.is_nil(o.code)
            assert.equal(1, s:put_intent("k2", { status = "rejected", code = -19,
                                                  message = "InsufficientFunds: x" }))
            o = s:get_intent("k2")
            assert.equal("rejected", o.status)
            assert.equal(-19, o.code)
            assert.equal("InsufficientFunds: x", o.message)
            assert.is_nil(s:get_intent("k3"))
            -- racing first outcomes: exactly one insert counts
            local got, fns = {}, {}
            for i = 1, 4 do
                fns[i] = function()
                    got[i] = assert(s:put_intent("k4", { status = "rejected", code = -i }))
                end
            end
            concurrent(fns)
            assert.equal(1, got[1] + got[2] + got[3] + got[4])
        end)

        case("sagas: upsert, pending by node, delete", function(s)
            assert.equal(1, s:save_saga("s1", "reserving", "d1", "n1"))
            assert.equal(1, s:save_saga("s2", "reserving", "d2", "n2"))
            assert.is_truthy(s:save_saga("s1", "finalizing", "d1b", "n1") >= 1)
            local l = s:list_pending_sagas()
            assert.equal(2, #l)
            assert.same({ id = "s1", phase = "finalizing", data = "d1b", node = "n1" }, l[1])
            l = s:list_pending_sagas("n2")
            assert.equal(1, #l)
            assert.equal("s2", l[1].id)
            assert.equal(1, s:delete_saga("s1"))
            assert.equal(0, s:delete_saga("s1"))
            assert.equal(1, #s:list_pending_sagas())
        end)

        case("sagas: the finalizing ones only, any node, by id (LED-32)", function(s)
            assert.same({}, s:list_finalizing_sagas())
            assert.equal(1, s:save_saga("s3", "finalizing", "d3", "n2"))
            assert.equal(1, s:save_saga("s2", "reserving", ("r"):rep(5000), "n1"))
            assert.equal(1, s:save_saga("s1", "reserving", "d1", "n1"))
            assert.same({ { id = "s3", phase = "finalizing", data = "d3", node = "n2" } },
                        s:list_finalizing_sagas())
            -- a record moved to finalizing is listed, a deleted one no more
            assert.is_truthy(s:save_saga("s1", "finalizing", "d1b", "n1") >= 1)
            assert.same({ { id = "s1", phase = "finalizing", data = "d1b", node = "n1" },
                          { id = "s3", phase = "finalizing", data = "d3", node = "n2" } },
                        s:list_finalizing_sagas())
            assert.equal(1, s:delete_saga("s3"))
            local l = s:list_finalizing_sagas()
            assert.equal(1, #l)
            assert.equal("s1", l[1].id)
            assert.equal(3 - 1, #s:list_pending_sagas())
        end)

        case("events: gapless per book, idempotent (LED-22)", function(s)
            local T1, T2 = id32("e1"), id32("e2")
            assert.equal(0, s:head_seq("main"))
            assert.equal(1, s:append_event("main", T1, "committed", "d1"))
            assert.equal(0, s:append_event("main", T1, "committed", "d1"))  -- exists
            assert.equal(1, s:append_event("main", T1, "reversed", "d1r"))
            assert.equal(1, s:append_event("main", T2, "committed", nil))
            assert.equal(1, s:append_event("other", T1, "committed", "o"))
            assert.equal(3, s:head_seq("main"))
            assert.equal(1, s:head_seq("other"))
            local e = s:get_event("main", T1, "reversed")
            assert.equal(2, e.seq)
            assert.is_nil(s:get_event("main", T2, "reversed"))
            local l = s:get_events_since("main", 0, 10)
            assert.equal(3, #l)
            for i = 1, 3 do assert.equal(i, l[i].seq) end
            assert.equal("d1", l[1].data)
            assert.is_nil(l[3].data)
            l = s:get_events_since("main", 1, 1)
            assert.equal(1, #l)
            assert.equal(2, l[1].seq)
            assert.equal("reversed", l[1].kind)
        end)

        case("events: racing appends stay gapless, each event once", function(s)
            local writers, per = 4, 8
            local l = raced_events(s, writers, per, function(w)
                for k = 1, per do
                    local T = id32(("w%d-%d"):format(w, k))
                    for _ = 1, 100 do
                        local n = assert(s:append_event("main", T, "committed", "x"))
                        if n == 1 or s:get_event("main", T, "committed") then break end
                        -- 0 and absent: a racer took the seq, retry
                    end
                end
            end)
            local seen = {}
            for _, e in ipairs(l) do
                assert.is_nil(seen[e.transfer_id])
                seen[e.transfer_id] = true
            end
            assert.equal(writers * per, s:head_seq("main"))
        end)

        case("usage streams: advance only from the head", function(s)
            local b1, b2, b3 = id32("b1"), id32("b2"), id32("b3")
            assert.is_nil(s:get_stream("ten", "bytes"))
            assert.equal(1, s:advance_stream("ten", "bytes", 1, b1, nil, nil))
            assert.equal(0, s:advance_stream("ten", "bytes", 1, b1, nil, nil))   -- already there
            assert.same({ seq = 1, b3 = b1 }, s:get_stream("ten", "bytes"))
            assert.equal(0, s:advance_stream("ten", "bytes", 2, b2, 1, b3))      -- wrong link
            assert.equal(1, s:advance_stream("ten", "bytes", 2, b2, 1, b1))
            assert.equal(0, s:advance_stream("ten", "bytes", 2, b2, 1, b1))      -- moved on
            assert.same({ seq = 2, b3 = b2 }, s:get_stream("ten", "bytes"))
            assert.is_nil(s:get_stream("ten", "requests"))
        end)

        -- ---- batch primitives (LED-51): one statement each, the count is the answer ----

        case("batch: intents put and read many at once, the first outcome stays", function(s)
            local T = id32("bt")
            assert.equal(1, s:put_intent("k2", { status = "rejected", code = -3, message = "m" }))
            local list = {}
            for i = 1, 4 do
                list[i] = { key = "k" .. i, outcome = { status = "committed", transfer_id = T,
                                                        body_hash = id32("h" .. i) } }
            end
            assert.equal(3, s:put_intents(list))           -- k2 holds its first outcome
            assert.equal(0, s:put_intents(list))           -- replay
            assert.equal(0, s:put_intents {})
            local got = s:get_intents { "k1", "k2", "k4", "nope" }
            assert.equal("committed", got.k1.status)
            assert.equal(T, got.k1.transfer_id)
            assert.equal(id32("h1"), got.k1.body_hash)
            assert.equal("k1", got.k1.key)
            assert.equal("rejected", got.k2.status)
            assert.equal(-3, got.k2.code)
            assert.equal("m", got.k2.message)
            assert.equal("committed", got.k4.status)
            assert.is_nil(got.nope)
            -- the parameter bound: 1024 intents (6 parameters each) in one statement
            local big, keys = {}, {}
            for i = 1, 1024 do
                keys[i] = "big" .. i
                big[i] = { key = keys[i], outcome = { status = "claimed", message = "s" } }
            end
            assert.equal(1024, s:put_intents(big))
            local all, n = s:get_intents(keys), 0
            for _ in pairs(all) do n = n + 1 end
            assert.equal(1024, n)
        end)

        case("batch: several pairs' postings, each largest first with its own limit", function(s)
            local T = id32("pp")
            assert.equal(7, s:insert_postings {
                posting(T, 0, A, USD, 5), posting(T, 1, A, USD, 50), posting(T, 2, A, USD, 50),
                posting(T, 3, A, EUR, 9), posting(T, 4, B, USD, -7), posting(T, 5, B, USD, 3),
                posting(T, 6, A, USD, 20) })
            assert.equal(1, s:reserve_postings({ pid(T, 6) }, "r"))
            local r = s:get_postings_by_pairs {
                { account = A, asset = USD, status = "active", limit = 2 },
                { account = B, asset = USD, status = "active", limit = 10 },
                { account = A, asset = USD, status = "pending_inactive", limit = 1 },
                { account = C, asset = USD, status = "active", limit = 5 },
                { account = A, asset = EUR, status = "active", limit = 5 },
            }
            assert.equal(5, #r)
            assert.equal(2, #r[1])
            assert.same(pid(T, 1), r[1][1].id) -- 50 (lower id first on a tie)
            assert.same(pid(T, 2), r[1][2].id)
            assert.equal(2, #r[2])
            assert.equal(3, r[2][1].amount)
            assert.equal(-7, r[2][2].amount)
            assert.equal(1, #r[3])
            assert.equal("r", r[3][1].reservation)
            assert.equal(0, #r[4])
            assert.equal(9, r[5][1].amount)
            -- the same as get_postings_by_account, query by query
            local one = s:get_postings_by_account(A, USD, "active", 2, "largest")
            assert.same(one, r[1])
            assert.same({}, s:get_postings_by_pairs {})
        end)

        case("batch: deactivate many, each consumed by its own transfer, only reserved by rid",
             function(s)
            local T, C1, C2 = id32("dm"), id32("c1"), id32("c2")
            assert.equal(4, s:insert_postings { posting(T, 0, A, USD, 10),
                posting(T, 1, A, USD, 20), posting(T, 2, A, USD, 30), posting(T, 3, B, USD, 1) })
            assert.equal(3, s:reserve_postings({ pid(T, 0), pid(T, 1), pid(T, 2) }, "r1"))
            assert.equal(60, s:get_balance(A, USD))
            local list = { { id = pid(T, 0), consumed_by = C1 }, { id = pid(T, 1), consumed_by = C2 },
                           { id = pid(T, 3), consumed_by = C2 } } -- T:3 is active: not touched
            assert.equal(0, s:deactivate_many(list, "r2"))     -- foreign rid
            assert.equal(2, s:deactivate_many(list, "r1"))
            assert.equal(0, s:deactivate_many(list, "r1"))     -- replay
            local got = s:get_postings { pid(T, 0), pid(T, 1), pid(T, 2), pid(T, 3) }
            assert.equal("inactive", got[1].status)
            assert.equal(C1, got[1].consumed_by)
            assert.equal(C2, got[2].consumed_by)
            assert.equal("pending_inactive", got[3].status)
            assert.equal("active", got[4].status)
            assert.equal(30, s:get_balance(A, USD))             -- the projection follows
            assert.equal(0, s:deactivate_many({}, "r1"))
        end)

        case("batch: postings inserted already consumed do not count in balances", function(s)
            local T = id32("ic")
            assert.equal(2, s:insert_postings { posting(T, 0, A, USD, 10),
                posting(T, 1, A, USD, 25, { status = "inactive", consumed_by = id32("nx") }) })
            assert.equal(10, s:get_balance(A, USD))
            local got = s:get_postings { pid(T, 1) }
            assert.equal("inactive", got[1].status)
            assert.equal(id32("nx"), got[1].consumed_by)
            assert.equal(T, got[1].created_by)
        end)

        case("batch: transfers stored many at once with their accounts", function(s)
            local list = {}
            for i = 1, 3 do
                list[i] = { rec = { id = id32("bt" .. i), bytes = "b" .. i, intent = "i" .. i,
                                    book = "main", created_at_ms = i, metadata = "m" .. i },
                            involved = i == 2 and { A } or { A, B } }
            end
            assert.equal(1, s:store_transfer(list[2].rec, list[2].involved))
            assert.equal(2, s:store_transfers(list))
            assert.equal(0, s:store_transfers(list))
            assert.equal(0, s:store_transfers {})
            assert.equal("b3", s:get_transfer(id32("bt3")).bytes)
            assert.equal("m1", s:get_transfer(id32("bt1")).metadata)
            assert.equal(3, #s:get_transfers_for_account(A, 10))
            local pb = s:get_transfers_for_account(B, 10)
            assert.equal(2, #pb)
            assert.equal(id32("bt3"), pb[1].id)
            local l = s:list_transfers(0, 10)
            assert.equal(3, #l)
            assert.equal(id32("bt2"), l[1].id) -- stored first
            -- an account listed twice is one row of the transfer's accounts
            assert.equal(1, s:store_transfers { { rec = { id = id32("bt4"), bytes = "b4",
                intent = "i4", book = "main", created_at_ms = 4 }, involved = { C, B, C } } })
            local pc = s:get_transfers_for_account(C, 10)
            assert.equal(1, #pc)
            assert.equal(id32("bt4"), pc[1].id)
            assert.equal(3, #s:get_transfers_for_account(B, 10))
        end)

        case("batch: events appended many at once, consecutive and gapless", function(s)
            local T = {}
            for i = 1, 5 do T[i] = id32("ev" .. i) end
            assert.equal(1, s:append_event("main", T[2], "transfer", "x"))
            local list = {}
            for i = 1, 5 do list[i] = { transfer_id = T[i], kind = "transfer", data = "d" .. i } end
            local n, first = s:append_events("main", list)     -- T2 is there: not numbered
            assert.equal(4, n)
            assert.equal(2, first)                              -- T1 .. T5 at 2 .. 5
            n, first = s:append_events("main", list)
            assert.equal(0, n)
            assert.is_nil(first)
            assert.equal(5, s:head_seq("main"))
            local l = s:get_events_since("main", 0, 10)
            for i, e in ipairs(l) do assert.equal(i, e.seq) end
            assert.equal(T[2], l[1].transfer_id)
            assert.equal(T[1], l[2].transfer_id)
            assert.equal(T[5], l[5].transfer_id)
            assert.equal("d3", l[3].data)
            local m = s:get_events_for("main", { T[1], T[5], id32("none") }, "transfer")
            assert.equal(2, m[T[1]].seq)
            assert.equal(5, m[T[5]].seq)
            assert.is_nil(m[id32("none")])
            assert.same({}, s:get_events_for("main", { T[1] }, "other"))
            assert.same({ 1, 1 }, { s:append_events("other", { { transfer_id = T[1],
                                                                 kind = "k" } }) })
            assert.equal(1, s:head_seq("other"))
        end)

        case("batch: racing batch appends stay gapless, each event once", function(s)
            raced_events(s, 4, 6, function(w)
                local list, ids = {}, {}
                for k = 1, 6 do
                    ids[k] = id32(("bw%d-%d"):format(w, k))
                    list[k] = { transfer_id = ids[k], kind = "transfer" }
                end
                for _ = 1, 100 do
                    assert(s:append_events("main", list))
                    local have, left = s:get_events_for("main", ids, "transfer"), {}
                    for _, e in ipairs(list) do
                        if not have[e.transfer_id] then left[#left + 1] = e end
                    end
                    list = left
                    if #list == 0 then break end
                end
                assert.equal(0, #list)
            end)
        end)

        case("batch: usage streams read, inserted and advanced many at once", function(s)
            local b1, b2, b3 = id32("b1"), id32("b2"), id32("b3")
            local key = require("ron.ledger.store.sql").stream_key
            assert.same({}, s:get_streams { { tenant = "t1", dimension = "d" } })
            assert.equal(1, s:advance_stream("t1", "d", 1, b1, nil, nil))
            assert.equal(1, s:insert_streams { { tenant = "t1", dimension = "d", seq = 1, b3 = b2 },
                                               { tenant = "t2", dimension = "d", seq = 3, b3 = b3 } })
            local g = s:get_streams { { tenant = "t1", dimension = "d" },
                                      { tenant = "t2", dimension = "d" },
                                      { tenant = "t3", dimension = "d" } }
            assert.same({ seq = 1, b3 = b1 }, g[key("t1", "d")])
            assert.same({ seq = 3, b3 = b3 }, g[key("t2", "d")])
            assert.is_nil(g[key("t3", "d")])
            assert.equal(1, s:advance_streams {
                { tenant = "t1", dimension = "d", seq = 5, b3 = b2, prev_seq = 1, prev_b3 = b1 },
                { tenant = "t2", dimension = "d", seq = 4, b3 = b1, prev_seq = 3, prev_b3 = b1 },
                { tenant = "t3", dimension = "d", seq = 2, b3 = b1, prev_seq = 1, prev_b3 = b1 } })
            assert.same({ seq = 5, b3 = b2 }, s:get_stream("t1", "d"))
            assert.same({ seq = 3, b3 = b3 }, s:get_stream("t2", "d"))
            assert.equal(0, s:advance_streams {
                { tenant = "t1", dimension = "d", seq = 5, b3 = b2, prev_seq = 1, prev_b3 = b1 } })
        end)

        -- The list primitives at their bounds, with what a column of a list can hold: NULLs
        -- anywhere (first, middle, last), bytes of every value (0, backslashes, "\\x"), int64
        -- beyond 2^53 and negative (PostgreSQL sends each column as ONE array parameter:
        -- ron.ledger.store.sql's PG_ARRAY; SQLite a VALUES list).
        case("batch: list columns hold NULLs, any bytes and int64 at the bounds", function(s)
            local big = ffi.new("int64_t", 2) ^ 54 + 3 -- not a double; 51 of them fit int64
            local odd = {}
            for b = 0, 255 do odd[#odd + 1] = string.char(b) end
            odd = table.concat(odd) -- every byte value, "\\x" and "\0" included
            local T = ("\\x00" .. odd):sub(1, 32)
            local ps, ids, want = {}, {}, 0
            for i = 1, 512 do
                local amt = (i % 3 == 0) and -(i * 7) or ((i % 5 == 0) and big or i)
                ps[i] = posting(T, i - 1, i % 2 == 0 and A or B, USD, amt,
                                (i % 4 == 1) and { reservation = "r" .. i,
                                                   status = "pending_inactive" } or nil)
                ids[i] = pid(T, i - 1)
                if i % 2 == 0 then want = want + ffi.new("int64_t", amt) end
            end
            assert.equal(512, s:insert_postings(ps))
            assert.equal(0, s:insert_postings(ps))
            local got = s:get_postings(ids)
            assert.equal(512, #got)
            for i, p in ipairs(got) do
                local w = ps[p.id.index + 1]
                assert.equal(T, p.id.transfer_id)
                assert.equal(i - 1, p.id.index)
                assert.equal(w.account, p.account)
                assert.is_true(w.amount == p.amount, "amount of " .. i)
                assert.equal(w.reservation, p.reservation)
                assert.equal(T, p.created_by)
                assert.is_nil(p.consumed_by)
            end
            assert.is_true(s:get_balance(A, USD) == want)
            -- a query per pair and status, 128 of them (the bound), each with its own limit
            local qs = {}
            for i = 1, 128 do
                qs[i] = { account = i % 2 == 0 and A or B, asset = i % 3 == 0 and EUR or USD,
                          status = i % 4 == 0 and "pending_inactive" or "active", limit = i }
            end
            local r = s:get_postings_by_pairs(qs)
            assert.equal(128, #r)
            for i, q in ipairs(qs) do
                assert.same(s:get_postings_by_account(q.account, q.asset, q.status, q.limit,
                                                      "largest"), r[i], "query " .. i)
            end
            -- intents: NULL codes, messages and hashes in every position, odd keys
            local list, keys = {}, {}
            for i = 1, 1024 do
                keys[i] = odd:sub(i % 200 + 1, i % 200 + 20) .. i
                list[i] = { key = keys[i], outcome = {
                    status = i % 3 == 0 and "rejected" or "committed",
                    transfer_id = i % 3 ~= 0 and T or nil,
                    code = i % 3 == 0 and -i or nil,
                    message = i % 7 == 0 and odd or nil,
                    body_hash = i % 2 == 0 and id32("h" .. i) or nil } }
            end
            list[1024].outcome.code = big -- an int64 beyond 2^53 in a code column
            assert.equal(1024, s:put_intents(list))
            local gi = s:get_intents(keys)
            for i, k in ipairs(keys) do
                local o, g = list[i].outcome, gi[k]
                assert.equal(o.status, g.status)
                assert.equal(o.transfer_id, g.transfer_id)
                assert.is_true(o.code == g.code, "code of " .. i)
                assert.equal(o.message, g.message)
                assert.equal(o.body_hash, g.body_hash)
            end
            -- transfers: NULL metadata, odd bytes, the involved accounts of each
            local tl = {}
            for i = 1, 40 do
                tl[i] = { rec = { id = id32(odd:sub(i, i + 5) .. i), bytes = odd, intent = "i" .. i,
                                  book = "main", created_at_ms = i == 40 and big or i,
                                  metadata = i % 2 == 0 and odd or nil },
                          involved = i % 3 == 0 and {} or { A, C } }
            end
            assert.equal(40, s:store_transfers(tl))
            for i, e in ipairs(tl) do
                local t = s:get_transfer(e.rec.id)
                assert.equal(odd, t.bytes)
                assert.equal(e.rec.metadata, t.metadata)
                assert.is_true(e.rec.created_at_ms == t.created_at_ms, "created_at of " .. i)
            end
            assert.equal(27, #s:get_transfers_for_account(C, 100))
            -- events: NULL data in every position
            local ev = {}
            for i = 1, 1024 do
                ev[i] = { transfer_id = id32(odd:sub(i % 250 + 1, i % 250 + 4) .. i),
                          kind = "transfer", data = i % 2 == 0 and odd or nil }
            end
            local n, first = s:append_events("main", ev)
            assert.equal(1024, n)
            assert.equal(1, first)
            local l = s:get_events_since("main", 0, 2000)
            for i, e in ipairs(l) do
                assert.equal(i, e.seq)
                assert.equal(ev[i].transfer_id, e.transfer_id)
                assert.equal(ev[i].data, e.data)
            end
        end)

        case("many: several primitives in one call, stopping at a failure", function(s)
            if not s.many then return end -- optional (the contract): this backend has none
            local T = id32("many")
            local r = s:many {
                { "insert_postings", { posting(T, 0, A, USD, 10) } },
                { "reserve_postings", { pid(T, 0) }, "r" },
                { "deactivate_postings", { pid(T, 0) }, nil, id32("c") },  -- reserved: 0
                { "deactivate_postings", { pid(T, 0) }, "r", id32("c") },
                { "get_balance", A, USD },
            }
            assert.equal(5, #r)
            assert.same({ 1, 1, 0, 1, 0 }, { r[1][1], r[2][1], r[3][1], r[4][1], r[5][1] })
            assert.has_error(function() s:many { { "nope" } } end)
        end)

        case("apply: a phase's primitives in one transaction, each count answered; a missed "
             .. "guard or a failure rolls all of it back (LED-67)", function(s)
            local T1, T2, T3 = id32("ph-1"), id32("ph-2"), id32("ph-3")
            local r = assert(s:apply {
                { "create_book", "main", "m" },
                { "insert_postings", { posting(T1, 0, A, USD, 100), posting(T1, 1, A, USD, 5) },
                  expect = 2 },
                { "reserve_postings", { pid(T1, 0) }, "r1", expect = 1 },
                { "get_balances", { { account = A, asset = USD } } },
                { "get_postings", {} },       -- a primitive with nothing to send
                { "get_intent", "none" },     -- a read answering nil
            })
            assert.is_true(r.ok)
            assert.equal(1, r[1][1]); assert.equal(2, r[2][1]); assert.equal(1, r[3][1])
            assert.same({ 105 }, r[4][1]); assert.same({}, r[5][1])
            assert.is_nil(r[6][1])
            local before = { s:get_postings { pid(T1, 0), pid(T1, 1) }, s:get_balance(A, USD),
                             s:head_seq("main") }
            -- a missed guard in the middle: nothing of the phase stays, the ops before it
            -- are answered
            local function unchanged(what)
                assert.same(before[1], s:get_postings { pid(T1, 0), pid(T1, 1) }, what)
                assert.equal(before[2], s:get_balance(A, USD), what)
                assert.equal(before[3], s:head_seq("main"), what)
                assert.same({}, s:get_postings { pid(T2, 0) }, what)
                assert.is_nil(s:get_transfer(T2), what)
                assert.is_nil(s:get_intent("i2"), what)
            end
            local function phase(last)
                local ops = {
                    { "deactivate_postings", { pid(T1, 0) }, "r1", T2, expect = 1 },
                    { "insert_postings", { posting(T2, 0, B, USD, 100) }, expect = 1 },
                    { "store_transfer", { id = T2, bytes = "b2", intent = "i2", book = "main",
                                          created_at_ms = 1 }, { A, B }, expect = 1 },
                    { "put_intent", "i2", { status = "committed", transfer_id = T2 },
                      expect = 1 },
                    { "append_event", "main", T2, "transfer", "d", expect = 1 },
                }
                ops[#ops + 1] = last
                return ops
            end
            for k, last in ipairs {
                { "reserve_postings", { pid(T1, 0) }, "r9", expect = 1 },        -- an UPDATE
                { "insert_postings", { posting(T1, 1, A, USD, 5) }, expect = 1 }, -- a duplicate
                { "put_intent", "i2", { status = "rejected", code = 1 }, expect = 1 },
                { "acquire_head", A, USD, "h", expect = 1 },                      -- no row
                { "store_transfers", { { rec = { id = T2, bytes = "x", intent = "i",
                                                 book = "main" }, involved = {} } }, expect = 1 },
                { "append_events", "main", { { transfer_id = T2, kind = "transfer" } },
                  expect = 1 },
            } do
                local res = assert(s:apply(phase(last)))
                assert.is_false(res.ok, "case " .. k)
                assert.equal(6, res.at, "case " .. k)
                assert.equal(1, res[1][1]); assert.equal(1, res[5][1])
                unchanged("case " .. k)
            end
            -- a guard missed first: nothing sent after it, nothing applied
            local res = assert(s:apply {
                { "insert_postings", { posting(T3, 0, C, USD, 9) }, expect = 1 },
                { "deactivate_postings", { pid(T1, 1) }, "nobody", T3, expect = 1 },
                { "insert_postings", { posting(T3, 1, C, USD, 9) }, expect = 1 },
            })
            assert.is_false(res.ok); assert.equal(2, res.at)
            assert.same({}, s:get_postings { pid(T3, 0), pid(T3, 1) })
            -- the whole phase once more, every guard met: all of it
            local ok = assert(s:apply(phase({ "release_postings", { pid(T1, 1) }, "r1" })))
            assert.is_true(ok.ok)
            assert.equal(0, ok[6][1])
            assert.equal(105, s:get_balance(A, USD) + s:get_balance(B, USD))
            assert.equal(100, s:get_balance(B, USD))
            assert.equal("committed", s:get_intent("i2").status)
            assert.equal(1, s:head_seq("main"))
            assert.same({ "inactive" }, { s:get_postings({ pid(T1, 0) })[1].status })
            -- misuse raises before anything runs
            assert.has_error(function() s:apply { { "flush" } } end)
            assert.has_error(function() s:apply { { "insert_postings", "not a list" } } end)
            assert.has_error(function() s:apply { { "get_balance", A, USD, expect = -1 } } end)
            assert.equal(100, s:get_balance(B, USD))
            -- opts.flush: the phase made durable in the same call (LED-50)
            local f = assert(s:apply({ { "create_book", "b2", nil } }, { flush = true }))
            assert.is_true(f.ok)
            assert.equal(s.durability == "ack", f.flushed == true)
        end)

        case("apply: a reader never sees a phase half done (LED-67)", function(s)
            -- a payer's one posting spent again and again into its change and a payment: the
            -- balances a reader sees always sum to the total and the payer's never goes up
            local reader = opts.reopen and assert(opts.reopen(s)) or s
            local T0 = id32("rd-0")
            assert.equal(1, s:insert_postings { posting(T0, 0, A, USD, 1000000) })
            local rounds, reads, bad = 60, 0, nil
            local done = false
            concurrent {
                function()
                    local cur = pid(T0, 0)
                    for k = 1, rounds do
                        local t = id32(string.format("rd-%d", k))
                        local res = assert(s:apply {
                            { "deactivate_postings", { cur }, nil, t, expect = 1 },
                            { "insert_postings", { posting(t, 0, A, USD, 1000000 - k),
                                                   posting(t, 1, B, USD, k) }, expect = 2 },
                            { "deactivate_postings", { pid(id32(string.format("rd-%d", k - 1)), 1) },
                              nil, t },
                        })
                        assert.is_true(res.ok)
                        cur = pid(t, 0)
                    end
                    done = true
                end,
                function()
                    local last = 1000000
                    while not done and reads < 2000 do
                        local b = assert(reader:get_balances { { account = A, asset = USD },
                                                               { account = B, asset = USD } })
                        reads = reads + 1
                        if b[1] + b[2] ~= 1000000 or b[1] > last then
                            bad = bad or string.format("read %d: A %s B %s (A before %s)",
                                                       reads, tostring(b[1]), tostring(b[2]),
                                                       tostring(last))
                        end
                        last = b[1]
                    end
                end,
            }
            if reader ~= s then reader:close() end
            assert.is_nil(bad)
            assert.equal(1000000 - rounds, s:get_balance(A, USD))
            assert.equal(rounds, s:get_balance(B, USD))
        end)

        case("flush: durable up to here, 1 with durability ack, 0 otherwise, idempotent (LED-50)",
             function(s)
            assert.is_function(s.flush)
            local want = s.durability == "ack" and 1 or 0
            assert.equal(want, s:flush()) -- nothing written yet: still fine
            assert.equal(1, s:create_book("main", "m"))
            assert.equal(1, s:insert_postings { posting(id32("fl"), 0, A, USD, 7) })
            assert.equal(want, s:flush())
            assert.equal(want, s:flush())
            -- a flush changes nothing the contract shows
            assert.same({ id = "main", meta = "m" }, s:get_book("main"))
            assert.equal(1, #s:list_books())
            assert.equal(7, s:get_balance(A, USD))
            -- and a batch may end with one
            if s.many then
                local r = s:many { { "create_book", "b2", nil }, { "flush" } }
                assert.same({ 1, want }, { r[1][1], r[2][1] })
            end
        end)

        case("leases: acquire, renew, take over an expired one, fence, release (LED-71)", lease_case)
        case("intents: the engine's claim keys (256 bytes 0xff, then the intent)", claims_case)

        if opts.reopen then
            case("migrations: a second open of the same data is idempotent (LED-24)", function(s)
                assert.equal(1, s:create_book("main", "m"))
                local s2 = assert(opts.reopen(s))
                assert.same({ id = "main", meta = "m" }, s2:get_book("main"))
                assert.equal(tostring(require("ron.ledger.store.schema").VERSION),
                             s2:get_meta("schema_version"))
                s2:close()
            end)
        end
    end)
end

return M
