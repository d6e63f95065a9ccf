-- The Store conformance suite (spec/ron/ledger/store_conformance.lua) inside the host
-- (ctest lua-ledger-store-host: `ron-accounting run spec/run-busted.lua
-- spec/ron/ledger/store_host_spec.lua`), where each case runs in a task on the host's loop:
--   - PostgreSQL (ron.ledger.store.postgres over ron.base.net.postgres) against a real
--     server the spec starts (tests/pg/pg-harness.sh), a fresh schema per case, a pool of 4
--     connections so the racing cases really race;
--   - SQLite offloaded to the libuv threadpool (sqlite.open { offload = true }): one call in
--     flight per store, the others queued, the racing cases as concurrent tasks.
-- Under plain busted (no host) it is pending.
local S = require("support")
local conformance = require("ron.ledger.store_conformance")

if not S.needs_host("store conformance inside the host", "lua-ledger-store-host") then return end

local uv = require("luv")
local task = require("ron.base.task")
local store = require("ron.ledger.store")
local sqlite = require("ron.ledger.store.sqlite")

-- Runs body in a task on a fresh scheduler and drives the loop until it ends.
local function in_task(body)
    S.in_task(body)
    assert.equal(0, sqlite.in_flight())
end
local concurrent = S.concurrent

-- offloaded SQLite ------------------------------------------------------------------------

local function fresh_path() return S.tmpname(".sqlite") end -- nothing there yet

conformance.run("sqlite offloaded", function()
    return assert(store.open { backend = "sqlite", path = fresh_path(), synchronous = "normal",
                               offload = true })
end, {
    wrap = in_task, concurrent = concurrent,
    reopen = function(s)
        return store.open { backend = "sqlite", path = s.path, offload = true }
    end,
})

describe("ron.ledger.store.sqlite offloaded", function()
    it("runs one call per store at a time and bounds the queue", function()
        in_task(function()
            local s = assert(sqlite.open { path = fresh_path(), synchronous = "normal",
                                           offload = true, max_queue = 2 })
            local got, fns = {}, {}
            for i = 1, 4 do
                fns[i] = function()
                    got[i] = { s:create_book("b" .. i, nil) }
                end
            end
            concurrent(fns)
            -- the first runs, two wait, the fourth finds the queue full
            local ok, busy = 0, 0
            for i = 1, 4 do
                if got[i][1] == 1 then ok = ok + 1 end
                if got[i][3] == "retry" then
                    busy = busy + 1
                    assert.matches("^Busy: 2 calls already wait", got[i][2])
                end
            end
            assert.equal(3, ok)
            assert.equal(1, busy)
            assert.equal(1, s.stats.rejected)
            assert.equal(3, #s:list_books())
            s:close()
        end)
    end)
end)

describe("ron.ledger.store.sqlite offloaded, closed while a call runs (issue 27)", function()
    it("closes the connection after the call on the pool, refuses the waiters", function()
        -- a daemon's stop closed the store under a running statement: SQLite crashed
        -- (SIGFPE); a call waiting for its turn then ran on the closed connection
        in_task(function()
            local s = assert(sqlite.open { path = fresh_path(), synchronous = "normal",
                                           offload = true })
            local got = {}
            concurrent {
                function() got[1] = { s:create_book("b1", nil) } end,
                function() got[2] = { s:create_book("b2", nil) } end,
                function()
                    assert.is_true(s.busy) -- the first runs, the second waits
                    s:close()
                    -- not under the running statement
                    assert.is_false(rawget(s, "conn_closed"))
                end,
            }
            assert.equal(1, got[1][1])
            S.fails("^Closed", got[2][1], got[2][2])
            assert.is_true(rawget(s, "conn_closed"))
            assert.equal(0, #s.waiters)
        end)
    end)
end)

describe("ron.ledger.store.sqlite offloaded, the module loaded anew", function()
    -- busted loads a spec file's modules anew for each file, while the threadpool's VMs
    -- (and what they attached by token) live on: a token issued again for a connection at
    -- a freed one's address ran statements finalized with the old one (SIGSEGV in a pool
    -- thread, lua-wallet-host)
    it("never issues a token twice, so no pool VM meets a closed store's statements",
       function()
        local name = "ron.ledger.store.sqlite"
        local seen, reused = {}, 0
        local last_dbnum
        in_task(function()
            for i = 1, 20 do
                package.loaded[name] = nil
                local fresh = require(name)
                local s = assert(fresh.open { path = fresh_path(), synchronous = "normal",
                                              offload = true })
                -- (the writer's connection and the reader's: either may take an address
                -- the last store's two freed)
                local now = { s.dbnum, s.reader.dbnum }
                for j, tok in ipairs { s.token, s.reader.token } do
                    assert.is_nil(seen[tok], "token " .. tok .. " issued twice")
                    seen[tok] = true
                    if last_dbnum and (now[j] == last_dbnum[1] or now[j] == last_dbnum[2]) then
                        reused = reused + 1
                    end
                end
                last_dbnum = now
                for b = 1, 6 do assert.equal(1, s:create_book("b" .. b, nil)) end
                assert.equal(6, #s:list_books(), "round " .. i)
                s:close()
            end
        end)
        package.loaded[name] = sqlite
        -- the case means something only where the allocator gave an address again
        print(string.format("store_host_spec: %d of 40 connections at an address the last "
                            .. "store's closed ones had",
                            reused))
        assert.is_true(reused > 0, "no address reused: the case did not meet its hazard")
    end)
end)

describe("ron.ledger.store.sqlite offloaded, off the loop thread (LED-23)", function()
    it("keeps the loop turning while a call waits on the disk's lock, then answers retry",
       function()
        in_task(function()
            local path = fresh_path()
            local s = assert(sqlite.open { path = path, synchronous = "normal", offload = true,
                                           busy_timeout_ms = 300 })
            local holder = assert(sqlite.open { path = path }) -- synchronous, this thread
            assert(holder.drv:exec("BEGIN IMMEDIATE"))
            local ticks, done = 0, false
            local ticker = task.spawn("store-ticker", function()
                while not done do
                    task.sleep(10)
                    ticks = ticks + 1
                end
            end)
            local t0 = uv.now()
            local n, err, class = s:create_book("b", nil) -- waits busy_timeout_ms in the pool
            local waited = uv.now() - t0
            done = true
            assert(ticker:join())
            assert(holder.drv:exec("ROLLBACK"))
            assert.is_nil(n)
            assert.equal("retry", class)
            assert.matches("^Busy: ", err)
            assert.is_true(waited >= 250, "waited " .. waited .. " ms")
            -- the loop ran meanwhile: a blocked loop would have ticked once at most
            assert.is_true(ticks >= 5, "the loop ticked " .. ticks .. " times")
            assert.equal(1, s:create_book("b", nil))
            holder:close()
            s:close()
        end)
    end)
end)

-- PostgreSQL ------------------------------------------------------------------------------

S.describe_pg("store on a real PostgreSQL", function(pg)
    local n = 0

    local function make()
        n = n + 1
        return assert(S.pg_store(pg, { schema = "store_" .. n, connections = 4,
                                       connect_timeout_ms = 20000, query_timeout_ms = 20000 }))
    end

    -- in_task(body(s)) on a fresh store s, closed after
    local function with_store(body)
        in_task(function()
            local s = make()
            body(s)
            s:close()
        end)
    end

    -- describe blocks inside: setup runs first
    conformance.run("postgres", make, {
        wrap = in_task, concurrent = concurrent,
        reopen = function(s)
            return S.pg_store(pg, { schema = s.schema, connections = 1,
                                    connect_timeout_ms = 20000 })
        end,
    })

    it("durability ack: commits without waiting, flush() waits for the WAL up to it (LED-50)",
       function()
        in_task(function()
            local s = make()
            assert.equal("ack", s.durability)
            -- every connection of the pool commits asynchronously
            local ok_all = {}
            for i = 1, 4 do
                ok_all[i] = function()
                    local rows = assert(s.drv.db:query("SHOW synchronous_commit"))
                    assert.equal("off", rows[1][1])
                    -- and without JIT (issue 25: "get_postings_by_pairs after ANALYZE")
                    assert.equal("off", assert(s.drv.db:query("SHOW jit"))[1][1])
                    assert.equal(1, s:create_book("b" .. i, nil))
                end
            end
            concurrent(ok_all)
            for _ = 1, 3 do
                local rows = assert(s.drv.db:query("SELECT pg_current_wal_insert_lsn()::text"))
                local before = rows[1][1]
                assert.equal(1, s:flush())
                -- the WAL is flushed at least up to where it was inserted before the flush:
                -- every commit any connection made before is durable
                rows = assert(s.drv.db:query("SELECT pg_current_wal_flush_lsn() >= $1::pg_lsn",
                                             { before }))
                assert.equal("t", rows[1][1], "flush lsn behind " .. before)
                assert.equal(1, s:create_book("c" .. _, nil))
            end
            s:close()
            local st = assert(S.pg_store(pg, { schema = "store_stmt", connections = 1,
                                               durability = "statement" }))
            assert.equal("statement", st.durability)
            local rows = assert(st.drv.db:query("SHOW synchronous_commit"))
            assert.equal("on", rows[1][1])
            assert.equal(0, st:flush())
            st:close()
            assert.has_error(function()
                S.pg_store(pg, { durability = "later" })
            end)
        end)
    end)

    it("a flushed phase is one transaction whose own commit waits for the WAL flush "
       .. "(issue 25); a missed guard flushes nothing", function()
        in_task(function()
            local s = make()
            local db = s.drv.db
            local function xid() -- (a transaction of its own: it takes the next xid)
                return tonumber(assert(db:query("SELECT pg_current_xact_id()::text"))[1][1])
            end
            for k = 1, 3 do
                local a = xid()
                local res = assert(s:apply({ { "create_book", "flushed-" .. k, nil, expect = 1 },
                                             { "get_book", "flushed-" .. k } }, { flush = true }))
                assert.is_true(res.ok)
                assert.is_true(res.flushed)
                local lsn = assert(db:query("SELECT pg_current_wal_insert_lsn()::text"))[1][1]
                -- the phase's xid and this one's: no second transaction for the flush
                assert.equal(a + 2, xid())
                local rows = assert(db:query("SELECT pg_current_wal_flush_lsn() >= $1::pg_lsn",
                                             { lsn }))
                assert.equal("t", rows[1][1], "flush lsn behind " .. lsn)
            end
            local miss = assert(s:apply({ { "create_book", "flushed-1", nil, expect = 1 } },
                                        { flush = true }))
            assert.is_false(miss.ok)
            assert.is_nil(miss.flushed)
            s:close()
        end)
    end)

    -- A fresh schema for the plan cases: -> the store, run(text) (the text rendered for it),
    -- prepare(name, text) (PREPAREd as name: -> the EXECUTE's arguments, a NULL a parameter).
    local function plan_store(schema_name)
        local base = require("ron.ledger.store.sql_base")
        local s = assert(S.pg_store(pg, { schema = schema_name, connections = 1,
                                         query_timeout_ms = 120000 }))
        local db = s.drv.db
        local function run(text)
            return assert(db:query(base.render("postgres", s.prefix, text), {}))
        end
        local function prepare(name, text)
            local q = base.render("postgres", s.prefix, text)
            local n = 0
            for d in q:gmatch("%$(%d+)") do n = math.max(n, tonumber(d)) end
            run("PREPARE " .. name .. " AS " .. q)
            return n > 0 and ("(" .. ("NULL, "):rep(n - 1) .. "NULL)") or ""
        end
        return s, run, prepare
    end

    -- The generic plan of every list statement (PG_ARRAY, the phase's balance lock) probes
    -- the keys it is given, at 2,000 postings as at 100,000 (issue 25): the phase sends them
    -- as named prepared statements, and the server runs a generic plan after five
    -- executions. Before, unnest(...) of a parameter counted as 10 rows, and at 2,000
    -- postings the reserve's generic plan was a hash join over a scan of the table.
    it("generic plans: no list statement scans the postings or balances (issue 25)", function()
        in_task(function()
            local sql_text = require("ron.ledger.store.sql_text")
            local pg_phase = require("ron.ledger.store.pg_phase")
            local s, run, prepare = plan_store("plans")
            local texts = { lock_balances = pg_phase.LOCK_BALANCES }
            for name, spec in pairs(sql_text.PG_ARRAY) do texts[name] = spec.sql end
            local names = {}
            for name in pairs(texts) do names[#names + 1] = name end
            table.sort(names)
            run("SET plan_cache_mode = force_generic_plan")
            local from = 0
            for _, upto in ipairs { 2000, 100000 } do
                -- two postings per transfer over 1,000 accounts (their balance rows more than
                -- a page: one page is read whole, rightly) and 8 shards, a third active
                run(("INSERT INTO @postings SELECT sha256(int8send(g / 2)), g %% 2, "
                     .. "sha256(int8send(g %% 1000)), 'USD', 2, g, CASE WHEN g %% 3 = 0 THEN 0 "
                     .. "ELSE 2 END, NULL, sha256(int8send(g / 2)), NULL, g %% 8 "
                     .. "FROM generate_series(%d, %d) AS g"):format(from, upto - 1))
                from = upto
                run("ANALYZE @postings")
                run("ANALYZE @balances")
                local scans = {}
                for k, name in ipairs(names) do
                    local args = prepare("plan_" .. k, texts[name])
                    local rows = run("EXPLAIN EXECUTE plan_" .. k .. args)
                    run("DEALLOCATE plan_" .. k)
                    for _, r in ipairs(rows) do
                        if r[1]:match("Seq Scan on postings") or r[1]:match("Seq Scan on balances")
                        then scans[#scans + 1] = upto .. " " .. name .. ": " .. r[1] end
                    end
                end
                assert.same({}, scans)
            end
            s:close()
        end)
    end)

    -- A generic plan is made once and kept until the table's statistics change (an ANALYZE,
    -- which autovacuum runs only now and then): a new ledger's connections prepare their
    -- statements while the tables are empty and never analyzed (the planner then assumes
    -- 10 pages), and the plan must still probe the keys it is given when the rows are many
    -- (issue 25: the consume of reserved postings, planned as a scan of the postings for
    -- `status = 1 AND reservation = $2`, which the planner counts as one row, scanned 4,000
    -- postings a commit in bench-ledger-commit-pg; the heads' compare-and-set, a hash join
    -- over a scan of every stream). Each list statement prepared on the new schema and
    -- executed once, then executed over 20,000 rows of each table it reads (a third of the
    -- postings reserved) without an ANALYZE between: no scan of a table's heap but by key.
    it("generic plans made on a new ledger still probe the keys of many rows (issue 25)",
       function()
        in_task(function()
            local sql_text = require("ron.ledger.store.sql_text")
            local s, run, prepare = plan_store("frozen")
            run("SET plan_cache_mode = force_generic_plan")
            local names, args = {}, {}
            for name, spec in pairs(sql_text.PG_ARRAY) do
                if not spec.plain then -- (an INSERT's plan reads no table)
                    names[#names + 1] = name
                    args[name] = prepare("frozen_" .. name, spec.sql)
                    -- (the generic plan is made at the first execution, and kept)
                    run("EXPLAIN EXECUTE frozen_" .. name .. args[name])
                end
            end
            table.sort(names)
            assert.is_true(#names >= 15, table.concat(names, " "))
            local function rows(t, sel) -- 20,000 rows of t, keyed by sha256(g)
                run("INSERT INTO @" .. t .. " SELECT " .. sel .. " FROM generate_series(1, 20000) "
                    .. "AS g")
            end
            -- (two postings a transfer: a third Active, a third reserved, a third spent)
            rows("postings", "sha256(int8send(g / 2)), g % 2, sha256(int8send(g % 1000)), 'USD', "
                 .. "2, g, g % 3, CASE WHEN g % 3 = 1 THEN sha256(int8send(g % 7)) END, "
                 .. "sha256(int8send(g / 2)), NULL, g % 8")
            rows("events", "'bench', g, sha256(int8send(g)), 'transfer', NULL")
            rows("usage_streams", "sha256(int8send(g)), 'd', g, sha256(int8send(g))")
            rows("intents", "sha256(int8send(g)), 'committed', NULL, NULL, NULL, NULL")
            rows("accounts", "sha256(int8send(g)), 1, 0, 0, 0, ''")
            rows("heads", "sha256(int8send(g)), 'USD', 2, 1, NULL")
            -- (each finds its rows through an index by its keys: no Seq Scan, and no bitmap
            -- of an index for a status, which selection's index holds after the account)
            local bad = {}
            for _, name in ipairs(names) do
                local plan = {}
                for _, r in ipairs(run("EXPLAIN EXECUTE frozen_" .. name .. args[name])) do
                    plan[#plan + 1] = r[1]
                end
                plan = table.concat(plan, "\n")
                if plan:find("Seq Scan on", 1, true) or plan:find("Heap Scan on", 1, true) then
                    bad[#bad + 1] = name .. ":\n" .. plan
                end
                run("DEALLOCATE frozen_" .. name)
            end
            assert.same({}, bad)
            s:close()
        end)
    end)

    -- The wallet's postings after a minute and a half of transfers from 16 sources to one
    -- sink (issue 25): the sink holds half of them, Active; each source thousands consumed
    -- and one Active. After ANALYZE the planner counts each of the 16 payers' 32 queries at
    -- 1/18 of the postings (the accounts) x 1/2 (the statuses), a tenth of that under a
    -- LIMIT from a column (~1,700 rows here, 0 or 1 in the index), and the statement's cost
    -- crosses jit_above_cost: with JIT on (before), each execution compiled for 8-60 ms to
    -- read 16 postings, a "JIT:" section in its plan. The store's connections run with JIT
    -- off; the plan stays the index's range scan under each query's LIMIT, no Sort.
    it("get_postings_by_pairs after ANALYZE of skewed postings: an index range scan per "
       .. "query, never JIT-compiled (issue 25)", function()
        in_task(function()
            local pgs = require("ron.ledger.store.postgres")
            local s = assert(S.pg_store(pg, { schema = "skewed", connections = 1,
                                             query_timeout_ms = 120000 }))
            local db = s.drv.db
            local function run(text, params)
                return assert(db:query((text:gsub("@", s.prefix)), params or {}))
            end
            -- account k: 15 zero bytes and k (the sink is 0, the sources 1..16)
            local acct = "decode(lpad(to_hex(%s), 32, '0'), 'hex')"
            local n = 600000
            run(("INSERT INTO @postings SELECT sha256(int8send(g)), 0, %s, 'USD', 2, "
                 .. "CASE WHEN g %% 2 = 0 THEN 1 ELSE g END, CASE WHEN g %% 2 = 0 THEN 0 "
                 .. "ELSE 2 END, NULL, sha256(int8send(g)), NULL, 0 FROM generate_series(1, %d) "
                 .. "AS g"):format(acct:format("CASE WHEN g % 2 = 0 THEN 0 ELSE 1 + g / 2 % 16 END"),
                                   n))
            run(("INSERT INTO @postings SELECT sha256(int8send(-k)), 0, %s, 'USD', 2, 1000000, "
                 .. "0, NULL, sha256(int8send(-k)), NULL, 0 FROM generate_series(1, 16) AS k")
                :format(acct:format("k")))
            run("ANALYZE @postings")
            local usd, qs = { code = "USD", scale = 2 }, {}
            for k = 1, 16 do
                local a = ("\0"):rep(15) .. string.char(k)
                qs[#qs + 1] = { account = a, asset = usd, status = "active", limit = 32 }
                qs[#qs + 1] = { account = a, asset = usd, status = "pending_inactive", limit = 1 }
            end
            -- the statement and binds the store sends, explained on its own connection
            local sent
            local read = s.drv.read
            s.drv.read = function(drv, text, binds, rtypes)
                sent = { text, binds }
                return read(drv, text, binds, rtypes)
            end
            local got = assert(s:get_postings_by_pairs(qs))
            s.drv.read = read
            for k = 1, 16 do
                assert.equal(1, #got[2 * k - 1])
                assert.equal(1000000, got[2 * k - 1][1].amount)
                assert.equal(0, #got[2 * k])
            end
            local lines = {}
            for _, r in ipairs(run("EXPLAIN (ANALYZE, BUFFERS false) " .. sent[1],
                                   pgs.params(sent[2]))) do
                lines[#lines + 1] = r[1]
            end
            local plan = table.concat(lines, "\n")
            -- the shape still makes the point: its estimate is above the threshold
            local cost = tonumber(lines[1]:match("cost=[%d.]+%.%.([%d.]+)"))
            local above = tonumber(run("SHOW jit_above_cost")[1][1])
            assert.is_true(cost > above, plan)
            assert.is_nil(plan:find("JIT:", 1, true), plan)
            assert.is_nil(plan:find("Sort", 1, true), plan)
            assert.matches("Limit[^\n]*\n%s*%->%s+Index Scan using postings_by_account on "
                           .. "postings", plan)
            assert.equal("off", run("SHOW jit")[1][1])
            s:close()
        end)
    end)

    -- A query's deadline from the time it is sent, not from the loop's cached time: after
    -- Lua held the loop longer than the timeout (verify's replay of 400,000 transfers held
    -- it for a minute), a query answered in milliseconds timed out at the next turn and its
    -- connection was dropped, whenever another timer was due (a task's sleep).
    it("pq: a query sent after the loop was held past its timeout gets its answer", function()
        with_store(function(s)
            local db = s.drv.db
            assert(db:query("SELECT 1", {}))
            local ticking = true
            local h = task.spawn("tick", function()
                while ticking do task.sleep(1) end
                return true
            end)
            task.sleep(5)
            local got = {}
            for round = 1, 3 do
                local t0 = uv.hrtime()
                while uv.hrtime() - t0 < 300e6 do end -- the loop held 300 ms, no yield
                local rows, err = db:query("SELECT pg_sleep(0.02), 1", {}, { timeout_ms = 200 })
                got[round] = rows and rows[1][2] or tostring(err)
            end
            ticking = false
            assert(h:join(1000))
            assert.same({ "1", "1", "1" }, got)
        end)
    end)

    -- the list primitives' columns (ron.ledger.store.sql PG_ARRAY, LED-51): one binary array each
    it("pq.array: bytea[] and bigint[] parameters, NULLs, empty, misuse; pq.unhex", function()
        with_store(function(s)
            local pq = require("ron.base.net.postgres_c")
            local q = "SELECT coalesce(array_length($1::bytea[], 1), 0), "
                      .. "array_to_string(array(SELECT coalesce(encode(x, 'hex'), 'N') "
                      .. "FROM unnest($1::bytea[]) AS x), ','), "
                      .. "array_to_string(array(SELECT coalesce(x::text, 'N') "
                      .. "FROM unnest($2::bigint[]) AS x), ',')"
            local rows = assert(s.drv.db:query(q, { pq.array("bytea", { "\0a", nil, "", "\\x" }, 4),
                pq.array("int8", { -1, nil, 2 ^ 53, "-9223372036854775808", "9223372036854775807" },
                         5) }))
            assert.same({ "4", "0061,N,,5c78",
                          "-1,N,9007199254740992,-9223372036854775808,9223372036854775807" },
                        { rows[1][1], rows[1][2], rows[1][3] })
            rows = assert(s.drv.db:query(q, { pq.array("bytea", {}), pq.array("int8", {}, 0) }))
            assert.same({ "0", "", "" }, { rows[1][1], rows[1][2], rows[1][3] })
            assert.has_error(function() pq.array("text", {}) end)
            assert.has_error(function() pq.array("bytea", { 1 }) end)
            assert.has_error(function() pq.array("int8", { 1.5 }) end)
            assert.has_error(function() pq.array("int8", { "12x" }) end)
            assert.has_error(function() pq.array("int8", { true }) end)
            assert.equal("\0a\255", pq.unhex("\\x0061fF"))
            assert.equal("", pq.unhex("\\x"))
            assert.is_nil(pq.unhex("\\x0"))
            assert.is_nil(pq.unhex("\\xzz"))
            assert.is_nil(pq.unhex("0061"))
            assert.is_nil(pq.unhex(nil))
            local long = string.rep("\1\2\3", 300)
            rows = assert(s.drv.db:query("SELECT $1::bytea", { pq.bytea(long) }))
            assert.equal(long, pq.unhex(rows[1][1]))
        end)
    end)

    it("pq pipeline: statements and syncs in one round trip, each sync one transaction, a "
       .. "failure aborts the rest of its transaction only (LED-67)", function()
        in_task(function()
            local pq = require("ron.base.net.postgres_c")
            local s = make()
            local db = s.drv.db
            assert(db:exec("CREATE TABLE pipe_t (k int PRIMARY KEY, v bytea)"))
            -- every member of the pool connected first: a fresh one's session settings
            -- (on_connect) are queries of their own
            for _ = 1, 4 do assert(db:exec("SELECT 1")) end
            local before = db:stats().queries
            local out = assert(db:pipeline {
                { "INSERT INTO pipe_t VALUES (1, $1::bytea)", { pq.bytea("\0one") } },
                { "INSERT INTO pipe_t VALUES ($1::int, NULL)", { n = 1, 2 } },
                { "SELECT count(*) FROM pipe_t" },
                "sync",
                { "INSERT INTO pipe_t VALUES (3, NULL)" },
                { "INSERT INTO pipe_t VALUES (1, NULL)" },   -- duplicate: the second tx fails
                { "INSERT INTO pipe_t VALUES (4, NULL)" },   -- not run
                "sync",
                { "SELECT k, v FROM pipe_t ORDER BY k" },  -- a third, after the failure
            })
            assert.equal(1, db:stats().queries - before) -- one operation, one round trip
            assert.equal(9, #out)
            assert.equal(1, out[1].affected); assert.equal(1, out[2].affected)
            assert.equal("2", out[3][1][1])
            assert.is_true(out[4].sync)
            assert.equal(1, out[5].affected)
            assert.equal("23505", out[6].sqlstate)
            assert.truthy(out[6].error)
            assert.is_true(out[7].aborted)
            assert.is_true(out[8].sync)
            -- the first transaction committed, the second rolled back whole (3 is not there)
            assert.equal(2, out[9].n)
            assert.equal("1", out[9][1][1]); assert.equal("\0one", pq.unhex(out[9][1][2]))
            assert.equal("2", out[9][2][1])
            -- the connection is usable afterwards, in the normal mode
            assert.equal("2", assert(db:query("SELECT count(*) FROM pipe_t"))[1][1])
            -- misuse raises before anything is sent
            assert.has_error(function() db:pipeline {} end)
            assert.has_error(function() db:pipeline { "flush" } end)
            assert.has_error(function() db:pipeline { { 42 } } end)
            assert.has_error(function() db:pipeline "SELECT 1" end)
            s:close()
        end)
    end)

    it("pq pipeline: named prepared statements (issue 25): a repeated text prepared once per "
       .. "session and run by name, answers unchanged; a prepare aborted with its "
       .. "transaction is not remembered; a reconnect forgets them", function()
        in_task(function()
            local pgm = require("ron.base.net.postgres")
            local db = assert(pgm.connect { conninfo = pg.cluster.conninfo, query_timeout_ms = 20000 })
            assert(db:exec("CREATE TEMP TABLE prep_t (k int PRIMARY KEY)"))
            local function named()
                return tonumber(assert(db:query("SELECT count(*) FROM pg_prepared_statements "
                                                .. "WHERE name LIKE 'ron_p%'"))[1][1])
            end
            local ins = "INSERT INTO prep_t VALUES ($1::int)"
            local function phase(k, extra)
                local list = { { ins, { n = 1, k }, prep = true },
                               { "SELECT count(*) FROM prep_t", nil, prep = true } }
                if extra then table.insert(list, 1, extra) end
                return assert(db:pipeline(list, { prepare = true }))
            end
            local out = phase(1) -- seen once: sent as it is
            assert.equal(1, out[1].affected); assert.equal("1", out[2][1][1])
            assert.equal(0, named())
            out = phase(2) -- seen twice: prepared, run by name, the same answers in place
            assert.equal(2, #out)
            assert.equal(1, out[1].affected); assert.equal("2", out[2][1][1])
            assert.equal(2, named())
            out = phase(3)
            assert.equal(1, out[1].affected); assert.equal("3", out[2][1][1])
            assert.equal(2, named()) -- by name only
            -- a duplicate key rolls the phase back; the names stay (they are the session's)
            out = phase(3)
            assert.equal("23505", out[1].sqlstate); assert.is_true(out[2].aborted)
            assert.equal("3", assert(db:query("SELECT count(*) FROM prep_t"))[1][1])
            -- a new text behind a failing statement: its prepare is aborted, not remembered
            local other = { "SELECT 42", nil, prep = true }
            db:pipeline({ { "SELECT 41", nil, prep = true } }, { prepare = true })
            out = db:pipeline({ { "SELECT 1/0" }, { "SELECT 41", nil, prep = true }, other },
                              { prepare = true })
            assert.equal("22012", out[1].sqlstate); assert.is_true(out[2].aborted)
            out = db:pipeline({ { "SELECT 41", nil, prep = true } }, { prepare = true })
            assert.equal("41", out[1][1][1])
            assert.equal(3, named())
            -- a new session: nothing remembered, prepared again on the second sight
            db:close()
            db = assert(pgm.connect { conninfo = pg.cluster.conninfo, query_timeout_ms = 20000 })
            assert(db:exec("CREATE TEMP TABLE prep_t (k int PRIMARY KEY)"))
            assert.equal(1, phase(7)[1].affected)
            assert.equal(0, named())
            assert.equal(1, phase(8)[1].affected)
            assert.equal(2, named())
            db:close()
        end)
    end)

    -- The plan, not the clock: a batch append must cost the same whatever the book holds.
    -- Its "not there yet" check as a NOT EXISTS became a hash anti join over every event of
    -- the book (20 of 32 ms per 1024 events after 30k, growing with history).
    it("append_events probes the (book, transfer, kind) index per row, never the whole book",
       function()
        with_store(function(s)
            local function evs(n, tag)
                local l = {}
                for i = 1, n do
                    l[i] = { transfer_id = (tag .. "-" .. i .. ("\0"):rep(32)):sub(1, 32),
                             kind = "k" }
                end
                return l
            end
            for b = 1, 12 do assert.equal(1024, s:append_events("main", evs(1024, "h" .. b))) end
            local text, binds
            local read = s.drv.read
            s.drv.read = function(self, t, b, rt)
                text, binds = t, b
                return read(self, t, b, rt)
            end
            assert.equal(1024, s:append_events("main", evs(1024, "x")))
            s.drv.read = read
            -- the same statement explained with fresh events (the params as the driver sends)
            local pgs = require("ron.ledger.store.postgres")
            local fresh = evs(1024, "y")
            for i, e in ipairs(fresh) do binds[3][i] = e.transfer_id end
            local rows = assert(s.drv.db:query("EXPLAIN " .. text, pgs.params(binds)))
            local plan = {}
            for i = 1, rows.n do plan[i] = rows[i][1] end
            plan = table.concat(plan, "\n")
            assert.is_nil(plan:find("Anti Join", 1, true), plan)
            assert.truthy(plan:find("events_book_transfer_id_kind_key", 1, true), plan)
        end)
    end)

    it("stores the saga records lz4-compressed (the server has lz4), idempotently", function()
        with_store(function(s)
            local q = "SELECT attcompression FROM pg_attribute WHERE attrelid = '"
                      .. s.schema .. ".sagas'::regclass AND attname = 'data'"
            local rows = assert(s.drv.db:query(q))
            assert.equal("l", rows[1][1])
            local s2 = assert(S.pg_store(pg, { schema = s.schema, connections = 1 }))
            rows = assert(s.drv.db:query(q))
            assert.equal("l", rows[1][1])
            assert.equal(1, s2:save_saga("x", "reserving", ("record "):rep(100000), "n"))
            assert.equal(700000, #s2:list_pending_sagas("n")[1].data)
            s2:close()
        end)
    end)

    it("inserts plainly first, and conditionally only after a duplicate key (LED-16)", function()
        with_store(function(s)
            local seen = {}
            for _, m in ipairs { "write", "read" } do
                local f = s.drv[m]
                s.drv[m] = function(self, text, ...)
                    seen[#seen + 1] = text:find("ON CONFLICT", 1, true) and "conditional"
                                      or "plain"
                    return f(self, text, ...)
                end
            end
            local function pid(t, i) return { transfer_id = t, index = i } end
            local T = ("t"):rep(32)
            local function p(i)
                return { id = pid(T, i), account = ("a"):rep(16),
                         asset = { code = "USD", scale = 2 }, amount = 10 + i }
            end
            assert.equal(2, s:insert_postings { p(0), p(1) })
            assert.same({ "plain" }, seen)
            seen = {}
            assert.equal(1, s:insert_postings { p(1), p(2) })     -- T:1 is there
            assert.same({ "plain", "conditional" }, seen)
            assert.equal(10 + 11 + 12, s:get_balance(("a"):rep(16), { code = "USD", scale = 2 }))
            seen = {}
            local ks = { { key = "k1", outcome = { status = "claimed", message = "s" } } }
            assert.equal(1, s:put_intents(ks))
            assert.equal(0, s:put_intents(ks))
            assert.same({ "plain", "plain", "conditional" }, seen)
            seen = {}
            local ev = { { transfer_id = T, kind = "k" } }
            assert.same({ 1, 1 }, { s:append_events("main", ev) })
            assert.equal(0, s:append_events("main", ev))        -- probed: no duplicate key
            assert.same({ "plain", "plain" }, seen)
            seen = {}
            local tl = { { rec = { id = T, bytes = "b", intent = "i", book = "main" },
                           involved = { ("a"):rep(16) } } }
            assert.equal(1, s:store_transfers(tl))
            assert.equal(0, s:store_transfers(tl))
            assert.same({ "plain", "plain", "conditional" }, seen)
            assert.equal(1, #s:get_transfers_for_account(("a"):rep(16), 10))
        end)
    end)

    it("refuses a newer schema version and classifies failures (LED-24)", function()
        in_task(function()
            local s = make()
            local newer = require("ron.ledger.store.schema").VERSION + 1
            local out, rc = pg.cluster:psql("UPDATE " .. s.schema .. ".ledger_meta SET value = "
                                         .. "convert_to('" .. newer .. "', 'UTF8')")
            assert.equal(0, rc, out)
            local s2, err, class = S.pg_store(pg, { schema = s.schema, connections = 1 })
            assert.is_nil(s2)
            assert.equal("bug", class)
            assert.matches("SchemaError: the store holds schema version " .. newer, err, 1, true)
            s:close()
            local pgs = require("ron.ledger.store.postgres")
            assert.equal("retry", pgs.classify("40001", "server"))
            assert.equal("retry", pgs.classify("40P01", "server"))
            assert.equal("io", pgs.classify("57P01", "server"))
            assert.equal("io", pgs.classify(nil, "network"))
            assert.equal("io", pgs.classify(nil, "timeout"))
            assert.equal("bug", pgs.classify("23505", "server"))
            -- a server that is gone: io
            local s3, err3, class3 = store.open {
                backend = "postgres", schema = "nope", connections = 1,
                conninfo = "host=127.0.0.1 port=1 dbname=x user=y", connect_timeout_ms = 500 }
            assert.is_nil(s3)
            assert.equal("io", class3)
            assert.matches("^Network", err3)
        end)
    end)
end)
