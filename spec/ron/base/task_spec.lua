-- ron.base.task: coroutines on the libuv loop. Run in the host (ctest lua-task-host:
-- `ron-accounting run spec/run-busted.lua spec/ron/base/task_spec.lua`), where luv
-- is bound to the host's loop; plain busted under LuaJIT runs it too, on luv's own loop.
--
-- Each case takes a new scheduler (task.new(): an independent runtime with its own shutdown
-- token, tasks and metrics), runs its body as a task, drives the loop until nothing is
-- left, then requires that the body ended and that no task is live (no task leak).
local S = require("support")
local uv = require("luv")

local MOD = "ron.base.task"

local function fresh()
    return require(MOD).new()
end

-- Runs body(task) as the task "spec" of a new scheduler to the end of the loop (no task
-- left live); returns the scheduler.
local run = S.run_task

-- S.run_task(body), body(task, ch) given a channel of 4 named "q".
local function with_queue(body)
    return run(function(task) return body(task, task.channel(4, "q")) end)
end

local function metric(task, line)
    return task.metrics_text():find(line, 1, true) ~= nil
end

-- S.run_task(body), after which the task metrics show line.
local function ran_counting(line, body)
    assert.is_true(metric(run(body), line))
end

describe("ron.base.task", function()
    it("spawns join-tracked tasks and hands their results to join", function()
        local task = run(function(task)
            local a = task.spawn("adder-a", function(x, y) return x + y, "two" end, 2, 3)
            local b = task.spawn("adder-b", function() end)
            assert.equal(3, task.live()) -- spec, a, b
            local ok, sum, two = a:join()
            assert.same({ true, 5, "two" }, { ok, sum, two })
            assert.same({ true }, { b:join() })
            assert.same({ true, 5, "two" }, { a:join() }) -- again, after the end
            assert.equal(1, task.live())
        end)
        assert.is_true(metric(task, 'ron_tasks_spawned_total{kind="adder"} 2'))
        assert.is_true(metric(task, 'ron_tasks_spawned_total{kind="spec"} 1'))
        assert.is_true(metric(task, "ron_tasks_live 0"))
        local heap = tonumber(task.metrics_text():match("\nron_lua_heap_bytes (%d+)\n"))
        assert.is_true(heap > 0 and heap <= collectgarbage("count") * 1024 + 1e6)
    end)

    it("a loop that never goes idle reuses the ready queue's slots (I-7)", function()
        -- Two tasks in ping-pong: each turn ends with the other one queued, so the queue is
        -- never empty at the end of a turn. The Lua heap after 20k rounds and after 120k
        -- must be the same (it grew by ~1.5 MiB before the queue moved its survivors down).
        run(function(task)
            local ping, pong = task.channel(1, "ping"), task.channel(1, "pong")
            local ROUNDS = 120000
            local b = task.spawn("pong", function()
                for _ = 1, ROUNDS do
                    assert(ping:recv())
                    assert(pong:try_send(true))
                end
            end)
            local heap
            for i = 1, ROUNDS do
                assert(ping:try_send(true))
                assert(pong:recv())
                if i == 20000 then
                    collectgarbage("collect")
                    heap = collectgarbage("count")
                end
            end
            assert(b:join())
            collectgarbage("collect")
            local grew = collectgarbage("count") - heap
            assert(grew < 256, ("the Lua heap grew by %.0f KiB over 100k busy turns"):format(grew))
        end)
    end)

    it("wakes sleepers in the order of their deadlines", function()
        run(function(task)
            local order = {}
            local hs = {}
            for _, ms in ipairs({ 30, 10, 20, 0 }) do
                hs[#hs + 1] = task.spawn("sleeper", function()
                    assert.is_true(task.sleep(ms))
                    order[#order + 1] = ms
                end)
            end
            local t0 = uv.now()
            for _, h in ipairs(hs) do assert(h:join()) end
            assert.same({ 0, 10, 20, 30 }, order)
            assert.is_true(uv.now() - t0 >= 30)
        end)
    end)

    it("try_send answers Busy on a full channel and counts the drop", function()
        local task = run(function(task)
            local ch = task.channel(2, "tiny")
            assert.equal(2, ch:cap())
            assert.is_true(ch:try_send("a"))
            assert.is_true(ch:try_send("b"))
            assert.same({ nil, "Busy" }, { ch:try_send("c") })
            assert.same({ nil, "Busy" }, { ch:try_send("d") })
            assert.equal(2, ch:depth())
            assert.is_true(metric(task, 'ron_queue_depth{queue="tiny"} 2'))
            assert.equal("a", ch:recv())
            assert.is_true(ch:try_send("e")) -- room again
            assert.equal("b", ch:recv())
            assert.equal("e", ch:recv())
            assert.equal(0, ch:depth())
        end)
        assert.is_true(metric(task, 'ron_queue_dropped_total{queue="tiny",reason="busy"} 2'))
        assert.is_true(metric(task, 'ron_queue_depth{queue="tiny"} 0'))
    end)

    it("recv waits for a sender, and times out when none comes", function()
        with_queue(function(task, ch)
            local t0 = uv.now()
            assert.same({ nil, "Timeout" }, { ch:recv(25) })
            assert.is_true(uv.now() - t0 >= 25)
            task.spawn("sender", function()
                task.sleep(10)
                assert.is_true(ch:try_send(42))
            end)
            assert.equal(42, ch:recv(1000))
            -- a receiver that timed out left no trace: the next value is not lost to it
            assert.is_true(ch:try_send(7))
            assert.equal(7, ch:recv(0))
        end)
    end)

    it("select takes the first channel that holds a value", function()
        run(function(task)
            local a, b = task.channel(1, "a"), task.channel(1, "b")
            task.spawn("sender", function()
                task.sleep(5)
                b:try_send("from b")
            end)
            local v, ch = task.select({ a, b }, 1000)
            assert.equal("from b", v)
            assert.equal(b, ch)
            assert.same({ nil, "Timeout" }, { task.select({ a, b }, 5) })
            a:close()
            b:close()
            assert.same({ nil, "Closed" }, { task.select({ a, b }) })
        end)
    end)

    it("close wakes receivers with Closed once the buffer is empty", function()
        with_queue(function(task, ch)
            local got = {}
            local rx = task.spawn("receiver", function()
                while true do
                    local v, err = ch:recv()
                    if v == nil then return err end
                    got[#got + 1] = v
                end
            end)
            ch:try_send(1)
            ch:try_send(2)
            assert.is_true(ch:close())
            assert.same({ nil, "Closed" }, { ch:try_send(3) })
            assert.same({ true, "Closed" }, { rx:join() })
            assert.same({ 1, 2 }, got)
        end)
    end)

    it("recv_through_shutdown waits through shutdown for its answer, the loop asleep", function()
        run(function(task)
            local ch, other = task.channel(1, "answer"), task.channel(1, "other")
            local before = task.spawn("w-before", function() return ch:recv_through_shutdown() end)
            task.sleep(5) -- blocked before the token
            assert.is_true(task.shutdown("test"))
            local after = task.spawn("w-after", function() return other:recv_through_shutdown() end)
            -- a wait that ignored Canceled by calling recv again would turn the loop without
            -- sleeping; this one leaves the loop idle until the answers come
            local turns, check = 0, uv.new_check()
            check:start(function() turns = turns + 1 end)
            local timer = uv.new_timer()
            timer:start(50, 0, function()
                timer:close()
                ch:try_send("answer")
                other:try_send("other")
            end)
            assert.same({ true, "answer" }, { before:join() })
            assert.same({ true, "other" }, { after:join() })
            check:stop()
            check:close()
            assert.is_true(turns < 20, "the loop turned " .. turns .. " times while waiting")
            -- Timeout and Closed still end it
            assert.same({ nil, "Timeout" }, { ch:recv_through_shutdown(10) })
            ch:close()
            assert.same({ nil, "Closed" }, { ch:recv_through_shutdown() })
        end)
    end)

    it("shutdown wakes every waiter with Canceled, once, after the hooks", function()
        with_queue(function(task, ch)
            local seen = {}
            local hs = {
                task.spawn("w-sleep", function() return task.sleep(60000) end),
                task.spawn("w-recv", function() return ch:recv() end),
                task.spawn("w-recv-timeout", function() return ch:recv(60000) end),
                task.spawn("w-select", function() return task.select({ ch }, 60000) end),
            }
            local hooked = {}
            task.on_shutdown(function(reason) hooked[#hooked + 1] = reason end)
            task.sleep(5) -- every waiter is blocked now
            local t0 = uv.now()
            assert.is_true(task.shutdown("test"))
            assert.is_false(task.shutdown("again"))
            assert.equal("test", task.shutdown_reason())
            assert.same({ "test" }, hooked)
            for _, h in ipairs(hs) do
                -- join itself is not canceled: it waits for the task, which was
                local ok, v, err = h:join()
                assert.is_true(ok)
                seen[#seen + 1] = tostring(v) .. " " .. tostring(err)
            end
            assert.same({ "nil Canceled", "nil Canceled", "nil Canceled", "nil Canceled" }, seen)
            assert.is_true(uv.now() - t0 < 1000)
            -- after the token: a wait returns Canceled at once, a buffered value still comes
            assert.same({ nil, "Canceled" }, { task.sleep(60000) })
            ch:try_send("late")
            assert.equal("late", ch:recv())
            assert.same({ nil, "Canceled" }, { ch:recv(60000) })
            local late = {}
            task.on_shutdown(function(reason) late[#late + 1] = reason end)
            assert.same({ "test" }, late) -- a late hook runs at once
        end)
    end)

    it("drain returns once every task has finished within the deadline", function()
        local task = run(function(task)
            local ch = task.channel(8, "work")
            for i = 1, 3 do ch:try_send(i) end
            local done = 0
            for i = 1, 2 do
                task.spawn("worker-" .. i, function()
                    while true do
                        local v, err = ch:recv()
                        if v == nil then
                            assert.equal("Canceled", err)
                            return
                        end
                        task.sleep(5) -- "in-flight work"; after shutdown: Canceled, at once
                        done = done + v
                    end
                end)
            end
            task.sleep(1)
            task.shutdown("drain test")
            local res = task.drain(2000)
            assert.equal(0, res.aborted)
            assert.equal(2, res.finished)
            assert.is_true(res.elapsed_ms < 2000)
            assert.equal(6, done) -- the buffered work was drained, none lost
            assert.equal(0, ch:depth())
        end)
        assert.is_false(metric(task, "ron_tasks_aborted_total{"))
    end)

    it("drain aborts and counts the stragglers at the deadline", function()
        local task = run(function(task)
            local turns = 0
            local stubborn = task.spawn("stubborn-1", function()
                while true do -- ignores Canceled
                    task.sleep(5)
                    turns = turns + 1
                end
            end)
            local polite = task.spawn("polite", function() return task.sleep(60000) end)
            task.sleep(1)
            task.shutdown("abort test")
            local t0 = uv.now()
            local res = task.drain(50)
            assert.is_true(uv.now() - t0 >= 50)
            assert.equal(1, res.aborted)
            assert.equal(1, res.finished)
            assert.same({ stubborn = 1 }, res.aborted_kinds)
            assert.equal("finished=1 aborted=1 (stubborn=1) elapsed_ms=" .. res.elapsed_ms,
                         task.describe_drain(res))
            assert.same({ nil, "Aborted" }, { stubborn:join() })
            assert.same({ true, nil, "Canceled" }, { polite:join() })
            local frozen = turns
            task.sleep(0) -- Canceled, after one turn of the loop
            assert.equal(frozen, turns) -- never resumed again
            assert.equal(1, task.live()) -- only the spec itself
        end)
        assert.is_true(metric(task, 'ron_tasks_aborted_total{kind="stubborn"} 1'))
    end)

    it("reports a failed task: logged, counted, handed to join", function()
        ran_counting('ron_tasks_failed_total{kind="faulty"} 1', function(task)
            local h = task.spawn("faulty-1", function() error("boom") end)
            task.sleep(1)
            assert.equal("failed", h.status)
            assert.equal(1, task.unjoined_failures()) -- the host would exit 1 now
            local ok, err = h:join()
            assert.is_nil(ok)
            assert.truthy(err:find("^Failed: .*boom"))
            assert.equal(0, task.unjoined_failures()) -- the join saw it
        end)
    end)

    it("with_timeout returns the results, or Timeout and aborts the work", function()
        ran_counting('ron_tasks_aborted_total{kind="with_timeout"} 1', function(task)
            assert.same({ true, 3 }, { task.with_timeout(1000, function(x) return x + 1 end, 2) })
            assert.same({ nil, "Timeout" }, { task.with_timeout(10, task.sleep, 60000) })
            local ok, err = task.with_timeout(1000, function() error("inner") end)
            assert.is_nil(ok)
            assert.truthy(err:find("inner"))
        end)
    end)

    it("join with a timeout gives up without touching the task", function()
        run(function(task)
            local h = task.spawn("slow", function() task.sleep(30) return "done" end)
            assert.same({ nil, "Timeout" }, { h:join(5) })
            assert.same({ true, "done" }, { h:join() })
        end)
    end)

    it("a wait that ends without a value leaves no waiter on its channels", function()
        run(function(task)
            local a, b = task.channel(1, "a"), task.channel(1, "b")
            -- recv and select time out: each waiter leaves the receiver lists
            assert.same({ nil, "Timeout" }, { a:recv(5) })
            assert.same({ nil, "Timeout" }, { task.select({ a, b }, 5) })
            assert.equal(0, #a.receivers)
            assert.equal(0, #b.receivers)
            -- a task aborted in recv and one in select leave them too
            local r1 = task.spawn("blocked-recv", function() return a:recv() end)
            local r2 = task.spawn("blocked-select", function() return task.select({ a, b }) end)
            task.sleep(5)
            assert.equal(2, #a.receivers)
            assert.equal(1, #b.receivers)
            assert.is_true(r1:abort())
            assert.is_true(r2:abort())
            assert.equal(0, #a.receivers)
            assert.equal(0, #b.receivers)
            -- so the next value is buffered for the next receiver, not handed to a dead one
            assert.is_true(a:try_send("v"))
            assert.equal(1, a:depth())
            assert.equal("v", a:recv())
            -- a woken receiver gets exactly the value; a joiner gets every result
            local r3 = task.spawn("recv", function() return a:recv() end)
            local r4 = task.spawn("many", function() return 1, nil, 3, "four" end)
            task.sleep(1)
            assert.is_true(a:try_send("w"))
            assert.same({ true, "w" }, { r3:join() })
            local res = { r4:join() }
            assert.equal(5, select("#", unpack(res, 1, 5)))
            assert.same({ true, 1, nil, 3, "four" }, res)
        end)
    end)

    it("raises on misuse", function()
        local task = fresh()
        assert.has_error(function() task.sleep(1) end,
                         "sleep: called outside a task (use task.spawn)")
        assert.has_error(function() task.spawn("", function() end) end)
        assert.has_error(function() task.spawn("x", 1) end)
        assert.has_error(function() task.channel(0) end)
        assert.has_error(function() task.channel(1.5) end)
        assert.has_error(function() task.channel(task.MAX_CAP + 1) end)
        local ch = task.channel(1)
        assert.has_error(function() ch:try_send(nil) end, "try_send: value must not be nil")
        assert.has_error(function() ch:recv(-1) end)
        assert.has_error(function() task.select({}) end)
        assert.has_error(function() task.select({ {} }) end)
        assert.equal(0, task.live())
    end)
end)
