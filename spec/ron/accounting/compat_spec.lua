-- The old module names still load (forwarding stubs for one release: 0.1's, and those that
-- moved to ron.base, ron.node and ron.ledger in issue 26), each as the very table of its new
-- name; the packages themselves use only the new names; and an operator's configuration
-- that names an old module still builds what it built.
local S = require("support")
local compat = require("ron.accounting.compat")

-- Loading every module needs the host (its C modules, the threadpool's pool VMs with the
-- core's symbols): ctest lua-compat-host. Plain busted checks the files only.
local in_host = package.preload["ron.base.net.http_server"] ~= nil

describe("ron.accounting.compat", function()
    local forwards = in_host and it or pending
    forwards("forwards every old name to the same table as its new name", function()
        local n = 0
        for old, new in pairs(compat.RENAMED) do
            local ok, got = pcall(require, old)
            assert(ok, old .. ": " .. tostring(got))
            assert.equal(require(new), got, old .. " is not " .. new)
            n = n + 1
        end
        assert.equal(52, n)
    end)

    it("builds the ledger's exporter from a configuration naming its old module", function()
        local plugins = require("ron.node.plugins")
        local rate = require("ron.ledger.rate")
        local card = assert(rate.new({ version = "compat.1", currency = { code = "USD", scale = 2 },
                                       period = "month",
                                       dimensions = { bytes = { price = 1 } } }, "compat card"))
        local e = assert(plugins.new("exporter", {
            module = "ron.accounting.export.exporters.ledger",
            store = require("ron.ledger.store.memory").new(), card = card }, ""))
        assert.equal(getmetatable(e), getmetatable(assert(require("ron.ledger.exporter").new {
            store = require("ron.ledger.store.memory").new(), card = card })))
        assert.equal(require("ron.ledger.exporter"),
                     require("ron.accounting.export.exporters.ledger"))
    end)

    it("runs a daemon script written for ron.accounting.daemon: the same module", function()
        assert.equal(require("ron.node"), require("ron.accounting.daemon"))
        assert.equal(require("ron.node").main, require("ron.accounting.daemon").main)
    end)

    it("has a stub file at every old path, and no module of the package uses an old name",
       function()
        for old in pairs(compat.RENAMED) do
            local rel = old:gsub("%.", "/")
            local f = io.open(S.root .. "lua/" .. rel .. ".lua")
                      or io.open(S.root .. "lua/" .. rel .. "/init.lua")
            assert(f, "no stub for " .. old)
            local body = f:read("*a")
            f:close()
            assert.matches('require%("ron%.accounting%.compat"%)%.forward%(%.%.%.%)', body)
        end
        local p = assert(io.popen("cd " .. S.shell_quote(S.root ~= "" and S.root or ".")
            .. " && grep -rlE 'require[ (]*\"ron\\.accounting\\.' lua examples tests spec"))
        local offenders = {}
        for file in p:lines() do
            local fh = assert(io.open(S.root .. file))
            local text = fh:read("*a")
            fh:close()
            if not text:find('require("ron.accounting.compat").forward(...)', 1, true) then
                for name in text:gmatch('require[%s%(]*"(ron%.accounting%.[%w_%.]+)"') do
                    if compat.RENAMED[name] then offenders[#offenders + 1] = file .. ": " .. name end
                end
            end
        end
        p:close()
        assert.same({}, offenders)
    end)
end)
