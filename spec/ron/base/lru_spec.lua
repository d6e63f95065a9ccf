-- ron.base.lru: the two-generation bounded cache (I-7).
local lru = require("ron.base.lru")

describe("ron.base.lru", function()
    it("keeps the entries used in the last cap insertions and at most 2 * cap", function()
        local c = lru.new(3)
        for i = 1, 3 do c:put(i, "v" .. i) end
        assert.equal(3, c:count())
        c:put(4, "v4")                      -- young full: it becomes old
        assert.equal(4, c:count())
        assert.equal("v1", c:get(1))        -- a hit in old moves back to young
        for i = 5, 6 do c:put(i, "v" .. i) end -- young (4, 1, 5) full -> old; young (6)
        assert.equal(4, c:count())
        assert.is_nil(c:get(2))             -- dropped with the older generation
        assert.is_nil(c:get(3))
        assert.equal("v1", c:get(1))
        assert.equal("v6", c:get(6))
        for i = 1, 100 do c:put(100 + i, i) end
        assert.is_true(c:count() <= 6)
    end)

    it("replaces a value without counting it twice; delete and clear", function()
        local c = lru.new(2)
        c:put("a", 1)
        c:put("a", 2)
        assert.equal(1, c:count())
        assert.equal(2, c:get("a"))
        c:delete("a")
        c:delete("missing")
        assert.equal(0, c:count())
        assert.is_nil(c:get("a"))
        c:put("b", 1)
        c:clear()
        assert.equal(0, c:count())
    end)

    it("keeps nothing with a capacity of 0", function()
        local c = lru.new(0)
        c:put("a", 1)
        assert.is_nil(c:get("a"))
        assert.equal(0, c:count())
    end)
end)
