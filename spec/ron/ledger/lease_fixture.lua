-- The lease specs' fixture (not a spec: loaded with dofile by lease_spec.lua,
-- lease_host_spec.lua and recover_peer_spec.lua): an engine of a node holding its lease,
-- the memory and SQLite worlds' lease timing, a payment request.
--
--   local LF = dofile(S.root .. "spec/ron/ledger/lease_fixture.lua")
--   local led, l = LF.leased(store, node, timing[, engine_store])
--   LF.timing(w)                        -- w.sqlite: the wall clock, else w.clock
--   LF.req(intent, from, to, amount)    -- a commit request of one movement in USD
local L = require("ron.ledger.ledger")
local lease = require("ron.ledger.lease")
local uv = require("luv")

local LF = {}

LF.USD = { code = "USD", scale = 2 }

local function noop() end
LF.noop = noop

function LF.req(intent, from, to, amount)
    return { intent = intent, movements = { { from = from, to = to, asset = LF.USD,
                                              amount = amount } } }
end

-- The lease timing of a spec's world: SQLite's lease clock is the wall clock (short leases,
-- the spec waits), the memory store's is w.clock (the spec moves it).
function LF.timing(w)
    return { ttl_ms = w.sqlite and 400 or 5000, renew_ms = w.sqlite and 100 or 1000,
             sleep = noop,
             clock = w.sqlite and function() return uv.hrtime() / 1e6 end or w.clock }
end

-- An engine of node (book "main") on engine_store (default st: a view of it, say) whose
-- lease on st is acquired with timing t ({ ttl_ms, renew_ms, sleep, clock }). -> led, l
function LF.leased(st, node, t, engine_store)
    local led = L.new { store = engine_store or st, book = "main", node = node, nonce = node }
    local l = lease.new { store = st, node = node, ttl_ms = t.ttl_ms, renew_ms = t.renew_ms,
                          sleep = t.sleep, clock = t.clock }
    assert(l:acquire())
    led.lease = l
    return led, l
end

return LF
