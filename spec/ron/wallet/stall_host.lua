-- ron.wallet.service on a ledger store that really stalls (ctest lua-wallet-pg-stall-host;
-- WLT-8, issue 17 "ledger stall chaos"). Not a *_spec.lua file: lua-wallet-host (the whole
-- spec/ron/wallet directory) does not run it; cmake/wallet.cmake names it.
--
-- PostgreSQL (tests/pg/harness.lua): the wallet on the postgres store, the server's
-- processes SIGSTOPped (pg-harness.sh freeze) while transfers are sent: every POST answers
-- 503 problem+json with Retry-After (ledger_timeout, then ledger_unavailable once the
-- breaker opens), /readyz flips to 503, GET balance stays 200 from the cache with a growing
-- X-Staleness-Ms; SIGCONT (thaw): /readyz is 200 again, every request sent again with its
-- Idempotency-Key and nonce ends 201 exactly once (balances exact, replays byte-identical).
--
-- SQLite: the same with another connection holding BEGIN EXCLUSIVE on the wallet's file
-- (the sqlite3 shell, its stdin a pipe: the lock is released when the test says so).
--
-- And the two engine races these found (LED-32), deterministic: a saga held between its
-- inputs' deactivation and its outputs' insertion while another debit resolves.
local S = require("support")

if not S.needs_host("ron.wallet.service stalls", "lua-wallet-pg-stall-host") then return end

local uv = require("luv")
local cjson = require("cjson.safe")
local acct = require("ron.accounting")
local store_mod = require("ron.ledger.store")
local L = require("ron.ledger.ledger")

local F = dofile(S.root .. "spec/ron/wallet/fixture.lua")

local OP, TA, A, B = F.OP, F.TA, F.A, F.B

print("wallet stall_host: math.randomseed(17)")
math.randomseed(17)

local post, get = S.http_post, S.http_get

local function transfer(amount, nonce) return F.transfer(A, B, amount, nonce) end

-- The wallet on store s, on the daemon's HTTP server. -> ctx { port, w, led, close }
local function open(task, s, wcfg)
    local ctx = F.start(task, s, S.merge({ log = function(line) print("wallet: " .. line) end },
                                         wcfg), { node = "stall", ready_ms = 10000 })
    function ctx.close()
        if ctx.closed then return end
        ctx.closed = true
        ctx.w:stop()
        assert(ctx.w:wait(20000), "the wallet did not drain")
        ctx.free()
    end
    return ctx
end

-- The chaos case, whatever the store: stall() stops the ledger, resume() lets it go.
-- writes_only: the stall stops writes and lets reads through (SQLite's write lock in WAL
-- mode): the feed may then reach the head between two reads, so the cache's staleness
-- need not grow (it is fresh, not wrong); seq and balance still may not move.
local function stall_case(task, ctx, stall, resume, n, writes_only)
    local port, w = ctx.port, ctx.w
    for _, id in ipairs { A, B } do
        local st, _, body = post(task, port, "/v1/accounts", OP, '{"account":"' .. id .. '"}')
        assert.equal(200, st, body)
    end
    -- (under load the setup commit may pass the 300 ms commit timeout itself: the same key
    -- asks again until its one outcome is there)
    local st, h, body
    assert(S.eventually(task, function()
        st, h, body = post(task, port, "/v1/issue", OP,
            '{"to":"' .. A .. '","asset":"USD","amount":1000,"nonce":1}', "i1")
        return st == 201
    end, 10000), "the setup issue: " .. tostring(st) .. " " .. tostring(body))
    local seq = cjson.decode(body).event_seq
    assert(S.eventually(task, function() return w.cache.seq >= seq end, 10000))
    assert(S.eventually(task, function()
        local _
        st, _, body = get(task, port, "/v1/accounts/" .. A .. "/balance?asset=USD", TA)
        return w.cache:get(w.tokens[acct.b3hex(TA)].account, "USD") ~= nil
    end, 10000))
    assert.equal(1000, cjson.decode(body).balance)
    assert(S.eventually(task, function() return (get(task, port, "/readyz")) == 200 end, 10000))

    stall()
    local t0 = uv.now()
    -- n transfers at once while the ledger is stopped: each answers 503, nothing decided
    local first, hs = {}, {}
    for i = 1, n do
        hs[i] = task.spawn("client", function()
            local s1, h1, b1 = post(task, port, "/v1/transfer", TA, transfer(10, 100 + i),
                                    "s" .. i)
            first[i] = { st = s1, h = h1, body = b1 }
            return true
        end)
    end
    for i = 1, n do assert(hs[i]:join(30000)) end
    local codes = {}
    for i = 1, n do
        local f = first[i]
        assert.equal(503, f.st, f.body)
        assert.equal("application/problem+json", f.h["content-type"])
        assert.truthy(f.h["retry-after"], "503 without Retry-After")
        local code = f.body:match('"code":"([%w_]+)"')
        assert.truthy(code == "ledger_timeout" or code == "ledger_unavailable", f.body)
        codes[code] = (codes[code] or 0) + 1
    end
    assert(S.eventually(task, function() return (get(task, port, "/readyz")) == 503 end, 10000),
           "readyz did not flip")
    local _, _, rbody = get(task, port, "/readyz")
    print(string.format("stall: readyz 503 after %d ms: %s", uv.now() - t0,
                        tostring(rbody):gsub("\n", " ")))
    -- a POST during the stall: 503 problem+json with Retry-After, fast (the breaker or the
    -- commit timeout answers, not the stalled store)
    st, h, body = post(task, port, "/v1/transfer", TA, transfer(10, 100 + n + 1), "late")
    assert.equal(503, st, body)
    assert.equal("application/problem+json", h["content-type"])
    assert.truthy(h["retry-after"])
    -- GET balance: 200 from the cache, its staleness growing while the ledger is stopped
    st, h, body = get(task, port, "/v1/accounts/" .. A .. "/balance?asset=USD", TA)
    assert.equal(200, st, body)
    assert.equal(1000, cjson.decode(body).balance)
    local s1 = tonumber(h["x-staleness-ms"])
    local seq1 = tonumber(h["x-ledger-seq"])
    task.sleep(300)
    st, h, body = get(task, port, "/v1/accounts/" .. A .. "/balance?asset=USD", TA)
    assert.equal(200, st, body)
    local s2 = tonumber(h["x-staleness-ms"])
    assert.is_true(s2 > s1 or writes_only, string.format("staleness %d then %d", s1, s2))
    assert.equal(seq1, tonumber(h["x-ledger-seq"]))
    assert.equal(s2, cjson.decode(body).staleness_ms)
    print(string.format("stall: posts %s; staleness %d ms then %d ms (ledger seq %d)",
                        cjson.encode(codes), s1, s2, seq1))

    resume()
    local t1 = uv.now()
    assert(S.eventually(task, function() return (get(task, port, "/readyz")) == 200 end, 30000),
           "readyz did not come back")
    print(string.format("stall: ready again %d ms after the resume", uv.now() - t1))
    -- every request sent again as it was (the late one too) until it has its outcome:
    -- 201, once (409 in_flight / 503 mean "not yet": the same request again later)
    local final = {}
    local function settle(key, b)
        local t = uv.now() + 30000
        while uv.now() < t do
            local s3, h3, b3 = post(task, port, "/v1/transfer", TA, b, key)
            if s3 == 201 then return s3, h3, b3 end
            assert.truthy(s3 == 409 or s3 == 503, tostring(s3) .. " " .. tostring(b3))
            task.sleep(tonumber(h3["retry-after"] or 1) * 100)
        end
        error("request " .. key .. " never settled")
    end
    for i = 1, n do final[i] = { settle("s" .. i, transfer(10, 100 + i)) } end
    final[n + 1] = { settle("late", transfer(10, 100 + n + 1)) }
    for i = 1, n + 1 do
        local key = i <= n and ("s" .. i) or "late"
        local s4, h4, b4 = post(task, port, "/v1/transfer", TA, transfer(10, 100 + i), key)
        assert.equal(201, s4)
        assert.equal(final[i][3], b4)
        assert.equal("true", h4["idempotent-replayed"])
    end
    -- exactly once: n + 1 transfers of 10, each committed once
    local rseq = 0
    for i = 1, n + 1 do rseq = math.max(rseq, cjson.decode(final[i][3]).event_seq) end
    st, _, body = get(task, port, "/v1/accounts/" .. A .. "/balance?asset=USD&min_seq=" .. rseq,
                      OP)
    assert.equal(200, st, body)
    assert.equal(1000 - 10 * (n + 1), cjson.decode(body).balance)
    st, _, body = get(task, port, "/v1/accounts/" .. B .. "/balance?asset=USD&min_seq=" .. rseq,
                      OP)
    assert.equal(200, st, body)
    assert.equal(10 * (n + 1), cjson.decode(body).balance)
    -- and in the ledger itself (not the cache): one transfer per key
    local hist = assert(ctx.led:history(w.tokens[acct.b3hex(TA)].account, { limit = 100 }))
    assert.equal(n + 2, #hist) -- the issue and n + 1 transfers
    assert(S.eventually(task, function() return next(w.inflight) == nil end, 10000))
    local stats = w:stats()
    local by_code = {}
    for c, k in pairs(stats.requests) do by_code[#by_code + 1] = c .. "=" .. k end
    table.sort(by_code)
    print(string.format("stall: commit timeouts %d, retries %d, breaker opens %d; answers %s",
                        stats.io_timeouts.commit, stats.backoff_retries,
                        w.breaker.opens_total, table.concat(by_code, " ")))
    assert.is_true(stats.io_timeouts.commit >= 1)
end

local WCFG = { commit_timeout_ms = 300, stall_ms = 300, breaker_threshold = 3,
               breaker_open_ms = 1000, retries = 1, workers = 4 }

S.describe_pg("ron.wallet.service: the PostgreSQL server SIGSTOPped (WLT-8)", function(pg)
    it("readyz flips, POST 503, GET 200 cached and staler; SIGCONT: exactly once", function()
        local frozen = false
        local ok, err = pcall(S.run_task, function(task)
            local s = assert(store_mod.open { backend = "postgres",
                conninfo = pg.cluster.conninfo, schema = "wallet_stall", connections = 4,
                connect_timeout_ms = 2000, query_timeout_ms = 1500 })
            local ctx = open(task, s, WCFG)
            local ok2, err2 = pcall(stall_case, task, ctx,
                function() pg.cluster:freeze() frozen = true end,
                function() pg.cluster:thaw() frozen = false end, 8)
            if frozen then pg.cluster:thaw() end
            ctx.close()
            if not ok2 then error(err2, 0) end
        end)
        if frozen then pg.cluster:thaw() end
        if not ok then error(err, 0) end
    end)
end)

describe("ron.wallet.service: SQLite locked by another connection (WLT-8)", function()
    it("readyz flips, POST 503, GET 200 cached and staler; unlocked: exactly once", function()
        local path = S.tmpname(".db")
        S.run_task(function(task)
            local s = assert(store_mod.open { backend = "sqlite", path = path, offload = true,
                                              busy_timeout_ms = 200 })
            local ctx = open(task, s, WCFG)
            local locker
            local ok2, err2 = pcall(stall_case, task, ctx, function()
                -- the sqlite3 shell holds the write lock until its stdin closes
                local stdin, stdout = uv.new_pipe(false), uv.new_pipe(false)
                local exited, out = false, {}
                local h = uv.spawn("sqlite3", { args = { path }, stdio = { stdin, stdout, 2 } },
                                   function() exited = true end)
                assert(h, "sqlite3 could not be started")
                stdout:read_start(function(_, data) if data then out[#out + 1] = data end end)
                stdin:write("PRAGMA busy_timeout = 5000;\nBEGIN EXCLUSIVE;\nSELECT 'locked';\n")
                locker = { stdin = stdin, stdout = stdout, h = h,
                           exited = function() return exited end }
                -- until the shell holds the lock (it printed after BEGIN EXCLUSIVE)
                assert(S.eventually(task, function()
                    return table.concat(out):find("locked", 1, true) ~= nil
                end, 10000), "the sqlite3 shell did not take the lock")
            end, function()
                locker.stdin:write("ROLLBACK;\n.quit\n")
                locker.stdin:shutdown()
                assert(S.eventually(task, locker.exited, 10000))
                locker.stdin:close()
                locker.stdout:close()
                locker.h:close()
                locker = nil
            end, 8, true)
            if locker then
                locker.stdin:close()
                locker.stdout:close()
                locker.h:kill("sigterm")
                locker.h:close()
            end
            ctx.close()
            if not ok2 then error(err2, 0) end
        end)
    end)
end)

-- The engine races the stall and bench-wallet found (LED-32), made deterministic: a saga
-- holding the payer's posting while another debit of the same account resolves. Before the
-- fixes the second debit was stored as InsufficientFunds (its nonce burnt, the client told
-- "no money") although the money was only in flight. (Before phases, LED-67, the saga was
-- held between its inputs' deactivation and its outputs' insertion; that state no longer
-- exists: the saga is held before its finalize, or a debit's view is held before its
-- reservation while the other saga commits.)
describe("ron.ledger engine: a debit racing a saga in flight (LED-32)", function()
    local USD = { code = "USD", scale = 2 }
    local EXT, PA, PB = string.rep("\1", 16), string.rep("\2", 16), string.rep("\3", 16)

    -- store calls wait while gate[name] is set (once; a function: for the call whose
    -- arguments it accepts); gate.at[name] counts the calls that waited
    local function gated(real, T, gate)
        gate.at = {}
        return setmetatable({}, { __index = function(_, k)
            local f = real[k]
            if type(f) ~= "function" then return f end
            return function(_, ...)
                local g = gate[k]
                if g and (type(g) ~= "function" or g(...)) then
                    gate.at[k] = (gate.at[k] or 0) + 1
                    gate[k] = false
                    local hold = k .. "_held"
                    gate[hold] = true
                    while gate[hold] do T.sleep(2) end
                end
                return f(real, ...)
            end
        end })
    end
    -- a phase holding op name
    local function phase_with(name)
        return function(ops)
            for _, op in ipairs(ops) do if op[1] == name then return true end end
            return false
        end
    end
    local function fixture(T)
        local s = assert(store_mod.open { backend = "sqlite", path = S.tmpname(".db"),
                                          offload = true })
        local gate = {}
        -- (the saga's phases: the cases stop one between its reserve and its finalize;
        -- the one-transaction commit, LED-72, has no such point)
        local led = L.new { store = gated(s, T, gate), book = "race", node = "race",
                            pause = function(n) T.sleep(n) end, one_tx = false }
        assert(led:create_account { id = EXT, policy = "uncapped" })
        assert(led:create_account { id = PA, policy = "no_overdraft" })
        assert(led:create_account { id = PB, policy = "no_overdraft" })
        assert(led:commit { intent = "fund", movements = {
            { from = EXT, to = PA, asset = USD, amount = 1000 } } })
        return s, led, gate
    end
    -- body(T, s, led, gate) in a task; whatever happens every gate opens (a failed case
    -- must not leave a saga waiting: the loop would never end)
    local function race(body)
        S.run_task(function(T)
            local s, led, gate = fixture(T)
            local ok, err = pcall(body, T, s, led, gate)
            for k in pairs(gate) do if k ~= "at" then gate[k] = false end end
            T.sleep(50)
            for _ = 1, 200 do
                if next(led.inflight) == nil then break end
                T.sleep(10)
            end
            s:close()
            if not ok then error(err, 0) end
        end)
    end
    local function debit(led, intent)
        return led:commit { intent = intent, movements = {
            { from = PA, to = PB, asset = USD, amount = 10 } } }
    end

    it("the short-account path: Unavailable while another saga holds the payer's posting",
       function()
        race(function(T, s, led, gate)
            gate.apply = phase_with("deactivate_postings")
            local hx = T.spawn("saga_x", function() return debit(led, "x") end)
            assert(S.eventually(T, function() return gate.apply_held end, 10000))
            -- x holds the 1000 posting (reserved), its finalize not sent
            local r, err, code = debit(led, "y")
            assert.is_nil(r)
            assert.equal(L.ERR.Unavailable, code, tostring(err))
            assert.is_nil(s:get_intent("y"), "a race stored as an outcome")
            assert.equal(1000, tonumber(led:balance(PA, USD))) -- nothing half done
            gate.apply_held = false
            assert.truthy(hx:join(10000))
            assert.truthy(debit(led, "y"))
            assert.equal(980, tonumber(led:balance(PA, USD)))
        end)
    end)

    it("the early look: a view read before another saga's commit is a race, never a stored "
       .. "refusal", function()
        race(function(T, s, led, gate)
            -- y read its view (the 1000 posting Active) and waits before reserving it
            gate.apply = phase_with("reserve_postings")
            local hy = T.spawn("saga_y", function() return { debit(led, "y") } end)
            assert(S.eventually(T, function() return gate.apply_held end, 10000))
            -- x spends that posting and commits its change meanwhile
            assert.truthy(debit(led, "x"))
            gate.apply_held = false -- y's reservation finds the posting taken: again
            local ok, ry = hy:join(10000)
            assert.truthy(ok)
            assert.truthy(ry[1], tostring(ry[2]))
            assert.is_nil(s:get_intent("y").code, "a race stored as an outcome")
            assert.equal(980, tonumber(led:balance(PA, USD)))
        end)
    end)
end)
