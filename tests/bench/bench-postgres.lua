-- bench-postgres.lua: slices/s into PostgreSQL through ron.accounting.export.exporters.postgres
-- (issue 5), against a server this benchmark starts itself (tests/pg/pg-harness.sh).
--
--   ron-accounting run tests/bench/bench-postgres.lua [--quick] [--out FILE]
--       [--slices N] [--one-slices N] [--streams N] [--connections N] [--fsync on|off]
--
-- What runs (after a warm-up), each with a baseline measured right after it, same server,
-- same concurrency, same number of round trips:
--   one_stream   --one-slices slices of ONE stream, put() in seq order by one task through
--                an exporter with one connection: every put waits for the previous (the
--                export contract's order), so this is round trip + commit latency bound.
--   many_streams --slices slices over --streams streams (tenants x "bytes"), one task per
--                stream putting its chain in seq order (as the runtime's workers do),
--                through an exporter with --connections connections (puts of different
--                streams overlap; commits are group-committed by the server).
--   baseline insert_loop: a plain INSERT of the same bytes (key, seq, body) into a table
--                with a primary key, same tasks, same pool size: no head row, no CAS, no
--                foreign keys. ratio = exporter slices/s / insert_loop slices/s.
--   baseline file_nofsync (once): exporters.file with fsync = false, put() in a loop on
--                the main thread (the embedded ledger's ceiling; not durable).
-- The server runs with fsync=on (durable commits: the figure an operator gets) unless
-- --fsync off. Every exporter ledger is checked with `ron-accounting verify` at the end.
-- Output: human-readable lines and one `BENCH {json}` line per result (tests/bench/README.md).
local uv = require("luv")
local task = require("ron.base.task")
local postgres = require("ron.accounting.export.exporters.postgres")
local pg = require("ron.base.net.postgres")
local pq = require("ron.base.net.postgres_c")
local file = require("ron.accounting.export.exporters.file")

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local H = dofile(here .. "../pg/harness.lua")

local opts = { quick = false, out = nil, slices = 20000, one_slices = 4000, streams = 64,
               connections = 8, fsync = "on", bin = os.getenv("RA_BIN") or arg[-1] }
local B = require("bench_common")
B.args(arg, opts, { { "--slices", "slices", "num" }, { "--one-slices", "one_slices", "num" },
             { "--streams", "streams", "num" }, { "--connections", "connections", "num" },
             { "--fsync", "fsync", "str" } },
       "ron-accounting run bench-postgres.lua [--quick] [--out FILE] [--slices N] "
           .. "[--one-slices N] [--streams N] [--connections N] [--fsync on|off]")
if opts.quick then opts.slices, opts.one_slices, opts.streams = 400, 200, 16 end
assert(opts.fsync == "on" or opts.fsync == "off", "--fsync on|off")

local ok_pg, why = H.available()
if not ok_pg then
    io.stderr:write("bench-postgres.lua: ", why, "\n")
    os.exit(3)
end

local emit = B.emitter(opts.out)

local loadavg = B.loadavg

local make_chains, drive = B.make_chains, B.drive

-- The batched path (the runtime's, with put_many): each window's slices of all streams,
-- split over `connections` tasks, one put_many per task and window.
local function drive_batched(chains, connections, put_many)
    local counts = {}
    local t0 = uv.hrtime()
    for w = 1, #chains[1] do
        local hs = {}
        for c = 1, connections do
            hs[c] = task.spawn("bench-batch-" .. c, function()
                local batch = {}
                for s = c, #chains, connections do batch[#batch + 1] = chains[s][w] end
                if #batch == 0 then return end
                local res = assert(put_many(batch))
                for i, r in ipairs(res) do
                    counts[r[1] or "fail"] = (counts[r[1] or "fail"] or 0) + 1
                    if r[1] ~= "ok" then
                        error(("batch slice %d: %s %s"):format(i, tostring(r[1]), tostring(r[2])))
                    end
                end
            end)
        end
        for _, h in ipairs(hs) do assert(h:join()) end
    end
    return (uv.hrtime() - t0) / 1e9, counts
end

local cluster
local results = {}

local function run_case(name, n_streams, per, connections, batched)
    local n = n_streams * per
    local chains = make_chains(n_streams, per)
    -- the exporter
    local schema = ("bench_%s"):format(name)
    local e = postgres.new { conninfo = cluster.conninfo, schema = schema,
                             connections = connections, query_timeout_ms = 30000 }
    assert(e:head(chains[1][1].tenant, "bytes") == nil) -- schema created before the clock runs
    local s_exp, c_exp
    if batched then
        s_exp, c_exp = drive_batched(chains, connections, function(b) return e:put_many(b) end)
    else
        s_exp, c_exp = drive(chains, function(sl) return e:put(sl) end)
    end
    local stats = e:stats()
    e:close()
    -- the baseline: plain INSERTs of the same bytes, same tasks and pool size
    local pool = pg.pool { conninfo = cluster.conninfo, size = connections,
                           query_timeout_ms = 30000 }
    local tbl = ('"bench_plain_%s"'):format(name)
    assert(pool:exec("CREATE TABLE " .. tbl .. " (k int NOT NULL, seq bigint NOT NULL, "
                     .. "body bytea NOT NULL, PRIMARY KEY (k, seq))"))
    local ins = "INSERT INTO " .. tbl .. " (k, seq, body) VALUES ($1, $2, $3)"
    local s_base = drive(chains, function(sl, s)
        local r, err = pool:query(ins, { s, sl.id.seq, pq.bytea(sl:encode()) })
        if r then return "ok" end
        return nil, err
    end)
    pool:close()
    local rate, base_rate = n / s_exp, n / s_base
    results[#results + 1] = { name = name, n = n, streams = n_streams, connections = connections,
                              rate = rate, base_rate = base_rate, s = s_exp, s_base = s_base,
                              counts = c_exp, stats = stats, schema = schema }
    return results[#results]
end

local function file_baseline(n)
    local dir = os.tmpname()
    os.remove(dir)
    local ledger = assert(file.new { dir = dir, fsync = false })
    local rate, total = B.put_direct(ledger, make_chains(16, math.max(1, math.floor(n / 16))))
    os.execute("rm -rf '" .. dir .. "'")
    return rate, total
end

local function verify(schema)
    if not opts.bin then return "skipped (no binary)" end
    local out, rc = H.run(opts.bin .. " verify --schema " .. schema .. " " .. H.quote(cluster.url))
    if rc == 0 then return "OK" end
    return "FAILED (" .. rc .. "): " .. out
end

task.spawn("bench", function()
    cluster = assert(H.start { fsync = opts.fsync == "on" })
    print(("# bench-postgres.lua: %s, PostgreSQL (fsync=%s) %s, loadavg %s"):format(
        jit and jit.version or _VERSION, opts.fsync, cluster.conninfo, loadavg()))
    print("# ratio = exporter slices/s / insert_loop slices/s (a plain INSERT of the same bytes,"
          .. " same tasks and connections)")
    local ok, err = pcall(function()
        -- warm-up: connections, catalog caches, the server's first checkpoint
        run_case("warmup", 4, opts.quick and 10 or 100, 2)
        results = {}
        local one = run_case("one_stream", 1, opts.one_slices, 1)
        local many = run_case("many_streams", opts.streams,
                              math.max(1, math.floor(opts.slices / opts.streams)),
                              opts.connections)
        local batch = run_case("many_streams_put_many", opts.streams,
                               math.max(1, math.floor(opts.slices / opts.streams)),
                               opts.connections, true)
        local frate, fn = file_baseline(opts.quick and 400 or 20000)
        local fails = 0
        for _, r in ipairs { one, many, batch } do
            local v = verify(r.schema)
            local good = (r.counts.ok or 0) == r.n and v ~= nil and v:sub(1, 6) ~= "FAILED"
            if not good then fails = fails + 1 end
            local name = ("postgres/exporter/%s/c%d"):format(r.name, r.connections)
            print(("\n== %s: %d slices (%d streams) in %.2f s"):format(name, r.n, r.streams, r.s))
            print(("   exporter     %9.0f slices/s  (%.0f us per put)"):format(r.rate,
                  1e6 / r.rate * (r.name == "one_stream" and 1 or 1)))
            print(("   insert_loop  %9.0f slices/s  ratio %.2f"):format(r.base_rate,
                  r.rate / r.base_rate))
            print(("   file_nofsync %9.0f slices/s  (exporters.file, fsync=false, %d puts)")
                  :format(frate, fn))
            print(("   answers ok %d; connects %d; verify %s"):format(r.counts.ok or 0,
                  r.stats.connects, v))
            emit(('{"bench":"postgres","name":"%s","params":{"slices":%d,"streams":%d,'
                .. '"connections":%d,"server_fsync":%s},"ns_per_op":%.0f,"ops_per_s":%.0f,'
                .. '"slices_per_s":%.0f,"seconds":%.3f,"baselines":{"insert_loop":'
                .. '{"ops_per_s":%.0f,"seconds":%.3f},"file_nofsync":{"ops_per_s":%.0f}},'
                .. '"ratios":{"insert_loop":%.3f,"file_nofsync":%.4f},"ok":%s}'):format(name,
                r.n, r.streams, r.connections, tostring(opts.fsync == "on"), 1e9 / r.rate,
                r.rate, r.rate, r.s, r.base_rate, r.s_base, frate, r.rate / r.base_rate,
                r.rate / frate, tostring(good)))
        end
        if fails > 0 then error(fails .. " configuration(s) failed their check") end
    end)
    cluster:stop()
    if not ok then
        io.stderr:write("bench-postgres.lua: ", tostring(err), "\n")
        os.exit(1)
    end
end)
