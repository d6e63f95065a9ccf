-- The record path from LuaJIT (PRODUCT.md §1: "the hot path never blocks and never
-- allocates"; STYLE.md: "tests that require the hot loop to JIT-compile").
--
-- Garbage is measured with the collector stopped, so collectgarbage("count") grows by
-- every byte allocated, not by what happened to survive a cycle. Each loop runs once to
-- warm up (traces are GC objects too) before the measured run.
--
-- Compilation is observed through jit.attach on "trace" events: the loop must compile to
-- a root trace that links back to itself ("loop"), with no trace aborted or stitched
-- while it runs: the record call, including the FFI call into the core, is inside it.
-- (Aborts in code other than the loop and ron/accounting/*, e.g. busted's, are ignored.)
local S = require("support")
local acct = require("ron.accounting")
local jit_trace = dofile(S.root .. "tests/nginx/jit_trace.lua")

local T0, TA = S.T0, S.TENANT_A
local N = 1e6
local GARBAGE_MAX_BYTES = 4096

-- Bytes allocated by fn() (collector stopped meanwhile).
local function allocated(fn)
    collectgarbage()
    collectgarbage()
    collectgarbage("stop")
    local before = collectgarbage("count")
    fn()
    local after = collectgarbage("count")
    collectgarbage("restart")
    return (after - before) * 1024
end

-- Runs fn with trace events recorded; returns the events' summary (tests/nginx/jit_trace.lua).
local function traced(loop_fn, fn)
    -- Benign: a root trace that started outside the loop (hot counters are shared by PC
    -- hash, so where recording starts varies from run to run) reaches the loop; LuaJIT
    -- aborts it and records the loop itself, which the `loops` check below still requires.
    -- Seen under parallel ctest load.
    local on_trace, ev = jit_trace.observer(loop_fn, function(msg)
        return msg:find("inner loop in root trace", 1, true) ~= nil
    end)
    jit.flush()
    jit.attach(on_trace, "trace")
    local ok, err = pcall(fn)
    jit.attach(on_trace)
    assert(ok, err)
    return ev
end

local function assert_compiled(ev)
    assert.same({}, ev.aborts)
    assert.equal(0, ev.stitches)
    assert.is_true(ev.roots_in_loop >= 1, "no trace started in the record loop")
    assert.is_true(ev.loops >= 1, "the record loop did not compile to a looping trace")
end

-- run(n) allocates nothing: warmed up on 1e4 calls, then n calls measured.
local function assert_no_garbage(run, n)
    run(1e4)
    local bytes = allocated(function() run(n) end)
    assert.is_true(bytes < GARBAGE_MAX_BYTES, ("%d bytes allocated"):format(bytes))
end

-- loop(n) compiles: 2e4 iterations traced, one looping trace, no abort, no stitch.
local function assert_loop_compiles(loop)
    assert_compiled(traced(loop, function() assert(loop(2e4)) end))
end

describe("ron.accounting record hot path", function()
    local meters
    before_each(function()
        assert.is_true(jit.status(), "the JIT compiler is off")
        meters = {}
    end)
    after_each(function()
        for _, m in ipairs(meters) do m:close() end
    end)
    local function open(cfg)
        local m = assert(acct.open(S.cfg(cfg)))
        meters[#meters + 1] = m
        return m
    end

    -- Sum of every row the meter seals from now on (one stream expected).
    local function sealed_total(m, now_s)
        local sum = 0
        for _, s in ipairs(assert(m:rollover(now_s))) do sum = sum + S.total(s) end
        return sum
    end

    -- A meter on an injected clock (T0 + 1) and the handles of tenant A's alice.
    local function alice_on_clock()
        local m = open { clock = S.clock(T0 + 1).fn }
        return m, acct.tenant(TA), m:subject("alice")
    end

    it("allocates nothing with pre-parsed handles", function()
        local m, t, s = alice_on_clock()
        local function run(n)
            for _ = 1, n do
                local ok, err = m:record(t, s, "bytes", 1)
                if not ok then error(err) end
            end
        end
        assert_no_garbage(run, N)
        assert.equal(N + 1e4, sealed_total(m, T0 + 60)) -- and every record counted
    end)

    it("allocates nothing with tenant and subject strings", function()
        local clock = S.clock(T0 + 1)
        local m = open { clock = clock.fn }
        local function run(n)
            for _ = 1, n do
                local ok, err = m:record(TA, "alice", "bytes", 1)
                if not ok then error(err) end
            end
        end
        assert_no_garbage(run, N)
        local slices = assert(m:rollover(T0 + 60))
        assert.equal(1, #slices)
        assert.equal(tostring(m:subject("alice")), slices[1].rows[1].subject)
        assert.equal(N + 1e4, S.total(slices[1]))
    end)

    it("allocates nothing on the system clock with uint64_t increments and numeric ids",
       function()
        local m = open()
        local t, s, dim, inc = acct.tenant(TA), m:subject("bob"), m:dimension("requests"), 2ULL
        local function run(n)
            for _ = 1, n do
                local ok, err = m:record(t, s, dim, inc)
                if not ok then error(err) end
            end
        end
        assert_no_garbage(run, N)
        -- Every window up to two windows from now: whatever boundary the run crossed.
        assert.equal(2 * (N + 1e4), sealed_total(m, os.time() + 120))
    end)

    it("allocates nothing when it rejects (errors are constant values)", function()
        local m = open()
        local t, s = acct.tenant(TA), m:subject("alice")
        local function run(n)
            for _ = 1, n do
                local ok, err = m:record(t, s, "bytes", -1)
                if ok or not err then error("accepted a negative increment") end
            end
        end
        assert_no_garbage(run, 1e5)
        assert.equal(1e4 + 1e5, S.metric(m, 'accounting_rejected_total{reason="invalid"}'))
    end)

    it("compiles the record loop with handles (one trace, no abort, no stitch)", function()
        local m, t, s = alice_on_clock()
        local function loop(n)
            for _ = 1, n do
                if not m:record(t, s, "bytes", 1) then return false end
            end
            return true
        end
        assert_loop_compiles(loop)
        assert.equal(2e4, sealed_total(m, T0 + 60))
    end)

    it("allocates nothing through key handles, with the injected and the system clock",
       function()
        for _, injected in ipairs { true, false } do
            local clock = S.clock(T0 + 1)
            local m = open { clock = injected and clock.fn or nil }
            local k = assert(m:key(TA, "alice", "bytes"))
            local function run(n)
                for _ = 1, n do
                    local ok, err = m:record_key(k, 1)
                    if not ok then error(err) end
                end
            end
            assert_no_garbage(run, N)
            assert.equal(N + 1e4, sealed_total(m, injected and T0 + 60 or os.time() + 120))
        end
    end)

    it("compiles the record_key loop (one trace, no abort, no stitch)", function()
        local m = open()
        local k = assert(m:key(acct.tenant(TA), m:subject("alice"), "requests"))
        local function loop(n)
            for _ = 1, n do
                if not m:record_key(k, 3ULL) then return false end
            end
            return true
        end
        assert_loop_compiles(loop)
        assert.equal(6e4, sealed_total(m, os.time() + 120))
    end)

    it("compiles the record loop with strings and the system clock", function()
        local m = open()
        local function loop(n)
            for _ = 1, n do
                if not m:record(TA, "alice", "requests", 3ULL) then return false end
            end
            return true
        end
        assert_loop_compiles(loop)
        assert.equal(6e4, sealed_total(m, os.time() + 120))
    end)
end)
