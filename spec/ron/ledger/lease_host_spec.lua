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
end)
