-- Builds a file ledger for tests/host/ledger.sh: a real meter (injected clock), WINDOWS
-- windows of two tenants x two dimensions, every slice put into
-- ron.accounting.export.exporters.file (each put twice: the second answer must be dup).
--   ron-accounting run ledger-make.lua LEDGER_DIR [WINDOWS]
local acct = require("ron.accounting")
local file = require("ron.accounting.export.exporters.file")

local dir, windows = assert(arg[1], "usage: ledger-make.lua DIR [WINDOWS]"), tonumber(arg[2] or 4)
local T0 = 1700000000 - 1700000000 % 3600
local now = T0 + 5
local m = assert(acct.open { window_len_s = 60, capacity_rows = 1024, shards = 4,
                             host = "ledger-make", clock = function() return now end })
local ledger = assert(file.new { dir = dir })
local tenants = { "123e4567-e89b-12d3-a456-426614174000", "00000000-0000-4000-8000-00000000000b" }
local n = 0
for w = 1, windows do
    now = T0 + 60 * (w - 1) + 5
    for ti, t in ipairs(tenants) do
        for u = 1, 3 do
            assert(m:record(t, "user-" .. u, "bytes", 100 * w + u + ti))
            assert(m:record(t, "user-" .. u, "requests", w))
        end
    end
    for _, s in ipairs(assert(m:rollover(T0 + 60 * w))) do
        local st, err = ledger:put(s)
        assert(st == "ok", ("put %s: %s %s"):format(tostring(s), tostring(st), tostring(err)))
        assert(ledger:put(s) == "dup")
        n = n + 1
    end
end
ledger:close()
m:close()
print("ledger-make: ok " .. n)
