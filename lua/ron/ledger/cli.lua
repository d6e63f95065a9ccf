-- ron.ledger.cli: `ron-accounting ledger ...`, the operator's verbs over a ledger store
-- (docs/reference/cli.md, docs/LEDGER-RATING.md §8). host/cli/ledgerops.c runs this file;
-- `cli.main(args)` returns the exit code (0 ok, 1 failed or problems found, 2 usage).
--
--   ledger --db PATH [--book NAME] init
--   ledger --db PATH accounts [--tenant UUID]
--   ledger --db PATH balance ACCOUNT [CODE/SCALE]
--   ledger --db PATH transfer --from ACCOUNT --to ACCOUNT --asset CODE/SCALE --amount N
--                             --intent KEY [--metadata TEXT]
--   ledger --db PATH reverse TRANSFER_ID --intent KEY
--   ledger --db PATH history ACCOUNT [--limit N]
--   ledger --db PATH verify [--file-ledger DIR] [--wal DIR] [--audit DIR] [--audit-vkey FILE]
--   ledger --db PATH recover [--node NAME]
--
-- PATH is a SQLite file, or a PostgreSQL URI (postgresql://user@host:port/db; --schema NAME
-- picks the tables' schema, default ron_ledger): the same verbs on either store.
-- ACCOUNT: 32 hex digits, or a name: revenue, usage_source, external (the book's system
-- accounts), or <tenant uuid>:wallet | :receivable | :usage (docs/LEDGER-RATING.md §6).
-- Amounts are integers in minor units of the asset.
local B = require("ron.ledger.bigint")
local L = require("ron.ledger.ledger")
local ledger = require("ron.ledger")
local store = require("ron.ledger.store")
local task = require("ron.base.task")
local usage = require("ron.ledger.usage")
local verify = require("ron.ledger.verify")

local format, hex = string.format, usage.hex

local _M = {}

local USAGE = [[
usage: ron-accounting ledger --db PATH|postgresql://URI [--schema NAME] [--book NAME] VERB ...
  init                                  create the store, the book and its system accounts
  accounts [--tenant UUID]              list accounts (a tenant's three, with balances)
  balance ACCOUNT [CODE/SCALE]          an account's balance in each asset (or one)
  transfer --from A --to B --asset CODE/SCALE --amount N --intent KEY [--metadata TEXT]
                                        commit a transfer (e.g. a top-up from external)
  reverse TRANSFER_ID --intent KEY      commit the reversal of a transfer
  history ACCOUNT [--limit N]           the account's transfers, newest first
  verify [--file-ledger DIR] [--wal DIR] [--audit DIR] [--audit-vkey FILE]
                                        recompute ids, postings, balances, conservation and
                                        usage chains (and against a file ledger, a WAL, an
                                        audit log and its verifier key: the carried audit
                                        checkpoints); exit 1 naming every problem
  recover [--node NAME]                 finish (roll forward) or abandon interrupted commits
                                        (of every node, or NAME's), while those nodes are down
ACCOUNT: 32 hex digits, revenue, usage_source, external, or TENANT-UUID:wallet|receivable|usage
]]

local out, err_out = io.stdout, io.stderr

local function usage_error(msg)
    err_out:write("ron-accounting ledger: ", msg, "\n", USAGE)
    return 2
end

-- Options (--name value) and positionals.
local function parse(args, from)
    local o, pos = {}, {}
    local i = from
    while i <= #args do
        local a = args[i]
        local name = a:match("^%-%-([%w%-]+)$")
        if name then
            if args[i + 1] == nil then return nil, "option --" .. name .. " needs a value" end
            o[name] = args[i + 1]
            i = i + 2
        else
            pos[#pos + 1] = a
            i = i + 1
        end
    end
    return o, pos
end

local function account_id(s)
    if type(s) ~= "string" then return nil end
    if #s == 32 and s:match("^%x+$") then return usage.unhex(s) end
    if usage.SYSTEM_KINDS[s] then return usage.account(s) end
    local t, kind = s:match("^([%x%-]+):(%a+)$")
    if t and #t == 36 and usage.TENANT_KINDS[kind] then return usage.account(kind, t) end
    return nil
end

local function asset_of(s)
    local code, scale = (s or ""):match("^([A-Za-z0-9_.:%-]+)/(%d+)$")
    if not code then return nil end
    return { code = code, scale = tonumber(scale) }
end

local function integer(s)
    if type(s) ~= "string" or not s:match("^%-?%d+$") then return nil end
    if #s < 16 then return tonumber(s) end
    local neg = s:sub(1, 1) == "-"
    local v = B.to_amount(B.from(neg and s:sub(2) or s))
    if not v then return nil end
    return neg and -v or v
end

-- exact (a Lua number's own conversion keeps 14 digits); nil (a failed read) as "?"
local function amt(v) return v == nil and "?" or B.dec(v) end

-- Names of the accounts the CLI knows (system accounts; tenants' when given).
local function namer(tenants)
    local names = {}
    for k in pairs(usage.SYSTEM_KINDS) do names[usage.account(k)] = k end
    for _, t in ipairs(tenants or {}) do
        for k in pairs(usage.TENANT_KINDS) do names[usage.account(k, t)] = t .. ":" .. k end
    end
    return function(id) return names[id] or "" end
end

-- A PostgreSQL URI (libpq's postgresql:// or postgres://) names a server; anything else is
-- a SQLite file.
local function is_pg(path)
    return type(path) == "string" and (path:match("^postgresql://") or path:match("^postgres://"))
        and true or false
end

-- readonly (verify, LED-69): SQLite opened mode=ro, PostgreSQL in read-only transactions;
-- only a ledger at this code's schema version opens (nothing is created or migrated).
local function open(o, readonly)
    local path = o.db or os.getenv("RON_LEDGER_DB")
    if not path then return nil, "--db PATH is required (or RON_LEDGER_DB)" end
    local s, err
    if is_pg(path) then
        s, err = store.open { backend = "postgres", conninfo = path, connections = 1,
                              schema = o.schema, readonly = readonly }
    else
        s, err = store.open { backend = "sqlite", path = path, readonly = readonly }
    end
    if not s then return nil, tostring(err) end
    local led = L.new { store = s, book = o.book or "main", node = o.node or "cli" }
    return s, led
end

-- The assets an account has postings of (any status).
local function assets_of(s, id)
    local list = s:get_postings_by_account(id, nil, nil, 1024) or {}
    local seen, out_ = {}, {}
    for _, p in ipairs(list) do
        local k = p.asset.code .. "/" .. p.asset.scale
        if not seen[k] then
            seen[k] = true
            out_[#out_ + 1] = p.asset
        end
    end
    table.sort(out_, function(a, b) return a.code < b.code end)
    return out_
end

local verbs = {}

function verbs.init(s, led, o)
    local book = o.book or "main"
    local n, err = s:create_book(book, "created by ron-accounting ledger init")
    if not n then return nil, err end
    for _, kind in ipairs { "revenue", "usage_source", "external" } do
        local id = usage.account(kind)
        -- (idempotent: an existing account's event is appended if it is missing, LED-68)
        local r, cerr = led:create_account { id = id, policy = "uncapped" }
        if not r then return nil, cerr end
        out:write(format("%-13s %s uncapped\n", kind, hex(id)))
    end
    out:write(format("OK: book %s ready\n", book))
    return 0
end

function verbs.accounts(s, led, o)
    local tenants = o.tenant and { o.tenant } or {}
    local name = namer(tenants)
    local list
    if o.tenant then
        list = {}
        for _, k in ipairs { "wallet", "receivable", "usage" } do
            local a = s:get_account(usage.account(k, o.tenant))
            if a then list[#list + 1] = a end
        end
    else
        list = s:list_accounts() or {}
    end
    for _, a in ipairs(list) do
        local line = format("%s %-12s %-6s v%d %s", hex(a.id), a.policy, a.status, a.version,
                            name(a.id))
        if o.tenant then
            local parts = {}
            for _, asset in ipairs(assets_of(s, a.id)) do
                parts[#parts + 1] = format("%s/%d=%s", asset.code, asset.scale,
                                           amt(led:balance(a.id, asset)))
            end
            line = line .. " " .. table.concat(parts, " ")
        end
        out:write((line:gsub("%s+$", "")), "\n")
    end
    return 0
end

function verbs.balance(s, led, o, pos)
    local id = account_id(pos[1])
    if not id then return usage_error("balance needs an ACCOUNT") end
    local assets = pos[2] and { asset_of(pos[2]) } or assets_of(s, id)
    if pos[2] and not assets[1] then return usage_error("an asset is CODE/SCALE, e.g. USD/2") end
    if not s:get_account(id) then return nil, "NotFound: no account " .. hex(id) end
    for _, a in ipairs(assets) do
        local b, err = led:balance(id, a)
        if b == nil then return nil, err end
        out:write(format("%s/%d %s\n", a.code, a.scale, amt(b)))
    end
    return 0
end

local function print_result(r)
    out:write(format("%s %s%s\n", hex(r.transfer_id), r.status,
                     r.replayed and " (replayed: the intent's first outcome)" or ""))
    return 0
end

-- A tenant's named account (UUID:kind) is created on first use with the policy the rater
-- gives it (docs/LEDGER-RATING.md §6), so a top-up may come before the first usage.
local TENANT_POLICY = { wallet = "no_overdraft", receivable = "uncapped", usage = "uncapped" }
local function ensure_named(s, led, name)
    local kind = (name or ""):match("^[%x%-]+:(%a+)$")
    local id = account_id(name)
    if not (kind and id and TENANT_POLICY[kind]) or s:get_account(id) then return true end
    return led:create_account { id = id, policy = TENANT_POLICY[kind] }
end

function verbs.transfer(s, led, o)
    for _, n in ipairs { o.from, o.to } do
        local ok, err = ensure_named(s, led, n)
        if not ok then return nil, err end
    end
    local from, to, asset = account_id(o.from), account_id(o.to), asset_of(o.asset)
    local amount = integer(o.amount)
    if not from or not to then return usage_error("transfer needs --from and --to ACCOUNTs") end
    if not asset then return usage_error("transfer needs --asset CODE/SCALE") end
    if not amount or amount == 0 then
        return usage_error("transfer needs --amount N (minor units)")
    end
    if not o.intent then return usage_error("transfer needs --intent KEY (1..255 bytes)") end
    if amount < 0 then from, to, amount = to, from, -amount end
    local r, err = led:commit { intent = o.intent, metadata = o.metadata, movements = {
        { from = from, to = to, asset = asset, amount = amount } } }
    if not r then return nil, err end
    return print_result(r)
end

function verbs.reverse(s, led, o, pos)
    local id = pos[1] and #pos[1] == 64 and pos[1]:match("^%x+$") and usage.unhex(pos[1])
    if not id then return usage_error("reverse needs a TRANSFER_ID (64 hex digits)") end
    if not o.intent then return usage_error("reverse needs --intent KEY") end
    local r, err = led:reverse(id, o.intent)
    if not r then return nil, err end
    return print_result(r)
end

function verbs.history(s, led, o, pos)
    local id = account_id(pos[1])
    if not id then return usage_error("history needs an ACCOUNT") end
    local limit = tonumber(o.limit or "20")
    local list, err = led:history(id, { limit = limit })
    if not list then return nil, err end
    for _, rec in ipairs(list) do
        local t = ledger.decode_transfer(rec.bytes)
        local parts = {}
        for _, x in ipairs(t and t.outputs or {}) do
            if x.account == id then
                parts[#parts + 1] = format("%s/%d %s", x.asset.code, x.asset.scale, amt(x.amount))
            end
        end
        local m = t and usage.decode_metadata(t.metadata)
        local what = m and format("usage %s/%s seq %d (%s units, card %s)",
                                  usage.tenant_text(m.tenant), m.dimension, m.seq, m.quantity,
                                  m.version)
            or ((rec.intent or ""):match("^[%g ]+$") and "intent " .. rec.intent)
            or "intent " .. hex(rec.intent or "")
        local at = os.date("!%Y-%m-%dT%H:%M:%SZ", math.floor((rec.created_at_ms or 0) / 1000))
        out:write(format("%s %s %s [%s]\n", hex(rec.id), at, what, table.concat(parts, ", ")))
    end
    return 0
end

-- Every node's pending sagas (or --node NAME's): only while that node is stopped.
function verbs.recover(s, led, o)
    local pending = s:list_pending_sagas(o.node) or {}
    local before, nodes = #pending, {}
    for _, sg in ipairs(pending) do nodes[sg.node or ""] = true end
    for node in pairs(nodes) do
        local r, err = L.new { store = s, book = o.book or "main", node = node }:recover()
        if r == nil and err then return nil, err end
    end
    local after = #(s:list_pending_sagas(o.node) or {})
    out:write(format("%d pending sagas, %d finished, %d left\n", before, before - after, after))
    return after == 0 and 0 or 1
end

function verbs.verify(s, led, o)
    local host = os.getenv("RA_BIN") or (arg and arg[-1]) or "ron-accounting"
    local sum = verify.run(s, { book = o.book or "main", file_ledger = o["file-ledger"],
                                wal = o.wal, host = host, audit = o.audit,
                                audit_vkey = o["audit-vkey"],
                                report = function(where, what)
                                    out:write(where, ": ", what, "\n")
                                end })
    out:write(format("%d transfers (%d usage), %d postings, %d balances, %d assets, "
                     .. "%d accounts, %d intents (%d unnamed keys), %d streams (%d heads "
                     .. "behind), %d accepted losses, %d events%s\n", sum.transfers,
                     sum.usage, sum.postings, sum.balances, sum.assets, sum.accounts or 0,
                     sum.intents, sum.unchecked, sum.streams, sum.heads_behind or 0,
                     sum.losses, sum.events, (o["file-ledger"]
                         and format(", %d file-ledger slices", sum.slices_checked) or "")
                         .. (o.wal and format(", %d WAL heads and frames",
                                                 sum.wal_checked or 0) or "")
                         .. (((sum.attested or 0) > 0 or o.audit or o["audit-vkey"])
                             and format(", %d audit checkpoints carried", sum.attested or 0)
                             or "")
                         .. (o.audit and format(", %d audit records (%d of this ledger's "
                                                .. "transfers, %d of its feed through seq %d)",
                                                sum.audit_records or 0,
                                                sum.audit_ledger_records or 0,
                                                sum.audit_feed_records or 0,
                                                sum.audit_feed_through or 0) or "")))
    if sum.problems > 0 then
        out:write(format("FAILED: %d problems\n", sum.problems))
        return 1
    end
    out:write("OK\n")
    return 0
end

function _M.main(args)
    local o, pos = parse(args, 1)
    if not o then return usage_error(pos) end
    local verb = table.remove(pos, 1)
    if verb == "help" then
        out:write(USAGE)
        return 0
    end
    if verb == nil then -- like the host without a command: the usage on stderr, exit 2
        err_out:write(USAGE)
        return 2
    end
    local fn = verbs[verb]
    if not fn then return usage_error("unknown verb " .. verb) end
    local path = o.db or os.getenv("RON_LEDGER_DB")
    if verb ~= "init" and path and not is_pg(path) then
        local f = io.open(path, "rb")
        if not f then
            err_out:write("ron-accounting ledger: ", path, ": no such ledger (run init first)\n")
            return 2
        end
        f:close()
    end
    local function body()
        local s, led = open(o, verb == "verify")
        if not s then
            err_out:write("ron-accounting ledger: ", tostring(led), "\n")
            return false, 2
        end
        local ok, rc, err = pcall(fn, s, led, o, pos)
        if s.close then s:close() end
        return ok, rc, err
    end
    local ok, rc, err
    if is_pg(path) then
        -- The PostgreSQL store talks async libpq on the host's loop: every call from a task.
        local sched = task.new()
        local h = sched.spawn("ledger-cli", function() ok, rc, err = body() end)
        require("luv").run("default")
        if h.status ~= "ok" then
            local _, e = h:join() -- observed: the host does not report it a second time
            ok, rc = false, "the command did not finish: " .. tostring(e or h.status)
        end
    else
        ok, rc, err = body()
    end
    if ok == false and rc == 2 then return 2 end
    if not ok then
        err_out:write("ron-accounting ledger: ", tostring(rc), "\n")
        return 1
    end
    if rc == nil then
        err_out:write("ron-accounting ledger ", verb, ": ", tostring(err), "\n")
        return 1
    end
    return rc
end

return _M
