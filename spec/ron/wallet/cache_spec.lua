-- ron.wallet.cache: the feed's catch-up reads a batch of events' transfers in one store call
-- (issue 25: one call per event kept the offloaded SQLite store's one connection busy while
-- balance reads that missed waited behind it), and drops exactly the entries they name.
local L = require("ron.ledger.ledger")
local memory = require("ron.ledger.store.memory")
local cache = require("ron.wallet.cache")

local USD = { code = "USD", scale = 2 }
local EXT, SINK = ("E"):rep(16), ("S"):rep(16)

-- the store's calls counted by name (a proxy of its methods)
local function counted(s)
    local n = {}
    return setmetatable({}, { __index = function(_, k)
        local v = s[k]
        if type(v) ~= "function" then return v end
        return function(_, ...)
            n[k] = (n[k] or 0) + 1
            return v(s, ...)
        end
    end }), n
end

-- entries for ids, as a balance read through the cache stores them
local function cache_all(c, ids, amount)
    for _, id in ipairs(ids) do
        c:begin_read(id)
        c:put(id, "USD", amount)
    end
end

-- one unit from one account to another -> the commit's result
local function pay(led, intent, from, to, body_hash)
    return assert(led:commit { intent = intent, body_hash = body_hash, movements = {
        { from = from, to = to, asset = USD, amount = 1 } } })
end

describe("ron.wallet.cache", function()
    it("catches up a batch of events in one transfers call, dropping whom they name", function()
        local st, n = counted(memory.new())
        local led = L.new { store = st, book = "b", node = "spec" }
        assert(led:create_account { id = EXT, policy = "uncapped" })
        assert(led:create_account { id = SINK })
        local P = {}
        for k = 1, 8 do
            P[k] = string.format("P%015d", k)
            assert(led:create_account { id = P[k] })
        end
        local c = cache.new { ledger = led, batch = 64 }
        assert(c:poll()) -- starts at the head
        local quiet = ("Q"):rep(16)
        assert(led:create_account { id = quiet })
        assert(c:poll())
        for k = 1, 8 do
            assert(led:commit { intent = "fund-" .. k, movements = {
                { from = EXT, to = P[k], asset = USD, amount = 100 } } })
        end
        for k = 1, 40 do
            assert(led:commit { intent = "pay-" .. k, movements = {
                { from = P[k % 8 + 1], to = SINK, asset = USD, amount = 1 } } })
        end
        for _, id in ipairs { P[1], SINK, quiet } do
            c:begin_read(id)
            c:put(id, "USD", 1)
        end
        for k in pairs(n) do n[k] = 0 end
        local seen = c.events_total
        assert(c:poll())
        -- 48 transfer events: one read of the feed, one of their transfers
        assert.equal(48, c.events_total - seen)
        assert.equal(0, n.get_transfer or 0)
        assert.is_true((n.apply or 0) + (n.many or 0) <= 1)
        assert.equal(1, n.get_events_since)
        assert.is_nil(c:get(P[1], "USD"))
        assert.is_nil(c:get(SINK, "USD"))
        assert.equal(1, c:get(quiet, "USD")) -- no event named it
        assert.equal(assert(st:head_seq("b")), c.seq)
    end)

    -- the wallet's own commits (ron.wallet.money drops their accounts' entries when they
    -- answer, then notes them): the feed steps over them without reading a transfer back
    it("steps over noted own commits; another writer's transfer between them is read", function()
        local st, n = counted(memory.new())
        local led = L.new { store = st, book = "b", node = "spec" }
        assert(led:create_account { id = EXT, policy = "uncapped" })
        assert(led:create_account { id = SINK })
        local P, Q = ("P"):rep(16), ("Q"):rep(16)
        assert(led:create_account { id = P })
        assert(led:create_account { id = Q })
        local ms = 1000
        local c = cache.new { ledger = led, batch = 64, clock = function() return ms end }
        assert(c:poll())
        local function own(intent, from, to)
            local res = pay(led, intent, from, to)
            c:invalidate(from)
            c:invalidate(to)
            c:note_commit(res.transfer_id, ms, res.event_seq)
            return res
        end
        for k = 1, 6 do own("own-" .. k, EXT, P) end
        cache_all(c, { P, Q, SINK }, 1)
        for k in pairs(n) do n[k] = 0 end
        ms = 1030
        assert(c:poll())
        -- six own events: no transfer read, one events call (nothing after them)
        assert.equal(0, (n.apply or 0) + (n.get_transfer or 0))
        assert.equal(1, n.get_events_since)
        assert.equal(6, c.own_events_total)
        assert.equal(6, c.lag_count)
        assert.equal(30, c.lag_max)
        assert.equal(1, c:get(P, "USD")) -- read after their answers: kept
        -- own, then another writer's (not noted), then own: the other's alone read back
        own("own-7", EXT, P)
        local other = pay(led, "other", EXT, Q)
        local last = own("own-8", EXT, SINK)
        assert.equal(other.event_seq + 1, last.event_seq)
        cache_all(c, { P, SINK }, 2)
        for k in pairs(n) do n[k] = 0 end
        assert(c:poll())
        assert.equal(last.event_seq, c.seq)
        assert.equal(1, c.transfers_read_total)
        assert.is_nil(c:get(Q, "USD")) -- the other writer's payee
        assert.equal(2, c:get(P, "USD"))
        assert.equal(2, c:get(SINK, "USD"))
        assert.equal(8, c.own_events_total)
        -- a note of an event the feed has passed is not kept (it was applied before the
        -- answer): a lag of 0
        local lags, zero = c.lag_count, c.lag_hist[1]
        c:note_commit(last.transfer_id, ms, last.event_seq)
        assert.equal(0, c.n_noted)
        assert.equal(lags + 1, c.lag_count)
        assert.equal(zero + 1, c.lag_hist[1])
    end)

    -- a group's events are in the store before its answers: the feed meeting them asks the
    -- wallet (own_running: the request's intent and body hash) instead of reading them back
    it("a running own commit's event drops its request's accounts without a read", function()
        local st, n = counted(memory.new())
        local led = L.new { store = st, book = "b", node = "spec" }
        assert(led:create_account { id = EXT, policy = "uncapped" })
        local P, Q = ("P"):rep(16), ("Q"):rep(16)
        assert(led:create_account { id = P })
        assert(led:create_account { id = Q })
        local running = { ["run-1"] = { h = ("h"):rep(32), accounts = { EXT, P } },
                          ["run-2"] = { h = ("H"):rep(32), accounts = { EXT, P } } }
        local c = cache.new { ledger = led, own_running = function(intent, h)
            local r = running[intent]
            if r and r.h == h then return r.accounts end
        end }
        assert(c:poll())
        pay(led, "run-1", EXT, P, ("h"):rep(32))
        -- the same intent's request running here with another body: not its commit
        pay(led, "run-2", EXT, Q, ("x"):rep(32))
        cache_all(c, { P, Q }, 1)
        for k in pairs(n) do n[k] = 0 end
        assert(c:poll())
        assert.equal(1, c.own_running_total)
        assert.equal(1, c.transfers_read_total) -- run-2's, whose body differs
        assert.is_nil(c:get(P, "USD"))
        assert.is_nil(c:get(Q, "USD"))
    end)

    it("notes are bounded: past 4096 they are forgotten and read back", function()
        local led = L.new { store = memory.new(), book = "b", node = "spec" }
        local c = cache.new { ledger = led }
        for seq = 1, 5000 do c:note_commit(("T"):rep(32), 0, seq) end
        assert.is_true(c.n_noted <= 4096)
        local k = 0
        for _ in pairs(c.noted) do k = k + 1 end
        assert.equal(c.n_noted, k)
    end)
end)
