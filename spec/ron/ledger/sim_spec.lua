-- The deterministic simulator (spec/ron/ledger/sim.lua, LED-35) as part of `make test`:
-- every scenario under every (primitive, fault), and a few seeded random runs of concurrent
-- sagas with crashes. `make sim-ledger` runs many more seeds (RON_SIM_SEEDS, RON_SIM_OPS;
-- RON_SIM_SEED to replay one seed).
require("support")
local sim = require("ron.ledger.sim")

local function now() return os.clock() end

-- sim.random for the k-th seed of a run from first, whose options depend on k (its place:
-- k % 6, k % 5, k % 3): a failure names the run that replays it with the same options
-- (RON_SIM_SEED, RON_SIM_SEEDS: 30 is a multiple of 6, 5 and 3).
local function run_seed(first, k, o)
    local ok, st = pcall(sim.random, o)
    if ok then return st end
    local start = first + k - k % 30
    error(string.format("%s\n(replay: RON_SIM_SEED=%d RON_SIM_SEEDS=%d RON_SIM_OPS=%d)",
                        tostring(st), start, k % 30 + 1, o.ops), 0)
end

describe("ledger simulator", function()
    it("every scenario survives a crash, an error, a zero or partial batch and a storm at "
       .. "every primitive", function()
        local stats = {}
        local t0, total = now(), 0
        -- both ways a single commit goes: the one-transaction commit first (LED-72), and the
        -- saga's phases alone (what a commit falls back to)
        for _, saga_only in ipairs { false, true } do
            sim.saga_only = saga_only
            for _, sc in ipairs(sim.SCENARIOS) do
                local cases, prims = sim.exhaustive(sc, stats)
                assert.equal(prims * #sim.FAULTS, cases)
                total = total + cases
                print(string.format("sim exhaustive: %-44s %-8s %3d primitives, %4d cases",
                                    sc.name, saga_only and "saga" or "one-tx", prims, cases))
            end
        end
        sim.saga_only = false
        local dt = now() - t0
        print(string.format("sim exhaustive: %d cases in %.2f s (%.0f cases/s), %d model checks",
                            total, dt, total / dt, stats.model_checks or 0))
        assert.is_true(total > 400)
        assert.is_true((stats.model_checks or 0) > total)
    end)

    it("random interleavings of concurrent sagas with crashes keep every invariant", function()
        local first = tonumber(os.getenv("RON_SIM_SEED") or "") or 20261125
        local seeds = tonumber(os.getenv("RON_SIM_SEEDS") or "") or 12
        local ops = tonumber(os.getenv("RON_SIM_OPS") or "") or 120
        local t0 = now()
        local sum = { crashes = 0, commits = 0, rejections = 0, unavailable = 0, conflicts = 0,
                      replays = 0, calls = 0, verifies = 0, model_checks = 0, transfers = 0 }
        for k = 0, seeds - 1 do
            local seed = first + k
            sim.saga_only = k % 3 == 2 -- (a third of the seeds: the saga's phases alone)
            local st = run_seed(first, k, { seed = seed, ops = ops, conc = 1 + k % 6,
                                            p_crash = 0.001 + (k % 3) * 0.002, p_err = 0.02,
                                            p_partial = 0.05 })
            for name in pairs(sum) do sum[name] = sum[name] + (st[name] or 0) end
            if os.getenv("RON_SIM_VERBOSE") then
                print(string.format("seed %d: %d transfers, %d commits %d rejections %d crashes",
                                    seed, st.transfers, st.commits, st.rejections, st.crashes))
            end
        end
        sim.saga_only = false
        local dt = now() - t0
        print(string.format("sim random: seeds %d..%d, %d ops each: %d transfers stored, %d "
                            .. "commits answered, %d rejections, "
                            .. "%d unavailable, %d conflicts, %d replays, %d crashes, %d verifies, "
                            .. "%d model checks, %d primitives in %.2f s (%.0f transfers/s)",
                            first, first + seeds - 1, ops, sum.transfers, sum.commits,
                            sum.rejections,
                            sum.unavailable, sum.conflicts, sum.replays, sum.crashes,
                            sum.verifies, sum.model_checks, sum.calls, dt, sum.transfers / dt))
        assert.is_true(sum.transfers > seeds * ops / 4)
        assert.is_true(sum.crashes > 0)
        assert.is_true(sum.rejections > 0)
    end)

    it("batches (commit_many) racing single sagas with crashes keep every invariant "
       .. "(LED-51..LED-56)", function()
        local first = tonumber(os.getenv("RON_SIM_SEED") or "") or 5101
        local seeds = tonumber(os.getenv("RON_SIM_SEEDS") or "") or 8
        local ops = tonumber(os.getenv("RON_SIM_OPS") or "") or 100
        local batches, transfers, crashes, handovers, lost, chained = 0, 0, 0, 0, 0, 0
        local atomic = 0
        for k = 0, seeds - 1 do
            local st = run_seed(first, k, { seed = first + k, ops = ops, conc = 1 + k % 5,
                                            p_batch = 0.4, p_capped = 0.4,
                                            p_crash = 0.001 + (k % 3) * 0.002, p_err = 0.02,
                                            p_partial = 0.05 })
            batches = batches + (st.batches or 0)
            transfers = transfers + st.transfers
            crashes = crashes + st.crashes
            handovers = handovers + st.handovers
            lost = lost + st.claims_lost
            chained = chained + st.chained
            atomic = atomic + st.atomic_batches
        end
        print(string.format("sim batches: seeds %d..%d, %d ops each: %d batches answered, %d "
                            .. "transfers stored, %d crashes, %d members handed to the single "
                            .. "path (races), %d claims held elsewhere, %d change postings "
                            .. "spent in their batch, %d batches in one transaction", first,
                            first + seeds - 1, ops, batches, transfers, crashes, handovers, lost,
                            chained, atomic))
        assert.is_true(batches > seeds * 5)
        assert.is_true(atomic > 0)
        assert.is_true(crashes > 0)
    end)

    it("many sagas racing the capped floors never breach them (LED-29)", function()
        local first = tonumber(os.getenv("RON_SIM_SEED") or "") or 7001
        local seeds = tonumber(os.getenv("RON_SIM_SEEDS") or "") or 8
        local transfers, waits = 0, 0
        for k = 0, seeds - 1 do
            local st = sim.random { seed = first + k, ops = 100, conc = 8, p_capped = 0.9,
                                    p_crash = 0.001, p_err = 0.01, p_partial = 0.02 }
            transfers = transfers + st.transfers
            waits = waits + (st.head_waits or 0)
        end
        print(string.format("sim floor race: seeds %d..%d: %d transfers", first,
                            first + seeds - 1, transfers))
        assert.is_true(transfers > seeds * 25)
    end)
end)
