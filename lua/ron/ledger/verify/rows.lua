-- ron.ledger.verify.rows: the tables besides the transfers, postings and balances, each row
-- against what names it (docs/LEDGER.md "What verify proves"):
--   accounts      each version's columns are its canonical bytes, versions 1, 2, ... per
--                 account, a later version changes the status only (no verb of the engine
--                 changes a policy or a floor; closed is final), each version is the data
--                 of its `account` event and each such event has its row (LED-68);
--   intents       a committed outcome names the transfer that carries its intent and the
--                 body hash its event carries; a stored rejection is its `rejection` event
--                 field for field; a claim has its outcome (same body hash) or a pending saga;
--                 a key an event names (the wallet's Idempotency-Key) has that body hash;
--   heads         each names a stored account and is free or held by a pending saga;
--   sagas         each is a commit interrupted (reported: `ledger recover` finishes it);
--   transfer_accounts  each names a stored transfer that pins its account;
--   books, ledger_meta  this book; the schema version; the flush mark.
-- Each table is read a page at a time; the intents in one pass, each claim after its
-- outcome (the keys' order), keeping two map entries per outcome (rows.intents).
local ledger = require("ron.ledger")
local events = require("ron.ledger.events")
local schema = require("ron.ledger.store.schema")
local usage = require("ron.ledger.usage")
local feed = require("ron.ledger.verify.feed")
local walk = require("ron.ledger.verify.walk")
local tnew = require("table.new")

local format, hex, ipairs, pairs, rep, tostring, type =
      string.format, ledger.hex, ipairs, pairs, string.rep, tostring, type

local _M = {}

local POLICY = { [0] = "no_overdraft", "capped", "uncapped" }
local STATUS = { [0] = "open", "frozen", "closed" }
local CLAIM = rep("\255", 256) -- the engine's claim rows (ron.ledger.ledger CLAIM_PREFIX)
local keep_bh, stored_bh, walk_where = walk.keep_bh, walk.stored_bh, walk.where

-- A saga id that is pending: its own record, or its batch's (a member "<batch sid>/<k>").
local function pending(ctx, sid)
    if type(sid) ~= "string" then return false end
    return ctx.saga_ids[sid] or ctx.saga_ids[sid:match("^(.+)/%d+$") or ""] or false
end

-- each(ctx, name, fn): fn(row) for every row of a table, a page at a time
local each = feed.each_row

-- ---- accounts ----

local function account_row(ctx, r, w)
    local a = type(r.bytes) == "string" and ledger.decode_account(r.bytes)
    if not a then
        ctx.problem(w, "its bytes do not decode")
        return nil
    end
    if ledger.encode_account(a) ~= r.bytes then ctx.problem(w, "its bytes are not canonical") end
    if a.id ~= r.id or a.version ~= r.version then
        ctx.problem(w, "its bytes name account %s version %s", hex(a.id), ctx.num(a.version))
    end
    if POLICY[r.policy] ~= a.policy or r.floor ~= a.floor or STATUS[r.status] ~= a.status then
        ctx.problem(w, "its columns say %s floor %s %s, its bytes %s floor %s %s",
                    tostring(POLICY[r.policy] or r.policy), ctx.num(r.floor),
                    tostring(STATUS[r.status] or r.status), a.policy, ctx.num(a.floor), a.status)
    end
    local ev = ctx.ev.account[events.account_id(r.bytes)]
    if not ev then
        ctx.problem(w, "no account event names this version")
    elseif ev.data ~= r.bytes then
        ctx.problem(w, "its event (seq %d) holds other bytes", ev.seq)
    else
        ev.matched = true
    end
    return a
end

-- A version against the one before it: only the status changes, never after closed.
local function transition(ctx, prev, a, w)
    if a.policy ~= prev.policy or a.floor ~= prev.floor then
        ctx.problem(w, "changes the policy or floor (%s %s -> %s %s): no verb of the engine "
                    .. "does", prev.policy, ctx.num(prev.floor), a.policy, ctx.num(a.floor))
    end
    if prev.status == "closed" then
        ctx.problem(w, "follows version %s, which closed the account for good",
                    ctx.num(prev.version))
    elseif a.status == prev.status then
        ctx.problem(w, "changes nothing of version %s", ctx.num(prev.version))
    end
end

-- ctx.accounts: id -> { [version] = the decoded row }.
function _M.accounts(ctx)
    ctx.accounts = {}
    local last = {}
    each(ctx, "accounts", function(r)
        local w = format("accounts %s v%s", hex(tostring(r.id)), ctx.num(r.version))
        local a = account_row(ctx, r, w)
        local h = ctx.accounts[r.id] or {}
        ctx.accounts[r.id] = h
        local prev = last[r.id]
        if r.version ~= (prev and prev.version or 0) + 1 then
            ctx.problem(w, "follows version %s (versions go 1, 2, ...)",
                        prev and ctx.num(prev.version) or "none")
        end
        if a then
            if prev and prev.a then transition(ctx, prev.a, a, w) end
            h[r.version] = a
        end
        last[r.id] = { version = r.version, a = a }
    end)
    for id, ev in pairs(ctx.ev.account) do
        local a = not ev.matched and type(ev.data) == "string" and ledger.decode_account(ev.data)
        if a and events.account_id(ev.data) == id then
            ctx.problem(format("accounts %s v%s", hex(a.id), ctx.num(a.version)),
                        "missing: the account event at seq %d names it", ev.seq)
        elseif not ev.matched then
            ctx.problem(feed.where(ev.seq), "an account event whose data is no account of its "
                        .. "id %s", hex(id))
        end
    end
end

-- ---- intents ----

local function key_text(k)
    if type(k) ~= "string" then return tostring(k) end
    if k:sub(1, 256) == CLAIM then return "claim of " .. (k:sub(257):match("^[%g ]+$")
                                                          or hex(k:sub(257))) end
    return k:match("^[%g ]+$") or hex(k)
end
_M.key_text = key_text

-- How problems name an intents row (made for a problem only).
local function iw(r) return "intents " .. key_text(r.key) end

-- A committed outcome against the transfer carrying its intent (verify.walk's columns).
local function committed(ctx, r)
    local T, ord = ctx.tx, ctx.by_intent[r.key]
    if not ord then
        return ctx.problem(iw(r), "committed to %s, but no transfer carries this intent",
                           hex(tostring(r.transfer_id)))
    end
    T.outcome[ord] = true
    if r.transfer_id ~= T.id[ord] then
        ctx.problem(iw(r), "names transfer %s, the transfer carrying it is %s",
                    hex(tostring(r.transfer_id)), hex(T.id[ord]))
    end
    if r.code ~= nil or r.message ~= nil then
        ctx.problem(iw(r), "a committed outcome with a code or a message")
    end
    local bh = T.bh[ord] -- (nil: no decoded event)
    if bh ~= nil and not feed.legacy(ctx, T.seq[ord]) and stored_bh(bh) ~= r.body_hash then
        ctx.problem(iw(r), "its body hash differs from its transfer's event (seq %d)", T.seq[ord])
    end
end

local function rejected(ctx, r)
    local ev = ctx.ev.rejection[events.rejection_id(r.key)]
    local d = ev and ev.d
    if not ev then return ctx.problem(iw(r), "a stored rejection no rejection event names") end
    ev.matched = true
    if d and (d.intent ~= r.key or d.code ~= r.code or d.message ~= r.message
              or d.body_hash ~= r.body_hash) then
        ctx.problem(iw(r), "differs from its rejection event (seq %d): code %s, body hash, message",
                    ev.seq, ctx.num(r.code))
    end
    if r.transfer_id ~= nil then ctx.problem(iw(r), "a rejection that names a transfer") end
end

-- The keys events name besides their intents (the wallet's Idempotency-Key rows):
-- ctx.alias, key -> the ord of the transfer whose event names it (negative once its row is
-- found), or the event ({ seq, d }: a rejection's, or a transfer event of no stored
-- transfer). The transfer events' were set by the replay (verify.walk); the rejections'
-- are added here, over them (as before: transfers first, then rejections).
local function aliases(ctx)
    local out = ctx.alias
    for _, ev in pairs(ctx.ev[events.REJECTION]) do
        for _, k in ipairs(ev.d and type(ev.d.keys) == "table" and ev.d.keys or {}) do
            out[k] = ev
        end
    end
    return out
end

-- A named key's row: its event's seq and body hash, marked seen.
local function alias_of(ctx, alias, key)
    local ev = alias[key]
    if type(ev) == "number" then
        local ord = ev < 0 and -ev or ev
        alias[key] = -ord
        local bh = ctx.tx.bh[ord]
        return ctx.tx.seq[ord], stored_bh(bh)
    end
    ev.alias_seen = ev.alias_seen or {}
    ev.alias_seen[key] = true
    return ev.seq, ev.d.body_hash
end

-- outcome: key -> the body hash (NOBH: none) of the row of that key, unless claimed
local function claimed(ctx, r, outcome, alias)
    if r.code ~= nil or r.transfer_id ~= nil then
        ctx.problem(iw(r), "a claimed row with a code or a transfer")
    end
    if r.key:sub(1, 256) == CLAIM then
        local bh = outcome[r.key:sub(257)]
        if bh ~= nil then
            if stored_bh(bh) ~= r.body_hash then
                ctx.problem(iw(r), "its body hash differs from its intent's outcome")
            end
        elseif not pending(ctx, r.message) then
            ctx.problem(iw(r), "a claim with no outcome and no pending saga")
        end
        return
    end
    if alias[r.key] then
        local seq, bh = alias_of(ctx, alias, r.key)
        if bh ~= r.body_hash then
            ctx.problem(iw(r), "its body hash differs from the event (seq %d) that names it", seq)
        end
    else
        ctx.sum.unchecked = ctx.sum.unchecked + 1 -- (docs: an unnamed key row)
    end
end

-- The problems left once every intents row is read: outcomes without their claim,
-- transfers, rejection events and named keys without their row.
local function intents_missing(ctx, need, alias)
    for key, n in pairs(need) do
        for _ = 1, n do
            ctx.problem("intents " .. key_text(CLAIM .. key), "missing: its intent has an "
                        .. "outcome, which the engine stores only after claiming it")
        end
    end
    local T = ctx.tx
    for intent, ord in pairs(ctx.by_intent) do
        if not T.outcome[ord] then
            ctx.problem("intents " .. key_text(intent), "missing: %s commits this intent",
                        walk_where(ctx, ord))
        end
    end
    for _, ev in pairs(ctx.ev.rejection) do
        if not ev.matched then
            ctx.problem("intents " .. key_text(ev.d and ev.d.intent or "?"),
                        "missing: the rejection event at seq %d names it", ev.seq)
        end
    end
    for k, ev in pairs(alias) do
        local seen, seq
        if type(ev) == "number" then
            seen, seq = ev < 0, T.seq[ev]
        else
            seen, seq = ev.alias_seen and ev.alias_seen[k], ev.seq
        end
        if not seen then
            ctx.problem("intents " .. key_text(k), "missing: the event at seq %d names it", seq)
        end
    end
end

-- Every intents row, a page at a time. A claim's key (256 bytes 0xff, then its intent)
-- sorts after its intent's key, as every key after every key it prefixes with CLAIM (the
-- stores order keys bytewise; SQLite's claims come after its intents rows), so a claim is
-- read after its outcome: what is kept is, per outcome, its body hash and whether its claim
-- is still to come (two map entries keyed by the intent's interned string), no row.
function _M.intents(ctx)
    local alias, outcome, need, n = aliases(ctx), {}, {}, 0
    ctx.tx.outcome = tnew(ctx.tx.count, 0)
    each(ctx, "intents", function(r)
        n = n + 1
        if type(r.key) ~= "string" then return ctx.problem(iw(r), "a key that is not bytes") end
        if r.status == "claimed" then
            outcome[r.key] = nil
        else
            outcome[r.key] = keep_bh(r.body_hash)
        end
        if r.key:sub(1, 256) == CLAIM then need[r.key:sub(257)] = nil end
        if r.status == "committed" or r.status == "rejected" then
            need[r.key] = (need[r.key] or 0) + 1 -- (every outcome was claimed first: LED-27)
        end
        if r.status == "committed" then committed(ctx, r)
        elseif r.status == "rejected" then rejected(ctx, r)
        elseif r.status == "claimed" then claimed(ctx, r, outcome, alias)
        else ctx.problem(iw(r), "unknown status %q", tostring(r.status)) end
    end)
    intents_missing(ctx, need, alias)
    ctx.sum.intents = n
    alias, outcome, need = nil, nil, nil -- (not a trace's constant: verify.feed.each_row)
end

-- ---- the rest ----

function _M.sagas(ctx)
    ctx.saga_ids = {}
    local n = 0
    each(ctx, "sagas", function(sg)
        n = n + 1
        ctx.saga_ids[sg.id] = true
        ctx.problem("sagas " .. tostring(sg.id), "pending in phase %s: a commit was interrupted; "
                    .. "`ron-accounting ledger recover` (or the exporter's next start) "
                    .. "finishes it", tostring(sg.phase))
    end)
    ctx.sum.sagas = n
end

-- Every head names a stored account and is free or held by a pending saga; every capped
-- pair a transfer debited has its head (verify.walk: ctx.need_head).
function _M.heads(ctx)
    local seen = {}
    each(ctx, "heads", function(h)
        local w = format("heads %s %s/%s", hex(tostring(h.account)), tostring(h.asset_code),
                         ctx.num(h.scale))
        seen[tostring(h.account) .. "\0" .. tostring(h.asset_code) .. "/" .. tostring(h.scale)]
            = true
        if not ctx.accounts[h.account] then ctx.problem(w, "names no stored account") end
        if h.holder ~= nil and not pending(ctx, h.holder) then
            ctx.problem(w, "held by %s, which is no pending saga", key_text(h.holder))
        end
    end)
    for k, n in pairs(ctx.need_head or {}) do
        if not seen[k] then
            ctx.problem(format("heads %s %s/%d", hex(n.account), n.asset.code, n.asset.scale),
                        "missing: a transfer debited this capped pair, which takes its head")
        end
    end
end

-- Does transfer ord pin account (its pinned accounts: 16 bytes each, verify.walk)?
local function pins(ctx, ord, account)
    local list = ctx.tx.pins[ord]
    if type(account) ~= "string" or #account ~= 16 then return false end
    local at = list:find(account, 1, true)
    while at do
        if at % 16 == 1 then return true end
        at = list:find(account, at + 1, true)
    end
    return false
end

function _M.transfer_accounts(ctx)
    each(ctx, "transfer_accounts", function(r)
        local ord = r.n ~= nil and ctx.n_ord[r.n]
        if not (ord and pins(ctx, ord, r.account)) then
            local w = format("transfer_accounts %s n%s", hex(tostring(r.account)), ctx.num(r.n))
            if not ord then ctx.problem(w, "names no stored transfer")
            else ctx.problem(w, "%s does not pin this account", walk_where(ctx, ord)) end
        end
    end)
end

function _M.books(ctx)
    each(ctx, "books", function(b)
        if b.id ~= ctx.book then
            ctx.problem("books " .. tostring(b.id), "another book: this store's is %s "
                        .. "(verify checks one book, and a store holds one)", ctx.book)
        end
    end)
end

function _M.meta(ctx)
    each(ctx, "ledger_meta", function(m)
        local w = "ledger_meta " .. tostring(m.key)
        if m.key == "schema_version" then
            if m.value ~= tostring(schema.VERSION) then
                ctx.problem(w, "is %q, this verify checks version %d", tostring(m.value),
                            schema.VERSION)
            end
        elseif m.key ~= "flush" then -- (the flush mark: random bytes, LED-50)
            ctx.problem(w, "an unknown meta row")
        end
    end)
end

-- usage_streams rows of streams no transfer and no loss names (the known ones are checked
-- against their chains by verify's step 6).
function _M.streams(ctx, known)
    each(ctx, "usage_streams", function(r)
        if not known[tostring(r.tenant) .. " " .. tostring(r.dimension)] then
            ctx.problem("usage_streams " .. _M.stream_name(r.tenant, r.dimension),
                        "a stream head no usage transfer and no accepted loss names")
        end
    end)
end

-- A stream as the problems name it: the tenant's UUID (hex when it is not 16 bytes) and
-- the dimension.
function _M.stream_name(tenant, dim)
    local t = type(tenant) == "string" and #tenant == 16 and usage.tenant_text(tenant)
              or hex(tostring(tenant))
    return t .. "/" .. tostring(dim)
end

return _M
