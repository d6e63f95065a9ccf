-- ron.node.refusals: the plane's refusals into the audit trail (I-14,
-- AUD-I-35). Records that other processes on the plane refused (nginx workers: they have
-- no trail of their own; the meter keeps each refusal in a bounded ring in the plane,
-- ra_meter_refusals) become `reject` records with source "plane"; what the ring lost
-- before it was read becomes one `reject` record with reason "lost" and the exact count.
-- The daemon's own refusals are ingest's (source "ingest", with the HTTP status): skipped
-- here, so no refusal is recorded twice.
--
--   local r = refusals.new { meter = m, emit = function(kind, attrs) end,
--                            pid = uv.os_getpid() }
--   task.spawn("audit_refusals", r.run, r)   -- until shutdown; r:drain() once more after
--
-- How often it reads: the plane's ring holds RING refusals (core/refusals.c); what arrives
-- faster than it is read laps the ring and is recorded as counted loss. An idle plane is
-- read every `interval_ms` (10: one FFI call, a ring of 1024 covers ~100k refusals/s); a
-- drain that found BUSY_SEEN or more is followed by reads every BUSY_MS for the next
-- BUSY_TURNS drains (a flood of refusals is read one by one up to ~1M/s, as long as the
-- trail keeps up with it: past that the audit queue sheds, counted and recorded as a gap).
local task = require("ron.base.task")

local _M = {}
local R = {}
R.__index = R

local ROUNDS = 16 -- reads of up to 256 per turn: 4096 refusals per interval at most
local BUSY_SEEN, BUSY_MS, BUSY_TURNS = 64, 1, 50

function _M.new(o)
    assert(o.meter and o.emit, "refusals.new: meter and emit are required")
    return setmetatable({ meter = o.meter, emit = o.emit, pid = o.pid or -1,
                          interval_ms = o.interval_ms or 10, read = 0, own = 0, lost = 0,
                          errors = 0, busy = 0, busy_turns = 0 }, R)
end

-- Reads what is there now (bounded); returns how many records it emitted and how many
-- entries it read (the daemon's own included).
function R:drain()
    local emitted, seen = 0, 0
    for _ = 1, ROUNDS do
        local list, lost = self.meter:refusals()
        if not list then -- another reader of the plane (RA_EBUSY): next turn
            self.errors = self.errors + 1
            break
        end
        if lost > 0 then
            self.lost = self.lost + lost
            self.emit("reject", { source = "plane", reason = "lost", count = lost })
            emitted = emitted + 1
        end
        seen = seen + #list
        for _, r in ipairs(list) do
            self.read = self.read + 1
            if r.pid == self.pid then
                self.own = self.own + 1
            else
                self.emit("reject", { source = "plane", reason = r.reason,
                                      tenant = r.tenant or "-", dimension = r.dimension or "-",
                                      pid = r.pid, plane_n = r.n, at_ms = r.at_ms })
                emitted = emitted + 1
            end
        end
        if #list < 256 then break end
    end
    return emitted, seen
end

-- How long to sleep after a drain that read `seen` entries (see the header).
function R:pause_after(seen)
    if seen >= BUSY_SEEN then self.busy = BUSY_TURNS end
    if self.busy > 0 then
        self.busy = self.busy - 1
        self.busy_turns = self.busy_turns + 1
        return BUSY_MS
    end
    return self.interval_ms
end

function R:run()
    while true do
        local _, seen = self:drain()
        if not task.sleep(self:pause_after(seen)) then return end -- Canceled: shutdown
    end
end

return _M
