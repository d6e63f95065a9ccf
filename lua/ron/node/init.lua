-- ron.node: the ron-accounting daemon (issue 4, "Main job"): one process that
-- seals the windows of a process-shared counter plane, keeps sealed slices in a WAL until
-- they are ACKed, exports them through the export runtime into a ledger, and serves
-- /metrics, /healthz and /readyz on loopback.
--
--   ron-accounting run examples/daemon.lua [OPTIONS]        (`make run`)
--   ron-accounting run examples/record.lua [OPTIONS] TENANT SUBJECT DIMENSION VALUE
--
--   local daemon = require("ron.node")
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
-- The node composes the systems (docs/ARCHITECTURE.md, "Lua packages"): it requires them,
-- none of them requires it.
-- Files: cli.lua (flags, the configuration file, the effective-configuration line),
-- schema.lua (the defaults and every key's check), plugins.lua (exporter, fairness and
-- backoff from their settings), heads.lua (stream heads from the ledger), demo.lua (demo
-- traffic, the status line), http.lua / admin.lua / ingest.lua / receiver.lua (the HTTP
-- surface), refusals.lua, attest.lua, feed.lua (the glue between the meter, the ledgers and
-- the audit trail), trail.lua (the trail's start, readiness, proof routes and early
-- refusals), log.lua; this one starts and stops the daemon, one step per system.
--
-- Configuration: schema.DEFAULTS (the embedded defaults) are overridden by a Lua file
-- (`--config FILE`, a chunk returning a table with the same keys) and then by flags.
-- Every key is checked: an unknown key or a wrong value is one clear line and exit 2.
-- What differs from the defaults is logged at INFO on start (seed 000 P-6); --check and
-- --print-config print every key. Without a configuration file the whole product runs
-- (systems = "all", product.lua: ledger, wallet, audit trail on embedded defaults).
local acct = require("ron.accounting")
local offload = require("ron.accounting.runtime.offload")
local runtime = require("ron.accounting.runtime")
local task = require("ron.base.task")
local admin = require("ron.node.admin")
local cli = require("ron.node.cli")
local demo = require("ron.node.demo")
local drain = require("ron.node.drain")
local heads = require("ron.node.heads")
local jitopt = require("ron.base.jitopt")
local gcidle = require("ron.base.gcidle")
local http = require("ron.node.http")
local ingest = require("ron.node.ingest")
local log = require("ron.node.log")
local plugins = require("ron.node.plugins")
local product = require("ron.node.product")
local receiver = require("ron.node.receiver")
local refusals = require("ron.node.refusals")
local schema = require("ron.node.schema")
local notify = require("ron.node.notify")
local status = require("ron.node.status")
local uv = require("luv")
-- The systems a build may lack (RA_BUILD_AUDIT, RA_BUILD_LEDGER: their libraries load with
-- their modules): an error only when the configuration asks for them (schema.lua says so).
local has_audit, audit_host = pcall(require, "ron.audit.host")
local trail = has_audit and require("ron.node.trail")
local has_ledger, attest = pcall(require, "ron.node.attest")
local feed = has_ledger and require("ron.node.feed")
local has_wallet, wallet = pcall(require, "ron.wallet.daemon")

local format = string.format
local pairs, ipairs, type, tostring, tonumber, pcall =
      pairs, ipairs, type, tostring, tonumber, pcall

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

-- ---------------------------------------------------------------------------------------
-- start, one step per system: each takes the daemon table d and answers true, or nil and
-- the error (which names the step); what the steps before opened is closed by abort().

-- The meter (the counter plane, its WAL) and the exporter its slices go to: the file
-- ledger under <var>/ledger, or the configured module (e.g. ron.ledger.exporter).
local function open_meter(d)
    local cfg, p = d.cfg, d.paths
    local ok, err = mkdir_p(p.var)
    if not ok then return nil, format("state directory %s: %s", p.var, tostring(err)) end
    d.meter, err = acct.open(_M.meter_config(cfg))
    if not d.meter then return nil, "meter: " .. tostring(err) end
    if cfg.exporter then
        d.exporter, err = plugins.new("exporter", cfg.exporter, "")
    else
        ok, err = mkdir_p(p.ledger)
        if ok then d.exporter, err = offload.file { dir = p.ledger, fsync = cfg.ledger_fsync } end
    end
    if not d.exporter then return nil, "exporter: " .. tostring(err) end
    d.fairness, err = plugins.new("fairness", cfg.fairness, "ron.accounting.export.fairness.")
    if not d.fairness then return nil, err end
    if cfg.backoff then
        d.backoff, err = plugins.new("backoff", cfg.backoff, "ron.base.backoff.")
        if not d.backoff then return nil, err end
    end
    return true
end

-- The audit trail (ron.audit.host through ron.node.trail, docs/AUDIT.md "In the daemon"):
-- first of the systems, since everything after it may emit.
local function open_audit(d)
    if not d.cfg.audit then return true end
    if not has_audit then return nil, "audit: " .. tostring(audit_host) end
    local a, err = trail.start(d.cfg, d.paths, log, mkdir_p)
    if not a then return nil, "audit: " .. tostring(err) end
    d.trail, d.audit, d.audit_dir = trail, a, not d.cfg.audit.amnesia and d.paths.audit or nil
    d.audit_emit = function(kind, attrs) return a:emit(kind, attrs) end
    a:emit("daemon", { event = "start", pid = uv.os_getpid() })
    -- An exporter that keeps its own trail of decisions (ron.ledger.exporter: a record per
    -- committed transfer) gets the daemon's.
    if type(d.exporter.set_audit) == "function" then d.exporter:set_audit(d.audit_emit) end
    -- Records other processes on the plane refused (nginx workers): AUD-I-35.
    d.refusals = refusals.new { meter = d.meter, emit = d.audit_emit, pid = uv.os_getpid() }
    task.spawn("audit_refusals", d.refusals.run, d.refusals)
    return true
end

-- POST /v1/records (docs/ops/ingest.md): records into the meter.
local function open_ingest(d)
    local cfg = d.cfg
    if not cfg.ingest then return true end
    local o = { meter = d.meter, clock = cfg.clock or nil, audit = d.audit_emit }
    for k, v in pairs(cfg.ingest) do o[k] = v end
    local ok, ing = pcall(ingest.new, o)
    if not ok then return nil, "ingest: " .. tostring(ing) end
    d.ingest = ing
    return true
end

-- The ledger receiver (docs/ops/daemon.md, "Ledger receiver"): this node as the HTTP ledger
-- of others.
local function open_receiver(d)
    local cfg = d.cfg
    if not cfg.receiver then return true end
    local r, what = receiver.from_config(cfg.receiver, {
        dir = d.paths.ledger, fsync = cfg.ledger_fsync, mkdir = mkdir_p,
        log = function(line) log("WARN", "receiver: %s", line) end })
    if not r then return nil, "receiver: " .. tostring(what) end
    d.receiver, d.receiver_backend = r, what
    return true
end

-- ron-wallet (docs/WALLET.md): its store opens in a task (start_wallet).
local function open_wallet(d)
    local cfg = d.cfg
    if not cfg.wallet then return true end
    if not has_wallet then return nil, "wallet: " .. tostring(wallet) end
    local ok, w = pcall(wallet.new, cfg.wallet, {
        var = d.paths.var, log = function(line) log("WARN", "wallet: %s", line) end,
        audit = d.audit_emit })
    if not ok then return nil, "wallet: " .. tostring(w) end
    d.wallet = w
    return true
end

-- The HTTP surface: the built-in routes, the operator's admin routes, and those of the
-- systems configured. Until the runtime exists the endpoints answer through this proxy.
local function http_proxy(d)
    return {
        -- -> ready, reasons (503), notes (after "ready": what is wrong without making the
        -- process unready, a failing trail with audit.required = false)
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
end

-- Each route named by its system: a request refused before its handler is attributed to
-- it (accounting_http_early_refusals_total{route}, ron.node.http).
local function http_routes(d)
    local routes = {}
    local function add(list, name)
        for _, r in ipairs(list) do
            r.name = r.name or name
            routes[#routes + 1] = r
        end
    end
    add(admin.routes(d), "admin")
    if d.ingest then add({ d.ingest:route() }, "ingest") end
    for _, sys in ipairs { "receiver", "wallet" } do
        if d[sys] then add(d[sys]:routes(), sys) end
    end
    if d.trail then add(d.trail.routes(d), "audit") end
    return routes
end

-- The largest body the routes take (the receiver's one slice, the wallet's 1 MiB).
local function http_max_body(d)
    local n = d.ingest and d.ingest.max_body or nil
    if d.wallet and (not n or n < 1048576) then n = 1048576 end
    if d.receiver and (not n or n < receiver.MAX_BODY) then n = receiver.MAX_BODY end
    return n
end

local function log_http(d, host)
    local cfg, srv = d.cfg, d.http
    log("INFO", "listening on http://%s:%d (/ /metrics /healthz /readyz)", host, srv:port())
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

-- HTTP before any task runs: a bind failure (the port in use) then ends the start.
local function open_http(d)
    local cfg = d.cfg
    if not cfg.listen then return true end
    local host, port = cfg.listen:match("^%[?([^%]]*)%]?:(%d+)$")
    local ok, srv, err = pcall(http.serve, {
        meter = d.meter, runtime = http_proxy(d), host = host, port = tonumber(port),
        metrics_public = cfg.metrics_public, max_conns = cfg.http_max_conns,
        max_conns_per_peer = cfg.http_max_conns_per_peer,
        reserved_conns = cfg.http_reserved_conns,
        header_timeout_ms = cfg.http_header_timeout_ms,
        body_timeout_ms = cfg.http_body_timeout_ms,
        max_header_bytes = cfg.http_max_header_bytes,
        max_body = http_max_body(d), routes = http_routes(d),
        on_early = d.trail and d.trail.on_early(d), status_page = status.new(d) })
    if not ok or not srv then return nil, "http: " .. tostring(ok and err or srv) end
    d.http = srv
    log_http(d, host)
    return true
end

-- The export runtime (the meter's slices into the exporter). With an exporter that lists
-- the ledger's heads, those first: a node that lost its own (micronode, a new plane)
-- continues the ledger's chains instead of starting a second seq 1 of each stream, which
-- the ledger would refuse as a fork (PRODUCT.md §5, head(stream)). Until that is done
-- nothing is sealed: counts wait in the plane.
local function start_runtime(d)
    local cfg, exporter = d.cfg, d.exporter
    -- the host's drain (on SIGINT/SIGTERM) waits a little longer than the runtime's own
    -- deadline, so the runtime aborts and counts its stragglers itself
    task.DRAIN_DEADLINE_MS = cfg.drain_deadline_ms + 2000
    local rt_opts = {
        meter = d.meter, exporter = exporter, fairness = d.fairness, backoff = d.backoff,
        ordered_buffer_cap = cfg.ordered_buffer_cap, pending_cap = cfg.pending_cap,
        put_batch = cfg.put_batch, put_parallel = cfg.put_parallel,
        op_budget_ms = cfg.op_budget_ms, drain_deadline_ms = cfg.drain_deadline_ms,
        clock = cfg.clock or nil, tick_ms = cfg.tick_ms or nil, audit = d.audit_emit,
    }
    if type(exporter.list_heads) == "function" then
        task.spawn("seed_heads", function()
            if heads.seed(d, exporter) then d.rt = runtime.start(rt_opts) end
        end)
    else
        d.rt = runtime.start(rt_opts)
    end
    return true
end

-- The ledgers the daemon commits to (the exporter's, the wallet's), for the glue between
-- them and the audit trail: { name, book, engine = fn() -> engine, attest = fn(cp) }.
local function ledgers(d)
    local out, e = {}, d.exporter
    local has_engine, has_attest = type(e.engine) == "function", type(e.attest) == "function"
    if has_engine or has_attest then
        out[1] = { name = "exporter", book = e.book,
                   engine = has_engine and function() return e:engine() end or nil,
                   attest = has_attest and function(cp) return e:attest(cp) end or nil }
    end
    if d.wallet then
        -- (the wallet's engine is replaced when its node rejoins the fleet: ron.wallet.fleet)
        local w = d.wallet
        out[#out + 1] = { name = "wallet", book = w.led.book, engine = function() return w.led end,
                          attest = function(cp) return w.led:attest(cp) end }
    end
    return out
end

-- The glue of the audit trail and the ledgers (docs/AUDIT.md "Cross-attestation" and "The
-- ledger's feed in the trail"): checkpoints into the ledgers, their events into the trail.
local function start_audit_glue(d)
    local a = d.cfg.audit
    if not (d.audit and d.audit_dir) then return true end
    local list = ledgers(d)
    if #list == 0 then return true end
    if not has_ledger then return nil, "audit: " .. tostring(attest) end
    local defaults = audit_host.CONFIG_DEFAULTS
    local every = a.attest_interval_ms
    if every == nil then every = defaults.attest_interval_ms end
    if a.key_path and every > 0 then d.attest = attest.start(d, list, every, log) end
    local feed_every = a.feed_interval_ms
    if feed_every == nil then feed_every = defaults.feed_interval_ms end
    if feed_every > 0 then d.feeds = feed.start(d, list, feed_every, log) end
    return true
end

local function start_wallet(d)
    if not d.wallet then return true end
    task.spawn("wallet_run", wallet.run, d.wallet)
    if d.http then
        log("INFO", "wallet: POST http://%s:%d/v1/issue|transfer|burn|accounts, GET " ..
            "/v1/accounts/<id>/balance|statement (ledger: %s)",
            d.cfg.listen:match("^%[?([^%]]*)%]?:%d+$"), d.http:port(),
            d.wallet.store_opts.backend == "sqlite" and d.wallet.store_opts.path
            or "postgres")
    end
    return true
end

-- The end, in reverse: the runtime drains, then the wallet, the HTTP server, the receiver,
-- the trail (after the runtime: its last records are in the queue), the meter.
local function stop(d, stop_ch)
    local cfg, meter = d.cfg, d.meter
    stop_ch:recv() -- Canceled/Closed at shutdown
    local res = d.rt and d.rt:wait() or { finished = 0, aborted = 0 }
    if d.rt then d.rt:wait_puts(cfg.drain_deadline_ms) end -- the rater's put_many in flight
    if d.wallet then d.wallet:wait(cfg.drain_deadline_ms) end
    drain.report(d, log) -- what the deadline left for recovery, before the stores close
    if d.http then d.http:close() end
    if d.receiver then d.receiver:close(true) end
    if d.wallet and d.wallet.store then d.wallet.store:close() end
    demo.status_line(d)
    local backlog = meter:pending_count()
    if d.audit then
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
end

local function start_tasks(d)
    local cfg = d.cfg
    local stop_ch = task.channel(1, "daemon_stop")
    task.on_shutdown(function(reason)
        d.stopping = true
        if d.gc then d.gc:stop() end
        if d.wallet then d.wallet:stop() end
        log("INFO", "%s: shutting down (drain deadline %d ms)", tostring(reason),
            cfg.drain_deadline_ms)
        stop_ch:close()
    end)
    if cfg.demo_rate > 0 then task.spawn("demo_load", demo.task, d, cfg.demo_rate) end
    if cfg.status_interval_s > 0 then
        task.spawn("status_task", demo.status_task, d, cfg.status_interval_s)
    end
    task.spawn("daemon", stop, d, stop_ch)
    return true
end

-- Readiness told to systemd (Type=notify) once /readyz would answer 200.
local function start_notify(d) return notify.start(http_proxy(d).ready) end

local function log_started(d)
    local cfg, p = d.cfg, d.paths
    if cfg.composed then return true end -- the whole product: its banner says it (product.lua)
    log("INFO", "plane %s (record with: ron-accounting run examples/record.lua --var %s "
        .. "TENANT SUBJECT DIMENSION VALUE)", p.plane, p.var)
    if cfg.exporter then -- the slices go elsewhere: no local ledger to point at
        local e = cfg.exporter
        log("INFO", "exporter %s (slices are not kept in a local ledger)",
            type(e) == "table" and tostring(e.module) or tostring(e))
    else
        log("INFO", "ledger %s (check with: ron-accounting verify %s)", p.ledger, p.ledger)
    end
    return true
end

-- What a failed start had opened: closed (the trail's tasks end with the process).
local function abort(d)
    if d.gc then d.gc:stop() end
    if d.receiver then d.receiver:close(true) end
    if d.meter then d.meter:close() end
end

-- product.open_secrets / product.start: the whole product's secrets and banner (issue 27;
-- nothing without cfg.composed).
local STEPS = { open_meter, product.open_secrets, open_audit, open_ingest, open_receiver,
                open_wallet, open_http, start_runtime, start_audit_glue, start_wallet,
                start_tasks, start_notify, log_started, product.start }

-- Starts the daemon from the script's main chunk; returns the daemon table (tests) or
-- nil, err. Everything runs as tasks on the host's loop; the process ends after shutdown.
function _M.start(cfg)
    if cfg.check then
        io.stdout:write(cfg.check == "print" and cli.print_config(cfg) or _M.describe(cfg),
                        cfg.check == "print" and "" or "\n")
        return { checked = true }
    end
    -- P-6: what differs from the defaults (--print-config: every key)
    log("INFO", "configuration: %s", cli.describe_changed(cfg))
    local gc = gcidle.configure { pause = cfg.gc_pause, stepmul = cfg.gc_stepmul,
                                  idle_us = cfg.gc_idle_us }
    jitopt.apply() -- the loop VM's machine-code areas (issue 25: fewer mprotect calls)
    local d = { cfg = cfg, paths = _M.paths(cfg), stopping = false, demo_errors = 0, gc = gc }
    for _, step in ipairs(STEPS) do
        local ok, err = step(d)
        if not ok then
            abort(d)
            return nil, err
        end
    end
    return d
end

-- configure(args), or the process ends the way an operator reads it: the usage for --help
-- (exit 0), a configuration error in one line "<who>: why" (exit 2, or configure's code).
function _M.configure_or_exit(args, who)
    local cfg, err, code = _M.configure(args)
    if cfg then return cfg end
    if err == "help" then
        io.stdout:write(cli.USAGE)
        os.exit(0)
    end
    io.stderr:write(who, ": ", err, "\n")
    os.exit(code or 2)
end

-- The whole main chunk of examples/daemon.lua: configure, start, report errors the way an
-- operator reads them (one line, exit 2 for configuration, 1 for a failed start).
function _M.main(args)
    local cfg = _M.configure_or_exit(args, "ron-accounting")
    local d, serr = _M.start(cfg)
    if not d then
        io.stderr:write("ron-accounting: cannot start: ", tostring(serr), "\n")
        os.exit(1)
    end
    return d
end

return _M
