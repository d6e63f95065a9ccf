-- usage-windows.lua WORK_DIR WINDOWS [DB]: money = usage over many windows (issue 24 §5), the
-- in-process half of tests/host/usage-windows.sh, run by `ron-accounting run`.
--
--   gateway records -> a real meter (WAL in WORK_DIR/wal, a clock moved by hand) -> seal ->
--   the export runtime -> ron.ledger.exporter (the card below: tiers, a free allowance, a daily
--   period) -> ron-wallet on the same ledger (GET balance over HTTP)
--
-- WINDOWS (>= 10) windows of 60 s straddle a UTC midnight, so the card's day period restarts
-- in the middle of the run: each tenant's free allowance runs out mid-period, its usage climbs
-- through the tiers, and both start again the next day. Every charge is recomputed here by an
-- implementation of the card's arithmetic written for this test (docs/LEDGER-RATING.md §3,
-- not lua/ron/ledger/rate.lua): each usage transfer must move exactly the unit count and the
-- charge computed here, the wallets' balances read through the wallet after every window must
-- equal the prepaid amount minus the charges so far (never below 0: the rest is the tenant's
-- receivable), and revenue the sum of every charge.
--
-- Prints "usage-windows: ok <usage transfers> <charges>" or raises.
local runtime = require("ron.accounting.runtime")
local ledger = require("ron.ledger")
local usage = require("ron.ledger.usage")
local dto = require("ron.wallet.dto")
local cjson = require("cjson.safe")
local E = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "e2e.lua")

local format = string.format
io.stdout:setvbuf("line")
local work, windows, db = arg[1], tonumber(arg[2] or "12"), arg[3]
assert(windows >= 10, "at least 10 windows")

-- The card (also written to WORK_DIR/card.lua for the rater). Its arithmetic again, below,
-- from the page, not from the code.
local CARD = {
    version = "windows.1", period = "day",
    bytes = { per = 1000, free = 5000,
              tiers = { { upto = 20000, price = 3 }, { upto = 60000, price = 2 }, { price = 1 } } },
    requests = { per = 10, free = 20, tiers = { { price = 7 } } },
}
local CARD_TEXT = [[
return { version = "windows.1", currency = { code = "USD", scale = 2 }, period = "day",
         dimensions = {
             bytes = { per = 1000, free = 5000,
                       tiers = { { upto = 20000, price = 3 }, { upto = 60000, price = 2 },
                                 { price = 1 } } },
             requests = { per = 10, free = 20, price = 7 },
         } }
]]

-- C(Q) = floor(sum over tiers of (billable units in the tier) * price / per), with the
-- billable units B = max(0, Q - free); a tier covers [previous upto, upto).
local function total_charge(p, q)
    local b = math.max(0, q - p.free)
    local sum, lo = 0, 0
    for _, t in ipairs(p.tiers) do
        local hi = t.upto or math.huge
        if b > lo then sum = sum + (math.min(b, hi) - lo) * t.price end
        lo = hi
    end
    return math.floor(sum / p.per)
end

local function day_of(window_start_s) return math.floor(window_start_s / 86400) end

local MIDNIGHT = 1700006400                -- 2023-11-15T00:00:00Z
local HALF = math.floor(windows / 2)
local T0 = MIDNIGHT - 60 * HALF            -- the first HALF windows on the 14th, the rest the 15th
local TENANTS = { "00000000-0000-4000-8000-0000000000a1", "00000000-0000-4000-8000-0000000000b2",
                  "00000000-0000-4000-8000-0000000000c3" }
local PREPAID = { 100000, 200, 0 }         -- A never runs dry, B does on the second day, C has none
local OP = "windows-operator"

-- units recorded per window: bytes climb through every tier on the first day and again on the
-- second; requests cross their free 20 in the second or third window of each day.
local function traffic(i, w)
    return { bytes = 2000 * w + 900 * i + (w % 3) * 333, requests = 7 + i + (w % 2) }
end

local clock = { now = T0 + 5 }
local fh = assert(io.open(work .. "/card.lua", "w"))
fh:write(CARD_TEXT)
fh:close()
local m, e, sched = E.rig(work, db, clock, "windows", "windows-rater")
local get, post = E.client(sched, OP)
local function eventually(pred, ms, what) E.eventually(sched, pred, ms, what) end

-- expected[tenant][dimension][window_start_s] = { q, amount }; charges[i] = money so far
local expected, charges, used = {}, { 0, 0, 0 }, {}
local function expect_window(w)
    local ws = T0 + 60 * (w - 1)
    for i, t in ipairs(TENANTS) do
        expected[t] = expected[t] or { bytes = {}, requests = {} }
        used[t] = used[t] or {}
        for dim, q in pairs(traffic(i, w)) do
            local u = used[t][dim]
            if not u or u.day ~= day_of(ws) then u = { day = day_of(ws), n = 0 } end
            local amount = total_charge(CARD[dim], u.n + q) - total_charge(CARD[dim], u.n)
            u.n = u.n + q
            used[t][dim] = u
            expected[t][dim][ws] = { q = q, amount = amount }
            charges[i] = charges[i] + amount
        end
    end
end

local function open_wallets(wid)
    for i, t in ipairs(TENANTS) do
        wid[i] = dto.uuid_text(usage.account("wallet", t))
        local st, body = post("/v1/accounts", '{"account":"' .. wid[i] .. '"}')
        assert(st == 201 or st == 200, body)
        if PREPAID[i] > 0 then
            st, body = post("/v1/issue", format(
                '{"to":"%s","asset":"USD","amount":%d,"nonce":%d,"kind":"top_up"}', wid[i],
                PREPAID[i], i), "prepaid-" .. i)
            assert(st == 201, body)
        end
    end
end

local function balances_follow(w, wid)
    local line = {}
    for i = 1, #TENANTS do
        local want, got = math.max(0, PREPAID[i] - charges[i]), nil
        eventually(function()
            local st, body = get("/v1/accounts/" .. wid[i] .. "/balance?asset=USD")
            assert(st == 200, body)
            got = cjson.decode(body).balance
            return got == want
        end, 10000, format("window %d tenant %d: balance %s, want %d (charges %d)", w, i,
                           tostring(got), want, charges[i]))
        line[#line + 1] = format("%d", got)
    end
    print(format("usage-windows: window %2d (%s) charges %d %d %d, balances %s", w,
                 os.date("!%Y-%m-%dT%H:%M", T0 + 60 * (w - 1)), charges[1], charges[2],
                 charges[3], table.concat(line, " ")))
end

local function drive(rt, wid)
    for w = 1, windows do
        clock.now = T0 + 60 * (w - 1) + 5
        for i, t in ipairs(TENANTS) do
            local tr = traffic(i, w)
            assert(m:record(t, "alice", "bytes", tr.bytes - 1))
            assert(m:record(t, "bob", "bytes", 1))
            assert(m:record(t, "alice", "requests", tr.requests))
        end
        expect_window(w)
        clock.now = T0 + 60 * w + 1
        eventually(function() return rt.exports.ok == 2 * #TENANTS * w and #m:pending() == 0 end,
                   15000, "window " .. w .. ": the slices were not exported")
        balances_follow(w, wid)
    end
end

-- Every usage transfer of the ledger against the expectation: units and money moved.
local function check_transfers(st)
    local revenue, units_acct = usage.account("revenue"), {}
    local n, seen, total = 0, {}, 0
    for _, ev in ipairs(assert(st:get_events_since("main", 0, 100000))) do
        local rec = ev.kind == "transfer" and assert(st:get_transfer(ev.transfer_id))
        local t = rec and assert(ledger.decode_transfer(rec.bytes))
        local md = t and usage.decode_metadata(t.metadata)
        if md then
            local tenant = usage.tenant_text(md.tenant)
            local ex = assert(expected[tenant][md.dimension][tonumber(md.window_start_s)],
                              "a usage transfer for a window this test did not record")
            units_acct[tenant] = units_acct[tenant] or usage.account("usage", tenant)
            local moved, to_revenue = 0, 0
            for _, o in ipairs(t.outputs) do
                local a = tonumber(o.amount)
                if o.account == units_acct[tenant] and o.asset.code == "u:" .. md.dimension then
                    moved = moved + a
                elseif o.account == revenue and o.asset.code == "USD" then
                    to_revenue = to_revenue + a
                end
            end
            assert(moved == ex.q, format("%s %s window %s: %d units moved, recorded %d", tenant,
                                         md.dimension, md.window_start_s, moved, ex.q))
            assert(to_revenue == ex.amount,
                   format("%s %s window %s (%d units): charged %d, the card says %d", tenant,
                          md.dimension, md.window_start_s, ex.q, to_revenue, ex.amount))
            local key = tenant .. md.dimension .. md.window_start_s
            assert(not seen[key], "a window rated twice: " .. key)
            seen[key], n, total = true, n + 1, total + to_revenue
        end
    end
    assert(n == 2 * #TENANTS * windows, format("%d usage transfers, expected %d", n,
                                               2 * #TENANTS * windows))
    local rev = assert(st:get_balance(revenue, { code = "USD", scale = 2 }))
    assert(tonumber(rev) == total, format("revenue %s, charges %d", tostring(rev), total))
    return n, total
end

local result = {}
local function body()
    local wal, srv, ws = E.start_wallet(sched, m, E.store_spec(work, db), OP, "windows-wallet")
    local wid = {}
    open_wallets(wid)
    local rt = runtime.start { meter = m, exporter = e, tick_ms = 5 }
    drive(rt, wid)
    rt:stop()
    assert(rt:wait().aborted == 0)
    -- the arithmetic must have been exercised: B ran dry, free and tiers crossed both days
    assert(charges[2] > PREPAID[2] and charges[1] < PREPAID[1], "B did not run dry")
    -- the free allowance runs out mid-period, on both days: A's requests are free in the
    -- first two windows of a day and charged from the third
    local r = expected[TENANTS[1]].requests
    for _, day0 in ipairs { T0, MIDNIGHT } do
        assert(r[day0].amount == 0 and r[day0 + 60].amount == 0 and r[day0 + 120].amount > 0,
               "the free allowance did not run out in the third window of the day")
    end
    assert(used[TENANTS[3]].bytes.n > 5000 + 60000, "the last tier was not reached")
    result.n, result.total = check_transfers(ws)
    wal:stop()
    assert(wal:wait(10000))
    srv:close()
    ws:close()
end
-- A failed check ends the process at once: the wallet's and the runtime's tasks would keep the
-- loop (and the test) running until ctest's timeout.
E.run(sched, "windows", function()
    local ok, err = xpcall(body, debug.traceback)
    if not ok then
        io.stderr:write("usage-windows: FAILED: ", tostring(err), "\n")
        os.exit(1)
    end
end, e, m)
print(format("usage-windows: ok %d %d", result.n, result.total))
