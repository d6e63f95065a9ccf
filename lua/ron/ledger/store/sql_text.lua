-- ron.ledger.store.sql_text: the statement texts of ron.ledger.store.sql, per dialect: BUILD
-- (the SQLite/generic form of each primitive, built per list length), PG_ARRAY (PostgreSQL's
-- list primitives with one array parameter per column) and NOW_MS (the store's clock inside a
-- statement). Parameters are written "?b"/"?i" ("?B"/"?I": arrays), tables "@name";
-- ron.ledger.store.sql_base renders them per dialect and caches them per store.
local concat, rep = table.concat, string.rep

local _M = {}

local function values_list(n, tuple)
    local one = "(" .. tuple .. ")"
    return rep(one, n, ",")
end

-- "rowid IN (...)": the rows of tbl whose key columns cols equal one of n tuples (tuple:
-- their placeholders), found by one index probe per tuple. SQLite (3.40) plans the plain
-- `(a, b) IN (VALUES (?, ?), (?, ?), ...)` of two tuples or more as a scan of the whole
-- table (of its key index), so a batch's reserve and its reads of 16 inputs each read every
-- posting of the ledger: a cost that grew with the ledger, not with the keys asked (issue 25;
-- spec/ron/ledger/store_plan_spec.lua checks every statement's plan). The same rows as the
-- IN form: a key listed twice still names its row once. SQLite only (PostgreSQL has the
-- PG_ARRAY forms); tbl is a rowid table.
local function rows_keyed(tbl, cols, tuple, n)
    local on = {}
    for i, c in ipairs(cols) do on[i] = "t." .. c .. " = v.column" .. i end
    return "rowid IN (SELECT t.rowid FROM (VALUES " .. values_list(n, tuple) .. ") AS v "
           .. "CROSS JOIN " .. tbl .. " t WHERE " .. concat(on, " AND ") .. ")"
end
local POSTING_KEY = { "transfer_id", "idx" }
local BALANCE_KEY = { "account", "asset_code", "scale" }

local POSTING_COLS = "transfer_id, idx, account, asset_code, scale, amount, status, reservation, "
                     .. "created_by, consumed_by"
local POSTING_TUPLE = "?b,?i,?b,?b,?i,?i,?i,?b,?b,?b,?i"
local ACCOUNT_COLS = "id, version, policy, floor, status, bytes"
local TRANSFER_COLS = "n, id, bytes, intent, book, created_at_ms, metadata"

-- The balance guards (LED-72's floors, the credited pairs' ceilings) over n pairs: a pair's
-- balance summed over its shards against its bound (op).
local function sqlite_count_balances(n, op)
    return "WITH q (a, c, s, m) AS (VALUES " .. values_list(n, "?b,?b,?i,?i") .. ") "
           .. "SELECT count(*) FROM q WHERE coalesce((SELECT sum(b.amount) FROM @balances b "
           .. "WHERE b.account = q.a AND b.asset_code = q.c AND b.scale = q.s), 0) " .. op
           .. " q.m"
end

local BUILD = {
    create_book = function()
        return "INSERT INTO @books (id, meta) VALUES (?b, ?b) ON CONFLICT DO NOTHING"
    end,
    get_book = function() return "SELECT id, meta FROM @books WHERE id = ?b" end,
    list_books = function() return "SELECT id, meta FROM @books ORDER BY id" end,

    create_account = function()
        return "INSERT INTO @accounts (" .. ACCOUNT_COLS .. ") VALUES (?b, 1, ?i, ?i, ?i, ?b) "
               .. "ON CONFLICT DO NOTHING"
    end,
    -- LED-17: only version max+1 goes in; a gap, an overwrite or a race counts 0.
    append_account_version = function()
        return "INSERT INTO @accounts (" .. ACCOUNT_COLS .. ") SELECT ?b, ?i, ?i, ?i, ?i, ?b "
               .. "WHERE (SELECT max(version) FROM @accounts WHERE id = ?b) = ?i "
               .. "ON CONFLICT DO NOTHING"
    end,
    get_account = function()
        return "SELECT " .. ACCOUNT_COLS .. " FROM @accounts WHERE id = ?b "
               .. "ORDER BY version DESC LIMIT 1"
    end,
    get_accounts = function(n)
        return "SELECT " .. ACCOUNT_COLS .. " FROM @accounts a WHERE id IN (VALUES "
               .. values_list(n, "?b") .. ") AND version = "
               .. "(SELECT max(version) FROM @accounts b WHERE b.id = a.id)"
    end,
    get_account_history = function()
        return "SELECT " .. ACCOUNT_COLS .. " FROM @accounts WHERE id = ?b ORDER BY version"
    end,
    list_accounts = function()
        return "SELECT " .. ACCOUNT_COLS .. " FROM @accounts a WHERE version = "
               .. "(SELECT max(version) FROM @accounts b WHERE b.id = a.id) ORDER BY id"
    end,

    insert_postings = function(n)
        return "INSERT INTO @postings (" .. POSTING_COLS .. ", shard) VALUES "
               .. values_list(n, POSTING_TUPLE) .. " ON CONFLICT DO NOTHING"
    end,
    reserve_postings = function(n)
        return "UPDATE @postings SET status = 1, reservation = ?b WHERE status = 0 AND "
               .. rows_keyed("@postings", POSTING_KEY, "?b,?i", n)
    end,
    release_postings = function(n)
        return "UPDATE @postings SET status = 0, reservation = NULL WHERE status = 1 AND "
               .. "reservation = ?b AND " .. rows_keyed("@postings", POSTING_KEY, "?b,?i", n)
    end,
    deactivate_reserved = function(n)
        return "UPDATE @postings SET status = 2, consumed_by = ?b WHERE status = 1 AND "
               .. "reservation = ?b AND " .. rows_keyed("@postings", POSTING_KEY, "?b,?i", n)
    end,
    deactivate_active = function(n)
        return "UPDATE @postings SET status = 2, consumed_by = ?b WHERE status = 0 AND "
               .. rows_keyed("@postings", POSTING_KEY, "?b,?i", n)
    end,
    get_postings = function(n)
        return "SELECT " .. POSTING_COLS .. " FROM @postings WHERE "
               .. rows_keyed("@postings", POSTING_KEY, "?b,?i", n) .. " ORDER BY transfer_id, idx"
    end,
    -- key: bit 1 asset, bit 2 status, bit 4 limit, bit 8 largest first
    get_postings_by_account = function(k)
        local s = { "SELECT " .. POSTING_COLS .. " FROM @postings WHERE account = ?b" }
        if k % 2 == 1 then s[#s + 1] = " AND asset_code = ?b AND scale = ?i" end
        if math.floor(k / 2) % 2 == 1 then s[#s + 1] = " AND status = ?i" end
        if math.floor(k / 8) % 2 == 1 then
            s[#s + 1] = " ORDER BY amount DESC, transfer_id, idx"
        else
            s[#s + 1] = " ORDER BY transfer_id, idx"
        end
        if math.floor(k / 4) % 2 == 1 then s[#s + 1] = " LIMIT ?i" end
        return concat(s)
    end,

    get_balances = function(n)
        return "SELECT account, asset_code, scale, CAST(sum(amount) AS BIGINT) FROM @balances "
               .. "WHERE " .. rows_keyed("@balances", BALANCE_KEY, "?b,?b,?i", n)
               .. " GROUP BY account, asset_code, scale"
    end,

    -- the one-transaction commit's guards (LED-72): one count each
    count_accounts_at = function(n)
        return "WITH q (id, v) AS (VALUES " .. values_list(n, "?b,?i") .. ") SELECT count(*) "
               .. "FROM q WHERE (SELECT max(version) FROM @accounts a WHERE a.id = q.id) = q.v"
    end,
    count_balances_at_least = function(n) return sqlite_count_balances(n, ">=") end,
    count_balances_at_most = function(n) return sqlite_count_balances(n, "<=") end,

    ensure_head = function()
        return "INSERT INTO @heads (account, asset_code, scale, version, holder) "
               .. "VALUES (?b, ?b, ?i, 0, NULL) ON CONFLICT DO NOTHING"
    end,
    acquire_head = function()
        return "UPDATE @heads SET holder = ?b, version = version + 1 WHERE account = ?b AND "
               .. "asset_code = ?b AND scale = ?i AND holder IS NULL"
    end,
    release_head = function()
        return "UPDATE @heads SET holder = NULL WHERE account = ?b AND asset_code = ?b AND "
               .. "scale = ?i AND holder = ?b"
    end,
    get_heads = function(n)
        return "SELECT account, asset_code, scale, version, holder FROM @heads WHERE "
               .. rows_keyed("@heads", BALANCE_KEY, "?b,?b,?i", n)
    end,

    -- PostgreSQL: the transfer row and its involved-account rows in one statement.
    store_transfer_pg = function(n)
        local s = "WITH ins AS (INSERT INTO @transfers (id, bytes, intent, book, created_at_ms, "
                  .. "metadata) VALUES (?b, ?b, ?b, ?b, ?i, ?b) ON CONFLICT DO NOTHING "
                  .. "RETURNING n)"
        if n > 0 then
            s = s .. ", acc AS (INSERT INTO @transfer_accounts (account, n) SELECT v.a, ins.n "
                .. "FROM ins, (VALUES " .. values_list(n, "?b") .. ") AS v (a) "
                .. "ON CONFLICT DO NOTHING RETURNING 1)"
        end
        return s .. " SELECT count(*) FROM ins"
    end,
    store_transfer = function()
        return "INSERT INTO @transfers (id, bytes, intent, book, created_at_ms, metadata) "
               .. "VALUES (?b, ?b, ?b, ?b, ?i, ?b) ON CONFLICT DO NOTHING"
    end,
    store_transfer_accounts = function(n)
        return "INSERT INTO @transfer_accounts (account, n) SELECT v.column1, t.n FROM (VALUES "
               .. values_list(n, "?b") .. ") AS v, @transfers t WHERE t.id = ?b "
               .. "ON CONFLICT DO NOTHING"
    end,
    get_transfer = function()
        return "SELECT " .. TRANSFER_COLS .. " FROM @transfers WHERE id = ?b"
    end,
    get_transfers_for_account = function(before)
        return "SELECT t.n, t.id, t.bytes, t.intent, t.book, t.created_at_ms, t.metadata "
               .. "FROM @transfer_accounts a JOIN @transfers t ON t.n = a.n WHERE a.account = ?b"
               .. (before == 1 and " AND a.n < ?i" or "") .. " ORDER BY a.n DESC LIMIT ?i"
    end,
    list_transfers = function()
        return "SELECT " .. TRANSFER_COLS .. " FROM @transfers WHERE n > ?i ORDER BY n LIMIT ?i"
    end,

    put_intent = function()
        return "INSERT INTO @intents (key, status, transfer_id, code, message, body_hash) "
               .. "VALUES (?b, ?b, ?b, ?i, ?b, ?b) ON CONFLICT DO NOTHING"
    end,
    get_intent = function()
        return "SELECT key, status, transfer_id, code, message, body_hash FROM @intents "
               .. "WHERE key = ?b"
    end,

    save_saga = function()
        return "INSERT INTO @sagas (id, phase, data, node) VALUES (?b, ?b, ?b, ?b) "
               .. "ON CONFLICT (id) DO UPDATE SET phase = excluded.phase, data = excluded.data, "
               .. "node = excluded.node"
    end,
    list_pending_sagas = function(by_node)
        return "SELECT id, phase, data, node FROM @sagas"
               .. (by_node == 1 and " WHERE node = ?b" or "") .. " ORDER BY id"
    end,
    list_finalizing_sagas = function()
        return "SELECT id, phase, data, node FROM @sagas WHERE phase = ?b ORDER BY id"
    end,
    delete_saga = function() return "DELETE FROM @sagas WHERE id = ?b" end,

    -- LED-22: the next seq of the book in the same statement; a racing insert that took
    -- the seq, or the same (book, transfer, kind) already there, makes it count 0.
    append_event = function()
        return "INSERT INTO @events (book, seq, transfer_id, kind, data) "
               .. "SELECT ?b, coalesce(max(seq), 0) + 1, ?b, ?b, ?b FROM @events WHERE book = ?b "
               .. "ON CONFLICT DO NOTHING"
    end,
    get_event = function()
        return "SELECT book, seq, transfer_id, kind, data FROM @events WHERE book = ?b AND "
               .. "transfer_id = ?b AND kind = ?b"
    end,
    get_events_since = function()
        return "SELECT book, seq, transfer_id, kind, data FROM @events WHERE book = ?b AND "
               .. "seq > ?i ORDER BY seq LIMIT ?i"
    end,
    head_seq = function()
        return "SELECT CAST(coalesce(max(seq), 0) AS BIGINT) FROM @events WHERE book = ?b"
    end,

    get_stream = function()
        return "SELECT seq, b3 FROM @usage_streams WHERE tenant = ?b AND dimension = ?b"
    end,
    insert_stream = function()
        return "INSERT INTO @usage_streams (tenant, dimension, seq, b3) VALUES (?b, ?b, ?i, ?b) "
               .. "ON CONFLICT DO NOTHING"
    end,
    advance_stream = function()
        return "UPDATE @usage_streams SET seq = ?i, b3 = ?b WHERE tenant = ?b AND dimension = ?b "
               .. "AND seq = ?i AND b3 = ?b"
    end,

    -- ---- batch primitives (LED-51): still ONE statement each, its count the answer ----
    get_intents = function(n)
        return "SELECT key, status, transfer_id, code, message, body_hash FROM @intents "
               .. "WHERE key IN (VALUES " .. values_list(n, "?b") .. ")"
    end,
    put_intents = function(n)
        return "INSERT INTO @intents (key, status, transfer_id, code, message, body_hash) "
               .. "VALUES " .. values_list(n, "?b, ?b, ?b, ?i, ?b, ?b") .. " ON CONFLICT DO NOTHING"
    end,
    -- SQLite: the engine's claims, under their intents (ron.ledger.store.sql_claims)
    get_claims = function(n)
        return "SELECT intent, status, transfer_id, code, message, body_hash FROM @claims "
               .. (n == 1 and "WHERE intent = ?b"
                   or "WHERE intent IN (VALUES " .. values_list(n, "?b") .. ")")
    end,
    put_claims = function(n)
        return "INSERT INTO @claims (intent, status, transfer_id, code, message, body_hash) "
               .. "VALUES " .. values_list(n, "?b, ?b, ?b, ?i, ?b, ?b") .. " ON CONFLICT DO NOTHING"
    end,
    -- n queries, each an index range scan with its own LIMIT (UNION ALL: SQLite has no
    -- LATERAL); q = the query's number, so rows are told apart whatever order comes back.
    get_postings_by_pairs = function(n)
        local s = {}
        for i = 1, n do
            s[i] = "SELECT * FROM (SELECT CAST(" .. i .. " AS BIGINT) AS q, " .. POSTING_COLS
                   .. " FROM @postings WHERE account = ?b AND asset_code = ?b AND scale = ?i "
                   .. "AND status = ?i ORDER BY amount DESC, transfer_id, idx LIMIT ?i) AS s" .. i
        end
        return concat(s, " UNION ALL ")
    end,
    -- each input its own consuming transfer: UPDATE ... FROM a VALUES list
    deactivate_many = function(n)
        return "UPDATE @postings SET status = 2, consumed_by = v.c FROM (SELECT column1 AS t, "
               .. "column2 AS i, column3 AS c FROM (VALUES " .. values_list(n, "?b,?i,?b")
               .. ") AS x) AS v WHERE @postings.transfer_id = v.t AND @postings.idx = v.i "
               .. "AND @postings.status = 1 AND @postings.reservation = ?b"
    end,
    store_transfers_pg = function(n, m)
        local s = "WITH ins AS (INSERT INTO @transfers (id, bytes, intent, book, created_at_ms, "
                  .. "metadata) VALUES " .. values_list(n, "?b, ?b, ?b, ?b, ?i, ?b")
                  .. " ON CONFLICT DO NOTHING RETURNING id, n)"
        if m > 0 then
            s = s .. ", acc AS (INSERT INTO @transfer_accounts (account, n) SELECT v.a, ins.n "
                .. "FROM ins JOIN (SELECT column1 AS t, column2 AS a FROM (VALUES "
                .. values_list(m, "?b,?b") .. ") AS x) AS v ON v.t = ins.id "
                .. "ON CONFLICT DO NOTHING RETURNING 1)"
        end
        return s .. " SELECT count(*) FROM ins"
    end,
    store_transfers = function(n)
        return "INSERT INTO @transfers (id, bytes, intent, book, created_at_ms, metadata) "
               .. "VALUES " .. values_list(n, "?b, ?b, ?b, ?b, ?i, ?b") .. " ON CONFLICT DO NOTHING"
    end,
    store_transfers_accounts = function(m)
        return "INSERT INTO @transfer_accounts (account, n) SELECT v.column2, t.n FROM (VALUES "
               .. values_list(m, "?b,?b") .. ") AS v JOIN @transfers t ON t.id = v.column1 "
               .. "ON CONFLICT DO NOTHING"
    end,
    -- LED-22 in batch: consecutive seqs after the book's max, in the list's order.
    -- PostgreSQL: the same INSERT, its count and first seq (RETURNING) in one statement
    append_events_pg = function(n)
        return "WITH ins AS (" .. _M.BUILD.append_events(n) .. " RETURNING seq) "
               .. "SELECT count(*), coalesce(min(seq), 0) FROM ins"
    end,
    -- SQLite's append_events (sql_batch): which of the list's transfers have events of the
    -- book already, then a plain INSERT with the seqs numbered by the caller
    events_present = function(n)
        return "SELECT transfer_id, kind FROM @events WHERE book = ?b AND transfer_id IN "
               .. "(VALUES " .. values_list(n, "?b") .. ")"
    end,
    append_events_numbered = function(n)
        return "INSERT INTO @events (book, seq, transfer_id, kind, data) VALUES "
               .. values_list(n, "?b, ?i, ?b, ?b, ?b")
    end,
    append_events_max = function()
        return "SELECT coalesce(max(seq), 0) FROM @events WHERE book = ?b"
    end,
    append_events = function(n)
        return "INSERT INTO @events (book, seq, transfer_id, kind, data) "
               .. "SELECT ?b, m.s + row_number() OVER (ORDER BY v.column1), v.column2, v.column3, "
               .. "v.column4 FROM (VALUES " .. values_list(n, "?i,?b,?b,?b") .. ") AS v, "
               .. "(SELECT coalesce(max(seq), 0) AS s FROM @events WHERE book = ?b) AS m "
               .. "WHERE NOT EXISTS (SELECT 1 FROM @events e WHERE e.book = ?b AND "
               .. "e.transfer_id = v.column2 AND e.kind = v.column3) ON CONFLICT DO NOTHING"
    end,
    get_events_for = function(n)
        return "SELECT book, seq, transfer_id, kind, data FROM @events WHERE book = ?b AND "
               .. "kind = ?b AND transfer_id IN (VALUES " .. values_list(n, "?b")
               .. ") ORDER BY seq"
    end,
    get_streams = function(n)
        return "SELECT tenant, dimension, seq, b3 FROM @usage_streams WHERE "
               .. rows_keyed("@usage_streams", { "tenant", "dimension" }, "?b,?b", n)
    end,
    insert_streams = function(n)
        return "INSERT INTO @usage_streams (tenant, dimension, seq, b3) VALUES "
               .. values_list(n, "?b, ?b, ?i, ?b") .. " ON CONFLICT DO NOTHING"
    end,
    advance_streams = function(n)
        return "UPDATE @usage_streams SET seq = v.s, b3 = v.b FROM (SELECT column1 AS t, "
               .. "column2 AS d, column3 AS s, column4 AS b, column5 AS ps, column6 AS pb FROM "
               .. "(VALUES " .. values_list(n, "?b,?b,?i,?b,?i,?b") .. ") AS x) AS v WHERE "
               .. "@usage_streams.tenant = v.t AND @usage_streams.dimension = v.d AND "
               .. "@usage_streams.seq = v.ps AND @usage_streams.b3 = v.pb"
    end,

    get_meta = function() return "SELECT value FROM @ledger_meta WHERE key = ?b" end,
    put_meta = function()
        return "INSERT INTO @ledger_meta (key, value) VALUES (?b, ?b) ON CONFLICT DO NOTHING"
    end,

    -- ---- node leases (LED-71): {now_ms} is the store's clock (render) ----
    -- a new row (epoch 1), or the row when it is free, expired or this node's own (a
    -- restart: the earlier process of the node is dead): epoch + 1, owner, expiry
    lease_acquire = function()
        return "INSERT INTO @leases AS l (node, epoch, owner, expires_ms) VALUES (?b, 1, ?b, "
               .. "{now_ms} + ?i) ON CONFLICT (node) DO UPDATE SET epoch = l.epoch + 1, "
               .. "owner = excluded.owner, expires_ms = excluded.expires_ms WHERE l.owner IS "
               .. "NULL OR l.owner = excluded.owner OR l.expires_ms < {now_ms} RETURNING epoch"
    end,
    lease_renew = function()
        return "UPDATE @leases SET expires_ms = {now_ms} + ?i WHERE node = ?b AND epoch = ?i "
               .. "AND owner = ?b"
    end,
    -- SQLite (one writer at a time); PostgreSQL runs @rl_lease_take (schema.lua): the same
    -- UPDATE under the node's exclusive advisory lock
    lease_takeover = function()
        return "UPDATE @leases SET epoch = epoch + 1, owner = ?b, expires_ms = {now_ms} + ?i "
               .. "WHERE node = ?b AND epoch = ?i AND expires_ms = ?i AND expires_ms < {now_ms}"
    end,
    lease_takeover_pg = function() return "SELECT @rl_lease_take(?b, ?i, ?i, ?b, ?i)" end,
    lease_release = function()
        return "UPDATE @leases SET owner = NULL, expires_ms = NULL WHERE node = ?b AND "
               .. "epoch = ?i AND owner = ?b"
    end,
    list_leases = function()
        return "SELECT node, epoch, owner, expires_ms, {now_ms} FROM @leases ORDER BY node"
    end,
    -- a phase's guard: PostgreSQL reads the row under the node's shared advisory lock, after
    -- taking it (@rl_lease_held), so a takeover waits for the phases in flight and every
    -- later phase of the fenced epoch counts 0
    check_lease = function()
        return "SELECT count(*) FROM @leases WHERE node = ?b AND epoch = ?i AND owner = ?b"
    end,
    check_lease_pg = function()
        return "SELECT count(*) FROM (SELECT 1 WHERE @rl_lease_held(?b, ?i)) AS h"
    end,
}

-- The store's clock in milliseconds, inside a statement (the leases': every node reads one
-- clock, so no two nodes' clocks need to agree).
local NOW_MS = {
    sqlite = "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)",
    postgres = "CAST(extract(epoch FROM clock_timestamp()) * 1000 AS bigint)",
}
_M.NOW_MS = NOW_MS

_M.BUILD = BUILD

-- PostgreSQL: the list primitives with one ARRAY parameter per column ("?B" bytea[], "?I"
-- bigint[]) instead of a VALUES list of n tuples: `unnest(...)`, `= ANY(...)`. The text is
-- the same whatever the list's length, so the server parses and plans a few hundred bytes
-- instead of thousands of parameters (a 512-posting insert was 5632 of them), and the
-- driver sends one binary array per column instead of one parameter per value (the semantics
-- are the VALUES forms' above, statement for statement; the conformance suite runs both).
-- The Store methods build their binds once, as for SQLite: `at` leading scalars, then the
-- list's tuples (one group per entry of `groups`, each tuple's column types; n tuples, and
-- n2 for the second group), then trailing scalars; pg_binds turns the tuples into columns.
-- A list parameter's rows as the planner should count them. It counts unnest(...) of a
-- parameter as 10 rows (it cannot see the array), the list at hand as its length: a prepared
-- statement's generic plan then costs about ten of the custom plans, so the server keeps
-- planning each execution (plan_cache_mode auto), and for 10 keys a hash join over a scan of
-- a small table (postings, balances) beats as many index probes, a cost that grows with the
-- table. A range on the list's ORDINALITY, always true, has the planner's default range
-- selectivity (0.5%): 1 row in either plan, so both probe the primary key per key and the
-- server keeps the generic plan (issue 25; spec "generic plans" in store_host_spec.lua). A
-- guard that filters its list through a subquery per key filters the list first (OFFSET 0:
-- not merged into one filter, which the planner costs per unfiltered row).
local FEW = " BETWEEN 1 AND 4294967295"
_M.FEW = FEW

-- The balance guards (LED-72's floors, the credited pairs' ceilings): a pair's balance,
-- summed over its shards (numeric: no overflow), against its bound; the list filtered
-- first (OFFSET 0) so a generic plan counts it as one row and probes the key per pair.
local function count_balances(op)
    return { at = 0, groups = { "bbii" }, sql =
        "SELECT count(*) FROM (SELECT * FROM unnest(?B, ?B, ?I, ?I) WITH ORDINALITY AS "
        .. "q (a, c, s, m, o) WHERE q.o" .. FEW .. " OFFSET 0) AS q WHERE coalesce((SELECT "
        .. "sum(b.amount) FROM @balances b WHERE b.account = q.a AND b.asset_code = q.c AND "
        .. "b.scale = q.s), 0) " .. op .. " q.m" }
end
local POSTING_KEYS = "(SELECT q.t, q.i FROM unnest(?B, ?I) WITH ORDINALITY AS q (t, i, o) "
                     .. "WHERE q.o" .. FEW .. ")"
-- The rows of a key list as their ctids, each one probe of the primary key (a LATERAL with
-- LIMIT 1 is never turned into a join). The UPDATEs of postings by key filter on a status
-- (and a reservation), and with the keys as an IN list the generic plan a new ledger's
-- connection made while the table was empty found its rows through the status instead:
-- a scan of the postings, or of selection's index for every posting of that status, kept
-- as the table grew until an ANALYZE (issue 25: the single commit's consume scanned 4,000
-- postings a commit in bench-ledger-commit-pg, 1.2 ms of its 2.4 ms of server time;
-- store_host_spec "generic plans made on a new ledger"). The rows are then taken by ctid
-- (a Tid Scan per key, the join's inner side), and the conditions checked again on the row
-- the UPDATE locks: a row another transaction changed meanwhile is skipped, and the
-- statement's count says so. The same for the streams' compare-and-set (a hash join over
-- a scan of every stream, planned so). u: tbl (default postings), its key condition on
-- the list's columns q.* (default the posting's), list (the unnest's parameters) and
-- names (its columns), cols (the list's columns the statement reads, as v.*), set, where.
-- (A scalar the caller gives before the list stays before it in the text: the
-- reservation of release and consume is a column of the keys' subquery, v.res.)
local function update_by_key(u)
    local t = "@" .. (u.tbl or "postings")
    return "UPDATE " .. t .. " SET " .. u.set .. " FROM (SELECT " .. (u.cols or "")
           .. "p.ctid AS r FROM unnest(" .. (u.list or "?B, ?I") .. ") WITH ORDINALITY AS q ("
           .. (u.names or "t, i") .. ", o) CROSS JOIN LATERAL (SELECT ctid FROM " .. t
           .. " WHERE " .. (u.key or "transfer_id = q.t AND idx = q.i") .. " LIMIT 1) AS p "
           .. "WHERE q.o" .. FEW .. ") AS v WHERE " .. t .. ".ctid = v.r AND " .. u.where
end
local RESERVED = "@postings.status = 1 AND @postings.reservation = v.res"

local PG_ARRAY = {
    insert_postings = { plain = true, at = 0, groups = { "bibbiiibbbi" }, sql =
        "INSERT INTO @postings (" .. POSTING_COLS .. ", shard) SELECT * FROM unnest(?B, ?I, ?B, "
        .. "?B, ?I, ?I, ?I, ?B, ?B, ?B, ?I) ON CONFLICT DO NOTHING" },
    reserve_postings = { at = 1, groups = { "bi" }, sql = update_by_key {
        set = "status = 1, reservation = ?b", where = "@postings.status = 0" } },
    release_postings = { at = 1, groups = { "bi" }, sql = update_by_key {
        set = "status = 0, reservation = NULL", cols = "?b AS res, ", where = RESERVED } },
    deactivate_reserved = { at = 2, groups = { "bi" }, sql = update_by_key {
        set = "status = 2, consumed_by = ?b", cols = "?b AS res, ", where = RESERVED } },
    deactivate_active = { at = 1, groups = { "bi" }, sql = update_by_key {
        set = "status = 2, consumed_by = ?b", where = "@postings.status = 0" } },
    get_postings = { at = 0, groups = { "bi" }, sql =
        "SELECT " .. POSTING_COLS .. " FROM @postings WHERE (transfer_id, idx) IN "
        .. POSTING_KEYS .. " ORDER BY transfer_id, idx" },
    -- Point reads as one index probe per key (LATERAL ... LIMIT: never turned into a join):
    -- a semi join may scan the whole table instead (the balance rows of hot accounts carry
    -- many dead versions while batches update them: 0.3 ms per get_balances of 13 pairs with
    -- 64 lanes), a cost that grows with the table, not with the keys asked (LED-19). A key
    -- asked twice answers twice (the callers map the rows by key).
    get_accounts = { at = 0, groups = { "b" }, sql =
        "SELECT a.* FROM unnest(?B) AS q (id) CROSS JOIN LATERAL (SELECT " .. ACCOUNT_COLS
        .. " FROM @accounts WHERE id = q.id ORDER BY version DESC LIMIT 1) AS a" },
    get_balances = { at = 0, groups = { "bbi" }, sql =
        "SELECT q.a, q.c, q.s, (SELECT CAST(sum(b.amount) AS BIGINT) FROM @balances b "
        .. "WHERE b.account = q.a AND b.asset_code = q.c AND b.scale = q.s) "
        .. "FROM unnest(?B, ?B, ?I) AS q (a, c, s)" },
    count_accounts_at = { at = 0, groups = { "bi" }, sql =
        "SELECT count(*) FROM (SELECT * FROM unnest(?B, ?I) WITH ORDINALITY AS q (id, v, o) "
        .. "WHERE q.o" .. FEW .. " OFFSET 0) AS q WHERE (SELECT max(version) FROM "
        .. "@accounts a WHERE a.id = q.id) = q.v" },
    count_balances_at_least = count_balances(">="),
    count_balances_at_most = count_balances("<="),
    get_heads = { at = 0, groups = { "bbi" }, sql =
        "SELECT h.* FROM unnest(?B, ?B, ?I) AS q (a, c, s) CROSS JOIN LATERAL "
        .. "(SELECT account, asset_code, scale, version, holder FROM @heads WHERE account = q.a "
        .. "AND asset_code = q.c AND scale = q.s LIMIT 1) AS h" },
    -- the same probe per key (a batch asks ~2 keys per slice, mostly absent: = ANY planned
    -- 21.7 us of server time per slice in the daemon-shaped bench, growing with the table)
    get_intents = { at = 0, groups = { "b" }, sql =
        "SELECT i.* FROM unnest(?B) AS q (k) CROSS JOIN LATERAL (SELECT key, status, "
        .. "transfer_id, code, message, body_hash FROM @intents WHERE key = q.k LIMIT 1) AS i" },
    put_intents = { plain = true, at = 0, groups = { "bbbibb" }, sql =
        "INSERT INTO @intents (key, status, transfer_id, code, message, body_hash) "
        .. "SELECT * FROM unnest(?B, ?B, ?B, ?I, ?B, ?B) ON CONFLICT DO NOTHING" },
    -- each query its own index range scan with its own LIMIT (LATERAL), numbered by its
    -- position like the UNION ALL form
    get_postings_by_pairs = { at = 0, groups = { "bbiii" }, sql =
        "SELECT q.o, p.* FROM unnest(?B, ?B, ?I, ?I, ?I) WITH ORDINALITY AS q (a, c, s, st, l, o) "
        .. "CROSS JOIN LATERAL (SELECT " .. POSTING_COLS .. " FROM @postings WHERE account = q.a "
        .. "AND asset_code = q.c AND scale = q.s AND status = q.st "
        .. "ORDER BY amount DESC, transfer_id, idx LIMIT q.l) AS p" },
    -- (each consumer a column of the list: v.c)
    deactivate_many = { at = 0, groups = { "bib" }, sql = update_by_key {
        set = "status = 2, consumed_by = v.c", list = "?B, ?I, ?B", names = "t, i, c",
        cols = "q.c, ", where = "@postings.status = 1 AND @postings.reservation = ?b" } },
    -- The account rows of the transfers this statement inserted, under the numbers it just
    -- drew: no other row can hold them, so a plain INSERT (DISTINCT: an account listed
    -- twice) without ON CONFLICT, whose speculative insertion cost a probe and a WAL
    -- record more per row (5 rows per usage slice; 10.4 -> ms per 1875 rows).
    store_transfers_pg = { plain = true, at = 0, groups = { "bbbbib", "bb" }, sql =
        "WITH ins AS (INSERT INTO @transfers (id, bytes, intent, book, created_at_ms, metadata) "
        .. "SELECT * FROM unnest(?B, ?B, ?B, ?B, ?I, ?B) ON CONFLICT DO NOTHING RETURNING id, n), "
        .. "acc AS (INSERT INTO @transfer_accounts (account, n) SELECT DISTINCT v.a, ins.n "
        .. "FROM ins JOIN unnest(?B, ?B) AS v (t, a) ON v.t = ins.id RETURNING 1) "
        .. "SELECT count(*) FROM ins" },
    -- "not there yet" is one probe of the (book, transfer_id, kind) index per row (a
    -- LATERAL with LIMIT 1 is never turned into a join): a NOT EXISTS became a hash anti
    -- join over every event of the book, a cost that grew with the book's history (20 of
    -- the 32 ms of 1024 events after 30k).
    append_events_pg = { plain = true, at = 1, groups = { "ibbb" }, sql =
        "WITH ins AS (INSERT INTO @events (book, seq, transfer_id, kind, data) "
        .. "SELECT ?b, m.s + row_number() OVER (ORDER BY v.o), v.t, v.k, v.d "
        .. "FROM unnest(?I, ?B, ?B, ?B) AS v (o, t, k, d) "
        .. "CROSS JOIN (SELECT coalesce(max(seq), 0) AS s FROM @events WHERE book = ?b) AS m "
        .. "LEFT JOIN LATERAL (SELECT 1 AS x FROM @events e WHERE e.book = ?b AND "
        .. "e.transfer_id = v.t AND e.kind = v.k LIMIT 1) AS ex ON true WHERE ex.x IS NULL "
        .. "ON CONFLICT DO NOTHING RETURNING seq) "
        .. "SELECT count(*), coalesce(min(seq), 0) FROM ins" },
    get_events_for = { at = 2, groups = { "b" }, sql =
        "SELECT book, seq, transfer_id, kind, data FROM @events WHERE book = ?b AND "
        .. "kind = ?b AND transfer_id = ANY(?B) ORDER BY seq" },
    get_streams = { at = 0, groups = { "bb" }, sql =
        "SELECT u.* FROM unnest(?B, ?B) AS q (t, d) CROSS JOIN LATERAL (SELECT tenant, "
        .. "dimension, seq, b3 FROM @usage_streams WHERE tenant = q.t AND dimension = q.d "
        .. "LIMIT 1) AS u" },
    insert_streams = { at = 0, groups = { "bbib" }, sql =
        "INSERT INTO @usage_streams (tenant, dimension, seq, b3) SELECT * FROM "
        .. "unnest(?B, ?B, ?I, ?B) ON CONFLICT DO NOTHING" },
    advance_streams = { at = 0, groups = { "bbibib" }, sql = update_by_key {
        tbl = "usage_streams", set = "seq = v.s, b3 = v.b", list = "?B, ?B, ?I, ?B, ?I, ?B",
        names = "t, d, s, b, ps, pb", key = "tenant = q.t AND dimension = q.d",
        cols = "q.s, q.b, q.ps, q.pb, ",
        where = "@usage_streams.seq = v.ps AND @usage_streams.b3 = v.pb" } },
}
_M.PG_ARRAY = PG_ARRAY

return _M
