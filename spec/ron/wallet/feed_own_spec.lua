-- The wallet's cache feed and its own commits, inside the host (ctest lua-wallet-host), on
-- an offloaded SQLite store (issue 25: the feed's reads queue on the store's one connection
-- with the committer's phases). A commit the wallet answers drops its accounts' entries at
-- once and notes its event: the feed steps over those events without reading their
-- transfers back. Coherence (WLT-6) holds: another writer's transfer still drops the
-- entries it names, a read racing an own commit is not stored, the lag is still observed.
local S = require("support")

if not S.needs_host("ron.wallet.feed_own", "lua-wallet-host") then return end

local cjson = require("cjson.safe")
local dto = require("ron.wallet.dto")
local F = dofile(S.root .. "spec/ron/wallet/fixture.lua")

local OP, TA, A, B = F.OP, F.TA, F.A, F.B
local post, get = S.http_post, S.http_get
local USD = { code = "USD", scale = 2 }

-- A's or B's balance through GET -> the amount
local function balance(task, port, id)
    local st, _, body = get(task, port, "/v1/accounts/" .. id .. "/balance?asset=USD", OP)
    assert.equal(200, st, body)
    return cjson.decode(body).balance
end

-- The feed task's polls stopped (the instance's poll a no-op): the case polls itself, after
-- the commits it wants the feed to meet have answered. -> poll() (the cache's own, once)
local function own_feed(c)
    local real = getmetatable(c).__index.poll
    c.poll = function() return true end
    return function() assert(real(c)) end
end

-- The feed's ledger reads counted (the engine instance's methods wrapped): -> { events =
-- events_since calls, transfers = transfers calls, ids = transfers read back }
local function count_reads(led)
    local n = { events = 0, transfers = 0, ids = 0 }
    local since, transfers = led.events_since, led.transfers
    led.events_since = function(self, ...)
        n.events = n.events + 1
        return since(self, ...)
    end
    led.transfers = function(self, ids)
        n.transfers, n.ids = n.transfers + 1, n.ids + #ids
        return transfers(self, ids)
    end
    return n
end

-- POST a body -> its receipt (201)
local function commit(task, port, path, token, body, key)
    local st, _, out = post(task, port, path, token, body, key)
    assert.equal(201, st, out)
    return cjson.decode(out)
end

describe("ron.wallet feed and the wallet's own commits", function()
    it("own commits: the feed reads no transfer back, its calls are one per poll",
       F.fresh(function(task, ctx, port)
        local c = ctx.w.cache
        local poll = own_feed(c)
        poll()
        local seq0, lag0 = c.seq, c.lag_count
        local n = count_reads(ctx.led)
        local r = commit(task, port, "/v1/issue", OP, F.issue(A, 1000, 1), "i1")
        local last
        for k = 1, 20 do
            last = commit(task, port, "/v1/transfer", TA, F.transfer(A, B, 1, k + 1), "t" .. k)
        end
        assert.equal(r.event_seq + 20, last.event_seq)
        poll()
        assert.equal(last.event_seq, c.seq)
        -- the 21 events were the wallet's own: not one transfer read back (main read all 21
        -- in one ledger transfers call), one events call (it finds nothing after them)
        assert.equal(0, n.ids)
        assert.equal(0, n.transfers)
        assert.equal(1, n.events)
        assert.equal(21, c.own_events_total)
        assert.equal(last.event_seq - seq0, 21)
        -- the lag is still measured per own commit (its answer -> the feed past its event)
        assert.equal(21, c.lag_count - lag0)
        assert.equal(980, balance(task, port, A))
        assert.equal(20, balance(task, port, B))
    end))

    it("another writer's transfer still drops the entries it names", F.fresh(function(task, ctx, port)
        local c = ctx.w.cache
        local poll = own_feed(c)
        commit(task, port, "/v1/issue", OP, F.issue(A, 100, 1), "i1")
        commit(task, port, "/v1/transfer", TA, F.transfer(A, B, 10, 2), "t1")
        poll()
        local bid, aid = dto.uuid_bytes(B), dto.uuid_bytes(A)
        assert.equal(10, balance(task, port, B)) -- cached now
        assert.equal(10, c:get(bid, "USD"))
        local n = count_reads(ctx.led)
        -- the same ledger's engine, not the wallet: its commit is not the wallet's own
        local res = assert(ctx.led:commit { intent = ("X"):rep(32), movements = {
            { from = aid, to = bid, asset = USD, amount = 7 } } })
        -- and an own commit right after it (not B's): the feed must not step over the
        -- other's event
        local r2 = commit(task, port, "/v1/issue", OP, F.issue(A, 1, 3), "i2")
        assert.equal(res.event_seq + 1, r2.event_seq)
        assert.equal(10, c:get(bid, "USD")) -- the other writer's: not yet seen
        poll()
        assert.equal(r2.event_seq, c.seq)
        assert.equal(1, n.ids) -- its transfer alone read back
        assert.is_nil(c:get(bid, "USD"))
        assert.equal(17, balance(task, port, B))
        assert.equal(84, balance(task, port, A))
    end))

    it("an own commit's event met before its answer: its request's accounts, no read",
       F.fresh(function(task, ctx, port)
        local c, w = ctx.w.cache, ctx.w
        local poll = own_feed(c)
        commit(task, port, "/v1/issue", OP, F.issue(A, 100, 1), "i1")
        poll()
        local aid, bid = dto.uuid_bytes(A), dto.uuid_bytes(B)
        assert.equal(100, balance(task, port, A))
        -- the feed polls when the transfer's event is in the store and its answer is not
        -- given yet (the outcome's rendering, wrapped)
        local seen
        local outcome = w._money_outcome
        w._money_outcome = function(self, job, ...)
            if job.r.route == "transfer" and not seen then
                local n = count_reads(self.led)
                seen = { cached = c:get(aid, "USD") }
                poll()
                seen.ids, seen.running, seen.after = n.ids, c.own_running_total, c:get(aid, "USD")
                -- another body under the same nonce row is not the running request
                local own = self._own_running or function() end -- (main has none)
                seen.other = own(self, job.nkey, ("x"):rep(#job.h))
                seen.accounts = own(self, job.nkey, job.h)
            end
            return outcome(self, job, ...)
        end
        local lags = c.lag_count
        commit(task, port, "/v1/transfer", TA, F.transfer(A, B, 30, 2), "t1")
        -- its answer after the feed passed its event: observed, a lag of 0
        assert.equal(lags + 1, c.lag_count)
        assert.equal(100, seen.cached) -- not answered: nothing dropped yet
        assert.equal(0, seen.ids)
        assert.equal(1, seen.running)
        assert.is_nil(seen.after)
        assert.is_nil(seen.other)
        assert.same({ aid, bid }, seen.accounts)
        assert.equal(70, balance(task, port, A))
    end))

    it("a read racing an own commit is not stored stale; a later read is cached",
       F.fresh(function(task, ctx, port)
        local c = ctx.w.cache
        local poll = own_feed(c)
        commit(task, port, "/v1/issue", OP, F.issue(A, 100, 1), "i1")
        poll()
        local n = count_reads(ctx.led)
        local aid = dto.uuid_bytes(A)
        -- a balance read that began before the commit (reads.lua: begin_read, the ledger's
        -- balance, put) and ends after its answer, with the balance it read before
        c:begin_read(aid)
        local r = commit(task, port, "/v1/transfer", TA, F.transfer(A, B, 30, 2), "t1")
        assert.is_false(c:put(aid, "USD", 100))
        assert.is_nil(c:get(aid, "USD"))
        assert.equal(70, balance(task, port, A))
        assert.equal(70, c:get(aid, "USD"))
        -- the feed passing the commit's event trusts the drop at its answer: the entry read
        -- after it stays (no second drop, no store call)
        poll()
        assert.equal(r.event_seq, c.seq)
        assert.equal(70, c:get(aid, "USD"))
        assert.equal(0, n.ids)
    end))
end)
