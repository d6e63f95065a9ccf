-- Several held payers' first requests in one group (issue 29 item 3, docs/WALLET.md §6; ctest
-- lua-wallet-host), on one SQLite file shared by two wallet nodes. Node 2's group commit
-- stops right after its saga reserved the only postings of payers A and C (a node dead
-- mid-commit holding two payers). Node 1 gets a group [HA, HC]: both handed back by the
-- engine (commit_many's hand_back) and driven apart. The two drives run at once, one per
-- payer: the drive of HC starts while HA's is still running (the order of the drives' starts
-- and ends, no clock). Before: the members of a group were driven one after another, so on
-- a survivor each held payer's first request waited for every drive before it (each up to
-- the commit timeout when the payer stays held until the takeover). Both are answered once,
-- 201, with their stored receipts.
local S = require("support")

if not S.needs_host("ron.wallet held payers driven at once", "lua-wallet-host") then return end

local acct = require("ron.accounting")
local dto = require("ron.wallet.dto")
local F = dofile(S.root .. "spec/ron/wallet/fixture.lua")

local OP, TA, TB, A, B = F.OP, F.TA, F.TB, F.A, F.B
local TC, C = "account-c-token.4", "3c0d2a51-6b7e-4f80-9a12-7e6f5d4c3b2a"
local post = S.http_post
local transfer, issue = F.transfer, F.issue

local USD = { code = "USD", scale = 2 }

describe("ron.wallet: held payers' first requests in one group (issue 29 item 3)", function()
    it("drives the handed-back members of different payers at once", function()
        F.TOKENS[acct.b3hex(TC)] = C
        F.run(function(task)
            local n1, n2 = F.two_nodes(task)
            local gate2 = n2.gate
            F.setup_accounts(task, n1.port, { A, B, C })
            for i, id in ipairs { A, B, C } do
                assert.equal(201, (post(task, n1.port, "/v1/issue", OP, issue(id, 1000, i),
                                        "i" .. i)))
            end

            -- node 2's group reserves A's and C's only postings, then its store stops
            gate2.trip = function(name, ids) return name == "reserve_postings" and #ids >= 2 end
            local led2 = n2.led
            local function pay(intent, from)
                return { intent = intent, movements = { { from = dto.uuid_bytes(from),
                    to = dto.uuid_bytes(B), asset = USD, amount = 10 } } }
            end
            local h2 = task.spawn("node2_group", function()
                return led2:commit_many({ pay("n2-a", A), pay("n2-c", C) })
            end)
            assert(S.eventually(task, function() return gate2.closed end, 5000),
                   "node 2 never reserved")

            -- node 1's drives of its handed-back members: the first waits (at most 10 s)
            -- for the second to start; then node 2 goes on and gives A and C back
            local w, led = n1.w, n1.led
            -- (the queued requests as ONE group: the pipeline would halve it)
            w.group_pipeline = false
            local log, released = {}, false
            local drive = led.drive_handed
            led.drive_handed = function(self, h)
                log[#log + 1] = "start"
                if #log == 1 then
                    S.eventually(task, function() return #log >= 2 end, 10000)
                    log[#log + 1] = #log >= 2 and "both started" or "alone"
                    gate2.closed = false
                    local ok, res = h2:join(20000)
                    assert(ok, tostring(res))
                    released = true
                else
                    assert(S.eventually(task, function() return released end, 30000))
                end
                local r = { drive(self, h) }
                log[#log + 1] = "end"
                return unpack(r, 1, table.maxn(r))
            end

            local reqs = {
                { "/v1/transfer", TB, transfer(B, A, 1, 100), "U0" }, -- taken alone
                { "/v1/transfer", TA, transfer(A, B, 20, 101), "HA" },
                { "/v1/transfer", TC, transfer(C, B, 30, 102), "HC" } }
            local got = F.burst(task, n1, reqs)
            for i, r in ipairs(got) do assert.equal(201, r[1], reqs[i][4] .. ": " .. r[3]) end
            assert.equal(2, w.m.group_handed)
            -- both drives were running at once (before: "start", "alone", "end", "start")
            assert.same({ "start", "start", "both started" }, { log[1], log[2], log[3] })
            assert.equal(0, w.held.handed_live)
            assert.is_nil(next(w.held.apart_of))
            -- each answer is its stored outcome: the same bytes again
            for i = 2, 3 do
                local st, hd, body = post(task, n1.port, reqs[i][1], reqs[i][2], reqs[i][3],
                                          reqs[i][4])
                assert.equal(201, st)
                assert.equal(got[i][3], body)
                assert.equal("true", hd["idempotent-replayed"])
            end
            assert.equal(1000 - 10 + 1 - 20, led:balance(dto.uuid_bytes(A), USD))
            assert.equal(1000 - 10 - 30, led:balance(dto.uuid_bytes(C), USD))
        end)
        F.TOKENS[acct.b3hex(TC)] = nil
    end)
end)
