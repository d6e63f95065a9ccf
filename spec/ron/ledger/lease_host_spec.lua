-- Node leases on a real PostgreSQL (LED-71, lua/ron/ledger/lease.lua), inside the host (ctest
-- lua-ledger-lease-pg-host): the fence's server side. A transaction that checked node x's
-- epoch (rl_lease_held: x's advisory lock shared) and has not committed yet holds back a
-- survivor's takeover of x (rl_lease_take: the lock exclusive), which then commits; from
-- then on x's epoch counts 0 for every check, x's leased engine writes nothing (Fenced), and
-- fence_node ends x's backends (a statement of x still running) and none of the survivor's.
-- Under plain busted (no host) it is pending.
local S = require("support")

if not S.needs_host("leases on PostgreSQL", "lua-ledger-lease-pg-host") then return end

local uv = require("luv")
local task = require("ron.base.task")
local pgnet = require("ron.base.net.postgres")
local L = require("ron.ledger.ledger")
local lease = require("ron.ledger.lease")

local LF = dofile(S.root .. "spec/ron/ledger/lease_fixture.lua")

local in_task = S.in_task

local function bool(rows) return rows[1][1] == "t" end

S.describe_pg("leases on a real PostgreSQL (LED-71)", function(pg)

    it("a takeover waits for a phase in flight, then fences the old epoch", function()
        in_task(function()
            local function open(node)
                return assert(S.pg_store(pg, { schema = "lease_a", connections = 2, node = node }))
            end
            local sx, ss = open("x"), open("s")
            assert.equal(1, sx:lease_acquire("x", 60000))
            assert.equal(1, ss:lease_acquire("s", 60000))
            -- a phase of x in flight: its check made, its commit not yet
            local a = assert(pgnet.connect(pg.cluster.conninfo))
            assert(a:exec("BEGIN"))
            assert.is_true(bool(assert(a:query(
                "SELECT lease_a.rl_lease_held('\\x78'::bytea, 1)"))))
            -- x stops renewing: expired
            assert.equal(1, sx:lease_renew("x", 1, "x", -1000))
            local row = ss:list_leases()[2]
            assert.equal("x", row.node)
            local done
            local t = task.spawn("takeover", function()
                done = { ss:lease_takeover("x", 1, row.expires_ms, "s", 60000) }
            end)
            task.sleep(400)
            assert.is_nil(done) -- waits for x's phase
            assert(a:exec("COMMIT"))
            assert(t:join(5000))
            assert.same({ 1 }, done)
            -- the old epoch is fenced for every later check
            assert(a:exec("BEGIN"))
            assert.is_false(bool(assert(a:query(
                "SELECT lease_a.rl_lease_held('\\x78'::bytea, 1)"))))
            assert(a:exec("COMMIT"))
            assert.equal(0, sx:check_lease("x", 1))
            -- x's leased engine: a write is refused by the store, nothing applied
            local led = L.new { store = sx, book = "main", node = "x" }
            led.lease = lease.new { store = sx, node = "x", sleep = task.sleep, clock = uv.now }
            led.lease.epoch = 1
            local r, err = led:create_account { id = ("q"):rep(16) }
            assert.is_nil(r)
            assert.truthy(tostring(err):find("Fenced", 1, true), err)
            assert.is_nil(sx:get_account(("q"):rep(16)))
            -- x cannot take its row back while s owns it; s frees it, then x can
            assert.equal(0, sx:lease_acquire("x", 60000))
            assert.equal(1, ss:lease_release("x", 2, "s"))
            assert.equal(3, sx:lease_acquire("x", 60000))
            a:close()
            sx:close()
            ss:close()
        end)
    end)

    it("fence_node ends a node's statements, not another node's", function()
        in_task(function()
            local function open(node)
                return assert(S.pg_store(pg, { schema = "lease_b", connections = 1, node = node,
                                               query_timeout_ms = 20000 }))
            end
            local sx, sy, ss = open("x"), open("y"), open("s")
            local res = {}
            local function sleeper(st, k)
                return task.spawn("sleeper-" .. k, function()
                    res[k] = { st.drv.db:query("SELECT pg_sleep(10)") }
                end)
            end
            local hx, hy = sleeper(sx, "x"), sleeper(sy, "y")
            task.sleep(300)
            local n = assert(ss:fence_node("x"))
            assert.equal(1, n)
            assert(hx:join(5000))
            assert.is_nil(res.x[1]) -- ended
            assert.is_nil(res.y) -- y's still running
            assert.equal(1, assert(ss:fence_node("y")))
            assert(hy:join(5000))
            assert.has_error(function() ss:fence_node("s") end) -- not its own
            sx:close()
            sy:close()
            ss:close()
        end)
    end)
    -- issue 29 item 4 (spec/ron/ledger/recover_peer_spec.lua on memory and SQLite): x dies
    -- with a member of its group handed back (A's posting reserved by y's saga in flight);
    -- s recovers x while y still holds A; the member's record becomes s's (before: it stayed
    -- x's, the row was freed, and s answered "intent in flight" for good), s's next scan
    -- decides it once y is done, and x back replays the same outcome.
    it("a dead node's member still racing when recovered: the survivor's, decided", function()
        in_task(function()
            local USD = LF.USD
            local EXT, A, B = ("e"):rep(16), ("a"):rep(16), ("b"):rep(16)
            local function open(node)
                return assert(S.pg_store(pg, { schema = "lease_c", connections = 2,
                                               node = node }))
            end
            local function engine(st, node, ttl)
                return LF.leased(st, node, { ttl_ms = ttl, renew_ms = 50, sleep = task.sleep,
                                             clock = uv.now })
            end
            local req = LF.req
            local sx, ss, sy = open("x"), open("s"), open("y")
            local x, lx = engine(sx, "x", 60000)
            local s, ls = engine(ss, "s", 60000)
            assert(s:create_account { id = EXT, policy = "uncapped" })
            assert(s:create_account { id = A })
            assert(s:create_account { id = B })
            assert(s:commit(req("fund-a", EXT, A, 100)))
            assert(s:commit(req("fund-b", EXT, B, 100)))
            -- y's saga stops right after reserving A's only posting
            local gate = { closed = false, armed = true }
            local gy = setmetatable({}, { __index = function(_, k)
                local f = sy[k]
                if type(f) ~= "function" then return f end
                return function(_, ...)
                    while gate.closed do task.sleep(5) end
                    local r = { f(sy, ...) }
                    if k == "apply" and gate.armed then
                        for _, op in ipairs((...)) do
                            if op[1] == "reserve_postings" then
                                gate.armed, gate.closed = false, true
                            end
                        end
                    end
                    return unpack(r, 1, table.maxn(r))
                end
            end })
            local y = L.new { store = gy, book = "main", node = "y", nonce = "y", one_tx = false }
            local yr = {}
            local hy = task.spawn("y", function() yr = { y:commit(req("y-1", A, B, 30)) } end)
            assert(S.eventually(task, function() return gate.closed end, 10000))
            -- x's group: B's member commits, A's is handed back; x dies before driving it
            local pay1 = req("pay-1", A, B, 10)
            local res = x:commit_many({ req("pay-b", B, A, 1), pay1 }, { hand_back = true })
            assert.is_table(res[1][1], res[1][2])
            assert.is_table(res[2].handed, res[2][2])
            assert.equal(1, sx:lease_renew("x", lx.epoch, "x", -1000)) -- x stops renewing
            ls:scan(s)
            task.sleep(100)
            local rep = ls:scan(s)
            assert.same({ "x", 1 }, { rep[1] and rep[1].node, rep[1] and rep[1].sagas })
            assert.is_nil(ss:get_intent("pay-1"))
            assert.same({}, ss:list_pending_sagas("x"))
            assert.equal(1, #ss:list_pending_sagas("s"))
            -- y goes on; s's next scan decides the member
            gate.closed = false
            assert(hy:join(10000))
            assert.is_table(yr[1], yr[2])
            local rep2 = ls:scan(s)
            assert.is_true(rep2.idle and rep2.idle[1].ok)
            -- x back (a new process: a new store and engine) and s answer alike
            local sx2 = open("x")
            local x2 = engine(sx2, "x", 60000)
            assert.same({}, x2:recover())
            local r1, r2 = s:commit(pay1), x2:commit(pay1)
            assert.is_table(r1)
            assert.is_table(r2)
            assert.same({ r1.transfer_id, r1.event_seq, true },
                        { r2.transfer_id, r2.event_seq, r2.replayed })
            assert.same({}, ss:list_pending_sagas())
            assert.equal(100 - 30 + 1 - 10, s:balance(A, USD))
            assert.equal(100 + 30 - 1 + 10, s:balance(B, USD))
            for _, st in ipairs { sx, ss, sy, sx2 } do st:close() end
        end)
    end)
end)
