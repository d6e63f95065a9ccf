-- ron.base.blobcache: the two-generation bounded cache kept off the Lua heap (I-7, issue 25).
local blobcache = require("ron.base.blobcache")
local lru = require("ron.base.lru")
local S = require("support")

describe("ron.base.blobcache", function()
    it("keeps the entries used in the last cap insertions, as ron.base.lru", function()
        local c = blobcache.new(3)
        for i = 1, 3 do assert.is_true(c:put("k" .. i, "v" .. i)) end
        assert.equal(3, c:count())
        c:put("k4", "v4")                         -- young full: it becomes old
        assert.same({ "v1" }, c:get("k1"))        -- a hit in old is copied back to young
        for i = 5, 6 do c:put("k" .. i, "v" .. i) end -- young (4, 1, 5) full -> old; (6)
        assert.is_nil(c:get("k2"))                -- dropped with the older generation
        assert.is_nil(c:get("k3"))
        assert.same({ "v1" }, c:get("k1"))
        assert.same({ "v6" }, c:get("k6"))
        for i = 1, 100 do c:put("x" .. i, "y") end
        assert.is_true(c:count() <= 6)
    end)

    it("stores several values per key, binary-safe, and replaces a value", function()
        local c = blobcache.new(4)
        local k, v = "a\0b", string.rep("\0\255", 33) .. "x"
        c:put(k, v, "", "201")
        assert.same({ v, "", "201" }, c:get(k))
        assert.is_nil(c:get("a\0c"))
        assert.is_nil(c:get("a"))
        c:put(k, "new")
        assert.same({ "new" }, c:get(k))
        assert.equal(1, c:count())
        c:put("", "empty key")
        assert.same({ "empty key" }, c:get(""))
        c:put("no values")
        assert.same({}, c:get("no values"))
        c:clear()
        assert.equal(0, c:count())
        assert.is_nil(c:get(k))
    end)

    it("rolls a generation on bytes, and keeps nothing larger than one", function()
        local c = blobcache.new(1000, 256)
        assert.is_false(c:put("big", string.rep("x", 300)))
        assert.is_nil(c:get("big"))
        for i = 1, 20 do assert.is_true(c:put("k" .. i, string.rep("v", 40))) end
        -- 60 bytes a record: 4 per generation, so only the last 5..8 remain
        assert.is_true(c:count() <= 8)
        assert.same({ string.rep("v", 40) }, c:get("k20"))
        assert.is_nil(c:get("k1"))
    end)

    it("keeps nothing with a capacity of 0, and refuses what is not a string", function()
        local c = blobcache.new(0)
        assert.is_false(c:put("a", "1"))
        assert.is_nil(c:get("a"))
        assert.equal(0, c:count())
        c = blobcache.new(2)
        assert.has_error(function() c:put(1, "x") end)
        assert.has_error(function() c:put("k", 1) end)
        assert.has_error(function() c:get({}) end)
        assert.has_error(function() blobcache.new(-1) end)
        assert.has_error(function() blobcache.new(1.5) end)
        assert.has_error(function() blobcache.new(2, -1) end)
    end)

    it("answers as ron.base.lru over random operations (seed 2511)", function()
        local seed = 2511
        print("blobcache property seed " .. seed)
        math.randomseed(seed)
        for _, cap in ipairs({ 1, 2, 3, 7, 20 }) do
            local c, ref = blobcache.new(cap, 1048576), lru.new(cap)
            for step = 1, 5000 do
                local k = "key" .. math.random(1, 3 * cap + 2)
                if math.random() < 0.5 then
                    local v = { tostring(step), string.rep("z", math.random(0, 9)) }
                    c:put(k, v[1], v[2])
                    ref:put(k, v)
                else
                    assert.same(ref:get(k), c:get(k), "cap " .. cap .. " step " .. step)
                end
            end
        end
    end)

    it("finds keys whose hashes share slots (linear probing)", function()
        local c = blobcache.new(4) -- 8 slots
        local keys = {}
        for i = 1, 4 do keys[i] = "p" .. i end
        for _, k in ipairs(keys) do c:put(k, k .. "!") end
        for _, k in ipairs(keys) do assert.same({ k .. "!" }, c:get(k)) end
        local seen = {}
        for i = 1, 200 do
            local s = bit.band(require("ron.base.offheap").hash("q" .. i), 7)
            seen[s] = (seen[s] or 0) + 1
        end
        local n = 0
        for _ in pairs(seen) do n = n + 1 end
        assert.equal(8, n) -- the hash spreads over every slot
    end)

    it("costs memory as it fills, not at new()", function()
        local rss_kb = S.rss_kb
        local before = rss_kb()
        local c = blobcache.new(1000000) -- 2 x 512 MB of arenas, 2 x 16 MB of index
        local grew = rss_kb() - before
        assert.is_true(grew < 8192, "new() made " .. grew .. " KB resident")
        c:put("k", "v")
        assert.same({ "v" }, c:get("k"))
    end)

    it("holds its entries off the Lua heap", function()
        local c = blobcache.new(20000)
        local before = S.settled_heap_kb()
        for i = 1, 40000 do
            c:put("wlt:k:principal:" .. i, string.rep("b", 32), "201", "application/json",
                  '{"transfer_id":"' .. i .. '","status":"committed"}\n')
        end
        local grew_kb = S.settled_heap_kb() - before
        assert.is_true(c:count() >= 20000)
        assert.same({ string.rep("b", 32), "201", "application/json",
                      '{"transfer_id":"40000","status":"committed"}\n' },
                    c:get("wlt:k:principal:40000"))
        -- (an lru of the same 40,000 entries holds ~5 MB of Lua objects)
        assert.is_true(grew_kb < 64, "the Lua heap grew " .. grew_kb .. " KB")
    end)
end)
