-- wallet_tail.lua: where a transfer's tail goes, second by second (issue 25, p99 <= 50 ms),
-- for tests/bench/bench-wallet.lua.
--
--   local WT = require("wallet_tail")
--   local p = WT.new()           -- a case's probe; its clock starts at the first record
--   p:request(t_ns, us)          -- a request answered at t_ns after us in the server
--   p:group(t_ns, n, us)         -- a group of n committed in us, ended at t_ns
--   p:lag(t_ns, us)              -- the loop's lag at t_ns
--   p:start_vm(gc_ms)  p:stop_vm() -- over the case, per second: the trace compiler's time
--                                -- (jit.attach: each trace's start to its stop or abort,
--                                -- recording included; traces, aborts and their reasons,
--                                -- flushes of the trace cache), the collector's cycles
--                                -- ended (a finalizer re-armed each cycle) and, with
--                                -- gc_ms, its samples (LuaJIT's sampling profiler at 1 ms,
--                                -- the samples in state G; starting the profiler FLUSHES
--                                -- every compiled trace: the case starts cold again, so
--                                -- not by default). It reads 10-20x LOW: a LuaJIT built
--                                -- to time its collector's steps counted 85-97 ms/s of the
--                                -- loop's collector where these samples found 3-6
--                                -- (docs/WALLET.md §8, "The slow groups were the
--                                -- collector's sweep"): a lower bound, not its time
--   p:lines(prefix)              -- one line per second of the case, the first 8 groups'
--                                -- commits, and a summary -> list
--
-- Per second: answers and their server time p50/p99/max (ms), the groups (count, size
-- p50/max, commit p50/max ms), the loop's lag max, the collector's cycles (and ms), and the
-- ms of the loop spent in the trace compiler (traces compiled, aborted). Cold seconds
-- against steady later ones are the warm-up (docs/WALLET.md §8: the trace compiler); a
-- steady spread is the groups', the collector's (its pauses) or the loop's.
local uv = require("luv")
local B = require("bench_common")
local pct = require("ron.base.percentile")

local format, floor, max = string.format, math.floor, math.max

local _M = {}
local P = {}
P.__index = P

function _M.new()
    return setmetatable({ t0 = nil, secs = {}, gc_runs = {}, flushes = 0, abort_why = {},
                          first = {} }, P)
end

local function sec(self, t_ns)
    self.t0 = self.t0 or t_ns
    local k = floor((t_ns - self.t0) / 1e9) + 1
    local s = self.secs[k]
    if not s then
        s = { server = {}, size = {}, commit = {}, lag = 0, gc_ms = 0, cycles = 0, jit_ms = 0,
              traces = 0, aborts = 0 }
        self.secs[k] = s
    end
    return s
end

function P:request(t_ns, us)
    local s = sec(self, t_ns)
    s.server[#s.server + 1] = us
end

function P:group(t_ns, n, us)
    local s = sec(self, t_ns)
    s.size[#s.size + 1], s.commit[#s.commit + 1] = n, us
    local first = self.first
    if #first < 8 then first[#first + 1] = format("%d in %.1f", n, us / 1000) end
end

function P:lag(t_ns, us)
    local s = sec(self, t_ns)
    s.lag = max(s.lag, us)
end

-- a userdata whose finalizer counts the cycle that collected it and makes the next one
local function sentinel(self)
    if not self.on_trace then return end -- stopped
    local u = newproxy(true)
    getmetatable(u).__gc = function()
        local s = sec(self, uv.hrtime())
        s.cycles = s.cycles + 1
        sentinel(self)
    end
end

function P:start_vm(gc_ms)
    if gc_ms then
        local prof = require("jit.profile")
        self.prof = prof
        prof.start("i1", function(_, samples, vmstate)
            if vmstate ~= "G" then return end
            local s = sec(self, uv.hrtime())
            s.gc_ms = s.gc_ms + samples
            self.gc_runs[#self.gc_runs + 1] = samples
        end)
    end
    local t_start
    local why = require("jit.vmdef").traceerr
    self.on_trace = function(what, _, _, _, err, info)
        local now = uv.hrtime()
        if what == "flush" then self.flushes = self.flushes + 1 end
        if what == "abort" then
            local e = format(why[err] or tostring(err), info)
            self.abort_why[e] = (self.abort_why[e] or 0) + 1
        end
        if what == "start" then t_start = now
        elseif (what == "stop" or what == "abort") and t_start then
            local s = sec(self, now)
            s.jit_ms = s.jit_ms + (now - t_start) / 1e6
            if what == "stop" then s.traces = s.traces + 1 else s.aborts = s.aborts + 1 end
            t_start = nil
        end
    end
    B.on_trace(self.on_trace)
    sentinel(self)
end

function P:stop_vm()
    if self.prof then self.prof.stop() end
    self.gc_ms = self.prof ~= nil
    if self.on_trace then B.off_trace(self.on_trace) end
    self.prof, self.on_trace = nil, nil
end

local function ms(v, q) return pct(v, q) / 1000 end

function P:lines(prefix)
    local out = {}
    for k = 1, #self.secs do
        local s = self.secs[k] or sec(self, self.t0 + (k - 1) * 1e9)
        out[#out + 1] = format("%s s%-3d %5d answers server p50 %6.1f p99 %6.1f max %6.1f | "
                               .. "%3d groups size p50 %3d max %3d commit p50 %6.1f max %6.1f "
                               .. "| lag max %5.1f | gc %d cycles %d ms | jit %5.1f ms (%d traces, %d aborted)",
                               prefix, k,
                               #s.server, ms(s.server, 0.5), ms(s.server, 0.99),
                               ms(s.server, 1), #s.size, pct(s.size, 0.5), pct(s.size, 1),
                               ms(s.commit, 0.5), ms(s.commit, 1), s.lag / 1000,
                               s.cycles, s.gc_ms, s.jit_ms, s.traces, s.aborts)
    end
    out[#out + 1] = format("%s the first groups (members in ms): %s", prefix,
                           table.concat(self.first, ", "))
    local runs = self.gc_runs
    if self.gc_ms then
        out[#out + 1] = format("%s collector steps seen (ms): %d, p99 %d, max %d", prefix,
                               #runs, pct(runs, 0.99), pct(runs, 1))
    end
    local list = {}
    for e, n in pairs(self.abort_why) do list[#list + 1] = { e, n } end
    table.sort(list, function(a, b) return a[2] > b[2] end)
    for i = 1, #list do list[i] = format("%s: %d", list[i][1], list[i][2]) end
    out[#out + 1] = format("%s trace cache flushes %d; aborts by reason: %s", prefix,
                           self.flushes, table.concat(list, "; ", 1, math.min(6, #list)))
    return out
end

return _M
