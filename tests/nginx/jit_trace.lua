-- The JIT trace observer both hot-path checks share: spec/ron/accounting_hotpath_spec.lua
-- (record() under busted) and tests/nginx/hotpath.lua (log() inside an nginx worker). Both
-- load it with dofile (it is a test helper, not part of the package).
--
-- observer(loop_fn, benign) -> on_trace (for jit.attach(on_trace, "trace")), ev:
--   ev.loops          root traces of loop_fn that link back to themselves ("loop")
--   ev.roots_in_loop  root traces that started in loop_fn
--   ev.stitches       traces ended by stitching (a call the JIT cannot compile inline)
--   ev.aborts         "reason at location" of each abort in loop_fn or in ron/accounting/*
--                     (the runner's own code may get hot and abort meanwhile: not counted)
--   ev.benign         aborts benign(msg, in_loop) declared harmless, counted apart
local util = require("jit.util")
local vmdef = require("jit.vmdef")

local M = {}

-- The abort's reason with its argument filled in (e.g. "NYI: bytecode %d").
local function reason(otr, oex)
    local msg = vmdef.traceerr[otr] or tostring(otr)
    if type(oex) == "number" and msg:find("%d", 1, true) then
        msg = msg:format(oex)
    elseif oex ~= nil and msg:find("%s", 1, true) then
        msg = msg:format(tostring(oex))
    end
    return msg
end

function M.observer(loop_fn, benign)
    local started = {}
    local ev = { loops = 0, roots_in_loop = 0, stitches = 0, aborts = {}, benign = 0 }
    local function on_trace(what, tr, func, pc, otr, oex)
        if what == "start" then
            started[tr] = func
            if func == loop_fn and not otr then ev.roots_in_loop = ev.roots_in_loop + 1 end
        elseif what == "stop" then
            local info = util.traceinfo(tr)
            if info.linktype == "stitch" then ev.stitches = ev.stitches + 1 end
            if started[tr] == loop_fn and info.linktype == "loop" then ev.loops = ev.loops + 1 end
        elseif what == "abort" then
            local fi = util.funcinfo(func, pc)
            local ours = started[tr] == loop_fn or func == loop_fn
                         or tostring(fi.source):find("ron/accounting", 1, true)
            if not ours then return end
            local msg = reason(otr, oex)
            if benign(msg, started[tr] == loop_fn) then
                ev.benign = ev.benign + 1
            else
                ev.aborts[#ev.aborts + 1] = ("%s at %s"):format(msg, tostring(fi.loc))
            end
        end
    end
    return on_trace, ev
end

return M
