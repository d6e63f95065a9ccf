-- ron.ledger.store.scan: every row of every table of a ledger store, as stored, in key
-- order, a page at a time: what `ledger verify` reads (docs/LEDGER.md "What verify
-- proves"). Read only; not a hot path (the engine never scans).
--
--   store:scan(table, after, limit) -> { row, ... } | nil, err, class
--     table  one of scan.TABLES' names; after = nil (from the start) or the `_key` of the
--            last row of the previous page; a page shorter than limit is the last
--     row    { column = value, ..., _key = { key values } }: bytes as strings, integers as
--            the store reads them (LED-4), NULL as nil; statuses, policies, kinds as their
--            stored integers (nothing decoded: a hostile value stays visible)
--
-- The SQL stores run one keyset-paged SELECT per page (the key is each table's primary key,
-- so no row is skipped or read twice while the schema holds: verify checks the schema
-- too); the memory store builds the same rows from its maps (spec/ron/ledger: verify on
-- every backend).
local codes = require("ron.ledger.codes")
local claims = require("ron.ledger.store.sql_claims")
local schema = require("ron.ledger.store.schema")

local concat, format, ipairs, sort, type = table.concat, string.format, ipairs, table.sort, type

local _M = {}

-- name -> { key = { columns }, cols = { { name, "b" | "i" } } } (the columns of
-- ron.ledger.store.schema, in its order)
local function t(key, cols)
    local c = {}
    for name, ty in cols:gmatch("([%w_]+) (%a)") do c[#c + 1] = { name, ty } end
    return { key = key, cols = c }
end
_M.TABLES = {
    ledger_meta = t({ "key" }, "key b, value b"),
    books = t({ "id" }, "id b, meta b"),
    accounts = t({ "id", "version" }, "id b, version i, policy i, floor i, status i, bytes b"),
    postings = t({ "transfer_id", "idx" }, "transfer_id b, idx i, account b, asset_code b, "
                 .. "scale i, amount i, status i, reservation b, created_by b, consumed_by b, "
                 .. "shard i"),
    balances = t({ "account", "asset_code", "scale", "shard" },
                 "account b, asset_code b, scale i, shard i, amount i"),
    heads = t({ "account", "asset_code", "scale" },
              "account b, asset_code b, scale i, version i, holder b"),
    transfers = t({ "n" }, "n i, id b, bytes b, intent b, book b, created_at_ms i, metadata b"),
    transfer_accounts = t({ "account", "n" }, "account b, n i"),
    intents = t({ "key" }, "key b, status b, transfer_id b, code i, message b, body_hash b"),
    sagas = t({ "id" }, "id b, phase b, data b, node b"),
    events = t({ "book", "seq" }, "book b, seq i, transfer_id b, kind b, data b"),
    usage_streams = t({ "tenant", "dimension" }, "tenant b, dimension b, seq i, b3 b"),
}
_M.ORDER = { "ledger_meta", "books", "accounts", "postings", "balances", "heads", "transfers",
             "transfer_accounts", "intents", "sagas", "events", "usage_streams" }

local function spec_of(name)
    local s = _M.TABLES[name]
    if not s then error("ron.ledger.store: scan: unknown table " .. tostring(name), 3) end
    return s
end

local function with_key(row, s)
    local k = {}
    for i, c in ipairs(s.key) do k[i] = row[c] end
    row._key = k
    return row
end

-- ---- the SQL stores ----

local function select_text(name, s, paged)
    local cols, types, keys, marks = {}, {}, {}, {}
    for i, c in ipairs(s.cols) do cols[i], types[i] = c[1], c[2] end
    for i, k in ipairs(s.key) do
        keys[i] = k
        for _, c in ipairs(s.cols) do if c[1] == k then marks[i] = "?" .. c[2] end end
    end
    local where = ""
    if paged then
        where = format(" WHERE (%s) > (%s)", concat(keys, ", "), concat(marks, ", "))
    end
    return format("SELECT %s FROM @%s%s ORDER BY %s LIMIT ?i", concat(cols, ", "), name, where,
                  concat(keys, ", ")), concat(types)
end

-- SQLite's claims table (ron.ledger.store.sql_claims): scanned as the intents rows it holds
local CLAIMS = t({ "intent" }, "intent b, status b, transfer_id b, code i, message b, body_hash b")

local function page_of(store, name, s, after, limit, sql)
    local ck = "scan:" .. name .. (after and ":after" or "")
    local text = store.sql_cache[ck]
    local types = s.types
    if not text then
        local raw
        raw, types = select_text(name, s, after ~= nil)
        text = sql.render(store.dialect, store.prefix, raw)
        store.sql_cache[ck], s.types = text, types
    end
    local binds = { n = 0 }
    for _, v in ipairs(after or {}) do
        binds.n = binds.n + 1
        binds[binds.n] = v
    end
    binds.n = binds.n + 1
    binds[binds.n] = limit or 1000
    local rows, err, class = store.drv:read(text, binds, types)
    if not rows then return nil, err, class end
    local out = {}
    for i, r in ipairs(rows) do
        local row = {}
        for j, c in ipairs(s.cols) do
            local v = r[j]
            if c[2] == "i" and type(v) ~= "string" then v = sql.amount(v) end
            row[c[1]] = v
        end
        out[i] = with_key(row, s)
    end
    return out
end

-- SQLite's intents: the intents table's rows, then the claims' (every claim key sorts after
-- every intent: no intent is 256 bytes long), each under its claim key.
local function sqlite_intents(store, after, limit, sql)
    local s, out = _M.TABLES.intents, {}
    limit = limit or 1000
    local from = after and claims.intent_of(store, after[1])
    if not from then
        local err, class
        out, err, class = page_of(store, "intents", s, after, limit, sql)
        if not out or #out >= limit then return out, err, class end
    end
    local rows, err, class = page_of(store, "claims", CLAIMS, from and { from }, limit - #out, sql)
    if not rows then return nil, err, class end
    for _, r in ipairs(rows) do
        local k = claims.key(r.intent)
        out[#out + 1] = with_key({ key = k, status = r.status, transfer_id = r.transfer_id,
                                   code = r.code, message = r.message, body_hash = r.body_hash }, s)
    end
    return out
end

-- sql: ron.ledger.store.sql, the caller (it requires this module: handed over, not required)
function _M.sql(store, name, after, limit, sql)
    local s = spec_of(name)
    if name == "intents" and store.dialect == "sqlite" then
        return sqlite_intents(store, after, limit, sql)
    end
    return page_of(store, name, s, after, limit, sql)
end

-- ---- the memory store: the same rows from its maps ----

local PSTATUS, POLICY, ASTATUS = codes.PSTATUS, codes.POLICY, codes.ASTATUS

local BUILD = {}
function BUILD.ledger_meta(m, out)
    for k, v in pairs(m.meta) do out[#out + 1] = { key = k, value = v } end
end
function BUILD.books(m, out)
    for id, b in pairs(m.books) do out[#out + 1] = { id = id, meta = b.meta } end
end
function BUILD.accounts(m, out)
    for _, h in pairs(m.accounts) do
        for _, a in ipairs(h) do
            out[#out + 1] = { id = a.id, version = a.version, policy = POLICY[a.policy],
                              floor = a.floor, status = ASTATUS[a.status], bytes = a.bytes }
        end
    end
end
function BUILD.postings(m, out)
    local shards = schema.SHARDS
    for _, p in pairs(m.postings) do
        out[#out + 1] = { transfer_id = p.id.transfer_id, idx = p.id.index, account = p.account,
                          asset_code = p.asset.code, scale = p.asset.scale, amount = p.amount,
                          status = PSTATUS[p.status], reservation = p.reservation,
                          created_by = p.created_by, consumed_by = p.consumed_by,
                          shard = (p.id.index + p.id.transfer_id:byte(1)) % shards }
    end
end
function BUILD.balances(m, out)
    for account, per in pairs(m.balances) do
        for _, b in pairs(per) do
            for s, v in pairs(b.shards) do -- (a shard never touched: no row, as in SQL)
                if v ~= 0 then
                    out[#out + 1] = { account = account, asset_code = b.asset.code,
                                      scale = b.asset.scale, shard = s, amount = v }
                end
            end
        end
    end
end
function BUILD.heads(m, out)
    for _, h in pairs(m.heads) do
        out[#out + 1] = { account = h.account, asset_code = h.asset.code, scale = h.asset.scale,
                          version = h.version, holder = h.holder }
    end
end
function BUILD.transfers(m, out)
    for _, r in pairs(m.transfers) do
        out[#out + 1] = { n = r.n, id = r.id, bytes = r.bytes, intent = r.intent, book = r.book,
                          created_at_ms = r.created_at_ms or 0, metadata = r.metadata }
    end
end
function BUILD.transfer_accounts(m, out)
    for a, l in pairs(m.transfers_by_account) do
        for _, tid in ipairs(l) do out[#out + 1] = { account = a, n = m.transfers[tid].n } end
    end
end
function BUILD.intents(m, out)
    for k, o in pairs(m.intents) do
        out[#out + 1] = { key = k, status = o.status, transfer_id = o.transfer_id, code = o.code,
                          message = o.message, body_hash = o.body_hash }
    end
end
function BUILD.sagas(m, out)
    for id, s in pairs(m.sagas) do
        out[#out + 1] = { id = id, phase = s.phase, data = s.data, node = s.node }
    end
end
function BUILD.events(m, out)
    for _, l in pairs(m.events) do
        for _, e in ipairs(l) do
            out[#out + 1] = { book = e.book, seq = e.seq, transfer_id = e.transfer_id,
                              kind = e.kind, data = e.data }
        end
    end
end
function BUILD.usage_streams(m, out)
    for k, h in pairs(m.streams) do
        local tenant, dim = k:sub(1, 16), k:sub(18) -- (the memory store's tenant \0 dim)
        out[#out + 1] = { tenant = tenant, dimension = dim, seq = h.seq, b3 = h.b3 }
    end
end

local function key_less(a, b)
    for i = 1, #a do
        if a[i] ~= b[i] then return a[i] < b[i] end
    end
    return false
end

function _M.memory(m, name, after, limit)
    local s = spec_of(name)
    local all = {}
    BUILD[name](m, all)
    for _, r in ipairs(all) do with_key(r, s) end
    sort(all, function(a, b) return key_less(a._key, b._key) end)
    local out = {}
    for _, r in ipairs(all) do
        if (not after or key_less(after, r._key)) and #out < (limit or 1000) then
            out[#out + 1] = r
        end
    end
    return out
end

-- Every row of a table, paged (a caller that wants them all): -> list | nil, err, class
-- The rows of table `name` one at a time, read a page of `page` (1000) at a time in key
-- order (nothing of the table is held but the page): -> next() -> row | nil (the end) |
-- false, err, class (cannot read; nil after it).
function _M.cursor(store, name, page)
    page = page or 1000
    local rows, i, after, last = {}, 1, nil, false
    return function()
        if not rows[i] then
            if last then return nil end
            local got, err, class = store:scan(name, after, page)
            if not got then
                last, rows = true, {}
                return false, err, class
            end
            rows, i, last = got, 1, #got < page
            after = got[#got] and got[#got]._key
            if not rows[1] then return nil end
        end
        i = i + 1
        return rows[i - 1]
    end
end

-- Every row of table `name`: -> { row, ... } | nil, err, class
function _M.all(store, name, page)
    local out, next_row = {}, _M.cursor(store, name, page)
    while true do
        local r, err, class = next_row()
        if r == nil then return out end
        if r == false then return nil, err, class end
        out[#out + 1] = r
    end
end

return _M
