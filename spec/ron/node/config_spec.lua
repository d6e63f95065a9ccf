-- The daemon's configuration as issue 27 item 2 has it (ron.node.cli, ron.node.product):
-- without a configuration file the whole product is composed (ledger, wallet, audit trail);
-- --meter-only and a pre-27 configuration file run the meter alone; the start's INFO line
-- lists only what differs from the defaults; --print-config prints every key.
local S = require("support")
local cli = require("ron.node.cli")
local schema = require("ron.node.schema")

local function configure(...)
    local args = { [0] = "examples/daemon.lua", ... }
    local cfg, err = cli.configure(args)
    assert(cfg, err)
    return cfg
end

describe("ron.node configuration (issue 27)", function()
    it("composes the whole product on the embedded defaults", function()
        local cfg = configure()
        assert.equal("all", cfg.systems)
        assert.equal("ron.ledger.exporter", cfg.exporter.module)
        assert.equal("examples/cards/default.lua", cfg.exporter.card)
        assert.equal("var/ledger.db", cfg.exporter.store.path)
        assert.equal("var/ledger.db", cfg.wallet.store.path)
        assert.equal(cfg.exporter.book, cfg.wallet.book)
        assert.equal("var/audit.key", cfg.audit.key_path)
        assert.same({ "ledger", "wallet", "audit" }, cfg.composed.systems)
    end)

    it("keeps the meter alone with --meter-only", function()
        local cfg = configure("--meter-only")
        assert.equal("meter", cfg.systems)
        assert.is_false(cfg.exporter)
        assert.is_false(cfg.wallet)
        assert.is_false(cfg.audit)
        assert.is_nil(cfg.composed)
    end)

    it("runs what a configuration file without `systems` configures (pre-27 files)", function()
        local p = S.tmp_file("return { window_len_s = 120 }")
        local cfg = configure("--config", p)
        os.remove(p)
        assert.equal("meter", cfg.systems)
        assert.is_false(cfg.exporter)
        assert.is_false(cfg.wallet)
        assert.is_false(cfg.audit)
        assert.is_nil(cfg.composed)
        -- a pre-27 file keeps exactly what it configures (a file ledger, a listener)
        p = S.tmp_file('return { ledger_dir = "elsewhere", listen = "127.0.0.1:0" }')
        cfg = configure("--config", p)
        os.remove(p)
        assert.equal("meter", cfg.systems)
        assert.equal("elsewhere", cfg.ledger_dir)
        assert.is_false(cfg.exporter)
        assert.is_false(cfg.wallet) -- a listener, yet no wallet composed
        assert.is_false(cfg.audit)
        assert.is_nil(cfg.composed)
        p = S.tmp_file('return { systems = "all", window_len_s = 120 }')
        cfg = configure("--config", p)
        os.remove(p)
        assert.equal("ron.ledger.exporter", cfg.exporter.module)
    end)

    it("composes no wallet without a listener, and keeps a configured exporter", function()
        local cfg = configure("--listen", "off")
        assert.is_false(cfg.wallet)
        assert.equal("ron.ledger.exporter", cfg.exporter.module)
        local p = S.tmp_file('return { systems = "all", ledger_dir = "elsewhere" }')
        cfg = configure("--config", p)
        os.remove(p)
        assert.is_false(cfg.exporter) -- the file ledger it names
        assert.is_false(cfg.wallet)
        assert.equal("var/audit.key", cfg.audit.key_path)
    end)

    it("logs only the keys that differ from the defaults", function()
        assert.equal("defaults", cli.describe_changed(configure()))
        assert.equal("defaults", cli.describe_changed(configure("--window", "300")))
        assert.equal("demo_rate=1000 window_len_s=60",
                     cli.describe_changed(configure("--demo", "1000", "--window", "60")))
        assert.equal("systems=meter", cli.describe_changed(configure("--meter-only")))
    end)

    it("prints every key with --print-config, each with its source", function()
        local cfg = configure("--print-config", "--window", "60")
        assert.equal("print", cfg.check)
        local text = cli.print_config(cfg)
        local n = 0
        for _ in text:gmatch("[^\n]+") do n = n + 1 end
        assert.equal(#schema.sorted_keys(schema.DEFAULTS), n)
        assert.truthy(text:find("\nwindow_len_s = 60  (flag)\n", 1, true))
        assert.truthy(text:find("\nshards = 64  (default)\n", 1, true))
        assert.truthy(text:find("\nexporter = {[^\n]*  %(systems=all%)\n"))
        assert.truthy(text:find("\nwallet = {[^\n]*  %(systems=all%)\n"))
    end)

    it("refuses an unknown systems value in one line", function()
        local cfg, err, code = cli.configure { [0] = "x.lua", "--systems", "some" }
        assert.is_nil(cfg)
        assert.equal(2, code)
        assert.truthy(err:find('systems must be "all" or "meter"', 1, true))
    end)
end)
