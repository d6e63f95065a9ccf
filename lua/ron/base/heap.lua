-- ron.base.heap: the process's malloc policy for the C libraries it hosts (issue 25).
--
--   require("ron.base.heap").keep()   -> true (applied, once per process) | false (no glibc)
--
-- Why: glibc gives the free memory at the top of a heap back to the kernel as soon as it
-- passes M_TRIM_THRESHOLD (128 KiB, raised dynamically only by mmap'd chunks), and grows it
-- again on the next allocation. SQLite opens and closes a temporary b-tree (an IN list, a
-- VALUES join, a statement journal) for many of the ledger's statements, each with its own
-- page cache of ~100-200 KiB: every such statement trimmed the heap (brk, or madvise on a
-- pool thread's arena) and faulted it back in. On this kind of VM each trim is a TLB
-- shootdown to every core. perf over the synchronous SQLite driver, one Ledger:commit at a
-- time: 18 % of the process's time in brk, 7 % in page faults; the CPU per commit fell
-- from 2.97-3.42 ms to 1.32-1.39 ms with the same policy set by GLIBC_TUNABLES
-- (docs/LEDGER.md "One commit, no contention").
--
-- The policy: keep up to TRIM_BYTES of free memory at a heap's top (a plateau, not growth:
-- what was freed is reused by the next statement), and serve allocations below MMAP_BYTES
-- from the heap (an mmap'd chunk is unmapped at free: the same shootdown). Memory is still
-- returned past those sizes. Called by the stores that host SQLite (ron.ledger.store.sqlite)
-- before their first connection; harmless anywhere else.
local ffi = require("ffi")

local pcall = pcall

local _M = { TRIM_BYTES = 64 * 1024 * 1024, MMAP_BYTES = 4 * 1024 * 1024 }

-- glibc's <malloc.h> parameters
local M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3

local applied = nil

function _M.keep()
    if applied ~= nil then return applied end
    applied = false
    pcall(ffi.cdef, "int mallopt(int param, int value);") -- (declared already: fine)
    local ok, mallopt = pcall(function() return ffi.C.mallopt end)
    if not ok then return false end -- no such symbol: not glibc
    -- mallopt answers 1 on success, 0 on an unknown parameter (not glibc's malloc)
    applied = mallopt(M_TRIM_THRESHOLD, _M.TRIM_BYTES) == 1
              and mallopt(M_MMAP_THRESHOLD, _M.MMAP_BYTES) == 1
    return applied
end

return _M
