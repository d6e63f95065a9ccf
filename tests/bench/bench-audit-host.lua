-- bench-audit-host: the wired path of the audit trail (ron.audit.host, as the daemon runs
-- it): emit() from a task as an ingest handler would, one reject record per call, the sink
-- worker appending batches and syncing each on the threadpool (docs/AUDIT.md, "In the
-- daemon"). Measures emit -> durable records/s (from the first emit until audit_durable_seq
-- covers every accepted event), emit() latency percentiles, records per fdatasync, and
-- what was shed (a full queue: Busy, counted, one gap record).
--
--   ron-accounting run tests/bench/bench-audit-host.lua [N [DIR [BATCH [QUEUE [YIELD]]]]]
--
-- N events (default 200000); DIR (default or "-": a temp dir, removed); BATCH events per group
-- commit (default 200); QUEUE the queue's capacity (default 65536); YIELD events between
-- yields of the emitting task (default 256: a burst of rejects, then the loop turns).
-- Prints one human line and one `BENCH {json}` line.
local uv = require "luv"
local task = require "ron.accounting.runtime.task"
local host = require "ron.audit.host"

local N = tonumber(arg[1]) or 200000
local keep = arg[2] and arg[2] ~= "-"
local dir = keep and arg[2] or (os.tmpname() .. ".bench-audit")
local BATCH = tonumber(arg[3]) or 200
local QUEUE = tonumber(arg[4]) or 65536
local YIELD = tonumber(arg[5]) or 256
os.remove(dir)

task.spawn("bench", function()
    local h = assert(host.start { writer_id = "bench", stream = "rejects", dir = dir,
                                  batch = BATCH, queue_cap = QUEUE, interval_ms = 5,
                                  batch_bytes = math.max(1048576, BATCH * 4200) })
    local lat = {}
    local shed = 0
    local tenants = {}
    for i = 0, 999 do tenants[i] = string.format("%08x-0000-4000-8000-%012x", i, i) end
    local hr = uv.hrtime
    local t0 = hr()
    for i = 1, N do
        local a = hr()
        local ok = h:emit("reject", { source = "ingest", reason = "no_token", status = 401,
                                      tenant = tenants[i % 1000], dimension = "bytes" })
        lat[#lat + 1] = hr() - a
        if not ok then shed = shed + 1 end
        if i % YIELD == 0 then task.sleep(0) end
    end
    local t_emit = hr()
    while true do
        local s = h:stats()
        if s.queue_depth == 0 and h.lg.n_gaps == 0 and s.durable_seq == s.head_seq then break end
        task.sleep(1)
    end
    local t1 = hr()
    local s = h:stats()
    assert(h:close())
    table.sort(lat)
    local function pct(p) return lat[math.max(1, math.ceil(p * #lat))] / 1000 end
    local secs = (t1 - t0) / 1e9
    local durable = N - shed
    local r = {
        name = "audit_host_emit_to_durable", n = N, shed = shed, durable = durable,
        records_per_s = math.floor(durable / secs), emit_s = (t_emit - t0) / 1e9,
        total_s = secs, emit_p50_us = pct(0.5), emit_p99_us = pct(0.99),
        emit_max_us = pct(1.0), syncs = s.host_syncs,
        records_per_sync = math.floor(s.head_seq / math.max(1, s.host_syncs)),
        batch = BATCH, queue = QUEUE, yield = YIELD,
    }
    print(string.format("audit host: %d events, %d shed, %d durable in %.2f s = %d records/s " ..
                        "(emit p50 %.1f us, p99 %.1f us, max %.0f us; %d syncs, %d records " ..
                        "per sync; batch %d, queue %d, yield every %d)", N, shed, durable, secs,
                        r.records_per_s, r.emit_p50_us, r.emit_p99_us, r.emit_max_us, r.syncs,
                        r.records_per_sync, BATCH, QUEUE, YIELD))
    local parts = {}
    for k, v in pairs(r) do
        parts[#parts + 1] = string.format(type(v) == "string" and '"%s":"%s"' or '"%s":%s', k,
                                          tostring(v))
    end
    table.sort(parts)
    print("BENCH {" .. table.concat(parts, ",") .. "}")
    if not keep then os.execute("rm -rf '" .. dir .. "'") end
end)
