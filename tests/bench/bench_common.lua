-- bench_common.lua: what the benchmarks run by the host share (tests/bench/README.md):
-- the BENCH line writer and the machine readings printed next to every figure.
--
--   local B = require "bench_common"      -- the script's directory is on package.path
--   local emit = B.emitter(opts.out)      -- emit(json): "BENCH <json>" on stdout, and
--                                         -- appended to the --out file when given
--   B.loadavg()                           -- "0.12 0.30 0.41" (or "?")
--   B.status_kb("VmRSS")                  -- a /proc/self/status field, kB (0 if absent)
local _M = {}

function _M.emitter(path)
    local out = path and assert(io.open(path, "a"))
    return function(line)
        print("BENCH " .. line)
        if out then
            out:write("BENCH ", line, "\n")
            out:flush()
        end
        io.stdout:flush()
    end
end

local function read(path, how)
    local f = io.open(path, "r")
    if not f then return nil end
    local s = f:read(how)
    f:close()
    return s
end

function _M.loadavg()
    local s = read("/proc/loadavg", "*l")
    return s and s:match("^(%S+ %S+ %S+)") or "?"
end

function _M.status_kb(field)
    local s = read("/proc/self/status", "*a")
    return s and tonumber(s:match(field .. ":%s*(%d+)")) or 0
end

return _M
