-- ron.base.numcache: keys to an int64_t and a number, two generations, off the Lua heap
-- (I-7, issue 25).
local ffi = require("ffi")
local numcache = require("ron.base.numcache")
local lru = require("ron.base.lru")
local S = require("support")

describe("ron.base.numcache", function()
    it("keeps the entries used in the last cap insertions, as ron.base.lru", function()
        local c = numcache.new(3)
        for i = 1, 3 do assert.is_true(c:put("k" .. i, i, i / 2)) end
        assert.equal(3, c:count())
        c:put("k4", 4, 0)                    -- young full: it becomes old
        local i, x = c:get("k1")             -- a hit in old moves back to young
        assert.is_true(i == 1LL and ffi.istype("int64_t", i))
        assert.equal(0.5, x)
        for n = 5, 6 do c:put("k" .. n, n, 0) end -- young (4, 1, 5) full -> old; (6)
        assert.is_nil(c:get("k2"))           -- dropped with the older generation
        assert.is_nil(c:get("k3"))
        assert.is_true(c:get("k1") == 1LL)
        assert.is_true(c:count() <= 6)
    end)

    it("keeps int64 exactly, replaces, deletes, clears", function()
        local c = numcache.new(4)
        local big = 9223372036854775807LL
        c:put("a\0USD", big, 1.25)
        local i, x = c:get("a\0USD")
        assert.is_true(i == big)
        assert.equal(1.25, x)
        c:put("a\0USD", -5LL, 2)
        assert.is_true(c:get("a\0USD") == -5LL)
        assert.equal(1, c:count())
        assert.is_nil(c:get("a\0EUR"))
        c:delete("a\0USD")
        c:delete("missing")
        assert.is_nil(c:get("a\0USD"))
        assert.equal(0, c:count())
        c:put("b", 1, 0)
        c:clear()
        assert.equal(0, c:count())
        assert.is_nil(c:get("b"))
    end)

    it("does not keep a key over KEY_MAX bytes, nor anything at cap 0; refuses bad input",
       function()
        local c = numcache.new(2)
        local long = string.rep("x", numcache.KEY_MAX + 1)
        assert.is_false(c:put(long, 1, 0))
        assert.is_nil(c:get(long))
        c:delete(long)
        assert.is_true(c:put(string.rep("y", numcache.KEY_MAX), 1, 0))
        local z = numcache.new(0)
        assert.is_false(z:put("a", 1, 0))
        assert.is_nil(z:get("a"))
        assert.equal(0, z:count())
        assert.has_error(function() c:put("", 1, 0) end)
        assert.has_error(function() c:put(1, 1, 0) end)
        assert.has_error(function() c:put("k", 1, "x") end)
        assert.has_error(function() c:get(nil) end)
        assert.has_error(function() numcache.new(-1) end)
    end)

    it("answers as ron.base.lru over random puts, gets and deletes (seed 3011)", function()
        local seed = 3011
        print("numcache property seed " .. seed)
        math.randomseed(seed)
        local front = numcache.FRONT
        finally(function() numcache.FRONT = front end)
        for _, run in ipairs({ { 1, 256 }, { 2, 256 }, { 3, 2 }, { 5, 256 }, { 16, 3 },
                               { 40, 256 }, { 40, 5 } }) do
            local cap
            cap, numcache.FRONT = run[1], run[2] -- (a small front: its emptying when full)
            local c, ref = numcache.new(cap), lru.new(cap)
            for step = 1, 6000 do
                local k = "acct" .. math.random(1, 3 * cap + 3) .. "\0USD"
                local r = math.random()
                if r < 0.4 then
                    c:put(k, step * 1000000007LL, step)
                    ref:put(k, step)
                elseif r < 0.55 then
                    c:delete(k)
                    ref:delete(k)
                else
                    local want = ref:get(k)
                    local i, x = c:get(k)
                    assert.equal(want, x, "cap " .. cap .. " step " .. step)
                    if want then assert.is_true(i == want * 1000000007LL) end
                end
            end
        end
    end)

    it("finds every key after deletions inside probe chains (backward shift)", function()
        math.randomseed(77)
        print("numcache chain seed 77")
        local c = numcache.new(64) -- 128 slots, filled to half: long chains
        local live = {}
        for round = 1, 2000 do
            local k = "k" .. math.random(1, 60)
            if live[k] and math.random() < 0.5 then
                c:delete(k)
                live[k] = nil
            elseif not live[k] and c:count() < 60 then
                c:put(k, round, round)
                live[k] = round
            end
            for key, v in pairs(live) do
                local _, x = c:get(key)
                assert.equal(v, x, "round " .. round .. " key " .. key)
            end
        end
    end)

    it("costs memory as it fills, and holds its entries off the Lua heap", function()
        local rss_kb = S.rss_kb
        do
            local before = rss_kb()
            local big = numcache.new(1000000) -- 2 x 160 MB of slots
            assert.is_true(rss_kb() - before < 8192)
            assert.equal(0, big:count())
        end
        local c = numcache.new(100000)
        local heap = S.settled_heap_kb()
        for i = 1, 200000 do c:put(string.format("%016x\0USD", i), i, i) end
        local grew = S.settled_heap_kb() - heap
        assert.is_true(c:count() >= 100000)
        assert.is_true(c:get(string.format("%016x\0USD", 200000)) == 200000LL)
        assert.is_true(grew < 64, "the Lua heap grew " .. grew .. " KB")
    end)
end)
