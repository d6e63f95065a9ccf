-- G-16 against PostgreSQL: one of two exporter processes racing on the same streams.
--   ron-accounting run tests/pg/race-child.lua CONNINFO SCHEMA VARIANT ID SYNC_DIR TENANTS WINDOWS
-- VARIANT "same": both processes seal the very same slices (same records, clock and host:
-- G-2 makes them byte-identical); "fork": process ID adds 1000*ID to every count, so the
-- two produce different chains for the same streams (two producers: a fork).
-- Each stream is exported by its own task, in seq order (as the runtime does): a retry_*
-- answer is retried, conflict or gap stops the stream. The processes start together: each
-- writes SYNC_DIR/ready.ID, then waits for SYNC_DIR/go.
-- Output (stdout), one line each:
--   SLICE <tenant>/<dim> <seq> <b3>        every slice this process sealed
--   STREAM <tenant>/<dim> <ok> <dup> <conflict> <gap> <outcome: done|conflict|gap>
--   TOTAL ok=<n> dup=<n> conflict=<n> gap=<n> retries=<n>
local conninfo, schema, variant, id, sync_dir, n_tenants, n_windows = ...
id, n_tenants, n_windows = tonumber(id), tonumber(n_tenants), tonumber(n_windows)
assert(conninfo and schema and (variant == "same" or variant == "fork") and id and sync_dir
       and n_tenants and n_windows, "usage: race-child.lua CONNINFO SCHEMA same|fork ID DIR T W")

local acct = require("ron.accounting")
local task = require("ron.base.task")
local postgres = require("ron.accounting.export.exporters.postgres")
local backoff = require("ron.base.backoff")

local T0 = 1700000000 - 1700000000 % 3600
local DIMS = { "bytes", "requests" }
local tenants = {}
for i = 1, n_tenants do tenants[i] = ("00000000-0000-4000-8000-%012x"):format(i) end

local now = T0 + 5
local m = assert(acct.open { window_len_s = 60, capacity_rows = 4096, shards = 4,
                             host = "race-host", clock = function() return now end })
local streams, order = {}, {}
for w = 1, n_windows do
    now = T0 + 60 * (w - 1) + 5
    for i, t in ipairs(tenants) do
        for _, d in ipairs(DIMS) do
            local inc = w + i + (variant == "fork" and 1000 * id or 0)
            assert(m:record(t, "alice", d, inc))
        end
    end
    for _, s in ipairs(assert(m:rollover(T0 + 60 * w))) do
        local k = s.tenant .. "/" .. s.dimension
        if not streams[k] then
            streams[k] = {}
            order[#order + 1] = k
        end
        local list = streams[k]
        list[#list + 1] = s
        print(("SLICE %s %d %s"):format(k, s.id.seq, s.b3))
    end
end
table.sort(order)

local e = postgres.new { conninfo = conninfo, schema = schema, connections = 3,
                         backoff = backoff.exponential.new { base_ms = 5, cap_ms = 50 } }
local retries = 0
local totals = { ok = 0, dup = 0, conflict = 0, gap = 0 }

task.spawn("race", function()
    local f = assert(io.open(sync_dir .. "/ready." .. id, "w"))
    f:close()
    while true do
        local g = io.open(sync_dir .. "/go")
        if g then g:close() break end
        task.sleep(2)
    end
    local workers = {}
    for _, k in ipairs(order) do
        workers[#workers + 1] = task.spawn("stream-" .. k, function()
            local c = { ok = 0, dup = 0, conflict = 0, gap = 0 }
            local outcome = "done"
            for _, s in ipairs(streams[k]) do
                local status, detail
                for _ = 1, 200 do
                    status, detail = e:put(s)
                    if status == "ok" or status == "dup" or status == "conflict"
                       or status == "gap" then break end
                    retries = retries + 1
                    io.stderr:write(("race-child %d: %s seq %d: %s %s\n"):format(id, k, s.id.seq,
                        tostring(status), tostring(detail)))
                    task.sleep(5)
                end
                c[status] = (c[status] or 0) + 1
                totals[status] = (totals[status] or 0) + 1
                if status == "conflict" or status == "gap" then
                    outcome = status
                    break
                end
                assert(status == "ok" or status == "dup", "put failed: " .. tostring(detail))
            end
            print(("STREAM %s %d %d %d %d %s"):format(k, c.ok, c.dup, c.conflict, c.gap, outcome))
        end)
    end
    for _, w in ipairs(workers) do assert(w:join()) end
    print(("TOTAL ok=%d dup=%d conflict=%d gap=%d retries=%d"):format(totals.ok, totals.dup,
          totals.conflict, totals.gap, retries))
    e:close()
    m:close()
end)
