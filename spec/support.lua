-- Shared helpers for the specs (not a spec itself: busted only runs *_spec.lua files).
-- Load with `local S = require("support")`: .busted puts spec/ on the module path (busted
-- runs from the repository root, as ctest does).
local S = {}

-- Repository root, with a trailing slash ("" when the specs run from the root).
S.root = debug.getinfo(1, "S").source:match("^@(.*)spec/support%.lua$") or ""

-- The same as an absolute path (for commands that run elsewhere).
function S.abs_root()
    if S.root:sub(1, 1) == "/" then return S.root end
    local p = assert(io.popen("pwd"))
    local cwd = p:read("*l")
    p:close()
    return cwd .. "/" .. S.root
end

-- Make `require("ron.accounting")` work however busted was started (ctest sets LUA_PATH;
-- a developer may just run `busted --lua=luajit` from the root).
if not package.path:find(S.root .. "lua/?.lua", 1, true) then
    package.path = S.root .. "lua/?.lua;" .. S.root .. "lua/?/init.lua;" .. package.path
end

S.TENANT_A = "123e4567-e89b-12d3-a456-426614174000"
S.TENANT_B = "00000000-0000-4000-8000-00000000000b"
S.TENANT_C = "00000000-0000-4000-8000-00000000000c"
S.TENANTS = { S.TENANT_A, S.TENANT_B, S.TENANT_C }
S.ZERO_B3 = string.rep("0", 64)

-- A window-aligned UTC time (a multiple of 3600, so of every legal window length).
S.T0 = 1700000000 - 1700000000 % 3600

-- Runs a shell command; returns its combined output and exit status. shell_quote(s): s as
-- one shell word. Both the PostgreSQL harness's (tests/pg/harness.lua), which loads as a
-- table of functions.
local harness = dofile(S.root .. "tests/pg/harness.lua")
S.run, S.shell_quote = harness.run, harness.quote

-- Inside a task: runs each of fns as its own task, all at once, and joins them (each must
-- end well). -> out[i] = { what fns[i] returned }
function S.concurrent(fns)
    local assert = require("luassert")
    local task = require("ron.base.task")
    local hs, out = {}, {}
    for i, f in ipairs(fns) do
        hs[i] = task.spawn("racer-" .. i, function() out[i] = { f() } end)
    end
    for _, h in ipairs(hs) do assert(h:join()) end
    return out
end

-- A call refused as documented: v (its first answer) is nil and err matches pattern.
function S.fails(pattern, v, err)
    local assert = require("luassert")
    assert.is_nil(v)
    assert.matches(pattern, err)
end

-- Table-driven refusals: for each { opts, message } of cases, make(opts) raises message (any
-- error when the case names none).
function S.refuses(make, cases)
    local assert = require("luassert")
    for _, c in ipairs(cases) do
        assert.has_error(function() make(c[1]) end, c[2])
    end
end

-- A seeded case's seed: the environment variable var's when set, else default; printed as
-- what .. seed and given to math.randomseed. -> the seed
function S.seeded(var, default, what)
    local seed = tonumber(os.getenv(var)) or default
    print(what .. seed)
    math.randomseed(seed)
    return seed
end

-- A fresh path in the temporary directory (nothing exists there yet).
function S.tmpname(suffix)
    local p = os.tmpname()
    os.remove(p)
    return p .. (suffix or "")
end

function S.write_file(path, bytes)
    local f = assert(io.open(path, "wb"))
    assert(f:write(bytes))
    assert(f:close())
end

-- A fresh temporary file holding bytes. -> its path
function S.tmp_file(bytes, suffix)
    local path = S.tmpname(suffix)
    S.write_file(path, bytes)
    return path
end

function S.read_file(path)
    local f = assert(io.open(path, "rb"))
    local s = f:read("*a")
    f:close()
    return s
end

-- This process's resident memory in KB (/proc/self/statm).
function S.rss_kb()
    local f = assert(io.open("/proc/self/statm"))
    local _, res = f:read("*a"):match("^(%d+)%s+(%d+)")
    f:close()
    return tonumber(res) * 4
end

-- The Lua heap in KB once full collections stop shrinking it. Each one halves
-- LuaJIT's string table at most, and how far a loop of fresh strings grew that
-- table depends on the heap earlier specs left: a heap-growth bound measured
-- after a fixed number of collections is flaky in a full run.
function S.settled_heap_kb()
    local kb = collectgarbage("count")
    for _ = 1, 24 do
        collectgarbage()
        local now = collectgarbage("count")
        if now >= kb then return now end
        kb = now
    end
    return kb
end

-- BLAKE3 of bytes as the real b3sum binary computes it (the oracle of PRODUCT.md §5).
function S.b3sum(bytes)
    local path = S.tmpname(".bin")
    S.write_file(path, bytes)
    local out, rc = S.run("b3sum --no-names " .. S.shell_quote(path))
    os.remove(path)
    assert(rc == 0, "b3sum failed: " .. tostring(out))
    return (out:gsub("%s+$", ""))
end

-- Value of one sample of the meter's Prometheus text, e.g.
-- S.metric(m, 'accounting_rejected_total{reason="invalid"}'). Errors when absent, so a
-- renamed metric fails loudly instead of reading as 0.
function S.metric(meter, sample)
    local text = assert(meter:metrics())
    local pat = "\n" .. sample:gsub("[%^%$%(%)%%%.%[%]%*%+%-%?{}]", "%%%0") .. " ([^\n]+)"
    local v = ("\n" .. text):match(pat)
    assert(v, "metric sample not found: " .. sample)
    return tonumber(v)
end

-- An injectable clock: clock.now is UTC seconds; clock.fn is what cfg.clock takes.
function S.clock(now)
    local c = { now = now }
    c.fn = function() return c.now end
    return c
end

-- A new table: base's fields, then extra's (extra wins; either may be nil).
function S.merge(base, extra)
    local t = {}
    for k, v in pairs(base or {}) do t[k] = v end
    for k, v in pairs(extra or {}) do t[k] = v end
    return t
end

-- Small planes keep the specs fast and the shm files small.
function S.cfg(extra)
    return S.merge({ capacity_rows = 1024, shards = 4, window_len_s = 60, host = "spec-host" },
                   extra)
end

-- Sum of the inc of every row, as a Lua number (specs stay far below 2^53).
function S.total(slice)
    local sum = 0
    for _, r in ipairs(slice.rows) do sum = sum + tonumber(r.inc) end
    return sum
end

-- Slices indexed by "tenant/dimension".
function S.by_stream(slices)
    local t = {}
    for _, s in ipairs(slices) do t[s.tenant .. "/" .. s.dimension] = s end
    return t
end

-- For specs run inside the host (spec/run-busted.lua): runs body(task) as a task on a
-- new scheduler (task.new()), runs the loop to its end, and checks that the task ended
-- well. -> the scheduler.
function S.in_task(body)
    local assert = require("luassert") -- this file runs outside busted's spec environment
    local task = require("ron.base.task").new()
    local h = task.spawn("spec", body, task)
    require("luv").run("default")
    assert.equal("ok", h.status, "the spec task did not end: " .. tostring(h.status))
    local ok, err = h:join()
    assert(ok, err)
    return task
end

-- S.in_task, and then no task is left live and no threadpool request in flight.
function S.run_task(body)
    local assert = require("luassert")
    local task = S.in_task(body)
    assert.equal(0, task.live())
    assert.equal(0, require("ron.base.offload").in_flight())
    return task
end

-- The export-runtime fixture (spec/ron/accounting/runtime/): prints the case's seed
-- (default: none), then makes a meter with an injected clock and a WAL, and an offloaded
-- file ledger in a temp dir (file_opts: more offload.file options).
-- -> clock, meter, ledger dir, ledger, WAL dir
function S.rt_setup(seed, file_opts)
    print("seed: " .. (seed and tostring(seed) or "none (no randomness)"))
    local acct = require("ron.accounting")
    local clock = S.clock(S.T0 + 5)
    local wal = S.tmpname(".wal")
    local m = assert(acct.open(S.cfg { clock = clock.fn, wal = { dir = wal } }))
    local dir = S.tmpname(".ledger")
    local ledger = assert(require("ron.accounting.runtime.offload").file(
        S.merge({ dir = dir }, file_opts)))
    return clock, m, dir, ledger, wal
end

-- n chained slices of stream tenant (default TENANT_A)/bytes from a fresh meter, one per
-- window; window i counts base + i (the exporter specs' chains and their forks).
function S.chain(n, base, tenant)
    local acct = require("ron.accounting")
    local clock = S.clock(S.T0 + 5)
    local m = assert(acct.open(S.cfg { clock = clock.fn }))
    local out = {}
    for i = 1, n do
        clock.now = S.T0 + 60 * (i - 1) + 5
        assert(m:record(tenant or S.TENANT_A, "alice", "bytes", (base or 0) + i))
        local sealed = assert(m:rollover(S.T0 + 60 * i))
        assert(#sealed == 1, "one slice per window")
        out[i] = sealed[1]
    end
    m:close()
    return out
end

-- A ledger (exporter) whose put asks answer(s) first: its answer unless it is false, then
-- the ledger's (the runtime specs' misbehaving backends).
function S.wrapped_ledger(ledger, answer)
    return {
        put = function(_, s)
            local a, d = answer(s)
            if a ~= false then return a, d end
            return ledger:put(s)
        end,
        head = function(_, t, d) return ledger:head(t, d) end,
        close = function() ledger:close() end,
    }
end

-- The ledger, except that every slice of tenant answers conflict (its stream stuck at seq 1).
function S.conflicting_ledger(ledger, tenant)
    return S.wrapped_ledger(ledger, function(s)
        if s.tenant == tenant then return "conflict", "another b3 at seq 1" end
        return false
    end)
end

-- The ledger, except that while hole.open every slice of tenant answers gap with detail
-- (its earlier seqs missing downstream). -> ledger, hole (set hole.open = false to fill it)
function S.gapping_ledger(ledger, tenant, detail)
    local hole = { open = true }
    return S.wrapped_ledger(ledger, function(s)
        if hole.open and s.tenant == tenant then return "gap", detail end
        return false
    end), hole
end

-- Inside a task: polls pred every 5 ms up to ms; true when it held.
function S.eventually(task, pred, ms)
    local uv = require("luv")
    local t = uv.now() + ms
    while uv.now() < t do
        if pred() then return true end
        task.sleep(5)
    end
    return pred()
end

-- Records window w (1-based, 60 s windows from T0) for every tenant, then moves the clock
-- past it.
function S.rt_window(m, clock, w, tenants)
    clock.now = S.T0 + 60 * (w - 1) + 5
    for _, t in ipairs(tenants or { S.TENANT_A, S.TENANT_B, S.TENANT_C }) do
        assert(m:record(t, "alice", "bytes", w))
    end
    clock.now = S.T0 + 60 * w + 1
end

-- `ron-accounting verify --quiet DIR` with this build's binary: rc, output.
function S.verify(dir)
    local bin = os.getenv("RA_BIN") or "build/ron-accounting"
    local out, rc = S.run(bin .. " verify --quiet " .. S.shell_quote(dir))
    return rc, out
end

-- For runtime specs: per stream, the seqs the runtime ACKed (ok or dup, rt.events) go
-- 1, 2, 3, ... with no step back. -> true | false, "stream prev -> seq"
function S.in_seq_order(rt)
    local last = {}
    for _, e in ipairs(rt.events) do
        if e[1] == "acked" then
            local prev = last[e[2]] or 0
            if e[3] ~= prev + 1 then return false, e[2] .. " " .. prev .. " -> " .. e[3] end
            last[e[2]] = e[3]
        end
    end
    return true
end

-- Stops the runtime rt (inside its task); nothing was aborted.
function S.rt_stop(rt)
    rt:stop()
    require("luassert").equal(0, rt:wait().aborted)
end

-- The end of a runtime case: the ledger in dir verifies (and, with rt, the runtime ACKed
-- each stream in seq order), then the meter closes.
function S.rt_done(m, dir, rt)
    local assert = require("luassert")
    if rt then assert.is_true(S.in_seq_order(rt)) end
    local rc, out = S.verify(dir)
    assert.equal(0, rc, out)
    m:close()
end

-- The host's specs (run by the ron-accounting host, which has the PostgreSQL binding):
-- under plain busted one pending line instead. Call it at the top of the spec file:
--   if not S.needs_host("what it tests", "its-ctest-name") then return end
local function pending_file(env, what, why)
    env.describe(what, function() env.pending(why) end)
end

function S.needs_host(what, ctest)
    if pcall(require, "ron.base.net.postgres_c") then return true end
    -- the calling spec's environment: busted's describe and pending live there
    pending_file(getfenv(2), what, "needs the ron-accounting host: ctest -R " .. ctest)
    return false
end

-- The same for any condition: unless ok, one pending line (why) under describe(what).
--   if not S.runs_if(ok, "what it tests", "what it needs") then return end
function S.runs_if(ok, what, why)
    if not ok then pending_file(getfenv(2), what, why) end
    return ok
end

-- describe(what) over a real PostgreSQL (tests/pg/harness.lua) started for the block:
-- body(pg), pg.cluster set from setup on; one pending line where the host has no
-- PostgreSQL. Call it at the top level of a spec file:
--   S.describe_pg("the thing on PostgreSQL", function(pg) it(...) ... pg.cluster.conninfo end)
function S.describe_pg(what, body)
    local env = getfenv(2) -- the calling spec's: busted's describe, pending, setup, teardown
    local H = dofile(S.root .. "tests/pg/harness.lua")
    local available, why = H.available()
    env.describe(what, function()
        if not available then return env.pending(why) end
        local pg = {}
        env.setup(function() pg.cluster = assert(H.start()) end)
        env.teardown(function() if pg.cluster then pg.cluster:stop() end end)
        body(pg)
    end)
end

-- A ledger store on pg's cluster (S.describe_pg): o the store.open options besides the
-- backend and the conninfo. -> what store.open answers.
function S.pg_store(pg, o)
    return require("ron.ledger.store").open(S.merge({ backend = "postgres",
                                                      conninfo = pg.cluster.conninfo }, o))
end

-- An IPv4 address of this machine that is not loopback (the specs of the loopback reserve
-- connect from it), or nil.
function S.non_loopback_ipv4()
    for _, list in pairs(require("luv").interface_addresses()) do
        for _, a in ipairs(list) do
            if a.family == "inet" and not a.internal then return a.ip end
        end
    end
end

-- A one-shot HTTP/1.1 exchange with a server, from a task: the raw request bytes go on the
-- wire as they are (a test can send what no real client would). The wallet's specs and
-- host tests talk to ron-wallet this way (Connection: close, no client library), and the
-- server specs (spec/ron/node/) send their malformed requests.
--   S.http_request(task, port, raw[, opts]) -> status, headers (lower-case names), body,
--     text (every response on the connection) | true (only sent) | nil, err
--   opts (or a number: timeout_ms):
--     timeout_ms        how long to read until EOF (default 30000)
--     host              default 127.0.0.1
--     close_after_send  close the socket right after the write (a client that leaves)
--     reset             after the write, close with SO_LINGER 0 (an RST: a client gone)
--     half_close        shutdown(SHUT_WR) right after the write (`nc -N`), then read
-- (luv and the ffi on first use: the rest of this file serves plain busted too)
local function linger_zero(tcp)
    local ffi = require("ffi")
    pcall(ffi.cdef, [[
struct ra_spec_linger { int l_onoff; int l_linger; };
int setsockopt(int fd, int level, int name, const void *val, unsigned int len);
]])
    local l = ffi.new("struct ra_spec_linger", 1, 0)
    ffi.C.setsockopt(tcp:fileno(), 1, 13, l, ffi.sizeof(l)) -- SOL_SOCKET, SO_LINGER
end

local function reset(tcp)
    linger_zero(tcp)
    tcp:close()
end

local function parse(text)
    local head, body = text:match("^(.-)\r\n\r\n(.*)$")
    if not head then return nil, "no response: " .. text end
    local status = tonumber(head:match("^HTTP/1%.%d (%d%d%d)"))
    local headers = {}
    for name, value in head:gmatch("\r\n([^:\r\n]+):%s*([^\r\n]*)") do
        headers[name:lower()] = value
    end
    return status, headers, body, text
end

function S.http_request(task, port, raw, opts)
    if type(opts) ~= "table" then opts = { timeout_ms = opts } end
    local uv = require("luv")
    local only_send = opts.close_after_send or opts.reset
    local ch = task.channel(64, "spec_http_client")
    local tcp = uv.new_tcp()
    local chunks = {}
    tcp:connect(opts.host or "127.0.0.1", port, function(err)
        if err then ch:try_send({ err = err }) return end
        tcp:write(raw, function(werr)
            if werr then ch:try_send({ err = werr }) return end
            if opts.reset then reset(tcp) end
            if only_send then ch:try_send({ sent = true })
            elseif opts.half_close then tcp:shutdown() end
        end)
        if only_send then return end
        tcp:read_start(function(rerr, data)
            if rerr then ch:try_send({ err = rerr })
            elseif data then chunks[#chunks + 1] = data
            else ch:try_send({ eof = true }) end
        end)
    end)
    local v, e = ch:recv(opts.timeout_ms or 30000)
    if not tcp:is_closing() then tcp:close() end
    ch:close()
    local text = table.concat(chunks)
    if not v then return nil, tostring(e) .. " (read so far: " .. text .. ")" end
    if v.err then return nil, v.err end
    if v.sent then return true end
    return parse(text)
end


-- POST a JSON body (with a bearer token and an Idempotency-Key when given).
function S.http_post(task, port, path, token, body, key)
    local h = { "POST " .. path .. " HTTP/1.1", "Host: x", "Connection: close",
                "Content-Type: application/json", "Content-Length: " .. #body }
    if token then h[#h + 1] = "Authorization: Bearer " .. token end
    if key then h[#h + 1] = "Idempotency-Key: " .. key end
    return S.http_request(task, port, table.concat(h, "\r\n") .. "\r\n\r\n" .. body)
end

function S.http_get(task, port, path, token)
    local h = { "GET " .. path .. " HTTP/1.1", "Host: x", "Connection: close" }
    if token then h[#h + 1] = "Authorization: Bearer " .. token end
    return S.http_request(task, port, table.concat(h, "\r\n") .. "\r\n\r\n")
end

return S
