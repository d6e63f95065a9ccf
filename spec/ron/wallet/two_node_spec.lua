-- Two wallet services over one ledger store (issue 29 item 4, the answer-cache half; ctest
-- lua-wallet-host): nodes wallet-1 and wallet-2, each with its own store handle, engine,
-- answer cache and HTTP server, on one SQLite file, and on one PostgreSQL schema when the
-- harness has a server (tests/pg/harness.lua). The fleet test with two daemons is
-- tests/host's; here the race is made deterministic: node 1's store stops right after its
-- engine claimed the nonce's intent (the saga in flight), node 2 gets the same key, or the
-- same nonce under another key, and answers 409 in_flight. Once node 1's commit is stored,
-- node 2 must answer the stored outcome, byte-identical to node 1's: the 201 (replayed) for
-- the same key, nonce_used for the other key. Before the fix node 2 cached its 409 and
-- answered it for ever (marked Idempotent-Replayed). Then 20 keys sent to both nodes at
-- once: after settling, each key has one transfer and one answer on both nodes.
local S = require("support")

if not S.needs_host("ron.wallet two nodes", "lua-wallet-host") then return end

local cjson = require("cjson.safe")
local store_mod = require("ron.ledger.store")
local F = dofile(S.root .. "spec/ron/wallet/fixture.lua")

local OP, TA, TB, A, B = F.OP, F.TA, F.TB, F.A, F.B
local post, get = S.http_post, S.http_get
local transfer, issue = F.transfer, F.issue
local CLAIM = string.rep("\255", 8) -- the engine's claim keys start with 256 of these

local function find(body, s) return body:find(s, 1, true) ~= nil end

-- Sends until the answer is not a passing one (409 in_flight, 503), at most ms.
local function settle(task, port, token, body, key, path)
    local st, h, b
    assert(S.eventually(task, function()
        st, h, b = post(task, port, path or "/v1/transfer", token, body, key)
        return not (st == 503 or (st == 409 and find(b, '"code":"in_flight"')))
    end, 5000), "still in flight: " .. tostring(b))
    return st, h, b
end

-- Both nodes on stores from open_store() (one per node): node 1's store behind a gate.
local function two_nodes(task, open_store)
    local gate = { closed = false }
    local n1 = F.open(task, open_store, { commit_timeout_ms = 20000, stall_ms = 60000 }, gate,
                      { node = "wallet-1" })
    local n2 = F.open(task, open_store, {}, nil, { node = "wallet-2" })
    F.setup_accounts(task, n1.port)
    local st, _, body = post(task, n1.port, "/v1/issue", OP, issue(A, 100000, 1), "i1")
    assert.equal(201, st, body)
    return n1, n2, gate
end

-- Node 1 takes `body` under `key` and stops right after claiming the nonce (or after the
-- store call trip names); returns a join() that gives node 1's answer once the gate opens.
local function hold_on_node1(task, n1, gate, body, key, trip)
    gate.trip = trip or function(name, k) return name == "put_intent" and k:sub(1, 8) == CLAIM end
    local res = {}
    local h = task.spawn("node1_client", function()
        res.st, res.h, res.body = post(task, n1.port, "/v1/transfer", TA, body, key)
        return true
    end)
    assert(S.eventually(task, function() return gate.closed end, 5000), "node 1 never claimed")
    return function()
        gate.closed = false
        assert(h:join(20000))
        return res
    end
end

local function cases(open_store)
    -- F.run(body(task, n1, n2, gate)) on two nodes (two_nodes)
    local function on_two_nodes(body)
        F.run(function(task) body(task, two_nodes(task, open_store)) end)
    end

    it("the same key on both nodes: the loser answers the stored 201, not a stuck 409",
       function()
        on_two_nodes(function(task, n1, n2, gate)
            local body = transfer(A, B, 7, 30)
            local join = hold_on_node1(task, n1, gate, body, "K")
            local st, _, b = post(task, n2.port, "/v1/transfer", TA, body, "K")
            assert.equal(409, st, b)
            assert.truthy(find(b, '"code":"in_flight"'), b)
            local r1 = join()
            assert.equal(201, r1.st, r1.body)
            local h
            st, h, b = settle(task, n2.port, TA, body, "K")
            assert.equal(201, st, b)
            assert.equal(r1.body, b)
            assert.equal("true", h["idempotent-replayed"])
            -- again (now from node 2's cache), and node 1 (its cache): the same bytes
            st, _, b = post(task, n2.port, "/v1/transfer", TA, body, "K")
            assert.equal(r1.body, b)
            st, _, b = post(task, n1.port, "/v1/transfer", TA, body, "K")
            assert.equal(r1.body, b)
            local bs = cjson.decode((select(3, get(task, n2.port, "/v1/accounts/" .. B ..
                                        "/balance?asset=USD&min_seq=" ..
                                        cjson.decode(r1.body).event_seq, TB))))
            assert.equal(7, bs.balance)
        end)
    end)

    it("the same nonce under another key on the other node: nonce_used, not a stuck 409",
       function()
        on_two_nodes(function(task, n1, n2, gate)
            local join = hold_on_node1(task, n1, gate, transfer(A, B, 5, 31), "K4")
            local other = transfer(A, B, 6, 31)
            local st, _, b = post(task, n2.port, "/v1/transfer", TA, other, "K5")
            assert.equal(409, st, b)
            assert.truthy(find(b, '"code":"in_flight"'), b)
            local r1 = join()
            assert.equal(201, r1.st, r1.body)
            st, _, b = settle(task, n2.port, TA, other, "K5")
            assert.equal(409, st, b)
            assert.truthy(find(b, '"code":"nonce_used"'), b)
            assert.truthy(find(b, '"original":{"status":"committed","transfer_id":"' ..
                               cjson.decode(r1.body).transfer_id .. '"}'), b)
            local b1 = select(3, post(task, n1.port, "/v1/transfer", TA, other, "K5"))
            assert.equal(b, b1)
            assert.equal(b, (select(3, post(task, n2.port, "/v1/transfer", TA, other, "K5"))))
        end)
    end)

    -- The engine stored a transfer's outcome under its intent, then appended its event: a
    -- replay between the two had no event_seq (a 201 with "event_seq":0, cached). The
    -- finalize is one transaction now (LED-67): the other node answers the receipt at once,
    -- with its event seq, byte for byte node 1's answer.
    it("a committed intent on one node: the other answers its receipt with the event seq",
       function()
        on_two_nodes(function(task, n1, n2, gate)
            local body = transfer(A, B, 3, 32)
            local join = hold_on_node1(task, n1, gate, body, "K6", function(name, k, o)
                return name == "put_intent" and k:sub(1, 6) == "wlt:n:" and type(o) == "table"
                       and o.status == "committed"
            end)
            local st, _, b = post(task, n2.port, "/v1/transfer", TA, body, "K6")
            assert.equal(201, st, b)
            assert.is_true(cjson.decode(b).event_seq > 0, b)
            local r1 = join()
            assert.equal(201, r1.st, r1.body)
            assert.equal(r1.body, b)
            assert.equal(r1.body, (select(3, post(task, n2.port, "/v1/transfer", TA, body, "K6"))))
        end)
    end)

    -- (issues to B, from the operator's uncapped issuance account: the race is the keys',
    -- not a hot payer's; a payer's concurrent debits are the engine's business, issue 29)
    it("20 keys sent to both nodes at once: one transfer each, one answer on both", function()
        on_two_nodes(function(task, n1, n2)
            local N = 20
            local hs = {}
            for i = 1, N do
                for _, port in ipairs { n1.port, n2.port } do
                    hs[#hs + 1] = task.spawn("client", function()
                        post(task, port, "/v1/issue", OP, issue(B, 1, 1000 + i), "race" .. i)
                        return true
                    end)
                end
            end
            for _, h in ipairs(hs) do assert(h:join(30000)) end
            local seq = 0
            for i = 1, N do
                local body = issue(B, 1, 1000 + i)
                local st1, _, b1 = settle(task, n1.port, OP, body, "race" .. i, "/v1/issue")
                local st2, _, b2 = settle(task, n2.port, OP, body, "race" .. i, "/v1/issue")
                assert.equal(201, st1, b1)
                assert.equal(201, st2, b2)
                assert.equal(b1, b2)
                seq = math.max(seq, cjson.decode(b1).event_seq)
            end
            for _, n in ipairs { n1, n2 } do
                local st, _, b = get(task, n.port, "/v1/accounts/" .. B ..
                                     "/balance?asset=USD&min_seq=" .. seq, TB)
                assert.equal(200, st, b)
                assert.equal(N, cjson.decode(b).balance)
            end
        end)
    end)
end

describe("ron.wallet two nodes on one SQLite file (issue 29 item 4)", function()
    local path
    before_each(function() path = S.tmpname(".db") end)
    cases(function()
        return store_mod.open { backend = "sqlite", path = path, offload = true }
    end)
end)

S.describe_pg("ron.wallet two nodes on one PostgreSQL (issue 29 item 4)", function(pg)
    local n = 0
    local schema
    before_each(function()
        n = n + 1
        schema = "wallet_two_" .. n -- a fresh ledger per case
    end)
    cases(function()
        return store_mod.open { backend = "postgres", conninfo = pg.cluster.conninfo,
                                schema = schema, connections = 4, connect_timeout_ms = 20000,
                                query_timeout_ms = 20000 }
    end)
end)
