-- ron.node.refusals (AUD-I-35): the plane's refusals become audit records;
-- the daemon's own are ingest's and are skipped; what the ring lost is one record with the
-- exact count. The meter's ring itself: tests/test-refusals.c.
require("support")
local acct = require("ron.accounting")
local refusals = require("ron.node.refusals")

local T = "123e4567-e89b-12d3-a456-426614174000"

local function meter()
    return assert(acct.open { capacity_rows = 64, shards = 1, window_len_s = 60,
                              host = "spec", clock = function() return 1700000000 end })
end

describe("ron.node.refusals", function()
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

    it("reads every BUSY_MS while refusals flood in, and every interval_ms when idle", function()
        local m = meter()
        local r = refusals.new { meter = m, pid = -1, interval_ms = 10, emit = function() end }
        assert.equal(10, r:pause_after(0))
        assert.equal(10, r:pause_after(63))
        assert.equal(1, r:pause_after(64)) -- a flood: 50 quick turns follow
        for _ = 1, 49 do assert.equal(1, r:pause_after(0)) end
        assert.equal(10, r:pause_after(0))
        assert.equal(50, r.busy_turns)
        m:close()
    end)

    it("records a flood of 100 bursts of 600 one by one (a fixed interval of 10 ms would lap)",
       function()
        -- Logical, not wall-clock: the writer and the reader are tasks on one loop; once busy,
        -- the reader wakes every 1 ms and the writer every 2 ms, so the reader drains each
        -- burst of 600 before the next (a ring of 1024 never laps), whatever the machine's load.
        local m = meter()
        local got = 0
        local r = refusals.new { meter = m, pid = -1, interval_ms = 10,
                                 emit = function() got = got + 1 end }
        require("support").run_task(function(task)
            local done = false
            -- the first burst meets an idle reader (a real flood: its first idle interval)
            for _ = 1, 600 do m:record(T, "alice", "no-such-dimension", 1) end
            task.spawn("writer", function()
                for _ = 2, 100 do
                    task.sleep(2)
                    for _ = 1, 600 do m:record(T, "alice", "no-such-dimension", 1) end
                end
                done = true
            end)
            while not done do
                local _, seen = r:drain()
                task.sleep(r:pause_after(seen))
            end
            r:drain()
        end)
        print(("refusals flood: %d read, %d lost, %d quick turns"):format(r.read, r.lost,
                                                                            r.busy_turns))
        assert.equal(60000, r.read)
        assert.equal(0, r.lost)
        assert.equal(60000, got)
        m:close()
    end)
end)
