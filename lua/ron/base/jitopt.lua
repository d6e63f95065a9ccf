-- ron.base.jitopt: LuaJIT's trace compiler settings for the daemon's loop VM (issue 25,
-- docs/WALLET.md §8 "The loop VM's trace compiles").
--
--   require("ron.base.jitopt").apply()  -- -> true, or false without LuaJIT's jit.opt
--
-- LuaJIT 2.1 as Debian builds it keeps its machine code write-protected: every trace it
-- compiles makes the current machine-code area writable and executable again (two mprotect
-- calls), and a side trace also the area of its parent when that is an older one (two
-- more). Each mprotect is a TLB shootdown to the other core on the 2-vCPU hypervisor the
-- benchmarks run on (30-36 % of the loop thread's samples while the wallet's and the
-- engine's Lua warm up, ~300 traces in the first thousand transfers, most of them side
-- traces). The default area is 64 KB, so most side traces patch a parent in an older
-- area; in areas of SIZEMCODE_KB the parents are mostly in the current one. Measured
-- (bench-ledger-batch, the cold case): 29 % fewer mprotect calls. MAXMCODE_KB bounds the
-- machine code as before (all traces flushed when it is full: never seen in the benches).
local _M = {}

_M.SIZEMCODE_KB = 512
_M.MAXMCODE_KB = 8192
_M.OPTIONS = { "sizemcode=" .. _M.SIZEMCODE_KB, "maxmcode=" .. _M.MAXMCODE_KB }

-- The options of this VM, for the areas allocated from now on (call it before the hot code
-- runs: an area already allocated keeps its size).
function _M.apply()
    if not (jit and jit.opt and jit.opt.start) then return false end
    jit.opt.start(unpack(_M.OPTIONS))
    _M.applied = true
    return true
end

return _M
