-- Configuration validation (the C-independent part; acct.open's errors from the core are
-- covered in spec/ron/accounting_spec.lua).
require("support")
local config = require("ron.accounting.binding.config")

describe("ron.accounting.binding.config", function()
    it("fills in the defaults without touching the caller's table", function()
        local cfg = { window_len_s = 60 }
        local out = assert(config.validate(cfg))
        assert.equal(60, out.window_len_s)
        assert.equal(config.DEFAULTS.shards, out.shards)
        assert.equal(config.DEFAULTS.capacity_rows, out.capacity_rows)
        assert.equal(config.DEFAULTS.pending_slices_cap, out.pending_slices_cap)
        assert.is_true(out.amnesia) -- no WAL in this build: RAM only is the default
        assert.same({ window_len_s = 60 }, cfg)
        assert.not_equal(config.DEFAULTS, out)
        assert.same(config.DEFAULTS, assert(config.validate(nil)))
    end)

    it("names the first unknown key in a stable order", function()
        for _ = 1, 5 do
            local ok, err = config.validate { zeta = 1, alpha = 2, shards = 4 }
            assert.is_nil(ok)
            assert.equal("InvalidArgument: unknown configuration key 'alpha'", err)
        end
        local ok, err = config.validate { [1] = "bytes" }
        assert.is_nil(ok)
        assert.equal("InvalidArgument: unknown configuration key '1'", err)
    end)

    it("reports unknown keys before bad values", function()
        local ok, err = config.validate { window_len_s = "x", shard = 4 }
        assert.is_nil(ok)
        assert.equal("InvalidArgument: unknown configuration key 'shard'", err)
    end)

    it("keeps uint32 fields from wrapping in the FFI", function()
        for _, v in ipairs { -1, 2 ^ 32, 2 ^ 32 + 60, 1e300, 0 / 0, 1 / 0 } do
            local ok, err = config.validate { capacity_rows = v }
            assert.is_nil(ok)
            assert.matches("^InvalidArgument: capacity_rows must be an integer in 0%.%.4294967295",
                           err)
        end
        assert.equal(4294967295, assert(config.validate { capacity_rows = 2 ^ 32 - 1 })
                                     .capacity_rows)
    end)

    it("checks every wal field, and a WAL means amnesia = false by default", function()
        local ok, err = config.validate { wal = { dir = "" } }
        assert.is_nil(ok)
        assert.equal("InvalidArgument: wal.dir is empty", err)
        ok, err = config.validate { wal = { dir = "/w", max_entries = 0 } }
        assert.is_nil(ok)
        assert.matches("wal.max_entries must be a positive integer", err, 1, true)
        ok, err = config.validate { wal = { dir = "/w", max_bytes = 1.5 } }
        assert.is_nil(ok)
        local out = assert(config.validate { wal = { dir = "/w", max_entries = 10 } })
        assert.is_false(out.amnesia)
        assert.equal(10, out.wal.max_entries)
        out = assert(config.validate { wal = { dir = "/w" }, amnesia = true })
        assert.is_true(out.amnesia) -- kept as given: the core refuses the contradiction
    end)

    it("accepts every documented key", function()
        local out = assert(config.validate {
            window_len_s = 120, shards = 8, capacity_rows = 10, pending_slices_cap = 10,
            dimensions = { "egress" }, amnesia = true, shm = "/tmp/x", clock = os.time,
            host = "edge-1", subject_key = string.rep("0f", 32),
        })
        assert.equal("edge-1", out.host)
        assert.equal(os.time, out.clock)
        assert.same({ "egress" }, out.dimensions)
    end)
end)
