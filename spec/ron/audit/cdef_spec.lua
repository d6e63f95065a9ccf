-- lua/ron/audit/cdef.lua is what tools/gen-cdef.sh prints from include/ron/audit.h, and the
-- library exports every function it declares.
local S = require("support")

describe("ron.audit.cdef", function()
    it("is current (sh tools/gen-cdef.sh audit > lua/ron/audit/cdef.lua)", function()
        local out, rc = S.run("sh " .. S.shell_quote(S.root .. "tools/gen-cdef.sh") .. " audit")
        assert.equal(0, rc, out)
        assert.equal(S.read_file(S.root .. "lua/ron/audit/cdef.lua"), out)
    end)

    it("binds every function", function()
        local C = require("ron.audit.lib")
        for _, name in ipairs(require("ron.audit.cdef").functions) do
            assert.truthy(C[name], name)
        end
    end)
end)
