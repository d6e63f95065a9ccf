-- bench_common.lua: what the benchmarks run by the host share (tests/bench/README.md):
-- the BENCH line writer and the machine readings printed next to every figure.
--
--   local B = require("bench_common")      -- the script's directory is on package.path
--   B.args(arg, opts, spec, usage)        -- the command line into opts (defaults in it)
--   local emit = B.emitter(opts.out)      -- emit(json): "BENCH <json>" on stdout, and
--                                         -- appended to the --out file when given
--   B.loadavg()                           -- "0.12 0.30 0.41" (or "?")
--   local jc = B.jit_counter()            -- jc(): "N traces, M aborts, F flushes" of this
--                                         -- VM's trace compiler since the last jc() (or
--                                         -- since B.jit_counter()), and the three counts
--   B.around(tbl, name, before, after)    -- tbl[name] wrapped: st = before(...) on entry,
--                                         -- after(st) on the way out, also when it raised
--                                         -- (raised again): the benches' stage clocks
--   B.cpu_s(who)                          -- CPU seconds (user + system) so far of this
--                                         -- process (0), the calling thread (1) or the
--                                         -- waited-for children (-1): getrusage
--   local proxy, n = B.counted(store)      -- the store's methods, n.calls counted
--   local c = B.instrument(store[, clock]) -- in place: every primitive counted (c.n, per
--                                         -- name c.by) and timed in seconds of clock()
--                                         -- (default wall time; os.clock: CPU): c.t, c.tby;
--                                         -- the saga records the listings returned:
--                                         -- c.saga_rows, c.saga_bytes (their data)
--   B.plain_ddl(s, template)              -- a baseline's DDL for store s: B/I column types
--                                         -- and @ (the schema prefix) in template filled
--   B.spawn_out(file, args, env, path)   -- a child, stdout to path, without copying this
--                                         -- process's page tables (posix_spawn) -> pid
--   B.reap(pid)                           -- its exit code once it ended, else nil
--   B.status_kb("VmRSS")                  -- a /proc/self/status field, kB (0 if absent)
--   B.pg_counts(sleep, store)             -- a PostgreSQL store's server: its durability
--                                         -- settings, transactions, WAL syncs and records
--                                         -- so far (nil on another store)
--   B.make_chains(n_streams, per)         -- [stream][seq] sealed slices, one row each
--   B.rate_card()                         -- the rating benchmarks' card (bytes, tiered)
--   B.meter_windows(T, W)                 -- [w] the slices of window w: T tenants, one
--                                         -- stream each, one row each, from a real meter
--   B.put_direct(ledger, chains)          -- every slice into ledger:put (each ok), stream
--                                         -- after stream, then ledger closed -> slices/s, n
--   B.drive(chains, put)                  -- put(slice, stream) for all, one task per stream
--                                         -- in seq order -> seconds, answers counted
--   B.here                                -- this directory (tests/bench/), with a slash
--   B.fresh_sqlite(path)                  -- path, its SQLite file (and -wal, -shm) removed
--   B.pg_harness()                        -- tests/pg/harness.lua, loaded
--   B.pg_cluster(name, H)                 -- a PostgreSQL server (fsync on) | nil: skipped
--   B.with_pg_store(name, H, schema, fn)  -- fn(store, cluster) on a server started for it
--                                         -- and a ledger store on it (4 connections); both
--                                         -- closed after, fn's error raised; skipped: nothing
--   B.fund_payers(led, ext, sink, payers, asset)  -- recover(), the accounts, each payer
--                                         -- funded 1e9 from ext (uncapped)
--   B.main(name, fn)                      -- fn(T) in a task on a new scheduler T, the
--                                         -- default loop run to its end; its error (or
--                                         -- its not ending) on stderr as "name: ..."
--                                         -- and exit 1
-- Loading it also puts the checkout's lua/ on package.path and applies the daemon's
-- LuaJIT options to this VM (ron.base.jitopt).
local _M = {}

_M.here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = _M.here .. "../../lua/?.lua;" .. _M.here .. "../../lua/?/init.lua;"
               .. package.path
-- the loop VM's trace compiler set as the daemon sets it (ron.node.start; issue 25)
require("ron.base.jitopt").apply()

function _M.fresh_sqlite(path)
    for _, suf in ipairs { "", "-wal", "-shm" } do os.remove(path .. suf) end
    return path
end

function _M.pg_harness()
    return dofile(_M.here .. "../pg/harness.lua")
end

-- A PostgreSQL server (fsync on) for the rest of the run, or nil after a "skipped" line.
-- The loop's cached clock is refreshed first: a long synchronous phase before leaves it old,
-- and a connect timer started from it would expire at once.
function _M.pg_cluster(name, H)
    require("luv").update_time()
    local ok, why = H.available()
    if not ok then
        print(name .. ": PostgreSQL skipped: " .. why)
        return nil
    end
    local cluster = assert(H.start { fsync = true })
    require("luv").update_time() -- (and after it: the start blocks the loop for seconds)
    return cluster
end

function _M.with_pg_store(name, H, schema, fn)
    local cluster = _M.pg_cluster(name, H)
    if not cluster then return end
    local ok, err = pcall(function()
        local s = assert(require("ron.ledger.store").open {
            backend = "postgres", conninfo = cluster.conninfo, schema = schema, connections = 4,
            connect_timeout_ms = 20000, query_timeout_ms = 20000 })
        local ok2, err2 = pcall(fn, s, cluster)
        s:close()
        assert(ok2, err2)
    end)
    cluster:stop()
    assert(ok, err)
end

function _M.fund_payers(led, ext, sink, payers, asset)
    assert(led:recover())
    assert(led:create_account { id = ext, policy = "uncapped" })
    assert(led:create_account { id = sink })
    for k, p in ipairs(payers) do
        assert(led:create_account { id = p })
        assert(led:commit { intent = "fund-" .. k, movements = {
            { from = ext, to = p, asset = asset, amount = 1000000000 } } })
    end
end

function _M.main(name, fn)
    local T = require("ron.base.task").new()
    local uv = require("luv")
    local h = T.spawn(name, fn, T)
    -- a bench that failed with a server, a wallet's workers or a timer still running
    -- reports its failure and exits (below) instead of leaving the loop turning for ever
    T.spawn(name .. "_end", function()
        if not h:join() then uv.stop() end
    end)
    uv.run("default")
    local ok, err = nil, "the task did not end: " .. tostring(h.status)
    if h.status ~= "running" then ok, err = h:join() end
    if not ok then
        io.stderr:write(name, ": ", tostring(err), "\n")
        os.exit(1)
    end
end

local T0 = 1700000000 - 1700000000 % 3600
_M.T0 = T0

function _M.emitter(path)
    local out = path and assert(io.open(path, "a"))
    return function(line)
        print("BENCH " .. line)
        if out then
            out:write("BENCH ", line, "\n")
            out:flush()
        end
        io.stdout:flush()
    end
end

-- What each kind of option does with its value (nil: it takes none).
local KINDS = {
    on = function() return true end,
    off = function() return false end,
    num = function(v, flag) return assert(tonumber(v), flag .. " N") end,
    str = function(v) return v end,
    nums = function(v, flag)
        local t = {}
        for x in v:gmatch("[^,]+") do t[#t + 1] = assert(tonumber(x), flag .. " N,N,..") end
        return t
    end,
    strs = function(v)
        local t = {}
        for x in v:gmatch("[^,]+") do t[#t + 1] = x end
        return t
    end,
}
local TAKES = { num = true, str = true, nums = true, strs = true }

-- The command line of a benchmark: spec lists { "--flag", key, kind } (kinds above);
-- --quick, --out FILE and --dir DIR are always known. Anything else prints usage and
-- exits 2. Returns opts.
function _M.args(argv, opts, spec, usage)
    local flags = { ["--quick"] = { "quick", "on" }, ["--out"] = { "out", "str" },
                    ["--dir"] = { "dir", "str" } }
    for _, s in ipairs(spec) do flags[s[1]] = { s[2], s[3] } end
    local i = 1
    while i <= #argv do
        local f = flags[argv[i]]
        if not f or (TAKES[f[2]] and argv[i + 1] == nil) then
            io.stderr:write("usage: ", usage, "\n")
            os.exit(2)
        end
        opts[f[1]] = KINDS[f[2]](argv[i + 1], argv[i])
        i = i + (TAKES[f[2]] and 2 or 1)
    end
    return opts
end

local function read(path, how)
    local f = io.open(path, "r")
    if not f then return nil end
    local s = f:read(how)
    f:close()
    return s
end

local ffi = require("ffi")
pcall(ffi.cdef, [[
struct ra_bench_rusage { long utime_s, utime_us, stime_s, stime_us; long pad[14]; };
int getrusage(int who, struct ra_bench_rusage *usage);
]])
local ru = ffi.new("struct ra_bench_rusage")

function _M.around(tbl, name, before, after)
    local f = tbl[name]
    assert(type(f) == "function", name)
    tbl[name] = function(...)
        local st = before(...)
        local r = { pcall(f, ...) }
        after(st)
        if not r[1] then error(r[2], 0) end
        return unpack(r, 2, table.maxn(r))
    end
end

function _M.cpu_s(who)
    ffi.C.getrusage(who, ru)
    return tonumber(ru.utime_s) + tonumber(ru.utime_us) / 1e6 + tonumber(ru.stime_s)
           + tonumber(ru.stime_us) / 1e6
end

function _M.loadavg()
    local s = read("/proc/loadavg", "*l")
    return s and s:match("^(%S+ %S+ %S+)") or "?"
end

-- A child process started without copying this one's page tables (issue 25). libuv's
-- uv.spawn forks: every page of this process (the wallet's heap: 100-200 MB in the bench)
-- is then write-protected until touched, and on the 2-vCPU hypervisor each such fault
-- costs tens of us: the server under test paid ~60,000 of them at the start of every case
-- (the first groups 84-240 ms against 20-40 ms), an artefact of a bench that runs its load
-- generator from the server's process. glibc's posix_spawn uses CLONE_VM|CLONE_VFORK: no
-- copy. The child's stdout goes to out_path; B.reap(pid) -> exit code, or nil (running).
ffi.cdef [[
int posix_spawnp(int *pid, const char *file, const void *file_actions, const void *attrp,
                 char *const argv[], char *const envp[]);
int posix_spawn_file_actions_init(void *fa);
int posix_spawn_file_actions_addopen(void *fa, int fd, const char *path, int oflag,
                                     unsigned mode);
int posix_spawn_file_actions_destroy(void *fa);
int waitpid(int pid, int *status, int options);
]]
local function cstrings(list)
    local a = ffi.new("char *[?]", #list + 1)
    local keep = {}
    for i, v in ipairs(list) do
        keep[i] = ffi.new("char[?]", #v + 1, v)
        a[i - 1] = keep[i]
    end
    return a, keep
end

function _M.spawn_out(file, args, env, out_path)
    local fa = ffi.new("uint64_t[32]") -- posix_spawn_file_actions_t: 80 bytes on glibc
    assert(ffi.C.posix_spawn_file_actions_init(fa) == 0)
    -- O_WRONLY | O_CREAT | O_TRUNC (Linux)
    assert(ffi.C.posix_spawn_file_actions_addopen(fa, 1, out_path, 0x241, 420) == 0)
    local argv, k1 = cstrings({ file, unpack(args) })
    local envp, k2 = cstrings(env)
    local pid = ffi.new("int[1]")
    local rc = ffi.C.posix_spawnp(pid, file, fa, nil, argv, envp)
    ffi.C.posix_spawn_file_actions_destroy(fa)
    local _ = { k1, k2 } -- (the strings live until the call returned)
    if rc ~= 0 then return nil, "posix_spawnp " .. file .. ": error " .. rc end
    return pid[0]
end

function _M.reap(pid)
    local st = ffi.new("int[1]")
    local r = ffi.C.waitpid(pid, st, 1) -- WNOHANG
    if r == 0 then return nil end
    if r < 0 then return -1 end
    if bit.band(st[0], 0x7f) ~= 0 then return 128 + bit.band(st[0], 0x7f) end
    return bit.band(bit.rshift(st[0], 8), 0xff)
end

-- jit.attach keeps ONE handler per event (the last attached): the benches' listeners of
-- the "trace" event (this counter, wallet_tail's probe) share one, through on_trace.
local trace_fns = {}
local function trace_event(...)
    for _, f in ipairs(trace_fns) do f(...) end
end

function _M.on_trace(f)
    if #trace_fns == 0 and jit and jit.attach then jit.attach(trace_event, "trace") end
    trace_fns[#trace_fns + 1] = f
end

function _M.off_trace(f)
    for i, g in ipairs(trace_fns) do
        if g == f then
            table.remove(trace_fns, i)
            break
        end
    end
    if #trace_fns == 0 and jit and jit.attach then jit.attach(trace_event) end
end

-- This VM's trace compiler at work (issue 25): every compiled trace makes its machine-code
-- area writable and executable again (two mprotect calls, each a TLB shootdown to the
-- other core), every abort is recording thrown away. jit.attach's "trace" event counts
-- both; the line is per case, the counts since the last call.
function _M.jit_counter()
    local n = { stop = 0, abort = 0, flush = 0 }
    local last = { stop = 0, abort = 0, flush = 0 }
    _M.on_trace(function(what) if n[what] then n[what] = n[what] + 1 end end)
    return function()
        local d = {}
        for k, v in pairs(n) do d[k], last[k] = v - last[k], v end
        return string.format("%d traces, %d aborts, %d flushes", d.stop, d.abort, d.flush),
               d.stop, d.abort, d.flush
    end
end

-- PostgreSQL's own counts (nil on SQLite): the server's durability settings, its
-- transactions committed and its WAL syncs (pg_stat_database, pg_stat_wal; a backend
-- reports its counts within a second of going idle: read after a pause).
function _M.pg_counts(sleep, store)
    if store.backend ~= "postgres" then return nil end
    sleep(1100)
    local db = store.drv.db
    local r = assert(db:query("SELECT current_setting('synchronous_commit'), "
                              .. "current_setting('commit_delay'), current_setting('fsync'), "
                              .. "(SELECT xact_commit FROM pg_stat_database WHERE datname = "
                              .. "current_database()), (SELECT wal_sync FROM pg_stat_wal), "
                              .. "(SELECT wal_records FROM pg_stat_wal)"))[1]
    local server = assert(db:query("SELECT reset_val FROM pg_settings WHERE name = "
                                   .. "'synchronous_commit'"))[1][1]
    return { session = r[1], delay = r[2], fsync = r[3], server = server,
             xact = tonumber(r[4]), syncs = tonumber(r[5]), records = tonumber(r[6]) }
end

function _M.status_kb(field)
    local s = read("/proc/self/status", "*a")
    return s and tonumber(s:match(field .. ":%s*(%d+)")) or 0
end

-- n_streams chains of `per` slices each (one row each), indexed [stream][seq], from a
-- private meter on an injected clock; ACKed at once (the objects keep their bytes).
function _M.make_chains(n_streams, per)
    local acct = require("ron.accounting")
    local now = T0 + 5
    local m = assert(acct.open { window_len_s = 60, capacity_rows = math.max(1024, 2 * n_streams),
                                 shards = 4, pending_slices_cap = math.max(64, 2 * n_streams),
                                 host = "bench-host", clock = function() return now end })
    local chains, tenants = {}, {}
    for s = 1, n_streams do
        chains[s] = {}
        tenants[s] = ("00000000-0000-4000-8000-%012x"):format(s)
    end
    for w = 1, per do
        now = T0 + 60 * (w - 1) + 5
        for s = 1, n_streams do assert(m:record(tenants[s], "alice", "bytes", w + s)) end
        for _, sl in ipairs(assert(m:rollover(T0 + 60 * w))) do
            chains[tonumber(sl.tenant:sub(-12), 16)][sl.id.seq] = sl
            assert(m:ack(sl))
        end
    end
    m:close()
    return chains
end

-- The rate card of the rating benchmarks (bench-ledger-rating-pg, bench-ledger-batch-mem).
function _M.rate_card()
    local rate = require("ron.ledger.rate")
    return assert(rate.new({
        version = "bench.1", currency = { code = "USD", scale = 2 }, period = "month",
        dimensions = { bytes = { per = 1000000, free = 1000000000,
                                 tiers = { { upto = 1000000000000, price = 10 },
                                           { price = 5 } } } },
    }, "bench"))
end

-- Slices of a real meter: W windows x T tenants (one stream each); [w] = window w's T slices.
function _M.meter_windows(T, W)
    local acct = require("ron.accounting")
    local t_now = T0 + 5
    local m = assert(acct.open { capacity_rows = 4096, shards = 4, window_len_s = 60,
                                 host = "bench", clock = function() return t_now end })
    local windows = {}
    for w = 1, W do
        t_now = T0 + 60 * (w - 1) + 5
        for t = 1, T do
            assert(m:record(("00000000-0000-4000-8000-%012x"):format(t), "s", "bytes", 1000 * w))
        end
        windows[w] = assert(m:rollover(T0 + 60 * w))
        assert(#windows[w] == T)
    end
    m:close()
    return windows
end

-- Runs put(slice, stream) for every slice, one task per stream in seq order (from a task);
-- anything but "ok" fails the run. -> seconds, { status = count }
function _M.put_direct(ledger, chains)
    local uv = require("luv")
    local n = 0
    local t0 = uv.hrtime()
    for _, chain in ipairs(chains) do -- stream after stream: one head load each
        for _, sl in ipairs(chain) do
            assert(ledger:put(sl) == "ok")
            n = n + 1
        end
    end
    local s = (uv.hrtime() - t0) / 1e9
    ledger:close()
    return n / s, n
end

function _M.drive(chains, put)
    local task = require("ron.base.task")
    local uv = require("luv")
    local counts = {}
    local t0 = uv.hrtime()
    local hs = {}
    for s, chain in ipairs(chains) do
        hs[#hs + 1] = task.spawn("bench-" .. s, function()
            for _, sl in ipairs(chain) do
                local st, detail = put(sl, s)
                counts[st or "fail"] = (counts[st or "fail"] or 0) + 1
                if st ~= "ok" then
                    error(("stream %d seq %d: %s %s"):format(s, sl.id.seq, tostring(st),
                                                            tostring(detail)))
                end
            end
        end)
    end
    for _, h in ipairs(hs) do assert(h:join()) end
    return (uv.hrtime() - t0) / 1e9, counts
end

-- The store a baseline writes through: s itself, or for an offloaded SQLite store (whose
-- connections are the pool's) a synchronous store of the same file. -> that store, and a
-- function that closes it when it is not s
function _M.sync_store(s)
    if not s.offloaded then return s, function() end end
    local b = assert(require("ron.ledger.store").open { backend = "sqlite", path = s.path,
                                                         durability = s.durability })
    return b, function() b:close() end
end

-- A store's methods through a proxy that counts the calls (the offloaded SQLite store and
-- the PostgreSQL one are tables of methods), their time (clock) and the Lua heap they grew
-- (kb): -> counters { n, by, t, tby, kb, saga_rows, saga_bytes }. hook(name, t0, t1, first
-- argument), when given, is told of every call (timeline.lua).
function _M.instrument(s, clock, hook)
    clock = clock or function() return require("luv").hrtime() / 1e9 end
    local c = { n = 0, by = {}, t = 0, tby = {}, kb = 0, saga_rows = 0, saga_bytes = 0 }
    for _, name in ipairs(require("ron.ledger.store.sql").METHODS) do
        local f = s[name]
        local sagas = name:match("_sagas$") ~= nil
        if name ~= "many" and type(f) == "function" then
            c.by[name], c.tby[name] = 0, 0
            s[name] = function(self, ...)
                c.n = c.n + 1
                c.by[name] = c.by[name] + 1
                local k0, t0 = collectgarbage("count"), clock()
                local r = { f(self, ...) }
                local dt = clock() - t0
                if hook then hook(name, t0, t0 + dt, (...)) end
                c.t, c.tby[name] = c.t + dt, c.tby[name] + dt
                c.kb = c.kb + collectgarbage("count") - k0
                if sagas and type(r[1]) == "table" then
                    c.saga_rows = c.saga_rows + #r[1]
                    for _, x in ipairs(r[1]) do c.saga_bytes = c.saga_bytes + #(x.data or "") end
                end
                return unpack(r, 1, table.maxn(r))
            end
        end
    end
    return c
end

function _M.plain_ddl(s, template)
    local t = s.dialect == "postgres" and { B = "bytea", I = "bigint" }
              or { B = "BLOB", I = "INTEGER" }
    local ddl = template:gsub(" B([ ,\n)])", " " .. t.B .. "%1")
                        :gsub(" I([ ,\n)])", " " .. t.I .. "%1")
    return (ddl:gsub("@", s.prefix))
end

function _M.counted(s)
    local n = { calls = 0 }
    local proxy = setmetatable({}, { __index = function(_, k)
        local v = s[k]
        if type(v) ~= "function" then return v end
        return function(_, ...)
            n.calls = n.calls + 1
            return v(s, ...)
        end
    end })
    return proxy, n
end

return _M
