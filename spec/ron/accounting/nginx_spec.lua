-- ron.accounting.nginx outside nginx: the plane settings it derives from the sidecar's
-- settings file must be the daemon's own (the plane refuses a recorder whose settings
-- differ), and init() refuses to run outside nginx. The request path runs in a real
-- nginx: tests/nginx/ (ctest -L nginx).
local S = require("support")
local daemon = require("ron.node")
local gw = require("ron.accounting.nginx")

local function without_clock(t)
    local out = {}
    for k, v in pairs(t) do if k ~= "clock" then out[k] = v end end
    return out
end

describe("ron.accounting.nginx", function()
    it("mirrors the daemon's defaults for every plane setting", function()
        for k, v in pairs(gw.PLANE_DEFAULTS) do
            assert.same(daemon.DEFAULTS[k], v, "default of " .. k)
        end
    end)

    it("derives the recorder configuration the daemon derives, from one settings file", function()
        local files = {
            "return {}",
            "return { plane = '/run/ron-accounting/plane', var_dir = '/var/lib/ra' }",
            "return { window_len_s = 60, shards = 16, capacity_rows = 1000, "
                .. "dimensions = { 'egress' }, profile = 'micronode', listen = false }",
            "return { var_dir = '/tmp/x', pending_slices_cap = 100, tick_ms = 200, "
                .. "clock = function() return 1 end }",
        }
        for _, text in ipairs(files) do
            local path = S.tmp_file(text)
            local cfg = assert(daemon.configure { "--config", path })
            local want = daemon.recorder_config(cfg)
            local got = gw.recorder_config(assert(loadfile(path))())
            os.remove(path)
            assert.same(without_clock(want), without_clock(got), text)
            assert.equal(type(want.clock), type(got.clock), text)
        end
    end)

    it("init() says it runs inside nginx", function()
        local ok, err = pcall(gw.init, { config = "/nonexistent" })
        assert.is_false(ok)
        assert.matches("runs inside nginx's http Lua module", err)
    end)
end)
