-- ron.base.check (the caller-input checks written once) and ron.base.clock (the wall clock
-- in ms): what each answers, and that a misuse is blamed on the caller's line.
require("support")
local check = require("ron.base.check")
local clock = require("ron.base.clock")
local uv = require("luv")

describe("ron.base.check", function()
    it("options: a table of known keys passes; otherwise it raises at the caller", function()
        local KNOWN = { url = true, timeout_ms = true }
        local opts = { url = "x" }
        assert.equal(opts, check.options("m.new", opts, KNOWN))
        assert.has_error(function() check.options("m.new", nil, KNOWN) end,
                         "m.new: expects an options table")
        assert.has_error(function() check.options("m.new", { bogus = 1 }, KNOWN) end,
                         'm.new: unknown option "bogus"')
        local function new(o) check.options("m.new", o, KNOWN) end
        local ok, err = pcall(function() new(5) end)
        assert.is_false(ok)
        -- level 2 (the default): the line that called new(), this file
        assert.truthy(err:find("check_spec.lua:%d+: m.new: expects an options table"), err)
    end)

    it("section: false is off, a table's keys must be known, anything else is refused", function()
        local D = { dir = false, cap = 1 } -- a DEFAULTS table: a false value is still a key
        assert.is_true(check.section(false, "s", "{ dir = ... }", D))
        assert.is_true(check.section({ dir = "/x", cap = 2 }, "s", "{ dir = ... }", D))
        local ok, err = check.section("on", "s", "{ dir = ... }", D)
        assert.is_nil(ok)
        assert.equal("s must be false or a table { dir = ... }", err)
        ok, err = check.section({ cpa = 2 }, "s", "{ dir = ... }", D)
        assert.is_nil(ok)
        assert.equal("unknown key 's.cpa'", err)
    end)

    it("ranges: each key present is an integer within its bounds", function()
        local R = { cap = { 1, 10 } }
        assert.is_true(check.ranges({}, R, "s"))
        assert.is_true(check.ranges({ cap = 10 }, R, "s"))
        for _, bad in ipairs { 0, 11, 1.5, "3", 0 / 0, math.huge } do
            local ok, err = check.ranges({ cap = bad }, R, "s")
            assert.is_nil(ok)
            assert.equal("s.cap must be an integer in 1..10, got " .. tostring(bad), err)
        end
    end)

    it("policy: a table or userdata whose methods are functions", function()
        local M = { "go", "stop" }
        local p = { go = function() end, stop = function() end }
        assert.equal(p, check.policy(p, M, "pol"))
        assert.has_error(function() check.policy(nil, M, "pol") end,
                         "pol: a policy must be a table, got nil")
        assert.has_error(function() check.policy({ go = function() end }, M, "pol") end,
                         "pol: policy.stop must be a function, got nil")
        local raising = setmetatable({}, { __index = function() error("no") end })
        assert.has_error(function() check.policy(raising, M, "pol") end,
                         "pol: policy.go must be a function, got an error")
    end)
end)

describe("ron.base.clock", function()
    it("wall_ms: whole milliseconds of the wall clock, not os.time()'s whole seconds", function()
        local before = os.time() * 1000
        local t = clock.wall_ms()
        assert.equal(t, math.floor(t))
        assert.is_true(t >= before and t < before + 2000, tostring(t))
        -- ms resolution: over a few calls ~1 ms apart, some value is not a multiple of 1000
        local seen_ms = false
        for _ = 1, 20 do
            if clock.wall_ms() % 1000 ~= 0 then seen_ms = true end
            uv.sleep(1)
        end
        assert.is_true(seen_ms)
    end)
end)
