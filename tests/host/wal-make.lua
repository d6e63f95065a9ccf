-- wal-make.lua DIR [WINDOWS [noack]]: builds a small, healthy WAL in DIR through the Lua
-- binding, the way an operator's script would (cfg.wal = { dir = DIR }), for the host tests of
-- `verify` and `wal inspect` (cmake/host-tests.cmake, tests/host/wal.sh).
--
-- Three tenants record into the built-in dimensions over WINDOWS windows of 60 s on an
-- injected clock; every window is rolled over (one segment each, group commit), and the
-- slices of every other window are ACKed (ack compacts: their segments go, the heads
-- checkpoint is written), so the WAL left behind has live segments, a heads checkpoint,
-- and chains whose first pending slice links to a checkpointed head.
--
-- With "noack", nothing is ACKed (no checkpoint, every segment stays).
--
-- Prints one line per sealed slice ("sealed <tenant> <dimension> <seq> <b3>") and ends with
-- "wal-make: ok <pending count>"; the pending slices are exactly what `wal inspect` must
-- list.
local acct = require("ron.accounting")

local dir = assert(arg[1], "usage: wal-make.lua DIR")
local WINDOWS = tonumber(arg[2] or "6")
local ACK = arg[3] ~= "noack"
local T0 = 1735689600 -- 2025-01-01T00:00:00Z
local now = T0

local m = assert(acct.open {
    window_len_s = 60,
    capacity_rows = 1024,
    pending_slices_cap = 256,
    host = "wal-test",
    wal = { dir = dir },
    clock = function() return now end,
})

local tenants = {
    "6f1c3c1e-2b7a-4d5e-9a43-0c8e5b1f7a21",
    "b2d4e6f8-1a3c-4e5f-8b7d-9c0e2f4a6b8d",
    "3e9a1b5c-7d2f-4a6e-b1c8-5f0d3e7a9b24",
}
local dims = { "bytes", "requests", "cpu_units" }

for w = 0, WINDOWS - 1 do
    now = T0 + w * 60 + 10
    for i, t in ipairs(tenants) do
        for s = 1, 3 + i do
            -- not every tenant uses every dimension in every window
            for d, dim in ipairs(dims) do
                if (w + i + d) % 3 ~= 0 then
                    assert(m:record(t, "user-" .. s, dim, 100 * w + 10 * s + d))
                end
            end
        end
    end
    now = T0 + (w + 1) * 60
    local sealed = assert(m:rollover())
    for _, s in ipairs(sealed) do
        print(("sealed %s %s %d %s"):format(s.tenant, s.dimension, tonumber(s.id.seq), s.b3))
    end
    if ACK and w % 2 == 0 then
        for _, s in ipairs(sealed) do assert(m:ack(s)) end
    end
end

local pending = m:pending()
print(("wal-make: ok %d"):format(#pending))
m:close()
