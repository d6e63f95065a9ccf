-- The plan cache (lua/ron/ledger/engine/plan_cache.lua, LED-73) on every backend, as cases of
-- the store conformance suite (spec/ron/ledger/store_conformance.lua: memory, SQLite,
-- offloaded SQLite, PostgreSQL): an engine plans an uncontended commit from what it last saw
-- and makes one store call; another engine on the same store makes that memory stale in
-- each way the plan depends on (a posting it would spend is spent, an account's version
-- moved, a capped pair's balance lowered), and the stale plan's guard (LED-72) must miss:
-- nothing applied, the commit reads again and answers what the current state says. Each
-- case fails if its guard were skipped (the stale plan would commit: a spent posting spent
-- twice, a frozen account debited, a floor breached).
--
--   require("ron.ledger.plan_cache_conformance").add(case)  -- case(title, body(store))
local M = {}

local assert = require("luassert") -- required outside busted's spec environment
local ffi = require("ffi")
local L = require("ron.ledger.ledger")

local USD = { code = "USD", scale = 2 }
local function id16(s) return (s .. ("\0"):rep(16)):sub(1, 16) end
local EXT, A, B, C = id16("pc-ext"), id16("pc-a"), id16("pc-b"), id16("pc-c")
local EXT2 = id16("pc-ext2")
local I64 = ffi.typeof("int64_t")
local MAX = I64(2) ^ 62 - 1 + I64(2) ^ 62 -- 2^63 - 1

local function mv(from, to, amount) return { from = from, to = to, asset = USD, amount = amount } end

-- ours commits intent (from pays to amount) planned from its memory: one call, no read
local function commit_cached(ours, intent, from, to, amount)
    local cached = ours.stats.one_tx_cached or 0
    local r = assert(ours:commit { intent = intent, movements = { mv(from, to, amount) } })
    assert.equal(cached + 1, ours.stats.one_tx_cached)
    return r
end

-- Two engines on s (ours remembers; the other is "another process"), the accounts, A funded
-- with 100 and our engine's memory of A made by a first payment (read, then remembered).
local function world(s)
    local ours = L.new { store = s, book = "main", node = "n1", nonce = "ours" }
    local other = L.new { store = s, book = "main", node = "n2", nonce = "other" }
    assert(ours:recover())
    assert(ours:create_account { id = EXT, policy = "uncapped" })
    assert(ours:create_account { id = A })
    assert(ours:create_account { id = B })
    assert(ours:create_account { id = C, policy = "capped", floor = -100 })
    assert(ours:commit { intent = "dep", movements = { mv(EXT, A, 100) } })
    assert(ours:commit { intent = "a1", movements = { mv(A, B, 10) } })
    -- remembered now: the next payment from A plans without reading, in one call
    commit_cached(ours, "a2", A, B, 1)
    return ours, other
end

local function bal(led, acct) return led:balance(acct, USD) end

function M.add(case)
    case("plan cache (LED-73): a remembered posting spent by another engine: the inputs' "
         .. "guard misses, nothing applied, read and committed from what is left", function(s)
        local ours, other = world(s)
        -- A holds one posting of 89 (ours remembers it); the other engine spends it
        assert(other:commit { intent = "o1", movements = { mv(A, B, 80) } })
        local missed = ours.stats.one_tx_cache_missed or 0
        local r = assert(ours:commit { intent = "a3", movements = { mv(A, B, 5) } })
        assert.equal("committed", r.status)
        assert.equal(missed + 1, ours.stats.one_tx_cache_missed)
        assert.equal(4, bal(ours, A)); assert.equal(96, bal(ours, B))
        -- spent once: the other's change (9) paid it; nothing is spent twice
        local t = assert(ours:transfer(r.transfer_id)).transfer
        assert.equal(1, #t.inputs)
        local p = s:get_postings(t.inputs)[1]
        assert.equal(9, p.amount); assert.equal("inactive", p.status)
        -- and remembered again: the next one is one call
        commit_cached(ours, "a4", A, B, 1)
        assert.equal(3, bal(ours, A))
    end)

    case("plan cache (LED-73): a remembered account frozen by another engine: the pins' "
         .. "guard misses, nothing applied, the frozen account refused", function(s)
        local ours, other = world(s)
        assert(other:freeze(A))
        local missed = ours.stats.one_tx_cache_missed or 0
        local r, err, code = ours:commit { intent = "a3", movements = { mv(A, B, 5) } }
        assert.is_nil(r)
        assert.equal(L.ERR.AccountFrozen, code, tostring(err))
        assert.equal(missed + 1, ours.stats.one_tx_cache_missed)
        assert.equal(89, bal(ours, A)); assert.equal(11, bal(ours, B))
        assert.equal("rejected", s:get_intent("a3").status)
        -- unfrozen (a new version again): read again (the miss forgot A), it commits
        assert(other:unfreeze(A))
        assert(ours:commit { intent = "a4", movements = { mv(A, B, 5) } })
        assert.equal(84, bal(ours, A))
    end)

    case("plan cache (LED-73): a remembered capped balance lowered by another engine: the "
         .. "floor's guard misses, nothing applied, the floor holds", function(s)
        local ours, other = world(s)
        -- C (capped, floor -100) pays 30 from nothing: remembered at -30
        assert(ours:commit { intent = "c1", movements = { mv(C, B, 30) } })
        commit_cached(ours, "c2", C, B, 10)
        -- the other engine takes C to -90; ours still sees -40, where 40 more would fit
        assert(other:commit { intent = "o1", movements = { mv(C, B, 50) } })
        local missed = ours.stats.one_tx_cache_missed or 0
        local r, err, code = ours:commit { intent = "c3", movements = { mv(C, B, 40) } }
        assert.is_nil(r)
        assert.equal(L.ERR.InsufficientFunds, code, tostring(err))
        assert.equal(missed + 1, ours.stats.one_tx_cache_missed)
        assert.equal(-90, bal(ours, C))
        assert.equal("rejected", s:get_intent("c3").status)
        -- what still fits commits, down to the floor's edge
        assert(ours:commit { intent = "c4", movements = { mv(C, B, 10) } })
        assert.equal(-100, bal(ours, C))
    end)

    case("plan cache (LED-73): a remembered credited balance raised by another engine near "
         .. "2^63 - 1: the ceiling's guard misses, nothing applied, the overflow refused",
         function(s)
        local ours, other = world(s)
        -- ours remembers B at 11 (credited by a1, a2); the other engine raises it to MAX - 39
        -- from two uncapped accounts (one alone would pass its own floor of -2^63)
        assert(other:create_account { id = EXT2, policy = "uncapped" })
        assert(other:commit { intent = "o1", movements = { mv(EXT, B, MAX - 200) } })
        assert(other:commit { intent = "o2", movements = { mv(EXT2, B, 150) } })
        local high = MAX - 39
        assert.is_true(I64(bal(other, B)) == high)
        -- ours still sees 11, where 50 more fits; a fresh read sees MAX - 39, where it does not
        local r, err, code = ours:commit { intent = "a3", movements = { mv(A, B, 50) } }
        assert.is_nil(r)
        assert.equal(L.ERR.AmountOverflow, code, tostring(err))
        assert.equal("rejected", s:get_intent("a3").status)
        -- nothing applied: A and B exact
        assert.equal(89, bal(ours, A))
        assert.is_true(I64(bal(ours, B)) == high)
        if s.dialect == "sqlite" and s.drv and s.drv.read then -- the projection still integers
            local rows = assert(s.drv:read("SELECT count(*) FROM " .. (s.prefix or "")
                                           .. "balances WHERE typeof(amount) <> 'integer'", {}))
            assert.is_true(I64(rows[1][1]) == 0)
        end
        -- what fits commits, up to the limit's edge
        assert(ours:commit { intent = "a4", movements = { mv(A, B, 39) } })
        assert.is_true(I64(bal(ours, B)) == MAX)
        assert.equal(50, bal(ours, A))
    end)

    case("plan cache (LED-73): a remembered uncapped payer lowered by another engine near "
         .. "the least balance: the limits' guard misses, nothing applied, the underflow "
         .. "refused", function(s)
        local ours, other = world(s)
        -- ours pays from the uncapped EXT twice: remembered at -102 (the deposit and these)
        assert(ours:commit { intent = "e1", movements = { mv(EXT, B, 1) } })
        commit_cached(ours, "e2", EXT, B, 1)
        -- the other engine takes EXT to -(2^63 - 1) + 100, the least balance plus 100
        assert(other:create_account { id = EXT2, policy = "uncapped" })
        assert(other:commit { intent = "o1", movements = { mv(EXT, EXT2, MAX - 202) } })
        local low = -MAX + 100
        assert.is_true(I64(bal(other, EXT)) == low)
        -- ours still sees -102, where 101 more fits; a fresh read sees that it would land
        -- on -2^63, not an amount (LED-4)
        local r, err, code = ours:commit { intent = "e3", movements = { mv(EXT, B, 101) } }
        assert.is_nil(r)
        assert.equal(L.ERR.AmountOverflow, code, tostring(err))
        assert.equal("rejected", s:get_intent("e3").status)
        assert.is_true(I64(bal(ours, EXT)) == low)
        assert.equal(13, bal(ours, B))
        -- what fits commits, down to the least balance
        assert(ours:commit { intent = "e4", movements = { mv(EXT, B, 100) } })
        assert.is_true(I64(bal(ours, EXT)) == -MAX)
        assert.equal(113, bal(ours, B))
    end)

    case("plan cache (LED-73): a replayed intent is answered from the store, never planned "
         .. "twice", function(s)
        local ours = world(s)
        local first = assert(ours:commit { intent = "a3", movements = { mv(A, B, 5) } })
        local again = assert(ours:commit { intent = "a3", movements = { mv(A, B, 5) } })
        assert.is_true(again.replayed)
        assert.equal(first.transfer_id, again.transfer_id)
        assert.equal(84, bal(ours, A))
    end)
end

return M
