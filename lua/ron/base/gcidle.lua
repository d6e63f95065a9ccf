-- ron.base.gcidle: the loop VM's collector, set once (pause, step multiplier) and stepped
-- while the loop would otherwise wait (issue 25, p99 <= 50 ms).
--
-- LuaJIT paces its incremental collector by allocation (stepmul units of work per KB) and
-- counts a swept object as cheap work, so each cycle put its whole sweep (every object of
-- the heap, live or dead: a heap of 50-70 MB at the daemon's gc_pause 400) into the one
-- group of requests that allocated at that moment: the wallet's slowest groups on
-- PostgreSQL were each a cycle's end, 40-60 ms of the loop's CPU against a median group's
-- 8 (docs/WALLET.md §8, "The collector's sweep, in the loop's idle time"). So:
-- - a lower step multiplier (the daemon's gc_stepmul, 50 against LuaJIT's 200): an
--   allocation pays a quarter of the work it did, the sweep spread over four times the
--   allocation;
-- - the rest in the loop's idle time: a prepare handle runs before the loop polls for I/O
--   and, when the poll would block (libuv's backend timeout is not 0) and a cycle is under
--   way, steps the collector there, up to a time budget per poll (idle_us).
-- The collector's work per cycle is unchanged; where it runs is what moves.
--
-- A cycle is taken as under way once the heap passed where the last one ended times the
-- pause (times EARLY, below), and until the cycle's end (a sentinel's finalizer). Before
-- that nothing is stepped: a step in the collector's pause starts a cycle.
--
--   local gcidle = require("ron.base.gcidle")
--   local g = gcidle.configure { pause = 400, stepmul = 50, idle_us = 1000 }
--       -- (once, on the loop; each key optional: pause and stepmul left as they are when
--       -- absent, no stepper when idle_us is absent or 0: g is then nil)
--   g.stats   -- { idle_steps, cycles, idle_cycles }: steps made idle, cycles ended, and
--             -- of those, ended by an idle step
--   g:stop()
--   gcidle.current   -- the stepper running in this VM, or nil (ron_lua_gc_cycles_total,
--                    -- ron.base.task's metrics: one collector per VM, one stepper)
local uv = require("luv")

local collectgarbage, newproxy, setmetatable, getmetatable, hrtime =
      collectgarbage, newproxy, setmetatable, getmetatable, uv.hrtime

local _M = {}

-- The pause in force (collectgarbage "setpause" answers the previous value).
local function pause_now()
    local p = collectgarbage("setpause", 200)
    collectgarbage("setpause", p)
    return p
end

-- Where the next cycle is taken as under way: the heap at a cycle's end times the pause,
-- times EARLY. The collector's own mark is its estimate (the live heap) times the pause,
-- and the heap at the sentinel's finalizer holds more than the live heap (what was
-- allocated while the sweep and the finalizers ran: 24 MB where the estimate was ~19 in a
-- synthetic heap at pause 400, whose cycles started near 76 MB and ended at ~86, below
-- 24 x 4), so without it the mark was passed only as the cycle ended, if at all. Under it,
-- an idle step may start a cycle a little early: a mark and sweep more now and then, in
-- time the loop had idle.
_M.EARLY = 0.75

local G = {}
G.__index = G

local function due(self)
    return collectgarbage("count") * pause_now() / 100 * self.early
end

-- A sentinel re-armed from its own finalizer: each call marks a cycle's end.
local function arm(self)
    local u = newproxy(true)
    getmetatable(u).__gc = function()
        if self.stopped then return end
        self.stats.cycles = self.stats.cycles + 1
        self.running, self.due_kb = false, due(self)
        arm(self)
    end
end

-- Steps while the cycle lasts and the budget holds. (A step that ends the cycle has run
-- its finalizers, the sentinel's among them: that call already moved the mark.)
local function step_idle(self)
    local t_end = hrtime() + self.budget_ns
    repeat
        self.stats.idle_steps = self.stats.idle_steps + 1
        if collectgarbage("step", 0) then
            self.stats.idle_cycles = self.stats.idle_cycles + 1
            return
        end
    until hrtime() >= t_end
end

local function on_prepare(self)
    -- (under way until the sentinel's finalizer: the sweep frees, so the heap falls back
    -- below the mark long before the cycle ends)
    if not self.running then
        if collectgarbage("count") < self.due_kb then return end
        self.running = true
    end
    if uv.backend_timeout() == 0 then return end -- (work is waiting: not idle)
    step_idle(self)
end

-- The stepper alone (configure's): budget_us per poll that would block.
function _M.start(budget_us, early)
    local self = setmetatable({ early = early or _M.EARLY, budget_ns = budget_us * 1000,
                                stats = { idle_steps = 0, cycles = 0, idle_cycles = 0 },
                                stopped = false, running = false,
                                handle = uv.new_prepare() }, G)
    self.due_kb = due(self)
    arm(self)
    self.handle:start(function() on_prepare(self) end)
    self.handle:unref() -- (stepping never keeps the loop alive)
    if _M.current then _M.current:stop() end
    _M.current = self
    return self
end

function _M.configure(o)
    if o.pause then collectgarbage("setpause", o.pause) end
    if o.stepmul then collectgarbage("setstepmul", o.stepmul) end
    if not o.idle_us or o.idle_us <= 0 then return nil end
    return _M.start(o.idle_us, o.early)
end

function G:stop()
    if _M.current == self then _M.current = nil end
    self.stopped = true
    if not self.handle:is_closing() then self.handle:close() end
end

return _M
