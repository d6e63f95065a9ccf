-- ron.node.schema: the daemon's settings: their embedded defaults and one
-- check per key (an unknown key or a wrong value is one line, "configuration: ...").
local acct = require("ron.accounting")
local ingest = require("ron.node.ingest")
local receiver = require("ron.node.receiver")
-- The systems a build may lack (ron.node says why these load under pcall).
local has_audit, audit_host = pcall(require, "ron.audit.host")
local has_wallet, wallet = pcall(require, "ron.wallet.daemon")

local format, concat, sort, floor = string.format, table.concat, table.sort, math.floor
local pairs, ipairs, type, tostring, tonumber = pairs, ipairs, type, tostring, tonumber

local _M = {}

-- The embedded defaults (docs/reference/config.md, "Daemon settings";
-- tools/check-reference.lua checks that page lists every key).
_M.DEFAULTS = {
    systems = "all",            -- "all": meter -> ledger (SQLite <var>/ledger.db) -> wallet ->
                                -- audit trail, each unless configured otherwise; "meter":
                                -- the meter and its exporter alone (--meter-only). A
                                -- configuration file that does not name it means "meter"
                                -- (its systems are those it configures, as before issue 27)
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
    wal_max_entries = 200000,   -- slices the WAL holds (the backlog of an outage: size it for
                                -- the longest one, docs/ops/wal.md)
    wal_max_age_s = 86400,      -- age of the oldest un-ACKed segment
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
    -- an exporter with put_many (the file ledger, ron.ledger.exporter, exporters.postgres):
    -- the queued puts of all streams (one per stream) in calls of up to put_batch slices,
    -- at most put_parallel calls at once (docs/CONCURRENCY.md put_flush)
    put_batch = 1024,
    put_parallel = 4,
    -- the Lua heap may grow to gc_pause % of what the last collection kept before the next
    -- one starts (collectgarbage "setpause"; LuaJIT's own default is 200): rating on
    -- PostgreSQL spent ~28 % of the process's CPU in the GC at 200, ~15 % less CPU per
    -- slice at 400 (docs/LEDGER.md "The daemon's shape"); ron_lua_heap_bytes in /metrics
    gc_pause = 400,
    -- the collector's work per KB allocated (collectgarbage "setstepmul"; LuaJIT's 200),
    -- and its steps in the loop's idle time, up to gc_idle_us per poll that would block (0:
    -- none): a cycle's sweep no longer lands whole in one group of requests (issue 25, the
    -- wallet's p99; ron.base.gcidle, docs/WALLET.md §8)
    gc_stepmul = 50,
    gc_idle_us = 1000,
    op_budget_ms = 10000,
    drain_deadline_ms = 5000,
    listen = "127.0.0.1:9464",  -- /metrics /healthz /readyz; false: no HTTP
    metrics_public = false,     -- listen on a non-loopback address: /metrics /healthz
                                -- /readyz answer loopback peers only unless true
    -- the HTTP server's connections and read deadlines (docs/ops/http.md,
    -- "Connections and deadlines"; issue 14 item 6)
    http_max_conns = 256,       -- connections at once, the reserve included
    http_max_conns_per_peer = 32, -- one peer address's connections outside the reserve
    http_reserved_conns = 8,    -- of http_max_conns, for loopback peers only (/healthz,
                                -- /readyz, /metrics stay reachable under a flood)
    http_header_timeout_ms = 10000, -- a request head (or an idle keep-alive wait) longer
                                -- than this: the connection is closed
    http_body_timeout_ms = 30000, -- the body must be complete within header + body timeout
    http_max_header_bytes = 16384, -- a request head (request line and headers) larger: 431
    ingest = false,             -- POST /v1/records on `listen`: { tokens = { [b3hex of a
                                -- token] = tenant }, ... } (ron.node.ingest)
    receiver = false,           -- the ledger receiver on `listen` (PUT/GET /v1/slices/...):
                                -- { backend = "file" | { module = ..., ... }, producers =
                                -- { [name] = { token_hash =, tenants = } } (or
                                -- allow_unauthenticated = true), ... }
                                -- (ron.node.receiver): this daemon is then
                                -- the HTTP ledger of others (exporters.http)
    wallet = false,             -- ron-wallet on `listen` (docs/WALLET.md): { tokens = { [b3hex
                                -- of a token] = "operator" | account uuid }, assets = { USD =
                                -- 2 }, store = { backend = "sqlite" | "postgres", ... }, ... }
                                -- (ron.wallet.daemon; SQLite default <var>/wallet-ledger.db)
    audit = false,              -- the audit trail (docs/AUDIT.md): { dir =, key_path =,
                                -- checkpoint_every =, queue_cap =, amnesia =, ... }
                                -- (ron.audit.host): every reject, shed, non-ok export,
                                -- operator action and readiness flip as a signed record
    status_interval_s = 60,     -- a status line on stderr; 0: none
    demo_rate = 0,              -- records/s of built-in demo traffic (3 tenants); 0: none
    clock = false,              -- a function returning UTC seconds (tests); false: system
    tick_ms = false,            -- rollover every tick_ms (tests, with clock); false: at
                                -- UTC window boundaries
}

local function bad(fmt, ...) return nil, "configuration: " .. format(fmt, ...) end

-- A system's block, which its module's check_config(v, k) checks. An optional system's
-- (has: whether its module loaded, else mod is the load error) is off when false, and
-- refused in a build without its library (lib: which, and the build option).
local function system_block(mod, has, lib)
    return function(k, v)
        if has ~= nil and v == false then return true end
        if has == false then return bad("%s needs %s: %s", k, lib, tostring(mod)) end
        local ok, err = mod.check_config(v, k)
        if not ok then return bad("%s", err) end
        return true
    end
end

local function boolean(k, v)
    if type(v) ~= "boolean" then return bad("%s must be a boolean", k) end
    return true
end

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

_M.CHECK = {
    systems = function(k, v)
        if v ~= "all" and v ~= "meter" then
            return bad("%s must be \"all\" or \"meter\", got %s", k, tostring(v))
        end
        return true
    end,
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
    wal_max_entries = int_in(1, 4294967295),
    wal_max_age_s = int_in(60, 4294967295),
    ledger_dir = function(k, v)
        if v ~= false and (type(v) ~= "string" or v == "") then
            return bad("%s must be a directory path or false", k)
        end
        return true
    end,
    ledger_fsync = boolean,
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
    put_batch = int_in(1, 16384),
    put_parallel = int_in(1, 64),
    gc_pause = int_in(100, 1000),
    gc_stepmul = int_in(10, 1000),
    gc_idle_us = int_in(0, 100000),
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
        -- the server binds an address, it does not resolve names: what start would refuse
        if not _M.is_ip(host) then
            return bad("%s: %q is not an IP address (a name such as localhost is not "
                       .. "resolved: use 127.0.0.1 or [::1])", k, host)
        end
        return true
    end,
    metrics_public = boolean,
    http_max_conns = int_in(1, 16384),
    http_max_conns_per_peer = int_in(1, 16384),
    http_reserved_conns = int_in(0, 16383),
    http_header_timeout_ms = int_in(10, 86400000),
    http_body_timeout_ms = int_in(10, 86400000),
    http_max_header_bytes = int_in(1024, 262144),
    ingest = system_block(ingest),
    receiver = system_block(receiver),
    wallet = system_block(wallet, has_wallet, "libronledger (a build with RA_BUILD_LEDGER)"),
    audit = system_block(audit_host, has_audit, "libronaudit (a build with RA_BUILD_AUDIT)"),
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

-- The whole configuration: every key's check (in key order), then the rules between keys.
-- -> true | nil, "configuration: ..."
function _M.check(cfg)
    for _, k in ipairs(_M.sorted_keys(_M.CHECK)) do
        local ok, err = _M.CHECK[k](k, cfg[k])
        if not ok then return nil, err end
    end
    if cfg.tick_ms and not cfg.clock then
        -- tick_ms drives rollovers off the UTC grid: only with an injected clock
        return bad("tick_ms needs clock (it is for tests)")
    end
    if cfg.http_reserved_conns >= cfg.http_max_conns then
        return bad("http_reserved_conns (%d) must be less than http_max_conns (%d)",
                   cfg.http_reserved_conns, cfg.http_max_conns)
    end
    if cfg.ingest and not cfg.listen then
        return bad("ingest needs listen (POST /v1/records is served there)")
    end
    if cfg.wallet and not cfg.listen then
        return bad("wallet needs listen (its routes are served there)")
    end
    if cfg.receiver and not cfg.listen then
        return bad("receiver needs listen (PUT /v1/slices/... is served there)")
    end
    -- what opening the trail would refuse (a directory that cannot be written, a bad key):
    -- --check and start refuse the same (AUD-I-42)
    if cfg.audit and not cfg.audit.amnesia then
        local key = cfg.audit.key_path or nil
        -- the composed product's key is made at its first start (ron.node.product's
        -- secrets step): a missing one is not an error, one that is there must load
        if key and cfg.composed and cfg.composed.audit then
            local f = io.open(key, "rb")
            if f then f:close() else key = nil end
        end
        local ok, err = audit_host.check_paths(_M.paths(cfg).audit, key, cfg.audit.shards)
        if not ok then return bad("%s", err) end
    end
    -- The meter's own checks, the very ones ra_meter_open runs (ra_config_check): --check
    -- and start refuse the same configurations (issue 14 item 11).
    local ok, err = acct.check_config(_M.meter_config(cfg))
    if not ok then return bad("%s", tostring(err):gsub("^InvalidArgument: ", "")) end
    return true
end

-- An IPv4 dotted quad or an IPv6 address (hex groups and colons, one ::, an optional
-- trailing dotted quad): what uv's bind takes.
function _M.is_ip(h)
    local a, b, c, d = h:match("^(%d+)%.(%d+)%.(%d+)%.(%d+)$")
    if a then
        return tonumber(a) < 256 and tonumber(b) < 256 and tonumber(c) < 256
               and tonumber(d) < 256
    end
    return h:find(":", 1, true) ~= nil and h:match("^[%x:%.]+$") ~= nil
           and select(2, h:gsub("::", "")) <= 1
end

-- The daemon's paths under var_dir.
function _M.paths(cfg)
    local var = cfg.var_dir
    local a = cfg.audit
    return { var = var, plane = cfg.plane or (var .. "/plane"), wal = var .. "/wal",
             ledger = cfg.ledger_dir or (var .. "/ledger"),
             audit = a and not a.amnesia and (a.dir or (var .. "/audit")) or nil }
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
        c.wal = { dir = _M.paths(cfg).wal, max_bytes = cfg.wal_max_bytes,
                  max_entries = cfg.wal_max_entries, max_age_s = cfg.wal_max_age_s }
    end
    return c
end

-- The keys of a table as sorted strings.
function _M.sorted_keys(t)
    local ks = {}
    for k in pairs(t) do ks[#ks + 1] = tostring(k) end
    sort(ks)
    return ks
end

return _M
