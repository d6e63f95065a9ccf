-- bench-http-export.lua: slices/s over HTTP into the ledger receiver (issue 5): this
-- process puts slices through ron.accounting.export.exporters.http (libcurl multi on its loop);
-- a second ron-accounting process (this script with --serve) runs http.serve with the
-- receiver's routes (ron.node.receiver) over the file ledger (offload.file: appends
-- and fsyncs on the libuv threadpool, waiting PUTs batched through put_many).
--
--   ron-accounting run tests/bench/bench-http-export.lua [--quick] [--out FILE] [--dir DIR]
--       [--slices N] [--one-slices N] [--streams N] [--fsync off,on] [--bin ron-accounting]
--
-- What runs, for each fsync setting (the receiver's file ledger: fsync after every
-- append, or none):
--   one_stream    --one-slices slices of ONE stream put in seq order by one task: every
--                 put waits for the previous one (the contract's order), so this is the
--                 round trip (HTTP + decode + threadpool + append [+ fsync]) bound.
--   many_streams  --slices slices over --streams streams (tenants x "bytes"), one task per
--                 stream putting its chain in seq order, as the runtime's workers do:
--                 puts of different streams overlap (one connection each).
--   baseline file_direct: the same slices put() by ron.accounting.export.exporters.file directly
--                 in a loop on this thread (no HTTP, no pool, no second process), same
--                 fsync setting, into a fresh directory. ratio = HTTP slices/s /
--                 file_direct slices/s.
-- Every ledger the receiver wrote is checked with `ron-accounting verify` (--bin, RA_BIN,
-- or the host running this script). Output: human-readable lines and one `BENCH {json}`
-- line per result (tests/bench/README.md). Nothing here asserts a time.
local uv = require("luv")
local acct = require("ron.accounting")
local task = require("ron.base.task")
local file = require("ron.accounting.export.exporters.file")

local SCRIPT = debug.getinfo(1, "S").source:match("^@(.*)$")


-- ---------------------------------------------------------------------------------------
-- the receiver process: --serve DIR on|off

if arg[1] == "--serve" then
    local http = require("ron.node.http")
    local receiver = require("ron.node.receiver")
    local offload = require("ron.accounting.runtime.offload")
    local dir, fsync = arg[2], arg[3] == "on"
    local backend = assert(offload.file { dir = dir, fsync = fsync })
    -- loopback only, one process: no producers to bind (docs/EXPORT.md §6, "Trust model")
    local r = receiver.new { backend = backend, workers = 4, batch = 64, queue_cap = 8192,
                             allow_unauthenticated = true,
                             log = function(line) io.stderr:write("serve: ", line, "\n") end }
    local meter = assert(acct.open { window_len_s = 60, capacity_rows = 16, shards = 1 })
    local srv = assert(http.serve { meter = meter, port = 0, routes = r:routes(),
                                    max_body = receiver.MAX_BODY })
    io.stdout:write("PORT ", srv:port(), "\n")
    io.stdout:flush()
    task.spawn("serve", function()
        while task.sleep(3600000) do end -- until SIGTERM (the host's shutdown token)
        srv:close()
        r:close(true)
        meter:close()
    end)
    return
end

-- ---------------------------------------------------------------------------------------
-- the client

local exp_http = require("ron.accounting.export.exporters.http")

local opts = { quick = false, out = nil, dir = nil, slices = 20000, one_slices = 2000,
               streams = 64, fsync = { "off", "on" }, fsync_slices = 4000,
               bin = os.getenv("RA_BIN") or arg[-1] }
local B = require("bench_common")
B.args(arg, opts, { { "--bin", "bin", "str" }, { "--slices", "slices", "num" },
             { "--fsync-slices", "fsync_slices", "num" }, { "--one-slices", "one_slices", "num" },
             { "--streams", "streams", "num" }, { "--fsync", "fsync", "strs" } },
       "ron-accounting run bench-http-export.lua [--quick] [--out FILE] [--dir DIR] "
           .. "[--slices N] [--fsync-slices N] [--one-slices N] [--streams N] [--fsync off,on] "
           .. "[--bin ron-accounting]")
for _, f in ipairs(opts.fsync) do assert(f == "on" or f == "off", "--fsync off,on") end
if opts.quick then
    opts.slices, opts.fsync_slices, opts.one_slices, opts.streams = 320, 160, 50, 16
end

local emit = B.emitter(opts.out)

local loadavg = B.loadavg

local function tmpdir(tag)
    local base = opts.dir or os.getenv("TMPDIR") or "/tmp"
    local p = ("%s/bench-http-%d-%s-%d"):format(base, uv.os_getpid(), tag, math.random(1e9))
    return p
end

local function rm_rf(p)
    os.execute("rm -rf '" .. p:gsub("'", "'\\''") .. "'")
end

local make_chains, drive = B.make_chains, B.drive

-- The receiver process on a fresh ledger: -> { port, handle, dir }
local function start_server(fsync)
    local dir = tmpdir("recv")
    local out = uv.new_pipe(false)
    local ch = task.channel(1, "bench_port")
    local buf = ""
    local srv = { dir = dir, exited = task.channel(1, "bench_exit") }
    srv.handle = assert(uv.spawn(opts.bin, {
        args = { "run", SCRIPT, "--serve", dir, fsync }, stdio = { nil, out, 2 } },
        function(code)
            srv.handle:close()
            srv.exited:try_send(code)
        end))
    out:read_start(function(err, data)
        if err or not data then
            if not out:is_closing() then out:close() end
            ch:try_send(false)
            return
        end
        buf = buf .. data
        local port = buf:match("PORT (%d+)\n")
        if port then ch:try_send(tonumber(port)) end
    end)
    srv.port = ch:recv(30000)
    assert(srv.port, "the receiver process did not start")
    srv.out = out
    return srv
end

local function stop_server(srv)
    srv.handle:kill("sigterm")
    local code = srv.exited:recv(30000)
    if not srv.out:is_closing() then srv.out:close() end
    return code
end

local function file_direct(chains, fsync)
    local dir = tmpdir("direct")
    local rate, n = B.put_direct(assert(file.new { dir = dir, fsync = fsync == "on" }), chains)
    rm_rf(dir)
    return rate, n
end

local function verify(dir)
    if not opts.bin then return "skipped (no binary)" end
    local p = io.popen(("'%s' verify '%s' 2>&1"):format(opts.bin, dir))
    local out = p:read("*a")
    p:close()
    local records = tonumber(out:match("records%s+(%d+) valid"))
    return out:match("\nOK\n?$") and "OK" or ("FAILED: " .. out:sub(-300)), records
end

local function run_case(name, fsync, n_streams, per)
    local chains = make_chains(n_streams, per)
    local n = n_streams * per
    local child0 = B.cpu_s(-1)
    local srv = start_server(fsync)
    local e = exp_http.new { url = ("http://127.0.0.1:%d/v1/slices"):format(srv.port),
                             timeout_ms = 60000 }
    local self0 = B.cpu_s(0)
    local s, counts = drive(chains, function(sl) return e:put(sl) end)
    local client_cpu = B.cpu_s(0) - self0
    local code = stop_server(srv)
    local server_cpu = B.cpu_s(-1) - child0 -- its whole life: start-up and exit included
    local v, records = verify(srv.dir)
    if v == "OK" and records ~= n then v = ("FAILED: %s records, %d put"):format(records, n) end
    rm_rf(srv.dir)
    local base_rate = file_direct(chains, fsync)
    return { name = name, fsync = fsync, n = n, streams = n_streams, s = s, rate = n / s,
             counts = counts, verify = v, server_exit = code, base_rate = base_rate,
             stats = e:stats(), client_us = client_cpu * 1e6 / n,
             server_us = server_cpu * 1e6 / n }
end

task.spawn("bench", function()
    local ok, err = pcall(function()
        print(("bench-http-export: %s; loadavg %s"):format(
            require("ron.base.net.http_client_c").version():match("^(%S+)"), loadavg()))
        local fails = 0
        for _, fsync in ipairs(opts.fsync) do
            local total = fsync == "on" and opts.fsync_slices or opts.slices
            local one_n = fsync == "on" and math.max(1, math.floor(opts.one_slices / 4))
                          or opts.one_slices
            for _, r in ipairs {
                run_case("one_stream", fsync, 1, one_n),
                run_case("many_streams", fsync, opts.streams,
                         math.max(1, math.floor(total / opts.streams))),
            } do
                local good = (r.counts.ok or 0) == r.n and r.verify == "OK"
                             and r.server_exit == 0
                if not good then fails = fails + 1 end
                local name = ("http_export/%s/fsync_%s"):format(r.name, r.fsync)
                print(("\n== %s: %d slices (%d streams) in %.2f s"):format(name, r.n,
                      r.streams, r.s))
                print(("   over HTTP    %9.0f slices/s  (%.0f us per put%s)"):format(r.rate,
                      1e6 / r.rate * (r.name == "one_stream" and 1 or r.streams),
                      r.name == "one_stream" and "" or ", per stream"))
                print(("   file_direct  %9.0f slices/s  ratio %.3f"):format(r.base_rate,
                      r.rate / r.base_rate))
                print(("   CPU per slice: client %.0f us, receiver %.0f us (its whole life)")
                      :format(r.client_us, r.server_us))
                print(("   answers ok %d; receiver exit %s; verify %s"):format(
                      r.counts.ok or 0, tostring(r.server_exit), r.verify))
                emit(('{"bench":"http_export","name":"%s","params":{"slices":%d,"streams":%d,'
                    .. '"fsync":%s,"receiver_workers":4,"receiver_batch":64},"ns_per_op":%.0f,'
                    .. '"ops_per_s":%.0f,"slices_per_s":%.0f,"seconds":%.3f,"baselines":'
                    .. '{"file_direct":{"ops_per_s":%.0f}},"ratios":{"file_direct":%.4f},'
                    .. '"cpu_us_per_slice":{"client":%.1f,"receiver":%.1f},"ok":%s}'):format(
                    name, r.n, r.streams, tostring(r.fsync == "on"), 1e9 / r.rate, r.rate,
                    r.rate, r.s, r.base_rate, r.rate / r.base_rate, r.client_us, r.server_us,
                    tostring(good)))
            end
        end
        if fails > 0 then error(fails .. " configuration(s) failed their check") end
    end)
    if not ok then
        io.stderr:write("bench-http-export.lua: ", tostring(err), "\n")
        os.exit(1)
    end
end)
