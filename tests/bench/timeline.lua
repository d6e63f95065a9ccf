-- timeline.lua: bench-ledger-rating-pg's --timeline N (issue 25): the store calls of the
-- daemon case's N-th put_many as the loop saw them, each from when the engine made it to
-- when its answer was back (its pack, its queue, the call on its connection, its unpack),
-- in ms from the put_many's start; then how its wall time splits between time with a store
-- call in flight and time with none (the loop's own work), and how long the runtime's part
-- before it took (from the previous put_many's end: the answers, the next window's puts). A put_many whose calls cover little of its time is held by
-- the loop; one whose calls cover most of it, by the store; the two overlap only where a
-- call is in flight while the loop works (lanes, or a task beside it).
--
--   local TL = require("timeline")
--   local tl = TL.new(clock)                -- clock: seconds
--   B.instrument(s, clock, tl:hook())       -- every call of the store goes through it
--   tl:begin(watch); ...put_many...; tl:done(label)  -- around every put_many; the calls of
--                                           -- the one begun with watch true are kept
--   if tl.label then tl:print() end         -- after the case: that put_many's timeline
local format, concat = string.format, table.concat

local T = {}
T.__index = T

local _M = {}

function _M.new(clock)
    return setmetatable({ clock = clock, on = false, calls = {}, t0 = 0, t1 = 0,
                          last_end = nil, gap = nil, label = nil }, T)
end

-- (an apply's ops by name, "name xK" for K in a row)
local function ops_of(ops)
    if type(ops) ~= "table" then return "" end
    local out, last, k = {}, nil, 0
    local function flush()
        if last then out[#out + 1] = k > 1 and format("%s x%d", last, k) or last end
    end
    for _, op in ipairs(ops) do
        local n = type(op) == "table" and tostring(op[1]) or "?"
        if n == last then k = k + 1 else flush(); last, k = n, 1 end
    end
    flush()
    return " (" .. #ops .. " ops: " .. concat(out, ", ") .. ")"
end

function T:hook()
    return function(name, t0, t1, first)
        if not self.on then return end
        self.calls[#self.calls + 1] = { t0, t1, name, name == "apply" and ops_of(first) or "" }
    end
end

function T:begin(watch)
    if not watch then return end
    self.calls, self.on, self.t0 = {}, true, self.clock()
    self.gap = self.last_end and self.t0 - self.last_end
end

function T:done(label)
    self.last_end = self.clock()
    if not self.on then return end
    self.on, self.t1, self.label = false, self.last_end, label
end

-- the time covered by at least one call (calls in start order)
local function covered(calls)
    local sum, hi = 0, -math.huge
    for _, c in ipairs(calls) do
        local a, b = c[1], c[2]
        if b > hi then
            sum = sum + b - math.max(a, hi)
            hi = b
        end
    end
    return sum
end

function T:print()
    local ms = function(t) return (t - self.t0) * 1e3 end
    print(format("    timeline of %s (ms from its start; each store call from the engine's "
                 .. "call to its answer back):", self.label))
    self.label = nil
    for _, c in ipairs(self.calls) do
        print(format("      %8.2f - %8.2f  %7.2f  %s%s", ms(c[1]), ms(c[2]),
                     (c[2] - c[1]) * 1e3, c[3], c[4]))
    end
    table.sort(self.calls, function(a, b) return a[1] < b[1] end)
    local wall = (self.t1 - self.t0) * 1e3
    local busy = covered(self.calls) * 1e3
    print(format("      %.2f ms in all: %.2f ms with a store call in flight, %.2f ms with "
                 .. "none (the loop's own work)%s", wall, busy, wall - busy,
                 self.gap and format("; %.2f ms before it since the previous put_many ended "
                                     .. "(the runtime's part: answers, the next puts)",
                                     self.gap * 1e3) or ""))
end

return _M
