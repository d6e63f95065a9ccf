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
end)
