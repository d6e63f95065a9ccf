-- ron.audit.host (AUD-I-17..20): the host pattern of seed 002 (docs/AUDIT.md, "In the daemon"): the
-- bounded queue and its Gap records under the sink worker, the enqueue and WAL-I/O
-- deadlines, the drain on shutdown, several emitters on one chain, latest_checkpoint.
-- Each case runs as a task on its own scheduler (S.run_task checks that no task is left
-- live and no threadpool request in flight: no task leaks). `audit verify --list` with
-- this build's binary reads the logs back.
local S = require("support")
local host = require("ron.audit.host")
local audit = require("ron.audit")
local offload = require("ron.audit.offload")

local BIN = os.getenv("RA_BIN") or "build/ron-accounting"

local function verify_list(dir, vkey)
    local out, rc = S.run(BIN .. " audit verify --list " ..
                          (vkey and ("--vkey " .. S.shell_quote(vkey) .. " ") or "") ..
                          S.shell_quote(dir))
    local recs = {}
    for line in out:gmatch("[^\n]+") do
        local seq, kind, rest = line:match("^record (%d+) (%S+) (.*)$")
        if seq then recs[#recs + 1] = { seq = tonumber(seq), kind = kind, rest = rest } end
    end
    return rc, recs, out
end

-- The records of a log `audit verify --list` must pass.
local function verified(dir, vkey)
    local rc, recs, out = verify_list(dir, vkey)
    assert.equal(0, rc, out)
    return recs
end

-- Inside a task: every one of seq events is durable within 5 s.
local function durable(task, h, seq)
    return S.eventually(task, function() return h:stats().durable_seq == seq end, 5000)
end

-- Emits n rejects without yielding (no worker can take one meanwhile): how many were
-- refused Busy.
local function flood(h, n)
    local busy = 0
    for i = 1, n do
        local ok, err = h:emit("reject", { tenant = "t", reason = "r" .. i }, 1000 + i)
        if not ok then
            assert.matches("^Busy", err)
            busy = busy + 1
        end
    end
    return busy
end

local function count_kind(recs, kind)
    local n = 0
    for _, r in ipairs(recs) do if r.kind == kind then n = n + 1 end end
    return n
end

-- A checkpoint key pair named name from `audit keygen`: signer and verifier paths.
local function keygen(name)
    local kdir = S.tmpname(".keys")
    os.execute("mkdir -p " .. S.shell_quote(kdir))
    local sk, vk = kdir .. "/signer.key", kdir .. "/verifier.pub"
    local _, krc = S.run(BIN .. " audit keygen " .. name .. " " .. S.shell_quote(sk) .. " " ..
                         S.shell_quote(vk))
    assert.equal(0, krc)
    return sk, vk
end

local function open(dir, extra)
    return assert(host.start(S.merge({ writer_id = "node-1", stream = "daemon", dir = dir,
                                       interval_ms = 5, log = function() end }, extra)))
end

-- A sync whose first call waits at a gate (a channel) before the real one: a stalled disk.
local function gated_sync(task)
    local gate = task.channel(1, "gate")
    local held = false
    return gate, function(lg, deadline_ms, on_late, chunk)
        if held then return offload.audit_sync(lg, deadline_ms, on_late, chunk) end
        held = true
        local _, err = gate:recv(deadline_ms)
        if err == "Timeout" then
            on_late()
            gate:recv()
        end
        return offload.audit_sync(lg, nil, nil, chunk)
    end
end

-- A sync whose first `fails` appends fail as a failed write answers (RAU_EIO, -9).
local function failing_sync(fails)
    return function(lg, deadline_ms, on_late, chunk)
        if chunk and fails > 0 then
            fails = fails - 1
            return -9, 0, 0
        end
        return offload.audit_sync(lg, deadline_ms, on_late, chunk)
    end
end

-- Inside a task: four emitter tasks emit 250 events each into h, with random short sleeps
-- between them (math.random: the case seeds it), all joined.
local function emit_from_four(task, h)
    local emitters = {}
    for e = 1, 4 do
        emitters[e] = task.spawn("emitter-" .. e, function()
            for i = 1, 250 do
                assert(h:emit("reject", { emitter = e, i = i }))
                if math.random(10) == 1 then task.sleep(math.random(0, 2)) end
            end
        end)
    end
    for _, t in ipairs(emitters) do assert(t:join()) end
end

-- Emits the "reject" events i = from .. to (default: from alone) into h, each at seq
-- base + i (base default 0); every one taken.
local function rejects(h, from, to, base)
    for i = from, to or from do assert(h:emit("reject", { i = i }, (base or 0) + i)) end
end

-- S.run_task: body(task, dir), dir a fresh path for the trail. -> dir
local function in_trail(body)
    local dir = S.tmpname(".audit")
    S.run_task(function(task) body(task, dir) end)
    return dir
end

-- Inside a task: a signed checkpoint covers size events within 5 s.
local function checkpointed(task, h, size)
    return S.eventually(task, function()
        local cp = h:latest_checkpoint()
        return cp and cp.size == size
    end, 5000)
end

describe("ron.audit.host (seed 002 host pattern)", function()
    it("AUD-I-17 AUD-I-18: a full queue answers Busy, counts, and the sink worker appends a Gap with the exact count", function()
        print("seed: none (no randomness)")
        local dir = in_trail(function(task, dir)
            local h = open(dir, { queue_cap = 4 })
            local busy = flood(h, 10)
            assert.equal(6, busy)
            assert.equal(6, h:stats().drops.audit_backpressure)
            assert.is_true(durable(task, h, 5))
            assert.matches('audit_drop_total{reason="audit_backpressure"} 6', h:metrics_text(),
                           1, true)
            assert(h:close())
        end)
        local recs = verified(dir)
        assert.equal(5, #recs)
        assert.equal(4, count_kind(recs, "reject"))
        assert.equal("gap", recs[5].kind)
        assert.matches("dropped=6 from_ts_ms=1005 head_seq=0 kinds=\"reject:6\" reason=\"audit_backpressure\" "
                       .. "to_ts_ms=1010",
                       recs[5].rest, 1, true)
    end)

    it("AUD-I-18: a Gap record names what it dropped (kinds: each kind and source, their "
       .. "counts adding up to dropped; past 16 kinds, other)", function()
        print("seed: none (no randomness)")
        local dir = in_trail(function(task, dir)
            local h = open(dir, { queue_cap = 1 })
            assert(h:emit("daemon", { event = "start" }, 1000)) -- (fills the queue)
            local shed = { { "reject", { source = "ingest", status = 429 } },
                           { "reject", { source = "ingest", status = 403 } },
                           { "reject", { source = "http", status = 413 } },
                           { "readiness", { event = "not_ready" } },
                           { "odd", { source = "not one word" } } } -- (named by its kind)
            for i = 1, 20 do shed[#shed + 1] = { "kind" .. i, {} } end
            for i, e in ipairs(shed) do S.fails("^Busy", h:emit(e[1], e[2], 1000 + i)) end
            assert.is_true(durable(task, h, 2))
            assert(h:close())
        end)
        local recs = verified(dir)
        assert.equal("gap", recs[2].kind)
        local kinds = recs[2].rest:match('kinds="([^"]*)"')
        local got, sum = {}, 0
        for w, n in kinds:gmatch("([^:,]+):(%d+)") do
            got[w] = tonumber(n)
            sum = sum + tonumber(n)
        end
        assert.matches("dropped=25 ", recs[2].rest, 1, true)
        assert.equal(25, sum)
        assert.equal(2, got["reject.ingest"])
        assert.equal(1, got["reject.http"])
        assert.equal(1, got.readiness)
        assert.equal(1, got.odd)
        assert.equal(8, got.other) -- 16 kinds named: 4 above and 12 of the 20, then other
        local named = 0
        for _ in pairs(got) do named = named + 1 end
        assert.equal(17, named)
    end)

    it("drain on shutdown: close() appends every queued event, joins the worker, leaves no task", function()
        local dir = in_trail(function(task, dir)
            local h = open(dir, { queue_cap = 1000, interval_ms = 1000 })
            for i = 1, 300 do assert(h:emit("reject", { reason = "x", i = i }, 5000)) end
            assert(h:close(5000))
            assert.matches("^Closed", select(2, h:emit("reject", {}, 1)))
        end)
        local recs = verified(dir)
        assert.equal(300, #recs)
        assert.equal(0, count_kind(recs, "gap"))
    end)

    it("close deadline: what close() could not append is shed as shutdown_deadline, with its Gap", function()
        local dir = in_trail(function(task, dir)
            local h = open(dir, { queue_cap = 100, interval_ms = 1000 })
            rejects(h, 1, 20, 7000)
            assert(h:close(0))
            assert.equal(20, h.lg.drops.shutdown_deadline)
        end)
        local recs = verified(dir)
        assert.equal(1, #recs)
        assert.matches('dropped=20 from_ts_ms=7001 head_seq=0 kinds="reject:20" reason="shutdown_deadline" '
                       .. 'to_ts_ms=7020',
                       recs[1].rest, 1, true)
    end)

    it("WAL I/O deadline: a sync past io_deadline_ms opens the breaker (io_backpressure, counted, Gap)", function()
        local dir = in_trail(function(task, dir)
            local gate, sync = gated_sync(task)
            local h = open(dir, { io_deadline_ms = 30, sync = sync })
            assert(h:emit("reject", { i = 1 }, 100))
            -- the worker takes it and waits on the stalled disk past the deadline
            assert.is_true(S.eventually(task, function() return h:stats().stalled end, 5000))
            assert.equal(1, h.io_timeouts)
            for i = 2, 8 do
                local ok, err = h:emit("reject", { i = i }, 100 + i)
                S.fails("io_backpressure", ok, err)
            end
            assert.matches('audit_io_timeouts_total{op="wal"} 1', h:metrics_text(), 1, true)
            gate:try_send(true) -- the disk answers
            assert.is_true(S.eventually(task, function() return not h:stats().stalled end, 5000))
            assert(h:emit("reject", { i = 9 }, 109))
            assert.is_true(durable(task, h, 3))
            assert(h:close())
        end)
        local recs = verified(dir)
        assert.equal(3, #recs) -- 1, 9 and the gap (9 before or after it: when it came)
        assert.equal(1, count_kind(recs, "gap"))
        local gap = recs[2].kind == "gap" and recs[2] or recs[3]
        assert.matches('dropped=7 from_ts_ms=102 head_seq=1 kinds="reject:7" reason="io_backpressure" '
                       .. 'to_ts_ms=108',
                       gap.rest, 1, true)
    end)

    it("AUD-I-42: a failed log sheds as audit_failed, recovers by itself, ONE Gap with the exact count", function()
        print("seed: none (no randomness)")
        local dir = S.tmpname(".audit")
        local lines = {}
        S.run_task(function(task)
            -- the first two appends fail
            local h = open(dir, { sync = failing_sync(2), recover_min_ms = 5, recover_max_ms = 20,
                                  log = function(line, level)
                                      lines[#lines + 1] = (level or "-") .. " " .. line
                                  end })
            assert(h:emit("reject", { i = 1 }, 1001))
            assert.is_true(S.eventually(task, function() return h:stats().failed ~= nil end,
                                        5000))
            for i = 2, 4 do
                local ok, err = h:emit("reject", { i = i }, 1000 + i)
                S.fails("^Busy: audit event shed %(audit_failed%)", ok, err)
            end
            assert.is_true(S.eventually(task, function()
                local st = h:stats()
                return not st.failed and st.recoveries == 1 and st.durable_seq == 2
            end, 5000))
            assert.matches("audit_recoveries_total 1", h:metrics_text(), 1, true)
            assert.matches('audit_drop_total{reason="audit_failed"} 3', h:metrics_text(), 1, true)
            assert(h:emit("reject", { i = 5 }, 1005)) -- taken again
            assert(h:close())
        end)
        local errors = 0
        for _, l in ipairs(lines) do if l:match("^ERROR ") then errors = errors + 1 end end
        assert.equal(1, errors, table.concat(lines, "\n"))
        assert.matches("recovered after 2 attempt%(s%)", table.concat(lines, "\n"))
        local recs = verified(dir)
        -- record 1 appended on the second attempt, the gap of 2..4, then 5
        assert.equal(3, #recs)
        assert.matches("i=1", recs[1].rest)
        assert.equal("gap", recs[2].kind)
        assert.matches('dropped=3 from_ts_ms=1002 head_seq=1 kinds="reject:3" reason="audit_failed" '
                       .. 'to_ts_ms=1004',
                       recs[2].rest, 1, true)
        assert.matches("i=5", recs[3].rest)
    end)

    it("AUD-I-42 AUD-I-39: a recovered log keeps its configuration (checkpoint_interval_ms)", function()
        -- the reopen runs in the threadpool, whose bodies get at most ron.base.offload.MAX_ARGS
        -- values: the log's open arguments cross as one string (ron.audit.open_spec); ten
        -- values one by one lost the last three (batch_bytes, dedupe_window, the interval)
        print("seed: none (no randomness)")
        local dir = S.tmpname(".audit")
        local sk = keygen("ron-audit/node-1/daemon")
        S.run_task(function(task)
            local h = open(dir, { sync = failing_sync(1), recover_min_ms = 5, recover_max_ms = 20,
                                  key_path = sk, checkpoint_every = 1000,
                                  checkpoint_interval_ms = 20 })
            rejects(h, 1)
            assert.is_true(S.eventually(task, function() return h:stats().recoveries == 1 end,
                                        5000))
            rejects(h, 2, 3)
            -- no count reaches checkpoint_every: only the interval signs these
            assert.is_true(checkpointed(task, h, 3))
            assert(h:close())
        end)
    end)

    it("AUD-I-42: closed while failed (recover_max_ms = 0: no recovery), close says what is lost", function()
        in_trail(function(task, dir)
            local h = open(dir, { sync = function() return -9, 0, 0 end, recover_max_ms = 0 })
            rejects(h, 1)
            assert.is_true(S.eventually(task, function() return h:stats().failed ~= nil end,
                                        5000))
            assert.is_nil(h:emit("reject", { i = 2 }, 2))
            local ok, err = h:close()
            S.fails("2 event%(s%) shed since are not in it", ok, err)
        end)
    end)

    it("AUD-I-39: an idle trail signs a checkpoint of what none covers every checkpoint_interval_ms", function()
        local dir = S.tmpname(".audit")
        local sk = keygen("ron-audit/node-1/daemon")
        S.run_task(function(task)
            local h = open(dir, { key_path = sk, checkpoint_every = 1000,
                                  checkpoint_interval_ms = 20 })
            rejects(h, 1, 3)
            assert.is_true(checkpointed(task, h, 3))
            rejects(h, 4)
            assert.is_true(checkpointed(task, h, 4))
            assert(h:close())
        end)
    end)

    it("enqueue deadline: emit_wait waits for room up to its deadline, then sheds as audit_deadline", function()
        local dir = in_trail(function(task, dir)
            local gate, sync = gated_sync(task)
            local h = open(dir, { queue_cap = 2, io_deadline_ms = 60000, sync = sync })
            rejects(h, 1)
            -- the worker holds event 1 in its (stalled) sync; fill the queue behind it
            assert.is_true(S.eventually(task, function() return h.lg:depth() == 0 end, 5000))
            rejects(h, 2, 3)
            local uv = require("luv")
            local t0 = uv.now()
            local ok, err = h:emit_wait("reject", { i = 4 }, 40)
            local waited = uv.now() - t0
            S.fails("audit_deadline", ok, err)
            assert.is_true(waited >= 35 and waited < 2000, "waited " .. waited .. " ms")
            assert.equal(1, h.lg.drops.audit_deadline)
            -- with room the same call goes through at once
            gate:try_send(true)
            assert.is_true(S.eventually(task, function() return h.lg:depth() == 0 end, 5000))
            assert(h:emit_wait("reject", { i = 5 }, 40))
            assert.is_true(durable(task, h, 5))
            assert(h:close())
        end)
        local recs = verified(dir)
        assert.equal(5, #recs) -- 1, 2, 3, 5 and the gap of event 4
        assert.equal(1, count_kind(recs, "gap"))
    end)

    it("several emitters on one stream make one chain (one writer of the head)", function()
        S.seeded("RON_SEED", 20261129, "seed: ")
        local dir = in_trail(function(task, dir)
            local h = open(dir, { queue_cap = 100000, batch = 64 })
            emit_from_four(task, h)
            assert(h:close())
        end)
        local recs = verified(dir)
        assert.equal(1000, #recs)
        for i, r in ipairs(recs) do assert.equal(i, r.seq) end
    end)

    it("wait_durable waits for a chunk still appending in the pool (taken is not appended)", function()
        -- the sink had taken the last chunk out of the queue while its append was still in
        -- the pool: wait_durable read the head before the chunk was in and returned early
        -- (lua-audit-host, AUD-I-38: durable_seq 957 of 1001 under load)
        print("seed: none (no randomness)")
        in_trail(function(task, dir)
            local gate = false
            local h = open(dir, { batch = 4, sync = function(lg, deadline_ms, on_late, chunk)
                if chunk then
                    while not gate do task.sleep(5) end -- the pool is slow this time
                end
                return offload.audit_sync(lg, deadline_ms, on_late, chunk)
            end })
            rejects(h, 1, 3)
            local done = false
            local w = task.spawn("waiter", function()
                assert(h:wait_durable())
                done = true
            end)
            task.sleep(100) -- the chunk is taken; its append waits at the gate
            assert.is_false(done)
            gate = true
            assert(w:join())
            assert.is_true(done)
            assert.equal(3, h:stats().durable_seq)
            assert(h:close())
        end)
    end)

    it("AUD-I-38: several emitters over 3 chains: each chain gapless and verified, every event once", function()
        S.seeded("RON_SEED", 1795936032, "seed: ")
        local dir = in_trail(function(task, dir)
            local h = open(dir, { queue_cap = 100000, batch = 64, shards = 3 })
            emit_from_four(task, h)
            assert(h:emit_keyed("ledger.event", { event_seq = 1 }, 7))
            assert(h:wait_durable())
            local st = h:stats()
            assert.equal(1001, st.durable_seq)
            assert.equal(3, #st.chains)
            assert(h:close())
        end)
        local seen, total = {}, 0
        for i, sub in ipairs { dir, dir .. "/daemon.1", dir .. "/daemon.2" } do
            local recs = verified(sub)
            assert.is_true(#recs >= 300, "chain " .. i .. ": " .. #recs) -- dealt round-robin
            for j, r in ipairs(recs) do
                assert.equal(j, r.seq) -- gapless
                if r.kind == "reject" then
                    local n = tonumber(r.rest:match("n=(%d+)"))
                    assert.is_nil(seen[n], "event number " .. tostring(n) .. " twice")
                    seen[n] = true
                else
                    assert.equal(1, i) -- emit_keyed: always chain 1
                    assert.equal("ledger.event", r.kind)
                end
            end
            total = total + #recs
        end
        assert.equal(1001, total)
        for n = 1, 1000 do assert.is_true(seen[n], "event number " .. n) end
    end)

    it("AUD-I-38 AUD-I-18: sharded backpressure: each chain's Gap has its exact count", function()
        print("seed: none (no randomness)")
        local dir = S.tmpname(".audit")
        local drops
        S.run_task(function(task)
            local h = open(dir, { queue_cap = 4, shards = 2 })
            local busy = flood(h, 20)
            assert.equal(12, busy) -- 2 chains x 4 queued
            local st = h:stats()
            assert.equal(12, st.drops.audit_backpressure)
            drops = { st.chains[1].drops.audit_backpressure, st.chains[2].drops.audit_backpressure }
            assert.equal(12, drops[1] + drops[2])
            assert.is_true(durable(task, h, 10))
            assert.matches('audit_drop_total{reason="audit_backpressure"} 12', h:metrics_text(),
                           1, true)
            assert(h:close())
        end)
        for i, sub in ipairs { dir, dir .. "/daemon.1" } do
            local recs = verified(sub)
            assert.equal(5, #recs)
            assert.equal(4, count_kind(recs, "reject"))
            assert.equal("gap", recs[5].kind)
            assert.matches("dropped=" .. drops[i] .. " ", recs[5].rest, 1, true)
        end
    end)

    it("AUD-I-38 AUD-I-20: a sharded close keeps ONE deadline: each chain's rest is its own Gap", function()
        local dir = in_trail(function(task, dir)
            local h = open(dir, { queue_cap = 100, interval_ms = 1000, shards = 2 })
            rejects(h, 1, 21, 7000)
            assert(h:close(0))
            assert.equal(21, h:stats().drops.shutdown_deadline)
            assert.matches("^Closed", select(2, h:emit("reject", {}, 1)))
        end)
        for sub, want in pairs { [dir] = 'dropped=11 from_ts_ms=7001 head_seq=0 kinds="reject:11" '
                                          .. 'reason="shutdown_deadline" '
                                          .. 'to_ts_ms=7021',
                                 [dir .. "/daemon.1"] = 'dropped=10 from_ts_ms=7002 '
                                          .. 'head_seq=0 kinds="reject:10" reason="shutdown_deadline" to_ts_ms=7020' } do
            local recs = verified(sub)
            assert.equal(1, #recs)
            assert.matches(want, recs[1].rest, 1, true)
        end
    end)

    it("AUD-I-38: a sharded host signs each chain with its own key (key_path.<i>)", function()
        local dir = S.tmpname(".audit")
        local kdir = S.tmpname(".keys")
        os.execute("mkdir -p " .. S.shell_quote(kdir))
        local sk = kdir .. "/signer.key"
        for i, name in ipairs { "daemon", "daemon.1" } do
            local sfx = i == 1 and "" or ".1"
            local _, krc = S.run(BIN .. " audit keygen ron-audit/node-1/" .. name .. " " ..
                                 S.shell_quote(sk .. sfx) .. " " ..
                                 S.shell_quote(kdir .. "/verifier.pub" .. sfx))
            assert.equal(0, krc)
        end
        local cps
        S.run_task(function(task)
            local h = open(dir, { key_path = sk, checkpoint_every = 10, batch = 5, shards = 2 })
            rejects(h, 1, 40)
            assert.is_true(durable(task, h, 40))
            cps = h:checkpoints()
            assert(h:close())
        end)
        assert.equal("ron-audit/node-1/daemon", cps[1].origin)
        assert.equal("ron-audit/node-1/daemon.1", cps[2].origin)
        local recs = verified(dir, kdir .. "/verifier.pub")
        assert.equal(20, #recs)
        assert.equal(20, #verified(dir .. "/daemon.1", kdir .. "/verifier.pub.1"))
        -- chain 2's checkpoints do not verify with chain 1's key (AUD-I-10)
        local rc = verify_list(dir .. "/daemon.1", kdir .. "/verifier.pub")
        assert.are_not.equal(0, rc)
    end)

    it("latest_checkpoint: origin, size and root of the last signed checkpoint, also after reopen", function()
        local dir = S.tmpname(".audit")
        local sk, vk = keygen("ron-audit/node-1/daemon")
        local cp
        S.run_task(function(task)
            local h = open(dir, { key_path = sk, checkpoint_every = 10, batch = 5 })
            assert.is_nil(h:latest_checkpoint())
            rejects(h, 1, 25)
            assert.is_true(durable(task, h, 25))
            cp = assert(h:latest_checkpoint())
            assert(h:close())
        end)
        assert.equal("ron-audit/node-1/daemon", cp.origin)
        assert.is_true(cp.size >= 20 and cp.size <= 25, tostring(cp.size))
        assert.matches("^%x+$", cp.root)
        assert.equal(64, #cp.root)
        local f = assert(io.open(string.format("%s/cp-%020d.note", dir, cp.size)))
        assert.equal(cp.note, f:read("*a"))
        f:close()
        -- AUD-I-39: close() signed the head (25), so nothing is left unpinned at rest
        local lg = assert(audit.open { writer_id = "node-1", stream = "daemon", dir = dir })
        local again = assert(lg:latest_checkpoint())
        assert.equal(25, again.size)
        assert.equal(cp.origin, again.origin)
        lg:close()
        local recs = verified(dir, vk)
        assert.equal(25, #recs)
    end)
end)
