-- ron.ledger.store.sql_binds: the binds of the SQL store's list primitives that a phase
-- carries most rows of (insert_postings, deactivate_many, store_transfers, put_intents,
-- insert_streams, advance_streams), each list checked as its primitive's argument and laid
-- out as that primitive's one statement binds it. Written once: the primitives
-- (ron.ledger.store.sql_rows, sql_batch) build them on their own connection's side, and the
-- offloaded SQLite driver builds the same on the loop as a binds block
-- (ron.ledger.store.sql_block), which the pool binds without decoding a row.
--
--   local sb = require("ron.ledger.store.sql_binds")
--   sb.postings(ps)              -> binds (11 a posting)
--   sb.deactivate(list, rid)     -> binds (3 an entry, then rid)
--   sb.transfers(list)           -> transfers' binds (6 each), transfer_accounts' (2 each), m
--   sb.intents_split(s, list)    -> plain, held (claim keys, SQLite), each checked
--   sb.intents(list, key_of)     -> binds (6 an entry)
--   sb.streams(name, list, w)    -> binds (w of tenant, dimension, seq, b3, prev_seq, prev_b3)
local base = require("ron.ledger.store.sql_base")
local claims = require("ron.ledger.store.sql_claims")

local misuse, bytes_arg, int_arg, asset_arg, list_arg, PSTATUS =
      base.misuse, base.bytes_arg, base.int_arg, base.asset_arg, base.list_arg, base.PSTATUS

local type, tostring, ipairs, format = type, tostring, ipairs, string.format

local _M = {}

_M.MAX_TRANSFER_PARAMS = 6000 -- store_transfers: 6 per transfer + 2 per involved account

function _M.postings(ps)
    list_arg("insert_postings", ps, "postings", base.MAX_POSTINGS)
    local binds, k = { n = #ps * 11 }, 0
    for _, p in ipairs(ps) do
        if type(p) ~= "table" or type(p.id) ~= "table" then
            misuse("insert_postings", "a posting is { id = { transfer_id =, index = }, ... }")
        end
        local tid = bytes_arg("insert_postings", p.id.transfer_id, "transfer_id", 32)
        local idx = int_arg("insert_postings", p.id.index, "index")
        local st = PSTATUS[p.status or "active"]
        if not st then misuse("insert_postings", "unknown status " .. tostring(p.status)) end
        asset_arg("insert_postings", p.asset)
        binds[k + 1], binds[k + 2] = tid, idx
        binds[k + 3] = bytes_arg("insert_postings", p.account, "account", 16)
        binds[k + 4], binds[k + 5] = p.asset.code, p.asset.scale
        binds[k + 6] = int_arg("insert_postings", p.amount, "amount")
        binds[k + 7], binds[k + 8] = st, p.reservation
        binds[k + 9], binds[k + 10] = p.created_by or tid, p.consumed_by
        binds[k + 11] = base.shard(tid, idx)
        k = k + 11
    end
    return binds
end

function _M.deactivate(list, rid)
    list_arg("deactivate_many", list, "postings")
    local binds, k = {}, 0
    for _, e in ipairs(list) do
        if type(e) ~= "table" or type(e.id) ~= "table" then
            misuse("deactivate_many", "each is { id = { transfer_id =, index = }, consumed_by = }")
        end
        binds[k + 1] = bytes_arg("deactivate_many", e.id.transfer_id, "transfer_id", 32)
        binds[k + 2] = int_arg("deactivate_many", e.id.index, "index")
        binds[k + 3] = bytes_arg("deactivate_many", e.consumed_by, "consumed_by", 32)
        k = k + 3
    end
    binds[k + 1] = bytes_arg("deactivate_many", rid, "rid")
    binds.n = k + 1
    return binds
end

-- -> the transfers' binds (tb.n = 6 a transfer), the transfer_accounts rows' (ab.n = 2 a
-- row), the rows of ab
function _M.transfers(list)
    list_arg("store_transfers", list, "transfers")
    local tb, ab, k, m = {}, {}, 0, 0
    for _, e in ipairs(list) do
        local rec = type(e) == "table" and e.rec
        if type(rec) ~= "table" then misuse("store_transfers", "each is { rec =, involved = }") end
        local id = bytes_arg("store_transfers", rec.id, "id", 32)
        tb[k + 1], tb[k + 2] = id, bytes_arg("store_transfers", rec.bytes, "bytes")
        tb[k + 3] = bytes_arg("store_transfers", rec.intent, "intent")
        tb[k + 4] = bytes_arg("store_transfers", rec.book, "book")
        tb[k + 5] = int_arg("store_transfers", rec.created_at_ms or 0, "created_at_ms")
        tb[k + 6] = rec.metadata
        k = k + 6
        for _, a in ipairs(e.involved or {}) do
            ab[2 * m + 1] = id
            ab[2 * m + 2] = bytes_arg("store_transfers", a, "involved account", 16)
            m = m + 1
        end
    end
    if k + 2 * m > _M.MAX_TRANSFER_PARAMS then
        misuse("store_transfers", format("at most %d parameters per call", _M.MAX_TRANSFER_PARAMS))
    end
    tb.n, ab.n = k, 2 * m
    return tb, ab, m
end

local OUTCOME = { committed = true, rejected = true, claimed = true }

-- list's entries checked, and split by where s keeps their key: -> plain (the intents
-- table), held (SQLite's `claims`)
function _M.intents_split(s, list)
    list_arg("put_intents", list, "intents")
    local plain, held = {}, {}
    for _, e in ipairs(list) do
        local o = type(e) == "table" and e.outcome
        if type(o) ~= "table" or not OUTCOME[o.status] then
            misuse("put_intents", "each is { key =, outcome = { status = ... } }")
        end
        local c = claims.intent_of(s, bytes_arg("put_intents", e.key, "key"))
        if c then held[#held + 1] = e else plain[#plain + 1] = e end
    end
    return plain, held
end

-- list's entries as one statement's binds (key_of: the stored key of an entry's key)
function _M.intents(list, key_of)
    local binds, k = { n = #list * 6 }, 0
    for _, e in ipairs(list) do
        local o = e.outcome
        binds[k + 1] = key_of and key_of(e.key) or e.key
        binds[k + 2], binds[k + 3] = o.status, o.transfer_id
        binds[k + 4] = o.code ~= nil and int_arg("put_intents", o.code, "code") or nil
        binds[k + 5], binds[k + 6] = o.message, o.body_hash
        k = k + 6
    end
    return binds
end

-- The binds of list's entries, field by field in STREAM_COLS' order (name, kind: "b"
-- bytes, "i" an integer), each checked as its primitive's argument.
local STREAM_COLS = { { "tenant", "b" }, { "dimension", "b" }, { "seq", "i" }, { "b3", "b" },
                      { "prev_seq", "i" }, { "prev_b3", "b" } }
function _M.streams(name, list, w)
    list_arg(name, list, "streams")
    local binds = { n = #list * w }
    for i, e in ipairs(list) do
        for j = 1, w do
            local col = STREAM_COLS[j]
            local check = col[2] == "i" and int_arg or bytes_arg
            binds[w * (i - 1) + j] = check(name, e[col[1]], col[1])
        end
    end
    return binds
end

return _M
