-- ledger-rate.lua WORK_DIR WINDOWS [DB]: the end-to-end half of tests/host/ledger-rate.sh, run
-- by `ron-accounting run`. Records for three tenants are sealed by a real meter with a WAL,
-- exported by the runtime on the host's loop into ron.ledger.exporter over SQLite (offloaded to
-- the threadpool; DB = WORK_DIR/l.db) or PostgreSQL (DB = a postgresql:// URI), then the balances are read back and compared with the rated usage
-- computed here by hand (the card of WORK_DIR/card.lua: per 1000 units, 3 minor units, 10
-- units free a month, one period: C(total) = floor(max(0, total - 10) * 3 / 1000)).
-- Tenant A had a prepaid top-up of 300 (done by the shell through `ledger transfer`).
-- Prints "ledger-rate: ok <slices> <revenue>" or raises.
local runtime = require("ron.accounting.runtime")
local L = require("ron.ledger.ledger")
local store_mod = require("ron.ledger.store")
local usage = require("ron.ledger.usage")
local uv = require("luv")
local E = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "e2e.lua")

local work, windows, db = arg[1], tonumber(arg[2] or "6"), arg[3]
local T0, TENANTS, amount = E.T0, E.TENANTS, E.amount
local USD = { code = "USD", scale = 2 }
local UNITS = { code = "u:bytes", scale = 0 }

local clock = { now = T0 + 5 }
local m, e, sched = E.rig(work, db, clock, "e2e", "e2e")

local totals = {}

E.run(sched, "e2e", function()
    local rt = runtime.start { meter = m, exporter = e, tick_ms = 5 }
    for w = 1, windows do
        clock.now = T0 + 60 * (w - 1) + 5
        for i, t in ipairs(TENANTS) do
            assert(m:record(t, "alice", "bytes", amount(i, w)))
            assert(m:record(t, "bob", "bytes", 1))
            totals[t] = (totals[t] or 0) + amount(i, w) + 1
        end
        clock.now = T0 + 60 * w + 1
        local deadline = uv.now() + 10000
        while not (rt.exports.ok == #TENANTS * w and #m:pending() == 0) do
            assert(uv.now() < deadline, ("window %d: %d slices exported, %d pending"):format(
                   w, rt.exports.ok, #m:pending()))
            sched.sleep(5)
        end
    end
    rt:stop()
    assert(rt:wait().aborted == 0)
end, e, m)

-- Read back through a store of its own and the engine (in a task: PostgreSQL's calls yield).
local function check()
    local s = assert(store_mod.open(E.store_spec(work, db, 1, true)))
    local led = L.new { store = s, book = "main", node = "check" }
    local revenue = 0
    for i, t in ipairs(TENANTS) do
        local total = totals[t]
        local charge = math.floor(math.max(0, total - 10) * 3 / 1000)
        revenue = revenue + charge
        local units = led:balance(usage.account("usage", t), UNITS)
        assert(units == total, ("tenant %d: %s units in the ledger, %d recorded"):format(i, units,
                                                                                        total))
        local wallet = led:balance(usage.account("wallet", t), USD) or 0
        local recv = led:balance(usage.account("receivable", t), USD) or 0
        local prepaid = i == 1 and 300 or 0
        local want_wallet = math.max(0, prepaid - charge)
        local want_recv = -math.max(0, charge - prepaid)
        assert(wallet == want_wallet and recv == want_recv,
               ("tenant %d: wallet %s receivable %s, expected %d and %d (charge %d)"):format(
                   i, wallet, recv, want_wallet, want_recv, charge))
    end
    local got = led:balance(usage.account("revenue"), USD)
    assert(got == revenue, ("revenue %s, expected %d"):format(got, revenue))
    local n = #assert(s:list_transfers(nil, 10000))
    s:close()
    return n - 1, revenue
end
local c = sched.spawn("check", check)
uv.run("default")
local _, n, revenue = assert(c:join())
print(("ledger-rate: ok %d %d"):format(n, revenue))
