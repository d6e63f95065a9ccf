-- ron.ledger.store.sql_rows: the single-row primitives of ron.ledger.store.sql (books,
-- accounts, postings, balances, floor heads, transfers, intents, sagas, events, usage
-- streams, meta): each ONE conditional statement whose count is the answer (LED-16).
local ledger = require("ron.ledger")
local base = require("ron.ledger.store.sql_base")
local claims = require("ron.ledger.store.sql_claims")
local sql_binds = require("ron.ledger.store.sql_binds")
local block = require("ron.ledger.store.sql_block")

local misuse, bytes_arg, int_arg, asset_arg, list_arg, amount, write, read, read_one, read_all,
      account_row, ACCOUNT_T, posting_row, POSTING_T, transfer_row, TRANSFER_T, event_row,
      EVENT_T, PSTATUS, POLICY, ASTATUS =
      base.misuse, base.bytes_arg, base.int_arg, base.asset_arg, base.list_arg, base.amount,
      base.write, base.read, base.read_one, base.read_all, base.account_row, base.ACCOUNT_T,
      base.posting_row, base.POSTING_T, base.transfer_row, base.TRANSFER_T, base.event_row,
      base.EVENT_T, base.PSTATUS, base.POLICY, base.ASTATUS

local type, tostring, ipairs =
      type, tostring, ipairs

local _M = {}
-- the methods, installed on the Store class by ron.ledger.store.sql
local Store = {}
_M.methods = Store

-- books ------------------------------------------------------------------------------------

function Store:create_book(id, meta)
    bytes_arg("create_book", id, "book_id")
    return write(self, "create_book", nil, { n = 2, id, meta })
end

local function book_row(r) return { id = r[1], meta = r[2] } end

function Store:get_book(id)
    return read_one(self, "get_book", nil, { n = 1, bytes_arg("get_book", id, "book_id") }, "bb",
                    book_row)
end

function Store:list_books()
    return read_all(self, "list_books", nil, { n = 0 }, "bb", book_row)
end

-- accounts ---------------------------------------------------------------------------------

local function account_binds(fname, a)
    if type(a) ~= "table" then misuse(fname, "expects an account table") end
    bytes_arg(fname, a.id, "account id", 16)
    local policy, status = POLICY[a.policy or "no_overdraft"], ASTATUS[a.status or "open"]
    if not policy then misuse(fname, "unknown policy " .. tostring(a.policy)) end
    if not status then misuse(fname, "unknown status " .. tostring(a.status)) end
    local bytes = a.bytes
    if bytes == nil then -- the canonical snapshot (LED-1), stored beside the columns
        local err
        bytes, err = ledger.encode_account(a)
        if not bytes then misuse(fname, tostring(err)) end
    end
    return policy, int_arg(fname, a.floor or 0, "floor"), status, bytes
end

function Store:create_account(a)
    local policy, floor, status, bytes = account_binds("create_account", a)
    if a.version ~= 1 then misuse("create_account", "version must be 1") end
    return write(self, "create_account", nil, { n = 5, a.id, policy, floor, status, bytes })
end

function Store:append_account_version(a)
    local policy, floor, status, bytes = account_binds("append_account_version", a)
    local v = int_arg("append_account_version", a.version, "version")
    return write(self, "append_account_version", nil,
                 { n = 8, a.id, v, policy, floor, status, bytes, a.id, v - 1 })
end

function Store:get_account(id)
    return read_one(self, "get_account", nil, { n = 1, bytes_arg("get_account", id, "id", 16) },
                    ACCOUNT_T, account_row)
end

function Store:get_accounts(ids)
    list_arg("get_accounts", ids, "ids")
    local out = {}
    if #ids == 0 then return out end
    local binds = { n = #ids }
    for i, id in ipairs(ids) do binds[i] = bytes_arg("get_accounts", id, "id", 16) end
    local rows, err, class = read(self, "get_accounts", #ids, binds, ACCOUNT_T)
    if not rows then return nil, err, class end
    for _, r in ipairs(rows) do out[r[1]] = account_row(r) end
    return out
end

function Store:get_account_history(id)
    return read_all(self, "get_account_history", nil,
                    { n = 1, bytes_arg("get_account_history", id, "id", 16) }, ACCOUNT_T,
                    account_row)
end

function Store:list_accounts()
    return read_all(self, "list_accounts", nil, { n = 0 }, ACCOUNT_T, account_row)
end

-- postings ---------------------------------------------------------------------------------

local function id_binds(fname, ids, binds, k)
    list_arg(fname, ids, "ids")
    for _, id in ipairs(ids) do
        if type(id) ~= "table" then misuse(fname, "a posting id is { transfer_id =, index = }") end
        binds[k + 1] = bytes_arg(fname, id.transfer_id, "transfer_id", 32)
        binds[k + 2] = int_arg(fname, id.index, "index")
        k = k + 2
    end
    binds.n = k
    return binds
end

function Store:insert_postings(ps)
    if block.is(ps) then return write(self, "insert_postings", block.rows(ps), ps) end
    local binds = sql_binds.postings(ps)
    if #ps == 0 then return 0 end
    return write(self, "insert_postings", #ps, binds)
end

-- LED-18: each transition is one UPDATE guarded by the status (and the reservation id).
function Store:reserve_postings(ids, rid)
    if #ids == 0 then return 0 end
    local binds = { bytes_arg("reserve_postings", rid, "rid") }
    return write(self, "reserve_postings", #ids, id_binds("reserve_postings", ids, binds, 1))
end

function Store:release_postings(ids, rid)
    if #ids == 0 then return 0 end
    local binds = { bytes_arg("release_postings", rid, "rid") }
    return write(self, "release_postings", #ids, id_binds("release_postings", ids, binds, 1))
end

function Store:deactivate_postings(ids, rid, consumed_by)
    if #ids == 0 then return 0 end
    bytes_arg("deactivate_postings", consumed_by, "consumed_by")
    if rid == nil then
        return write(self, "deactivate_active", #ids,
                     id_binds("deactivate_postings", ids, { consumed_by }, 1))
    end
    local binds = { consumed_by, bytes_arg("deactivate_postings", rid, "rid") }
    return write(self, "deactivate_reserved", #ids, id_binds("deactivate_postings", ids, binds, 2))
end

function Store:get_postings(ids)
    if #ids == 0 then return {} end
    return read_all(self, "get_postings", #ids, id_binds("get_postings", ids, {}, 0), POSTING_T,
                    posting_row)
end

-- (account, asset?, status?, limit?, order?) order: "largest" (amount descending, then
-- ascending id: what selection wants, LED-10) or "id" (the default).
function Store:get_postings_by_account(account, asset, status, limit, order)
    local binds = { bytes_arg("get_postings_by_account", account, "account", 16) }
    local k = 0
    if asset ~= nil then
        asset_arg("get_postings_by_account", asset)
        binds[#binds + 1], binds[#binds + 2] = asset.code, asset.scale
        k = k + 1
    end
    if status ~= nil then
        local st = PSTATUS[status]
        if not st then misuse("get_postings_by_account", "unknown status " .. tostring(status)) end
        binds[#binds + 1] = st
        k = k + 2
    end
    if limit ~= nil then
        binds[#binds + 1] = int_arg("get_postings_by_account", limit, "limit")
        k = k + 4
    end
    if order == "largest" then
        k = k + 8
    elseif order ~= nil and order ~= "id" then
        misuse("get_postings_by_account", "order is \"largest\" or \"id\"")
    end
    binds.n = #binds
    return read_all(self, "get_postings_by_account", k, binds, POSTING_T, posting_row)
end

-- balances (LED-19) --------------------------------------------------------------------

-- bound: each pair's `min` (count_balances_at_least) or `max` (count_balances_at_most) too
local function pair_binds(fname, pairs_, bound)
    list_arg(fname, pairs_, "pairs")
    local w = bound and 4 or 3
    local binds, k = { n = #pairs_ * w }, 0
    for _, p in ipairs(pairs_) do
        if type(p) ~= "table" then misuse(fname, "a pair is { account =, asset = }") end
        binds[k + 1] = bytes_arg(fname, p.account, "account", 16)
        asset_arg(fname, p.asset)
        binds[k + 2], binds[k + 3] = p.asset.code, p.asset.scale
        if bound then binds[k + 4] = int_arg(fname, p[bound], bound) end
        k = k + w
    end
    return binds
end

local function pair_key(account, code, scale) return account .. "\0" .. scale .. "\0" .. code end

-- -> { amount per pair, in the pairs' order } (0 for a pair without postings)
function Store:get_balances(pairs_)
    if #pairs_ == 0 then return {} end
    local rows, err, class = read(self, "get_balances", #pairs_,
                                  pair_binds("get_balances", pairs_), "bbii")
    if not rows then return nil, err, class end
    local by = {}
    for _, r in ipairs(rows) do by[pair_key(r[1], r[2], amount(r[3]))] = amount(r[4]) end
    local out = {}
    for i, p in ipairs(pairs_) do
        out[i] = by[pair_key(p.account, p.asset.code, p.asset.scale)] or 0
    end
    return out
end

function Store:get_balance(account, asset)
    local r, err, class = self:get_balances({ { account = account, asset = asset } })
    if not r then return nil, err, class end
    return r[1]
end

-- The one-transaction commit's guards (ron.ledger.engine.atomic, LED-72): counts, each one
-- statement, that a phase's `expect` turns into "the state the plan was validated against".

-- -> how many of list ({ id =, version = }) are their account's current version
function Store:count_accounts_at(list)
    list_arg("count_accounts_at", list, "accounts")
    if #list == 0 then return 0 end
    local binds, k = { n = #list * 2 }, 0
    for _, a in ipairs(list) do
        if type(a) ~= "table" then misuse("count_accounts_at", "expects { id =, version = }") end
        binds[k + 1] = bytes_arg("count_accounts_at", a.id, "id", 16)
        binds[k + 2] = int_arg("count_accounts_at", a.version, "version")
        k = k + 2
    end
    local rows, err, class = read(self, "count_accounts_at", #list, binds, "i")
    if not rows then return nil, err, class end
    return amount(rows[1][1]) or 0
end

-- -> how many of list ({ account =, asset =, [bound] = }) have a balance within the bound
local function count_balances(self, fname, list, bound)
    if #list == 0 then return 0 end
    local rows, err, class = read(self, fname, #list, pair_binds(fname, list, bound), "i")
    if not rows then return nil, err, class end
    return amount(rows[1][1]) or 0
end

-- -> how many of list ({ account =, asset =, min = }) have a balance of at least min
function Store:count_balances_at_least(list)
    return count_balances(self, "count_balances_at_least", list, "min")
end

-- -> how many of list ({ account =, asset =, max = }) have a balance of at most max
function Store:count_balances_at_most(list)
    return count_balances(self, "count_balances_at_most", list, "max")
end

-- floor heads (LED-20) -------------------------------------------------------------------

function Store:ensure_head(account, asset)
    asset_arg("ensure_head", asset)
    return write(self, "ensure_head", nil,
                 { n = 3, bytes_arg("ensure_head", account, "account", 16), asset.code,
                   asset.scale })
end

function Store:acquire_head(account, asset, saga_id)
    asset_arg("acquire_head", asset)
    return write(self, "acquire_head", nil,
                 { n = 4, bytes_arg("acquire_head", saga_id, "saga_id"),
                   bytes_arg("acquire_head", account, "account", 16), asset.code, asset.scale })
end

function Store:release_head(account, asset, saga_id)
    asset_arg("release_head", asset)
    return write(self, "release_head", nil,
                 { n = 4, bytes_arg("release_head", account, "account", 16), asset.code,
                   asset.scale, bytes_arg("release_head", saga_id, "saga_id") })
end

-- -> { [i] = { version =, holder = } | nil (no row yet), n = #pairs }
function Store:get_heads(pairs_)
    local out = { n = #pairs_ }
    if #pairs_ == 0 then return out end
    local rows, err, class = read(self, "get_heads", #pairs_, pair_binds("get_heads", pairs_),
                                  "bbiib")
    if not rows then return nil, err, class end
    local by = {}
    for _, r in ipairs(rows) do
        by[pair_key(r[1], r[2], amount(r[3]))] = { version = amount(r[4]), holder = r[5] }
    end
    for i, p in ipairs(pairs_) do out[i] = by[pair_key(p.account, p.asset.code, p.asset.scale)] end
    return out
end

-- transfers ----------------------------------------------------------------------------

function Store:store_transfer(rec, involved)
    if type(rec) ~= "table" then misuse("store_transfer", "expects a transfer record") end
    local id = bytes_arg("store_transfer", rec.id, "id", 32)
    involved = list_arg("store_transfer", involved or {}, "involved accounts")
    local tb = { n = 6, id, bytes_arg("store_transfer", rec.bytes, "bytes"),
                 bytes_arg("store_transfer", rec.intent, "intent"),
                 bytes_arg("store_transfer", rec.book, "book"),
                 int_arg("store_transfer", rec.created_at_ms or 0, "created_at_ms"), rec.metadata }
    for _, a in ipairs(involved) do bytes_arg("store_transfer", a, "involved account", 16) end
    if self.dialect == "postgres" then
        local n = #involved
        for i = 1, n do tb[6 + i] = involved[i] end
        tb.n = 6 + n
        local rows, err, class = read(self, "store_transfer_pg", n, tb, "i")
        if not rows then return nil, err, class end
        return amount(rows[1][1])
    end
    return self.drv:atomic(function()
        local n, err, class = write(self, "store_transfer", nil, tb)
        if not n or n == 0 or #involved == 0 then return n, err, class end
        local ab = { n = #involved + 1 }
        for i, a in ipairs(involved) do ab[i] = a end
        ab[#involved + 1] = id
        local m, err2, class2 = write(self, "store_transfer_accounts", #involved, ab)
        if not m then return nil, err2, class2 end
        return n
    end)
end

function Store:get_transfer(id)
    return read_one(self, "get_transfer", nil, { n = 1, bytes_arg("get_transfer", id, "id", 32) },
                    TRANSFER_T, transfer_row)
end

-- Newest first; before = a record's n (the page's last) for the next page.
function Store:get_transfers_for_account(account, limit, before)
    local binds = { bytes_arg("get_transfers_for_account", account, "account", 16) }
    if before ~= nil then binds[2] = int_arg("get_transfers_for_account", before, "before") end
    binds[#binds + 1] = int_arg("get_transfers_for_account", limit or 100, "limit")
    binds.n = #binds
    return read_all(self, "get_transfers_for_account", before ~= nil and 1 or 0, binds,
                    TRANSFER_T, transfer_row)
end

-- Oldest first; after = a record's n (0: from the start).
function Store:list_transfers(after, limit)
    return read_all(self, "list_transfers", nil,
                    { n = 2, int_arg("list_transfers", after or 0, "after"),
                      int_arg("list_transfers", limit or 100, "limit") }, TRANSFER_T, transfer_row)
end

-- intents (LED-21) -----------------------------------------------------------------------

function Store:put_intent(key, o)
    bytes_arg("put_intent", key, "key")
    -- "claimed": the engine's claim row of an intent (message = the saga id), under a key no
    -- caller can send (docs/LEDGER.md "Intents").
    if type(o) ~= "table" or (o.status ~= "committed" and o.status ~= "rejected" and
                              o.status ~= "claimed") then
        misuse("put_intent", "outcome.status is \"committed\", \"rejected\" or \"claimed\"")
    end
    -- SQLite keeps a claim apart, under its intent (ron.ledger.store.sql_claims)
    local c = claims.intent_of(self, key)
    return write(self, c and "put_claims" or "put_intent", c and 1 or nil,
                 { n = 6, c or key, o.status, o.transfer_id, o.code ~= nil and int_arg("put_intent",
                   o.code, "code") or nil, o.message, o.body_hash })
end

function Store:get_intent(key)
    local c = claims.intent_of(self, bytes_arg("get_intent", key, "key"))
    return read_one(self, c and "get_claims" or "get_intent", c and 1 or nil, { n = 1, c or key },
                    "bbbibb", function(r)
        return { key = key, status = r[2], transfer_id = r[3], code = amount(r[4]),
                 message = r[5], body_hash = r[6] }
    end)
end

-- sagas ------------------------------------------------------------------------------------

function Store:save_saga(id, phase, data, node)
    bytes_arg("save_saga", id, "id")
    if phase ~= "reserving" and phase ~= "finalizing" then
        misuse("save_saga", "phase is \"reserving\" or \"finalizing\"")
    end
    return write(self, "save_saga", nil, { n = 4, id, phase, data, node })
end

local function saga_row(r) return { id = r[1], phase = r[2], data = r[3], node = r[4] } end

function Store:list_pending_sagas(node)
    local binds = { n = node ~= nil and 1 or 0, node }
    return read_all(self, "list_pending_sagas", node ~= nil and 1 or 0, binds, "bbbb", saga_row)
end

-- The rows in phase finalizing only (the WHERE in the statement: a reserving record's data,
-- a batch's members' requests, never leaves the server). The phase is bound as save_saga
-- binds it (a blob on SQLite: a text literal would match nothing).
function Store:list_finalizing_sagas()
    return read_all(self, "list_finalizing_sagas", nil, { n = 1, "finalizing" }, "bbbb",
                    saga_row)
end

function Store:delete_saga(id)
    return write(self, "delete_saga", nil, { n = 1, bytes_arg("delete_saga", id, "id") })
end

-- events (LED-22) ------------------------------------------------------------------------

function Store:append_event(book, transfer_id, kind, data)
    bytes_arg("append_event", book, "book")
    return write(self, "append_event", nil,
                 { n = 5, book, bytes_arg("append_event", transfer_id, "transfer_id"),
                   bytes_arg("append_event", kind, "kind"), data, book })
end

-- The event of (book, transfer, kind) or nil: what the engine reads after a 0 from
-- append_event to tell "already there" from "a racing insert took the seq".
function Store:get_event(book, transfer_id, kind)
    return read_one(self, "get_event", nil, { n = 3, book, transfer_id, kind }, EVENT_T,
                    event_row)
end

function Store:get_events_since(book, after_seq, limit)
    return read_all(self, "get_events_since", nil,
                    { n = 3, bytes_arg("get_events_since", book, "book"),
                      int_arg("get_events_since", after_seq or 0, "after_seq"),
                      int_arg("get_events_since", limit or 100, "limit") }, EVENT_T, event_row)
end

function Store:head_seq(book)
    local rows, err, class = read(self, "head_seq", nil,
                                  { n = 1, bytes_arg("head_seq", book, "book") }, "i")
    if not rows then return nil, err, class end
    return amount(rows[1][1])
end

-- usage streams ----------------------------------------------------------------------------

function Store:get_stream(tenant, dimension)
    return read_one(self, "get_stream", nil,
                    { n = 2, bytes_arg("get_stream", tenant, "tenant"),
                      bytes_arg("get_stream", dimension, "dimension") }, "ib",
                    function(r) return { seq = amount(r[1]), b3 = r[2] } end)
end

-- LED-25: the head moves only from exactly (prev_seq, prev_b3); the first slice inserts once.
function Store:advance_stream(tenant, dimension, seq, b3, prev_seq, prev_b3)
    bytes_arg("advance_stream", tenant, "tenant")
    bytes_arg("advance_stream", dimension, "dimension")
    int_arg("advance_stream", seq, "seq")
    bytes_arg("advance_stream", b3, "b3")
    if prev_seq == nil then
        return write(self, "insert_stream", nil, { n = 4, tenant, dimension, seq, b3 })
    end
    return write(self, "advance_stream", nil,
                 { n = 6, seq, b3, tenant, dimension,
                   int_arg("advance_stream", prev_seq, "prev_seq"),
                   bytes_arg("advance_stream", prev_b3, "prev_b3") })
end


-- meta --------------------------------------------------------------------------------------

function Store:get_meta(key)
    local rows, err, class = read(self, "get_meta", nil, { n = 1, key }, "b")
    if not rows then return nil, err, class end
    return rows[1] and rows[1][1]
end

function Store:put_meta(key, value)
    return write(self, "put_meta", nil, { n = 2, key, value })
end

return _M
