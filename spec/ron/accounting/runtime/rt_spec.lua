-- ron.accounting.runtime.rt: the shape every runtime concern shares (rt.class, rt.object).
require("support")
local rt = require("ron.accounting.runtime.rt")
local exporters = require("ron.accounting.export.exporters")

describe("ron.accounting.runtime.rt", function()
    it("class: a methods table, its own __index, published under its name", function()
        local mod = {}
        local C = rt.class(mod, "Thing")
        assert.equal(C, mod.Thing)
        assert.equal(C, C.__index)
        function C:hello() return "hi " .. self.name end
        assert.equal("hi x", setmetatable({ name = "x" }, C):hello())
    end)

    it("object: takes the named deps from o, nothing else, beside its own state", function()
        local C = rt.class({}, "Thing")
        local o = { task = "T", cfg = "CFG", extra = "not taken" }
        local state = { n = 0 }
        local obj = rt.object(C, o, "task cfg audit", state)
        assert.equal(state, obj)
        assert.equal(C, getmetatable(obj))
        assert.equal("T", obj.task)
        assert.equal("CFG", obj.cfg)
        assert.is_nil(obj.audit) -- named, absent from o
        assert.is_nil(obj.extra) -- in o, not named
        assert.equal(0, obj.n)
    end)
end)

describe("ron.accounting.export.exporters.stats", function()
    it("is a copy of the exporter's counts", function()
        local e = { counts = { ok = 2, dup = 1 } }
        local s = exporters.stats(e)
        assert.same({ ok = 2, dup = 1 }, s)
        s.ok = 99
        assert.equal(2, e.counts.ok)
    end)
end)
