-- ron.ledger.verify.walk: the transfers (docs/LEDGER.md "What verify proves"). Each row's
-- bytes decode and hash to its id, its columns are its bytes' and its event's; then the
-- history is replayed in the feed's order, each transfer after the transfers whose outputs
-- it spends (issue 29: a change posting can be spent before the row, even the event, of the
-- transfer that made it is written, so neither the rows' insertion order nor the feed's
-- order alone is a dependency order). The replay checks every input (created by exactly one
-- transfer, spent once), conservation per asset, the pins (every involved account pinned,
-- at a stored version that is open), the pinned policies (no negative output on a
-- no_overdraft account, no pair taken below its floor at any point), reversals (the exact
-- inverse of their target) and usage transfers (LEDGER-RATING.md §5).
--
-- What is kept (I-7; docs/LEDGER.md "Verify's memory"): no transfer is held whole. The
-- transfers table is read twice, a page at a time: first for each row's own checks, keeping
-- per transfer (ord: its place in row order) a slot of 8 bytes in each column of ctx.tx
-- (id, n, created_at_ms, intent, pinned accounts, event seq, output count; the replay adds
-- body hash, first output's slot, done: 80 bytes), its 32-byte id and body hash as strings
-- (~64 bytes each with LuaJIT's header; interned: stored once however many columns and maps
-- name them, as the intent and a pinned-accounts string shared by every transfer of the
-- same accounts), ctx.ord_of (id -> ord) and ctx.by_intent (intent -> ord), one hash node
-- each (24 bytes, up to 48 as the hash part doubles), ctx.n_ord (n -> ord, 8); then in the
-- feed's order for the replay, each transfer decoded when its turn comes and dropped once
-- applied. Each output the replay creates is a slot of ctx.out's three columns (its
-- account and asset as one table per pair, its amount, the ord that spent it: 24 bytes),
-- the outputs of one transfer consecutive from ctx.tx.base[ord]. A key the event names
-- besides its intent (a wallet's Idempotency-Key) is kept too, for verify.rows' intents
-- (ctx.alias: its string and a hash node). ~330 bytes per transfer of two outputs in all,
-- ~500 for a wallet's (tests/bench/bench-ledger-verify.lua --phases).
local ledger = require("ron.ledger")
local B = require("ron.ledger.bigint")
local events = require("ron.ledger.events")
local usage = require("ron.ledger.usage")
local feed = require("ron.ledger.verify.feed")
local tnew = require("table.new")

local concat, format, hex, ipairs, pairs, setmetatable, sort, tostring, type =
      table.concat, string.format, ledger.hex, ipairs, pairs, setmetatable, table.sort, tostring,
      type

local _M = {}

local function pkey(tid, i) return tid .. format("%08x", i) end
_M.pkey = pkey
local function akey(a) return a.code .. "/" .. a.scale end
_M.akey = akey

local function add(a, b)
    return ledger.amount_add(a, b) or (a + b) -- an overflow of a sum is a finding elsewhere
end
_M.add = add

-- A body hash column's value for an event whose data carries none (nil: no decoded event).
local NOBH = {}
_M.NOBH = NOBH
-- A body hash into such a column (nil: NOBH), and back out of it (NOBH: nil).
local function keep_bh(bh) if bh == nil then return NOBH end return bh end
_M.keep_bh = keep_bh
function _M.stored_bh(bh) if bh == NOBH then return nil end return bh end

-- ctx.tx.done[ord] in the replay: its event met (SEEN), its transfer read (FETCHED).
local SEEN, FETCHED = 1, 2

-- How problems name transfer ord.
local function where(ctx, ord)
    local T = ctx.tx
    return format("transfers #%s %s", ctx.num(T.n[ord]), hex(tostring(T.id[ord])))
end
_M.where = where

-- The slot of output idx of transfer tid, once the replay applied it; else nil.
local function created(ctx, tid, idx)
    local ord = ctx.ord_of[tid]
    local base = ord and ctx.tx.base[ord]
    if base and type(idx) == "number" and idx >= 0 and idx < ctx.tx.nout[ord] and idx % 1 == 0
    then
        return base + idx
    end
    return nil
end
_M.created = created

-- One transfer row (ord: its place in row order): its bytes, id and columns; its columns
-- kept. Its event's data is checked against it in the replay, which reads the feed again.
local function read_one(ctx, rec, ord)
    local T = ctx.tx
    T.id[ord], T.n[ord], T.cat[ord], T.nout[ord], T.pins[ord] =
        rec.id, rec.n, rec.created_at_ms, false, ""
    local t, derr
    if type(rec.bytes) == "string" then t, derr = ledger.decode_transfer(rec.bytes) end
    if not t then
        ctx.problem(where(ctx, ord), "its bytes do not decode (%s)", tostring(derr or "not bytes"))
    else
        local pinned = {}
        for i, p in ipairs(t.pins) do pinned[i] = p.account end
        T.nout[ord], T.intent[ord], T.pins[ord] = #t.outputs, t.intent, concat(pinned)
        local id = ledger.transfer_id(t)
        if id ~= rec.id then
            ctx.problem(where(ctx, ord), "its bytes hash to %s, not to its id", hex(id))
        end
        if rec.intent ~= t.intent then
            ctx.problem(where(ctx, ord), "the intent column differs from its bytes")
        end
        if rec.metadata ~= t.metadata and not (rec.metadata == nil and t.metadata == "") then
            ctx.problem(where(ctx, ord), "the metadata column differs from its bytes")
        end
    end
    if rec.book ~= ctx.book then
        ctx.problem(where(ctx, ord), "its book column is %q, its event is in book %q",
                    tostring(rec.book), ctx.book)
    end
    local seq = ctx.ev.transfer[rec.id]
    if not seq then
        ctx.problem(where(ctx, ord), "has no transfer event")
    else
        T.seq[ord] = seq
    end
    return t
end

-- Every transfer row, a page at a time: ctx.tx, ctx.ord_of, ctx.by_intent, ctx.n_ord.
-- The columns are sized once for the transfers the feed names (a Lua array that grows
-- doubles: up to twice the slots it needs).
local COLUMNS = { "id", "n", "cat", "nout", "pins", "intent", "seq" }
local function columns(n)
    local T = { count = 0 }
    for _, c in ipairs(COLUMNS) do T[c] = tnew(n, 0) end
    return T
end

function _M.read(ctx)
    local hint = ctx.transfer_events or 0
    ctx.tx = columns(hint)
    ctx.ord_of, ctx.by_intent, ctx.n_ord = tnew(0, hint), tnew(0, hint), tnew(hint, 0)
    local T = ctx.tx
    local ok = feed.each_row(ctx, "transfers", function(rec)
        local ord = T.count + 1
        T.count = ord
        local t = read_one(ctx, rec, ord)
        ctx.ord_of[rec.id] = ord
        ctx.n_ord[rec.n] = ord
        if t then
            local other = ctx.by_intent[t.intent]
            if other then
                ctx.problem(where(ctx, ord), "commits the intent of %s again", where(ctx, other))
            end
            ctx.by_intent[t.intent] = ord
        end
    end)
    if not ok then -- (as if the table were empty, as before: no replay on part of it)
        ctx.tx = columns(0)
        ctx.ord_of, ctx.by_intent, ctx.n_ord = {}, {}, {}
        return
    end
    -- The feed's index of transfer events is dropped: each stored transfer's is its seq
    -- column; the events naming no stored transfer (each a problem) are kept apart.
    ctx.ev_unstored = {}
    for tid, seq in pairs(ctx.ev.transfer) do
        if not ctx.ord_of[tid] then
            ctx.problem("transfers " .. hex(tid), "missing: the transfer event at seq %d names "
                        .. "it", seq)
            ctx.ev_unstored[tid] = seq
        end
    end
    ctx.ev.transfer = nil
    ctx.sum.transfers = T.count
    T = nil -- (not a trace's constant: verify.feed.each_row)
end

-- ---- the replay ----

-- The accounts a transfer involves (owners of what it spends, then of what it creates), in
-- order; its pins checked against them and against the stored versions. -> account ->
-- the pinned version's row (decoded), for the policies.
local function pins(ctx, tr, consumed)
    local t, w = tr.t, tr.where
    local involved, order = {}, {}
    local function inv(a)
        if not involved[a] then
            involved[a] = true
            order[#order + 1] = a
        end
    end
    for _, p in ipairs(consumed) do inv(p.account) end
    for _, o in ipairs(t.outputs) do inv(o.account) end
    local at = {}
    for _, p in ipairs(t.pins) do
        local a = ctx.accounts[p.account] and ctx.accounts[p.account][p.version]
        if not involved[p.account] then
            ctx.problem(w, "pins account %s, which it does not involve", hex(p.account))
        end
        if not a then
            ctx.problem(w, "pins account %s at version %s, which is not stored", hex(p.account),
                        ctx.num(p.version))
        elseif a.status ~= "open" then
            ctx.problem(w, "pins account %s at version %s, which is %s", hex(p.account),
                        ctx.num(p.version), a.status)
        end
        at[p.account] = a
    end
    for _, a in ipairs(order) do
        if at[a] == nil then
            ctx.problem(w, "involves account %s without pinning it", hex(a))
        end
    end
    return at
end

local FLOOR = { no_overdraft = function() return 0 end, capped = function(a) return a.floor end,
                uncapped = function() return nil end }

-- The pairs' running balances after tr, each pair that went down checked against its
-- pinned floor; no negative output on a no_overdraft account.
local function policies(ctx, tr, at, delta, order)
    local t, w = tr.t, tr.where
    for _, o in ipairs(t.outputs) do
        local a = at[o.account]
        if a and a.policy == "no_overdraft" and o.amount < 0 then
            ctx.problem(w, "gives no_overdraft account %s a negative output (%s)",
                        hex(o.account), ctx.num(o.amount))
        end
    end
    for _, k in ipairs(order) do
        local d = delta[k]
        local after = add(ctx.bal[k] or 0, d.amount)
        ctx.bal[k] = after
        local a = at[d.account]
        local f = a and FLOOR[a.policy] and FLOOR[a.policy](a)
        if d.amount < 0 and f and after < f then
            ctx.problem(w, "takes account %s %s to %s, below its floor %s (%s at version %s)",
                        hex(d.account), akey(d.asset), ctx.num(after), ctx.num(f), a.policy,
                        ctx.num(a.version))
        end
    end
end

-- The floor heads the transfer took (LED-29: every capped pair it consumes a posting of or
-- gives a negative output): each must have its row (ensure_head before the point of no
-- return), ctx.need_head.
local function heads(ctx, at, consumed, outputs)
    local function need(account, asset)
        local a = at[account]
        if a and a.policy == "capped" then
            ctx.need_head[account .. "\0" .. akey(asset)] = { account = account, asset = asset }
        end
    end
    for _, p in ipairs(consumed) do need(p.account, p.asset) end
    for _, o in ipairs(outputs) do if o.amount < 0 then need(o.account, o.asset) end end
end

-- Transfer ord decoded, read again (a reversal replayed before its target: only a forged
-- feed puts it there; the target is read again rather than every transfer kept).
local function read_at(ctx, ord)
    local next_row = feed.cursor(ctx, "transfers")
    for _ = 1, ord - 1 do if not next_row() then return nil end end
    local rec = next_row()
    return rec and rec.id == ctx.tx.id[ord] and ledger.decode_transfer(rec.bytes) or nil
end

-- A reversal (its event's kind "reverse"): it spends exactly its target's outputs and
-- recreates exactly what its target spent (LED-34). The target, decoded, is in ctx.kept
-- (the feed marks the reversals' targets, ctx.keep) once the replay has read it.
local function reversal(ctx, tr)
    local d = tr.d
    if not d or d.kind ~= "reverse" then return end
    local tord = ctx.ord_of[d.target or ""]
    if not (tord and ctx.tx.nout[tord]) then
        ctx.problem(tr.where, "reverses transfer %s, which is not stored", hex(tostring(d.target)))
        return
    end
    local t, o, O, tid = tr.t, ctx.kept[d.target] or read_at(ctx, tord), ctx.out, ctx.tx.id[tord]
    local same = o ~= nil and #t.inputs == #o.outputs and #t.outputs == #o.inputs
    for i, ref in ipairs(same and t.inputs or {}) do
        if ref.transfer_id ~= tid or ref.index ~= i - 1 then same = false end
    end
    for i, ref in ipairs(same and o.inputs or {}) do
        local slot, now = created(ctx, ref.transfer_id, ref.index), t.outputs[i]
        local was = slot and O.pair[slot]
        if not was or was.account ~= now.account or akey(was.asset) ~= akey(now.asset)
           or O.amt[slot] ~= now.amount then
            same = false
        end
    end
    if not same then
        ctx.problem(tr.where, "is not the inverse of transfer %s, which it reverses", hex(tid))
    end
end

-- A usage transfer (metadata `UM` 01): its intent is its slice's, its unit output the
-- slice's quantity, revenue's output its rating; each slice consumed once.
local function usage_of(ctx, tr)
    local t, w = tr.t, tr.where
    if t.metadata:sub(1, 3) ~= usage.META_MAGIC then return end
    local m = usage.decode_metadata(t.metadata)
    if not m then return ctx.problem(w, "its usage metadata does not decode") end
    ctx.sum.usage = ctx.sum.usage + 1
    if t.intent ~= usage.intent(m.tenant, m.dimension, m.seq, m.b3) then
        ctx.problem(w, "its intent is not its slice's")
    end
    local revenue, source = usage.account("revenue"), usage.account("usage_source")
    local units, money = B.from(0), B.from(0)
    for _, out in ipairs(t.outputs) do
        if out.asset.scale == 0 and out.account ~= source and out.amount > 0
           and out.account == usage.account("usage", m.tenant) then
            units = B.add(units, B.from(out.amount))
        elseif out.account == revenue and out.amount > 0 then
            money = B.add(money, B.from(out.amount))
        end
    end
    if B.tostring(units) ~= m.quantity then
        ctx.problem(w, "moves %s units, its slice holds %s", B.tostring(units), m.quantity)
    end
    if B.tostring(money) ~= m.amount then
        ctx.problem(w, "credits revenue %s, its rating says %s", B.tostring(money), m.amount)
    end
    local sk = m.tenant .. " " .. m.dimension
    local s = ctx.slices[sk]
    if not s then
        s = { tenant = m.tenant, dimension = m.dimension, seqs = {} }
        ctx.slices[sk] = s
    end
    if s.seqs[m.seq] then
        ctx.problem(format("stream %s/%s seq %d", usage.tenant_text(m.tenant), m.dimension, m.seq),
                    "consumed by two transfers: %s and %s", s.seqs[m.seq].where, w)
    else
        s.seqs[m.seq] = { b3 = m.b3, prev_b3 = m.prev_b3, q = m.quantity, where = w }
    end
end

-- One transfer applied: its inputs spent, its outputs created (slots of ctx.out), the
-- checks above.
local function apply(ctx, tr)
    local t, w, ord = tr.t, tr.where, tr.ord
    local O, T = ctx.out, ctx.tx
    tr.applied = true
    local net, delta, order, consumed = {}, {}, {}, {}
    local function move(account, asset, amount)
        local k = account .. akey(asset)
        if not delta[k] then
            delta[k] = { account = account, asset = asset, amount = 0 }
            order[#order + 1] = k
        end
        delta[k].amount = add(delta[k].amount, amount)
        net[akey(asset)] = add(net[akey(asset)] or 0, amount)
    end
    for _, ref in ipairs(t.inputs) do
        local slot = created(ctx, ref.transfer_id, ref.index)
        local by = O.by[slot]
        if by then
            ctx.problem(w, "spends posting %s:%d already spent by %s", hex(ref.transfer_id),
                        ref.index, hex(T.id[by]))
        else
            O.by[slot] = ord
            local pair = O.pair[slot]
            local p = { account = pair.account, asset = pair.asset, amount = O.amt[slot] }
            consumed[#consumed + 1] = p
            move(p.account, p.asset, -p.amount)
        end
    end
    T.base[ord] = O.count + 1
    for _, o in ipairs(t.outputs) do
        local slot, k = O.count + 1, o.account .. akey(o.asset)
        local pair = ctx.pairs[k] -- (one table per pair, not per output)
        if not pair then
            pair = { account = o.account, asset = o.asset }
            ctx.pairs[k] = pair
        end
        O.count, O.pair[slot], O.amt[slot], O.by[slot] = slot, pair, o.amount, false
        move(o.account, o.asset, o.amount)
    end
    for a, v in pairs(net) do
        if v ~= 0 then
            ctx.problem(w, "%s is not conserved (outputs - inputs = %s)", a, ctx.num(v))
        end
    end
    local at = pins(ctx, tr, consumed)
    policies(ctx, tr, at, delta, order)
    heads(ctx, at, consumed, t.outputs)
    reversal(ctx, tr)
    usage_of(ctx, tr)
end

-- The transfers the replay never reached (held back, in the order they were offered): each
-- names the postings no transfer created.
local function never_applied(ctx, list)
    for _, tr in ipairs(list) do
        if not tr.applied then
            for _, ref in ipairs(tr.t.inputs) do
                if not created(ctx, ref.transfer_id, ref.index) then
                    ctx.problem(tr.where, "spends posting %s:%d that no transfer created",
                                hex(ref.transfer_id), ref.index)
                end
            end
        end
    end
end

-- The transfers in row order, each decoded when asked for: fetch(ctx, src, ord) -> t. A
-- row read before its turn (its event comes later in the feed) waits as its bytes
-- (src.held), so what is held is as many rows as the row order runs ahead of the feed's: a
-- few in-flight commits (a store whose rows were forged far out of the feed's order costs
-- its bytes, no more).
local function rows_in_turn(ctx)
    return { next_row = feed.cursor(ctx, "transfers"), pos = 0, held = {} }
end

local function pending(ctx, p) -- will the feed ask for row p (its event not replayed yet)?
    local T = ctx.tx
    local id = T.id[p]
    return T.nout[p] and ctx.ord_of[id] == p and T.seq[p] and T.done[p] ~= FETCHED
end

local function fetch(ctx, src, ord)
    local b = src.held[ord]
    if b then
        src.held[ord] = nil
        return ledger.decode_transfer(b)
    end
    while src.pos < ord do
        local rec = src.next_row()
        if not rec then return nil end
        local pos = src.pos + 1
        src.pos = pos
        if rec.id ~= ctx.tx.id[pos] then -- (only a store read without a snapshot)
            ctx.problem("transfers", "changed while verify read it")
            src.pos = ord
            return nil
        end
        if pos == ord then return ledger.decode_transfer(rec.bytes) end
        if pending(ctx, pos) then src.held[pos] = rec.bytes end
    end
    return nil
end

-- One transfer event of the feed (the first of its id; ev.d decoded): checked against its
-- transfer's columns; its body hash and the keys it names kept for verify.rows' intents.
-- -> the transfer to replay (ord, decodable), or nil.
local function event_of(ctx, ev, d)
    local T, ord = ctx.tx, ctx.ord_of[ev.transfer_id]
    if ord then
        if d then T.bh[ord] = keep_bh(d.body_hash) end
        if T.nout[ord] then
            feed.check_transfer(ctx, d, ev.seq, T.intent[ord], T.cat[ord], where, ord)
        end
    end
    if d and type(d.keys) == "table" then -- the wallet's Idempotency-Keys (verify.rows)
        local ref = ord or { seq = ev.seq, d = d }
        for _, k in ipairs(d.keys) do ctx.alias[k] = ref end
    end
    return ord and T.nout[ord] and ord or nil
end

-- The replay's queue (q = { waiting = { pkey -> transfers }, held_back = { ... } }):
-- offer(ctx, q, tr) applies tr once every posting it spends exists, and then the transfers
-- held back on its outputs; q.held_back lists those held back, in order.
local function run(ctx, q, first)
    local list, qi = { first }, 1
    while list[qi] do
        local tr = list[qi]
        qi = qi + 1
        apply(ctx, tr)
        for i = 1, #tr.t.outputs do
            local k = pkey(tr.id, i - 1)
            for _, x in ipairs(q.waiting[k] or {}) do
                x.missing = x.missing - 1
                if x.missing == 0 then list[#list + 1] = x end
            end
            q.waiting[k] = nil
        end
    end
end

local function offer(ctx, q, tr)
    tr.missing = 0
    for _, ref in ipairs(tr.t.inputs) do
        if not created(ctx, ref.transfer_id, ref.index) then
            local k = pkey(ref.transfer_id, ref.index)
            tr.missing = tr.missing + 1
            q.waiting[k] = q.waiting[k] or {}
            q.waiting[k][#q.waiting[k] + 1] = tr
        end
    end
    if tr.missing == 0 then run(ctx, q, tr) else q.held_back[#q.held_back + 1] = tr end
end

-- A transfer of the replay: tr.where (how problems name it) made when first asked for.
local ITEM = { __index = function(tr, k)
    if k ~= "where" then return nil end
    local w = where(tr.ctx, tr.ord)
    tr.where = w
    return w
end }

local function item(ctx, ord, t, d)
    local id = ctx.tx.id[ord]
    if ctx.keep[id] then ctx.kept[id] = t end
    return setmetatable({ ctx = ctx, ord = ord, id = id, t = t, d = d }, ITEM)
end

-- Is ev the first transfer event of its id (the one the feed's first read indexed), not
-- met before in this read? mark(ctx, ev): met (its transfer still to be fetched).
local function first(ctx, ev)
    if ev.kind ~= events.TRANSFER then return false end
    local T, ord = ctx.tx, ctx.ord_of[ev.transfer_id]
    if ord then return T.seq[ord] == ev.seq and not T.done[ord] end
    return ctx.ev_unstored[ev.transfer_id] == ev.seq
end

local function mark(ctx, ev)
    local ord = ctx.ord_of[ev.transfer_id]
    if ord then ctx.tx.done[ord] = SEEN else ctx.ev_unstored[ev.transfer_id] = false end
end

-- The transfers without an event, last, by row (each is a problem already: read again
-- rather than held).
local function without_event(ctx, ord, id)
    local T = ctx.tx
    return T.nout[ord] and not T.seq[ord] and ctx.ord_of[id] == ord
end

local function eventless(ctx, q)
    local T = ctx.tx
    local any = false
    for ord = 1, T.count do
        if without_event(ctx, ord, T.id[ord]) then any = true end
    end
    if not any then return end
    local ord = 0
    feed.each_row(ctx, "transfers", function(rec)
        ord = ord + 1
        local t = without_event(ctx, ord, rec.id) and ledger.decode_transfer(rec.bytes)
        if t then offer(ctx, q, item(ctx, ord, t, nil)) end
    end)
    q = nil -- (not a trace's constant: verify.feed.each_row)
end

-- The feed's order (a transfer without an event last, by row), each transfer held back
-- until every posting it spends exists; ties of seq (only a feed whose key was dropped) by
-- row number. -> ctx.out (every output, the ord that spent it), ctx.bal, ctx.need_head,
-- ctx.kept (id -> the transfer decoded, for the ids ctx.keep names), ctx.alias,
-- ctx.tx.bh, ctx.tx.base.
function _M.replay(ctx)
    ctx.bal, ctx.need_head, ctx.kept, ctx.pairs, ctx.alias = {}, {}, {}, {}, {}
    local outputs = 0 -- (the columns sized once: no doubling's slack)
    for ord = 1, ctx.tx.count do outputs = outputs + (ctx.tx.nout[ord] or 0) end
    ctx.out = { pair = tnew(outputs, 0), amt = tnew(outputs, 0), by = tnew(outputs, 0),
                count = 0 }
    local n = ctx.tx.count
    ctx.tx.bh, ctx.tx.base, ctx.tx.done = tnew(n, 0), tnew(n, 0), tnew(n, 0)
    local q, src = { waiting = {}, held_back = {} }, rows_in_turn(ctx)
    local tie, tie_seq = {}, nil
    local function flush()
        local T = ctx.tx
        if #tie > 1 then sort(tie, function(a, b) return T.n[a.ord] < T.n[b.ord] end) end
        for _, x in ipairs(tie) do
            local t = fetch(ctx, src, x.ord)
            T.done[x.ord] = FETCHED -- (fetch holds it no more)
            if t then offer(ctx, q, item(ctx, x.ord, t, x.d)) end
        end
        tie = {}
    end
    feed.each(ctx, function(ev)
        if not first(ctx, ev) then return end
        if ev.seq ~= tie_seq then flush() end
        tie_seq = ev.seq
        mark(ctx, ev)
        local d = events.decode(ev.data)
        local ord = event_of(ctx, ev, d)
        if ord then tie[#tie + 1] = { ord = ord, d = d } end
    end)
    flush()
    eventless(ctx, q)
    never_applied(ctx, q.held_back)
    -- (written, so that no compiled trace keeps them as constants: verify.feed.each_row)
    q, src = nil, nil
end

return _M
