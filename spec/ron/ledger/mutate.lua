-- The mutation suite's parts (issue 24 §2, docs/LEDGER.md "What verify proves"): a real
-- workload over any store, and SQLite mutations of every table and column of what it wrote.
--
--   local M = require("ron.ledger.mutate")
--   local info = M.workload(store)        -- transfers with change, rejections, a reversal, a
--                                         -- capped account, freeze/unfreeze, a batch, the
--                                         -- wallet's key rows, usage rated by ron.ledger.exporter
--   M.verify(store) -> problems { { where, what } }, sum
--   M.cases(conn) -> the mutations of a SQLite file (conn: its ron.ledger.store.sqlite drv)
--   M.named(problems, case) -> the problem naming the case's table and key, or nil
local S = require("support")
local L = require("ron.ledger.ledger")
local codec = require("ron.ledger.codec")
local events = require("ron.ledger.events")
local ledger = require("ron.ledger")
local scan = require("ron.ledger.store.scan")
local usage = require("ron.ledger.usage")
local verify = require("ron.ledger.verify")
local rows = require("ron.ledger.verify.rows")

local format, hex = string.format, ledger.hex

local M = {}

local USD = { code = "USD", scale = 2 }
M.USD = USD
local function id16(c) return c:rep(16) end
M.EXT, M.A, M.B, M.K, M.Z = id16("E"), id16("A"), id16("B"), id16("K"), id16("Z")
M.CLOCK = 1700000000123

local function mv(from, to, amount) return { from = from, to = to, asset = USD, amount = amount } end
M.mv = mv

-- A wallet-shaped request: its Idempotency-Key row, then the commit naming it (service.lua).
local function wallet(led, store, key, nonce, movements)
    local h = codec.sha256(key .. nonce)
    assert(store:put_intent("wlt:k:p:" .. key, { status = "claimed", message = nonce,
                                                  body_hash = h }))
    return led:commit { intent = "wlt:n:p:" .. nonce, body_hash = h, keys = { "wlt:k:p:" .. key },
                        movements = movements }
end

-- Usage rated through ron.ledger.exporter: a tenant with an empty wallet, so its charges go to
-- its receivable (a usage.shortfall event each).
local function rated(store)
    local acct = require("ron.accounting")
    local lexp = require("ron.ledger.exporter")
    local card = assert(require("ron.ledger.rate").new({
        version = "spec.1", currency = USD, period = "month",
        dimensions = { bytes = { per = 1000, free = 10, tiers = { { price = 3 } } } } },
        "spec card"))
    local e = assert(lexp.new { store = store, card = card, book = "main", node = "wl-rate" })
    local clock = S.clock(S.T0 + 5)
    local m = assert(acct.open(S.cfg { clock = clock.fn }))
    for i = 1, 2 do
        clock.now = S.T0 + 60 * (i - 1) + 5
        assert(m:record(S.TENANT_A, "alice", "bytes", 5000 * i))
        for _, s in ipairs(assert(m:rollover(S.T0 + 60 * i))) do
            local r, err = e:put(s)
            assert(r == "ok", err)
        end
    end
    m:close()
    e:close()
end

function M.workload(store)
    local led = L.new { store = store, book = "main", node = "wl", nonce = "w",
                        clock = function() return M.CLOCK end }
    assert(store:create_book("main", "created by the mutation suite"))
    assert(led:create_account { id = M.EXT, policy = "uncapped" })
    for _, id in ipairs { M.A, M.B, M.Z } do assert(led:create_account { id = id }) end
    assert(led:create_account { id = M.K, policy = "capped", floor = -500 })
    assert(led:commit { intent = "dep-a", movements = { mv(M.EXT, M.A, 1000) } })
    local pay = assert(wallet(led, store, "K1", "1", { mv(M.A, M.B, 300) }))
    assert((wallet(led, store, "K2", "2", { mv(M.A, M.B, 5000) })) == nil) -- rejected
    assert(store:put_intent("wlt:k:p:K3", { status = "claimed", message = "3",
                                            body_hash = codec.sha256("K3") })) -- no outcome
    assert(led:commit { intent = "cap-1", movements = { mv(M.K, M.B, 400) } })
    assert((led:commit { intent = "cap-2", movements = { mv(M.K, M.B, 400) } }) == nil)
    assert(led:reverse(pay.transfer_id, "rev-1"))
    assert(led:freeze(M.B))
    assert(led:unfreeze(M.B))
    assert(led:freeze(M.Z))
    local res = led:commit_many {
        { intent = "b-1", movements = { mv(M.A, M.B, 10) } },
        { intent = "b-2", movements = { mv(M.A, M.B, 99999) } },
        { intent = "b-3", movements = { mv(M.A, M.B, 20) } } }
    assert(res[1][1] and res[3][1] and not res[2][1])
    assert(led:commit { intent = "dep-b", movements = { mv(M.EXT, M.B, 50) } })
    rated(store)
    return { led = led }
end

function M.verify(store, opts)
    local problems = {}
    opts = opts or {}
    opts.book = "main"
    opts.report = function(where, what) problems[#problems + 1] = { where = where, what = what } end
    local sum = verify.run(store, opts)
    return problems, sum
end

function M.text(problems)
    local out = {}
    for i, p in ipairs(problems) do out[i] = p.where .. ": " .. p.what end
    return table.concat(out, "\n")
end

-- ---- SQLite mutations ----

-- How verify names a row of each table (its key).
local KEY = {
    ledger_meta = function(r) return tostring(r.key) end,
    books = function(r) return tostring(r.id) end,
    accounts = function(r) return format("%s v%d", hex(r.id), r.version) end,
    postings = function(r) return format("%s:%d", hex(r.transfer_id), r.idx) end,
    balances = function(r)
        return format("%s %s/%d shard %d", hex(r.account), r.asset_code, r.scale, r.shard)
    end,
    heads = function(r) return format("%s %s/%d", hex(r.account), r.asset_code, r.scale) end,
    transfers = function(r) return hex(r.id) end,
    transfer_accounts = function(r) return format("%s n%d", hex(r.account), r.n) end,
    intents = function(r) return rows.key_text(r.key) end,
    sagas = function(r) return tostring(r.id) end,
    events = function(r) return format("seq %d", r.seq) end,
    usage_streams = function(r) return rows.stream_name(r.tenant, r.dimension) end,
}

-- The kind of a row, as ron.ledger.verify.inputs' entries name them.
local CLAIM = ("\255"):rep(256)
local function kind_of(tbl, r, named)
    if tbl == "ledger_meta" then return r.key == "flush" and "flush" or r.key end
    if tbl == "postings" then return r.status == 2 and "inactive" or "active" end
    if tbl == "balances" then return r.amount == 0 and "zero" or "nonzero" end
    if tbl == "accounts" then return r.version == 1 and "first" or "later" end
    if tbl == "events" then return r.kind end
    if tbl == "intents" then
        if r.key:sub(1, 256) == CLAIM then return "claim" end
        if r.status ~= "claimed" then return r.status end
        return named[r.key] and "named-key" or "unnamed-key"
    end
    return "any"
end

local function flipped(v, ty)
    if v == nil then return ty == "i" and 1 or "\1" end
    if type(v) ~= "string" then return v + 1 end
    if v == "" then return "\1" end
    return v:sub(1, -2) .. string.char((v:byte(-1) + 1) % 256)
end
M.flipped = flipped

-- The keys the feed's events name besides their intents (the wallet's key rows).
local function named_keys(conn)
    local out = {}
    for _, r in ipairs(conn:read("SELECT data FROM events WHERE kind IN (CAST('transfer' AS "
                                 .. "BLOB), CAST('rejection' AS BLOB))", { n = 0 })) do
        local d = events.decode(r[1])
        for _, k in ipairs(d and d.keys or {}) do out[k] = true end
    end
    return out
end

local function same(_, v) return v end
local function ident(c) return c end

-- A table's rows with how a case reaches each (_phys: the table, the columns that find the
-- row, _id their values): the rowid, or the key of a WITHOUT ROWID table (SQLite's intents
-- and transfer_accounts since schema 4).
local function rows_of(conn, tbl)
    local s = scan.TABLES[tbl]
    local names = {}
    for i, c in ipairs(s.cols) do names[i] = c[1] end
    local ddl = conn:read("SELECT sql FROM sqlite_master WHERE name = CAST(? AS TEXT)",
                         { n = 1, tbl })[1]
    local ids = (ddl and ddl[1]:find("WITHOUT ROWID", 1, true)) and s.key or { "rowid" }
    local ph = { table = tbl, ids = ids, col = ident, val = same }
    local out = {}
    for _, r in ipairs(conn:read(format("SELECT %s, %s FROM %s ORDER BY %s",
                                        table.concat(ids, ", "), table.concat(names, ", "), tbl,
                                        table.concat(ids, ", ")), { n = 0 })) do
        local row = { _phys = ph, _id = {} }
        for i = 1, #ids do row._id[i] = r[i] end
        for i, n in ipairs(names) do row[n] = r[i + #ids] end
        out[#out + 1] = row
    end
    return out, names
end

-- SQLite keeps the engine's claims in `claims` (schema 4, ron.ledger.store.sql_claims),
-- under their intents: verify reads them as intents rows under their claim keys, so they
-- are mutated there and named as intents rows.
local CLAIM_ROWS = { table = "claims", ids = { "intent" },
                     col = function(c) return c == "key" and "intent" or c end,
                     val = function(c, v) if c == "key" then return v:sub(257) end return v end }
local function claim_rows(conn)
    local out = {}
    for _, r in ipairs(conn:read("SELECT intent, status, transfer_id, code, message, body_hash "
                                 .. "FROM claims ORDER BY intent", { n = 0 })) do
        out[#out + 1] = { _id = { r[1] }, _phys = CLAIM_ROWS, key = CLAIM .. r[1], status = r[2],
                          transfer_id = r[3], code = r[4], message = r[5], body_hash = r[6] }
    end
    return out
end

-- One case per (table, row kind, column) flip, per (table, row kind) delete, insert and
-- duplicate: { table, kind, op, column?, keys = { texts verify may name }, sql, binds }.
function M.cases(conn)
    local named, out = named_keys(conn), {}
    M.top_seq = conn:read("SELECT max(seq) FROM events", { n = 0 })[1][1]
    for _, tbl in ipairs(scan.ORDER) do
        local list, names = rows_of(conn, tbl)
        if tbl == "intents" then
            for _, r in ipairs(claim_rows(conn)) do list[#list + 1] = r end
        end
        local types, seen = {}, {}
        for _, c in ipairs(scan.TABLES[tbl].cols) do types[c[1]] = c[2] end
        for _, r in ipairs(list) do
            local kind = kind_of(tbl, r, named)
            if not seen[kind] then
                seen[kind] = true
                M.row_cases(out, tbl, kind, r, names, types)
            end
        end
    end
    return out
end

function M.row_cases(out, tbl, kind, r, names, types)
    local key = KEY[tbl]
    local ph = r._phys
    local where = {}
    for i, c in ipairs(ph.ids) do where[i] = c .. " = ?" end
    where = table.concat(where, " AND ")
    local function by_id(b)
        for _, v in ipairs(r._id) do
            b.n = b.n + 1
            b[b.n] = v
        end
        return b
    end
    local cols = {}
    for i, n in ipairs(names) do cols[i] = ph.col(n) end
    local marks = ("?, "):rep(#names):sub(1, -3)
    local insert = format("INSERT INTO %s (%s) VALUES (%s)", ph.table, table.concat(cols, ", "),
                          marks)
    local function values(change)
        local b = { n = #names }
        for i, n in ipairs(names) do b[i] = ph.val(n, r[n]) end
        for i, n in ipairs(names) do if change[n] ~= nil then b[i] = ph.val(n, change[n]) end end
        return b
    end
    local keycols = scan.TABLES[tbl].key
    for _, col in ipairs(names) do
        local new = {}
        for k, v in pairs(r) do new[k] = v end
        new[col] = flipped(r[col], types[col])
        out[#out + 1] = { table = tbl, kind = kind, op = "flip", column = col,
                          keys = { key(r), key(new) },
                          sql = format("UPDATE %s SET %s = ? WHERE %s", ph.table,
                                       ph.col(col), where),
                          binds = by_id { n = 1, ph.val(col, new[col]) } }
    end
    out[#out + 1] = { table = tbl, kind = kind, op = "delete", keys = { key(r) },
                      sql = format("DELETE FROM %s WHERE %s", ph.table, where),
                      binds = by_id { n = 0 } }
    -- a new row: the key (and transfers' id, events' transfer id) flipped; transfers take
    -- the next n
    local change = {}
    for _, k in ipairs(keycols) do change[k] = flipped(r[k], types[k]) end
    if tbl == "transfers" then change.n, change.id = 1000000, flipped(r.id, "b") end
    if tbl == "events" then -- (the book kept: an event at the feed's end, of nothing stored)
        change = { seq = M.top_seq + 1, transfer_id = flipped(r.transfer_id) }
    end
    local new = {}
    for k, v in pairs(r) do new[k] = v end
    for k, v in pairs(change) do new[k] = v end
    out[#out + 1] = { table = tbl, kind = kind, op = "insert", keys = { key(new) }, sql = insert,
                      binds = values(change) }
    out[#out + 1] = { table = tbl, kind = kind, op = "duplicate", keys = { key(r) },
                      sql = insert, binds = values {} }
end

-- Does text hold key k as a whole word (not "seq 1" inside "seq 12")?
local function holds(text, k)
    local i = 1
    while true do
        local a, b = text:find(k, i, true)
        if not a then return false end
        if not text:sub(b + 1, b + 1):match("[%w]") then return true end
        i = a + 1
    end
end

-- The problem that names the case: where = its table and one of its keys, or (a row that
-- names another: an event of a missing transfer) a problem whose text holds its key.
function M.named(problems, case)
    for _, p in ipairs(problems) do
        for _, k in ipairs(case.keys) do
            if (p.where:sub(1, #case.table + 1) == case.table .. " " and holds(p.where, k))
               or holds(p.what, k) then
                return p
            end
        end
    end
    return nil
end

M.hex = hex
M.usage = usage
return M
