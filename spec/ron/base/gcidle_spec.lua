-- ron.base.gcidle: the loop VM's collector set once, and stepped in the loop's idle time
-- (issue 25, the wallet's p99; docs/WALLET.md §8).
local uv = require("luv")
local gcidle = require("ron.base.gcidle")

-- The collector's settings now (each setter answers the previous value).
local function settings()
    local p = collectgarbage("setpause", 200)
    collectgarbage("setpause", p)
    local m = collectgarbage("setstepmul", 200)
    collectgarbage("setstepmul", m)
    return p, m
end

-- ticks timer callbacks 1 ms apart, each making `per` small tables of garbage (kept in a
-- ring of 1000, so each lives about one tick), over a live heap of `live` tables; `busy`:
-- an idle handle runs meanwhile, so the loop never waits. Runs the loop until done.
local function churn(ticks, per, live, busy)
    local keep, ring = {}, {}
    for i = 1, live do keep[i] = { i, i } end
    local t, n, idle = uv.new_timer(), 0, nil
    if busy then
        idle = uv.new_idle()
        idle:start(function() end)
    end
    t:start(1, 1, function()
        for i = 1, per do ring[i % 1000 + 1] = { i, n } end
        n = n + 1
        if n == ticks then
            t:stop()
            t:close()
            if idle then idle:close() end
        end
    end)
    uv.run("default")
    return #keep + #ring
end

describe("ron.base.gcidle", function()
    local pause0, stepmul0, g
    before_each(function()
        pause0, stepmul0 = settings()
        collectgarbage()
    end)
    after_each(function()
        if g then g:stop() end
        g = nil
        collectgarbage("setpause", pause0)
        collectgarbage("setstepmul", stepmul0)
    end)

    it("sets the pause and the step multiplier; no stepper without idle_us", function()
        assert.is_nil(gcidle.configure { pause = 400, stepmul = 50, idle_us = 0 })
        local p, m = settings()
        assert.equal(400, p)
        assert.equal(50, m)
        assert.is_nil(gcidle.configure { pause = 300 })
        p, m = settings()
        assert.equal(300, p)
        assert.equal(50, m) -- (absent: left as it was)
    end)

    it("ends the collector's cycles in the loop's idle time", function()
        g = gcidle.configure { pause = 200, stepmul = 50, idle_us = 1000 }
        churn(1500, 500, 100000, false)
        local st = g.stats
        print(("gcidle: %d cycles, %d ended idle, %d idle steps"):format(st.cycles,
              st.idle_cycles, st.idle_steps))
        assert.is_true(st.cycles >= 2, "cycles " .. st.cycles)
        assert.is_true(st.idle_steps > 0)
        -- many of them (10 of 13 here): the loop waits most of each 1-ms tick, whose garbage
        -- (~40 KB) pays a fraction of a cycle's work at stepmul 50; without the idle steps
        -- none ends there
        assert.is_true(st.idle_cycles * 3 >= st.cycles,
                       ("%d of %d cycles ended idle"):format(st.idle_cycles, st.cycles))
    end)

    it("steps nothing while work is waiting (the poll would not block)", function()
        g = gcidle.configure { pause = 200, stepmul = 50, idle_us = 1000 }
        churn(300, 2000, 100000, true)
        assert.is_true(g.stats.cycles >= 1, "cycles " .. g.stats.cycles)
        assert.equal(0, g.stats.idle_steps)
    end)

    it("starts no cycle before the heap nears the collector's own mark", function()
        local keep = {}
        for i = 1, 100000 do keep[i] = { i, i } end
        collectgarbage("setpause", 1000)
        collectgarbage() -- (a cycle ended at this live heap: the next starts at ten times it)
        g = gcidle.configure { idle_us = 1000 }
        churn(200, 20, 0, false) -- (~200 KB of garbage over a live heap of several MB)
        assert.equal(0, g.stats.idle_steps)
        assert.equal(0, g.stats.cycles)
        assert.equal(100000, #keep)
    end)

    it("counts where cycles ended in /metrics while it runs", function()
        local task = require("ron.base.task")
        assert.is_nil(task.metrics_text():find("ron_lua_gc_cycles_total", 1, true))
        g = gcidle.configure { pause = 200, stepmul = 50, idle_us = 1000 }
        assert.equal(g, gcidle.current)
        churn(600, 500, 100000, false)
        local text = task.metrics_text()
        local idle = tonumber(text:match('ron_lua_gc_cycles_total{ended="idle"} (%d+)'))
        local alloc = tonumber(text:match('ron_lua_gc_cycles_total{ended="allocation"} (%d+)'))
        assert.equal(g.stats.idle_cycles, idle)
        assert.equal(g.stats.cycles - g.stats.idle_cycles, alloc)
        assert.is_true(idle + alloc >= 1)
        g:stop()
        assert.is_nil(gcidle.current)
        assert.is_nil(task.metrics_text():find("ron_lua_gc_cycles_total", 1, true))
        g = nil
    end)

    it("stops: its handle closed, its sentinel inert", function()
        g = gcidle.configure { pause = 200, stepmul = 50, idle_us = 1000 }
        g:stop()
        assert.is_true(g.handle:is_closing())
        local steps = g.stats.idle_steps
        churn(300, 500, 100000, false)
        assert.equal(steps, g.stats.idle_steps)
        assert.equal(0, g.stats.cycles)
        g = nil
    end)
end)
