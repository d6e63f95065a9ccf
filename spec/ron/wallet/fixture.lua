-- The wallet specs' fixture (not a spec: loaded with dofile by the *_spec.lua files of this
-- directory, inside the host): a wallet service over the ledger engine on a real store, on
-- the daemon's HTTP server (real sockets, port 0). Several wallets may share one store
-- file or server (two nodes: one open per node, each with its own store handle, engine and
-- node name).
--
--   local F = dofile(S.root .. "spec/ron/wallet/fixture.lua")
--   F.run(function(task)
--       local ctx = F.open(task, path_or_store_factory, wcfg?, gate?,
--                          { node = "n2", http = { more http.serve options } }?)
--       ctx.port, ctx.w (the service), ctx.led, ctx.store; ctx.close()
--   end)
--
-- gate (optional): every store call waits while gate.closed (a stalled ledger); when
-- gate.trip(name, ...) returns true after a call, the gate closes behind it (a saga held
-- at a chosen step). A gated node's engine runs the saga's phases only (one_tx = false: the
-- one-transaction commit, LED-72, has no step between its claim and its finalize to stop at).
local S = require("support")
local acct = require("ron.accounting")
local http = require("ron.node.http")
local store_mod = require("ron.ledger.store")
local L = require("ron.ledger.ledger")
local service = require("ron.wallet.service")

local F = {}

F.OP, F.TA, F.TB = "operator-token.1", "account-a-token.2", "account-b-token.3"
F.A = "6f1e3c52-7d0b-4b8e-9a51-0c2f4e8d9a10"
F.B = "0a0b0c0d-0e0f-4101-8203-040506070809"
F.TOKENS = { [acct.b3hex(F.OP)] = "operator", [acct.b3hex(F.TA)] = F.A,
             [acct.b3hex(F.TB)] = F.B }

-- Bodies (%d is exact for the integers of these specs: string.format converts through
-- int64_t, not through the 14-digit number-to-string conversion).
function F.transfer(from, to, amount, nonce, asset)
    return string.format('{"from":"%s","to":"%s","asset":"%s","amount":%d,"nonce":%d}', from, to,
                         asset or "USD", amount, nonce)
end
function F.issue(to, amount, nonce, kind)
    return string.format('{"to":"%s","asset":"USD","amount":%d,"nonce":%d%s}', to, amount, nonce,
                         kind and (',"kind":"' .. kind .. '"') or "")
end

local opened = {} -- the fixtures open in the running case

-- trip(name, ...) over a store call, or over each primitive of a phase (apply(ops): every
-- op is { name, args... }, LED-67)
function F.trips(trip, name, ...)
    if name ~= "apply" then return trip(name, ...) end
    for _, op in ipairs((...)) do
        if trip(op[1], unpack(op, 2, table.maxn(op))) then return true end
    end
    return false
end

function F.gated(real, T, gate)
    return setmetatable({}, { __index = function(_, k)
        local f = real[k]
        if type(f) ~= "function" then return f end
        return function(_, ...)
            while gate.closed do T.sleep(5) end
            local r = { f(real, ...) }
            if gate.trip and F.trips(gate.trip, k, ...) then
                gate.trip = nil
                gate.closed = true
            end
            return unpack(r, 1, table.maxn(r))
        end
    end })
end

-- The store of path (a SQLite file, offloaded) or of a factory (PostgreSQL).
local function open_store(path)
    if type(path) == "function" then return assert(path()) end
    return assert(store_mod.open { backend = "sqlite", path = path, offload = true })
end

-- The wallet service w on the daemon's HTTP server (port 0) with meter m; extra: more
-- http.serve options (connection limits). -> the server
function F.serve(w, m, extra)
    local ho = { meter = m, port = 0, routes = w:routes(), max_body = 1048576,
                 runtime = { ready = function() return w:ready() end,
                             metrics_text = function() return w:metrics_text() end } }
    for k, v in pairs(extra or {}) do ho[k] = v end
    return assert(http.serve(ho))
end

-- The wallet service over store s (its engine sees o.store, default s: a gated view),
-- engine node o.node (default "spec"), wcfg more service options, on the daemon's HTTP
-- server (o.http more options) with a meter of its own; ready within o.ready_ms (default
-- 5 s). -> ctx { port, w, led, srv }; ctx.free() closes the server, the meter and s (once
-- the wallet is stopped).
function F.start(task, s, wcfg, o)
    o = o or {}
    -- a gated view stops the engine between the saga's phases: it runs them (not LED-72)
    local st = o.store or s
    local led = L.new { store = st, book = "wallet", node = o.node or "spec",
                        pause = function(n) task.sleep(n) end, one_tx = st == s }
    led:recover()
    local cfg = { ledger = led, tokens = F.TOKENS, assets = { USD = 2 }, poll_ms = 10,
                  log = function() end }
    for k, v in pairs(wcfg or {}) do cfg[k] = v end
    local w = service.new(cfg)
    w:start()
    local m = assert(acct.open(S.cfg {}))
    local srv = F.serve(w, m, o.http)
    assert(S.eventually(task, function() return w.system_ready and w:ready() end,
                        o.ready_ms or 5000))
    local ctx = { port = srv:port(), w = w, led = led, srv = srv }
    function ctx.free()
        srv:close()
        m:close()
        s:close()
    end
    return ctx
end

function F.open(task, path, wcfg, gate, o)
    o = o or {}
    local s = open_store(path)
    local ctx = F.start(task, s, wcfg, { store = gate and F.gated(s, task, gate) or s,
                                         node = o.node, http = o.http })
    ctx.store, ctx.gate = s, gate
    opened[#opened + 1] = ctx
    local w = ctx.w
    function ctx.close()
        ctx.closed = true
        w:stop()
        for _, h in ipairs(w.workers_h) do h:join(5000) end
        w.feed_h:join(5000)
        assert(S.eventually(task, function() return next(w.calls) == nil and w.n_reads == 0 end,
                            5000))
        ctx.free()
    end
    return ctx
end

-- Two wallet nodes on one new SQLite file, each behind its own gate (the held_* specs):
-- node 1 ("wallet-1") with one committer and no answer cache (a replay is the ledger's
-- stored outcome), node 2 ("wallet-2"); long timeouts (a held saga is the test's to end).
-- -> n1, n2 (their ctx; ctx.gate the gate)
function F.two_nodes(task)
    local path = S.tmpname(".db")
    local n1 = F.open(task, path, { workers = 1, commit_timeout_ms = 20000,
                                    idempotency_cache = 0, stall_ms = 60000 },
                      { closed = false }, { node = "wallet-1" })
    local n2 = F.open(task, path, { commit_timeout_ms = 20000, stall_ms = 60000 },
                      { closed = false }, { node = "wallet-2" })
    return n1, n2
end

-- Runs body(task) in S.run_task; whatever happens, the wallets it opened are closed (a
-- failed case must not leave the feed task running: the loop would never end).
function F.run(body)
    S.run_task(function(task)
        local ok, err = pcall(body, task)
        for _, ctx in ipairs(opened) do
            if ctx.gate then ctx.gate.closed = false end
            if not ctx.closed then pcall(ctx.close) end
        end
        opened = {}
        if not ok then error(err, 0) end
    end)
end

-- A case on a fresh SQLite wallet with accounts A and B: it("...", F.fresh(function(task,
-- ctx, port) ... end, wcfg?, o?)); the wallet is closed after fn.
function F.fresh(fn, wcfg, o)
    return function()
        F.run(function(task)
            local ctx = F.open(task, S.tmpname(".db"), wcfg, nil, o)
            F.setup_accounts(task, ctx.port)
            fn(task, ctx, ctx.port)
            ctx.close()
        end)
    end
end

-- reqs { { path, token, body, key } } sent with the ledger stalled (ctx.gate), each queued
-- after the one before (one worker: it takes the first alone, the others as ONE group behind
-- it); then the ledger goes on -> { { status, headers, body } } in order
function F.burst(task, ctx, reqs)
    local w = ctx.w
    ctx.gate.closed = true
    local hs = {}
    for i, r in ipairs(reqs) do
        hs[i] = task.spawn("spec_burst", function()
            return { S.http_post(task, ctx.port, r[1], r[2], r[3], r[4]) }
        end)
        assert(S.eventually(task, function()
            return w.queue:depth() + w.m.worker_inflight >= i
        end, 5000), "request " .. i .. " was not queued")
    end
    ctx.gate.closed = false
    local out = {}
    for i, h in ipairs(hs) do
        local ok, r = h:join(60000)
        assert(ok, tostring(r))
        out[i] = r
    end
    return out
end

function F.setup_accounts(task, port, ids)
    for _, id in ipairs(ids or { F.A, F.B }) do
        local st, _, body = S.http_post(task, port, "/v1/accounts", F.OP,
                                        '{"account":"' .. id .. '"}')
        assert(st == 200, body)
    end
end

return F
