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
local ledger = require("ron.ledger")
local events = require("ron.ledger.events")
local schema = require("ron.ledger.store.schema")
local scan = require("ron.ledger.store.scan")
local usage = require("ron.ledger.usage")
local feed = require("ron.ledger.verify.feed")

local format, hex, ipairs, pairs, rep, tostring, type =
      string.format, ledger.hex, ipairs, pairs, string.rep, tostring, type

local _M = {}

local POLICY = { [0] = "no_overdraft", "capped", "uncapped" }
local STATUS = { [0] = "open", "frozen", "closed" }
local CLAIM = rep("\255", 256) -- the engine's claim rows (ron.ledger.ledger CLAIM_PREFIX)

-- A saga id that is pending: its own record, or its batch's (a member "<batch sid>/<k>").
local function pending(ctx, sid)
    if type(sid) ~= "string" then return false end
    return ctx.saga_ids[sid] or ctx.saga_ids[sid:match("^(.+)/%d+$") or ""] or false
end

local function all(ctx, name)
    local rows, err = scan.all(ctx.store, name)
    if not rows then ctx.problem(name, "cannot read: %s", tostring(err)) end
    return rows or {}
end

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
    for _, r in ipairs(all(ctx, "accounts")) do
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
    end
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

local function committed(ctx, r, w)
    local tr = ctx.by_intent[r.key]
    if not tr then
        return ctx.problem(w, "committed to %s, but no transfer carries this intent",
                           hex(tostring(r.transfer_id)))
    end
    tr.outcome = true
    if r.transfer_id ~= tr.rec.id then
        ctx.problem(w, "names transfer %s, the transfer carrying it is %s",
                    hex(tostring(r.transfer_id)), hex(tr.rec.id))
    end
    if r.code ~= nil or r.message ~= nil then
        ctx.problem(w, "a committed outcome with a code or a message")
    end
    local d = tr.ev and tr.ev.d
    if d and not feed.legacy(ctx, tr.ev) and d.body_hash ~= r.body_hash then
        ctx.problem(w, "its body hash differs from its transfer's event (seq %d)", tr.ev.seq)
    end
end

local function rejected(ctx, r, w)
    local ev = ctx.ev.rejection[events.rejection_id(r.key)]
    local d = ev and ev.d
    if not ev then return ctx.problem(w, "a stored rejection no rejection event names") end
    ev.matched = true
    if d and (d.intent ~= r.key or d.code ~= r.code or d.message ~= r.message
              or d.body_hash ~= r.body_hash) then
        ctx.problem(w, "differs from its rejection event (seq %d): code %s, body hash, message",
                    ev.seq, ctx.num(r.code))
    end
    if r.transfer_id ~= nil then ctx.problem(w, "a rejection that names a transfer") end
end

-- The keys events name besides their intents (the wallet's Idempotency-Key rows).
local function aliases(ctx)
    local out = {}
    for _, kind in ipairs { events.TRANSFER, events.REJECTION } do
        for _, ev in pairs(ctx.ev[kind]) do
            for _, k in ipairs(ev.d and type(ev.d.keys) == "table" and ev.d.keys or {}) do
                out[k] = ev
            end
        end
    end
    return out
end

local function claimed(ctx, r, w, by_key, alias)
    if r.code ~= nil or r.transfer_id ~= nil then
        ctx.problem(w, "a claimed row with a code or a transfer")
    end
    if r.key:sub(1, 256) == CLAIM then
        local o = by_key[r.key:sub(257)]
        if o and o.status ~= "claimed" then
            if o.body_hash ~= r.body_hash then
                ctx.problem(w, "its body hash differs from its intent's outcome")
            end
        elseif not pending(ctx, r.message) then
            ctx.problem(w, "a claim with no outcome and no pending saga")
        end
        return
    end
    local ev = alias[r.key]
    if ev then
        ev.alias_seen = ev.alias_seen or {}
        ev.alias_seen[r.key] = true
        if ev.d.body_hash ~= r.body_hash then
            ctx.problem(w, "its body hash differs from the event (seq %d) that names it", ev.seq)
        end
    else
        ctx.sum.unchecked = ctx.sum.unchecked + 1 -- (docs: an unnamed key row)
    end
end

function _M.intents(ctx)
    local rows, by_key = all(ctx, "intents"), {}
    for _, r in ipairs(rows) do if type(r.key) == "string" then by_key[r.key] = r end end
    local alias = aliases(ctx)
    for _, r in ipairs(rows) do
        local w = "intents " .. key_text(r.key)
        if type(r.key) ~= "string" then ctx.problem(w, "a key that is not bytes")
        elseif r.status == "committed" then committed(ctx, r, w)
        elseif r.status == "rejected" then rejected(ctx, r, w)
        elseif r.status == "claimed" then claimed(ctx, r, w, by_key, alias)
        else ctx.problem(w, "unknown status %q", tostring(r.status)) end
    end
    for _, r in ipairs(rows) do -- every outcome of the engine was claimed first (LED-27)
        if (r.status == "committed" or r.status == "rejected") and not by_key[CLAIM .. r.key] then
            ctx.problem("intents " .. key_text(CLAIM .. r.key), "missing: its intent has an "
                        .. "outcome, which the engine stores only after claiming it")
        end
    end
    for intent, tr in pairs(ctx.by_intent) do
        if not tr.outcome then
            ctx.problem("intents " .. key_text(intent), "missing: %s commits this intent",
                        tr.where)
        end
    end
    for _, ev in pairs(ctx.ev.rejection) do
        if not ev.matched then
            ctx.problem("intents " .. key_text(ev.d and ev.d.intent or "?"),
                        "missing: the rejection event at seq %d names it", ev.seq)
        end
    end
    for k, ev in pairs(alias) do
        if not (ev.alias_seen and ev.alias_seen[k]) then
            ctx.problem("intents " .. key_text(k), "missing: the event at seq %d names it",
                        ev.seq)
        end
    end
    ctx.sum.intents = #rows
end

-- ---- the rest ----

function _M.sagas(ctx)
    ctx.saga_ids = {}
    local rows = all(ctx, "sagas")
    for _, s in ipairs(rows) do
        ctx.saga_ids[s.id] = true
        ctx.problem("sagas " .. tostring(s.id), "pending in phase %s: a commit was interrupted; "
                    .. "`ron-accounting ledger recover` (or the exporter's next start) "
                    .. "finishes it", tostring(s.phase))
    end
    ctx.sum.sagas = #rows
end

-- Every head names a stored account and is free or held by a pending saga; every capped
-- pair a transfer debited has its head (verify.walk: ctx.need_head).
function _M.heads(ctx)
    local seen = {}
    for _, h in ipairs(all(ctx, "heads")) do
        local w = format("heads %s %s/%s", hex(tostring(h.account)), tostring(h.asset_code),
                         ctx.num(h.scale))
        seen[tostring(h.account) .. "\0" .. tostring(h.asset_code) .. "/" .. tostring(h.scale)]
            = true
        if not ctx.accounts[h.account] then ctx.problem(w, "names no stored account") end
        if h.holder ~= nil and not pending(ctx, h.holder) then
            ctx.problem(w, "held by %s, which is no pending saga", key_text(h.holder))
        end
    end
    for k, n in pairs(ctx.need_head or {}) do
        if not seen[k] then
            ctx.problem(format("heads %s %s/%d", hex(n.account), n.asset.code, n.asset.scale),
                        "missing: a transfer debited this capped pair, which takes its head")
        end
    end
end

function _M.transfer_accounts(ctx)
    for _, r in ipairs(all(ctx, "transfer_accounts")) do
        local w = format("transfer_accounts %s n%s", hex(tostring(r.account)), ctx.num(r.n))
        local tr = ctx.by_n[r.n]
        local pinned = false
        for _, p in ipairs(tr and tr.t and tr.t.pins or {}) do
            if p.account == r.account then pinned = true end
        end
        if not tr then ctx.problem(w, "names no stored transfer")
        elseif not pinned then ctx.problem(w, "%s does not pin this account", tr.where) end
    end
end

function _M.books(ctx)
    for _, b in ipairs(all(ctx, "books")) do
        if b.id ~= ctx.book then
            ctx.problem("books " .. tostring(b.id), "another book: this store's is %s "
                        .. "(verify checks one book, and a store holds one)", ctx.book)
        end
    end
end

function _M.meta(ctx)
    for _, m in ipairs(all(ctx, "ledger_meta")) do
        local w = "ledger_meta " .. tostring(m.key)
        if m.key == "schema_version" then
            if m.value ~= tostring(schema.VERSION) then
                ctx.problem(w, "is %q, this verify checks version %d", tostring(m.value),
                            schema.VERSION)
            end
        elseif m.key ~= "flush" then -- (the flush mark: random bytes, LED-50)
            ctx.problem(w, "an unknown meta row")
        end
    end
end

-- usage_streams rows of streams no transfer and no loss names (the known ones are checked
-- against their chains by verify's step 6).
function _M.streams(ctx, known)
    for _, r in ipairs(all(ctx, "usage_streams")) do
        if not known[tostring(r.tenant) .. " " .. tostring(r.dimension)] then
            ctx.problem("usage_streams " .. _M.stream_name(r.tenant, r.dimension),
                        "a stream head no usage transfer and no accepted loss names")
        end
    end
end

-- A stream as the problems name it: the tenant's UUID (hex when it is not 16 bytes) and
-- the dimension.
function _M.stream_name(tenant, dim)
    local t = type(tenant) == "string" and #tenant == 16 and usage.tenant_text(tenant)
              or hex(tostring(tenant))
    return t .. "/" .. tostring(dim)
end

return _M
