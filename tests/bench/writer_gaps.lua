-- writer_gaps.lua: bench-wallet's --gaps (issue 25): how much of a transfer case the store's
-- writer spent without a batch's write phase, and what the next batch was doing meanwhile.
-- The engine's one-transaction batches (ron.ledger.engine.batch_atomic) each send ONE write
-- phase; between the end of one and the start of the next the writer has nothing of the
-- wallet's to do. Each such gap is put down to the last step the next batch had not reached
-- when the writer freed up:
--   gathering   not yet in commit_many (its cohort's requests arriving, HTTP, the lane's
--               gather waiting for them)
--   first read  in its first read (the intents, keys and nonces)
--   planning    reading its plan's state and planning
--   its turn    planned, waiting for the batch before to be released (the pipeline)
-- The engine's methods are wrapped on its class (hrtime around them, per task: a batch is
-- one task), so the figures need no change to the engine; a wrapped call costs ~1 us, a few
-- per batch of 32-64 transfers.
--
--   local WG = require("writer_gaps")
--   local mark = WG.mark(led) -- at a case's start; the first installs the wrappers (every
--                             -- engine of the process is counted from then on)
--   WG.print(name, mark)     -- after it
local B = require("bench_common")
local uv = require("luv")
local phases = require("ron.ledger.phases")

local format, running, around = string.format, coroutine.running, B.around

local _M = {}

-- the batch in flight per task: { t_in, t_read, t_plan, t_sent }
local per = setmetatable({}, { __mode = "k" })
local acc = { phases = 0, busy = 0, idle = 0, gathering = 0, first_read = 0, planning = 0,
              turn = 0 }
local last_done

local function now() return uv.hrtime() / 1e3 end -- us

local function note_gap(b, t_sent)
    if not last_done or t_sent <= last_done then return end
    local gap = t_sent - last_done
    acc.idle = acc.idle + gap
    local k
    if not b.t_in or b.t_in > last_done then k = "gathering"
    elseif not b.t_read or b.t_read > last_done then k = "first_read"
    elseif not b.t_plan or b.t_plan > last_done then k = "planning"
    else k = "turn" end
    acc[k] = acc[k] + gap
end

local installed = false
function _M.install(led)
    if installed then return end
    installed = true
    local L = getmetatable(led)
    around(L, "_batch", function()
        per[running()] = { t_in = now() }
    end, function() per[running()] = nil end)
    around(L, "_intents_of", function() return per[running()] end, function(b)
        if b and not b.t_read then b.t_read = now() end
    end)
    around(L, "_pipelined_plan", function() return per[running()] end, function(b)
        if b then b.t_plan = now() end
    end)
    -- the first phase after the plan is the batch's write phase (its reads come before)
    around(phases, "apply", function()
        local b = per[running()]
        if not (b and b.t_plan and not b.t_sent) then return nil end
        b.t_sent = now()
        note_gap(b, b.t_sent)
        return b
    end, function(b)
        if not b then return end
        local t = now()
        acc.phases, acc.busy = acc.phases + 1, acc.busy + (t - b.t_sent)
        last_done = t
    end)
end

function _M.mark(led)
    if led then _M.install(led) end
    local m = {}
    for k, v in pairs(acc) do m[k] = v end
    last_done = nil -- (a case's first phase follows no gap of its own)
    return m
end

function _M.print(name, mark)
    if not mark then return end
    local d = {}
    for k, v in pairs(acc) do d[k] = v - mark[k] end
    if d.phases == 0 then return end
    local ms = function(k) return d[k] / 1e3 end
    print(format("%-8s %-15s writer (--gaps): %d write phases, busy %.0f ms, idle %.0f ms "
                 .. "(%.0f %%); idle while the next batch was gathering %.0f ms, in its first "
                 .. "read %.0f, planning %.0f, planned and waiting its turn %.0f", name, "",
                 d.phases, ms("busy"), ms("idle"), 100 * d.idle / (d.idle + d.busy),
                 ms("gathering"), ms("first_read"), ms("planning"), ms("turn")))
end

return _M
