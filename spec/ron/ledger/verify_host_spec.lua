-- `ledger verify` inside the host (ctest lua-ledger-verify-host; docs/LEDGER.md "What verify
-- proves"): issue 29 item 2, verify exact after concurrent commits on one hot payer (each
-- spend takes the change of the one before) on SQLite (offloaded, a connection per
-- committer) and on a real PostgreSQL (the harness), RON_VERIFY_HOT transfers each (3,000),
-- a pause injected now and then before a store call; since the engine's phases (LED-67) a
-- transfer's outputs, row and event commit in one transaction, so no change posting is
-- spent before the transfer that made it is stored (asserted: none) and the funded hot
-- payer is never refused (asserted: no InsufficientFunds stored); then a sample of issue 24
-- §2's mutations on PostgreSQL, each named by verify.
-- Under plain busted (no host) it is pending.
local S = require("support")

if not S.needs_host("ledger verify in the host", "lua-ledger-verify-host") then return end

local uv = require("luv")
local task = require("ron.base.task")
local store = require("ron.ledger.store")
local scan = require("ron.ledger.store.scan")
local L = require("ron.ledger.ledger")
local M = require("ron.ledger.mutate")

local HOT = tonumber(os.getenv("RON_VERIFY_HOT") or "") or 3000
local SEED = tonumber(os.getenv("RON_VERIFY_SEED") or "") or 20261129
local BATCH = { 1, 32 } -- per committer: single commits, or batches (change chained)
local COMMITTERS = #BATCH

local in_task = S.run_task

-- A deterministic generator (the seed is printed).
local function lcg(seed)
    local x = seed % 2147483647
    return function()
        x = (x * 48271) % 2147483647
        return x / 2147483647
    end
end

-- s with a pause before some of its phases (store:apply, LED-67): the committers' phases
-- interleave in other orders every run. (Before phases the pause went between a commit's
-- outputs and its transfer row, and a change posting was spent before its transfer was
-- stored, 50 to 100 times a run: verify replays in the feed's dependency order for such a
-- history, verify_cases_spec's case; an older binary's half-finished record rolled forward
-- step by step still writes in that order.)
local SLOW = { apply = 6 }
local function jittered(s, rnd, stats)
    return setmetatable({}, { __index = function(t, k)
        local v = s[k]
        if type(v) ~= "function" then return v end
        local f = function(_, ...)
            if SLOW[k] and rnd() < 0.05 then
                stats.pauses = stats.pauses + 1
                task.sleep(2 + math.floor(rnd() * SLOW[k]))
            end
            return v(s, ...)
        end
        rawset(t, k, f)
        return f
    end })
end

local DEST = {}
for c = 1, COMMITTERS do DEST[c] = ("%02d"):format(c):rep(8) end

local function open_ledger(s)
    local led = L.new { store = s, book = "main", node = "hot-setup" }
    assert(led:create_account { id = M.EXT, policy = "uncapped" })
    assert(led:create_account { id = M.A })
    for _, d in ipairs(DEST) do assert(led:create_account { id = d }) end
    assert(led:commit { intent = "hot-deposit", movements = { M.mv(M.EXT, M.A, HOT * 10) } })
end

-- A request driven to its outcome: retried while it is Unavailable (a race lost). A stored
-- InsufficientFunds of the funded hot payer is counted, and must not happen: before phases
-- the resolution read the payer's postings, the reservations and the finalizing sagas one
-- after the other, so a posting reserved by another saga between those reads was seen
-- nowhere (0 to 12 a run); the open phase reads them in one transaction (LED-67).
local function outcome(stats, r, err, code)
    if r then return true end
    if code == L.ERR.InsufficientFunds then
        stats.insufficient = stats.insufficient + 1
        return true
    end
    assert(L.RETRY[code], err)
    return false
end

local function settle(led, req, stats)
    for _ = 1, 1000 do
        if outcome(stats, led:commit(req)) then
            stats.by[req.c] = (stats.by[req.c] or 0) + 1
            return
        end
        stats.retries = stats.retries + 1
        task.sleep(1)
    end
    error("never settled: " .. req.intent)
end

-- One committer: single commits, or batches each spending the change of the one before
-- inside the batch, from the hot payer until HOT transfers are committed.
local function committer(c, s, rnd, state, stats)
    -- (flush = false: durability is not what this case is about; one round trip less)
    local led = L.new { store = jittered(s, rnd, stats), book = "main", node = "hot-" .. c,
                        nonce = "n" .. c, flush = false,
                        pause = function(i) task.sleep(math.min(i, 4)) end }
    while state.next <= HOT do
        local reqs = {}
        for _ = 1, BATCH[c] do
            if state.next <= HOT then
                reqs[#reqs + 1] = { intent = "hot-" .. state.next, c = c,
                                    movements = { M.mv(M.A, DEST[c], 1 + state.next % 7) } }
                state.next = state.next + 1
            end
        end
        if #reqs > 1 then
            for i, x in ipairs(led:commit_many(reqs)) do
                if not outcome(stats, x[1], x[2], x[3]) then settle(led, reqs[i], stats)
                else stats.by[c] = (stats.by[c] or 0) + 1 end
            end
        elseif reqs[1] then
            settle(led, reqs[1], stats)
        end
    end
end

-- How often a transfer's row, and its event, came after those of a transfer spending its
-- outputs (what made verify's row-order walk report a healthy ledger).
local function inversions(s)
    local by_id, rows, ev = {}, scan.all(s, "transfers"), {}
    for _, r in ipairs(rows) do by_id[r.id] = r end
    for _, e in ipairs(scan.all(s, "events")) do ev[e.transfer_id] = e.seq end
    local n_rows, n_events = 0, 0
    for _, p in ipairs(scan.all(s, "postings")) do
        local creator, spender = by_id[p.transfer_id], p.consumed_by and by_id[p.consumed_by]
        if creator and spender then
            if creator.n > spender.n then n_rows = n_rows + 1 end
            if ev[creator.id] > ev[spender.id] then n_events = n_events + 1 end
        end
    end
    return n_rows, n_events
end

local function hot(name, open, open_ro)
    local t0 = uv.hrtime()
    local state, stats = { next = 1 }, { pauses = 0, retries = 0, insufficient = 0, by = {} }
    local base = open()
    open_ledger(base)
    local hs = {}
    for c = 1, COMMITTERS do
        local rnd = lcg(SEED + c)
        hs[c] = task.spawn("hot-" .. c, function()
            local s = open()
            committer(c, s, rnd, state, stats)
            if s.close then s:close() end
        end)
    end
    for _, h in ipairs(hs) do
        local ok, err = h:join()
        assert(ok, err)
    end
    local commit_s = (uv.hrtime() - t0) / 1e9
    local rows_inv, events_inv = inversions(base)
    if base.close then base:close() end
    local ro = open_ro()
    local t1 = uv.hrtime()
    local problems, sum = M.verify(ro)
    local verify_s = (uv.hrtime() - t1) / 1e9
    ro:close()
    print(string.format("verify hot %s: seed %d, %d transfers by %d committers in %.1f s "
                        .. "(%d paused writes, %d retries, %d InsufficientFunds stored for a "
                        .. "funded payer); %d spends of change whose transfer row came later, "
                        .. "%d whose event came later; verify %.1f s; by committer %s",
                        name, SEED, sum.transfers, COMMITTERS, commit_s, stats.pauses,
                        stats.retries, stats.insufficient, rows_inv, events_inv, verify_s,
                        table.concat(stats.by, "/")))
    assert.equal("", M.text(problems))
    assert.equal(0, stats.insufficient)
    assert.equal(HOT + 1, sum.transfers)
    -- a posting is never spendable before its transfer's row and event are stored (LED-67)
    assert.same({ 0, 0 }, { rows_inv, events_inv })
end

describe("ledger verify after concurrent commits on one hot payer (issue 29 item 2)", function()
    it("SQLite, a connection per committer: verify exact", function()
        in_task(function()
            -- (RON_VERIFY_KEEP=FILE keeps the ledger there, for another verify to read)
            local path = os.getenv("RON_VERIFY_KEEP") or S.tmpname(".hot.db")
            hot("sqlite", function()
                return assert(store.open { backend = "sqlite", path = path, offload = true })
            end, function()
                return assert(store.open { backend = "sqlite", path = path, readonly = true })
            end)
        end)
    end)
end)

-- issue 24 §2's cases on PostgreSQL (the schema "mut" holds mutate.lua's workload): each
-- mutation, what verify must say, and the statement that puts the row back.
local A = ("41"):rep(16)
local PG_CASES = {
    { name = "an Active posting no transfer created (the projection's trigger adds it)",
      mutate = "INSERT INTO mut.postings SELECT transfer_id, 999, account, asset_code, scale, "
               .. "amount, 0, NULL, created_by, NULL, shard FROM mut.postings WHERE status = 2 "
               .. "ORDER BY transfer_id LIMIT 1",
      restore = "UPDATE mut.balances b SET amount = b.amount - p.amount FROM mut.postings p "
                .. "WHERE p.idx = 999 AND b.account = p.account AND b.asset_code = p.asset_code "
                .. "AND b.scale = p.scale AND b.shard = p.shard; "
                .. "DELETE FROM mut.postings WHERE idx = 999",
      expect = ":999: no transfer of the feed created it" },
    { name = "an amount", mutate = "UPDATE mut.postings SET amount = amount + 1 WHERE status = 0 "
                                   .. "AND account = '\\x" .. A .. "'",
      restore = "UPDATE mut.postings SET amount = amount - 1 WHERE status = 0 AND account = "
                .. "'\\x" .. A .. "'",
      expect = "in the store, its transfer's output" },
    { name = "a policy", mutate = "UPDATE mut.accounts SET policy = 2 WHERE id = '\\x" .. A .. "'",
      restore = "UPDATE mut.accounts SET policy = 0 WHERE id = '\\x" .. A .. "'",
      expect = "accounts " .. A .. " v1: its columns say uncapped" },
    { name = "a projection row", mutate = "UPDATE mut.balances SET amount = amount + 5 WHERE "
                                          .. "account = '\\x" .. A .. "'",
      restore = "UPDATE mut.balances SET amount = amount - 5 WHERE account = '\\x" .. A .. "'",
      expect = "balances " .. A .. " USD/2 shard" },
    { name = "created_at_ms", mutate = "UPDATE mut.transfers SET created_at_ms = created_at_ms + 1",
      restore = "UPDATE mut.transfers SET created_at_ms = created_at_ms - 1",
      expect = "created_at_ms is 1700000000124, its event" },
    { name = "a body hash", mutate = "CREATE TABLE public.saved AS SELECT * FROM mut.intents "
                                     .. "WHERE key = convert_to('dep-a', 'UTF8'); UPDATE "
                                     .. "mut.intents SET body_hash = '\\x00' WHERE key = "
                                     .. "convert_to('dep-a', 'UTF8')",
      restore = "UPDATE mut.intents i SET body_hash = s.body_hash FROM public.saved s WHERE "
                .. "i.key = s.key; DROP TABLE public.saved",
      expect = "intents dep-a: its body hash differs from its transfer's event" },
    { name = "a stored rejection deleted",
      mutate = "CREATE TABLE public.saved AS SELECT * FROM mut.intents WHERE key = "
               .. "convert_to('wlt:n:p:2', 'UTF8'); DELETE FROM mut.intents WHERE key = "
               .. "convert_to('wlt:n:p:2', 'UTF8')",
      restore = "INSERT INTO mut.intents SELECT * FROM public.saved; DROP TABLE public.saved",
      expect = "intents wlt:n:p:2: missing: the rejection event at seq" },
    { name = "an event naming no transfer",
      mutate = "INSERT INTO mut.events SELECT book, max(seq) + 1, '\\x" .. ("00"):rep(32)
               .. "', convert_to('transfer', 'UTF8'), NULL FROM mut.events GROUP BY book",
      restore = "DELETE FROM mut.events WHERE transfer_id = '\\x" .. ("00"):rep(32) .. "'",
      expect = "transfers " .. ("00"):rep(32) .. ": missing: the transfer event at seq" },
    { name = "a trigger dropped", mutate = "DROP TRIGGER postings_balance_upd_s ON mut.postings",
      restore = "CREATE TRIGGER postings_balance_upd_s AFTER UPDATE ON mut.postings "
                .. "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT "
                .. "EXECUTE FUNCTION mut.postings_balance_upd()",
      expect = "schema postings: its triggers are postings.postings_balance_ins_s," },
}

S.describe_pg("ledger verify on a real PostgreSQL", function(PG)
    local function pg(schema, o)
        o = o or {}
        return S.pg_store(PG, { schema = schema, connections = o.connections or 2,
                                readonly = o.readonly, connect_timeout_ms = 20000,
                                query_timeout_ms = 60000 })
    end

    it("concurrent committers on one hot payer: verify exact", function()
        in_task(function()
            hot("postgres", function() return assert(pg("hot")) end,
                function() return assert(pg("hot", { readonly = true })) end)
        end)
    end)

    it("upgrades a schema-2 store once on open, in one transaction (LED-68)", function()
        in_task(function()
            local codec = require("ron.ledger.codec")
            local events = require("ron.ledger.events")
            local sql = require("ron.ledger.store.sql")
            local s = assert(pg("old", { connections = 4 }))
            M.workload(s)
            local function run(text, binds)
                assert(s.drv:write(sql.render("postgres", s.prefix, text), binds or { n = 0 }))
            end
            -- what a version-2 engine wrote: no account or rejection events, transfer
            -- events without body hash or created_at_ms
            run("DELETE FROM @events WHERE kind IN (convert_to('account', 'UTF8'), "
                .. "convert_to('rejection', 'UTF8'))")
            run("UPDATE @events e SET seq = -r.n FROM (SELECT seq, row_number() OVER "
                .. "(ORDER BY seq) AS n FROM @events) r WHERE e.seq = r.seq")
            run("UPDATE @events SET seq = -seq")
            for _, ev in ipairs(s:get_events_since("main", 0, 1000)) do
                if ev.kind == "transfer" then
                    local d = events.decode(ev.data)
                    run("UPDATE @events SET data = ?b WHERE seq = ?i", { n = 2,
                        codec.encode { intent = d.intent, kind = d.kind, target = d.target },
                        ev.seq })
                end
            end
            run("UPDATE @ledger_meta SET value = convert_to('2', 'UTF8') WHERE key = "
                .. "convert_to('schema_version', 'UTF8')")
            -- nor the phases' guard function (a binary before phases, LED-67)
            run("DROP FUNCTION @rl_expect(bigint, bigint)")
            local before = s:head_seq("main")
            s:close()
            local ro, err = pg("old", { readonly = true })
            S.fails("schema old holds schema version 2, older than this code's 4", ro, err)
            s = assert(pg("old")) -- the upgrade
            local evs = s:get_events_since("main", before, 1000)
            assert.equal("ledger.upgrade", evs[1].kind)
            assert.is_true(#evs > 8)
            s:close()
            s = assert(pg("old")) -- again: nothing more
            assert.equal(before + #evs, s:head_seq("main"))
            -- the same migration made the guard function: a commit's phases run
            local led = L.new { store = s, book = "main", node = "upgraded" }
            assert(led:commit { intent = "after-upgrade", movements = { M.mv(M.EXT, M.A, 5) } })
            s:close()
            ro = assert(pg("old", { readonly = true }))
            local problems = M.verify(ro)
            ro:close()
            assert.equal("", M.text(problems))
        end)
    end)

    it("names a sample of issue 24 §2's mutations; refuses a schema without a ledger",
       function()
        in_task(function()
            local s = assert(pg("mut", { connections = 4 }))
            M.workload(s)
            local db = s.drv.db
            local function sql(text)
                local ok, err = db:exec(text)
                assert(ok, err)
            end
            local function problems()
                local ro = assert(pg("mut", { readonly = true }))
                local p = M.verify(ro)
                ro:close()
                return M.text(p)
            end
            assert.equal("", problems())
            for _, c in ipairs(PG_CASES) do
                sql(c.mutate)
                local text = problems()
                sql(c.restore)
                assert.matches(c.expect, text, 1, true)
                assert.equal("", problems(), "restored after " .. c.name)
            end
            -- a duplicate is refused by the keys
            local dup = db:exec("INSERT INTO mut.events SELECT * FROM mut.events LIMIT 1")
            assert.is_nil(dup)
            -- the store never writes: a write through the read-only store fails
            local ro = assert(pg("mut", { readonly = true }))
            assert.is_nil((ro:create_book("x", "y")))
            ro:close()
            s:close()
            -- a schema that holds no ledger is refused, and nothing is created in it
            local none, err = pg("nothing", { readonly = true })
            S.fails("NotALedger: schema nothing holds no ledger", none, err)
            local out = assert(PG.cluster:psql("SELECT count(*) FROM pg_namespace WHERE nspname = "
                                            .. "'nothing'"))
            assert.equal("0", out:match("%d+"))
        end)
    end)
end)
