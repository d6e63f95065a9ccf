-- ron.ledger.store.memory: the in-memory Store, with exactly the semantics of the store
-- contract (/work/notes/ledger-design.md "Store contract", docs/LEDGER.md "The store"):
-- the substrate of the deterministic simulator (spec/ron/ledger/sim_spec.lua) and one of
-- the backends of the conformance suite.
--
--   local memory = require("ron.ledger.store.memory")
--   local s = memory.new { fault = fn? }
--   s:insert_postings(list) -> n | nil, err, class
--
-- Every primitive is one atomic step (no yield inside it), as one conditional statement is
-- in SQL: a write returns the number of rows it changed and never decides anything (the
-- engine interprets the count). Values in and out are copies, so a caller cannot reach into
-- the store's state the way it cannot reach into a database's. Amounts are kept as given
-- (Lua integers below 2^53, or int64_t cdata); sums use `+`.
--
-- The fault hook (LED-35) is called around every primitive, reads included:
--   fault("before", name, ...args)          -> nil | action
--   fault("after",  name, result, ...args)  -> nil | action
-- It may raise (a simulated crash: nothing after the raise happens, like a killed process)
-- or yield (the simulator interleaves sagas there: every primitive is a scheduling point).
-- An action is a table:
--   { err = "message", class = "retry"|"io"|"bug" }  before: fail without applying;
--                                                    after: applied, but the reply is lost
--   { limit = k }                                     before a batch write: only the first k
--                                                    ids are applied (a partial count, as when
--                                                    another writer holds the other rows)
local clock = require("ron.base.clock")
local ledger = require("ron.ledger")
local phases = require("ron.ledger.store.phase")
local scan = require("ron.ledger.store.scan")
local ledger_view = require("ron.ledger.view")

local format = string.format
local pairs = pairs
local sort = table.sort
local type = type

local _M = {}

local SHARDS = 16

local function copy(v)
    if type(v) ~= "table" then return v end
    local r = {}
    for k, x in pairs(v) do r[k] = copy(x) end
    return r
end
_M.copy = copy

local function asset_key(a) return a.code .. "\0" .. a.scale end

local function pkey(id)
    local i = id.index
    return id.transfer_id .. format("%08x", i)
end
_M.posting_key = pkey

local function ref_less(a, b)
    if a.transfer_id ~= b.transfer_id then return a.transfer_id < b.transfer_id end
    return a.index < b.index
end

local Store = {}
Store.__index = Store

function _M.new(opts)
    opts = opts or {}
    local self = setmetatable({
        fault = opts.fault,
        books = {}, book_order = {},
        accounts = {}, account_order = {},
        postings = {}, by_account = {}, -- by_account[account][asset key][status] = { key }
        balances = {},
        heads = {},
        transfers = {}, transfer_order = {}, transfers_by_account = {}, tseq = 0,
        intents = {},
        sagas = {}, saga_seq = 0,
        events = {}, event_index = {},
        streams = {},
        meta = {},
        leases = {},
        -- the store's clock (ms) for the leases (LED-71): injected, else the wall clock
        clock = opts.clock,
        calls = 0,
    }, Store)
    return self
end
_M.open = _M.new

-- Runs primitive `name` through the fault hook (LED-35).
local function prim(name, impl)
    return function(self, ...)
        self.calls = self.calls + 1
        local f, limit = self.fault, nil
        if f then
            local act = f("before", name, ...)
            if act then
                if act.err then return nil, act.err, act.class or "io" end
                limit = act.limit
            end
        end
        local a, b, c = impl(self, limit, ...)
        if f then
            local act = f("after", name, a, ...)
            if act and act.err then return nil, act.err, act.class or "io" end
        end
        return a, b, c
    end
end

local function bug(msg) return nil, "bug: " .. msg, "bug" end

-- A list primitive's loop: apply(entry) for the first `limit` entries (a fault's partial
-- write; nil: all); -> how many it applied (answered true).
local function counted(limit, list, apply)
    local n = 0
    for i, e in ipairs(list) do
        if limit and i > limit then break end
        if apply(e) then n = n + 1 end
    end
    return n
end

-- Every change of the store's state goes through jset: inside apply() (a phase, below) the
-- old value is journaled, so a phase that misses a guard, fails or crashes is undone whole,
-- as a rolled-back transaction is.
local function jset(self, t, k, v)
    local j = self.journal
    if j then
        local n = j.n + 1
        j[n] = t
        j[n + 1] = k
        j[n + 2] = t[k]
        j.n = n + 2
    end
    t[k] = v
end

-- ---- books ----

Store.create_book = prim("create_book", function(self, _, id, meta)
    if self.books[id] then return 0 end
    jset(self, self.books, id, { id = id, meta = copy(meta) })
    jset(self, self.book_order, #self.book_order + 1, id)
    return 1
end)

Store.get_book = prim("get_book", function(self, _, id) return copy(self.books[id]) end)

Store.list_books = prim("list_books", function(self)
    local r = {}
    for i, id in ipairs(self.book_order) do r[i] = copy(self.books[id]) end
    return r
end)

-- ---- accounts: append-only versions ----

local function stored_account(acct)
    local a = copy(acct)
    a.bytes = a.bytes or ledger.encode_account(a)
    return a
end

Store.create_account = prim("create_account", function(self, _, acct)
    if acct.version ~= 1 then error("create_account: version must be 1", 3) end
    if self.accounts[acct.id] then return 0 end
    jset(self, self.accounts, acct.id, { stored_account(acct) })
    jset(self, self.account_order, #self.account_order + 1, acct.id)
    return 1
end)

-- INSERT … SELECT … WHERE max(version) = acct.version - 1: a gap or an overwrite counts 0.
Store.append_account_version = prim("append_account_version", function(self, _, acct)
    local h = self.accounts[acct.id]
    if not h or h[#h].version ~= acct.version - 1 then return 0 end
    jset(self, h, #h + 1, stored_account(acct))
    return 1
end)

Store.get_account = prim("get_account", function(self, _, id)
    local h = self.accounts[id]
    return h and copy(h[#h]) or nil
end)

Store.get_accounts = prim("get_accounts", function(self, _, ids)
    local r = {}
    for _, id in ipairs(ids) do
        local h = self.accounts[id]
        if h then r[id] = copy(h[#h]) end
    end
    return r
end)

Store.get_account_history = prim("get_account_history", function(self, _, id)
    return copy(self.accounts[id] or {})
end)

Store.list_accounts = prim("list_accounts", function(self)
    local r = {}
    for i, id in ipairs(self.account_order) do
        local h = self.accounts[id]
        r[i] = copy(h[#h])
    end
    return r
end)

-- ---- balance projection (the triggers of the SQL backends) ----

local function shard_of(id) return (id.index + id.transfer_id:byte(1)) % SHARDS end

local function project(self, p, sign)
    local per = self.balances[p.account]
    if not per then
        per = {}
        jset(self, self.balances, p.account, per)
    end
    local k = asset_key(p.asset)
    local b = per[k]
    if not b then
        b = { asset = copy(p.asset), shards = {} }
        for i = 0, SHARDS - 1 do b.shards[i] = 0 end
        jset(self, per, k, b)
    end
    local s = shard_of(p.id)
    if sign > 0 then jset(self, b.shards, s, b.shards[s] + p.amount)
    else jset(self, b.shards, s, b.shards[s] - p.amount) end
end

local function balance_of(self, account, asset)
    local per = self.balances[account]
    local b = per and per[asset_key(asset)]
    local sum = 0
    if b then for s = 0, SHARDS - 1 do sum = sum + b.shards[s] end end
    return ledger.from_amount(sum)
end

Store.get_balance = prim("get_balance", function(self, _, account, asset)
    return balance_of(self, account, asset)
end)

Store.get_balances = prim("get_balances", function(self, _, list)
    local r = {}
    for i, pr in ipairs(list) do r[i] = balance_of(self, pr.account, pr.asset) end
    return r
end)

-- the one-transaction commit's guards (LED-72): counts
Store.count_accounts_at = prim("count_accounts_at", function(self, _, list)
    local n = 0
    for _, a in ipairs(list) do
        local h = self.accounts[a.id]
        if h and h[#h].version == a.version then n = n + 1 end
    end
    return n
end)

-- how many pairs of list have a balance within their bound (within(balance, pair))
local function count_balances(name, within)
    return prim(name, function(self, _, list)
        local n = 0
        for _, p in ipairs(list) do
            if within(balance_of(self, p.account, p.asset), p) then n = n + 1 end
        end
        return n
    end)
end
Store.count_balances_at_least = count_balances("count_balances_at_least",
                                               function(b, p) return b >= p.min end)
Store.count_balances_at_most = count_balances("count_balances_at_most",
                                              function(b, p) return b <= p.max end)

-- ---- postings ----

local PSTATUS = { active = true, pending_inactive = true, inactive = true }

-- The index of postings by (account, asset, status): selection reads a pair's Active
-- postings without walking its history.
local function move(self, p, from, to)
    local per = self.by_account[p.account]
    if not per then
        per = {}
        jset(self, self.by_account, p.account, per)
    end
    local sts = per[p._ak]
    if not sts then
        sts = { active = {}, pending_inactive = {}, inactive = {} }
        jset(self, per, p._ak, sts)
    end
    if from then jset(self, sts[from], p._k, nil) end
    jset(self, sts[to], p._k, true)
end

-- A posting as callers see it (without the index's fields).
local function out(p)
    return { id = { transfer_id = p.id.transfer_id, index = p.id.index }, account = p.account,
             asset = { code = p.asset.code, scale = p.asset.scale }, amount = p.amount,
             status = p.status, reservation = p.reservation, created_by = p.created_by,
             consumed_by = p.consumed_by }
end

Store.insert_postings = prim("insert_postings", function(self, limit, list)
    local n = 0
    for i, p in ipairs(list) do
        if limit and i > limit then break end
        local st = p.status or "active"
        if not PSTATUS[st] then return bug("insert_postings: unknown status " .. tostring(st)) end
        local k = pkey(p.id)
        if not self.postings[k] then
            local row = {
                id = copy(p.id), account = p.account, asset = copy(p.asset), amount = p.amount,
                status = st, reservation = p.reservation, created_by = p.id.transfer_id,
                consumed_by = p.consumed_by,
            }
            row._k, row._ak = k, asset_key(p.asset)
            jset(self, self.postings, k, row)
            move(self, row, nil, st)
            if st ~= "inactive" then project(self, row, 1) end
            n = n + 1
        end
    end
    return n
end)

-- The state machine's one step, for the first `limit` entries of list: each posting
-- (id_of(entry) names it) that admit(p) accepts moves to status `to` with field := the
-- value value_of(entry) answers, its projection moved by sign (nil: not); -> how many moved.
-- Every write goes through jset (undo-logged).
local function step_postings(self, limit, list, admit, to, field, id_of, value_of, sign)
    return counted(limit, list, function(e)
        local p = self.postings[pkey(id_of(e))]
        if not (p and admit(p)) then return false end
        move(self, p, p.status, to)
        jset(self, p, "status", to)
        jset(self, p, field, value_of(e))
        if sign then project(self, p, sign) end
        return true
    end)
end

local function itself(x) return x end
local function entry_id(e) return e.id end
local function entry_consumer(e) return e.consumed_by end
local function is_active(p) return p.status == "active" end
local function reserved_by(rid)
    return function(p) return p.status == "pending_inactive" and p.reservation == rid end
end
local function constant(v) return function() return v end end

-- Active -> PendingInactive stamped rid.
Store.reserve_postings = prim("reserve_postings", function(self, limit, ids, rid)
    return step_postings(self, limit, ids, is_active, "pending_inactive", "reservation",
                         itself, constant(rid))
end)

-- PendingInactive AND reservation = rid -> Active, reservation NULL.
Store.release_postings = prim("release_postings", function(self, limit, ids, rid)
    return step_postings(self, limit, ids, reserved_by(rid), "active", "reservation", itself,
                         constant(nil))
end)

-- rid: PendingInactive with that rid -> Inactive; nil: Active -> Inactive. The projection
-- loses the amount (a row that does not match fires nothing).
Store.deactivate_postings = prim("deactivate_postings", function(self, limit, ids, rid,
                                                                  consumed_by)
    return step_postings(self, limit, ids, rid ~= nil and reserved_by(rid) or is_active,
                         "inactive", "consumed_by", itself, constant(consumed_by), -1)
end)

-- LED-51: each PendingInactive posting with reservation rid -> Inactive, consumed by its
-- own transfer.
Store.deactivate_many = prim("deactivate_many", function(self, limit, list, rid)
    return step_postings(self, limit, list, reserved_by(rid), "inactive", "consumed_by",
                         entry_id, entry_consumer, -1)
end)

-- Selection's order (largest first, then by id): the engine's view's, written once.
local largest_less = ledger_view.largest_less

-- The first `limit` of r in less's order without sorting all of r (selection reads the
-- few largest of a pair that may hold a long history: an uncapped source's negatives).
local function top_k(r, limit, less)
    if not limit or limit >= #r or limit > 64 then
        sort(r, less)
        if limit and limit < #r then for i = #r, limit + 1, -1 do r[i] = nil end end
        return r
    end
    local best = {}
    for _, p in ipairs(r) do
        local n = #best
        if n < limit or less(p, best[n]) then
            ledger_view.insert_sorted(best, p, n < limit and n + 1 or n, less)
        end
    end
    return best
end

-- Ascending by id (the SQL stores' ORDER BY), whatever the order asked in.
Store.get_postings = prim("get_postings", function(self, _, ids)
    local r = {}
    for _, id in ipairs(ids) do
        local p = self.postings[pkey(id)]
        if p then r[#r + 1] = p end
    end
    sort(r, function(a, b) return ref_less(a.id, b.id) end)
    for i, p in ipairs(r) do r[i] = out(p) end
    return r
end)

-- order: "largest" (amount descending, ties by ascending id: what selection wants, LED-10)
-- or "id" / nil (ascending id).
Store.get_postings_by_account = prim("get_postings_by_account", function(self, _, account,
                                                                          asset, status, limit,
                                                                          order)
    local r = {}
    local ak = asset and asset_key(asset)
    for a, per in pairs(self.by_account[account] or {}) do
        if not ak or a == ak then
            for st, set in pairs(per) do
                if not status or st == status then
                    for k in pairs(set) do r[#r + 1] = self.postings[k] end
                end
            end
        end
    end
    local less
    if order == "largest" or order == "amount_desc" then
        less = largest_less
    else
        less = function(a, b) return ref_less(a.id, b.id) end
    end
    r = top_k(r, limit, less)
    for i = 1, #r do r[i] = out(r[i]) end
    return r
end)

-- LED-51: several pairs' postings of one status, largest first, each query its own limit.
Store.get_postings_by_pairs = prim("get_postings_by_pairs", function(self, _, queries)
    local res = {}
    for i, q in ipairs(queries) do
        local per = self.by_account[q.account]
        local sts = per and per[asset_key(q.asset)]
        local set = sts and sts[q.status or "active"] or {}
        local r = {}
        for k in pairs(set) do r[#r + 1] = self.postings[k] end
        r = top_k(r, q.limit, largest_less)
        for j = 1, #r do r[j] = out(r[j]) end
        res[i] = r
    end
    return res
end)

-- The rows of map, each as view(row) answers it, in less's order (a full listing:
-- verification's, never the hot path's).
local function listed(map, view, less)
    local r = {}
    for _, row in pairs(map) do r[#r + 1] = view(row) end
    sort(r, less)
    return r
end

-- Every posting, ascending by id (verification: recompute balances from postings). Not a
-- hot-path primitive; the SQL stores page it.
Store.scan_postings = prim("scan_postings", function(self)
    return listed(self.postings, out, function(a, b) return ref_less(a.id, b.id) end)
end)

-- Every row of a table as the SQL stores hold it (ron.ledger.store.scan: verify's reads).
Store.scan = prim("scan", function(self, _, tbl, after, limit)
    return scan.memory(self, tbl, after, limit)
end)

-- ---- floor heads ----

local function head_key(account, asset) return account .. asset_key(asset) end

Store.ensure_head = prim("ensure_head", function(self, _, account, asset)
    local k = head_key(account, asset)
    if self.heads[k] then return 0 end
    jset(self, self.heads, k, { account = account, asset = copy(asset), version = 0, holder = nil })
    return 1
end)

-- The head of (account, asset) when `holder` holds it (nil: when it is free).
local function held_by(self, account, asset, holder)
    local h = self.heads[head_key(account, asset)]
    if h and h.holder == holder then return h end
end

Store.acquire_head = prim("acquire_head", function(self, _, account, asset, saga_id)
    local h = held_by(self, account, asset, nil)
    if not h then return 0 end
    jset(self, h, "holder", saga_id)
    jset(self, h, "version", h.version + 1)
    return 1
end)

Store.release_head = prim("release_head", function(self, _, account, asset, saga_id)
    local h = held_by(self, account, asset, saga_id)
    if not h then return 0 end
    jset(self, h, "holder", nil)
    return 1
end)

Store.get_heads = prim("get_heads", function(self, _, list)
    local r = { n = #list }
    for i, pr in ipairs(list) do
        local h = self.heads[head_key(pr.account, pr.asset)]
        if h then r[i] = { version = h.version, holder = h.holder } end
    end
    return r
end)

-- Every head (verification: no head stays held once recovery is done).
Store.list_heads = prim("list_heads", function(self)
    return listed(self.heads, copy, function(a, b)
        return head_key(a.account, a.asset) < head_key(b.account, b.asset)
    end)
end)

-- ---- transfers ----

-- One transfer record and its accounts' listings: 1, or 0 when the id is present.
local function put_transfer(self, rec, involved)
    if self.transfers[rec.id] then return 0 end
    jset(self, self, "tseq", self.tseq + 1)
    local r = copy(rec)
    r.n = self.tseq
    jset(self, self.transfers, rec.id, r)
    jset(self, self.transfer_order, #self.transfer_order + 1, rec.id)
    local seen = {}
    for _, a in ipairs(involved or {}) do
        if not seen[a] then
            seen[a] = true
            local l = self.transfers_by_account[a]
            if not l then
                l = {}
                jset(self, self.transfers_by_account, a, l)
            end
            jset(self, l, #l + 1, rec.id)
        end
    end
    return 1
end

Store.store_transfer = prim("store_transfer", function(self, _, rec, involved)
    return put_transfer(self, rec, involved)
end)

-- LED-51: several transfers at once (each as store_transfer; present ones count 0).
Store.store_transfers = prim("store_transfers", function(self, limit, list)
    local n = 0
    for i, e in ipairs(list) do
        if limit and i > limit then break end
        n = n + put_transfer(self, e.rec, e.involved)
    end
    return n
end)

-- A transfer's n is its insertion number (the paging cursor of both listings).
Store.get_transfer = prim("get_transfer", function(self, _, id)
    return copy(self.transfers[id])
end)

-- Newest first; before_n = exclusive cursor.
Store.get_transfers_for_account = prim("get_transfers_for_account", function(self, _, account,
                                                                              limit, before_n)
    local l = self.transfers_by_account[account] or {}
    local r = {}
    for i = #l, 1, -1 do
        if limit and #r >= limit then break end
        local t = self.transfers[l[i]]
        if not before_n or t.n < before_n then r[#r + 1] = copy(t) end
    end
    return r
end)

-- Oldest first; after_n = exclusive cursor.
Store.list_transfers = prim("list_transfers", function(self, _, after_n, limit)
    local l, r = self.transfer_order, {}
    for i = (after_n or 0) + 1, #l do
        if limit and #r >= limit then break end
        r[#r + 1] = copy(self.transfers[l[i]])
    end
    return r
end)

-- ---- intents ----

Store.put_intent = prim("put_intent", function(self, _, key, outcome)
    if self.intents[key] then return 0 end
    jset(self, self.intents, key, copy(outcome))
    return 1
end)

Store.get_intent = prim("get_intent", function(self, _, key)
    local o = copy(self.intents[key])
    if o then o.key = key end
    return o
end)

Store.get_intents = prim("get_intents", function(self, _, keys)
    local r = {}
    for _, k in ipairs(keys) do
        local o = copy(self.intents[k])
        if o then
            o.key = k
            r[k] = o
        end
    end
    return r
end)

Store.put_intents = prim("put_intents", function(self, limit, list)
    return counted(limit, list, function(e)
        if self.intents[e.key] then return false end
        jset(self, self.intents, e.key, copy(e.outcome))
        return true
    end)
end)

-- ---- sagas ----

Store.save_saga = prim("save_saga", function(self, _, id, phase, data, node)
    if phase ~= "reserving" and phase ~= "finalizing" then
        return bug("save_saga: unknown phase " .. tostring(phase))
    end
    local s = self.sagas[id]
    if not s then
        jset(self, self, "saga_seq", self.saga_seq + 1)
        s = { id = id, seq = self.saga_seq }
        jset(self, self.sagas, id, s)
    end
    jset(self, s, "phase", phase)
    jset(self, s, "data", data)
    jset(self, s, "node", node)
    return 1
end)

Store.list_pending_sagas = prim("list_pending_sagas", function(self, _, node)
    local r = {}
    for _, s in pairs(self.sagas) do
        if node == nil or s.node == node then r[#r + 1] = s end
    end
    sort(r, function(a, b) return a.seq < b.seq end)
    for i, s in ipairs(r) do
        r[i] = { id = s.id, phase = s.phase, data = s.data, node = s.node }
    end
    return r
end)

-- Only the records in phase finalizing (any node), by id: what a short payer's plan looks
-- for (LED-32) without copying every reserving record's data (a batch's members' requests).
Store.list_finalizing_sagas = prim("list_finalizing_sagas", function(self)
    local r = {}
    for _, s in pairs(self.sagas) do
        if s.phase == "finalizing" then
            r[#r + 1] = { id = s.id, phase = s.phase, data = s.data, node = s.node }
        end
    end
    sort(r, function(a, b) return a.id < b.id end)
    return r
end)

Store.delete_saga = prim("delete_saga", function(self, _, id)
    if not self.sagas[id] then return 0 end
    jset(self, self.sagas, id, nil)
    return 1
end)

-- ---- events: gapless seq per book ----

-- INSERT … SELECT coalesce(max(seq), 0) + 1 … ON CONFLICT DO NOTHING: 0 when the event
-- exists (one event per (book, transfer, kind)).
Store.append_event = prim("append_event", function(self, _, book, transfer_id, kind, data)
    local idx = self.event_index[book]
    if not idx then
        idx = {}
        jset(self, self.event_index, book, idx)
        jset(self, self.events, book, {})
    end
    local k = transfer_id .. "\0" .. kind
    if idx[k] then return 0 end
    local l = self.events[book]
    local seq = #l + 1
    jset(self, l, seq, { book = book, seq = seq, transfer_id = transfer_id, kind = kind,
                        data = data })
    jset(self, idx, k, seq)
    return 1
end)

-- LED-51: the events not there yet take consecutive seqs after the book's max, in the
-- list's order (one that exists is skipped and not numbered: gapless).
Store.append_events = prim("append_events", function(self, limit, book, list)
    local idx = self.event_index[book]
    if not idx then
        idx = {}
        jset(self, self.event_index, book, idx)
        jset(self, self.events, book, {})
    end
    local l = self.events[book]
    local base, n, j = #l, 0, 0
    for i, e in ipairs(list) do
        if limit and i > limit then break end
        local k = e.transfer_id .. "\0" .. e.kind
        if not idx[k] then j = j + 1 end
        local seq = base + j
        if not idx[k] then
            jset(self, l, seq, { book = book, seq = seq, transfer_id = e.transfer_id,
                                kind = e.kind, data = e.data })
            jset(self, idx, k, seq)
            n = n + 1
        end
    end
    return n, n > 0 and base + 1 or nil
end)

Store.get_events_for = prim("get_events_for", function(self, _, book, tids, kind)
    local idx, r = self.event_index[book], {}
    if not idx then return r end
    for _, t in ipairs(tids) do
        local seq = idx[t .. "\0" .. kind]
        if seq then r[t] = copy(self.events[book][seq]) end
    end
    return r
end)

-- The event of (book, transfer, kind), or nil (the engine's check after a 0 from
-- append_event: exists, or a racing insert took the seq).
Store.get_event = prim("get_event", function(self, _, book, transfer_id, kind)
    local idx = self.event_index[book]
    local seq = idx and idx[transfer_id .. "\0" .. kind]
    return seq and copy(self.events[book][seq]) or nil
end)

Store.get_events_since = prim("get_events_since", function(self, _, book, after, limit)
    local l, r = self.events[book] or {}, {}
    for i = (after or 0) + 1, #l do
        if limit and #r >= limit then break end
        r[#r + 1] = copy(l[i])
    end
    return r
end)

Store.head_seq = prim("head_seq", function(self, _, book) return #(self.events[book] or {}) end)

-- ---- usage streams (the rater's chain contract) ----

local function stream_key(tenant, dim) return tenant .. "\0" .. dim end

Store.get_stream = prim("get_stream", function(self, _, tenant, dim)
    return copy(self.streams[stream_key(tenant, dim)])
end)

-- prev_seq == nil: INSERT … ON CONFLICT DO NOTHING (the stream's first slice); else UPDATE
-- … WHERE seq = prev_seq AND b3 = prev_b3.
Store.advance_stream = prim("advance_stream", function(self, _, tenant, dim, seq, b3, prev_seq,
                                                        prev_b3)
    local k = stream_key(tenant, dim)
    local s = self.streams[k]
    if prev_seq == nil then
        if s then return 0 end
        jset(self, self.streams, k, { seq = seq, b3 = b3 })
        return 1
    end
    if not s or s.seq ~= prev_seq or s.b3 ~= prev_b3 then return 0 end
    jset(self, s, "seq", seq)
    jset(self, s, "b3", b3)
    return 1
end)

Store.get_streams = prim("get_streams", function(self, _, list)
    local r = {}
    for _, p in ipairs(list) do
        local k = stream_key(p.tenant, p.dimension)
        if self.streams[k] then r[k] = copy(self.streams[k]) end
    end
    return r
end)

Store.insert_streams = prim("insert_streams", function(self, limit, list)
    return counted(limit, list, function(e)
        local k = stream_key(e.tenant, e.dimension)
        if self.streams[k] then return false end
        jset(self, self.streams, k, { seq = e.seq, b3 = e.b3 })
        return true
    end)
end)

Store.advance_streams = prim("advance_streams", function(self, limit, list)
    return counted(limit, list, function(e)
        local s = self.streams[stream_key(e.tenant, e.dimension)]
        if not (s and s.seq == e.prev_seq and s.b3 == e.prev_b3) then return false end
        jset(self, s, "seq", e.seq)
        jset(self, s, "b3", e.b3)
        return true
    end)
end)

Store.get_meta = prim("get_meta", function(self, _, key) return self.meta[key] end)

Store.put_meta = prim("put_meta", function(self, _, key, value)
    if self.meta[key] ~= nil then return 0 end
    jset(self, self.meta, key, value)
    return 1
end)

-- ---- node leases (LED-71): the SQL stores' leases table, in the store's clock ----

local function now_ms(self)
    if self.clock then return self.clock() end
    return clock.wall_ms()
end

Store.lease_acquire = prim("lease_acquire", function(self, _, node, ttl_ms)
    local now, l = now_ms(self), self.leases[node]
    if not l then
        jset(self, self.leases, node, { epoch = 1, owner = node, expires_ms = now + ttl_ms })
        return 1
    end
    if l.owner ~= nil and l.owner ~= node and l.expires_ms >= now then return 0 end
    jset(self, l, "epoch", l.epoch + 1)
    jset(self, l, "owner", node)
    jset(self, l, "expires_ms", now + ttl_ms)
    return l.epoch
end)

Store.lease_renew = prim("lease_renew", function(self, _, node, epoch, owner, ttl_ms)
    local l = self.leases[node]
    if not (l and l.epoch == epoch and l.owner == owner) then return 0 end
    jset(self, l, "expires_ms", now_ms(self) + ttl_ms)
    return 1
end)

Store.lease_takeover = prim("lease_takeover", function(self, _, node, epoch, expires_ms, owner,
                                                       ttl_ms)
    local now, l = now_ms(self), self.leases[node]
    if not (l and l.epoch == epoch and l.expires_ms == expires_ms and l.expires_ms
            and l.expires_ms < now) then
        return 0
    end
    jset(self, l, "epoch", l.epoch + 1)
    jset(self, l, "owner", owner)
    jset(self, l, "expires_ms", now + ttl_ms)
    return 1
end)

Store.lease_release = prim("lease_release", function(self, _, node, epoch, owner)
    local l = self.leases[node]
    if not (l and l.epoch == epoch and l.owner == owner) then return 0 end
    jset(self, l, "owner", nil)
    jset(self, l, "expires_ms", nil)
    return 1
end)

Store.list_leases = prim("list_leases", function(self)
    local r, now = {}, now_ms(self)
    for node, l in pairs(self.leases) do
        r[#r + 1] = { node = node, epoch = l.epoch, owner = l.owner, expires_ms = l.expires_ms,
                      now_ms = now }
    end
    sort(r, function(a, b) return a.node < b.node end)
    return r
end)

Store.check_lease = prim("check_lease", function(self, _, node, epoch)
    local l = self.leases[node]
    return (l and l.epoch == epoch and l.owner == node) and 1 or 0
end)

-- ---- phases (LED-67): several primitives as one transaction ----

local function undo(self, j)
    for i = j.n, 1, -3 do j[i - 2][j[i - 1]] = j[i] end
end

-- The contract is ron.ledger.store's "Phases"; the shared rules (the ops' shape, the
-- answer) are ron.ledger.store.phase's. The fault hook sees the call ("apply": before =
-- nothing applied, after = all of it, an error after = applied and the reply lost) and each
-- primitive inside it (a crash, an error or a missed guard there undoes the whole phase);
-- the simulator does not switch sagas inside a phase (store.in_apply), as no reader sees a
-- transaction half-done.
function Store:apply(ops, opts)
    phases.check(ops, opts)
    self.calls = self.calls + 1
    local f = self.fault
    if f then
        local act = f("before", "apply", ops)
        if act and act.err then return nil, act.err, act.class or "io" end
    end
    if self.journal then error("ron.ledger.store.memory: apply inside apply", 2) end
    local j = { n = 0 }
    self.journal, self.in_apply = j, true
    local ok, res, err, class = pcall(phases.run, self, ops)
    self.journal, self.in_apply = nil, nil
    if not ok or res == nil or not res.ok then undo(self, j) end
    if not ok then error(res, 0) end
    if res == nil then return nil, err, class end
    if f then
        local act = f("after", "apply", res, ops)
        if act and act.err then return nil, act.err, act.class or "io" end
    end
    return res
end

-- wip/perf (LED-50): nothing here is durable, so nothing to flush; outside the fault hook
-- (the simulator's enumeration of primitives stays as it is).
function Store:flush() return 0 end

function Store:close() end

return _M
