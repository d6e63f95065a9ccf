-- bench-sqlite-keys.lua: what a wallet group's commit on SQLite pays for child rows keyed by
-- a transfer's content id, against the same rows keyed by the transfer's sequence number
-- (issue 25, docs/WALLET.md "Rows keyed by content, and what keying them by sequence would
-- save").
--
--   ron-accounting run tests/bench/bench-sqlite-keys.lua [--quick] [--out FILE] [--dir DIR]
--       [--prefill N] [--seconds S] [--group G] [--sources K] [--rounds R] [--seed X]
--       [--amounts A] [--variants store,seq,noclaim]   (store first: the baseline)
--
-- Why. A SQLite commit writes every page it dirtied, whole, as a WAL frame, and syncs them.
-- The wallet's 16-source case writes ~9.6 frames (4 KB pages) a transfer, and its COMMIT is
-- the largest part of the writer's time (docs/WALLET.md). Most frames are leaves of indexes
-- whose keys begin with a BLAKE3 id (the transfer's), so each transfer lands in a leaf of
-- its own in each of them: the postings' key (transfer_id, idx), `postings_by_account`
-- (whose last keys are the same), the events' (book, transfer_id, kind). A transfer's
-- identity is its content (seed 003), but a posting's and an event's rows could name it by
-- the transfer row's number (`transfers.n`, given in commit order), the content id staying
-- in `transfers` (its one random index) where a lookup by id starts. This measures what
-- that would save before anything is built.
--
-- Variants, each on its own file, in the same run, rounds alternated (A B B A ...):
--   store     the SQLite store's own schema, created by ron.ledger.store.sqlite (the
--             baseline): the rows a wallet transfer writes in its one-transaction group
--   seq       the same, with postings and events naming their transfer by transfers.n:
--             postings PRIMARY KEY (tn, idx), postings_by_account ending (tn, idx), events
--             UNIQUE (book, tn, kind); every other table and trigger the store's
--   seq_postings, seq_events   one of the two alone
--   noclaim   the store's schema without the engine's claim row (an upper bound only:
--             the claim is LED-27's, verify checks it)
-- Per transfer (the wallet's 16-source shape, from bench-wallet --pool-profile): the
-- Idempotency-Key's intent row, the engine's claim, the payer's input reserved then
-- deactivated (its change from the transfer before), the transfer row, two postings (the
-- change, the sink's credit; the balance triggers fire), two transfer_accounts rows, the
-- event, the outcome's intent row. The sink's credits are of 1 (the wallet bench's), or
-- drawn from 1..A (--amounts A): `postings_by_account` orders an account's postings by
-- amount, then by the id, so equal amounts sort by the key that names the transfer. One transaction per group of G (default 32: the
-- wallet's groups with two in flight), synchronous = FULL in WAL mode; checkpoints as
-- SQLite's automatic one (PASSIVE at 1,000 frames, on the writer). Frames are counted by
-- sqlite3_wal_hook. Ids from a PRNG seeded with --seed (printed).
package.path = (debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "?.lua;" .. package.path
local B = require("bench_common") -- and lua/ on package.path
local ffi = require("ffi")
local uv = require("luv")
local sqlite = require("ron.ledger.store.sqlite")
local sc = require("ron.ledger.store.sqlite_conn")

local char, format, random = string.char, string.format, math.random

local opts = { prefill = 50000, seconds = 5, group = 32, sources = 16, rounds = 2,
               seed = 25, amounts = 1, variants = { "store", "seq", "noclaim" } }
B.args(arg, opts, { { "--prefill", "prefill", "num" }, { "--seconds", "seconds", "num" },
             { "--group", "group", "num" }, { "--sources", "sources", "num" },
             { "--rounds", "rounds", "num" }, { "--seed", "seed", "num" },
             { "--amounts", "amounts", "num" }, { "--variants", "variants", "strs" } },
       "ron-accounting run bench-sqlite-keys.lua [--quick] [--out FILE] [--dir DIR] "
           .. "[--prefill N] [--seconds S] [--group G] [--sources K] [--rounds R] [--seed X] "
           .. "[--amounts A] [--variants store,seq,...]")
if opts.quick then opts.prefill, opts.seconds, opts.rounds = 5000, 2, 1 end
local emit = B.emitter(opts.out)
local dir = opts.dir or os.getenv("TMPDIR") or "/tmp"

pcall(ffi.cdef, [[
void *sqlite3_wal_hook(sqlite3 *, int (*)(void *, sqlite3 *, const char *, int), void *);
]])

-- Random bytes for the keys; the rows' other bytes (a transfer's encoding, its metadata, an
-- event's data) are fixed strings of their sizes: only where a key sorts moves a page.
local function bytes(n)
    local t = {}
    for i = 1, n do t[i] = random(0, 255) end
    return char(unpack(t))
end
local TBYTES, META, EDATA = bytes(240), bytes(96), bytes(150)

-- ---- the schemas ----

-- The store's own DDL of a table or index (sqlite_master), to derive `seq`'s from.
local function ddl(conn, name)
    local r = assert(conn:read(format("SELECT sql FROM sqlite_master WHERE name = '%s'", name),
                               { n = 0 }))
    return assert(r[1] and r[1][1], name)
end

-- Which tables name their transfer by number, by variant.
local SEQ = { seq = { postings = true, events = true }, seq_postings = { postings = true },
              seq_events = { events = true },
              seq_pk = { postings = true, by_account = "transfer_id" } }

-- The tables of which (SEQ) re-made naming their transfer by number; postings' triggers kept.
local function to_seq(conn, which)
    local trig = assert(conn:read("SELECT sql FROM sqlite_master WHERE type = 'trigger' "
                                  .. "AND tbl_name = 'postings'", { n = 0 }))
    local made = {}
    if which.postings then
        local p, pi = ddl(conn, "postings"), ddl(conn, "postings_by_account")
        assert(conn:exec("DROP TABLE postings"))
        local n
        p, n = p:gsub("transfer_id BLOB NOT NULL", "tn INTEGER NOT NULL")
        assert(n == 1, "postings' transfer_id")
        -- (seq_pk: the postings keep their id, selection's index its order by it)
        if which.by_account then p = p:gsub("tn INTEGER NOT NULL", "tn INTEGER NOT NULL, "
                                             .. "transfer_id BLOB NOT NULL") end
        made[1] = p:gsub("PRIMARY KEY %(transfer_id, idx%)", "PRIMARY KEY (tn, idx)")
        made[2] = which.by_account and pi or pi:gsub("transfer_id, idx%)", "tn, idx)")
        for _, r in ipairs(trig) do made[#made + 1] = r[1] end
    end
    if which.events then
        local e = ddl(conn, "events")
        assert(conn:exec("DROP TABLE events"))
        made[#made + 1] = e:gsub("transfer_id BLOB NOT NULL", "tn INTEGER NOT NULL")
                           :gsub("UNIQUE %(book, transfer_id, kind%)", "UNIQUE (book, tn, kind)")
    end
    for _, s in ipairs(made) do
        assert(which.by_account or not s:find("transfer_id"), s)
        assert(conn:exec(s))
    end
end

-- A new ledger file of variant v: -> its connection (the store closed).
local function open(v, path)
    B.fresh_sqlite(path)
    local s = assert(sqlite.open { path = path })
    s:close()
    local conn = assert(sc.open_db(path, path, sc.OPEN_RW, "", 5000))
    assert(conn:exec("PRAGMA journal_mode = WAL"))
    assert(conn:exec("PRAGMA cache_size = -65536"))
    assert(conn:exec("PRAGMA temp_store = MEMORY"))
    if SEQ[v] then to_seq(conn, SEQ[v]) end
    return conn
end

-- ---- the rows of one transfer ----

local SINK, BOOK, KIND = ("S"):rep(16), "main", "transfer"
local CODE, SCALE = "USD", 2

local function texts(v)
    local seq = SEQ[v] or {}
    local key = seq.postings and "tn" or "transfer_id"
    local ekey = seq.events and "tn" or "transfer_id"
    return {
        intent = "INSERT INTO intents (key, status, transfer_id, message, body_hash) "
                 .. "VALUES (?, ?, ?, ?, ?)",
        claim = "INSERT INTO claims (intent, status, body_hash) VALUES (?, 'claimed', ?)",
        reserve = "UPDATE postings SET reservation = ? WHERE " .. key .. " = ? AND idx = ?",
        consume = "UPDATE postings SET status = 2, consumed_by = ? WHERE " .. key
                  .. " = ? AND idx = ?",
        transfer = "INSERT INTO transfers (id, bytes, intent, book, created_at_ms, metadata) "
                   .. "VALUES (?, ?, ?, ?, ?, ?) RETURNING n",
        posting = "INSERT INTO postings (" .. key .. ", idx, account, asset_code, scale, "
                  .. "amount, status, created_by, shard"
                  .. (seq.by_account and ", transfer_id) VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?, ?7)"
                      or ") VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?)"),
        ta = "INSERT INTO transfer_accounts (account, n) VALUES (?, ?)",
        event = "INSERT INTO events (book, seq, " .. ekey .. ", kind, data) VALUES (?, ?, ?, ?, ?)",
    }
end

local function w(conn, text, ...)
    local n = assert(conn:write(text, { n = select("#", ...), ... }))
    assert(n == 1, text)
end

-- st: the variant's state (its texts, each source's last change and balance, the event
-- seq). One transfer from source i to the sink.
local function transfer(st, i)
    local conn, T = st.conn, st.T
    local id, kkey, nkey, h = bytes(32), bytes(40), bytes(40), bytes(32)
    local src = st.src[i]
    w(conn, T.intent, kkey, "claimed", nil, "nonce", h)
    if st.v ~= "noclaim" then w(conn, T.claim, nkey, h) end
    w(conn, T.reserve, id, src.ref, 0)
    w(conn, T.consume, id, src.ref, 0)
    local rows = assert(conn:read(T.transfer, { n = 6, id, TBYTES, nkey, BOOK,
                                                1700000000000, META }))
    local n = rows[1][1]
    local seq = SEQ[st.v] or {}
    local ref = seq.postings and n or id
    src.amount = src.amount - 1
    w(conn, T.posting, ref, 0, src.acct, CODE, SCALE, src.amount, id, (id:byte(1)) % 16)
    local amount = opts.amounts > 1 and random(1, opts.amounts) or 1
    w(conn, T.posting, ref, 1, SINK, CODE, SCALE, amount, id, (1 + id:byte(1)) % 16)
    w(conn, T.ta, src.acct, n)
    w(conn, T.ta, SINK, n)
    st.seq = st.seq + 1
    w(conn, T.event, BOOK, st.seq, seq.events and n or id, KIND, EDATA)
    w(conn, T.intent, nkey, "committed", id, nil, h)
    src.ref = ref
end

-- Each source's first posting (its funding), in one transaction.
local function fund(st)
    assert(st.conn:exec("BEGIN IMMEDIATE"))
    for i = 1, opts.sources do
        local id = bytes(32)
        local rows = assert(st.conn:read(st.T.transfer, { n = 6, id, TBYTES, bytes(40), BOOK,
                                                          1700000000000, META }))
        local ref = (SEQ[st.v] or {}).postings and rows[1][1] or id
        local acct = format("source-%010d", i)
        w(st.conn, st.T.posting, ref, 0, acct, CODE, SCALE, 1e12, id, 0)
        st.src[i] = { acct = acct, ref = ref, amount = 1e12 }
    end
    assert(st.conn:exec("COMMIT"))
end

-- ---- frames ----

-- The WAL's frames after each commit (sqlite3_wal_hook; the hook replaces SQLite's
-- automatic checkpoint, so the loop below runs it as SQLite would: PASSIVE at 1,000).
local frames_now = 0
local hook = ffi.cast("int (*)(void *, sqlite3 *, const char *, int)",
                      function(_, _, _, n) frames_now = n; return 0 end)

-- One group in one transaction, then the checkpoint SQLite would run. -> frames written
local function group(st, g)
    local before = frames_now
    assert(st.conn:exec("BEGIN IMMEDIATE"))
    for _ = 1, g do transfer(st, (st.next % opts.sources) + 1); st.next = st.next + 1 end
    assert(st.conn:exec("COMMIT"))
    local written = frames_now >= before and frames_now - before or frames_now
    -- (a checkpoint that copied the whole WAL lets the next commit start it again)
    if frames_now >= 1000 then assert(st.conn:exec("PRAGMA wal_checkpoint(PASSIVE)")) end
    return written
end
jit.off(group) -- (the hook is a callback from inside an FFI call: never from a trace)

local function new_state(v, k)
    local path = format("%s/bench-sqlite-keys-%d-%s-%d.db", dir, uv.os_getpid(), v, k)
    local st = { v = v, path = path, conn = open(v, path), T = texts(v), src = {}, seq = 0,
                 next = 0 }
    sc.lib().sqlite3_wal_hook(st.conn.db, hook, nil)
    fund(st)
    -- the prefill: the ledger's size at which its random leaves are mostly its own
    assert(st.conn:exec("PRAGMA synchronous = OFF"))
    local left = opts.prefill
    while left > 0 do
        local g = math.min(1000, left)
        group(st, g)
        left = left - g
    end
    assert(st.conn:exec("PRAGMA wal_checkpoint(TRUNCATE)"))
    assert(st.conn:exec("PRAGMA synchronous = FULL"))
    frames_now = 0
    return st
end

-- One measured run of variant v: groups for opts.seconds -> figures
local function run(v, k)
    local st = new_state(v, k)
    local n, frames = 0, 0
    local t0, c0 = uv.hrtime(), B.cpu_s(1)
    local t_end = t0 + opts.seconds * 1e9
    while uv.hrtime() < t_end do
        frames = frames + group(st, opts.group)
        n = n + opts.group
    end
    local wall, cpu = (uv.hrtime() - t0) / 1e9, B.cpu_s(1) - c0
    st.conn:close()
    for _, suf in ipairs { "", "-wal", "-shm" } do os.remove(st.path .. suf) end
    return { per_s = n / wall, frames = frames / n, cpu_us = cpu * 1e6 / n,
             wall_us = wall * 1e6 / n, n = n }
end

local function mean(list, f)
    local s = 0
    for _, x in ipairs(list) do s = s + x[f] end
    return s / #list
end

math.randomseed(opts.seed)
print(format("bench-sqlite-keys: seed %d, prefill %d transfers, groups of %d, %d sources, "
             .. "credits of 1..%d, %d s a run, %d rounds, load %s", opts.seed, opts.prefill,
             opts.group, opts.sources, opts.amounts, opts.seconds, opts.rounds, B.loadavg()))
local variants = opts.variants
assert(variants[1] == "store", "--variants: store first (the baseline)")
local got = {}
for _, v in ipairs(variants) do
    assert(v == "store" or v == "noclaim" or SEQ[v], "--variants: unknown " .. v)
    got[v] = {}
end
for r = 1, opts.rounds do
    local order = {}
    for i = 1, #variants do order[i] = variants[r % 2 == 1 and i or #variants + 1 - i] end
    for _, v in ipairs(order) do
        local x = run(v, r)
        got[v][#got[v] + 1] = x
        print(format("  round %d %-8s %6.0f transfers/s  %5.2f frames/transfer  %6.1f us CPU, "
                     .. "%6.1f us wall a transfer (%d transfers)", r, v, x.per_s, x.frames,
                     x.cpu_us, x.wall_us, x.n))
    end
end
local base = mean(got.store, "per_s")
for _, v in ipairs(variants) do
    local ps, fr, cpu = mean(got[v], "per_s"), mean(got[v], "frames"), mean(got[v], "cpu_us")
    print(format("%-8s %6.0f transfers/s  %5.2f frames/transfer  %6.1f us CPU a transfer  "
                 .. "ratio %.2f of store", v, ps, fr, cpu, ps / base))
    emit(format('{"bench":"sqlite-keys","name":"%s","params":{"prefill":%d,"group":%d,'
                .. '"sources":%d,"amounts":%d,"seconds":%d,"rounds":%d,"seed":%d},"per_s":%.1f,'
                .. '"frames_per_transfer":%.2f,"cpu_us_per_transfer":%.1f,"baseline":"store",'
                .. '"baseline_per_s":%.1f,"ratio":%.3f,"loadavg":"%s"}', v, opts.prefill,
                opts.group, opts.sources, opts.amounts, opts.seconds, opts.rounds, opts.seed, ps,
                fr, cpu, base, ps / base, B.loadavg()))
end
