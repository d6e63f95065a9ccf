-- ron.wallet.daemon: the `wallet` block of the daemon's configuration (docs/WALLET.md,
-- docs/reference/config.md "wallet keys"): the ledger store it runs on, the engine, the
-- service. ron.node calls it; nothing here is needed outside the daemon.
--
--   local wd = require("ron.wallet.daemon")
--   local ok, err = wd.check_config(v, "wallet")
--   local w = wd.new(cfg.wallet, { var = dir, log = fn })   -- the service, not started:
--   srv routes = w:routes() (503 "starting" until it runs)
--   wd.run(w)                                   -- in a task: open the store, recover, start
--   wd.close(w)                                 -- stop intake, close the store at the end
--
-- store = { backend = "sqlite", path = "<var>/wallet-ledger.db" } (default) or
-- { backend = "postgres", conninfo = "..." [, schema = ...] }; book = "main" (the book the
-- rater writes, so usage shows in the wallet). lease_ms: the node's lease on the ledger
-- (ron.wallet.fleet; default 5000 on PostgreSQL, where nodes share a ledger; 0 off, the
-- default on SQLite). one_tx = false: every commit takes the ledger's saga phases instead of
-- one transaction (LED-72, LED-74; a switch for diagnosis and for tests that need a node
-- holding reservations between its phases, as tests/host/fleet.lua's node 2).
local fleet = require("ron.wallet.fleet")
local service = require("ron.wallet.service")
local L = require("ron.ledger.ledger")
local store = require("ron.ledger.store")
local task = require("ron.base.task")

local format = string.format
local pairs, type, tostring = pairs, type, tostring

local _M = {}

local STORE_KEYS = { backend = true, path = true, durability = true, synchronous = true,
                     busy_timeout_ms = true,
                     conninfo = true, schema = true, connections = true,
                     connect_timeout_ms = true, query_timeout_ms = true }

-- The keys this module takes (the rest are ron.wallet.service's).
local OWN = { store = true, book = true, node = true, on_dry = true, lease_ms = true,
              one_tx = true }

function _M.check_config(v, key)
    key = key or "wallet"
    if v == false then return true end
    if type(v) ~= "table" then return nil, key .. " must be false or a table" end
    local rest = {}
    for k, x in pairs(v) do if not OWN[k] then rest[k] = x end end
    if v.on_dry ~= nil and type(v.on_dry) ~= "function" then
        return nil, key .. ".on_dry must be a function(tenant, amount, asset)"
    end
    local ok, err = service.check_config(rest, key)
    if not ok then return nil, err end
    if v.book ~= nil and (type(v.book) ~= "string" or #v.book == 0 or #v.book > 64) then
        return nil, key .. ".book must be a string of 1..64 bytes"
    end
    if v.node ~= nil and (type(v.node) ~= "string" or #v.node == 0 or #v.node > 64) then
        return nil, key .. ".node must be a string of 1..64 bytes"
    end
    if v.one_tx ~= nil and type(v.one_tx) ~= "boolean" then
        return nil, key .. ".one_tx must be a boolean"
    end
    local lm = v.lease_ms
    if lm ~= nil and (type(lm) ~= "number" or lm % 1 ~= 0 or (lm ~= 0 and (lm < 500
                      or lm > 600000))) then
        return nil, key .. ".lease_ms must be 0 (off) or an integer in 500..600000"
    end
    local s = v.store
    if s ~= nil then
        if type(s) ~= "table" then return nil, key .. ".store must be a table" end
        for k in pairs(s) do
            if not STORE_KEYS[k] then
                return nil, format("unknown key '%s.store.%s'", key, tostring(k))
            end
        end
        if s.backend ~= "sqlite" and s.backend ~= "postgres" then
            return nil, key .. '.store.backend must be "sqlite" or "postgres"'
        end
        if s.backend == "postgres" and type(s.conninfo) ~= "string" then
            return nil, key .. ".store.conninfo (a libpq connection string) is required"
        end
    end
    return true
end

-- A placeholder store until run() opens the real one: every call is a retry-class failure.
local starting = setmetatable({}, { __index = function()
    return function() return nil, "Unavailable: the wallet's store is not open yet", "retry" end
end })

function _M.new(v, o)
    local function engine()
        return L.new { store = starting, book = v.book or "main", node = v.node or "wallet",
                       pause = function(n) task.sleep(10 * n) end, one_tx = v.one_tx,
                       audit = L.audit_hook(o.audit) } -- a record per committed transfer
    end
    local led = engine()
    local cfg = { ledger = led, log = o.log, on_dry = v.on_dry }
    for k, x in pairs(v) do if not OWN[k] then cfg[k] = x end end
    local w = service.new(cfg)
    w.new_engine = engine
    local s = v.store or { backend = "sqlite" }
    local so = {}
    for k, x in pairs(s) do so[k] = x end
    if so.backend == "sqlite" then
        so.path = so.path or (o.var .. "/wallet-ledger.db")
        so.offload = true -- the loop thread never waits on SQLite
    elseif so.backend == "postgres" and so.node == nil and so.db == nil then
        so.node = led.node -- LED-65: recover() fences a dead process of this node
    end
    w.store_opts = so
    w.lease_ms = v.lease_ms or (so.backend == "postgres" and 5000 or 0)
    return w
end

-- In a task: opens the store (retrying every second until it opens or the wallet stops),
-- finishes the sagas a crash left (recover), starts the workers and the feed.
function _M.run(w)
    while not w.stopping do
        local s, err = store.open(w.store_opts)
        if s then
            w.led.store = s
            w.store = s
            break
        end
        w.log("store: " .. tostring(err) .. " (retrying)")
        if not task.sleep(1000) then return true end
    end
    if w.stopping then return true end
    if w.lease_ms > 0 then
        -- LED-71: the node's lease first (a survivor may be recovering this node: wait for
        -- it), so recovery and every later write run under this process's epoch
        local f = fleet.new(w, { ttl_ms = w.lease_ms, engine = w.new_engine })
        if not f:start() then return true end
    end
    local res = w.led:recover()
    if res and #res > 0 then w.log(format("recovered %d saga(s)", #res)) end
    w:start()
    return true
end

function _M.close(w)
    w:stop()
end

return _M
