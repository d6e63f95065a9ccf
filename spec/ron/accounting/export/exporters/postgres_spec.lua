-- ron.accounting.export.exporters.postgres, ron.base.net.postgres and
-- ron.base.net.postgres_c against a REAL PostgreSQL started by the harness
-- (tests/pg/pg-harness.sh: initdb in a temporary directory, a free loopback port, torn down at
-- the end, also when the process dies). Runs inside the host (ctest lua-postgres-host:
-- `ron-accounting run spec/run-busted.lua
-- spec/ron/accounting/export/exporters/postgres_spec.lua`): the pq module is the host's C
-- module (host/lua/pq.c). Under plain busted (ctest lua) only the pure parts run (options,
-- classification, DDL); the rest is pending.
--
-- Cases: the pq/pg primitives (params, classes, timeouts, reconnect, shutdown, lifetimes of
-- scripts that end with a connection open); the contract answered by the database (ok,
-- dup, conflict, gap; G-3 replays; stored bytes = slice:encode(), b3 = b3sum); G-16 with
-- two exporter processes racing on the same streams (same slices, and forked producers);
-- timeouts (client-side and statement_timeout) -> retry_timeout; the export runtime into
-- PostgreSQL end to end, and across a PostgreSQL outage (stop, backlog grows, start,
-- drains: no gap, no duplicate; head() afterwards). `ron-accounting verify postgres://`
-- checks every ledger written. No wall-clock assertions: waits are "eventually".
local S = require("support")
local postgres = require("ron.accounting.export.exporters.postgres")

local HAS_PQ = pcall(require, "ron.base.net.postgres_c")

describe("ron.accounting.export.exporters.postgres (no database)", function()
    it("validates its options", function()
        S.refuses(postgres.new, {
            { { conninfo = "x", bogus = 1 }, 'postgres.new: unknown option "bogus"' },
            { {}, "postgres.new: conninfo must be a non-empty string" },
            { { conninfo = "x", schema = "Bad-Name" },
              "postgres.new: schema must match [a-z_][a-z0-9_]* (at most 63 bytes)" },
            { { conninfo = "x", connections = 0 } },
        })
        local e = postgres.new { conninfo = "x" } -- no I/O at new()
        assert.equal("ron_accounting", e.schema)
        require("ron.accounting.export.exporters").check(e)
    end)

    it("maps failures onto the export contract", function()
        local e = postgres.new { conninfo = "x" }
        local cases = {
            { "network", nil, "retry_network" },
            { "timeout", nil, "retry_timeout" },
            { "server", "57014", "retry_timeout" },   -- statement_timeout / canceled
            { "server", "55P03", "retry_timeout" },   -- lock_timeout
            { "server", "57P01", "retry_remote_5xx" }, -- admin shutdown
            { "server", "57P03", "retry_remote_5xx" }, -- cannot connect now
            { "server", "08006", "retry_remote_5xx" },
            { "server", "53300", "retry_remote_5xx" }, -- too many connections
            { "server", "40001", "retry_remote_5xx" }, -- serialization failure
            { "server", "XX000", "retry_remote_5xx" },
            { "server", nil, "retry_remote_5xx" },     -- refused without SQLSTATE
        }
        for _, c in ipairs(cases) do
            assert.equal(c[3], (e:classify("msg", c[2], c[1])), c[1] .. " " .. tostring(c[2]))
        end
        local st, err = e:classify("permission denied", "42501", "server")
        assert.is_nil(st)
        assert.equal("ExporterError: PostgreSQL 42501: permission denied", err)
        assert.is_nil((e:classify("Closed: x", nil, "closed")))
        e.schema_ready = true
        e:classify("no function", "42883", "server")
        assert.is_false(e.schema_ready) -- recreated on the next put
    end)

    it("has one DDL per schema, with the CAS function", function()
        local ddl = postgres.schema_sql("abc")
        assert.truthy(ddl:find('CREATE TABLE IF NOT EXISTS "abc".slices', 1, true))
        assert.truthy(ddl:find('CREATE OR REPLACE FUNCTION "abc".ron_put', 1, true))
        assert.truthy(ddl:find("FOR UPDATE", 1, true))
        assert.has_error(function() postgres.schema_sql("a;b") end)
    end)
end)

if not S.runs_if(HAS_PQ, "ron.accounting.export.exporters.postgres (real PostgreSQL)",
                 "needs the ron-accounting host (ron.base.net.postgres_c): ctest -R lua-postgres-host") then
    return
end

local acct = require("ron.accounting")
local uv = require("luv")
local pq = require("ron.base.net.postgres_c")
local pg = require("ron.base.net.postgres")
local runtime = require("ron.accounting.runtime")
local backoff = require("ron.base.backoff")
local H = dofile(S.root .. "tests/pg/harness.lua")

local T0, TA, TB = S.T0, S.TENANT_A, S.TENANT_B
local BIN = os.getenv("RA_BIN") or "build/ron-accounting"
local run = S.run_task

local cluster
local schema_n = 0
local function fresh_schema()
    schema_n = schema_n + 1
    return "spec_" .. schema_n
end

-- `ron-accounting verify --schema S <url>`: rc, output.
local function verify(schema, extra)
    local out, rc = S.run(BIN .. " verify --schema " .. schema .. " " .. (extra or "") .. " "
                          .. S.shell_quote(cluster.url))
    return rc, out
end

local function fast_backoff()
    return backoff.exponential.new { base_ms = 5, cap_ms = 50, seed = 1 }
end

local chain = S.chain

-- Runs argv (a list) as a child process from a task and waits for its exit code.
local function spawn_wait(task, argv)
    local ch = task.channel(1, "spawn")
    local args = {}
    for i = 2, #argv do args[#args + 1] = argv[i] end
    local handle
    handle = uv.spawn(argv[1], { args = args, stdio = { nil, 2, 2 } }, function(code)
        handle:close()
        ch:try_send(code)
    end)
    assert(handle, "spawn " .. argv[1])
    return ch:recv()
end

describe("ron.accounting.export.exporters.postgres (real PostgreSQL)", function()
    setup(function()
        local ok, why = H.available()
        assert(ok, why) -- the host run must not skip silently: install postgresql
        cluster = assert(H.start())
        print("postgres: " .. cluster.conninfo .. " (" .. cluster.dir .. ")")
    end)
    teardown(function()
        if cluster then cluster:stop() end
    end)

    describe("ron.base.net.postgres_c / ron.base.net.postgres", function()
        it("runs parameterised queries: text, numbers, booleans, NULL, bytea", function()
            run(function()
                local db = assert(pg.connect(cluster.conninfo))
                local bytes = "\0\1\2\255" .. string.rep("z", 100000)
                local rows = assert(db:query(
                    "SELECT $1::int + 1 AS a, $2::text AS b, $3::bool AS c, $4::text AS d, "
                    .. "$5::bytea AS e, length($5::bytea) AS f, $6::float8 * 2 AS g",
                    { 41, "héllo", true, nil, pq.bytea(bytes), 0.25, n = 6 }))
                assert.equal(1, rows.n)
                local r = rows[1]
                assert.equal("42", r.a)
                assert.equal("42", r[1])
                assert.equal("héllo", r.b)
                assert.equal("t", r.c)
                assert.is_nil(r.d)
                assert.equal(bytes, pg.unhex(r.e))
                assert.equal(tostring(#bytes), r.f)
                assert.equal("0.5", r.g)
                assert.same({ "a", "b", "c", "d", "e", "f", "g" }, rows.columns)
                local x = assert(db:exec("CREATE TEMP TABLE t (x int); INSERT INTO t VALUES "
                                         .. "(1), (2), (3); SELECT sum(x) AS s FROM t"))
                assert.equal("6", x[1].s)
                local ins = assert(db:query("INSERT INTO t VALUES ($1), ($2)", { 4, 5 }))
                assert.equal(2, ins.affected)
                db:close()
            end)
            assert.equal(0, pq.live())
        end)

        it("reports failures with a class and the SQLSTATE", function()
            run(function()
                local db = assert(pg.connect(cluster.conninfo))
                local rows, err, st, cls = db:query("SELECT * FROM no_such_table")
                assert.is_nil(rows)
                assert.equal("42P01", st)
                assert.equal("server", cls)
                assert.truthy(err:find("^Server: relation \"no_such_table\" does not exist"))
                -- the connection is still usable
                assert.equal("1", assert(db:query("SELECT 1 AS v"))[1].v)
                -- client-side timeout: the statement is canceled, the connection dropped
                rows, err, st, cls = db:query("SELECT pg_sleep(10)", nil, { timeout_ms = 50 })
                assert.is_nil(rows)
                assert.equal("timeout", cls)
                assert.truthy(err:find("^Timeout: "))
                assert.is_false(db:connected())
                -- the next query reconnects
                assert.equal("2", assert(db:query("SELECT 2 AS v"))[1].v)
                assert.equal(2, db.stats.connects)
                -- server-side statement_timeout: SQLSTATE 57014
                assert(db:exec("SET statement_timeout = 20"))
                rows, err, st, cls = db:query("SELECT pg_sleep(10)")
                assert.equal("57014", st)
                assert.equal("server", cls)
                -- nothing listens: network; misuse raises
                local down = pg.new { conninfo = "host=127.0.0.1 port=1 dbname=x user=y",
                                      backoff = fast_backoff() }
                rows, err, st, cls = down:query("SELECT 1")
                assert.is_nil(rows)
                assert.equal("network", cls)
                assert.truthy(err:find("^Network: "))
                assert.has_error(function() db:query(42) end)
                assert.has_error(function() db:query("SELECT $1", { {} }) end)
                db:close()
            end)
            assert.equal(0, pq.live())
        end)

        it("reconnects after the server ended the connection, with the backoff policy",
           function()
            run(function(task)
                local db = assert(pg.connect { conninfo = cluster.conninfo,
                                               backoff = fast_backoff() })
                local pid = assert(db:query("SELECT pg_backend_pid() AS p"))[1].p
                local killer = assert(pg.connect(cluster.conninfo))
                assert(killer:query("SELECT pg_terminate_backend($1)", { pid }))
                -- the idle connection notices (its socket is watched) ...
                assert.is_true(S.eventually(task, function() return not db:connected() end,
                                            5000))
                -- ... and the next query reconnects (a new backend)
                local pid2 = assert(db:query("SELECT pg_backend_pid() AS p"))[1].p
                assert.are_not.equal(pid, pid2)
                -- killed mid-query: a network failure, then a reconnect
                local done
                task.spawn("victim", function()
                    local rows, err, st, cls = db:query("SELECT pg_sleep(5)")
                    done = { rows, err, st, cls }
                end)
                assert.is_true(S.eventually(task, function()
                    local r = killer:query("SELECT count(*) AS n FROM pg_stat_activity "
                                           .. "WHERE pid = $1 AND state = 'active'", { pid2 })
                    return r and r[1].n == "1"
                end, 5000))
                assert(killer:query("SELECT pg_terminate_backend($1)", { pid2 }))
                assert.is_true(S.eventually(task, function() return done ~= nil end, 5000))
                assert.is_nil(done[1])
                assert.equal("network", done[4])
                assert.equal("3", assert(db:query("SELECT 3 AS v"))[1].v)
                db:close()
                killer:close()
            end)
            assert.equal(0, pq.live())
        end)

        it("a pool runs queries side by side; shutdown still delivers the answer in flight",
           function()
            local answers = {}
            run(function(task)
                local pool = pg.pool { conninfo = cluster.conninfo, size = 3 }
                local hs = {}
                for i = 1, 6 do
                    hs[i] = task.spawn("q-" .. i, function()
                        local r = assert(pool:query("SELECT pg_sleep(0.02), $1::int AS i", { i }))
                        return r[1].i
                    end)
                end
                for i = 1, 6 do
                    local ok, v = hs[i]:join()
                    assert(ok, v)
                    assert.equal(tostring(i), v)
                end
                assert.equal(3, pool:stats().connects) -- no more than size connections
                -- a query in flight when the shutdown token flips: "Canceled" never loses it
                local h = task.spawn("inflight", function()
                    answers[1] = { pool:query("SELECT pg_sleep(0.1), 'kept' AS v") }
                end)
                task.sleep(20)
                task.shutdown("spec")
                h:join()
                pool:close()
            end)
            assert.equal("kept", answers[1][1] and answers[1][1][1].v)
            assert.equal(0, pq.live())
        end)

        it("a pool hands a caller that runs one query at a time the connection it last used",
           function()
            -- issue 25: handed out in turn, one backend after the other did the work of a
            -- serial caller, each with cold caches (the server's CPU per ledger commit
            -- 1.7-1.9x that of one connection)
            local pids, side = {}, {}
            run(function(task)
                local pool = pg.pool { conninfo = cluster.conninfo, size = 4 }
                local function pid()
                    return assert(pool:query("SELECT pg_backend_pid() AS p"))[1].p
                end
                for i = 1, 8 do pids[i] = pid() end
                -- side by side it still uses every member, then a serial caller stays on one
                local hs = {}
                for i = 1, 4 do
                    hs[i] = task.spawn("q-" .. i, function()
                        return assert(pool:query("SELECT pg_sleep(0.02), pg_backend_pid() AS p"))[1].p
                    end)
                end
                for i = 1, 4 do
                    local ok, v = hs[i]:join()
                    assert(ok, v)
                    side[v] = true
                end
                for i = 9, 16 do pids[i] = pid() end
                assert.equal(4, pool:stats().connects)
                pool:close()
            end)
            for i = 2, 8 do assert.equal(pids[1], pids[i]) end
            for i = 10, 16 do assert.equal(pids[9], pids[i]) end
            -- a member waiting to reconnect is not the one handed out next: a serial caller
            -- whose connection broke goes on with another member
            local answers = {}
            run(function()
                local pool = pg.pool { conninfo = cluster.conninfo, size = 2 }
                assert(pool:query("SELECT 1 AS v"))
                local m = pool.idle[#pool.idle] -- the member just used, on top
                m.raw:close()
                m.raw, m.retry_at = nil, uv.now() + 60000
                m.last_err, m.last_class = "(the spec's broken connection)", "network"
                for i = 1, 3 do answers[i] = { pool:query("SELECT 2 AS v") } end
                pool:close()
            end)
            assert.is_nil(answers[1][1]) -- the broken member, once: reconnecting
            assert.equal("2", answers[2][1] and answers[2][1][1].v)
            assert.equal("2", answers[3][1] and answers[3][1][1].v)
            local n = 0
            for _ in pairs(side) do n = n + 1 end
            assert.equal(4, n)
            assert.equal(0, pq.live())
        end)

        it("a script that ends with a connection open, connecting or mid-query neither hangs "
           .. "nor crashes", function()
            local cases = {
                idle = { "^answer 42 idle\nEND idle\n$" },
                inflight = { "^answer late nil\nEND inflight\n$" },
                exit = { "^END exit\n$" },
                dropped = { "^answer still here nil\nlive 0\nEND dropped\n$" },
                closed = { "^status closed false [^\n]*closed\nanswer nil Closed: [^\n]* nil "
                           .. "closed closed\nlive 0\nEND closed\n$" },
                connecting = { "^answer nil Timeout: not connected within 100 ms nil timeout\n"
                               .. "END connecting\n$" },
                refused = { "^answer nil [^\n]*[Rr]efused[^\n]* nil network\nEND refused\n$" },
            }
            for name, c in pairs(cases) do
                -- `timeout` turns a hang into a failure (not a time measurement)
                local out, rc = S.run("timeout 30 " .. BIN .. " run " .. S.root
                                      .. "tests/pg/lifetime.lua " .. S.shell_quote(cluster.conninfo)
                                      .. " " .. name .. " 2>/dev/null")
                assert.equal(0, rc, name .. ": " .. out)
                assert.truthy(out:find(c[1]), name .. ": " .. out)
            end
        end)
    end)

    describe("the contract, enforced by the database", function()
        it("answers ok, dup, conflict and gap (G-3: replays store one row)", function()
            local schema = fresh_schema()
            local a = chain(6)           -- the chain
            local f = chain(3, 100)      -- a fork of the same stream (other counts)
            local stored
            run(function()
                local e = postgres.new { conninfo = cluster.conninfo, schema = schema }
                assert.is_nil(e:head(TA, "bytes"))              -- nothing stored yet
                assert.equal("ok", e:put(a[1]))
                for _ = 1, 5 do assert.equal("dup", e:put(a[1])) end  -- G-3
                assert.equal("gap", (e:put(a[3])))
                assert.equal("ok", e:put(a[2]))
                assert.equal("conflict", (e:put(f[1])))         -- same seq, other b3
                assert.equal("conflict", (e:put(f[3])))         -- seq = head + 1, other prev_b3
                assert.equal("ok", e:put(a[3]))
                assert.equal("dup", e:put(a[2]))
                assert.equal("gap", (e:put(a[6])))                -- seq > head + 1
                local st, detail = e:put(f[2])
                assert.equal("conflict", st)
                assert.truthy(detail:find("seq 2: conflict", 1, true))
                -- a new stream must start at seq 1 with a zero prev_b3
                assert.equal("gap", (e:put(chain(2, 0, TB)[2])))
                local h = e:head(TA, "bytes")
                assert.same({ seq = 3, b3 = a[3].b3 }, h)
                assert.is_nil(e:head(TB, "bytes"))              -- refused puts store nothing
                -- every stream's head, for a node that lost its own (daemon: seed_head)
                assert.same({ { tenant = TA, dimension = "bytes", seq = 3, b3 = a[3].b3 } },
                            e:list_heads())
                local s = e:stats()
                assert.equal(3, s.ok)
                assert.equal(6, s.dup)
                assert.equal(3, s.conflict)
                assert.equal(3, s.gap)
                local db = assert(pg.connect(cluster.conninfo))
                stored = assert(db:query('SELECT seq, body, encode(b3, \'hex\') AS b3 FROM "'
                                         .. schema .. '".slices ORDER BY seq'))
                db:close()
                e:close()
            end)
            assert.equal(3, stored.n)
            for i = 1, 3 do
                local bytes = pg.unhex(stored[i].body)
                assert.equal(a[i]:encode(), bytes)        -- the canonical bytes
                assert.equal(a[i].b3, stored[i].b3)
                assert.equal(a[i].b3, S.b3sum(bytes))     -- the oracle
            end
            local rc, out = verify(schema)
            assert.equal(0, rc, out)
            assert.truthy(out:find("\nOK\n$"), out)
            assert.equal(0, pq.live())
        end)

        -- ron_put decides in SQL (one round trip, under the head row's lock); the rule must
        -- stay chain.admit's (ron.accounting.export.chain, the twin of host/cli/chain.c).
        -- A random walk over one stream (fixed seed, printed) puts candidates near the head
        -- (seq head-2 .. head+2; prev_b3 and b3 drawn from the stored b3s, zero and fresh
        -- ones) straight through ron_put and compares each answer with the Lua rule's.
        it("ron_put answers what chain.admit decides (the SQL rule is the Lua rule)", function()
            local chainrule = require("ron.accounting.export.chain")
            local schema, seed = fresh_schema(), 26
            print("chain-rule walk: seed " .. seed)
            math.randomseed(seed)
            local function rb3() -- a fresh raw b3
                local t = {}
                for i = 1, 32 do t[i] = string.char(math.random(0, 255)) end
                return table.concat(t)
            end
            local function hexs(b)
                return (b:gsub(".", function(c) return ("%02x"):format(c:byte()) end))
            end
            run(function()
                local e = postgres.new { conninfo = cluster.conninfo, schema = schema }
                assert(e:ensure_schema())
                local stored, head_seq, head_b3 = {}, 0, chainrule.ZERO
                local seen = {}
                for step = 1, 400 do
                    local pool = { chainrule.ZERO, head_b3, rb3(), stored[head_seq - 1] or rb3() }
                    local seq = math.max(1, head_seq + math.random(-2, 2))
                    local prev = math.random(2) == 1 and head_b3 or pool[math.random(#pool)]
                    local b3 = (math.random(3) == 1 and stored[seq]) or pool[math.random(#pool)]
                    local want = chainrule.admit(head_seq, head_b3, seq, prev, b3)
                    if want == "below" then want = chainrule.stored(seq, stored[seq], b3) end
                    local rows = assert(e.pool:query(e.put_sql, {
                        TA, "bytes", tostring(seq), "0", "60", hexs(b3), hexs(prev),
                        pg.bytea(b3) }))
                    local got = rows[1].status
                    assert.equal(want, got,
                                 ("step %d: head %d, seq %d"):format(step, head_seq, seq))
                    seen[got] = (seen[got] or 0) + 1
                    if got == "ok" then stored[seq], head_seq, head_b3 = b3, seq, b3 end
                end
                for _, v in ipairs { "ok", "dup", "conflict", "gap" } do
                    assert.truthy((seen[v] or 0) > 10, v .. " seldom drawn")
                end
                e:close()
            end)
        end)

        it("put_many: a batch of several streams in one round trip answers what put would,"
           .. " per slice, in the order given", function()
            local schema = fresh_schema()
            local a = chain(4)                -- TA/bytes seq 1..4
            local b = chain(3, 50, TB)        -- TB/bytes seq 1..3
            local f = chain(2, 100)           -- a fork of TA/bytes
            run(function()
                local e = postgres.new { conninfo = cluster.conninfo, schema = schema }
                -- scrambled: the exporter orders the batch per stream by seq itself
                local res = assert(e:put_many { b[2], a[2], a[1], b[1], a[1], f[2] })
                assert.same({ "ok" }, res[1])
                assert.same({ "ok" }, res[2])
                assert.same({ "ok" }, res[3])
                assert.same({ "ok" }, res[4])
                assert.same({ "dup" }, res[5])
                assert.equal("conflict", res[6][1]) -- seq 2 is stored with another b3
                res = assert(e:put_many { a[4], b[3], a[3] })
                assert.same({ { "ok" }, { "ok" }, { "ok" } }, res)
                res = assert(e:put_many { chain(2, 0, S.TENANT_C)[2] })
                assert.equal("gap", res[1][1])
                assert.same({ seq = 4, b3 = a[4].b3 }, e:head(TA, "bytes"))
                assert.same({ seq = 3, b3 = b[3].b3 }, e:head(TB, "bytes"))
                assert.same({}, assert(e:put_many {}))
                e:close()
            end)
            local rc, out = verify(schema)
            assert.equal(0, rc, out)
        end)

        it("accept_loss (issue 14 item 1): the missing seqs recorded as given up, the next "
           .. "slice ok; verify lists the range and checks the rows", function()
            local schema = fresh_schema()
            local a = chain(5)
            local r1, r2, r3
            run(function()
                local e = postgres.new { conninfo = cluster.conninfo, schema = schema }
                assert.equal("ok", e:put(a[1]))
                assert.equal("gap", (e:put(a[4])))              -- seqs 2, 3 never arrive
                r1 = { e:accept_loss { tenant = TA, dimension = "bytes", through_seq = 1,
                                       link_b3 = a[2].prev_b3 } }
                r2 = { e:accept_loss { tenant = TA, dimension = "bytes", through_seq = 3,
                                       link_b3 = a[4].prev_b3, reason = "segment lost",
                                       now_s = 1767225600 } }
                assert.same({ seq = 3, b3 = a[4].prev_b3 }, e:head(TA, "bytes"))
                assert.equal("ok", e:put(a[4]))
                assert.equal("ok", e:put(a[5]))
                assert.equal("conflict", (e:put(a[2])))         -- the loss stands
                r3 = { e:accept_loss { tenant = TA, dimension = "bytes", through_seq = 2,
                                       link_b3 = a[3].prev_b3 } }
                e:close()
            end)
            assert.is_nil(r1[1])
            assert.truthy(r1[2]:find("nothing is missing", 1, true), r1[2])
            assert.same({ from = 2, to = 3 }, r2[1])
            assert.is_nil(r3[1])
            local rc, out = verify(schema)
            assert.equal(0, rc, out)
            assert.truthy(out:find("LOSS ACCEPTED [^\n]*: seqs 2%.%.3 given up by the operator "
                                   .. "at 1767225600 UTC s: segment lost"), out)
            assert.truthy(out:find("accepted losses 2 seqs", 1, true), out)
            -- a loss row whose bytes were changed is caught
            local out2, prc = cluster:psql('UPDATE "' .. schema .. '".slices SET body = '
                .. "set_byte(body, 130, 0) WHERE seq = 3")
            assert.equal(0, prc, out2)
            local vrc, vout = verify(schema)
            assert.equal(1, vrc, vout)
            assert.truthy(vout:find("an accepted-loss row that does not decode", 1, true), vout)
        end)

        it("verify finds a tampered slice and a broken chain", function()
            local schema = fresh_schema()
            local a = chain(3)
            run(function()
                local e = postgres.new { conninfo = cluster.conninfo, schema = schema }
                for i = 1, 3 do assert.equal("ok", e:put(a[i])) end
                e:close()
            end)
            assert.equal(0, (verify(schema)))
            local S_ = '"' .. schema .. '"'
            -- flip a byte of seq 2's stored bytes
            local out, rc = cluster:psql("UPDATE " .. S_ .. ".slices SET body = "
                .. "set_byte(body, 10, (get_byte(body, 10) + 1) % 256) WHERE seq = 2")
            assert.equal(0, rc, out)
            local vrc, vout = verify(schema)
            assert.equal(1, vrc, vout)
            assert.truthy(vout:find("CORRUPT [^\n]*seq 2: BLAKE3 of the stored bytes"), vout)
            assert.truthy(vout:find("\nFAILED: ", 1, true), vout)
            -- an unknown schema: exit 2
            assert.equal(2, (verify("no_such_schema")))
        end)

        it("times out: client timer and statement_timeout answer retry_timeout, "
           .. "never a second copy", function()
            local schema = fresh_schema()
            local a = chain(3)
            run(function(task)
                -- the schema and seq 1 through an exporter with the default timeout: on a
                -- loaded machine the DDL alone may take longer than 100 ms
                local eg = postgres.new { conninfo = cluster.conninfo, schema = schema,
                                          connections = 1 }
                assert.equal("ok", eg:put(a[1]))
                local e = postgres.new { conninfo = cluster.conninfo, schema = schema,
                                         connections = 1, query_timeout_ms = 100 }
                -- another session holds the stream's head row: the put waits for the lock
                local locker = assert(pg.connect(cluster.conninfo))
                assert(locker:exec('BEGIN; SELECT 1 FROM "' .. schema .. '".heads FOR UPDATE'))
                local st = e:put(a[2])
                assert.equal("retry_timeout", st)
                -- server-side: statement_timeout cancels the statement (SQLSTATE 57014)
                local e2 = postgres.new {
                    conninfo = cluster.conninfo .. " options='-c statement_timeout=50'",
                    schema = schema, connections = 1 }
                assert.equal("retry_timeout", (e2:put(a[2])))
                assert(locker:exec("COMMIT"))
                -- the canceled statements are gone from the server
                assert.is_true(S.eventually(task, function()
                    local r = locker:query("SELECT count(*) AS n FROM pg_stat_activity WHERE "
                        .. "query LIKE '%ron_put%' AND state = 'active' AND pid <> "
                        .. "pg_backend_pid()")
                    return r and r[1].n == "0"
                end, 5000))
                local again = eg:put(a[2])
                assert.is_true(again == "ok" or again == "dup", again)
                assert.equal("dup", eg:put(a[2]))
                assert.equal("ok", eg:put(a[3]))
                locker:close()
                e:close()
                e2:close()
                eg:close()
            end)
            assert.equal(0, (verify(schema)))
        end)
    end)

    describe("G-16 against PostgreSQL: two exporter processes race on the same streams",
             function()
        -- Starts two race-child processes together; returns their outputs.
        local function race(variant, schema, tenants, windows)
            local sync = S.tmpname(".sync")
            assert(os.execute("mkdir " .. S.shell_quote(sync)) == 0)
            local child = BIN .. " run " .. S.root .. "tests/pg/race-child.lua "
                          .. S.shell_quote(cluster.conninfo) .. " " .. schema .. " " .. variant
            local script = table.concat({
                child .. " 1 " .. sync .. " " .. tenants .. " " .. windows .. " > " .. sync
                    .. "/out1 & p1=$!",
                child .. " 2 " .. sync .. " " .. tenants .. " " .. windows .. " > " .. sync
                    .. "/out2 & p2=$!",
                "n=0; while [ ! -f " .. sync .. "/ready.1 ] || [ ! -f " .. sync .. "/ready.2 ]; do",
                "  n=$((n+1)); [ $n -gt 3000 ] && break; sleep 0.01; done",
                "touch " .. sync .. "/go",
                "wait $p1; r1=$?; wait $p2; r2=$?; echo \"rc=$r1,$r2\"",
            }, "\n")
            local out, rc = S.run(script)
            assert.equal(0, rc, out)
            assert.truthy(out:find("rc=0,0", 1, true), out)
            local o1, o2 = S.read_file(sync .. "/out1"), S.read_file(sync .. "/out2")
            os.execute("rm -rf " .. S.shell_quote(sync))
            return o1, o2
        end

        local function parse(out)
            local r = { slices = {}, streams = {}, total = {} }
            for k, seq, b3 in out:gmatch("SLICE (%S+) (%d+) (%x+)") do
                r.slices[k] = r.slices[k] or {}
                r.slices[k][tonumber(seq)] = b3
            end
            for k, ok, dup, conflict, gap, outcome in
                out:gmatch("STREAM (%S+) (%d+) (%d+) (%d+) (%d+) (%a+)") do
                r.streams[k] = { ok = tonumber(ok), dup = tonumber(dup),
                                 conflict = tonumber(conflict), gap = tonumber(gap),
                                 outcome = outcome }
            end
            for k, v in out:gmatch("(%a+)=(%d+)") do r.total[k] = tonumber(v) end
            return r
        end

        local function stored_chains(schema)
            local out, rc = cluster:psql("SELECT tenant || '/' || dimension, seq, "
                .. "encode(b3, 'hex') FROM \"" .. schema .. "\".slices ORDER BY 1, 2")
            assert.equal(0, rc, out)
            local chains = {}
            for k, seq, b3 in out:gmatch("([^|\n]+)|(%d+)|(%x+)") do
                chains[k] = chains[k] or {}
                chains[k][tonumber(seq)] = b3
            end
            return chains
        end

        -- The two processes race in mode over a fresh schema. -> schema, what each saw
        local function raced(mode, tenants, windows)
            local schema = fresh_schema()
            local o1, o2 = race(mode, schema, tenants, windows)
            return schema, parse(o1), parse(o2)
        end

        it("same slices: exactly one ordered chain, the loser sees dup, nothing lost",
           function()
            local TEN, WIN = 3, 20
            local schema, r1, r2 = raced("same", TEN, WIN)
            local n = TEN * 2 * WIN
            -- both sealed the very same slices (G-2)
            assert.same(r1.slices, r2.slices)
            -- every slice stored once: the oks of both add up to n, the rest are dups
            assert.equal(n, r1.total.ok + r2.total.ok)
            assert.equal(n, r1.total.dup + r2.total.dup)
            assert.equal(0, r1.total.conflict + r2.total.conflict + r1.total.gap + r2.total.gap)
            print(("G-16 same: process 1 ok=%d dup=%d, process 2 ok=%d dup=%d"):format(
                r1.total.ok, r1.total.dup, r2.total.ok, r2.total.dup))
            assert.same(r1.slices, stored_chains(schema))
            local rc, out = verify(schema)
            assert.equal(0, rc, out)
        end)

        it("forked producers: one chain per stream wins whole, the loser sees conflict",
           function()
            local TEN, WIN = 3, 10
            local schema, r1, r2 = raced("fork", TEN, WIN)
            local chains = stored_chains(schema)
            local streams = 0
            for k, s1 in pairs(r1.streams) do
                streams = streams + 1
                local s2 = r2.streams[k]
                -- exactly one of the two finished the stream; the other hit a conflict
                local winner = s1.outcome == "done" and r1 or r2
                local loser = winner == r1 and s2 or s1
                assert.equal("conflict", loser.outcome, k)
                assert.equal(1, loser.conflict, k)
                assert.equal("done", (winner == r1 and s1 or s2).outcome, k)
                -- the stored chain is entirely the winner's
                assert.same(winner.slices[k], chains[k], k)
                -- the two producers really differ
                assert.are_not.equal(r1.slices[k][1], r2.slices[k][1])
            end
            assert.equal(TEN * 2, streams)
            local rc, out = verify(schema)
            assert.equal(0, rc, out)
        end)
    end)

    describe("the export runtime into PostgreSQL", function()
        local function setup_rt(schema)
            local clock = S.clock(T0 + 5)
            local m = assert(acct.open(S.cfg { clock = clock.fn,
                                               wal = { dir = S.tmpname(".wal") } }))
            local e = postgres.new { conninfo = cluster.conninfo, schema = schema,
                                     connections = 2, backoff = fast_backoff(),
                                     connect_timeout_ms = 1000, query_timeout_ms = 2000 }
            return clock, m, e
        end

        it("G-10 style: records -> seal -> WAL -> PostgreSQL; verify and totals", function()
            local schema = fresh_schema()
            local clock, m, e = setup_rt(schema)
            local rt
            run(function(task)
                rt = runtime.start { meter = m, exporter = e, tick_ms = 5,
                                     backoff = fast_backoff() }
                for w = 1, 5 do
                    S.rt_window(m, clock, w)
                    assert.is_true(S.eventually(task, function()
                        return rt.exports.ok == 3 * w and #m:pending() == 0 end, 10000))
                end
                for _, t in ipairs { S.TENANT_A, S.TENANT_B, S.TENANT_C } do
                    assert.equal(5, e:head(t, "bytes").seq)
                end
                S.rt_stop(rt)
                e:close()
            end)
            assert.equal(15, rt.exports.ok)
            m:close()
            local rc, out = verify(schema, "--totals")
            assert.equal(0, rc, out)
            -- window w records w for every tenant: 1 + 2 + ... + 5
            assert.truthy(out:find("total " .. S.TENANT_A .. "/bytes 15 (5 slices)", 1, true), out)
            assert.equal(0, pq.live())
        end)

        it("PostgreSQL stopped mid-run: retry_*, the backlog grows, readiness flips (C-6), "
           .. "everything drains after the restart, ready again, no gap, no duplicate; "
           .. "head() afterwards", function()
            local schema = fresh_schema()
            local clock, m, e = setup_rt(schema)
            local rt, peak, last = nil, 0, {}
            local flipped, degraded_seen = false, false
            run(function(task)
                -- readiness on a small scale: not ready once the backlog passes 10 (only
                -- after the last window below is sealed), degraded after 100 ms of that
                rt = runtime.start { meter = m, exporter = e, tick_ms = 5,
                                     backoff = fast_backoff(), op_budget_ms = 300,
                                     ready_backlog_p95 = 10, degrade_after_ms = 100,
                                     health_interval_ms = 10, ready_samples = 16 }
                for w = 1, 2 do
                    S.rt_window(m, clock, w)
                    assert.is_true(S.eventually(task, function()
                        return rt.exports.ok == 3 * w and #m:pending() == 0 end, 10000))
                end
                assert.equal(0, spawn_wait(task, cluster:argv("stop-server")))
                for w = 3, 6 do -- sealed one window at a time, while the database is down
                    S.rt_window(m, clock, w)
                    assert.is_true(S.eventually(task, function()
                        return #m:pending() == 3 * (w - 2) end, 10000))
                end
                assert.is_true(S.eventually(task, function()
                    peak = math.max(peak, #m:pending())
                    return #m:pending() == 12 and rt.exports.retry_network
                        + rt.exports.retry_remote_5xx > 0
                end, 10000))
                for _, s in ipairs(m:pending()) do
                    if s.id.seq == 6 then last[s.tenant] = s.b3 end
                end
                assert.is_true(S.eventually(task, function()
                    local ready, reasons = rt:ready()
                    if not ready and table.concat(reasons, ";"):find("backlog p95", 1, true)
                    then flipped = true end
                    degraded_seen = degraded_seen or m:degraded()
                    return flipped and degraded_seen
                end, 10000), "readiness did not flip during the outage")
                assert.equal(0, spawn_wait(task, cluster:argv("start-server")))
                assert.is_true(S.eventually(task, function()
                    return #m:pending() == 0 end, 20000))
                assert.is_true(S.eventually(task, function()
                    return rt:ready() and not m:degraded() end, 10000),
                    "not ready again after the drain")
                rt:stop()
                rt:wait()
                e:close()
                -- a restarted (amnesia) node asks the database where its chains are
                local e2 = postgres.new { conninfo = cluster.conninfo, schema = schema }
                for _, t in ipairs { S.TENANT_A, S.TENANT_B, S.TENANT_C } do
                    assert.same({ seq = 6, b3 = last[t] }, e2:head(t, "bytes"))
                end
                e2:close()
            end)
            print(("outage: backlog peak %d; exports ok=%d dup=%d retry_network=%d "
                   .. "retry_remote_5xx=%d retry_timeout=%d fail=%d"):format(peak,
                   rt.exports.ok, rt.exports.dup, rt.exports.retry_network,
                   rt.exports.retry_remote_5xx, rt.exports.retry_timeout, rt.exports.fail))
            assert.equal(12, peak)
            assert.equal(18, rt.exports.ok + rt.exports.dup)
            assert.is_true(rt.exports.retry_network + rt.exports.retry_remote_5xx > 0)
            m:close()
            -- no gap, no duplicate: 6 rows per stream, seq 1..6 (the primary key forbids a
            -- second copy; verify checks the chain)
            local out, rc = cluster:psql("SELECT count(*), count(DISTINCT (tenant, dimension, seq)),"
                .. " max(seq) FROM \"" .. schema .. "\".slices")
            assert.equal(0, rc, out)
            assert.equal("18|18|6", (out:gsub("%s+$", "")))
            local vrc, vout = verify(schema)
            assert.equal(0, vrc, vout)
            assert.equal(0, pq.live())
        end)
    end)
end)

-- The harness's option for benchmarks that time commits (bench-wallet): a fresh cluster
-- zero-fills every WAL segment in the path of the commit that crosses into it.
describe("tests/pg/pg-harness.sh --wal-init-zero", function()
    local function show(c)
        local out, rc = c:psql("SHOW wal_init_zero")
        assert.equal(0, rc, out)
        return (out:gsub("%s+$", ""))
    end

    it("starts a server without zero-filled segments, keeps it across a restart", function()
        local c = assert(H.start { wal_init_zero = false })
        local ok, err = pcall(function()
            assert.equal("off", show(c))
            c:stop_server()
            c:start_server()
            assert.equal("off", show(c))
        end)
        c:stop()
        assert(ok, err)
        local d = assert(H.start())
        local v = show(d)
        d:stop()
        assert.equal("on", v) -- PostgreSQL's own default otherwise
    end)

    it("refuses a value other than on or off", function()
        local out, rc = S.run("sh " .. S.shell_quote(H.script) .. " start --wal-init-zero maybe")
        assert.are_not.equal(0, rc)
        assert.truthy(out:find("--wal-init-zero on|off", 1, true), out)
    end)
end)
