-- ron.base.offload: the gateway refuses an argument list luv would cut (luv hands a work
-- function at most 10 arguments and drops the rest; the gateway takes 3 of them).
local offload = require("ron.base.offload")

describe("ron.base.offload", function()
    it("refuses more than MAX_ARGS arguments for a pool body, naming the body", function()
        local pool = offload.pool("ron.base.offload_spec_bodies")
        local args = {}
        for i = 1, offload.MAX_ARGS + 1 do args[i] = i end
        local ok, err = pcall(pool.call, "some_body", nil, unpack(args))
        assert.is_false(ok)
        assert.matches("ron.base.offload_spec_bodies:some_body: at most 7 arguments", err, 1, true)
        assert.equal(0, offload.in_flight())
    end)

    it("wants the bodies' module by name", function()
        assert.has_error(function() offload.pool({}) end,
                         "offload.pool: expects the bodies' module name")
    end)
end)
