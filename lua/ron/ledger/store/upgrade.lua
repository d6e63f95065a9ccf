-- ron.ledger.store.upgrade: schema version 3 (LED-68): every account version and every
-- stored rejection is an event of the feed (ron.ledger.events). A store written by an older
-- version holds account versions and rejections that no event names; open() upgrades it
-- once, inside its migration's transaction (SQLite: BEGIN IMMEDIATE; PostgreSQL: one
-- transaction under the migration's advisory lock), by appending to each book's feed:
--
--   1. one `ledger.upgrade` event (id events.UPGRADE_ID, data "schema 3"): the marker that
--      tells verify where the feed's older events end (they carry no body hash and no
--      created_at_ms: docs/LEDGER.md "What verify proves");
--   2. one `account` event per account version, in (id, version) order;
--   3. one `rejection` event per stored rejection, in intent order.
--
-- Then the version row says 3. The rows are taken as the upgrade finds them (verify checks
-- them against these events from then on). The books: those of the feed's events and of
-- the books table, else "main". A process of an older version must not write meanwhile (it
-- would take the seqs: the upgrade fails on the key and changes nothing; open again once
-- it stopped); a newer store refuses the older binaries anyway (LED-24).
--
--   upgrade.needed(v)        -> true when a store at schema version v (a string) needs it
--   upgrade.run(st)          -> true | nil, err, class   (st: a ron.ledger.store.sql store
--                               on the migration's connection, inside its transaction)
--
-- Schema version 4 (issue 25): a SQLite store keeps the engine's claims in `claims`
-- (ron.ledger.store.sql_claims), and its intents and transfer_accounts are WITHOUT ROWID;
-- open() of an older SQLite store rebuilds those two and moves the claims there from
-- intents, in the same transaction, then the version row says 4. PostgreSQL: the row only.
--
--   upgrade.older(v)         -> true when v is older than this code's version
--   upgrade.v4(st)           -> true | nil, err, class   (SQLite: intents and
--                               transfer_accounts rebuilt, the claims moved, the version
--                               row set)
local events = require("ron.ledger.events")
local scan = require("ron.ledger.store.scan")
local schema = require("ron.ledger.store.schema")
local sql = require("ron.ledger.store.sql")

local format, ipairs, rep, sort, tonumber, tostring =
      string.format, ipairs, string.rep, table.sort, tonumber, tostring

local _M = { VERSION = schema.VERSION }

local CHUNK = 200 -- rows per INSERT (5 parameters each)

_M.EVENTS = 3 -- the version whose upgrade appends the events (run)

function _M.needed(v) return v ~= nil and (tonumber(v) or 0) < _M.EVENTS end

function _M.older(v) return v ~= nil and (tonumber(v) or 0) < _M.VERSION end

-- A read-only open (LED-69) reads only a ledger of this version: v is its schema_version
-- row (nil: none), where names it. -> true | nil, err, "bug"
function _M.readable(v, where)
    if v == nil then
        return nil, format("NotALedger: %s holds no ledger (no schema_version)", where), "bug"
    end
    local ok, err = sql.check_version(v)
    if not ok then return nil, err, "bug" end
    if _M.older(v) then
        return nil, format("SchemaError: %s holds schema version %s, older than this code's "
                           .. "%d: open it once with a writing verb (e.g. `ledger recover`) to "
                           .. "upgrade it", where, tostring(v), _M.VERSION), "bug"
    end
    return true
end

local function books_of(st)
    local seen, out = {}, {}
    for _, name in ipairs { "events", "books" } do
        local rows, err, class = scan.all(st, name)
        if not rows then return nil, err, class end
        for _, r in ipairs(rows) do
            local b = name == "events" and r.book or r.id
            if not seen[b] then
                seen[b] = true
                out[#out + 1] = b
            end
        end
    end
    if #out == 0 then out[1] = "main" end
    sort(out)
    return out
end

-- The events to append to every book: the marker, the accounts', the rejections'.
local function backfill(st)
    local list = { { id = events.UPGRADE_ID, kind = events.UPGRADE, data = events.UPGRADE_DATA } }
    local accts, err, class = scan.all(st, "accounts")
    if not accts then return nil, err, class end
    for _, a in ipairs(accts) do
        list[#list + 1] = { id = events.account_id(a.bytes), kind = events.ACCOUNT, data = a.bytes }
    end
    local intents
    intents, err, class = scan.all(st, "intents")
    if not intents then return nil, err, class end
    for _, o in ipairs(intents) do
        if o.status == "rejected" then
            list[#list + 1] = { id = events.rejection_id(o.key), kind = events.REJECTION,
                                data = events.rejection_data { intent = o.key, code = o.code,
                                                               message = o.message,
                                                               body_hash = o.body_hash } }
        end
    end
    return list
end

local function insert(st, book, base, list)
    for i = 1, #list, CHUNK do
        local binds, rows = { n = 0 }, 0
        for j = i, math.min(#list, i + CHUNK - 1) do
            local e = list[j]
            for _, v in ipairs { book, base + j, e.id, e.kind, e.data } do
                binds.n = binds.n + 1
                binds[binds.n] = v
            end
            rows = rows + 1
        end
        local text = sql.render(st.dialect, st.prefix,
            "INSERT INTO @events (book, seq, transfer_id, kind, data) VALUES "
            .. rep("(?b, ?i, ?b, ?b, ?b)", rows, ", "))
        local n, err, class = st.drv:write(text, binds)
        if not n then return nil, err, class end
    end
    return true
end

-- The version row to VERSION (SQLite's put_meta inserts once; an older row moves up here).
function _M.set_version(st)
    local text = sql.render(st.dialect, st.prefix,
                            "UPDATE @ledger_meta SET value = ?b WHERE key = ?b")
    return st.drv:write(text, { n = 2, tostring(_M.VERSION), "schema_version" })
end

-- An older SQLite store to schema 4: intents and transfer_accounts rebuilt WITHOUT ROWID
-- (the old table renamed, the new one made by this code's statement, the rows copied, the
-- old one dropped: sqlite_master then holds this code's text, which verify compares), and
-- the claim rows (intents keyed 256 bytes 0xff ‖ intent: every key above 256 bytes 0xff, as
-- no intent is longer than 255 bytes) moved to `claims` under their intents. A table
-- already WITHOUT ROWID is left. A row that collides fails the upgrade (none can).
local ABOVE = "X'" .. rep("ff", 256) .. "'"
local COPY = {
    transfer_accounts = { "INSERT INTO @transfer_accounts (account, n) SELECT account, n FROM "
                          .. "@transfer_accounts_v3 ORDER BY account, n" },
    intents = {
        "INSERT INTO @intents (key, status, transfer_id, code, message, body_hash) SELECT key, "
        .. "status, transfer_id, code, message, body_hash FROM @intents_v3 WHERE key <= "
        .. ABOVE .. " ORDER BY key",
        "INSERT INTO @claims (intent, status, transfer_id, code, message, body_hash) SELECT "
        .. "substr(key, 257), status, transfer_id, code, message, body_hash FROM @intents_v3 "
        .. "WHERE key > " .. ABOVE .. " ORDER BY key" },
}

local function rebuild(st, name)
    local drv = st.drv
    local rows, err, class = drv:read("SELECT sql FROM sqlite_master WHERE type = 'table' AND "
                                      .. "name = CAST(? AS TEXT)", { n = 1, st.prefix .. name })
    if not rows then return nil, err, class end
    if not rows[1] or tostring(rows[1][1]):find("WITHOUT ROWID", 1, true) then return true end
    local steps = { "ALTER TABLE @" .. name .. " RENAME TO @" .. name .. "_v3",
                    schema.table_ddl(st.dialect, st.prefix, name) }
    for _, c in ipairs(COPY[name]) do steps[#steps + 1] = c end
    steps[#steps + 1] = "DROP TABLE @" .. name .. "_v3"
    for _, text in ipairs(steps) do -- (exec: DDL, not kept among the prepared statements)
        local ok, e2, c2 = drv:exec(sql.render(st.dialect, st.prefix, text))
        if not ok then return nil, e2, c2 end
    end
    return true
end

function _M.v4(st)
    for _, name in ipairs { "transfer_accounts", "intents" } do
        local ok, err, class = rebuild(st, name)
        if not ok then return nil, err, class end
    end
    return _M.set_version(st)
end

function _M.run(st)
    local books, err, class = books_of(st)
    if not books then return nil, err, class end
    local list
    list, err, class = backfill(st)
    if not list then return nil, err, class end
    for _, book in ipairs(books) do
        local base
        base, err, class = st:head_seq(book)
        if not base then return nil, err, class end
        local ok
        ok, err, class = insert(st, book, base, list)
        if not ok then return nil, err, class end
    end
    return _M.set_version(st)
end

return _M
