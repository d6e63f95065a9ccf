-- ron.accounting.daemon: the ron-accounting daemon (issue 4, "Main job"): one process that
-- seals the windows of a process-shared counter plane, keeps sealed slices in a WAL until
-- they are ACKed, exports them through the export runtime into a ledger, and serves
-- /metrics, /healthz and /readyz on loopback.
--
--   ron-accounting run examples/daemon.lua [OPTIONS]        (`make run`)
--   ron-accounting run examples/record.lua [OPTIONS] TENANT SUBJECT DIMENSION VALUE
--
--   local daemon = require "ron.accounting.daemon"
--   local cfg, err = daemon.configure(arg)   -- embedded defaults < --config FILE < flags
--   daemon.start(cfg)                        -- from the script's main chunk
--
-- Records reach the daemon through the counter plane file <var>/plane: any process that
-- opens it with daemon.recorder_config(cfg) records into the same counters without a lock
-- (examples/record.lua; the nginx workers of a gateway). The daemon is the plane's one
-- sealer (flock), so counts recorded while it is down stay in the plane and windows that
-- ended meanwhile are sealed, each on its own, when it returns.
--
-- Shutdown (SIGINT/SIGTERM, seed 001 §6): intake stops, the router drains what is pending
-- into the lanes, workers finish their in-flight puts, stragglers are aborted at
-- drain_deadline_ms and counted; the process then exits 0. Un-ACKed slices stay in the WAL
-- and are exported after the next start (wal_replay_task); counts of the open window stay
-- in the plane file.
--
-- Files: cli.lua (flags, the configuration file, the effective-configuration line),
-- schema.lua (the defaults and every key's check), plugins.lua (exporter, fairness and
-- backoff from their settings), heads.lua (stream heads from the ledger), demo.lua (demo
-- traffic, the status line), http.lua / ingest.lua / receiver.lua (the HTTP surface),
-- log.lua; this one starts and stops the daemon.
--
-- Configuration: schema.DEFAULTS (the embedded defaults) are overridden by a Lua file
-- (`--config FILE`, a chunk returning a table with the same keys) and then by flags.
-- Every key is checked: an unknown key or a wrong value is one clear line and exit 2.
-- The effective configuration is logged at WARN on start (seed 000 P-6).
local acct = require "ron.accounting"
local task = require "ron.accounting.runtime.task"
local offload = require "ron.accounting.runtime.offload"
local runtime = require "ron.accounting.runtime"
local cli = require "ron.accounting.daemon.cli"
local demo = require "ron.accounting.daemon.demo"
local heads = require "ron.accounting.daemon.heads"
local log = require "ron.accounting.daemon.log"
local plugins = require "ron.accounting.daemon.plugins"
local schema = require "ron.accounting.daemon.schema"
local uv = require "luv"

local format = string.format
local pairs, ipairs, type, tostring, error, pcall = pairs, ipairs, type, tostring, error, pcall

local _M = {}

-- The daemon's API in one place (examples/, tests and the sidecar use these names).
_M.DEFAULTS = schema.DEFAULTS
_M.USAGE = cli.USAGE
_M.configure = cli.configure
_M.describe = cli.describe
_M.DEMO_TENANTS = demo.TENANTS
_M.log = log

-- (the mapping from the settings to the meter's configuration lives with the schema, which
-- checks it: schema.check runs the core's own checks on it)
_M.paths = schema.paths
_M.recorder_config = schema.recorder_config
_M.meter_config = schema.meter_config

local function mkdir_p(path)
    local acc = path:sub(1, 1) == "/" and "" or "."
    for part in path:gmatch("[^/]+") do
        acc = acc .. "/" .. part
        local st = uv.fs_stat(acc)
        if not st then
            local ok, err = uv.fs_mkdir(acc, 448) -- 0700
            if not ok and not tostring(err):match("^EEXIST") then return nil, err end
        elseif st.type ~= "directory" then
            return nil, acc .. " exists and is not a directory"
        end
    end
    return true
end
_M.mkdir_p = mkdir_p

-- The extra routes of the HTTP server (the operator's admin routes, ingest, the ledger
-- receiver) and the largest body they take (the receiver: one slice, 1 MiB).
local function http_routes(d)
    local routes = require("ron.accounting.daemon.admin").routes(d)
    for _, r in ipairs(routes) do r.name = r.name or "admin" end
    if d.ingest then routes[#routes + 1] = d.ingest:route() end
    -- (each route named: a request refused before its handler is attributed to it)
    local function add(list, name)
        for _, r in ipairs(list) do
            r.name = r.name or name
            routes[#routes + 1] = r
        end
    end
    if d.receiver then add(d.receiver:routes(), "receiver") end
    if d.wallet then add(d.wallet:routes(), "wallet") end
    if d.trail then add(d.trail.routes(d), "audit") end
    return routes
end

local function http_max_body(d)
    local n = d.ingest and d.ingest.max_body or nil
    if d.wallet and (not n or n < 1048576) then n = 1048576 end -- the wallet's 1 MiB
    if d.receiver then
        local rn = require("ron.accounting.daemon.receiver").MAX_BODY
        if not n or n < rn then n = rn end
    end
    return n
end

-- ---------------------------------------------------------------------------------------
-- start

-- Starts the daemon from the script's main chunk; returns the daemon table (tests) or
-- nil, err. Everything runs as tasks on the host's loop; the process ends after shutdown.
function _M.start(cfg)
    if cfg.check then
        io.stdout:write(_M.describe(cfg), "\n")
        return { checked = true }
    end
    log("WARN", "effective configuration: %s", _M.describe(cfg)) -- P-6
    collectgarbage("setpause", cfg.gc_pause)
    local p = _M.paths(cfg)
    local ok, err = mkdir_p(p.var)
    if not ok then return nil, format("state directory %s: %s", p.var, tostring(err)) end

    local meter
    meter, err = acct.open(_M.meter_config(cfg))
    if not meter then return nil, "meter: " .. tostring(err) end

    local exporter
    if cfg.exporter then
        exporter, err = plugins.new("exporter", cfg.exporter, "")
    else
        ok, err = mkdir_p(p.ledger)
        if ok then exporter, err = offload.file { dir = p.ledger, fsync = cfg.ledger_fsync } end
    end
    if not exporter then
        meter:close()
        return nil, "exporter: " .. tostring(err)
    end
    local fairness
    fairness, err = plugins.new("fairness", cfg.fairness, "ron.accounting.export.fairness.")
    local backoff
    if fairness and cfg.backoff then
        backoff, err = plugins.new("backoff", cfg.backoff, "ron.accounting.export.backoff.")
    end
    if not fairness or (cfg.backoff and not backoff) then
        meter:close()
        return nil, err
    end

    local d = { cfg = cfg, meter = meter, paths = p, stopping = false, demo_errors = 0 }
    -- The audit trail first (docs/AUDIT.md, "In the daemon"): everything after it may emit.
    if cfg.audit then
        d.trail = require "ron.accounting.daemon.trail"
        local a, aerr = d.trail.start(cfg, p, log, mkdir_p)
        if not a then
            meter:close()
            return nil, "audit: " .. tostring(aerr)
        end
        d.audit, d.audit_dir = a, not cfg.audit.amnesia and p.audit or nil
        d.audit_emit = function(kind, attrs) return a:emit(kind, attrs) end
        a:emit("daemon", { event = "start", pid = uv.os_getpid() })
        -- An exporter that keeps its own trail of decisions (exporters.ledger: a record per
        -- committed transfer) gets the daemon's.
        if type(exporter.set_audit) == "function" then exporter:set_audit(d.audit_emit) end
        -- Records other processes on the plane refused (nginx workers): AUD-I-35.
        d.refusals = require("ron.accounting.daemon.refusals").new {
            meter = meter, emit = d.audit_emit, pid = uv.os_getpid() }
        task.spawn("audit_refusals", d.refusals.run, d.refusals)
    end
    if cfg.ingest then -- POST /v1/records (docs/ops/ingest.md)
        local iok, ing = pcall(function()
            local o = { meter = meter, clock = cfg.clock or nil, audit = d.audit_emit }
            for k, v in pairs(cfg.ingest) do o[k] = v end
            return require("ron.accounting.daemon.ingest").new(o)
        end)
        if not iok then
            meter:close()
            return nil, "ingest: " .. tostring(ing)
        end
        d.ingest = ing
    end
    if cfg.receiver then -- the ledger receiver (docs/ops/daemon.md, "Ledger receiver")
        local r, what = require("ron.accounting.daemon.receiver").from_config(cfg.receiver, {
            dir = p.ledger, fsync = cfg.ledger_fsync, mkdir = mkdir_p,
            log = function(line) log("WARN", "receiver: %s", line) end })
        if not r then
            meter:close()
            return nil, "receiver: " .. tostring(what)
        end
        d.receiver, d.receiver_backend = r, what
    end
    if cfg.wallet then -- ron-wallet (docs/WALLET.md): its store opens in a task below
        local wok, w = pcall(function()
            return require("ron.wallet.daemon").new(cfg.wallet, {
                var = p.var, log = function(line) log("WARN", "wallet: %s", line) end,
                audit = d.audit_emit })
        end)
        if not wok then
            if d.receiver then d.receiver:close(true) end
            meter:close()
            return nil, "wallet: " .. tostring(w)
        end
        d.wallet = w
    end
    -- HTTP first: a bind failure (the port in use) then ends the start before any task
    -- runs. Until the runtime exists the endpoints answer through this proxy.
    if cfg.listen then
        local host, port = cfg.listen:match("^%[?([^%]]*)%]?:(%d+)$")
        local proxy = {
            ready = function()
                local ready, reasons = false, { "starting" }
                if d.rt then ready, reasons = d.rt:ready() end
                local more, notes = {}, {}
                if d.wallet then
                    local wr, wreasons = d.wallet:ready()
                    if not wr then more = wreasons end
                end
                if d.trail then -- AUD-I-42: a failing trail, by audit.required
                    local treasons
                    treasons, notes = d.trail.ready(d)
                    for _, r in ipairs(treasons) do more[#more + 1] = r end
                end
                if #more > 0 then
                    reasons = ready and {} or reasons or {}
                    for _, r in ipairs(more) do reasons[#reasons + 1] = r end
                    ready = false
                end
                return ready, reasons, notes
            end,
            metrics_text = function()
                return (d.rt and d.rt:metrics_text() or "") ..
                       (d.audit and d.audit:metrics_text() or "") ..
                       (d.attest and d.attest:metrics_text() or "") ..
                       (d.ingest and d.ingest:metrics_text() or "") ..
                       (d.receiver and d.receiver:metrics_text() or "") ..
                       (d.wallet and d.wallet:metrics_text() or "")
            end,
        }
        local hok, http = pcall(require, "ron.accounting.daemon.http")
        local srv, herr
        if hok then
            srv, herr = http.serve { meter = meter, runtime = proxy, host = host,
                                     port = tonumber(port), metrics_public = cfg.metrics_public,
                                     max_conns = cfg.http_max_conns,
                                     max_conns_per_peer = cfg.http_max_conns_per_peer,
                                     reserved_conns = cfg.http_reserved_conns,
                                     header_timeout_ms = cfg.http_header_timeout_ms,
                                     body_timeout_ms = cfg.http_body_timeout_ms,
                                     max_body = http_max_body(d), routes = http_routes(d),
                                     on_early = d.trail and d.trail.on_early(d) }
        else
            herr = http
        end
        if not srv then
            if d.receiver then d.receiver:close(true) end
            meter:close()
            return nil, "http: " .. tostring(herr)
        end
        d.http = srv
        log("INFO", "listening on http://%s:%d (/metrics /healthz /readyz)", host, srv:port())
        if d.receiver then
            local np = 0
            for _ in pairs(cfg.receiver.producers or {}) do np = np + 1 end
            log("INFO", "receiver: PUT http://%s:%d%s/<tenant>/<dimension>/<seq> into %s%s",
                host, srv:port(), d.receiver.prefix, d.receiver_backend,
                d.receiver.hashes and format(" (%d producer(s), bearer tokens bound to tenants)",
                                             np)
                or " (NO AUTHENTICATION: allow_unauthenticated = true)")
        end
        if d.ingest then
            local nt = 0
            for _ in pairs(cfg.ingest.tokens) do nt = nt + 1 end
            log("INFO", "ingest: POST http://%s:%d/v1/records (%d token(s), max_body %d, " ..
                "max_records %d)", host, srv:port(), nt, d.ingest.max_body, d.ingest.max_records)
        end
    end

    -- the host's drain (on SIGINT/SIGTERM) waits a little longer than the runtime's own
    -- deadline, so the runtime aborts and counts its stragglers itself
    task.DRAIN_DEADLINE_MS = cfg.drain_deadline_ms + 2000
    local rt_opts = {
        meter = meter, exporter = exporter, fairness = fairness, backoff = backoff,
        ordered_buffer_cap = cfg.ordered_buffer_cap, pending_cap = cfg.pending_cap,
        put_batch = cfg.put_batch, put_parallel = cfg.put_parallel,
        op_budget_ms = cfg.op_budget_ms, drain_deadline_ms = cfg.drain_deadline_ms,
        clock = cfg.clock or nil, tick_ms = cfg.tick_ms or nil, audit = d.audit_emit,
    }
    if type(exporter.list_heads) == "function" then
        -- The ledger's heads first: a node that lost its own (micronode, a new plane)
        -- continues the ledger's chains instead of starting a second seq 1 of each
        -- stream, which the ledger would refuse as a fork (PRODUCT.md §5, head(stream)).
        -- Until that is done nothing is sealed: counts wait in the plane.
        task.spawn("seed_heads", function()
            if heads.seed(d, exporter) then d.rt = runtime.start(rt_opts) end
        end)
    else
        d.rt = runtime.start(rt_opts)
    end

    -- Audit checkpoints into the ledgers' event feeds (docs/AUDIT.md "Cross-attestation").
    local every = cfg.audit and cfg.audit.attest_interval_ms
    if every == nil then every = require("ron.audit.host").CONFIG_DEFAULTS.attest_interval_ms end
    if d.audit and d.audit_dir and cfg.audit.key_path and every > 0 then
        local targets = {}
        if type(exporter.attest) == "function" then
            targets[#targets + 1] = { name = "exporter", attest = function(cp)
                return exporter:attest(cp)
            end }
        end
        if d.wallet then
            targets[#targets + 1] = { name = "wallet", attest = function(cp)
                return d.wallet.led:attest(cp)
            end }
        end
        if #targets > 0 then
            -- one per chain (a sharded trail, AUD-I-38: each chain's own checkpoints)
            local A, parts = require "ron.accounting.daemon.attest", {}
            for i, c in ipairs(d.audit.chains or { d.audit }) do
                parts[i] = A.new { audit = c, dir = c.dir or d.audit_dir, every_ms = every,
                                   targets = targets, log = log }
            end
            d.attest = A.group(parts)
            task.spawn("audit_attest", d.attest.run, d.attest)
        end
    end
    -- Each ledger's event feed into the trail, exactly once (docs/AUDIT.md "The ledger's
    -- feed in the trail").
    local feed_every = cfg.audit and cfg.audit.feed_interval_ms
    if feed_every == nil then
        feed_every = require("ron.audit.host").CONFIG_DEFAULTS.feed_interval_ms
    end
    if d.audit and d.audit_dir and feed_every > 0 then
        local feed = require "ron.accounting.daemon.feed"
        d.feeds = {}
        if type(exporter.engine) == "function" then
            d.feeds[#d.feeds + 1] = feed.new {
                audit = d.audit, dir = d.audit_dir, name = "exporter", every_ms = feed_every,
                book = exporter.book, log = log,
                engine = function() return exporter:engine() end }
        end
        if d.wallet then
            d.feeds[#d.feeds + 1] = feed.new {
                audit = d.audit, dir = d.audit_dir, name = "wallet", every_ms = feed_every,
                book = d.wallet.led.book, log = log,
                engine = function() return d.wallet.led end }
        end
        for _, f in ipairs(d.feeds) do task.spawn("audit_feed_" .. f.name, f.run, f) end
    end
    if d.wallet then
        task.spawn("wallet_run", require("ron.wallet.daemon").run, d.wallet)
        if d.http then
            log("INFO", "wallet: POST http://%s:%d/v1/issue|transfer|burn|accounts, GET " ..
                "/v1/accounts/<id>/balance|statement (ledger: %s)",
                cfg.listen:match("^%[?([^%]]*)%]?:%d+$"), d.http:port(),
                d.wallet.store_opts.backend == "sqlite" and d.wallet.store_opts.path
                or "postgres")
        end
    end
    local stop_ch = task.channel(1, "daemon_stop")
    task.on_shutdown(function(reason)
        d.stopping = true
        if d.wallet then d.wallet:stop() end
        log("INFO", "%s: shutting down (drain deadline %d ms)", tostring(reason),
            cfg.drain_deadline_ms)
        stop_ch:close()
    end)
    if cfg.demo_rate > 0 then
        task.spawn("demo_load", demo.task, d, cfg.demo_rate)
    end
    if cfg.status_interval_s > 0 then
        task.spawn("status_task", demo.status_task, d, cfg.status_interval_s)
    end
    task.spawn("daemon", function()
        stop_ch:recv() -- Canceled/Closed at shutdown
        local res = d.rt and d.rt:wait() or { finished = 0, aborted = 0 }
        if d.wallet then d.wallet:wait(cfg.drain_deadline_ms) end
        if d.http then d.http:close() end
        if d.receiver then d.receiver:close(true) end
        if d.wallet and d.wallet.store then d.wallet.store:close() end
        demo.status_line(d)
        local backlog = meter:pending_count()
        if d.audit then -- after the runtime: its last records are in the queue
            d.refusals:drain()
            d.audit:emit("daemon", { event = "stop", pid = uv.os_getpid(),
                                     finished = res.finished, aborted = res.aborted })
            local aok, aerr = d.audit:close(cfg.drain_deadline_ms)
            if not aok then log("ERROR", "audit: closing the trail: %s", tostring(aerr)) end
        end
        meter:close()
        log("INFO", "stopped: %d task(s) finished, %d aborted; %d slice(s) await export %s",
            res.finished, res.aborted, backlog,
            cfg.profile == "macronode" and "in the WAL" or "(lost: micronode, amnesia)")
        d.stopped = res
    end)
    log("INFO", "plane %s (record with: ron-accounting run examples/record.lua --var %s "
        .. "TENANT SUBJECT DIMENSION VALUE)", p.plane, p.var)
    if cfg.exporter then -- the slices go elsewhere: no local ledger to point at
        local e = cfg.exporter
        log("INFO", "exporter %s (slices are not kept in a local ledger)",
            type(e) == "table" and tostring(e.module) or tostring(e))
    else
        log("INFO", "ledger %s (check with: ron-accounting verify %s)", p.ledger, p.ledger)
    end
    return d
end

-- The whole main chunk of examples/daemon.lua: configure, start, report errors the way an
-- operator reads them (one line, exit 2 for configuration, 1 for a failed start).
function _M.main(args)
    local cfg, err, code = _M.configure(args)
    if not cfg then
        if err == "help" then
            io.stdout:write(cli.USAGE)
            os.exit(0)
        end
        io.stderr:write("ron-accounting: ", err, "\n")
        os.exit(code or 2)
    end
    local d, serr = _M.start(cfg)
    if not d then
        io.stderr:write("ron-accounting: cannot start: ", tostring(serr), "\n")
        os.exit(1)
    end
    return d
end

local _ = error
return _M
