-- bench-ledger-store.lua: the ledger Store's primitives (lua/ron/ledger/store/, docs/LEDGER.md
-- "Store") on SQLite and PostgreSQL, each against a plain baseline measured in the same run.
--
--   ron-accounting run tests/bench/bench-ledger-store.lua [--quick] [--out FILE] [--dir DIR]
--       [--transfers N] [--pg-transfers N] [--sizes 1000,100000,1000000] [--no-pg]
--       [--no-sqlite]
--
-- 1. lifecycle: N single-posting transfers, each insert_postings({p}) + reserve_postings({id})
--    + deactivate_postings({id}) (three statements, three commits), rows/s; baseline: a plain
--    INSERT loop of the same rows (same columns, a primary key, no trigger, no index) on the
--    same connection, one commit per row. ratio = baseline rows/s / store rows/s. SQLite with
--    synchronous FULL (the default: every commit fsynced) and NORMAL; PostgreSQL (a server
--    this benchmark starts, fsync on) through one connection (round trips in series).
--    The offloaded SQLite driver (NORMAL) with three pool calls per transfer and with one
--    many() call per transfer, against the synchronous driver's figure.
-- 2. balance: one account holding 1k, 100k, 1M Active postings (bulk-loaded through
--    insert_postings, 500 per call): get_balance latency (median and p99 over reads) from
--    the projection, against SELECT sum(amount) over the account's postings (what a store
--    without the projection would do). The projection's figure must not grow with history.
-- 3. the short payer's look (LED-32, issue 25): with 3 other lanes' reserving batch records in
--    the saga table (real ones: an exporter's put_many of 256 rated slices, ~133 kB each),
--    list_finalizing_sagas (what a plan calls) against list_pending_sagas (the listing it
--    called before, returning those records to skip them), this process's CPU (os.clock)
--    and wall per call.
-- Output: human-readable lines and one `BENCH {json}` line per result (tests/bench/README.md).
local uv = require("luv")

package.path = (debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "?.lua;" .. package.path
local B = require("bench_common") -- and lua/ on package.path
local H = B.pg_harness()
local store = require("ron.ledger.store")
local percentile = require("ron.base.percentile")

local opts = { quick = false, out = nil, dir = os.getenv("TMPDIR") or "/tmp", transfers = 5000,
               pg_transfers = 3000, sizes = { 1000, 100000, 1000000 }, pg = true,
               sqlite = true }
B.args(arg, opts, { { "--transfers", "transfers", "num" }, { "--pg-transfers", "pg_transfers", "num" },
             { "--no-pg", "pg", "off" }, { "--no-sqlite", "sqlite", "off" },
             { "--sizes", "sizes", "nums" } },
       "ron-accounting run bench-ledger-store.lua [--quick] [--out FILE] [--dir DIR] "
           .. "[--transfers N] [--pg-transfers N] [--sizes a,b,c] [--no-pg] [--no-sqlite]")
if opts.quick then
    opts.transfers, opts.pg_transfers, opts.sizes = 300, 200, { 1000, 10000 }
end

local emit = B.emitter(opts.out)
local function now() return uv.hrtime() / 1e9 end

local USD = { code = "USD", scale = 2 }
local ACCT = ("\1"):rep(16)

local function tid(k) -- a 32-byte transfer id (first byte varies: spreads the shards)
    return string.char(k % 256) .. string.format("%031d", k)
end

local function posting(k, i)
    return { id = { transfer_id = tid(k), index = i or 0 }, account = ACCT, asset = USD,
             amount = 100 + k % 7 }
end

local PLAIN = [[CREATE TABLE IF NOT EXISTS @plain_postings (
    transfer_id B NOT NULL, idx I NOT NULL, account B NOT NULL, asset_code B NOT NULL,
    scale I NOT NULL, amount I NOT NULL, status I NOT NULL, reservation B, created_by B NOT NULL,
    consumed_by B, shard I NOT NULL, PRIMARY KEY (transfer_id, idx))]]

local function plain_ddl(s) return B.plain_ddl(s, PLAIN) end

local function plain_insert_sql(s)
    local sql = require("ron.ledger.store.sql")
    return sql.render(s.dialect, s.prefix, "INSERT INTO @plain_postings (transfer_id, idx, "
        .. "account, asset_code, scale, amount, status, reservation, created_by, consumed_by, "
        .. "shard) VALUES (?b, ?i, ?b, ?b, ?i, ?i, ?i, ?b, ?b, ?b, ?i)")
end

local function sqlite_path(name)
    return B.fresh_sqlite(opts.dir .. "/bench-ledger-store-" .. name .. ".sqlite")
end

-- One lifecycle figure and its baseline on store s (exec_ddl runs the baseline's DDL).
local function lifecycle(label, s, n, exec_ddl, params)
    local base = 10000000 * (params.round or 1)
    -- warm-up (statements prepared, tables touched)
    for k = 1, 20 do
        local p = posting(base - k)
        assert(s:insert_postings { p } == 1)
        assert(s:reserve_postings({ p.id }, "w") == 1)
        assert(s:deactivate_postings({ p.id }, "w", tid(1)) == 1)
    end
    local t0 = now()
    for k = base, base + n - 1 do
        local p = posting(k)
        local a = assert(s:insert_postings { p })
        local b = assert(s:reserve_postings({ p.id }, "saga"))
        local c = assert(s:deactivate_postings({ p.id }, "saga", tid(k + 1)))
        assert(a == 1 and b == 1 and c == 1, "a primitive counted 0")
    end
    local store_s = now() - t0
    assert(exec_ddl(plain_ddl(s)))
    local ins = plain_insert_sql(s)
    local sql = require("ron.ledger.store.sql")
    t0 = now()
    for k = base, base + n - 1 do
        local p = posting(k)
        local binds = { n = 11, p.id.transfer_id, 0, ACCT, "USD", 2, p.amount, 0, nil,
                        p.id.transfer_id, nil, sql.shard(p.id.transfer_id, 0) }
        assert(assert(s.drv:write(ins, binds)) == 1)
    end
    local plain_s = now() - t0
    local rps, prps = n / store_s, n / plain_s
    print(("%-28s %7d transfers: store %8.0f rows/s (3 statements each), plain INSERT %8.0f "
           .. "rows/s, ratio %.2f"):format(label, n, rps, prps, prps / rps))
    emit(('{"bench":"ledger-store","name":"lifecycle_%s","params":{"transfers":%d},'
          .. '"rows_per_s":%.1f,"baseline_insert_rows_per_s":%.1f,"ratio":%.3f,"loadavg":"%s"}')
         :format(params.name, n, rps, prps, prps / rps, B.loadavg()))
    return rps
end

-- The offloaded SQLite driver (inside the host: each call a threadpool hop): the same
-- lifecycle as three calls per transfer and as one many() call per transfer, against the
-- synchronous driver on the same settings in the same run.
local function lifecycle_offloaded(n, sync_rps)
    for _, mode in ipairs { "calls", "many" } do
        local s = assert(store.open { backend = "sqlite", path = sqlite_path("off"),
                                      synchronous = "normal", offload = true })
        local t0 = now()
        for k = 1, n do
            local p = posting(k)
            if mode == "calls" then
                assert(assert(s:insert_postings { p }) == 1)
                assert(assert(s:reserve_postings({ p.id }, "saga")) == 1)
                assert(assert(s:deactivate_postings({ p.id }, "saga", tid(k + 1))) == 1)
            else
                local r = assert(s:many {
                    { "insert_postings", { p } }, { "reserve_postings", { p.id }, "saga" },
                    { "deactivate_postings", { p.id }, "saga", tid(k + 1) } })
                assert(r[1][1] == 1 and r[2][1] == 1 and r[3][1] == 1)
            end
        end
        local rps = n / (now() - t0)
        s:close()
        print(("%-28s %7d transfers: store %8.0f rows/s (%s), synchronous driver %8.0f rows/s")
              :format("sqlite offloaded normal", n, rps,
                      mode == "calls" and "3 pool calls each" or "1 many() call each", sync_rps))
        emit(('{"bench":"ledger-store","name":"lifecycle_sqlite_normal_offloaded_%s",'
              .. '"params":{"transfers":%d},"rows_per_s":%.1f,"sync_rows_per_s":%.1f,'
              .. '"loadavg":"%s"}'):format(mode, n, rps, sync_rps, B.loadavg()))
    end
    sqlite_path("off")
end


-- Balance reads at growing history on store s; sum_sql: the naive read for comparison.
local function balances(label, s, sizes, name)
    local sql = require("ron.ledger.store.sql")
    local naive = sql.render(s.dialect, s.prefix, "SELECT CAST(sum(amount) AS BIGINT) FROM "
                             .. "@postings WHERE account = ?b AND asset_code = ?b AND scale = ?i "
                             .. "AND status <> 2")
    local have, k, want_sum = 0, 20000000, 0
    for _, size in ipairs(sizes) do
        local t0 = now()
        while have < size do
            local batch = {}
            local m = math.min(500, size - have)
            for i = 0, m - 1 do
                local p = posting(k, i)
                batch[#batch + 1] = p
                want_sum = want_sum + p.amount
            end
            k = k + 1
            assert(assert(s:insert_postings(batch)) == m)
            have = have + m
        end
        local load_s = now() - t0
        local lat = {}
        local reads = 300
        for r = 1, reads do
            local t1 = now()
            local bal = assert(s:get_balance(ACCT, USD))
            lat[r] = (now() - t1) * 1e6
            if r == 1 then assert(bal == want_sum, "projection " .. tostring(bal)) end
        end
        local nlat = {}
        for r = 1, 5 do
            local t1 = now()
            local rows = assert(s.drv:read(naive, { n = 3, ACCT, "USD", 2 }, "i"))
            nlat[r] = (now() - t1) * 1e6
            assert(rows[1][1] == want_sum, "naive sum")
        end
        local med, p99, nmed = percentile(lat, 0.5), percentile(lat, 0.99), percentile(nlat, 0.5)
        print(("%-28s %8d postings (loaded in %.1f s): get_balance median %7.1f us, p99 %7.1f "
               .. "us; sum over postings median %10.1f us"):format(label, size, load_s, med, p99,
                                                                   nmed))
        emit(('{"bench":"ledger-store","name":"balance_%s","params":{"postings":%d},'
              .. '"get_balance_median_us":%.1f,"get_balance_p99_us":%.1f,'
              .. '"sum_over_postings_median_us":%.1f,"loadavg":"%s"}')
             :format(name, size, med, p99, nmed, B.loadavg()))
    end
end

-- One lane's reserving batch record as the exporter writes it: 256 rated slices' members.
local function lane_record()
    local memory = require("ron.ledger.store.memory")
    local m = memory.new()
    local e = assert(require("ron.ledger.exporter").new { store = m, card = B.rate_card(),
                                                           node = "bench", book = "main" })
    assert(e:ready())
    local rec
    local save = m.save_saga
    m.save_saga = function(self, id, phase, data, node)
        if phase == "reserving" and (not rec or #data > #rec) then rec = data end
        return save(self, id, phase, data, node)
    end
    for _, r in ipairs(e:put_many(B.meter_windows(256, 1)[1])) do assert(r[1] == "ok") end
    return rec
end

local function sagas_look(label, s, name)
    local rec = lane_record()
    for i = 1, 3 do assert(s:save_saga("lane" .. i, "reserving", rec, "bench")) end
    local calls, r = opts.quick and 20 or 200, {}
    for round = 1, 2 do -- alternating
        for _, prim in ipairs { "list_pending_sagas", "list_finalizing_sagas" } do
            local c0, t0, rows = os.clock(), now(), 0
            for _ = 1, calls do rows = rows + #assert(s[prim](s)) end
            local x = r[prim] or { cpu = math.huge, wall = math.huge }
            x.rows = rows / calls
            x.cpu = math.min(x.cpu, (os.clock() - c0) / calls * 1e6)
            x.wall = math.min(x.wall, (now() - t0) / calls * 1e6)
            r[prim] = x
        end
        if round == 1 then assert(r.list_pending_sagas.rows == 3) end
    end
    local all, fin = r.list_pending_sagas, r.list_finalizing_sagas
    print(("%-28s the short payer's look, 3 lanes' records of %d bytes in flight: "
           .. "list_finalizing_sagas %.0f rows, %.0f us CPU, %.0f us wall per call; "
           .. "list_pending_sagas %.0f rows, %.0f us CPU, %.0f us wall (CPU ratio %.3f)")
          :format(label, #rec, fin.rows, fin.cpu, fin.wall, all.rows, all.cpu, all.wall,
                  fin.cpu / all.cpu))
    emit(('{"bench":"ledger-store","name":"finalizing_look_%s","params":{"records":3,'
          .. '"record_bytes":%d},"cpu_us":%.1f,"wall_us":%.1f,"baseline":"list_pending_sagas",'
          .. '"baseline_cpu_us":%.1f,"baseline_wall_us":%.1f,"ratio_cpu":%.4f,"loadavg":"%s"}')
         :format(name, #rec, fin.cpu, fin.wall, all.cpu, all.wall, fin.cpu / all.cpu,
                 B.loadavg()))
    for i = 1, 3 do assert(s:delete_saga("lane" .. i) == 1) end
end

local function run()
    print(("bench-ledger-store: SQLite %s, load %s"):format(
        require("ron.ledger.store.sqlite").version(), B.loadavg()))
    local sync_rps
    for _, sync in ipairs(opts.sqlite and { "full", "normal" } or {}) do
        local s = assert(store.open { backend = "sqlite", path = sqlite_path(sync),
                                      synchronous = sync })
        sync_rps = lifecycle("sqlite synchronous=" .. sync, s, opts.transfers,
                             function(ddl) return s.drv:exec(ddl) end, { name = "sqlite_" .. sync })
        s:close()
    end
    if opts.sqlite then lifecycle_offloaded(opts.transfers, sync_rps) end
    if opts.sqlite then
        local s = assert(store.open { backend = "sqlite", path = sqlite_path("balance"),
                                      synchronous = "normal" })
        balances("sqlite", s, opts.sizes, "sqlite")
        sagas_look("sqlite", s, "sqlite")
        s:close()
        sqlite_path("balance")
    end
    for _, sync in ipairs { "full", "normal" } do sqlite_path(sync) end
    if not opts.pg then return end
    -- (the SQLite phases held the loop thread for minutes: pg_cluster refreshes its clock)
    local cluster = B.pg_cluster("bench-ledger-store", H)
    if not cluster then return end
    local okr, err = pcall(function()
        local s = assert(store.open { backend = "postgres", conninfo = cluster.conninfo,
                                      schema = "bench", connections = 1,
                                      durability = "statement",
                                      connect_timeout_ms = 30000, query_timeout_ms = 120000 })
        lifecycle("postgres fsync=on", s, opts.pg_transfers,
                  function(ddl) return s.drv.db:exec(ddl) end, { name = "postgres" })
        balances("postgres", s, opts.sizes, "postgres")
        sagas_look("postgres", s, "postgres")
        s:close()
    end)
    cluster:stop()
    if not okr then error(err, 0) end
end

B.main("bench-ledger-store", run)
