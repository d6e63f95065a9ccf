-- stages.lua: bench-ledger-rating's --stages (issue 25): where the loop thread's CPU goes in
-- a rated put_many, stage by stage. The per-batch methods of ron.ledger.exporter and of the
-- engine are wrapped on their classes (one getrusage(RUSAGE_THREAD) before and after each
-- call: ~20 calls of a put_many of 1024 slices, so the wrapping itself costs nothing that
-- shows); per-member functions are left alone (wrapped, their calls cost more than they
-- measure). Figures are inclusive: a stage holds the stages it calls (the engine's inside
-- the exporter's commit, the store calls inside both); a method called again inside itself
-- (a plan made again) counts once, at the outermost call. A stage that waits (a store call)
-- counts the loop's other work done meanwhile: none in the daemon's shape on SQLite (one
-- lane), but on PostgreSQL a put_many's lanes run at once, so there a stage also holds the
-- other lanes' work (only put_many's own figure is then the loop's share per slice).
--
--   local ST = require("stages")
--   local mark = ST.mark(exporter)    -- at a case's start; the first installs the wrappers
--                                     -- (on the shared classes: every exporter of the
--                                     -- process is counted from then on)
--   print(ST.line(mark, slices))      -- after it: CPU us per slice by stage
--   print(ST.alloc_line(mark, slices)) -- bytes the loop's VM allocated per slice by stage,
--                                     -- for a run with the collector stopped (--alloc)
--   print(ST.strings_line(mark, slices)) -- strings interned per slice by stage (looked up,
--                                     -- made), with a LuaJIT that counts them (nil without:
--                                     -- tests/bench/README.md "Inside LuaJIT")
local B = require("bench_common")
local phases = require("ron.ledger.phases")

local format = string.format

local _M = {}

local acc = {} -- label -> { calls, cpu seconds, depth, KB allocated, KB at the call,
--                            strings looked up, made, and both at the call }
local count = collectgarbage

-- A LuaJIT built with string counters (a local patch of lj_str_new, not Debian's) exports
-- ljstat_str(what): this thread's lj_str_new calls (0) and new strings (1).
local ffi = require("ffi")
pcall(ffi.cdef, "unsigned long long ljstat_str(int what);")
local ljstat = select(2, pcall(function() return ffi.C.ljstat_str end))
if type(ljstat) ~= "cdata" then ljstat = nil end
local function strs(what) return ljstat and tonumber(ljstat(what)) or 0 end

-- (KB: the heap's growth over the stage, which is what it allocated only while the
-- collector is stopped: ST.alloc_line)
local function wrap(tbl, name, label)
    if type(tbl[name]) ~= "function" or acc[label] then return end
    local a = { 0, 0, 0, 0, 0, 0, 0, 0, 0 }
    acc[label] = a
    B.around(tbl, name, function()
        if a[3] > 0 then return nil end -- (inside itself: the outer call counts)
        a[3], a[5], a[8], a[9] = 1, count("count"), strs(0), strs(1)
        return B.cpu_s(1)
    end, function(c0)
        if c0 then
            a[1], a[2], a[3] = a[1] + 1, a[2] + B.cpu_s(1) - c0, 0
            a[4] = a[4] + count("count") - a[5]
            a[6], a[7] = a[6] + strs(0) - a[8], a[7] + strs(1) - a[9]
        end
    end)
end

-- The stages, in the order a put_many runs them: { label, "E" (the exporter) | "L" (the
-- engine) | "P" (phases), method }.
local STAGES = {
    { "put_many", "E", "put_many" },
    { "heads", "E", "_batch_heads" }, { "admit", "E", "_batch_admit" },
    { "dups", "E", "_batch_dups" }, { "wallets", "E", "_batch_wallets" },
    { "rate", "E", "_batch_rate" }, { "commit", "E", "_batch_commit" },
    { "commit_many", "L", "commit_many" }, { "plan", "L", "_plan_batch" },
    { "rows", "L", "_batch_rows" }, { "phase ops", "L", "_atomic_batch_ops" },
    { "engine store calls", "P", "apply" }, { "done", "L", "_batch_done" },
    { "move heads", "E", "_batch_move_heads" }, { "flush", "E", "_durable" },
}

function _M.install(e)
    local classes = { E = getmetatable(e), L = getmetatable(e.led), P = phases }
    for _, s in ipairs(STAGES) do wrap(classes[s[2]], s[3], s[1]) end
end

function _M.mark(e)
    if e then _M.install(e) end
    local m = {}
    for k, a in pairs(acc) do m[k] = { a[1], a[2], a[3], a[4], 0, a[6], a[7] } end
    return m
end

-- label -> its figure since mark, per slice: field 2 (CPU seconds), 4 (KB), 6 (strings
-- looked up) or 7 (made), times scale
local CPU, KB, LOOKED, MADE = 2, 4, 6, 7
local function per_slice(mark, slices, field, scale)
    return function(label)
        local a, m = acc[label], mark[label]
        if not a then return 0 end
        return (a[field] - (m and m[field] or 0)) / slices * scale
    end
end

local function parts_of(f)
    local parts = {}
    for i, s in ipairs(STAGES) do
        if i > 1 then parts[#parts + 1] = format("%s %.1f", s[1], f(s[1])) end
    end
    return table.concat(parts, ", ")
end

-- "put_many 76.1: heads 7.9, ..." since mark, in us of this thread's CPU per slice
function _M.line(mark, slices)
    local us = per_slice(mark, slices, CPU, 1e6)
    return format("loop CPU us per slice by stage (--stages; inclusive: commit holds "
                  .. "commit_many, which holds plan .. done; engine store calls are the "
                  .. "engine's phases, their pack and unpack, inside plan and commit_many): "
                  .. "put_many %.1f: %s", us("put_many"), parts_of(us))
end

-- The same in bytes the loop's VM allocated per slice, by stage (inclusive), for a run
-- whose collector was stopped from mark on (--alloc): repeatable to a few percent, where
-- CPU figures move with the machine's load.
function _M.alloc_line(mark, slices)
    local b = per_slice(mark, slices, KB, 1024)
    return format("bytes allocated per slice by stage (--alloc; inclusive, as above): "
                  .. "put_many %.0f: %s", b("put_many"), parts_of(b))
end

-- Strings per slice by stage (inclusive): lj_str_new's calls, then those that made a new
-- string; nil without a counting LuaJIT.
function _M.strings_line(mark, slices)
    if not ljstat then return nil end
    local looked, made = per_slice(mark, slices, LOOKED, 1), per_slice(mark, slices, MADE, 1)
    return format("strings interned per slice by stage (lj_str_new calls; new ones): "
                  .. "put_many %.1f: %s; new: put_many %.1f: %s", looked("put_many"),
                  parts_of(looked), made("put_many"), parts_of(made))
end

return _M
