-- ron.node.product: the whole product on the embedded defaults (issue 27, docs/ops/run.md):
-- with `systems = "all"` (the default of a start without a configuration file: `make run`)
-- the meter's slices are rated into the SQLite ledger <var>/ledger.db with the default rate
-- card, the wallet serves prepaid balances over the same book, and the audit trail records
-- every decision under <var>/audit, its checkpoints signed with a key of this node.
--
--   product.compose(cfg, script)  -- cli.configure: fills exporter, wallet, audit where the
--                                 -- configuration left them unset (cfg.composed says what)
--   product.open_secrets(d)       -- a start step: the secrets, created on first start
--   product.start(d)              -- a start step: the demo's wallets, the banner
--
-- Secrets (never logged, the banner names the files): <var>/audit.key, the audit trail's
-- Ed25519 signing key, and <var>/operator.token, the wallet's operator bearer token, are
-- created on the first start with mode 0600 (O_EXCL: an existing one is kept);
-- <var>/audit.vkey is the verifier key (public). `systems = "meter"` (--meter-only) is the
-- meter alone: its exporter (the file ledger <var>/ledger unless one is configured).
local b3 = require("ron.base.b3")
local fs = require("ron.base.fs")
local log = require("ron.node.log")
local uv = require("luv")
local has_ledger = pcall(require, "ron.ledger.exporter")
local has_audit, audit_lib = pcall(require, "ron.audit.lib")
local has_wallet = pcall(require, "ron.wallet.daemon")
local has_demo, demo_wallets = pcall(require, "ron.node.demo_wallets")
local demo = require("ron.node.demo")
local task = require("ron.base.task")
local ffi = require("ffi")

local format, concat = string.format, table.concat
local ipairs, tostring = ipairs, tostring

local _M = {}

-- A placeholder digest that passes the wallet's configuration check; open_secrets puts the
-- operator token's digest in its place before the wallet exists, so it never authenticates.
local PLACEHOLDER = ("0"):rep(64)
_M.BOOK, _M.ASSET, _M.SCALE = "main", "USD", 2

local function dirname(path)
    return (tostring(path or ""):match("^(.*)/[^/]*$")) or "."
end

-- The files of a composed start under var (the banner and verify name the same ones).
function _M.files(var)
    return { ledger = var .. "/ledger.db", key = var .. "/audit.key",
             vkey = var .. "/audit.vkey", token = var .. "/operator.token",
             audit = var .. "/audit", wal = var .. "/wal" }
end

-- cfg: the merged configuration (before schema.check); script: the path of the script
-- started (arg[0]), whose directory holds cards/default.lua. Fills only what is unset:
-- a configured exporter, ledger directory or receiver keeps the slices where it says.
function _M.compose(cfg, script)
    if cfg.systems ~= "all" then return end
    local f = _M.files(cfg.var_dir)
    local c = { files = f, systems = {} }
    if has_ledger and cfg.exporter == false and cfg.ledger_dir == false
       and cfg.receiver == false then
        c.card = dirname(script) .. "/cards/default.lua"
        cfg.exporter = { module = "ron.ledger.exporter", card = c.card, book = _M.BOOK,
                         node = "node-1",
                         store = { backend = "sqlite", path = f.ledger, offload = true } }
        c.systems[#c.systems + 1] = "ledger"
        if has_wallet and cfg.wallet == false and cfg.listen then
            cfg.wallet = { tokens = { [PLACEHOLDER] = "operator" }, assets = { USD = 2 },
                           book = _M.BOOK, node = "wallet-1",
                           store = { backend = "sqlite", path = f.ledger } }
            c.wallet = true
            c.systems[#c.systems + 1] = "wallet"
        end
    end
    if has_audit and cfg.audit == false and cfg.profile == "macronode" then
        cfg.audit = { key_path = f.key }
        c.audit = true
        c.systems[#c.systems + 1] = "audit"
    end
    cfg.composed = c
end

-- ---- secrets ---------------------------------------------------------------------------

local function write_new(path, text, mode)
    local fd, err = uv.fs_open(path, "wx", mode)
    if not fd then return nil, err end
    local ok, werr = uv.fs_write(fd, text, 0)
    uv.fs_fsync(fd)
    uv.fs_close(fd)
    if not ok then return nil, werr end
    return true
end

local read_file = fs.read_file

local function random_hex(n)
    local fh = assert(io.open("/dev/urandom", "rb"))
    local raw = fh:read(n)
    fh:close()
    return (raw:gsub(".", function(ch) return format("%02x", ch:byte()) end))
end

local function audit_keys(f)
    if uv.fs_stat(f.key) then return true end
    local C = audit_lib
    local sk, vk = ffi.new("char[256]"), ffi.new("char[256]")
    local name = "ron-accounting-" .. tostring(uv.os_gethostname() or "node")
                 :gsub("[^%w.-]", "-")
    local rc = C.rau_note_keygen(name, sk, 256, vk, 256)
    if rc ~= 0 then return nil, "audit keygen: error " .. tostring(rc) end
    local ok, err = write_new(f.key, ffi.string(sk) .. "\n", 384) -- 0600
    ffi.fill(sk, 256)
    if not ok then return nil, format("%s: %s", f.key, tostring(err)) end
    uv.fs_unlink(f.vkey) -- a stale verifier key of another signer
    ok, err = write_new(f.vkey, ffi.string(vk) .. "\n", 420) -- 0644: public
    if not ok then return nil, format("%s: %s", f.vkey, tostring(err)) end
    return true, "created"
end

local function operator_token(f)
    local created
    if not uv.fs_stat(f.token) then
        local ok, err = write_new(f.token, random_hex(32) .. "\n", 384) -- 0600
        if not ok then return nil, format("%s: %s", f.token, tostring(err)) end
        created = true
    end
    local t = read_file(f.token)
    t = t and t:match("^%s*(%S+)")
    if not t then return nil, f.token .. ": empty or unreadable" end
    return t, created
end

-- A start step (after the meter, which made <var>): the audit key pair and the operator
-- token, created when missing; the wallet's token table then holds the token's digest.
function _M.open_secrets(d)
    local c = d.cfg.composed
    if not c then return true end
    local f = c.files
    d.product = { created = {} }
    if c.audit then
        local ok, err = audit_keys(f)
        if not ok then return nil, "secrets: " .. tostring(err) end
        if err == "created" then d.product.created[#d.product.created + 1] = f.key end
    end
    if c.wallet then
        local token, created = operator_token(f)
        if not token then return nil, "secrets: " .. tostring(created) end
        if created then d.product.created[#d.product.created + 1] = f.token end
        d.cfg.wallet.tokens = { [b3.hex(token)] = "operator" }
        d.product.token = token -- the demo's top-ups; never logged
    end
    return true
end

-- ---- the banner ------------------------------------------------------------------------

local function host_of(d)
    return d.http and format("http://%s:%d", d.cfg.listen:match("^%[?([^%]]*)%]?:%d+$"),
                             d.http:port()) or nil
end
_M.host_of = host_of

-- What runs, where its data and secrets live, and the three next commands.
function _M.banner(d)
    local c, p, cfg = d.cfg.composed, d.paths, d.cfg
    local f, url = c.files, host_of(d)
    local L = {}
    local function add(fmt, ...) L[#L + 1] = format(fmt, ...) end
    add("running: meter%s (windows of %d s)%s", #c.systems > 0 and " -> " ..
        concat(c.systems, " -> ") or "", cfg.window_len_s,
        #d.product.created > 0 and "; first start: created " ..
        concat(d.product.created, ", ") .. " (mode 0600)" or "")
    add("data:    plane %s, WAL %s, %s", p.plane, p.wal,
        cfg.exporter and cfg.exporter.card and format("ledger %s (rate card %s)", f.ledger,
                                                      cfg.exporter.card)
        or "ledger " .. (cfg.exporter and "(configured exporter)" or p.ledger))
    if c.audit then add("audit:   %s, signing key %s, verifier key %s", f.audit, f.key, f.vkey) end
    if c.wallet and url then
        add("wallet:  %s/v1/..., operator token in %s (0600)", url, f.token)
    end
    if url then add("metrics: %s/metrics, %s/readyz", url, url) end
    local exe = arg and arg[-1] or "ron-accounting"
    add("next:    %s run examples/record.lua --var %s TENANT SUBJECT requests 1", exe, p.var)
    if c.wallet and url then
        add("         curl -H \"Authorization: Bearer $(cat %s)\" " ..
            "'%s/v1/accounts/WALLET/balance?asset=USD'  (WALLET: %s ledger --db %s " ..
            "accounts --tenant TENANT)", f.token, url, exe, f.ledger)
    end
    add("         %s verify %s", exe, p.var)
    for _, l in ipairs(L) do log("INFO", "%s", l) end
    return true
end

-- A start step (the last): the demo's wallets (with --demo), then the banner.
function _M.start(d)
    if not d.cfg.composed then return true end
    d.product.url = host_of(d)
    if d.cfg.composed.wallet and d.cfg.demo_rate > 0 and d.product.url and has_demo then
        task.spawn("demo_wallets", demo_wallets.task, d, demo.TENANTS)
    end
    return _M.banner(d)
end

return _M
