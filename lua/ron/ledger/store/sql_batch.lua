-- ron.ledger.store.sql_batch: the batch primitives of ron.ledger.store.sql (LED-51).
local base = require("ron.ledger.store.sql_base")
local claims = require("ron.ledger.store.sql_claims")
local sql_binds = require("ron.ledger.store.sql_binds")
local block = require("ron.ledger.store.sql_block")

local misuse, bytes_arg, int_arg, asset_arg, list_arg, amount, write, read, posting_row,
      POSTING_T, event_row, EVENT_T, PSTATUS =
      base.misuse, base.bytes_arg, base.int_arg, base.asset_arg, base.list_arg, base.amount,
      base.write, base.read, base.posting_row, base.POSTING_T, base.event_row, base.EVENT_T,
      base.PSTATUS

local type, tostring, ipairs =
      type, tostring, ipairs

local _M = {}
local sqlite_append -- (below)
-- the methods, installed on the Store class by ron.ledger.store.sql
local Store = {}
_M.methods = Store

-- batch primitives (LED-51) -----------------------------------------------------------------
-- What the engine's commit_many and the exporter's put_many use so that the round trips are
-- per batch, not per request. Each is ONE statement (store_transfers on SQLite: two in one
-- transaction, like store_transfer); bounded per call like the others (the caller chunks).

_M.MAX_PAIR_QUERIES = 128  -- get_postings_by_pairs (SQLite: <= 500 compound SELECTs)
_M.MAX_TRANSFER_PARAMS = sql_binds.MAX_TRANSFER_PARAMS

-- -> { [key] = outcome + key } (absent keys absent). SQLite: the claim keys are read from
-- `claims` (ron.ledger.store.sql_claims), the others from the intents table.
function Store:get_intents(keys)
    list_arg("get_intents", keys, "keys")
    local out = {}
    if #keys == 0 then return out end
    for _, k in ipairs(keys) do bytes_arg("get_intents", k, "key") end
    local plain, held = claims.split(self, keys)
    for _, part in ipairs { { "get_intents", plain }, { "get_claims", held, claims.key } } do
        local name, list, key_of = part[1], part[2], part[3]
        if #list > 0 then
            local binds = { n = #list }
            for i, k in ipairs(list) do binds[i] = k end
            local rows, err, class = read(self, name, #list, binds, "bbbibb")
            if not rows then return nil, err, class end
            for _, r in ipairs(rows) do
                local k = key_of and key_of(r[1]) or r[1]
                out[k] = { key = k, status = r[2], transfer_id = r[3], code = amount(r[4]),
                           message = r[5], body_hash = r[6] }
            end
        end
    end
    return out
end

-- list = { { key =, outcome = { status, transfer_id?, code?, message?, body_hash? } } }
-- -> n stored (a key already present keeps its first outcome and counts 0). SQLite: the
-- claims go to `claims`; a list of both kinds is two statements in one transaction. (The
-- offloaded SQLite driver's form: two binds blocks, the intents' and the claims'.)
function Store:put_intents(list, held_block)
    local pb, hb, np, nh
    if block.is(list) then
        pb, hb, np, nh = block.pair(list, held_block)
    else
        local plain, held = sql_binds.intents_split(self, list)
        np, nh = #plain, #held
        pb = np > 0 and sql_binds.intents(plain)
        hb = nh > 0 and sql_binds.intents(held, function(k) return claims.intent_of(self, k) end)
    end
    if nh == 0 then
        if np == 0 then return 0 end
        return write(self, "put_intents", np, pb)
    end
    if np == 0 then return write(self, "put_claims", nh, hb) end
    return self.drv:atomic(function()
        local n, err, class = write(self, "put_intents", np, pb)
        if not n then return nil, err, class end
        local m, err2, class2 = write(self, "put_claims", nh, hb)
        if not m then return nil, err2, class2 end
        return n + m
    end)
end

-- queries = { { account =, asset =, status =, limit = }, ... } -> { [i] = postings of
-- query i, largest first (amount descending, then id ascending: selection's order) }
function Store:get_postings_by_pairs(queries)
    list_arg("get_postings_by_pairs", queries, "queries", _M.MAX_PAIR_QUERIES)
    local out = {}
    for i = 1, #queries do out[i] = {} end
    if #queries == 0 then return out end
    local binds, k = { n = #queries * 5 }, 0
    for _, q in ipairs(queries) do
        if type(q) ~= "table" then misuse("get_postings_by_pairs", "a query is a table") end
        binds[k + 1] = bytes_arg("get_postings_by_pairs", q.account, "account", 16)
        asset_arg("get_postings_by_pairs", q.asset)
        binds[k + 2], binds[k + 3] = q.asset.code, q.asset.scale
        local st = PSTATUS[q.status or "active"]
        if not st then misuse("get_postings_by_pairs", "unknown status " .. tostring(q.status)) end
        binds[k + 4] = st
        binds[k + 5] = int_arg("get_postings_by_pairs", q.limit or base.MAX_BATCH, "limit")
        k = k + 5
    end
    local rows, err, class = read(self, "get_postings_by_pairs", #queries, binds,
                                  "i" .. POSTING_T)
    if not rows then return nil, err, class end
    for _, r in ipairs(rows) do
        local q = amount(r[1])
        local l = out[q]
        l[#l + 1] = posting_row { r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11] }
    end
    local function less(a, b)
        if a.amount ~= b.amount then return a.amount > b.amount end
        if a.id.transfer_id ~= b.id.transfer_id then return a.id.transfer_id < b.id.transfer_id end
        return a.id.index < b.id.index
    end
    for i = 1, #queries do table.sort(out[i], less) end
    return out
end

-- list = { { id =, consumed_by = }, ... }: PendingInactive with reservation rid -> Inactive,
-- each consumed by its own transfer. -> n
function Store:deactivate_many(list, rid)
    if block.is(list) then return write(self, "deactivate_many", block.rows(list), list) end
    list_arg("deactivate_many", list, "postings")
    if #list == 0 then return 0 end
    return write(self, "deactivate_many", #list, sql_binds.deactivate(list, rid))
end

-- list = { { rec = { id, bytes, intent, book, created_at_ms, metadata }, involved = {...} } }
-- -> n transfers stored (present ones count 0); the rows and their transfer_accounts rows
-- are atomic as in store_transfer. (The offloaded SQLite driver's form: two binds blocks,
-- the transfers' and their transfer_accounts rows'.)
function Store:store_transfers(list, accounts_block)
    local tb, ab, n, m
    if block.is(list) then
        tb, ab, n, m = block.pair(list, accounts_block)
    else
        tb, ab, m = sql_binds.transfers(list)
        n = #list
    end
    if n == 0 then return 0 end
    if self.dialect == "postgres" then
        local k = tb.n
        for i = 1, 2 * m do tb[k + i] = ab[i] end
        tb.n = k + 2 * m
        local rows, err, class = read(self, "store_transfers_pg", n, tb, "i", m)
        if not rows then return nil, err, class end
        return amount(rows[1][1])
    end
    return self.drv:atomic(function()
        local c0, err, class = write(self, "store_transfers", n, tb)
        if not c0 or c0 == 0 or m == 0 then return c0, err, class end
        local c, err2, class2 = write(self, "store_transfers_accounts", m, ab)
        if not c then return nil, err2, class2 end
        return c0
    end)
end

-- SQLite, inside its (exclusive: BEGIN IMMEDIATE) transaction: the events of the list's
-- transfers already there, the book's max, then ONE plain INSERT of the others numbered
-- max+1, max+2, ... in the list's order (a pair twice in the list: its first). No other
-- writer runs meanwhile, so nothing is skipped; a duplicate would fail the statement (a bug,
-- never a gap). Against the numbering inside one statement (a window function over the
-- list and a NOT EXISTS probe per row: 11 us per event in a wallet group, 3 us the plain
-- INSERT; issue 25, bench-wallet --pool-profile).
function sqlite_append(self, book, list)
    local q = { book, n = #list + 1 }
    for i, e in ipairs(list) do q[i + 1] = e.transfer_id end
    local rows, err, class = read(self, "events_present", #list, q, "bb")
    if not rows then return nil, err, class end
    local there = {}
    for _, r in ipairs(rows) do there[r[1] .. "\0" .. r[2]] = true end
    local m
    m, err, class = read(self, "append_events_max", nil, { n = 1, book }, "i")
    if not m then return nil, err, class end
    local max, binds, n = amount(m[1][1]), { n = 0 }, 0
    for _, e in ipairs(list) do
        local k = e.transfer_id .. "\0" .. e.kind
        if not there[k] then
            there[k] = true
            local j = 5 * n
            binds[j + 1], binds[j + 2], binds[j + 3] = book, max + n + 1, e.transfer_id
            binds[j + 4], binds[j + 5] = e.kind, e.data
            n = n + 1
        end
    end
    if n == 0 then return 0 end
    binds.n = 5 * n
    local c
    c, err, class = write(self, "append_events_numbered", n, binds)
    if not c then return nil, err, class end
    return c, max + 1
end

-- list = { { transfer_id =, kind =, data = }, ... } -> n, first_seq: the rows whose (book,
-- transfer, kind) is not there yet take seqs max+1, max+2, ... of the book in the list's
-- order, in one statement (gapless: the numbering skips the present ones); first_seq is
-- the first inserted row's seq (n > 0), so with n = #list the seqs are first_seq ..
-- first_seq + n - 1 without a read. A row whose seq a racing insert took is skipped
-- (counts short): get_events_for tells which, the caller appends those again. (SQLite:
-- the INSERT and a read of the book's max in one transaction.)
function Store:append_events(book, list)
    bytes_arg("append_events", book, "book")
    list_arg("append_events", list, "events")
    if #list == 0 then return 0 end
    local binds, k = { book }, 1
    for i, e in ipairs(list) do
        if type(e) ~= "table" then misuse("append_events", "each is { transfer_id =, kind = }") end
        binds[k + 1] = i
        binds[k + 2] = bytes_arg("append_events", e.transfer_id, "transfer_id")
        binds[k + 3] = bytes_arg("append_events", e.kind, "kind")
        binds[k + 4] = e.data
        k = k + 4
    end
    binds[k + 1], binds[k + 2] = book, book
    binds.n = k + 2
    if self.dialect == "postgres" then
        local rows, err, class = read(self, "append_events_pg", #list, binds, "ii")
        if not rows then return nil, err, class end
        local n = amount(rows[1][1])
        return n, n > 0 and amount(rows[1][2]) or nil
    end
    return self.drv:atomic(function() return sqlite_append(self, book, list) end)
end

-- -> { [transfer_id] = event } of one kind
function Store:get_events_for(book, transfer_ids, kind)
    bytes_arg("get_events_for", book, "book")
    bytes_arg("get_events_for", kind, "kind")
    list_arg("get_events_for", transfer_ids, "transfer ids")
    local out = {}
    if #transfer_ids == 0 then return out end
    local binds = { book, kind, n = #transfer_ids + 2 }
    for i, t in ipairs(transfer_ids) do
        binds[i + 2] = bytes_arg("get_events_for", t, "transfer_id")
    end
    local rows, err, class = read(self, "get_events_for", #transfer_ids, binds, EVENT_T)
    if not rows then return nil, err, class end
    for _, r in ipairs(rows) do out[r[3]] = event_row(r) end
    return out
end

local function stream_key(tenant, dim) return tenant .. "\0" .. dim end
_M.stream_key = stream_key

-- pairs = { { tenant =, dimension = } } -> { [tenant .. "\0" .. dimension] = { seq, b3 } }
function Store:get_streams(pairs_)
    list_arg("get_streams", pairs_, "streams")
    local out = {}
    if #pairs_ == 0 then return out end
    local binds = { n = #pairs_ * 2 }
    for i, p in ipairs(pairs_) do
        binds[2 * i - 1] = bytes_arg("get_streams", p.tenant, "tenant")
        binds[2 * i] = bytes_arg("get_streams", p.dimension, "dimension")
    end
    local rows, err, class = read(self, "get_streams", #pairs_, binds, "bbib")
    if not rows then return nil, err, class end
    for _, r in ipairs(rows) do out[stream_key(r[1], r[2])] = { seq = amount(r[3]), b3 = r[4] } end
    return out
end

-- list = { { tenant, dimension, seq, b3 } }: each stream's first head (insert once). -> n
function Store:insert_streams(list)
    if block.is(list) then return write(self, "insert_streams", block.rows(list), list) end
    local binds = sql_binds.streams("insert_streams", list, 4)
    if #list == 0 then return 0 end
    return write(self, "insert_streams", #list, binds)
end

-- list = { { tenant, dimension, seq, b3, prev_seq, prev_b3 } }: each head moves only from
-- exactly (prev_seq, prev_b3) (LED-25), at most one entry per stream. -> n moved
function Store:advance_streams(list)
    if block.is(list) then return write(self, "advance_streams", block.rows(list), list) end
    local binds = sql_binds.streams("advance_streams", list, 6)
    if #list == 0 then return 0 end
    return write(self, "advance_streams", #list, binds)
end

return _M
