-- Bounded channels of one scheduler (ron.base.task): a FIFO ring of capacity cap, its
-- receivers (waiters) and the Busy count of its name. A channel keeps its scheduler state
-- as ch.S; select only takes channels of the running scheduler.
local check = require("ron.base.task.check")
local wait = require("ron.base.task.wait")

local error, getmetatable, ipairs, setmetatable, tostring, type =
    error, getmetatable, ipairs, setmetatable, tostring, type
local floor, format, remove = math.floor, string.format, table.remove
local check_ms = check.check_ms
local wake = wait.wake

local M = {}

local Channel = {}
Channel.__index = Channel

function M.channel(S, cap, name)
    local max = S._M.MAX_CAP
    if type(cap) ~= "number" or cap ~= floor(cap) or cap < 1 or cap > max then
        error(format("channel: cap must be an integer in 1..%d, got %s", max, tostring(cap)), 2)
    end
    if name == nil then name = "queue" end
    if type(name) ~= "string" or name == "" then
        error("channel: name must be a non-empty string", 2)
    end
    local ch = setmetatable({ S = S, name = name, _cap = cap, buf = {}, head = 1, n = 0,
                              receivers = {}, closed = false }, Channel)
    ch.alone = { ch } -- recv's channel list
    S.channels[ch] = true
    S.dropped_total[name] = S.dropped_total[name] or 0
    return ch
end

function Channel:cap() return self._cap end
function Channel:depth() return self.n end
function Channel:is_closed() return self.closed end

-- Hands v to the oldest waiting receiver; false when none waits.
local function hand_over(ch, v)
    local rs = ch.receivers
    while #rs > 0 do
        local w = remove(rs, 1)
        if wake(ch.S, w, v, ch) then return true end
    end
    return false
end

function Channel:try_send(v)
    if v == nil then error("try_send: value must not be nil", 2) end
    if self.closed then return nil, "Closed" end
    if self.n == 0 and hand_over(self, v) then return true end
    if self.n >= self._cap then
        local dropped = self.S.dropped_total
        dropped[self.name] = dropped[self.name] + 1
        return nil, "Busy"
    end
    local cap = self._cap
    self.buf[(self.head - 1 + self.n) % cap + 1] = v
    self.n = self.n + 1
    return true
end

local function pop(ch)
    local v = ch.buf[ch.head]
    ch.buf[ch.head] = nil
    ch.head = ch.head % ch._cap + 1
    ch.n = ch.n - 1
    return v
end

-- Receivers still wake with "Closed" once the buffer is empty; buffered values stay
-- receivable.
function Channel:close()
    if self.closed then return false end
    self.closed = true
    local rs = self.receivers
    self.receivers = {}
    for _, w in ipairs(rs) do wake(self.S, w, nil, "Closed") end
    return true
end

-- The first value of any of chs (in argument order when several hold one). Buffered
-- values are still delivered after shutdown (the drain empties queues); only an empty
-- wait is canceled. The waiter keeps chs (w.chs) to leave their receiver lists.
local function select_recv(S, fname, chs, timeout_ms, shielded)
    local n = #chs
    for i = 1, n do
        if getmetatable(chs[i]) ~= Channel or chs[i].S ~= S then
            error(fname .. ": argument " .. i .. " is not a channel", 3)
        end
    end
    local all_closed = true
    for i = 1, n do
        local ch = chs[i]
        if ch.n > 0 then return pop(ch), ch end
        if not ch.closed then all_closed = false end
    end
    if all_closed then return nil, "Closed" end
    local w = wait.new_waiter(wait.current(S, fname))
    w.chs = chs
    for i = 1, n do
        if not chs[i].closed then
            local rs = chs[i].receivers
            rs[#rs + 1] = w
        end
    end
    return wait.block(S, w, timeout_ms, not shielded)
end

-- select({ ch }) through the channel's own one-element list (made once, not per call).
function Channel:recv(timeout_ms)
    timeout_ms = check_ms(timeout_ms, "timeout_ms", "recv", true)
    local v, err = select_recv(self.S, "recv", self.alone or { self }, timeout_ms)
    if v == nil then return nil, err end
    return v
end

-- recv that a shutdown does not cancel: the wait for an answer certain to come (a
-- threadpool call's result, a database answer within its timeout, a store's turn or a
-- pool member handed back), which a stop must not cut half-way (a commit between two
-- statements). Timeout, Closed and the drain's abort still end it. (Looping on recv after
-- "Canceled" instead turns the loop without sleeping until the answer comes.)
function Channel:recv_through_shutdown(timeout_ms)
    timeout_ms = check_ms(timeout_ms, "timeout_ms", "recv_through_shutdown", true)
    local v, err = select_recv(self.S, "recv_through_shutdown", self.alone or { self },
                               timeout_ms, true)
    if v == nil then return nil, err end
    return v
end

-- select({ch1, ch2, ...}[, timeout_ms]): receive-or-shutdown over several channels.
-- "Closed" only when every channel is closed and empty.
function M.select(S, chs, timeout_ms)
    if type(chs) ~= "table" or #chs == 0 then
        error("select: expects a non-empty list of channels", 2)
    end
    timeout_ms = check_ms(timeout_ms, "timeout_ms", "select", true)
    return select_recv(S, "select", chs, timeout_ms)
end

return M
