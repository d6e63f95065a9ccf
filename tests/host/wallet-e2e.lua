-- wallet-e2e.lua WORK_DIR WINDOWS [DB]: the in-process half of tests/host/wallet-e2e.sh, run by
-- `ron-accounting run` (ctest host-wallet-e2e; issue 17 "end to end"). One loop holds:
--
--   gateway records -> a real meter (WAL in WORK_DIR/wal, a clock moved by hand) -> seal ->
--   the export runtime -> ron.ledger.exporter (rate card WORK_DIR/card.lua, SQLite WORK_DIR/l.db,
--   or PostgreSQL when DB is a postgresql:// URI) -> ron-wallet on the same ledger and book,
--   on the daemon's HTTP server (port 0).
--
-- Tenant A is topped up (POST /v1/issue, 300) and tenant B granted 20 through the wallet's
-- HTTP API before any usage; tenant C has no money. Window by window the prepaid balances
-- read through GET balance go down by exactly the rated charge (the card's price over the
-- period's cumulative usage, computed here by hand); B runs dry in window 4 and C in
-- window 1: the wallet publishes it (the usage.shortfall event in the ledger's feed,
-- wallet_dry_total, the on_dry hook); the metering keeps recording. GET statement for A
-- cites every slice (digest, window, rate card) and the posting that paid it: the top-up,
-- or the change of the previous charge, which leads back to the top-up.
--
-- Prints "wallet-e2e: ok <usage transfers> <wallet transfers> <top-up transfer id>" (the
-- shell flips a byte of that transfer) or raises.
local runtime = require("ron.accounting.runtime")
local usage = require("ron.ledger.usage")
local dto = require("ron.wallet.dto")
local cjson = require("cjson.safe")
local E = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "e2e.lua")

local work, windows, db = arg[1], tonumber(arg[2] or "6"), arg[3]
local T0, TENANTS, amount = E.T0, E.TENANTS, E.amount
local PREPAID = { 300, 20, 0 }
local OP = "e2e-operator"

local function charge(total) return math.floor(math.max(0, total - 10) * 3 / 1000) end

local clock = { now = T0 + 5 }
local m, e, sched = E.rig(work, db, clock, "e2e", "e2e")
local get, post = E.client(sched, OP)
local function eventually(pred, ms, what) E.eventually(sched, pred, ms, what) end

local dry = {}
local result = {}
E.run(sched, "e2e", function()
    -- the wallet: its own engine over other connections to the rater's ledger
    local w, srv, ws = E.start_wallet(sched, m, E.store_spec(work, db), OP, "wallet-e2e",
                             function(t, a, asset) dry[#dry + 1] = { t, a, asset } end)

    -- money first: the tenants' usage wallets (the accounts the rater charges)
    local wid, paid_by = {}, {}
    for i, t in ipairs(TENANTS) do
        wid[i] = dto.uuid_text(usage.account("wallet", t))
        local st, body = post("/v1/accounts", '{"account":"' .. wid[i] .. '"}')
        assert(st == 201 or st == 200, body)
        if PREPAID[i] > 0 then
            st, body = post("/v1/issue", string.format(
                '{"to":"%s","asset":"USD","amount":%d,"nonce":%d,"kind":"%s"}', wid[i],
                PREPAID[i], i, i == 1 and "top_up" or "grant"), "prepaid-" .. i)
            assert(st == 201, body)
            paid_by[i] = cjson.decode(body).transfer_id
        end
    end

    local rt = runtime.start { meter = m, exporter = e, tick_ms = 5 }
    local totals = { 0, 0, 0 }
    local seen = {}
    for w_ = 1, windows do
        clock.now = T0 + 60 * (w_ - 1) + 5
        for i, t in ipairs(TENANTS) do
            assert(m:record(t, "alice", "bytes", amount(i, w_)))
            assert(m:record(t, "bob", "bytes", 1))
            totals[i] = totals[i] + amount(i, w_) + 1
        end
        clock.now = T0 + 60 * w_ + 1
        eventually(function() return rt.exports.ok == #TENANTS * w_ and #m:pending() == 0 end,
                   15000, "window " .. w_ .. ": the slices were not exported")
        -- the wallet's balance follows the rating window by window (through its feed)
        local line = {}
        for i = 1, #TENANTS do
            local want = math.max(0, PREPAID[i] - charge(totals[i]))
            local got, hd
            eventually(function()
                local st, body, hh = get("/v1/accounts/" .. wid[i] .. "/balance?asset=USD")
                assert(st == 200, body)
                got, hd = cjson.decode(body).balance, hh
                return got == want
            end, 10000, string.format("window %d tenant %d: balance %s, want %d", w_, i,
                                      tostring(got), want))
            line[#line + 1] = string.format("%s=%d (seq %s)", TENANTS[i]:sub(-1), got,
                                            hd["x-ledger-seq"])
            if want == 0 and PREPAID[i] - charge(totals[i]) < 0 and not seen[i] then
                seen[i] = w_
            end
        end
        print(string.format("wallet-e2e: window %d balances %s", w_, table.concat(line, " ")))
    end
    rt:stop()
    assert(rt:wait().aborted == 0)

    -- dry wallets published: the hook (B and C, once each per shortfall), the metric
    eventually(function() return #dry == e.counts.shortfalls end, 10000,
               "the feed did not publish every shortfall")
    assert(e.counts.shortfalls >= 2, "expected B and C to run dry")
    local dry_tenants = {}
    for _, d in ipairs(dry) do
        assert(d[3] == "USD" and d[2] > 0)
        dry_tenants[d[1]] = true
    end
    assert(dry_tenants[TENANTS[2]] and dry_tenants[TENANTS[3]] and not dry_tenants[TENANTS[1]],
           "on_dry named the wrong tenants")
    assert(seen[2] == 4, "B should run dry in window 4, not " .. tostring(seen[2]))
    local st, metrics = get("/metrics")
    assert(st == 200)
    assert(metrics:find(string.format('wallet_dry_total{asset="USD"} %d', #dry), 1, true),
           "wallet_dry_total")
    local nshort = 0
    for _, ev in ipairs(assert(ws:get_events_since("main", 0, 10000))) do
        if ev.kind == "usage.shortfall" then nshort = nshort + 1 end
    end
    assert(nshort == #dry, "usage.shortfall events " .. nshort .. ", published " .. #dry)

    -- A's statement: every slice rated, citing it, paid by the top-up (directly or through
    -- the change of the charge before)
    local body
    st, body = get("/v1/accounts/" .. wid[1] .. "/statement?asset=USD&limit=200")
    assert(st == 200, body)
    local stm = assert(cjson.decode(body), body)
    local charges, kinds, windows_seen = 0, {}, {}
    for _, en in ipairs(stm.entries) do kinds[en.transfer_id] = en.kind end
    for _, en in ipairs(stm.entries) do
        if en.kind == "usage" then
            local sl = en.metadata.slice
            assert(sl.tenant == TENANTS[1] and sl.rate_card == "e2e.1" and #sl.b3 == 64 and
                   sl.window_len_s == 60, body)
            assert((sl.window_start_s - T0) % 60 == 0)
            windows_seen[sl.window_start_s] = (windows_seen[sl.window_start_s] or 0) + 1
            assert(en.delta == -sl.amount, "the delta is not the slice's charge")
            charges = charges - en.delta
            for _, c in ipairs(en.consumed) do
                assert(c.funded_by == paid_by[1] or kinds[c.funded_by] == "usage",
                       "a charge paid by something else than the top-up: " .. body)
                if c.funded_by == paid_by[1] then
                    assert(c.funded_by_kind == "top_up")
                end
            end
        end
    end
    local nw = 0
    for _, n in pairs(windows_seen) do
        nw = nw + 1
        assert(n == 1, "a window charged twice")
    end
    assert(charges == charge(totals[1]), "A's statement sums to " .. charges)
    print(string.format("wallet-e2e: A's statement: %d charges over %d windows, %d in all, " ..
                        "paid by top-up %s", #stm.entries - 1, nw, charges, paid_by[1]))
    result.topup = paid_by[1]
    result.usage = e.counts.ok

    w:stop()
    assert(w:wait(10000))
    srv:close()
    ws:close()
end, e, m)
print(string.format("wallet-e2e: ok %d %d %s", result.usage, 2, result.topup))
