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
-- Configuration: DEFAULTS below (the embedded defaults) are overridden by a Lua file
-- (`--config FILE`, a chunk returning a table with the same keys) and then by flags.
-- Every key is checked: an unknown key or a wrong value is one clear line and exit 2.
-- The effective configuration is logged at WARN on start (seed 000 P-6).
local acct = require "ron.accounting"
local task = require "ron.accounting.runtime.task"
local offload = require "ron.accounting.runtime.offload"
local runtime = require "ron.accounting.runtime"
local uv = require "luv"

local format, concat, sort, floor = string.format, table.concat, table.sort, math.floor
local pairs, ipairs, type, tostring, tonumber, error, pcall, setfenv, loadfile =
      pairs, ipairs, type, tostring, tonumber, error, pcall, setfenv, loadfile

local _M = {}
local seed_heads -- defined below (stream heads from the ledger)

-- The embedded defaults (docs/OPERATIONS.md, "The daemon").
_M.DEFAULTS = {
    profile = "macronode",      -- macronode: WAL, amnesia off; micronode: RAM only (P-6)
    var_dir = "var",            -- <var>/plane, <var>/wal, <var>/ledger
    plane = false,              -- false: <var>/plane; or the plane file's path, e.g. on
                                -- a memory file system for a gateway (examples/nginx/)
    window_len_s = 300,
    shards = 64,
    capacity_rows = 200000,
    pending_slices_cap = 8192,
    dimensions = {},            -- extra dimensions after bytes, requests, cpu_units
    wal_max_bytes = 512 * 1024 * 1024,
    ledger_dir = false,         -- false: <var>/ledger (the file ledger)
    ledger_fsync = true,
    exporter = false,           -- false: the file ledger; or { module = "name", ... }
    fairness = "round_robin",   -- "round_robin" | "wfq" | { policy = ..., weights = ... }
                                -- | { module = "name", ... } (an operator's policy)
    backoff = false,            -- false: backoff.exponential defaults (50 ms .. 5 s, full
                                -- jitter); or { base_ms =, cap_ms =, jitter = } |
                                -- { module = "name", ... }
    ordered_buffer_cap = 1024,
    pending_cap = 1024,
    op_budget_ms = 10000,
    drain_deadline_ms = 5000,
    listen = "127.0.0.1:9464",  -- /metrics /healthz /readyz; false: no HTTP
    metrics_public = false,     -- listen on a non-loopback address: /metrics /healthz
                                -- /readyz answer loopback peers only unless true
    ingest = false,             -- POST /v1/records on `listen`: { tokens = { [b3hex of a
                                -- token] = tenant }, ... } (ron.accounting.daemon.ingest)
    receiver = false,           -- the ledger receiver on `listen` (PUT/GET /v1/slices/...):
                                -- { backend = "file" | { module = ..., ... }, token_hash,
                                -- ... } (ron.accounting.daemon.receiver): this daemon is then
                                -- the HTTP ledger of others (exporters.http)
    status_interval_s = 60,     -- a status line on stderr; 0: none
    demo_rate = 0,              -- records/s of built-in demo traffic (3 tenants); 0: none
    clock = false,              -- a function returning UTC seconds (tests); false: system
    tick_ms = false,            -- rollover every tick_ms (tests, with clock); false: at
                                -- UTC window boundaries
}

local USAGE = [[
usage: ron-accounting run examples/daemon.lua [--config FILE] [--var DIR] [--window S]
           [--listen HOST:PORT|off] [--profile macronode|micronode] [--demo RATE]
           [--status S] [--plane PATH] [--check]

  --config FILE   a Lua file returning a table of settings (docs/OPERATIONS.md)
  --var DIR       state directory: DIR/plane, DIR/wal, DIR/ledger (default ./var)
  --plane PATH    the counter plane file, instead of DIR/plane (a gateway's, for example)
  --window S      window length in seconds, 60..3600 (default 300)
  --listen A      address of /metrics, /healthz, /readyz (default 127.0.0.1:9464)
  --profile P     macronode (WAL, default) or micronode (RAM only: amnesia)
  --demo RATE     record RATE demo records per second into the plane (default 0)
  --status S      a status line every S seconds (default 60; 0: none)
  --check         print the effective configuration and exit
]]
_M.USAGE = USAGE

local function log(level, fmt, ...)
    io.stderr:write(format("ron-accounting: %s %s\n", level, format(fmt, ...)))
end
_M.log = log

-- ---------------------------------------------------------------------------------------
-- configuration

local function bad(fmt, ...) return nil, "configuration: " .. format(fmt, ...) end

local function int_in(lo, hi)
    return function(k, v)
        if type(v) ~= "number" or v ~= floor(v) or v < lo or v > hi then
            return bad("%s must be an integer in %d..%d, got %s", k, lo, hi, tostring(v))
        end
        return true
    end
end

local function plugin(k, v, names)
    if type(v) == "string" then
        if names[v] then return true end
        local known = {}
        for n in pairs(names) do known[#known + 1] = n end
        sort(known)
        return bad("%s must be one of %s, or { module = \"...\" }, got %q", k,
                   concat(known, ", "), v)
    end
    if type(v) == "table" then
        if v.module ~= nil and type(v.module) ~= "string" then
            return bad("%s.module must be a module name", k)
        end
        if v.module == nil and v.policy ~= nil and not names[v.policy] then
            return bad("%s.policy %q is unknown", k, tostring(v.policy))
        end
        return true
    end
    return bad("%s must be a name or a table, got %s", k, type(v))
end

local CHECK = {
    profile = function(k, v)
        if v ~= "macronode" and v ~= "micronode" then
            return bad("%s must be \"macronode\" or \"micronode\", got %s", k, tostring(v))
        end
        return true
    end,
    var_dir = function(k, v)
        if type(v) ~= "string" or v == "" then return bad("%s must be a directory path", k) end
        return true
    end,
    plane = function(k, v)
        if v ~= false and (type(v) ~= "string" or v == "") then
            return bad("%s must be a file path or false (<var_dir>/plane)", k)
        end
        return true
    end,
    window_len_s = int_in(60, 3600),
    shards = int_in(1, 4096),
    capacity_rows = int_in(1, 2 ^ 31),
    pending_slices_cap = int_in(1, 2 ^ 31),
    dimensions = function(k, v)
        if type(v) ~= "table" then return bad("%s must be a list of names", k) end
        for i, d in ipairs(v) do
            if type(d) ~= "string" or not d:match("^[a-z][a-z0-9_]*$") or #d > 32 then
                return bad("%s[%d] must match [a-z][a-z0-9_]* (at most 32 bytes)", k, i)
            end
        end
        return true
    end,
    wal_max_bytes = int_in(16 * 1024 * 1024, 2 ^ 50),
    ledger_dir = function(k, v)
        if v ~= false and (type(v) ~= "string" or v == "") then
            return bad("%s must be a directory path or false", k)
        end
        return true
    end,
    ledger_fsync = function(k, v)
        if type(v) ~= "boolean" then return bad("%s must be a boolean", k) end
        return true
    end,
    exporter = function(k, v)
        if v == false then return true end
        if type(v) ~= "table" or type(v.module) ~= "string" then
            return bad("%s must be false (the file ledger) or { module = \"name\", ... }", k)
        end
        return true
    end,
    fairness = function(k, v) return plugin(k, v, { round_robin = true, wfq = true }) end,
    backoff = function(k, v)
        if v == false then return true end
        return plugin(k, v, { exponential = true })
    end,
    ordered_buffer_cap = int_in(1, 1048576),
    pending_cap = int_in(1, 1048576),
    op_budget_ms = int_in(1, 3600000),
    drain_deadline_ms = int_in(1, 3600000),
    listen = function(k, v)
        if v == false then return true end
        if type(v) ~= "string" then return bad("%s must be \"HOST:PORT\" or false", k) end
        local host, port = v:match("^%[?([^%]]*)%]?:(%d+)$")
        port = tonumber(port)
        if not host or host == "" or not port or port > 65535 then
            return bad("%s must be \"HOST:PORT\" (port 0..65535) or false, got %q", k, v)
        end
        return true
    end,
    metrics_public = function(k, v)
        if type(v) ~= "boolean" then return bad("%s must be a boolean", k) end
        return true
    end,
    ingest = function(k, v)
        local ok, err = require("ron.accounting.daemon.ingest").check_config(v, k)
        if not ok then return bad("%s", err) end
        return true
    end,
    receiver = function(k, v)
        local ok, err = require("ron.accounting.daemon.receiver").check_config(v, k)
        if not ok then return bad("%s", err) end
        return true
    end,
    status_interval_s = int_in(0, 86400),
    demo_rate = int_in(0, 10000000),
    clock = function(k, v)
        if v ~= false and type(v) ~= "function" then
            return bad("%s must be a function returning UTC seconds, or false", k)
        end
        return true
    end,
    tick_ms = function(k, v)
        if v ~= false and (type(v) ~= "number" or v ~= floor(v) or v < 1) then
            return bad("%s must be a positive integer or false", k)
        end
        return true
    end,
}

local function sorted_keys(t)
    local ks = {}
    for k in pairs(t) do ks[#ks + 1] = tostring(k) end
    sort(ks)
    return ks
end

-- Loads a configuration file: a Lua chunk returning a table. It runs with the standard
-- library visible (os.getenv, arithmetic) but its globals do not leak into the daemon.
local function load_file(path)
    local chunk, err = loadfile(path)
    if not chunk then return bad("cannot load %s", tostring(err)) end
    setfenv(chunk, setmetatable({}, { __index = _G }))
    local ok, t = pcall(chunk)
    if not ok then return bad("%s: %s", path, tostring(t)) end
    if type(t) ~= "table" then return bad("%s must return a table, got %s", path, type(t)) end
    return t
end

local FLAGS = { ["--config"] = "config", ["--var"] = "var_dir", ["--window"] = "window_len_s",
                ["--listen"] = "listen", ["--profile"] = "profile", ["--demo"] = "demo_rate",
                ["--status"] = "status_interval_s", ["--plane"] = "plane" }
local NUMERIC = { window_len_s = true, demo_rate = true, status_interval_s = true }

-- args: the script's arg table (arg[1..n]). -> cfg, positional | nil, err, exit_code
-- (err "help" for --help: print USAGE, exit 0).
function _M.configure(args)
    args = args or {}
    local flags, positional, check = {}, {}, false
    local i = 1
    while i <= #args do
        local a = args[i]
        if a == "--help" or a == "-h" then return nil, "help", 0 end
        if a == "--check" then
            check = true
        elseif FLAGS[a] then
            local v = args[i + 1]
            if v == nil then return nil, format("%s needs a value (see --help)", a), 2 end
            local key = FLAGS[a]
            if NUMERIC[key] then
                local n = tonumber(v)
                if not n then return nil, format("%s needs a number, got %q", a, v), 2 end
                v = n
            elseif key == "listen" and v == "off" then
                v = false
            end
            flags[key] = v
            i = i + 1
        elseif a:sub(1, 2) == "--" then
            return nil, format("unknown option %s (see --help)", a), 2
        else
            positional[#positional + 1] = a
        end
        i = i + 1
    end

    local cfg = {}
    for k, v in pairs(_M.DEFAULTS) do cfg[k] = v end
    local sources = {}
    if flags.config then
        local t, err = load_file(flags.config)
        if not t then return nil, err, 2 end
        for _, k in ipairs(sorted_keys(t)) do
            if CHECK[k] == nil then
                return nil, format("configuration: unknown key '%s' in %s", k, flags.config), 2
            end
            cfg[k] = t[k]
            sources[k] = flags.config
        end
        flags.config = nil
    end
    for k, v in pairs(flags) do
        cfg[k] = v
        sources[k] = "flag"
    end
    for _, k in ipairs(sorted_keys(CHECK)) do
        local ok, err = CHECK[k](k, cfg[k])
        if not ok then return nil, err, 2 end
    end
    if cfg.tick_ms and not cfg.clock then
        -- tick_ms drives rollovers off the UTC grid: only with an injected clock
        return nil, "configuration: tick_ms needs clock (it is for tests)", 2
    end
    if cfg.ingest and not cfg.listen then
        return nil, "configuration: ingest needs listen (POST /v1/records is served there)", 2
    end
    if cfg.receiver and not cfg.listen then
        return nil, "configuration: receiver needs listen (PUT /v1/slices/... is served there)", 2
    end
    cfg.check, cfg.sources = check, sources
    return cfg, positional
end

-- "k=v k=v ..." of the effective configuration, sorted, functions and tables summarised.
function _M.describe(cfg)
    local out = {}
    for _, k in ipairs(sorted_keys(_M.DEFAULTS)) do
        local v = cfg[k]
        local s
        if type(v) == "function" then
            s = "<function>"
        elseif type(v) == "table" then
            local parts = {}
            if #v > 0 then
                for _, x in ipairs(v) do parts[#parts + 1] = tostring(x) end
            else
                for _, kk in ipairs(sorted_keys(v)) do
                    local x = v[kk]
                    parts[#parts + 1] = kk .. ":" .. (type(x) == "table" and "{...}"
                                                      or tostring(x))
                end
            end
            s = "{" .. concat(parts, ",") .. "}"
        else
            s = tostring(v)
        end
        out[#out + 1] = k .. "=" .. s
    end
    return concat(out, " ")
end

function _M.paths(cfg)
    local var = cfg.var_dir
    return { var = var, plane = cfg.plane or (var .. "/plane"), wal = var .. "/wal",
             ledger = cfg.ledger_dir or (var .. "/ledger") }
end

-- The acct.open() table of a process that only records into the daemon's plane: the
-- plane's settings must be the daemon's (the core refuses a mismatch).
function _M.recorder_config(cfg)
    local p = _M.paths(cfg)
    return { window_len_s = cfg.window_len_s, shards = cfg.shards,
             capacity_rows = cfg.capacity_rows, pending_slices_cap = cfg.pending_slices_cap,
             dimensions = cfg.dimensions, shm = p.plane,
             amnesia = cfg.profile == "micronode", clock = cfg.clock or nil }
end

-- The daemon's own acct.open() table: the recorder's plus the WAL (macronode).
function _M.meter_config(cfg)
    local c = _M.recorder_config(cfg)
    if cfg.profile == "macronode" then
        c.wal = { dir = _M.paths(cfg).wal, max_bytes = cfg.wal_max_bytes }
    end
    return c
end

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

-- A plug-in from its configuration: a built-in name, { policy = name, ... } or
-- { module = "name", ... } (module.new(opts)).
local function plugin_new(kind, v, builtin_prefix)
    if v == false or v == nil then return nil end
    local name, opts
    if type(v) == "string" then
        name, opts = builtin_prefix .. v, nil
    else
        opts = {}
        for k, x in pairs(v) do
            if k ~= "module" and k ~= "policy" then opts[k] = x end
        end
        name = v.module or (builtin_prefix .. (v.policy or "exponential"))
    end
    local ok, mod = pcall(require, name)
    if not ok then return nil, format("%s: cannot load %s: %s", kind, name, tostring(mod)) end
    if type(mod) ~= "table" or type(mod.new) ~= "function" then
        return nil, format("%s: module %s has no new(opts)", kind, name)
    end
    local ok2, obj, err = pcall(mod.new, opts)
    if not ok2 or not obj then
        return nil, format("%s: %s.new: %s", kind, name, tostring(ok2 and err or obj))
    end
    return obj
end

-- ---------------------------------------------------------------------------------------
-- demo traffic and status

local DEMO_TENANTS = { "6f1c3c1e-2b7a-4d5e-9a43-0c8e5b1f7a21",
                       "b2d4e6f8-1a3c-4e5f-8b7d-9c0e2f4a6b8d",
                       "3e9a1b5c-7d2f-4a6e-b1c8-5f0d3e7a9b24" }
_M.DEMO_TENANTS = DEMO_TENANTS

local function demo_task(d, rate)
    local m = d.meter
    local tenants, subjects = {}, {}
    for i, t in ipairs(DEMO_TENANTS) do
        tenants[i] = assert(acct.tenant(t))
        subjects[i] = m:subject("demo-user-" .. i)
    end
    local per_tick = rate / 10
    local owed, n = 0, 0
    while not d.stopping do
        owed = owed + per_tick
        while owed >= 1 do
            owed = owed - 1
            n = n + 1
            local k = n % 3 + 1
            local ok, err = m:record(tenants[k], subjects[k], "requests", 1)
            if ok then ok, err = m:record(tenants[k], subjects[k], "bytes", 512 + n % 1024) end
            if not ok then
                d.demo_errors = d.demo_errors + 1
                if d.demo_errors == 1 or d.demo_errors % 10000 == 0 then
                    log("WARN", "demo record: %s (%d so far)", tostring(err), d.demo_errors)
                end
            end
        end
        if not task.sleep(100) then break end
    end
end

local function status_line(d)
    if not d.rt then
        log("INFO", "status: starting (seeding stream heads from the ledger)")
        return
    end
    local rm = d.rt:metrics()
    local ready, reasons = d.rt:ready()
    local e = rm.exports
    log("INFO", "status: backlog=%d exported ok=%d dup=%d fail=%d retries=%d ready=%s%s",
        rm.backlog, e.ok, e.dup, e.fail, rm.retries, ready and "yes" or "no",
        ready and "" or (" (" .. concat(reasons, "; ") .. ")"))
end

-- The extra routes of the HTTP server (ingest, the ledger receiver) and the largest body
-- they take (the receiver: one slice, 1 MiB).
local function http_routes(d)
    local routes = {}
    if d.ingest then routes[#routes + 1] = d.ingest:route() end
    if d.receiver then
        for _, r in ipairs(d.receiver:routes()) do routes[#routes + 1] = r end
    end
    return #routes > 0 and routes or nil
end

local function http_max_body(d)
    local n = d.ingest and d.ingest.max_body or nil
    if d.receiver then
        local rn = require("ron.accounting.daemon.receiver").MAX_BODY
        if not n or n < rn then n = rn end
    end
    return n
end

local function status_task(d, every_s)
    while task.sleep(every_s * 1000) do status_line(d) end
end

-- ---------------------------------------------------------------------------------------
-- stream heads from the ledger

-- Seeds the meter with every head the exporter lists. A micronode (no WAL: its heads
-- may be gone) retries until the ledger answers or the daemon stops, since sealing
-- before would fork every chain; a macronode has its heads in the plane and WAL, so the
-- ledger's are a cross-check and a failure to list them is only logged. -> true to start
-- the runtime, false when the daemon stopped meanwhile.
function seed_heads(d, exporter)
    local amnesia = d.cfg.profile == "micronode"
    local hs, err
    local delay = 100
    while not d.stopping do
        hs, err = exporter:list_heads()
        if hs or not amnesia then break end
        log("WARN", "cannot list the ledger's stream heads (%s); nothing is sealed until it "
            .. "answers (micronode: sealing now would fork the chains); retry in %d ms",
            tostring(err), delay)
        if not task.sleep(delay) then return false end
        delay = math.min(delay * 2, 5000)
    end
    if d.stopping then return false end
    if not hs then
        log("WARN", "cannot list the ledger's stream heads: %s (the WAL's are used)", tostring(err))
        return true
    end
    local seeded, own, failed = 0, 0, 0
    for _, h in ipairs(hs) do
        local ok, serr = d.meter:seed_head(h.tenant, h.dimension, h)
        if ok then
            seeded = seeded + 1
        elseif tostring(serr):match("^Incompatible") then
            own = own + 1 -- this node's chain is ahead (slices not exported yet) or forked
        else
            failed = failed + 1
            if failed <= 3 then
                log("WARN", "stream head %s/%s: %s", h.tenant, h.dimension, tostring(serr))
            end
        end
    end
    log(own > 0 and amnesia and "WARN" or "INFO",
        "stream heads from the ledger: %d listed, %d continued or already equal, %d where "
        .. "this node has its own chain%s, %d refused", #hs, seeded, own,
        amnesia and "" or " (slices not exported yet)", failed)
    return true
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
    local p = _M.paths(cfg)
    local ok, err = mkdir_p(p.var)
    if not ok then return nil, format("state directory %s: %s", p.var, tostring(err)) end

    local meter
    meter, err = acct.open(_M.meter_config(cfg))
    if not meter then return nil, "meter: " .. tostring(err) end

    local exporter
    if cfg.exporter then
        exporter, err = plugin_new("exporter", cfg.exporter, "")
    else
        ok, err = mkdir_p(p.ledger)
        if ok then exporter, err = offload.file { dir = p.ledger, fsync = cfg.ledger_fsync } end
    end
    if not exporter then
        meter:close()
        return nil, "exporter: " .. tostring(err)
    end
    local fairness
    fairness, err = plugin_new("fairness", cfg.fairness, "ron.accounting.export.fairness.")
    local backoff
    if fairness and cfg.backoff then
        backoff, err = plugin_new("backoff", cfg.backoff, "ron.accounting.export.backoff.")
    end
    if not fairness or (cfg.backoff and not backoff) then
        meter:close()
        return nil, err
    end

    local d = { cfg = cfg, meter = meter, paths = p, stopping = false, demo_errors = 0 }
    if cfg.ingest then -- POST /v1/records (docs/OPERATIONS.md, "Ingest: POST /v1/records")
        local iok, ing = pcall(function()
            local o = { meter = meter, clock = cfg.clock or nil }
            for k, v in pairs(cfg.ingest) do o[k] = v end
            return require("ron.accounting.daemon.ingest").new(o)
        end)
        if not iok then
            meter:close()
            return nil, "ingest: " .. tostring(ing)
        end
        d.ingest = ing
    end
    if cfg.receiver then -- the ledger receiver (docs/OPERATIONS.md, "Ledger receiver")
        local r, what = require("ron.accounting.daemon.receiver").from_config(cfg.receiver, {
            dir = p.ledger, fsync = cfg.ledger_fsync, mkdir = mkdir_p,
            log = function(line) log("WARN", "receiver: %s", line) end })
        if not r then
            meter:close()
            return nil, "receiver: " .. tostring(what)
        end
        d.receiver, d.receiver_backend = r, what
    end
    -- HTTP first: a bind failure (the port in use) then ends the start before any task
    -- runs. Until the runtime exists the endpoints answer through this proxy.
    if cfg.listen then
        local host, port = cfg.listen:match("^%[?([^%]]*)%]?:(%d+)$")
        local proxy = {
            ready = function()
                if d.rt then return d.rt:ready() end
                return false, { "starting" }
            end,
            metrics_text = function()
                return (d.rt and d.rt:metrics_text() or "") ..
                       (d.ingest and d.ingest:metrics_text() or "") ..
                       (d.receiver and d.receiver:metrics_text() or "")
            end,
        }
        local hok, http = pcall(require, "ron.accounting.daemon.http")
        local srv, herr
        if hok then
            srv, herr = http.serve { meter = meter, runtime = proxy, host = host,
                                     port = tonumber(port), metrics_public = cfg.metrics_public,
                                     max_body = http_max_body(d), routes = http_routes(d) }
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
            log("INFO", "receiver: PUT http://%s:%d%s/<tenant>/<dimension>/<seq> into %s%s",
                host, srv:port(), d.receiver.prefix, d.receiver_backend,
                d.receiver.hashes and " (bearer tokens)" or " (no authentication)")
        end
        if d.ingest then
            d.ingest:attach(srv)
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
        op_budget_ms = cfg.op_budget_ms, drain_deadline_ms = cfg.drain_deadline_ms,
        clock = cfg.clock or nil, tick_ms = cfg.tick_ms or nil,
    }
    if type(exporter.list_heads) == "function" then
        -- The ledger's heads first: a node that lost its own (micronode, a new plane)
        -- continues the ledger's chains instead of starting a second seq 1 of each
        -- stream, which the ledger would refuse as a fork (PRODUCT.md §5, head(stream)).
        -- Until that is done nothing is sealed: counts wait in the plane.
        task.spawn("seed_heads", function()
            if seed_heads(d, exporter) then d.rt = runtime.start(rt_opts) end
        end)
    else
        d.rt = runtime.start(rt_opts)
    end

    local stop_ch = task.channel(1, "daemon_stop")
    task.on_shutdown(function(reason)
        d.stopping = true
        log("INFO", "%s: shutting down (drain deadline %d ms)", tostring(reason),
            cfg.drain_deadline_ms)
        stop_ch:close()
    end)
    if cfg.demo_rate > 0 then
        task.spawn("demo_load", demo_task, d, cfg.demo_rate)
    end
    if cfg.status_interval_s > 0 then
        task.spawn("status_task", status_task, d, cfg.status_interval_s)
    end
    task.spawn("daemon", function()
        stop_ch:recv() -- Canceled/Closed at shutdown
        local res = d.rt and d.rt:wait() or { finished = 0, aborted = 0 }
        if d.http then d.http:close() end
        if d.receiver then d.receiver:close(true) end
        status_line(d)
        local backlog = meter:pending_count()
        meter:close()
        log("INFO", "stopped: %d task(s) finished, %d aborted; %d slice(s) await export %s",
            res.finished, res.aborted, backlog,
            cfg.profile == "macronode" and "in the WAL" or "(lost: micronode, amnesia)")
        d.stopped = res
    end)
    log("INFO", "plane %s (record with: ron-accounting run examples/record.lua --var %s "
        .. "TENANT SUBJECT DIMENSION VALUE)", p.plane, p.var)
    log("INFO", "ledger %s (check with: ron-accounting verify %s)", p.ledger, p.ledger)
    return d
end

-- The whole main chunk of examples/daemon.lua: configure, start, report errors the way an
-- operator reads them (one line, exit 2 for configuration, 1 for a failed start).
function _M.main(args)
    local cfg, err, code = _M.configure(args)
    if not cfg then
        if err == "help" then
            io.stdout:write(USAGE)
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
