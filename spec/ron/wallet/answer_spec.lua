-- ron.wallet.answer: the answer cache keeps a stored answer as bytes off the Lua heap
-- (ron.base.blobcache, issue 25) and gives back exactly what it kept.
local A = require("ron.wallet.answer")
local blobcache = require("ron.base.blobcache")

describe("ron.wallet.answer's cache of stored answers", function()
    local function wallet() return setmetatable({ answers = blobcache.new(8) },
                                                { __index = A.methods }) end

    it("gives back a stored answer's body hash, status, body, type and headers", function()
        local w = wallet()
        local h = string.rep("\171", 32)
        local a = A.answer(201, '{"transfer_id":"ab"}\n')
        a.stored = true
        w:_keep_answer({ kkey = "wlt:k:p:1", h = h }, a)
        local got_h, status, body, ctype, hd = A.cached(w, "wlt:k:p:1")
        assert.equal(h, got_h)
        assert.equal(201, status)
        assert.equal('{"transfer_id":"ab"}\n', body)
        assert.equal(A.JSON, ctype)
        assert.same({}, hd)
        -- with headers (none of today's stored answers has any: kept all the same)
        local p = A.prob("nonce_used", "nonce 1 was used", { ["Retry-After"] = 3, X = "y" })
        p.stored = true
        w:_keep_answer({ kkey = "wlt:k:p:2", h = h }, p)
        local _, st2, body2, ctype2, hd2 = A.cached(w, "wlt:k:p:2")
        assert.equal(p.status, st2)
        assert.equal(p.body, body2)
        assert.equal(p.ctype, ctype2)
        assert.same({ ["Retry-After"] = "3", X = "y" }, hd2)
    end)

    it("keeps only the ledger's stored outcomes", function()
        local w = wallet()
        w:_keep_answer({ kkey = "k", h = "h" }, A.prob("in_flight", "busy"))
        assert.is_nil(A.cached(w, "k"))
        local a = A.answer(201, "{}\n")
        a.stored = true
        w:_keep_answer({ h = "h" }, a) -- no Idempotency-Key: nothing to keep it under
        assert.equal(0, w.answers:count())
    end)
end)
