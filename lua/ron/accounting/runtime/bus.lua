-- ron.accounting.runtime.bus: bus hooks (C-10): bounded per-subscriber queues, drop-oldest,
-- delivered by a task. Methods of the runtime object (ron.accounting.runtime.rt); init.lua
-- composes them.
local rt = require "ron.accounting.runtime.rt"

local pairs, tostring, type, error, setmetatable, pcall =
      pairs, tostring, type, error, setmetatable, pcall
local RT, log = rt.RT, rt.log
local Sub = {}
Sub.__index = Sub

function RT:publish(ev)
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

-- rt:subscribe(fn [, { cap = 1024 }]) -> sub; fn(event) runs in the subscriber's task
-- (it may yield); sub:close() stops it, sub.lagged counts the events it lost.
function RT:subscribe(fn, opts)
    if type(fn) ~= "function" then error("runtime:subscribe(fn): fn must be a function", 2) end
    local cap = (opts and opts.cap) or self.cfg.bus_cap
    self.next_sub = self.next_sub + 1
    local sub = setmetatable({ id = self.next_sub, rt = self, cap = cap, q = {}, head = 1,
                               n = 0, lagged = 0, delivered = 0,
                               wake = self.task.channel(1, "bus_wake") }, Sub)
    self.subs[sub.id] = sub
    sub.task = self.task.spawn("bus_subscriber-" .. sub.id, function()
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
    end)
    self.tasks[#self.tasks + 1] = sub.task
    return sub
end

function Sub:close()
    if self.closed then return end
    self.closed = true
    self.rt.subs[self.id] = nil
    self.q, self.n = {}, 0
    self.wake:close()
end
