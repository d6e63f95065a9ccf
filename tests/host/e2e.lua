-- What the in-process end-to-end drivers share (ledger-rate.lua, wallet-e2e.lua,
-- usage-windows.lua, each run by `ron-accounting run` from its .sh): the ledger both sides
-- use, a meter on a clock moved by hand, the rater on that ledger, and the wallet on the
-- daemon's HTTP server with a one-shot client. Loaded with dofile (a sibling file):
--   local E = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "e2e.lua")
local acct = require("ron.accounting")
local task = require("ron.base.task")
local lexp = require("ron.ledger.exporter")
local http = require("ron.node.http")
local L = require("ron.ledger.ledger")
local store_mod = require("ron.ledger.store")
local service = require("ron.wallet.service")
local uv = require("luv")

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local S = dofile(here .. "../../spec/support.lua")

local E = {}

-- The traffic of ledger-rate.lua and wallet-e2e.lua: three tenants, windows from T0 (all in
-- November 2023: one billing period), amount(t, w) bytes for tenant t in window w.
E.T0 = 1700000000 - 1700000000 % 3600 -- 2023-11-14T22:00:00Z
E.TENANTS = { "00000000-0000-4000-8000-00000000000a", "00000000-0000-4000-8000-00000000000b",
              "00000000-0000-4000-8000-00000000000c" }
function E.amount(t, w) return 1000 * w + 37 * t end

-- The ledger: PostgreSQL when db is a postgres URI (a pool of `connections`, 4 unless
-- given), else the SQLite file WORK/l.db (offloaded to the threadpool unless `direct`).
function E.store_spec(work, db, connections, direct)
    if db and db:match("^postgres") then
        return { backend = "postgres", conninfo = db, connections = connections or 4 }
    end
    return { backend = "sqlite", path = work .. "/l.db", offload = not direct }
end

-- A meter (WAL in WORK/wal, 60 s windows, clock.now as its clock, named host), the rater
-- (ron.ledger.exporter: card WORK/card.lua, book main, named node) on the ledger of db, and
-- a task scheduler for both.
function E.rig(work, db, clock, host, node)
    local m = assert(acct.open { capacity_rows = 1024, shards = 4, window_len_s = 60,
                                 host = host, clock = function() return clock.now end,
                                 wal = { dir = work .. "/wal" } })
    local e = assert(lexp.new { store = E.store_spec(work, db), card = work .. "/card.lua",
                                book = "main", node = node })
    return m, e, task.new()
end

-- Runs body as sched's task name on the host's loop until the loop ends (the task must have
-- ended well), then closes the rig's exporter e and meter m.
function E.run(sched, name, body, e, m)
    local h = sched.spawn(name, body)
    uv.run("default")
    assert(h.status == "ok", "the " .. name .. " task did not end: " .. tostring(h.status))
    assert(h:join())
    e:close()
    m:close()
end

-- pred() true within ms (sleeping in sched's task), else an error naming what.
function E.eventually(sched, pred, ms, what)
    local t = uv.now() + ms
    while not pred() do
        assert(uv.now() < t, what)
        sched.sleep(5)
    end
end

-- get(path) and post(path, body, idempotency key) -> status, body, headers: HTTP through the
-- specs' one-shot client (spec/support.lua) to sched.port, as the operator op.
function E.client(sched, op)
    local function answer(status, headers, body)
        assert(status, headers) -- nil, err: no answer
        return status, body, headers
    end
    return function(path) return answer(S.http_get(sched, sched.port, path, op)) end,
        function(path, body, key) return answer(S.http_post(sched, sched.port, path, op, body, key)) end
end

-- The wallet (its own engine over other connections to the rater's ledger `spec`, named
-- node, op's token the operator's, USD at scale 2, on_dry its hook) served next to the
-- meter m on port 0 (sched.port); once its system is ready: the wallet, the server, its store.
function E.start_wallet(sched, m, spec, op, node, on_dry)
    local ws = assert(store_mod.open(spec))
    local wled = L.new { store = ws, book = "main", node = node,
                         pause = function(n) sched.sleep(10 * n) end }
    local w = service.new { ledger = wled, tokens = { [acct.b3hex(op)] = "operator" },
                            assets = { USD = 2 }, poll_ms = 10, log = print, on_dry = on_dry }
    w:start()
    local srv = assert(http.serve { meter = m, port = 0, routes = w:routes(), max_body = 1048576,
                                    runtime = { ready = function() return w:ready() end,
                                                metrics_text = function()
                                                    return w:metrics_text()
                                                end } })
    sched.port = srv:port()
    E.eventually(sched, function() return w.system_ready end, 10000, "the wallet did not start")
    return w, srv, ws
end

return E
