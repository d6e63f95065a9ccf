-- ron.node.cli: the daemon's command line and configuration file: flags and
-- a Lua file over the embedded defaults, every key checked by daemon.schema; the effective
-- configuration as one line: what differs from the defaults at INFO on start (seed 000 P-6),
-- every key with --check / --print-config.
local product = require("ron.node.product")
local schema = require("ron.node.schema")
local uv = require("luv")

local format, concat = string.format, table.concat
local pairs, ipairs, type, tostring, tonumber, pcall, setfenv, loadfile, setmetatable =
      pairs, ipairs, type, tostring, tonumber, pcall, setfenv, loadfile, setmetatable

local _M = {}

_M.USAGE = [[
usage: ron-accounting run examples/daemon.lua [--config FILE] [--var DIR] [--window S]
           [--listen HOST:PORT|off] [--profile macronode|micronode] [--demo RATE]
           [--status S] [--plane PATH] [--meter-only] [--check] [--print-config]

  --config FILE   a Lua file returning a table of settings (docs/reference/config.md)
  --var DIR       state directory: DIR/plane, DIR/wal, DIR/ledger (default ./var)
  --plane PATH    the counter plane file, instead of DIR/plane (a gateway's, for example)
  --window S      window length in seconds, 60..3600 (default 300)
  --listen A      address of /metrics, /healthz, /readyz (default 127.0.0.1:9464)
  --profile P     macronode (WAL, default) or micronode (RAM only: amnesia)
  --demo RATE     record RATE demo records per second into the plane (default 0)
  --status S      a status line every S seconds (default 60; 0: none)
  --meter-only    the meter and its exporter alone (systems = "meter"); default without
                  --config: meter -> ledger (var/ledger.db) -> wallet -> audit trail
  --check         print the effective configuration and exit
  --print-config  print every setting, one a line, with where it came from, and exit
]]


local function bad(fmt, ...) return nil, "configuration: " .. format(fmt, ...) end

-- Evaluating a configuration file is bounded (issue 14 item 10): a chunk that runs longer
-- than this is stopped (an endless loop would hang even --check), and SIGTERM/SIGINT stop it
-- too (the host's signal watchers run only on the loop, which has not started yet).
_M.CONFIG_BUDGET_MS = 5000
local HOOK_EVERY = 100000 -- VM instructions between two looks at the clock and the signals

-- Runs chunk under the budget; the count hook sees only interpreted code, so the chunk and
-- every function it defines run with the JIT off (a configuration is small; nothing hot).
local function run_bounded(chunk)
    local caught, handles = nil, {}
    for _, name in ipairs { "sigterm", "sigint" } do
        local h = uv.new_signal()
        if h then
            h:start(name, function() caught = caught or name:upper() end)
            handles[#handles + 1] = h
        end
    end
    local t0 = uv.hrtime()
    jit.off(chunk, true)
    debug.sethook(function()
        uv.run("nowait") -- delivers a pending signal to the watchers above
        if caught then error("interrupted by " .. caught, 0) end
        if (uv.hrtime() - t0) / 1e6 > _M.CONFIG_BUDGET_MS then
            error(format("did not finish within %d ms (an endless loop?)",
                         _M.CONFIG_BUDGET_MS), 0)
        end
    end, "", HOOK_EVERY)
    local ok, t = pcall(chunk)
    debug.sethook()
    for _, h in ipairs(handles) do
        h:stop()
        h:close()
    end
    return ok, t
end

-- Loads a configuration file: a Lua chunk returning a table. It runs with the standard
-- library visible (os.getenv, arithmetic) but its globals do not leak into the daemon.
local function load_file(path)
    local chunk, err = loadfile(path)
    if not chunk then return bad("cannot load %s", tostring(err)) end
    setfenv(chunk, setmetatable({}, { __index = _G }))
    local ok, t = run_bounded(chunk)
    if not ok then return bad("%s: %s", path, tostring(t)) end
    if type(t) ~= "table" then return bad("%s must return a table, got %s", path, type(t)) end
    return t
end

local FLAGS = { ["--config"] = "config", ["--var"] = "var_dir", ["--window"] = "window_len_s",
                ["--listen"] = "listen", ["--profile"] = "profile", ["--demo"] = "demo_rate",
                ["--status"] = "status_interval_s", ["--plane"] = "plane",
                ["--systems"] = "systems" }
local NUMERIC = { window_len_s = true, demo_rate = true, status_interval_s = true }
-- Flags without a value: the key and the value they set.
local SWITCHES = { ["--meter-only"] = { "systems", "meter" } }

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
        elseif a == "--print-config" then
            check = "print"
        elseif SWITCHES[a] then
            flags[SWITCHES[a][1]] = SWITCHES[a][2]
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
    for k, v in pairs(schema.DEFAULTS) do cfg[k] = v end
    local sources = {}
    if flags.config then
        local t, err = load_file(flags.config)
        if not t then return nil, err, 2 end
        for _, k in ipairs(schema.sorted_keys(t)) do
            if schema.CHECK[k] == nil then
                return nil, format("configuration: unknown key '%s' in %s", k, flags.config), 2
            end
            cfg[k] = t[k]
            sources[k] = flags.config
        end
        -- a file written before issue 27 runs what it configures, nothing more
        if t.systems == nil then cfg.systems = "meter" end
        flags.config = nil
    end
    for k, v in pairs(flags) do
        cfg[k] = v
        sources[k] = "flag"
    end
    if schema.CHECK.systems("systems", cfg.systems) then product.compose(cfg, args[0]) end
    local ok, err = schema.check(cfg)
    if not ok then return nil, err, 2 end
    cfg.check, cfg.sources = check, sources
    return cfg, positional
end

-- A setting's value as text: functions and nested tables summarised.
local function show(v)
    local s
    if type(v) == "function" then
        s = "<function>"
    elseif type(v) == "table" then
        local parts = {}
        if #v > 0 then
            for _, x in ipairs(v) do parts[#parts + 1] = tostring(x) end
        else
            for _, kk in ipairs(schema.sorted_keys(v)) do
                local x = v[kk]
                parts[#parts + 1] = kk .. ":" .. (type(x) == "table" and "{...}"
                                                  or tostring(x))
            end
        end
        s = "{" .. concat(parts, ",") .. "}"
    else
        s = tostring(v)
    end
    return s
end

-- "k=v k=v ..." of the effective configuration, sorted.
function _M.describe(cfg)
    local out = {}
    for _, k in ipairs(schema.sorted_keys(schema.DEFAULTS)) do
        out[#out + 1] = k .. "=" .. show(cfg[k])
    end
    return concat(out, " ")
end

-- Only what a configuration file or a flag set to another value than the default: the
-- start's INFO line ("defaults" when nothing differs).
function _M.describe_changed(cfg)
    local out = {}
    for _, k in ipairs(schema.sorted_keys(schema.DEFAULTS)) do
        local v = show(cfg[k])
        if (cfg.sources or {})[k] and v ~= show(schema.DEFAULTS[k]) then
            out[#out + 1] = k .. "=" .. v
        end
    end
    return #out > 0 and concat(out, " ") or "defaults"
end

-- Every setting, one a line: "key = value  (default | flag | FILE | systems=all)".
function _M.print_config(cfg)
    local out, composed = {}, cfg.composed and cfg.composed.systems or {}
    local by_system = {}
    for _, s in ipairs(composed) do by_system[s == "ledger" and "exporter" or s] = true end
    for _, k in ipairs(schema.sorted_keys(schema.DEFAULTS)) do
        local src = (cfg.sources or {})[k]
        if not src then src = by_system[k] and "systems=all" or "default" end
        out[#out + 1] = format("%s = %s  (%s)", k, show(cfg[k]), src)
    end
    return concat(out, "\n") .. "\n"
end

return _M
