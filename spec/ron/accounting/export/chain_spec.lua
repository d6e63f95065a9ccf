-- ron.accounting.export.chain: the chain-admission rule, once (the twin of host/cli/chain.c).
local chain = require("ron.accounting.export.chain")

local Z = chain.ZERO
local A, B, C = ("a"):rep(32), ("b"):rep(32), ("c"):rep(32)

describe("ron.accounting.export.chain", function()
    it("links as ra_host_chain_link does: ok, back, gap, first, prev", function()
        assert.equal("ok", chain.link(0, Z, 1, Z))
        assert.equal("ok", chain.link(4, A, 5, A))
        assert.equal("back", chain.link(4, A, 4, A))
        assert.equal("back", chain.link(4, A, 1, Z))
        assert.equal("gap", chain.link(4, A, 6, A))
        assert.equal("first", chain.link(0, Z, 1, A))
        assert.equal("prev", chain.link(4, A, 5, B))
        -- before seq 1 the head's b3 is 32 zero bytes, whatever the caller passes
        assert.equal("ok", chain.link(0, A, 1, Z))
    end)

    it("admits: ok, dup (the head), below, gap, conflict, with the contract's details", function()
        assert.same({ "ok" }, { chain.admit(4, A, 5, A, B) })
        assert.same({ "dup", "seq 4 already stored" }, { chain.admit(4, A, 4, Z, A) })
        assert.same({ "below" }, { chain.admit(4, A, 4, Z, B) })
        assert.same({ "below" }, { chain.admit(4, A, 2, Z, A) })
        assert.same({ "gap", "head is seq 4" }, { chain.admit(4, A, 7, C, B) })
        assert.same({ "gap", "seq beyond 2^53" }, { chain.admit(4, A, 2 ^ 53 * 1ULL, A, B) })
        assert.same({ "conflict", "seq 1 must have a zero prev_b3" }, { chain.admit(0, Z, 1, A, B) })
        assert.same({ "conflict", "prev_b3 is not the b3 " .. ("61"):rep(32) .. " of seq 4" },
                    { chain.admit(4, A, 5, C, B) })
    end)

    it("tells dup from conflict below the head by what is stored at the seq", function()
        assert.same({ "dup", "seq 2 already stored" }, { chain.stored(2, B, B) })
        assert.same({ "conflict", "seq 2 is stored with b3 " .. ("62"):rep(32) },
                    { chain.stored(2, B, C) })
    end)
end)
