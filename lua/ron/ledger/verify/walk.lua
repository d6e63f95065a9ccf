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
local ledger = require("ron.ledger")
local B = require("ron.ledger.bigint")
local scan = require("ron.ledger.store.scan")
local usage = require("ron.ledger.usage")
local feed = require("ron.ledger.verify.feed")

local format, hex, ipairs, pairs, sort, tostring, type =
      string.format, ledger.hex, ipairs, pairs, table.sort, tostring, type

local _M = {}

local function pkey(tid, i) return tid .. format("%08x", i) end
_M.pkey = pkey
local function akey(a) return a.code .. "/" .. a.scale end
_M.akey = akey

local function add(a, b)
    return ledger.amount_add(a, b) or (a + b) -- an overflow of a sum is a finding elsewhere
end
_M.add = add

-- One transfer row: its bytes, id, columns and event.
local function read_one(ctx, rec)
    local w = format("transfers #%s %s", ctx.num(rec.n), hex(tostring(rec.id)))
    local tr = { rec = rec, where = w }
    local t, derr
    if type(rec.bytes) == "string" then t, derr = ledger.decode_transfer(rec.bytes) end
    if not t then
        ctx.problem(w, "its bytes do not decode (%s)", tostring(derr or "not bytes"))
    else
        tr.t = t
        local id = ledger.transfer_id(t)
        if id ~= rec.id then ctx.problem(w, "its bytes hash to %s, not to its id", hex(id)) end
        if rec.intent ~= t.intent then
            ctx.problem(w, "the intent column differs from its bytes")
        end
        if rec.metadata ~= t.metadata and not (rec.metadata == nil and t.metadata == "") then
            ctx.problem(w, "the metadata column differs from its bytes")
        end
    end
    if rec.book ~= ctx.book then
        ctx.problem(w, "its book column is %q, its event is in book %q", tostring(rec.book),
                    ctx.book)
    end
    local ev = ctx.ev.transfer[rec.id]
    if not ev then
        ctx.problem(w, "has no transfer event")
    else
        tr.ev = ev
        if t then feed.check_transfer(ctx, ev, t, rec, w) end
    end
    return tr
end

-- Every transfer row; ctx.transfers (id), ctx.by_n, ctx.by_intent.
function _M.read(ctx)
    ctx.transfers, ctx.by_n, ctx.by_intent = {}, {}, {}
    local rows, err = scan.all(ctx.store, "transfers")
    if not rows then
        ctx.problem("transfers", "cannot read: %s", tostring(err))
        return
    end
    for _, rec in ipairs(rows) do
        local tr = read_one(ctx, rec)
        ctx.transfers[rec.id] = tr
        ctx.by_n[rec.n] = tr
        if tr.t then
            local other = ctx.by_intent[tr.t.intent]
            if other then ctx.problem(tr.where, "commits the intent of %s again", other.where) end
            ctx.by_intent[tr.t.intent] = tr
        end
    end
    for tid, ev in pairs(ctx.ev.transfer) do
        if not ctx.transfers[tid] then
            ctx.problem("transfers " .. hex(tid), "missing: the transfer event at seq %d names "
                        .. "it", ev.seq)
        end
    end
    ctx.sum.transfers = #rows
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

-- A reversal (its event's kind "reverse"): it spends exactly its target's outputs and
-- recreates exactly what its target spent (LED-34).
local function reversal(ctx, tr)
    local d = tr.ev and tr.ev.d
    if not d or d.kind ~= "reverse" then return end
    local target = ctx.transfers[d.target or ""]
    if not (target and target.t) then
        ctx.problem(tr.where, "reverses transfer %s, which is not stored", hex(tostring(d.target)))
        return
    end
    local t, o = tr.t, target.t
    local same = #t.inputs == #o.outputs and #t.outputs == #o.inputs
    for i, ref in ipairs(same and t.inputs or {}) do
        if ref.transfer_id ~= target.rec.id or ref.index ~= i - 1 then same = false end
    end
    for i, ref in ipairs(same and o.inputs or {}) do
        local was, now = ctx.created[pkey(ref.transfer_id, ref.index)], t.outputs[i]
        if not was or was.account ~= now.account or akey(was.asset) ~= akey(now.asset)
           or was.amount ~= now.amount then
            same = false
        end
    end
    if not same then
        ctx.problem(tr.where, "is not the inverse of transfer %s, which it reverses",
                    hex(target.rec.id))
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

-- One transfer applied: its inputs spent, its outputs created, the checks above.
local function apply(ctx, tr)
    local t, w, tid = tr.t, tr.where, tr.rec.id
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
        local p = ctx.created[pkey(ref.transfer_id, ref.index)]
        if p.by then
            ctx.problem(w, "spends posting %s:%d already spent by %s", hex(ref.transfer_id),
                        ref.index, hex(p.by))
        else
            p.by = tid
            consumed[#consumed + 1] = p
            move(p.account, p.asset, -p.amount)
        end
    end
    for i, o in ipairs(t.outputs) do
        ctx.created[pkey(tid, i - 1)] = { tid = tid, index = i - 1, account = o.account,
                                          asset = o.asset, amount = o.amount }
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

-- The transfers the replay never reached: each names the postings no transfer created.
local function never_applied(ctx, list)
    for _, tr in ipairs(list) do
        if not tr.applied then
            for _, ref in ipairs(tr.t.inputs) do
                if not ctx.created[pkey(ref.transfer_id, ref.index)] then
                    ctx.problem(tr.where, "spends posting %s:%d that no transfer created",
                                hex(ref.transfer_id), ref.index)
                end
            end
        end
    end
end

-- The feed's order (a transfer without an event last, by row), each transfer held back
-- until every posting it spends exists. -> ctx.created: pkey -> the posting as its
-- transfer made it, with `by` = the transfer that spent it.
function _M.replay(ctx)
    ctx.created, ctx.bal, ctx.need_head = {}, {}, {}
    local list = {}
    for _, tr in pairs(ctx.transfers) do if tr.t then list[#list + 1] = tr end end
    sort(list, function(a, b)
        local sa, sb = a.ev and a.ev.seq or math.huge, b.ev and b.ev.seq or math.huge
        if sa ~= sb then return sa < sb end
        return a.rec.n < b.rec.n
    end)
    local waiting = {}
    local function run(first)
        local queue, qi = { first }, 1
        while queue[qi] do
            local tr = queue[qi]
            qi = qi + 1
            apply(ctx, tr)
            for i = 1, #tr.t.outputs do
                local k = pkey(tr.rec.id, i - 1)
                for _, x in ipairs(waiting[k] or {}) do
                    x.missing = x.missing - 1
                    if x.missing == 0 then queue[#queue + 1] = x end
                end
                waiting[k] = nil
            end
        end
    end
    for _, tr in ipairs(list) do
        tr.missing = 0
        for _, ref in ipairs(tr.t.inputs) do
            local k = pkey(ref.transfer_id, ref.index)
            if not ctx.created[k] then
                tr.missing = tr.missing + 1
                waiting[k] = waiting[k] or {}
                waiting[k][#waiting[k] + 1] = tr
            end
        end
        if tr.missing == 0 then run(tr) end
    end
    never_applied(ctx, list)
end

return _M
