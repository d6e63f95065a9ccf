-- ron.accounting.daemon.refusals (AUD-I-35): the plane's refusals become audit records;
-- the daemon's own are ingest's and are skipped; what the ring lost is one record with the
-- exact count. The meter's ring itself: tests/test-refusals.c.
require "support"
local acct = require "ron.accounting"
local refusals = require "ron.accounting.daemon.refusals"

local T = "123e4567-e89b-12d3-a456-426614174000"

local function meter()
    return assert(acct.open { capacity_rows = 64, shards = 1, window_len_s = 60,
                              host = "spec", clock = function() return 1700000000 end })
end

describe("ron.accounting.daemon.refusals", function()
    it("turns another process's refusals into reject records, each once", function()
        local m = meter()
        local got = {}
        local r = refusals.new { meter = m, pid = -1, -- every refusal is another process's
                                 emit = function(kind, attrs) got[#got + 1] = { kind, attrs } end }
        assert.is_nil(m:record(T, "alice", "no-such-dimension", 1))
        assert.is_nil(m:record("not-a-tenant", "alice", "bytes", 1))
        assert.equal(2, r:drain())
        assert.equal("reject", got[1][1])
        assert.equal("plane", got[1][2].source)
        assert.equal("invalid", got[1][2].reason)
        assert.equal(0, got[1][2].plane_n)
        assert.equal(1, got[2][2].plane_n)
        assert.equal(0, r:drain()) -- each once
        m:close()
    end)

    it("skips the daemon's own refusals (ingest records them) and counts what was lost", function()
        local m = meter()
        local got = {}
        local own = refusals.new { meter = m, pid = require("luv").os_getpid(),
                                   emit = function(kind, attrs) got[#got + 1] = { kind, attrs } end }
        for _ = 1, 1100 do m:record(T, "alice", "no-such-dimension", 1) end
        assert.equal(1, own:drain()) -- the one "lost" record: 1100 - 1024
        assert.same({ "reject", { source = "plane", reason = "lost", count = 76 } }, got[1])
        assert.equal(1024, own.own)
        m:close()
    end)
end)
