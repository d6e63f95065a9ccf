-- host-backlog-day-outage (issue 14, item 14): the ledger is down for a simulated day while
-- 10k streams keep sealing, on a fast clock; then it comes back. Every slice must reach the
-- ledger in order with exact totals, and memory must stay flat while the backlog grows
-- (the slices beyond the pending ring wait in the WAL).
--
--   ron-accounting run tests/host/backlog-day.lua WORKDIR [STREAMS] [HOURS]
--
-- Prints the figures (slices, backlog, live memory and RSS in the middle and at the end of
-- the outage, drain
-- rate) and exits non-zero on any failure.
local acct = require("ron.accounting")
local task = require("ron.base.task")
local runtime = require("ron.accounting.runtime")
local offload = require("ron.accounting.runtime.offload")
local exponential = require("ron.base.backoff.exponential")
local uv = require("luv")

if os.getenv("RA_PROFILE") then require("jit.p").start("F", os.getenv("RA_PROFILE")) end
local dir = assert(arg[1], "usage: backlog-day.lua WORKDIR [STREAMS] [HOURS]")
local STREAMS = tonumber(arg[2]) or 10000
local HOURS = tonumber(arg[3]) or 24
local WINDOW = 3600
-- Memory is compared between the middle and the end of the outage: by the middle every
-- slice the pending ring holds is in the pipeline (a worker per stream), so what grows after
-- that grows with the backlog. The test asserts on live memory (malloc's bytes in use plus
-- the Lua heap, after a full collection): RSS also holds what the allocators keep after a
-- free (LuaJIT's and glibc's free lists, fragmentation), which is printed, not asserted. The
-- WAL's frame index (a seq, an offset and an ACK byte per frame, 17 bytes; bounded by
-- wal_max_entries) is the one thing that may grow with the backlog: 32 bytes per spilled
-- slice are allowed, a slice kept in memory takes ten times that.
local MID = math.floor(HOURS / 2)
local PER_SPILLED = 32
local SAMPLES = math.min(3, MID)
local T0 = 1700000000 - 1700000000 % 3600
local FIG = {} -- the figures a BENCH line reports

local ffi = require("ffi")
ffi.cdef [[
struct ra_mallinfo2 { size_t arena, ordblks, smblks, hblks, hblkhd, usmblks, fsmblks,
                      uordblks, fordblks, keepcost; };
struct ra_mallinfo2 mallinfo2(void);
]]

-- { live = KiB in use (malloc + Lua heap), rss = KiB }
local function mem()
    collectgarbage("collect") -- live memory, not garbage the collector has not reached yet
    collectgarbage("collect")
    local mi = ffi.C.mallinfo2()
    local f = assert(io.open("/proc/self/status"))
    local s = f:read("*a")
    f:close()
    return { live = math.floor(tonumber(mi.uordblks + mi.hblkhd) / 1024 + collectgarbage("count")),
             rss = tonumber(s:match("VmRSS:%s*(%d+)")) }
end

local function fail(fmt, ...)
    io.stderr:write("backlog-day: FAILED: ", fmt:format(...), "\n")
    os.exit(1)
end

os.execute("rm -rf '" .. dir .. "' && mkdir -p '" .. dir .. "'")
local clock = { now = T0 + 5 }
local m = assert(acct.open {
    window_len_s = WINDOW, capacity_rows = STREAMS * 2, clock = function() return clock.now end,
    wal = { dir = dir .. "/wal", max_entries = STREAMS * (HOURS + 1), max_bytes = 2 ^ 31 },
    amnesia = false, pending_slices_cap = tonumber(os.getenv("RA_RING")) or 8192,
})
local ledger = assert(offload.file { dir = dir .. "/ledger", fsync = false })

-- The ledger, down then up: while down every put answers retry_network.
local down = true
local exporter = {
    put = function(_, s)
        if down then return "retry_network", "ledger down" end
        return ledger:put(s)
    end,
    put_many = function(_, slices)
        if down then
            local r = {}
            for i = 1, #slices do r[i] = { "retry_network", "ledger down" } end
            return r
        end
        return ledger:put_many(slices)
    end,
    head = function(_, t, d) return ledger:head(t, d) end,
    close = function() ledger:close() end,
}

local tenants = {}
for i = 1, STREAMS do tenants[i] = ("00000000-0000-4000-8000-%012x"):format(i) end

-- Waits until every slice in the pending ring is in the export pipeline (offered, routed:
-- the runtime has a worker for its stream), so two RSS readings compare like with like.
local function settle(rt)
    local t, last_streams, still = uv.now() + 60000, -1, 0
    while uv.now() < t do
        local offered, streams = 0, 0
        for _ in pairs(rt.offered) do offered = offered + 1 end
        for _ in pairs(rt.streams) do streams = streams + 1 end
        if offered >= m:pending_count() and rt.pending_slices:depth() == 0 then
            still = streams == last_streams and still + 1 or 0
            if still >= 4 then return end
        end
        last_streams = streams
        task.sleep(50)
    end
end

local main = task.spawn("backlog-day", function()
    local rt = runtime.start {
        meter = m, exporter = exporter, tick_ms = 20, clock = function() return clock.now end,
        backoff = exponential.new { base_ms = 50, cap_ms = 400 }, op_budget_ms = 3600000,
        drain_deadline_ms = 60000,
    }
    local m_start, m_mid, m_end, spilled_mid = mem(), nil, nil, nil
    for h = 0, HOURS - 1 do
        clock.now = T0 + h * WINDOW + 5
        for i = 1, STREAMS do assert(m:record(tenants[i], "u", "bytes", h + 1)) end
        clock.now = T0 + (h + 1) * WINDOW + 1
        -- wait until the window is sealed: pending + backlog hold every slice so far
        local want = (h + 1) * STREAMS
        local t = uv.now() + 60000
        while m:pending_count() + m:backlog().spilled < want do
            if uv.now() > t then fail("hour %d: only %d of %d slices sealed", h,
                                       m:pending_count() + m:backlog().spilled, want) end
            task.sleep(10)
        end
        -- Three readings before the middle and three before the end, the least of each
        -- kept: the workers' transient state (a put queued, a coroutine between retries)
        -- moves live memory by a MiB or two from one reading to the next, depending only on
        -- where each worker is in its backoff; the least reading is the floor under it.
        if h >= MID - SAMPLES and h < MID or h >= HOURS - SAMPLES then
            settle(rt)
            local r = mem()
            if h < MID then
                if not m_mid or r.live < m_mid.live then
                    m_mid, spilled_mid = r, m:backlog().spilled
                end
            elseif not m_end or r.live < m_end.live then
                m_end = r
            end
        end
    end
    settle(rt)
    m_end = m_end or mem()
    m_mid = m_mid or m_end
    spilled_mid = spilled_mid or m:backlog().spilled
    FIG.rss_mid, FIG.rss_end, FIG.live_mid, FIG.live_end = m_mid.rss, m_end.rss, m_mid.live,
                                                          m_end.live
    local b = m:backlog()
    print(("backlog-day: %d streams x %d hours = %d slices sealed while the ledger was down;"
           .. " %d in the pending ring, %d waiting in the WAL"):format(STREAMS, HOURS,
           STREAMS * HOURS, m:pending_count(), b.spilled))
    local MiB = function(k) return k / 1024 end
    print(("backlog-day: live memory %.1f MiB at the start, %.1f MiB after %d h, %.1f MiB after "
           .. "%d h; RSS %.0f, %.0f, %.0f MiB"):format(MiB(m_start.live), MiB(m_mid.live), MID,
           MiB(m_end.live), HOURS, MiB(m_start.rss), MiB(m_mid.rss), MiB(m_end.rss)))
    if b.spilled < STREAMS * HOURS - 8192 then fail("the backlog holds %d slices", b.spilled) end
    local allowed = (b.spilled - spilled_mid) * PER_SPILLED / 1024 + 1024
    if m_end.live - m_mid.live > allowed then
        fail("live memory grew with the backlog: %d KiB from hour %d to hour %d (%d more "
             .. "slices spilled, %d KiB allowed)", m_end.live - m_mid.live, MID, HOURS,
             b.spilled - spilled_mid, allowed)
    end
    -- The ledger comes back: everything drains, in order (the file ledger refuses gaps).
    down = false
    local t0 = uv.now()
    local total = STREAMS * HOURS
    local t = uv.now() + 600000
    local next_report = uv.now() + 5000
    while rt.exports.ok + rt.exports.dup < total do
        if uv.now() > t then fail("only %d of %d slices exported", rt.exports.ok, total) end
        if os.getenv("RA_PROGRESS") and uv.now() > next_report then
            next_report = uv.now() + 5000
            print(("progress: %d exported, pending %d, backlog %d"):format(rt.exports.ok,
                m:pending_count(), m:backlog().spilled))
        end
        task.sleep(20)
    end
    local secs = (uv.now() - t0) / 1000
    FIG.drain = total / secs
    print(("backlog-day: ledger up: %d slices exported in %.1f s (%.0f slices/s), gap %d, "
           .. "conflict %d"):format(total, secs, total / secs, rt.exports.gap or 0,
           rt.exports.conflict or 0))
    rt:stop()
    local w = rt:wait()
    if w.aborted ~= 0 then fail("%d runtime tasks aborted", w.aborted) end
    if m:pending_count() ~= 0 or m:backlog().spilled ~= 0 then
        fail("left pending %d, backlog %d", m:pending_count(), m:backlog().spilled)
    end
end)

uv.run("default")
local ok, err = main:join()
if not ok then fail("%s", tostring(err)) end
m:close()
-- Every stream's chain and total, by the ledger's own verify: 1 + 2 + ... + HOURS each.
local want = HOURS * (HOURS + 1) / 2
local p = assert(io.popen(("'%s' verify --totals '%s/ledger' 2>&1; echo \"::rc=$?\""):format(
    arg[-1], dir)))
local out = p:read("*a")
p:close()
if not out:find("::rc=0", 1, true) or not out:find("\nOK", 1, true) then
    fail("verify: %s", out:sub(-2000))
end
local streams = 0
for total in out:gmatch("total [%x-]+ bytes (%d+) ") do
    streams = streams + 1
    if tonumber(total) ~= want then fail("a stream totals %s, recorded %d", total, want) end
end
if streams ~= STREAMS then fail("verify listed %d streams of %d", streams, STREAMS) end
print(("backlog-day: verify OK: %d streams, each %d (exact), chains unbroken"):format(
    streams, want))
-- `make bench` collects a BENCH line (RA_BENCH_RESULTS): the drain rate, and live memory at
-- the end of the outage against the middle of it (the baseline of the same run: 1.0 = flat).
local results = os.getenv("RA_BENCH_RESULTS")
if results then
    local line = ('{"bench":"backlog-day","streams":%d,"hours":%d,"slices":%d,'
        .. '"live_mid_kib":%d,"live_end_kib":%d,"live_ratio":%.3f,"rss_mid_kib":%d,'
        .. '"rss_end_kib":%d,"drain_slices_per_s":%.0f}')
        :format(STREAMS, HOURS, STREAMS * HOURS, FIG.live_mid, FIG.live_end,
                FIG.live_end / FIG.live_mid, FIG.rss_mid, FIG.rss_end, FIG.drain)
    print("BENCH " .. line)
    local f = assert(io.open(results, "a"))
    f:write("BENCH ", line, "\n")
    f:close()
end
os.execute("rm -rf '" .. dir .. "'")
