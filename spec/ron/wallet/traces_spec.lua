-- The loop VM's hot Lua records into traces (issue 25, docs/WALLET.md §8 "The loop VM's
-- trace compiles"): a closure made in a function (FNEW), its upvalues closed at an early
-- return (UCLO) and a Lua callback called from C (gsub's, "return to lower frame") are
-- not compiled by LuaJIT 2.1: every trace through such a function aborts, is retried and
-- is finally blacklisted, and the function runs in the interpreter. Each case calls one
-- function of the transfer's path in a loop that gets hot and checks, through LuaJIT's
-- trace events (jit.attach), that no trace aborted for one of those reasons in its file.
-- Under plain busted the offloaded store's case is pending (ctest lua-wallet-host runs it).
local S = require("support")
local A = require("ron.wallet.answer")
local dto = require("ron.wallet.dto")
local view = require("ron.ledger.view")
local committer = require("ron.wallet.committer")

local format = string.format
local in_host = pcall(function() return require("ffi").C.ra_wdto_decode end)

local AVOID = { "NYI: bytecode 50", "NYI: bytecode 51", "return to lower frame" }

-- fn() called n times in a loop of this file: -> the aborts located in file (a pattern on
-- the chunk's name), each "file:line: reason"
local function aborts_in(file, fn, n)
    local vmdef, jutil = require("jit.vmdef"), require("jit.util")
    local out = {}
    local function on_trace(what, _, func, pc, otr, oex)
        if what ~= "abort" then return end
        local info = jutil.funcinfo(func, pc)
        local why = vmdef.traceerr[otr] or tostring(otr)
        if why:find("%d", 1, true) then why = format(why, oex) end
        if (info.loc or ""):find(file) then
            for _, a in ipairs(AVOID) do
                if why:find(a, 1, true) then out[#out + 1] = info.loc .. ": " .. why end
            end
        end
    end
    jit.flush()
    jit.attach(on_trace, "trace")
    local ok, err = pcall(function()
        for _ = 1, n or 400 do fn() end
    end)
    jit.attach(on_trace)
    assert(ok, err)
    return out
end

describe("the transfer's hot Lua records into traces (issue 25)", function()
    before_each(function()
        if not jit then pending("not LuaJIT") end
    end)

    it("an answer's hex (answer.hex) aborts no trace", function()
        local id = ("\1\35\69\103\137\171\205\239"):rep(2)
        assert.equal("0123456789abcdef0123456789abcdef", A.hex(id))
        assert.equal("", A.hex(""))
        assert.equal(("00ff"):rep(40), A.hex(("\0\255"):rep(40))) -- (beyond one format)
        -- (the one hex, ron.ledger's)
        assert.same({}, aborts_in("ron/ledger/init%.lua", function() return A.hex(id) end))
    end)

    it("a JSON string's escape (dto.jstr) aborts no trace", function()
        assert.equal('a\\u0022b\\u005c\\u000a', dto.jstr('a"b\\\n'))
        assert.same({}, aborts_in("dto%.lua", function() return dto.jstr('a"b\n') end))
    end)

    it("the plan's wants (view.wants) abort no trace", function()
        local USD = { code = "USD", scale = 2 }
        local reqs = {}
        for k = 1, 4 do
            reqs[k] = { intent = "i" .. k, movements = {
                { from = format("P%015d", k), to = ("S"):rep(16), asset = USD, amount = 1 } } }
        end
        local w = view.wants(reqs)
        assert.equal(5, #w.ids)
        assert.equal(4, #w.payers)
        assert.same({}, aborts_in("view%.lua", function() return view.wants(reqs) end))
    end)

    it("a job's check for a payer held apart (committer.run_apart) aborts no trace", function()
        local self = { held = { apart_of = {}, suspect = function() return false end } }
        local job = { kind = "money", r = { from = ("P"):rep(16) } }
        assert.is_false(committer.run_apart(self, job))
        assert.same({}, aborts_in("committer%.lua",
                                  function() return committer.run_apart(self, job) end))
    end)

    it("a primitive's lookup on the offloaded SQLite store aborts no trace", function()
        if not in_host then return pending("needs the host: ctest -R lua-wallet-host") end
        local path = S.tmpname("-traces.db")
        local s = assert(require("ron.ledger.store").open {
            backend = "sqlite", path = path, offload = true })
        local ok, err = pcall(function()
            local f = s.get_intents
            assert.is_function(f)
            assert.same({}, aborts_in("sqlite%.lua", function()
                assert(s.get_intents == f)
            end))
        end)
        s:close()
        for _, suf in ipairs { "", "-wal", "-shm" } do os.remove(path .. suf) end
        assert(ok, err)
    end)
end)
