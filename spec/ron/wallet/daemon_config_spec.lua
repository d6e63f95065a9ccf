-- ron.wallet.daemon's own keys of the `wallet` block (docs/reference/config.md "wallet
-- keys"): one_tx reaches the engine; a bad value is refused with the key's name.
local wd = require("ron.wallet.daemon")

local function block(extra)
    local v = { tokens = { [string.rep("ab", 32)] = "operator" }, assets = { USD = 2 } }
    for k, x in pairs(extra) do v[k] = x end
    return v
end

describe("ron.wallet.daemon keys", function()
    it("one_tx: a boolean, the engine's switch (true unless false)", function()
        assert.is_true(wd.check_config(block {}, "wallet"))
        assert.is_true(wd.check_config(block { one_tx = false }, "wallet"))
        local ok, err = wd.check_config(block { one_tx = 0 }, "wallet")
        assert.is_nil(ok)
        assert.equal("wallet.one_tx must be a boolean", err)
        local opts = { var = "/tmp", log = function() end }
        assert.is_true(wd.new(block {}, opts).led.one_tx)
        assert.is_false(wd.new(block { one_tx = false }, opts).led.one_tx)
    end)
end)
