-- ron.ledger.exporter (docs/LEDGER-RATING.md §7, LED-R-8): slices sealed by
-- a real meter, rated and committed through the real engine (ron.ledger.ledger) into a
-- store: the export contract (ok, dup, conflict, gap, head, accept_loss), balances equal to
-- the rated usage exactly, the prepaid wallet drained first and the shortfall on the
-- receivable with its event, a crash between commit and head, a frozen wallet.
-- Runs on every store `stores()` yields (memory; SQLite when ron.ledger.store.sqlite is here).
local S = require("support")
local acct = require("ron.accounting")
local exporter = require("ron.accounting.export.exporters")
local lexp = require("ron.ledger.exporter")
local rate = require("ron.ledger.rate")
local usage = require("ron.ledger.usage")
local verify = require("ron.ledger.verify")
-- The engine (wip/commit) may not be in this tree yet: then every case is pending.
local has_engine, L = pcall(require, "ron.ledger.ledger")

local T0, TA, TB = S.T0, S.TENANT_A, S.TENANT_B
local USD = { code = "USD", scale = 2 }

local CARD = assert(rate.new({
    version = "spec.1", currency = USD, period = "month",
    dimensions = {
        bytes = { per = 1000, free = 10, tiers = { { upto = 5000, price = 3 }, { price = 1 } } },
        requests = { price = 2 },
    },
}, "spec card"))

local function stores()
    local list = {}
    if pcall(require, "ron.ledger.store.memory") then
        list[1] = { "memory", function() return require("ron.ledger.store.memory").new() end }
    end
    local ok, sqlite = pcall(require, "ron.ledger.store.sqlite")
    if ok then
        list[#list + 1] = { "sqlite", function()
            local path = S.tmpname(".db")
            local st = assert(sqlite.open { path = path, synchronous = "normal" })
            st.spec_path = path
            return st
        end }
    end
    return list
end

-- n chained slices per stream of a fresh meter; each window records `amount(i)` bytes for
-- each tenant.
local function sealed(n, amount, tenants, dim, wal)
    local clock = S.clock(T0 + 5)
    local m = assert(acct.open(S.cfg { clock = clock.fn, wal = wal and { dir = wal } or nil }))
    local out = {}
    for i = 1, n do
        clock.now = T0 + 60 * (i - 1) + 5
        for _, t in ipairs(tenants or { TA }) do
            assert(m:record(t, "alice", dim or "bytes", amount(i)))
            assert(m:record(t, "bob", dim or "bytes", 1))
        end
        for _, s in ipairs(assert(m:rollover(T0 + 60 * i))) do out[#out + 1] = s end
    end
    m:close()
    return out
end

local function charge_of(total)
    local r = assert(CARD:rate { dimension = "bytes", window_start_s = T0, used = 0,
                                 quantity = total })
    return r.amount
end

if not has_engine then
    pending("ron.ledger.exporter: ron.ledger.ledger (the engine) is not in this tree")
    return
end

for _, backend in ipairs(stores()) do
    local name, make = backend[1], backend[2]
    describe("ron.ledger.exporter on the " .. name .. " store", function()
        local store, e, led
        before_each(function()
            store = make()
            e = assert(lexp.new { store = store, card = CARD, book = "main", node = "spec" })
            led = L.new { store = store, book = "main", node = "spec-op" }
        end)
        after_each(function()
            e:close()
            if store.close then store:close() end
        end)

        local function bal(kind, tenant, asset)
            return led:balance(usage.account(kind, tenant), asset)
        end

        it("refuses a bad parallel or lane_min (LED-66)", function()
            for _, bad in ipairs { { parallel = 0 }, { lane_min = 0 }, { lane_min = 1.5 },
                                   { parallel = "4" }, { lane_min = 65537 } } do
                local o = { store = store, card = CARD, book = "main", node = "spec" }
                local k, v = next(bad)
                o[k] = v
                local x, err = lexp.new(o)
                assert.is_nil(x)
                assert.truthy(err:find(k .. " must be an integer in 1..65536", 1, true), err)
            end
        end)

        it("is an exporter (the interface check)", function()
            assert.equal(e, exporter.check(e))
        end)

        it("rates a chain exactly once: ok, then dup for every replay", function()
            local slices = sealed(4, function(i) return 1000 * i end)
            local total = 0
            for _, s in ipairs(slices) do
                assert.equal("ok", (e:put(s)))
                total = total + S.total(s)
            end
            for _, s in ipairs(slices) do assert.equal("dup", (e:put(s))) end
            local h = e:head(TA, "bytes")
            assert.same({ seq = 4, b3 = slices[4].b3 }, h)
            -- every unit moved, and the period's charge is C(total) to the minor unit
            assert.equal(total, bal("usage", TA, CARD:asset_of("bytes")))
            assert.equal(-total, led:balance(usage.account("usage_source"),
                                             CARD:asset_of("bytes")))
            local charge = charge_of(total)
            assert.is_true(charge > 0)
            assert.equal(charge, led:balance(usage.account("revenue"), USD))
            -- nothing prepaid: all of it on the receivable, the wallet untouched
            assert.equal(0, bal("wallet", TA, USD))
            assert.equal(-charge, bal("receivable", TA, USD))
            local shortfalls = 0
            for _, ev in ipairs(assert(led:events_since(0, 1000))) do
                if ev.kind == lexp.SHORTFALL_EVENT then shortfalls = shortfalls + 1 end
            end
            assert.equal(4, shortfalls)
            assert.equal(4, e:stats().ok)
            assert.equal(4, e:stats().dup)
        end)

        it("hands the audit trail one ledger record per committed transfer (issue 16)",
           function()
            local records = {}
            e:set_audit(function(kind, attrs)
                records[#records + 1] = { kind = kind, attrs = attrs }
                return true
            end)
            local slices = sealed(3, function(i) return 700 * i end)
            for _, s in ipairs(slices) do assert.equal("ok", (e:put(s))) end
            for _, s in ipairs(slices) do assert.equal("dup", (e:put(s))) end -- no new record
            assert.equal(3, #records)
            local committed, hex = {}, require("ron.ledger").hex
            for _, ev in ipairs(assert(led:events_since(0, 1000))) do
                if ev.kind == "transfer" then committed[hex(ev.transfer_id)] = ev.seq end
            end
            for _, r in ipairs(records) do
                assert.equal("ledger", r.kind)
                assert.equal("transfer", r.attrs.event)
                assert.matches("^%x+$", r.attrs.transfer)
                assert.equal(64, #r.attrs.transfer)
                assert.equal(committed[r.attrs.transfer], r.attrs.event_seq)
                assert.equal("main", r.attrs.book)
                committed[r.attrs.transfer] = nil -- each transfer once
            end
        end)

        it("put_many: the batch's slices, then ONE flush before any answer (LED-50)", function()
            local slices = sealed(3, function(i) return 500 * i end, { TA, TB })
            local flushes, real, fail_flush = 0, store.flush, false
            store.flush = function(st)
                flushes = flushes + 1
                if fail_flush then return nil, "Busy: flush refused (spec)", "retry" end
                return real(st)
            end
            -- the first window's two streams (two tenants) in one call
            local r = e:put_many { slices[1], slices[2] }
            assert.same({ { "ok" }, { "ok" } }, { { r[1][1] }, { r[2][1] } })
            assert.equal(1, flushes)
            -- a flush that fails: nothing of the call is acknowledged ...
            fail_flush = true
            r = e:put_many { slices[3], slices[4] }
            assert.is_nil(r[1][1])
            S.fails("not durable", r[2][1], r[1][2])
            assert.equal(2, flushes)
            -- ... the re-sent batch finds its committed intents: dup, flushed again
            fail_flush = false
            r = e:put_many { slices[3], slices[4], slices[5], slices[6] }
            assert.same({ "dup", "dup", "ok", "ok" }, { r[1][1], r[2][1], r[3][1], r[4][1] })
            assert.equal(3, flushes)
            -- put flushes once per slice; an answer that acknowledges nothing does not flush
            assert.equal("dup", (e:put(slices[1])))
            assert.equal(4, flushes)
            assert.equal("gap", (e:put(sealed(5, function() return 1 end, { TA })[5])))
            assert.equal(4, flushes)
            assert.same({ seq = 3, b3 = slices[5].b3 }, e:head(slices[5].tenant, "bytes"))
            store.flush = nil
        end)

        it("put_many through commit_many: the same answers, balances and heads as one put at "
           .. "a time, verify passes (LED-55)", function()
            -- 8 windows of two tenants' streams; a prepaid wallet that runs dry mid-batch
            local slices = sealed(8, function(i) return 900 * i end, { TA, TB })
            local world = string.rep("\7", 16)
            local function topup(ex, l)
                assert(ex:ready())
                assert(ex:tenant_accounts(usage.tenant_raw(TA)))
                assert(l:create_account { id = world, policy = "uncapped" })
                assert(l:commit { intent = "topup", movements = {
                    { from = world, to = usage.account("wallet", TA), asset = USD, amount = 20 } } })
            end
            topup(e, led)
            -- the batch: the whole chain of both streams, a replay, a hole and a fork
            local fork = sealed(2, function() return 3 end, { TB })[2] -- TB's seq 2, other b3
            local batch = {}
            for i = 1, #slices do batch[#batch + 1] = slices[i] end
            table.insert(batch, 5, slices[1])   -- dup of an earlier slice of the batch
            batch[#batch + 1] = fork            -- conflict (seq 2 of TB taken)
            local hole = sealed(10, function() return 1 end, { TA })[10]
            batch[#batch + 1] = hole            -- gap
            local calls0 = store.calls or 0
            local got = e:put_many(batch)
            local calls = (store.calls or 0) - calls0
            -- the same, one put at a time, on a fresh store
            local st2 = make()
            local e2 = assert(lexp.new { store = st2, card = CARD, book = "main", node = "spec" })
            local led2 = L.new { store = st2, book = "main", node = "spec-op" }
            topup(e2, led2)
            for i, sl in ipairs(batch) do
                local want = { e2:put(sl) }
                assert.equal(want[1], got[i][1], "slice " .. i .. ": " .. tostring(got[i][2]))
            end
            for _, t in ipairs { TA, TB } do
                for _, kind in ipairs { "wallet", "receivable" } do
                    assert.equal(led2:balance(usage.account(kind, t), USD),
                                 led:balance(usage.account(kind, t), USD))
                end
                assert.same(e2:head(t, "bytes"), e:head(t, "bytes"))
            end
            assert.equal(led2:balance(usage.account("revenue"), USD),
                         led:balance(usage.account("revenue"), USD))
            assert.is_true(led:balance(usage.account("receivable", TA), USD) < 0)
            local problems = {}
            local sum = verify.run(store, { book = "main", report = function(w, what)
                problems[#problems + 1] = w .. ": " .. what
            end })
            assert.same({}, problems)
            assert.equal(#slices, sum.usage)
            -- LED-58: the tenants' accounts list their transfers, the book's revenue and
            -- usage source do not (every slice touches them: the feed lists them all)
            local ta_usage = usage.account("usage", TA)
            assert.is_true(#assert(led:history(ta_usage, { limit = 1000 })) > 0)
            assert.equal(#assert(led2:history(ta_usage, { limit = 1000 })),
                         #assert(led:history(ta_usage, { limit = 1000 })))
            assert.same({}, assert(led:history(usage.account("revenue"))))
            assert.same({}, assert(led:history(usage.account("usage_source"))))
            if store.calls then
                print(string.format("ron.ledger.exporter put_many: %d slices in %d store calls",
                                    #batch, calls))
                assert.is_true(calls < #batch * 3)
            end
            e2:close()
            if st2.close then st2:close() end
        end)

        it("put_many moves the heads in the commit's own phase when every slice commits "
           .. "there, and after it when another writer moved one meanwhile (opts.also)",
           function()
            local slices = sealed(4, function(i) return 700 * i end, { TA, TB })
            assert(e:ready())
            local world = string.rep("\7", 16)
            assert(led:create_account { id = world, policy = "uncapped" })
            for _, t in ipairs { TA, TB } do -- prepaid: no slice leaves a shortfall
                assert(e:tenant_accounts(usage.tenant_raw(t)))
                assert(led:commit { intent = "topup " .. t, movements = {
                    { from = world, to = usage.account("wallet", t), asset = USD,
                      amount = 1000000 } } })
            end
            -- the heads' writes outside a phase, and inside the exporter's phases
            local outside, in_apply, in_phase = 0, false, 0
            local real_apply = store.apply
            local function applied(...)
                in_apply = false
                return ...
            end
            store.apply = function(st, ops, o)
                for _, op in ipairs(ops) do
                    if op[1] == "advance_streams" or op[1] == "insert_streams" then
                        in_phase = in_phase + 1
                    end
                end
                in_apply = true
                return applied(real_apply(st, ops, o))
            end
            local raw_advance = store.advance_streams
            for _, n in ipairs { "advance_streams", "insert_streams" } do
                local real = store[n]
                store[n] = function(st, ...)
                    if not in_apply then outside = outside + 1 end
                    return real(st, ...)
                end
            end
            local by_window = {}
            for _, sl in ipairs(slices) do
                local w = sl.id.seq
                by_window[w] = by_window[w] or {}
                by_window[w][#by_window[w] + 1] = sl
            end
            -- windows 1 (new streams: insert_streams) and 2 (advance_streams): in the phase
            for w = 1, 2 do
                local r = e:put_many(by_window[w])
                assert.same({ "ok", "ok" }, { r[1][1], r[2][1] })
                assert.equal(w, in_phase)
                assert.equal(0, outside)
                for _, sl in ipairs(by_window[w]) do
                    assert.same({ seq = w, b3 = sl.b3 }, e:head(sl.tenant, "bytes"))
                end
            end
            -- window 3: another writer moves TA's head after the batch read it; the phase's
            -- compare-and-set counts 0 of 1, nothing of the phase applies, the saga's way
            -- commits both, and the move after it answers as it always did
            local other = string.rep("\9", 32)
            local real_streams = store.get_streams
            store.get_streams = function(st, list)
                local got = real_streams(st, list)
                store.get_streams = real_streams
                local h = assert(st:get_stream(usage.tenant_raw(TA), "bytes"))
                assert.equal(1, raw_advance(st, { { tenant = usage.tenant_raw(TA),
                    dimension = "bytes", seq = 3, b3 = other, prev_seq = h.seq,
                    prev_b3 = h.b3 } }))
                return got
            end
            outside = 0
            local missed0 = (e.led.stats.atomic_batch_missed_at or {}).advance_streams or 0
            local r = e:put_many(by_window[3])
            local want = {}
            for j, sl in ipairs(by_window[3]) do
                if sl.tenant == TA then
                    assert.is_nil(r[j][1])
                    S.fails("moved meanwhile", r[j][1], r[j][2])
                else
                    -- (acknowledged: the move after the commit reads the heads back when
                    -- one of its counts is short, and takes its own move for another's)
                    assert.equal("dup", r[j][1])
                    want[#want + 1] = sl
                end
            end
            assert.equal(missed0 + 1, e.led.stats.atomic_batch_missed_at.advance_streams)
            assert.equal(1, outside) -- (TB's advance after the commit; TA's counted 0 there)
            assert.equal(3, in_phase)
            assert.same({ seq = 3, b3 = want[1].b3 }, e:head(TB, "bytes"))
            assert.same({ seq = 3, b3 = usage.hex(other) }, e:head(TA, "bytes"))
            -- both slices' transfers committed (the saga's way): the usage of three windows
            assert.equal(S.total(by_window[1][1]) + S.total(by_window[2][1])
                         + S.total(by_window[3][1]),
                         0 + bal("usage", by_window[1][1].tenant, CARD:asset_of("bytes")))
            store.apply, store.advance_streams, store.insert_streams = nil, nil, nil
        end)

        it("drains the prepaid wallet first, then the receivable takes the rest", function()
            local slices = sealed(3, function() return 2000 end)
            assert(e:ready())
            assert(e:tenant_accounts(usage.tenant_raw(TA))) -- created as a first put would
            local world = string.rep("\7", 16)
            assert(led:create_account { id = world, policy = "uncapped" })
            local r = assert(led:commit { intent = "topup-1", movements = {
                { from = world, to = usage.account("wallet", TA), asset = USD, amount = 7 } } })
            assert.equal("committed", r.status)
            for _, s in ipairs(slices) do assert.equal("ok", (e:put(s))) end
            local total = S.total(slices[1]) * 3
            local charge = charge_of(total)
            assert.is_true(charge > 7)
            assert.equal(0, bal("wallet", TA, USD))
            assert.equal(-(charge - 7), bal("receivable", TA, USD))
            assert.equal(charge, led:balance(usage.account("revenue"), USD))
        end)

        it("answers conflict for a fork, gap for a hole, and keeps two streams apart", function()
            local a = sealed(3, function(i) return i end, { TA, TB })
            local fork = sealed(2, function(i) return 7 * i end, { TA })
            -- a: TA1, TB1, TA2, TB2, ... in seal order
            local by = {}
            for _, s in ipairs(a) do
                by[s.tenant] = by[s.tenant] or {}
                by[s.tenant][s.id.seq] = s
            end
            assert.equal("gap", (e:put(by[TA][2])))
            assert.equal("ok", (e:put(by[TA][1])))
            assert.equal("ok", (e:put(by[TB][1])))
            assert.equal("conflict", (e:put(fork[1]))) -- seq 1 of another chain
            assert.equal("conflict", (e:put(fork[2]))) -- links to the other seq 1
            assert.equal("ok", (e:put(by[TA][2])))
            assert.equal("gap", (e:put(by[TB][3])))
            assert.equal("conflict", (e:put(fork[1]))) -- below the head, another b3
            assert.equal("dup", (e:put(by[TA][1])))
            assert.equal(2, e:head(TA, "bytes").seq)
            assert.equal(1, e:head(TB, "bytes").seq)
            assert.is_nil(e:head(TB, "requests"))
        end)

        it("a crash between the commit and the head: the re-sent slice is dup, once", function()
            local slices = sealed(2, function(i) return 100 * i end)
            assert.equal("ok", (e:put(slices[1])))
            -- what put() does up to the commit, then "crash" before advance_stream
            local info = usage.from_slice(slices[2])
            local req = assert(usage.request(info, CARD, tostring(S.total(slices[1]))))
            assert(led:commit(req))
            assert.equal(1, e:head(TA, "bytes").seq)
            assert.equal("dup", (e:put(slices[2])))
            assert.equal(2, e:head(TA, "bytes").seq)
            assert.equal(S.total(slices[1]) + S.total(slices[2]),
                         bal("usage", TA, CARD:asset_of("bytes")))
        end)

        it("carries the period's usage from slice to slice (tiers and free units)", function()
            local slices = sealed(5, function(i) return 1234 * i end)
            for _, s in ipairs(slices) do assert.equal("ok", (e:put(s))) end
            local total = 0
            for _, s in ipairs(slices) do total = total + S.total(s) end
            assert.equal(charge_of(total), led:balance(usage.account("revenue"), USD))
            -- a fresh exporter (no cache) reads the period's usage from the ledger
            local more = sealed(6, function(i) return 1234 * i end)
            local e2 = assert(lexp.new { store = store, card = CARD, node = "spec2" })
            assert.equal("ok", (e2:put(more[6])))
            assert.equal(charge_of(total + S.total(more[6])),
                         led:balance(usage.account("revenue"), USD))
            e2:close()
        end)

        it("accept_loss records the given-up seqs and the stream goes on", function()
            local slices = sealed(4, function(i) return 10 * i end)
            assert.equal("ok", (e:put(slices[1])))
            assert.equal("gap", (e:put(slices[4])))
            local r = assert(e:accept_loss { tenant = TA, dimension = "bytes", through_seq = 3,
                                             link_b3 = slices[4].prev_b3, reason = "wal lost",
                                             now_s = T0 })
            assert.same({ from = 2, to = 3 }, r)
            assert.equal("ok", (e:put(slices[4])))
            assert.equal("conflict", (e:put(slices[2]))) -- a given-up seq stays given up
            local losses = 0
            for _, ev in ipairs(assert(led:events_since(0, 100))) do
                if ev.kind == lexp.LOSS_EVENT then losses = losses + 1 end
            end
            assert.equal(1, losses)
            local _, err = e:accept_loss { tenant = TA, dimension = "bytes", through_seq = 2,
                                           link_b3 = slices[3].prev_b3 }
            assert.matches("nothing is missing", err)
        end)

        it("waits while the wallet is frozen (nothing stored under the intent)", function()
            local slices = sealed(1, function() return 50 end)
            assert(e:ready())
            assert(e:tenant_accounts(usage.tenant_raw(TA)))
            assert(led:freeze(usage.account("wallet", TA)))
            local st, err = e:put(slices[1])
            S.fails("^Frozen: ", st, err)
            assert(led:unfreeze(usage.account("wallet", TA)))
            assert.equal("ok", (e:put(slices[1])))
        end)

        it("put_many: a stream whose slice fails answers as one put at a time after it "
           .. "(gap), the other streams go on, a repeated slice follows its first copy",
           function()
            local all = sealed(3, function(i) return 40 * i end, { TA, TB })
            local a_, b_ = {}, {}
            for _, sl in ipairs(all) do
                local l = sl.tenant == TA and a_ or b_
                l[#l + 1] = sl
            end
            local slices = { a_[1], b_[1], a_[2], b_[2], a_[3], b_[3] }
            assert(e:ready())
            assert(e:tenant_accounts(usage.tenant_raw(TA)))
            assert(led:freeze(usage.account("wallet", TA)))
            -- TA1 TB1 TA2 TB2 TA3 TB3, then TA1 again
            local r = e:put_many { slices[1], slices[2], slices[3], slices[4], slices[5],
                                   slices[6], slices[1] }
            S.fails("^Frozen: ", r[1][1], r[1][2])
            assert.same({ "ok", "gap", "ok", "gap", "ok" },
                        { r[2][1], r[3][1], r[4][1], r[5][1], r[6][1] })
            assert.is_nil(r[7][1])                 -- the repeat: the same failure
            assert.matches("^Frozen: ", r[7][2])
            assert.is_nil(e:head(TA, "bytes"))
            local st = e:stats()
            assert.equal(2, st.fail)
            assert.equal(2, st.gap)
            assert(led:unfreeze(usage.account("wallet", TA)))
            r = e:put_many { slices[1], slices[3], slices[5], slices[1] }
            assert.same({ "ok", "ok", "ok", "dup" }, { r[1][1], r[2][1], r[3][1], r[4][1] })
        end)

        it("verify recomputes everything and names a flipped byte's transfer", function()
            local slices = sealed(3, function(i) return 700 * i end, { TA, TB })
            for _, sl in ipairs(slices) do assert.equal("ok", (e:put(sl))) end
            local problems = {}
            local function report(where, what) problems[#problems + 1] = where .. ": " .. what end
            local sum = verify.run(store, { book = "main", report = report })
            assert.same({}, problems)
            assert.equal(6, sum.transfers)
            assert.equal(6, sum.usage)
            assert.equal(2, sum.streams)
            assert.is_true(sum.balances >= 6)
            -- flip one byte of the second transfer's stored canonical bytes
            local recs = store:list_transfers(nil, 10)
            local victim = recs[2]
            local b = victim.bytes
            local at = #b - 40
            local flipped = b:sub(1, at - 1) .. string.char((b:byte(at) + 1) % 256) .. b:sub(at + 1)
            if store.spec_path then
                store:close()
                assert(os.execute(("sqlite3 %s \"UPDATE transfers SET bytes = X'%s' WHERE id = X'%s'\"")
                    :format(store.spec_path, usage.hex(flipped), usage.hex(victim.id))) == 0)
                store = assert(require("ron.ledger.store.sqlite").open { path = store.spec_path })
            else
                store.transfers[victim.id].bytes = flipped
            end
            problems = {}
            sum = verify.run(store, { book = "main", report = report })
            assert.is_true(sum.problems >= 1)
            assert.matches("^transfers #2 " .. usage.hex(victim.id) .. ": ", problems[1])
        end)

        it("verify cross-checks a file ledger holding the same slices", function()
            local slices = sealed(3, function(i) return 40 * i end, { TA, TB })
            local dir = S.tmpname(".fledger")
            local fl = assert(require("ron.accounting.export.exporters.file").new {
                dir = dir, fsync = false })
            for _, sl in ipairs(slices) do
                assert.equal("ok", (e:put(sl)))
                assert.equal("ok", (fl:put(sl)))
            end
            local problems = {}
            local function report(where, what) problems[#problems + 1] = where .. ": " .. what end
            local sum = verify.run(store, { book = "main", report = report, file_ledger = dir })
            assert.same({}, problems)
            assert.equal(6, sum.slices_checked)
            -- a slice the ledger never consumed: the file ledger holds one more
            local more = sealed(4, function(i) return 40 * i end, { TA, TB })
            assert.equal("ok", (fl:put(more[7])))
            fl:close()
            sum = verify.run(store, { book = "main", report = report, file_ledger = dir })
            assert.equal(1, sum.problems)
            assert.matches("record 4: seq 4 is consumed by no transfer", problems[1])
            os.execute("rm -rf " .. S.shell_quote(dir))
        end)

        it("verify cross-checks the metering WAL's heads", function()
            local bin = os.getenv("RA_BIN") or "build/ron-accounting"
            if not io.open(bin) then return pending("no ron-accounting binary at " .. bin) end
            local wal = S.tmpname(".wal")
            local slices = sealed(3, function(i) return 9 * i end, { TA }, "bytes", wal)
            for _, sl in ipairs(slices) do assert.equal("ok", (e:put(sl))) end
            local problems = {}
            local function report(where, what) problems[#problems + 1] = where .. ": " .. what end
            local sum = verify.run(store, { report = report, wal = wal, host = bin })
            assert.same({}, problems)
            assert.is_true(sum.wal_checked >= 1)
            -- another producer's WAL for the same stream: other bytes, other b3
            local other = S.tmpname(".wal")
            sealed(2, function(i) return 11 * i end, { TA }, "bytes", other)
            sum = verify.run(store, { report = report, wal = other, host = bin })
            assert.is_true(sum.problems >= 2)
            local text = table.concat(problems, "\n")
            assert.matches("wal stream " .. TA .. "/bytes: the ledger consumed seq 3, "
                           .. "beyond the producer's last seq 2", text, 1, true)
            assert.matches("consumed another slice of this seq", text, 1, true)
            os.execute("rm -rf " .. S.shell_quote(wal) .. " " .. S.shell_quote(other))
        end)

        it("refuses a dimension the card does not price (a local failure)", function()
            local slices = sealed(1, function() return 5 end, { TA }, "cpu_units")
            local st, err = e:put(slices[1])
            S.fails("^RatingError: ", st, err)
            assert.is_nil(e:head(TA, "cpu_units"))
        end)
    end)
end
