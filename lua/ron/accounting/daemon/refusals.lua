-- ron.accounting.daemon.refusals: the plane's refusals into the audit trail (I-14,
-- AUD-I-35). Records that other processes on the plane refused (nginx workers: they have
-- no trail of their own; the meter keeps each refusal in a bounded ring in the plane,
-- ra_meter_refusals) become `reject` records with source "plane"; what the ring lost
-- before it was read becomes one `reject` record with reason "lost" and the exact count.
-- The daemon's own refusals are ingest's (source "ingest", with the HTTP status): skipped
-- here, so no refusal is recorded twice.
--
--   local r = refusals.new { meter = m, emit = function(kind, attrs) end,
--                            pid = uv.os_getpid(), interval_ms = 50 }  -- audit.interval_ms
--   task.spawn("audit_refusals", r.run, r)   -- until shutdown; r:drain() once more after
local task = require "ron.accounting.runtime.task"

local _M = {}
local R = {}
R.__index = R

local ROUNDS = 16 -- reads of up to 256 per turn: 4096 refusals per interval at most

function _M.new(o)
    assert(o.meter and o.emit, "refusals.new: meter and emit are required")
    return setmetatable({ meter = o.meter, emit = o.emit, pid = o.pid or -1,
                          interval_ms = o.interval_ms or 50, read = 0, own = 0, lost = 0,
                          errors = 0 }, R)
end

-- Reads what is there now (bounded); returns how many records it emitted.
function R:drain()
    local emitted = 0
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
    return emitted
end

function R:run()
    while true do
        self:drain()
        if not task.sleep(self.interval_ms) then return end -- Canceled: shutdown
    end
end

return _M
