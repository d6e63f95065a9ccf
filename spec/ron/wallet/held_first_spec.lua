-- A payer's FIRST request while another node's saga holds its postings (issue 29 item 3,
-- docs/WALLET.md §6; ctest lua-wallet-host), on one SQLite file shared by two wallet nodes.
-- Node 2's store stops right after its saga reserved payer A's only posting (a node stopped
-- or dead mid-commit). Node 1 gets a group [U1, H1, U2]: U1 and U2 from payer B, nobody
-- holds; H1 from A, the first request of A node 1 sees, so A is not known to be held and H1
-- joins the group. The engine hands H1 back (commit_many's hand_back) instead of driving it
-- inside the group: U1 and U2 are answered before H1's drive starts (the order of the
-- wallet's answers, no clock), and H1 is driven apart, answered exactly once, with what the
-- single path answers (its stored receipt, replayed byte for byte). Before: commit_many
-- drove H1 inline, every attempt finding node 2's saga, and the whole group waited (U2
-- answered after H1, H1 503 account_busy).
local S = require("support")

if not S.needs_host("ron.wallet held payer's first request", "lua-wallet-host") then return end

local cjson = require("cjson.safe")
local F = dofile(S.root .. "spec/ron/wallet/fixture.lua")

local OP, TA, TB, A, B = F.OP, F.TA, F.TB, F.A, F.B
local post = S.http_post
local transfer, issue = F.transfer, F.issue

local function key_of(req) return req.headers and req.headers["idempotency-key"] end

-- pipe: the wallet's group_pipeline (on: the queued requests make two groups, the second
-- planned while the first is in flight; the order checks of one group do not apply)
local function held_first(pipe)
    F.run(function(task)
        -- (no answer cache on node 1: a replay is the ledger's stored outcome)
        local n1, n2 = F.two_nodes(task)
        local gate2 = n2.gate
        F.setup_accounts(task, n1.port)
        assert.equal(201, (post(task, n1.port, "/v1/issue", OP, issue(A, 1000, 1), "i1")))
        assert.equal(201, (post(task, n1.port, "/v1/issue", OP, issue(B, 1000, 2), "i2")))

        -- node 2's saga reserves A's only posting, then node 2's store stops
        gate2.trip = function(name) return name == "reserve_postings" end
        local r2 = {}
        local h2 = task.spawn("node2_client", function()
            r2.st, r2.h, r2.body = post(task, n2.port, "/v1/transfer", TA,
                                        transfer(A, B, 10, 50), "N2")
            return true
        end)
        assert(S.eventually(task, function() return gate2.closed end, 5000),
               "node 2 never reserved")

        -- node 1's answers, in the order sent; its drive of a handed-back member
        local w, led = n1.w, n1.led
        w.group_pipeline = pipe
        local sent = {}
        local send = w._send
        w._send = function(self, req, a, replayed)
            sent[#sent + 1] = { key = key_of(req), status = a.status }
            return send(self, req, a, replayed)
        end
        local seen_at_drive
        local drive = led.drive_handed
        led.drive_handed = function(self, h)
            local keys = {}
            for _, s in ipairs(sent) do keys[#keys + 1] = s.key end
            seen_at_drive = keys
            -- node 2 goes on: its saga commits and gives A's change back
            gate2.closed = false
            assert(h2:join(20000))
            assert.equal(201, r2.st, r2.body)
            return drive(self, h)
        end

        local reqs = {
            { "/v1/transfer", TB, transfer(B, A, 1, 100), "U0" }, -- taken alone
            { "/v1/transfer", TB, transfer(B, A, 5, 101), "U1" },
            { "/v1/transfer", TA, transfer(A, B, 20, 102), "H1" },
            { "/v1/transfer", TB, transfer(B, A, 6, 103), "U2" } }
        local groups0, handed0 = w.m.groups or 0, led.stats.handed_back or 0
        local got = F.burst(task, n1, reqs)
        for i, r in ipairs(got) do assert.equal(201, r[1], reqs[i][4] .. ": " .. r[3]) end
        assert.equal(handed0 + 1, led.stats.handed_back)
        assert.equal(1, w.m.group_handed)
        local order = {}
        for _, s in ipairs(sent) do order[#order + 1] = s.key end
        if pipe then
            -- every request answered exactly once, U1 before H1's drive began
            table.sort(order)
            assert.same({ "H1", "U0", "U1", "U2" }, order)
            assert.equal("U1", seen_at_drive[2])
        else
            assert.equal(groups0 + 1, w.m.groups)
            -- U1 and U2 answered before H1's drive began
            assert.same({ "U0", "U1", "U2" }, seen_at_drive)
            -- every request answered exactly once, H1 last
            assert.same({ "U0", "U1", "U2", "H1" }, order)
        end
        assert.equal(0, w.held.handed_live)
        assert.is_false(w.held:suspect(A)) -- it committed: a payer like the others
        -- H1's answer is the single path's: its stored outcome, the same bytes again
        local st, hd, body = post(task, n1.port, reqs[3][1], reqs[3][2], reqs[3][3], "H1")
        assert.equal(201, st)
        assert.equal(got[3][3], body)
        assert.equal("true", hd["idempotent-replayed"])
        local ev = cjson.decode(got[3][3]).event_seq
        if not pipe then assert.is_true(ev > cjson.decode(got[4][3]).event_seq) end
    end)
end

describe("ron.wallet: a held payer's first request in a group (issue 29 item 3)", function()
    it("answers the untouched members without waiting; the held one once, apart", function()
        held_first(false)
    end)

    it("the same with the pipeline: two groups, each request answered once, the held one "
       .. "apart with the single path's answer", function()
        held_first(true)
    end)
end)
