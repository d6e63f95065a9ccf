-- ron.accounting.runtime.bus: bus hooks (C-10): bounded per-subscriber queues, drop-oldest,
-- delivered by a task. Owns the subscribers and the count of events they lost.
local rt = require("ron.accounting.runtime.rt")

local pairs, tostring, type, error, setmetatable, pcall =
      pairs, tostring, type, error, setmetatable, pcall
local log = rt.log

local _M = {}

local B = rt.class(_M, "Bus")

local Sub = {}
Sub.__index = Sub

-- o.tasks: the runtime's task list (a subscriber's task is joined there)
function _M.new(o)
    return rt.object(B, o, "task cfg tasks", { subs = {}, bus_lagged = 0, next_sub = 0 })
end

function B:publish(ev)
    for _, sub in pairs(self.subs) do
        if sub.n >= sub.cap then -- drop the oldest
            sub.q[sub.head] = nil
            sub.head = sub.head + 1
            sub.n = sub.n - 1
            sub.lagged = sub.lagged + 1
            self.bus_lagged = self.bus_lagged + 1
        end
        sub.q[sub.head + sub.n] = ev
        sub.n = sub.n + 1
        sub.wake:try_send(true)
    end
end

local function deliver(sub, fn)
    while true do
        if sub.n > 0 then
            local ev = sub.q[sub.head]
            sub.q[sub.head] = nil
            sub.head = sub.head + 1
            sub.n = sub.n - 1
            local ok, err = pcall(fn, ev)
            if not ok then log("bus subscriber %d: %s", sub.id, tostring(err)) end
            sub.delivered = sub.delivered + 1
        else
            local _, err = sub.wake:recv()
            if err then break end -- closed (and nothing queued) or shutdown
        end
    end
end

-- bus:subscribe(fn [, { cap = 1024 }]) -> sub; fn(event) runs in the subscriber's task
-- (it may yield); sub:close() stops it, sub.lagged counts the events it lost.
function B:subscribe(fn, opts)
    if type(fn) ~= "function" then error("runtime:subscribe(fn): fn must be a function", 3) end
    local cap = (opts and opts.cap) or self.cfg.bus_cap
    self.next_sub = self.next_sub + 1
    local sub = setmetatable({ id = self.next_sub, bus = self, cap = cap, q = {}, head = 1,
                               n = 0, lagged = 0, delivered = 0,
                               wake = self.task.channel(1, "bus_wake") }, Sub)
    self.subs[sub.id] = sub
    sub.task = self.task.spawn("bus_subscriber-" .. sub.id, deliver, sub, fn)
    self.tasks[#self.tasks + 1] = sub.task
    return sub
end

-- At stop: each subscriber gets what is queued, then ends.
function B:close()
    for _, sub in pairs(self.subs) do sub.wake:close() end
end

function Sub:close()
    if self.closed then return end
    self.closed = true
    self.bus.subs[self.id] = nil
    self.q, self.n = {}, 0
    self.wake:close()
end

return _M
