-- bench-audit-host: the wired path of the audit trail (ron.audit.host, as the daemon runs
-- it): emit() from a task as an ingest handler would, one reject record per call, the sink
-- worker appending batches and syncing each on the threadpool (docs/AUDIT.md, "In the
-- daemon"). Measures emit -> durable records/s (from the first emit until audit_durable_seq
-- covers every accepted event), emit() latency percentiles, records per fdatasync, and
-- what was shed (a full queue: Busy, counted, one gap record); and, in the same run on the
-- same file system, the baseline: the same records' canonical bytes appended with one
-- write + fdatasync each (PLAIN of them), and the ratio.
--
--   ron-accounting run tests/bench/bench-audit-host.lua [N [DIR [BATCH [QUEUE [YIELD [PLAIN [RATE [SHARDS]]]]]]]]
--
-- N events (default 200000); DIR (default or "-": a temp dir, removed); BATCH events per group
-- commit (default 1024, the daemon's); QUEUE the queue's capacity (default 65536); YIELD
-- events between yields of the emitting task (default 256: a burst of rejects, then the loop
-- turns); PLAIN baseline records (default 1000); RATE events/s the emitter keeps to (default
-- 0: as fast as it can, so a sink slower than the emitter sheds; with a RATE the sink keeps
-- up with, nothing is shed and records/s is that rate: the sustained figure); SHARDS chains
-- (default 1; ron.audit.host's `shards`: one writer, queue and pool call each, QUEUE each).
-- Prints one human line and one `BENCH {json}` line.
local uv = require("luv")
local ffi = require("ffi")
local audit = require("ron.audit")
local task = require("ron.base.task")
local host = require("ron.audit.host")

local N = tonumber(arg[1]) or 200000
local keep = arg[2] and arg[2] ~= "-"
local dir = keep and arg[2] or (os.tmpname() .. ".bench-audit")
local BATCH = tonumber(arg[3]) or 1024
local QUEUE = tonumber(arg[4]) or 65536
local YIELD = tonumber(arg[5]) or 256
local PLAIN = tonumber(arg[6]) or 1000
local RATE = tonumber(arg[7]) or 0
local SHARDS = tonumber(arg[8]) or 1
os.remove(dir)

for _, decl in ipairs { "int open(const char *path, int flags, ...);",
                        "long write(int fd, const void *buf, size_t n);",
                        "int fdatasync(int fd);", "int close(int fd);" } do
    pcall(ffi.cdef, decl) -- declared already by another module: the same function
end

-- The baseline: the same reject records (canonical bytes, chained), one write + fdatasync
-- each, on the same file system. -> records/s
local function plain(path, n, tenants)
    local fd = ffi.C.open(path, 0x441, 420) -- O_WRONLY | O_CREAT | O_APPEND, 0644
    assert(fd >= 0, "open " .. path)
    local C = require("ron.audit.lib")
    local h = ffi.new("uint8_t[32]")
    local prev
    local t0 = uv.hrtime()
    for i = 1, n do
        local b = assert(audit.encode("bench", "rejects", i, prev, "reject",
            { source = "ingest", reason = "no_token", status = 401, tenant = tenants[i % 1000],
              dimension = "bytes", n = i }, 1700000000000 + i))
        C.rau_record_hash(b, #b, h)
        prev = ffi.string(h, 32)
        local frame = string.char(0, 0, math.floor(#b / 256), #b % 256) .. b
        assert(ffi.C.write(fd, frame, #frame) == #frame and ffi.C.fdatasync(fd) == 0)
    end
    local secs = (uv.hrtime() - t0) / 1e9
    ffi.C.close(fd)
    os.remove(path)
    return n / secs
end

task.spawn("bench", function()
    local tenants = {}
    for i = 0, 999 do tenants[i] = string.format("%08x-0000-4000-8000-%012x", i, i) end
    os.execute("mkdir -p '" .. dir .. "'")
    local base = plain(dir .. "/plain.log", PLAIN, tenants)
    local h = assert(host.start { writer_id = "bench", stream = "rejects", dir = dir,
                                  batch = BATCH, queue_cap = QUEUE, interval_ms = 5,
                                  shards = SHARDS > 1 and SHARDS or nil })
    local lat = {}
    local shed = 0
    local hr = uv.hrtime
    local function cpu_s() -- this process's CPU time: the loop and the pool threads
        local u = uv.getrusage()
        return u.utime.sec + u.utime.usec / 1e6 + u.stime.sec + u.stime.usec / 1e6
    end
    local c0 = cpu_s()
    local t0 = hr()
    for i = 1, N do
        if RATE > 0 then -- ahead of the schedule: sleep (a spinning emitter would take a
            -- whole core from the pool threads, which an ingest loop waiting for requests
            -- does not), then catch up in a burst
            while i - 1 > (hr() - t0) * RATE / 1e9 do task.sleep(1) end
        end
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
        if s.queue_depth == 0 and s.in_flight == 0 and (s.pending_gaps or h.lg.n_gaps) == 0
           and s.durable_seq == s.head_seq then
            break
        end
        task.sleep(1)
    end
    local t1 = hr()
    local cpu = cpu_s() - c0
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
        batch = BATCH, queue = QUEUE, yield = YIELD, rate = RATE, shards = SHARDS, plain_records_per_s = math.floor(base),
        plain_records = PLAIN, cpu_us_per_record = math.floor(cpu / math.max(1, durable) * 1e8) / 100,
        load = tonumber((io.open("/proc/loadavg"):read("*l") or ""):match("^(%S+)")),
    }
    r.vs_plain = math.floor(r.records_per_s / base * 10 + 0.5) / 10
    print(string.format("audit host: %d events, %d shed, %d durable in %.2f s = %d records/s " ..
                        "(emit p50 %.1f us, p99 %.1f us, max %.0f us; %d syncs, %d records " ..
                        "per sync; batch %d, queue %d, yield every %d, rate %s, %d chain(s)); CPU %.2f us a " ..
                        "record (loop + pool), load average %s", N, shed, durable,
                        secs, r.records_per_s, r.emit_p50_us, r.emit_p99_us, r.emit_max_us,
                        r.syncs, r.records_per_sync, BATCH, QUEUE, YIELD,
                        RATE > 0 and tostring(RATE) .. "/s" or "max", SHARDS,
                        r.cpu_us_per_record, tostring(r.load)))
    print(string.format("baseline: plain write + fdatasync per record %d records/s (%d records); "
                        .. "the trail x%.1f", r.plain_records_per_s, PLAIN, r.vs_plain))
    local parts = {}
    for k, v in pairs(r) do
        parts[#parts + 1] = string.format(type(v) == "string" and '"%s":"%s"' or '"%s":%s', k,
                                          tostring(v))
    end
    table.sort(parts)
    print("BENCH {" .. table.concat(parts, ",") .. "}")
    if not keep then os.execute("rm -rf '" .. dir .. "'") end
end)
