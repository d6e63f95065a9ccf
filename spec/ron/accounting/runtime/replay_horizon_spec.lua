-- G-17 replay horizon (seed 000 I-17): duplicates older than the runtime's ACK LRU (its
-- finite replay horizon) are answered by the ledger as `dup` and change nothing; the
-- stream's order is kept and no per-slice state grows with the flood. Run in the host
-- (ctest lua-replay-horizon-host).
local S = require("support")
local acct = require("ron.accounting")
local runtime = require("ron.accounting.runtime")
local file = require("ron.accounting.export.exporters.file")

local HORIZON = 16 -- ack_lru: far fewer than the duplicates of the flood

local function count(t)
    local n = 0
    for _ in pairs(t) do n = n + 1 end
    return n
end

local in_seq_order = S.in_seq_order

local function bounded(rt)
    assert.is_true(count(rt.lru) <= HORIZON, "ack LRU over its capacity: " .. count(rt.lru))
    assert.is_true(rt.lru_tail - rt.lru_head + 1 <= HORIZON)
    assert.equal(0, count(rt.offered), "slices still marked offered")
    assert.equal(0, count(rt.offered_at), "offer timestamps left behind")
end

local function heads(dir)
    local l = assert(file.new { dir = dir })
    local h = {}
    for _, t in ipairs(S.TENANTS) do h[t] = assert(l:head(t, "bytes")) end
    l:close()
    return h
end

describe("G-17 replay horizon", function()
    it("G-17 replay horizon: a WAL replay of slices the ledger already holds, beyond the ACK"
       .. " LRU, is answered dup in seq order; new slices follow; state stays bounded",
       function()
        local clock, m, dir = S.rt_setup()
        local wal_dir = S.tmpname(".wal")
        m:close()
        m = assert(acct.open(S.cfg { clock = clock.fn, wal = { dir = wal_dir } }))
        -- 60 windows x 3 streams stored in the ledger, but never ACKed to the meter: the
        -- ACKs were "lost" (a crash between the ledger's fsync and the meter's ack)
        local ledger = assert(file.new { dir = dir })
        local OLD = 60
        for w = 1, OLD do
            S.rt_window(m, clock, w)
            for _, s in ipairs(assert(m:rollover())) do
                assert.equal("ok", (ledger:put(s)))
            end
        end
        ledger:close()
        -- restart: the WAL brings back all 180 as pending
        m:close()
        m = assert(acct.open(S.cfg { clock = clock.fn, wal = { dir = wal_dir } }))
        assert.equal(3 * OLD, #m:pending())
        local exporter = assert(require("ron.accounting.runtime.offload").file { dir = dir })
        local rt
        S.run_task(function(task)
            rt = runtime.start { meter = m, exporter = exporter, tick_ms = 5,
                                 ack_lru = HORIZON }
            -- new traffic arrives while the flood of old duplicates drains
            for w = OLD + 1, OLD + 10 do
                S.rt_window(m, clock, w)
                task.sleep(2)
            end
            assert.is_true(S.eventually(task, function()
                return #m:pending() == 0 and rt.exports.ok == 30 end, 20000),
                "pending " .. #m:pending() .. ", ok " .. rt.exports.ok)
            S.rt_stop(rt)
        end)
        -- every old slice answered dup. A listing that saw a slice pending before its ACK
        -- and came back after offered it again (183 dups once; once "63 -> 1" in the order
        -- check): RT:offer_list now drops what its stream has delivered (stale_listed); a
        -- dup answered from the ACK LRU would still change nothing
        assert.is_true(rt.exports.dup >= 3 * OLD and rt.exports.dup <= 3 * (OLD + 10),
                       "dup answers: " .. rt.exports.dup)
        print(string.format("replay horizon: %d dup answers, %d stale listed slice(s) not "
                            .. "offered again", rt.exports.dup, rt.stale_listed or 0))
        assert.equal(30, rt.exports.ok)
        assert.equal(0, rt.exports.fail)
        assert.equal(0, #rt.conflicts)
        assert.is_true(in_seq_order(rt))
        bounded(rt)
        for _, h in pairs(heads(dir)) do assert.equal(OLD + 10, h.seq) end
        S.rt_done(m, dir)
    end)

    it("G-17 replay horizon: a flood of stale duplicates (10x the horizon, re-offered after"
       .. " export) leaves the ledger unchanged and the state bounded; the streams go on",
       function()
        local clock, m, dir, ledger = S.rt_setup()
        local rt
        local old = {}
        S.run_task(function(task)
            rt = runtime.start { meter = m, exporter = ledger, tick_ms = 5,
                                 ack_lru = HORIZON }
            for w = 1, 20 do
                S.rt_window(m, clock, w)
                assert.is_true(S.eventually(task, function()
                    return rt.exports.ok == 3 * w end, 5000))
            end
            -- the old slices, exactly as stored: decoded from the ledger's stream files
            for _, t in ipairs(S.TENANTS) do
                local f = assert(io.open(dir .. "/" .. t .. "/bytes.ledger", "rb"))
                local data = f:read("*a")
                f:close()
                local off = 1
                while off <= #data do
                    local b0, b1, b2, b3 = data:byte(off, off + 3)
                    local n = b0 + b1 * 256 + b2 * 65536 + b3 * 16777216
                    old[#old + 1] = assert(acct.decode(data:sub(off + 4, off + 3 + n)))
                    off = off + 4 + n + 32
                end
            end
            assert.equal(60, #old)
            local before = heads(dir)
            -- the flood: every old slice offered 10 times (600 offers, horizon 16); the
            -- bounded pending_slices channel sheds what does not fit (counted as busy)
            local offered, shed = 0, 0
            for round = 1, 10 do
                for _, s in ipairs(old) do
                    if rt.offers:offer(s) then offered = offered + 1 else shed = shed + 1 end
                end
                task.sleep(1)
                local _ = round
            end
            assert.is_true(S.eventually(task, function()
                return count(rt.offered) == 0 end, 20000), "the flood never drained")
            print(string.format("flood: %d offered, %d shed busy; dup answers %d",
                                offered, shed, rt.exports.dup))
            assert.is_true(offered > 0)
            assert.is_true(rt.exports.dup > 0)
            local after = heads(dir)
            for t, h in pairs(before) do
                assert.equal(h.seq, after[t].seq)
                assert.equal(h.b3, after[t].b3)
            end
            -- the streams go on after the flood, in order
            for w = 21, 25 do S.rt_window(m, clock, w) end
            assert.is_true(S.eventually(task, function()
                return rt.exports.ok == 75 and #m:pending() == 0 end, 10000),
                "ok " .. rt.exports.ok)
            S.rt_stop(rt)
        end)
        assert.equal(0, rt.exports.fail)
        assert.equal(0, #rt.conflicts)
        bounded(rt)
        for _, h in pairs(heads(dir)) do assert.equal(25, h.seq) end
        S.rt_done(m, dir)
    end)
end)
