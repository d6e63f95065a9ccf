-- ron.ledger.verify.feed: the book's event feed, read first (docs/LEDGER.md "What verify
-- proves"): gapless from seq 1, one book per store, every kind known, and indexed by kind
-- for the checks of the rows each event names (verify.walk: transfers; verify.rows:
-- accounts, intents). Also the events that name no row of their own: a usage.shortfall's
-- amount recomputed from its transfer, a usage.loss's id from its record, the upgrade
-- marker (LED-68). Read a page at a time; a transfer event is kept as its seq alone (the
-- replay, verify.walk, reads the feed again for the data).
local ledger = require("ron.ledger")
local events = require("ron.ledger.events")
local scan = require("ron.ledger.store.scan")
local usage = require("ron.ledger.usage")

local format, hex, ipairs, pairs, tostring, type =
      string.format, ledger.hex, ipairs, pairs, tostring, type

local _M = {}

local KNOWN = { [events.TRANSFER] = true, [events.ACCOUNT] = true, [events.REJECTION] = true,
                [events.UPGRADE] = true, [events.SHORTFALL] = true, [events.LOSS] = true,
                [events.CHECKPOINT] = true }

local function where(seq) return format("events seq %d", seq) end
_M.where = where

-- One event of the book: its kind known, indexed, its data decoded where the engine wrote
-- it. What is kept is small (I-7): a transfer event's seq alone (the replay reads the feed
-- again for its data, verify.walk), an account, rejection or shortfall event's seq and
-- data (one per account version, rejection, usage shortfall); the reversals' targets and
-- the shortfalls' transfers are marked (ctx.keep) for the replay to keep their transfers.
local function index(ctx, ev)
    local w = where(ev.seq)
    if not KNOWN[ev.kind] then
        ctx.problem(w, "unknown kind %q", tostring(ev.kind))
        return
    end
    local by, kept = ctx.ev[ev.kind], nil
    if by then
        local first = by[ev.transfer_id]
        if first then
            ctx.problem(w, "%s event of %s again (first at seq %d)", ev.kind, hex(ev.transfer_id),
                        type(first) == "table" and first.seq or first)
            return
        end
        if ev.kind == events.TRANSFER then
            by[ev.transfer_id] = ev.seq
            ctx.transfer_events = ctx.transfer_events + 1
        else
            kept = { seq = ev.seq, data = ev.data }
            by[ev.transfer_id] = kept
        end
    end
    if ev.kind == events.TRANSFER or ev.kind == events.REJECTION then
        local d = events.decode(ev.data)
        if not d then ctx.problem(w, "its data does not decode") end
        if kept then kept.d = d end
        if d and ev.kind == events.TRANSFER and d.kind == "reverse" and d.target ~= nil then
            ctx.keep[d.target] = true
        end
    elseif ev.kind == events.SHORTFALL then
        ctx.keep[ev.transfer_id] = true
    elseif ev.kind == events.LOSS then
        ctx.losses_ev[#ctx.losses_ev + 1] = { seq = ev.seq, transfer_id = ev.transfer_id,
                                              data = ev.data }
    elseif ev.kind == events.CHECKPOINT then
        ctx.checkpoints[#ctx.checkpoints + 1] = { seq = ev.seq, kind = ev.kind,
                                                  transfer_id = ev.transfer_id, data = ev.data }
    end
    if ev.kind == events.UPGRADE then
        if ctx.upgrade_seq then
            ctx.problem(w, "a second upgrade marker (the first at seq %d)", ctx.upgrade_seq)
        elseif ev.transfer_id ~= events.UPGRADE_ID or ev.data ~= events.UPGRADE_DATA then
            ctx.problem(w, "an upgrade marker with another id or data")
        else
            ctx.upgrade_seq = ev.seq
        end
    end
end

-- A table's rows one at a time (ron.ledger.store.scan's cursor: nothing of the table is
-- held but the page): -> next() -> row | nil (the end) | false (cannot read: reported).
-- _M.PAGE rows a page (a spec sets it small to cross page boundaries).
_M.PAGE = 1000
function _M.cursor(ctx, name)
    local next_row = scan.cursor(ctx.store, name, _M.PAGE)
    return function()
        local row, err = next_row()
        if row == false then ctx.problem(name, "cannot read: %s", tostring(err)) end
        return row
    end
end

-- each(row) for every row of a table, in key order. -> true | false (cannot read: reported)
-- A table that such a callback captures and its phase never assigns again can be kept by a
-- compiled trace as a constant, past the phase (LuaJIT constifies immutable upvalues): the
-- phases write nil to those locals at their end, so that what they drop is freed.
function _M.each_row(ctx, name, each)
    local next_row = _M.cursor(ctx, name)
    while true do
        local row = next_row()
        if not row then return row == nil end
        each(row)
    end
end

-- each(ev) for every event of this book, in seq order; another book's rows reported when
-- report is set (the first read). -> true | false (cannot read: reported)
function _M.each(ctx, each, report)
    return _M.each_row(ctx, "events", function(ev)
        if ev.book == ctx.book then
            each(ev)
        elseif report then
            ctx.problem(format("events %s seq %d", tostring(ev.book), ev.seq),
                        "a row of book %s: this store's book is %s (verify checks one book, "
                        .. "and a store holds one)", tostring(ev.book), ctx.book)
        end
    end)
end

-- Reads every event, a page at a time. ctx.ev[kind][id] indexes the kinds whose id names
-- one row (transfer: its seq; account, rejection, shortfall: { seq, data, d }),
-- ctx.upgrade_seq the marker, ctx.losses_ev the usage.loss events and ctx.checkpoints the
-- audit.checkpoint events (verify.attest), ctx.keep the transfers the replay keeps whole,
-- ctx.transfer_events how many transfers the feed names (verify.walk sizes its columns).
function _M.read(ctx)
    ctx.ev = { [events.TRANSFER] = {}, [events.ACCOUNT] = {}, [events.REJECTION] = {},
               [events.SHORTFALL] = {} }
    ctx.keep, ctx.losses_ev, ctx.checkpoints, ctx.transfer_events = {}, {}, {}, 0
    local last, n = 0, 0
    _M.each(ctx, function(ev)
        if ev.seq ~= last + 1 then
            ctx.problem(where(last + 1), "missing (the feed goes from seq %d to %d)", last,
                        ev.seq)
        end
        last, n = ev.seq, n + 1
        index(ctx, ev)
    end, true)
    ctx.sum.events = n
end

-- Is the event at seq older than the upgrade to schema 3 (its data carries no body hash
-- and no created_at_ms)?
function _M.legacy(ctx, seq) return ctx.upgrade_seq ~= nil and seq < ctx.upgrade_seq end

-- A transfer event's data (d decoded, at seq) against its transfer's intent (decoded from
-- its bytes) and created_at_ms column; name(ctx, ord) names the transfer (made only for a
-- problem).
function _M.check_transfer(ctx, d, seq, intent, created_at_ms, name, ord)
    if not d then return end
    if d.intent ~= intent then
        ctx.problem(name(ctx, ord), "its event (seq %d) names another intent", seq)
    end
    if d.kind ~= "commit" and d.kind ~= "reverse" then
        ctx.problem(name(ctx, ord), "its event (seq %d) has kind %q", seq, tostring(d.kind))
    end
    if _M.legacy(ctx, seq) then return end
    if type(d.body_hash) ~= "string" or #d.body_hash ~= 32 then
        ctx.problem(name(ctx, ord), "its event (seq %d) carries no body hash", seq)
    end
    if d.created_at_ms ~= created_at_ms then
        ctx.problem(name(ctx, ord), "created_at_ms is %s, its event (seq %d) says %s",
                    ctx.num(created_at_ms), seq, ctx.num(d.created_at_ms))
    end
end

-- usage.shortfall: names a usage transfer; its amount is the negative outputs on the
-- tenant's receivable in the charged asset (the rater's E:shortfall). Its transfer, decoded,
-- is in ctx.kept (the replay keeps the transfers ctx.keep names, verify.walk).
function _M.check_shortfalls(ctx)
    for tid, ev in pairs(ctx.ev[events.SHORTFALL]) do
        local w = where(ev.seq)
        local t = ctx.kept[tid]
        local tenant, amount, code = (type(ev.data) == "string" and ev.data or ""):match(
            "^tenant=([%x%-]+) amount=(%S+) asset=([%w_.:%-]+)$")
        local m = t and usage.decode_metadata(t.metadata)
        if not ctx.ord_of[tid] then
            ctx.problem(w, "usage.shortfall of transfer %s, which is not stored", hex(tid))
        elseif not (tenant and m) or usage.tenant_text(m.tenant) ~= tenant then
            ctx.problem(w, "usage.shortfall whose data does not name its transfer's tenant")
        else
            local recv, short = usage.account("receivable", m.tenant), 0
            for _, o in ipairs(t.outputs) do
                if o.account == recv and o.asset.code == code and o.amount < 0 then
                    short = short - o.amount
                end
            end
            -- (the exporter writes tostring(short): the same digits below 10^14)
            if ctx.num(short) ~= amount and tostring(short) ~= amount then
                ctx.problem(w, "usage.shortfall of %s, its transfer's receivable output says %s",
                            amount, ctx.num(short))
            end
        end
    end
end

return _M
