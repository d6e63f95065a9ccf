-- with-nojit.lua: run a benchmark with LuaJIT's trace compiler off for the modules under
-- given name prefixes (ron.base.nojit), to tell the JIT's warm-up from the steady state
-- (docs/WALLET.md §8, "Cold and warm").
--
--   RA_NOJIT=ron. ron-accounting run tests/bench/with-nojit.lua bench-wallet.lua [its args]
--
-- RA_NOJIT: comma-separated prefixes (ron.wallet.,ron.ledger. or ron.: every module of
-- the project); the script named next is run from this directory with the rest of the
-- arguments as its own.
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = here .. "../../lua/?.lua;" .. here .. "../../lua/?/init.lua;" .. package.path
local nojit = require("ron.base.nojit")

local prefixes = {}
for p in (os.getenv("RA_NOJIT") or "ron."):gmatch("[^,]+") do prefixes[#prefixes + 1] = p end
nojit.require("ron.base.percentile", prefixes) -- installs the loader for the prefixes
local script = assert(arg[1], "usage: with-nojit.lua BENCH.lua [args]")
local args = {}
for i = 2, #arg do args[i - 1] = arg[i] end
args[0] = here .. script
arg = args -- luacheck: ignore (the benchmark reads the global arg)
dofile(here .. script)
