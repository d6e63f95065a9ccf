-- ron.ledger.verify.feed: the book's event feed, read first (docs/LEDGER.md "What verify
-- proves"): gapless from seq 1, one book per store, every kind known, and indexed by kind
-- for the checks of the rows each event names (verify.walk: transfers; verify.rows:
-- accounts, intents). Also the events that name no row of their own: a usage.shortfall's
-- amount recomputed from its transfer, a usage.loss's id from its record, the upgrade
-- marker (LED-68).
local ledger = require("ron.ledger")
local events = require("ron.ledger.events")
local scan = require("ron.ledger.store.scan")
local usage = require("ron.ledger.usage")

local format, hex, ipairs, pairs, type = string.format, ledger.hex, ipairs, pairs, type

local _M = {}

local KNOWN = { [events.TRANSFER] = true, [events.ACCOUNT] = true, [events.REJECTION] = true,
                [events.UPGRADE] = true, [events.SHORTFALL] = true, [events.LOSS] = true,
                [events.CHECKPOINT] = true }

local function where(seq) return format("events seq %d", seq) end
_M.where = where

-- One event of the book: its kind known, indexed; the engine's data decoded.
local function index(ctx, ev)
    local w = where(ev.seq)
    if not KNOWN[ev.kind] then
        ctx.problem(w, "unknown kind %q", tostring(ev.kind))
        return
    end
    local by = ctx.ev[ev.kind]
    if by then
        if by[ev.transfer_id] then
            ctx.problem(w, "%s event of %s again (first at seq %d)", ev.kind, hex(ev.transfer_id),
                        by[ev.transfer_id].seq)
            return
        end
        by[ev.transfer_id] = ev
    end
    if ev.kind == events.TRANSFER or ev.kind == events.REJECTION then
        ev.d = events.decode(ev.data)
        if not ev.d then ctx.problem(w, "its data does not decode") end
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

-- Reads every event; -> the book's, by seq. ctx.ev[kind][id] indexes the kinds whose id
-- names one row (transfer, account, rejection, shortfall); ctx.upgrade_seq the marker.
function _M.read(ctx)
    ctx.ev = { [events.TRANSFER] = {}, [events.ACCOUNT] = {}, [events.REJECTION] = {},
               [events.SHORTFALL] = {} }
    local rows, err = scan.all(ctx.store, "events")
    if not rows then
        ctx.problem("events", "cannot read: %s", tostring(err))
        return {}
    end
    local feed, last = {}, 0
    for _, ev in ipairs(rows) do
        if ev.book ~= ctx.book then
            ctx.problem(format("events %s seq %d", tostring(ev.book), ev.seq),
                        "a row of book %s: this store's book is %s (verify checks one book, "
                        .. "and a store holds one)", tostring(ev.book), ctx.book)
        else
            if ev.seq ~= last + 1 then
                ctx.problem(where(last + 1), "missing (the feed goes from seq %d to %d)", last,
                            ev.seq)
            end
            last = ev.seq
            feed[#feed + 1] = ev
            index(ctx, ev)
        end
    end
    ctx.sum.events = #feed
    return feed
end

-- Is this event older than the upgrade to schema 3 (its data carries no body hash and no
-- created_at_ms)?
function _M.legacy(ctx, ev) return ctx.upgrade_seq ~= nil and ev.seq < ctx.upgrade_seq end

-- A transfer event's data against its transfer (t decoded, rec its row).
function _M.check_transfer(ctx, ev, t, rec, w)
    local d = ev.d
    if not d then return end
    if d.intent ~= t.intent then
        ctx.problem(w, "its event (seq %d) names another intent", ev.seq)
    end
    if d.kind ~= "commit" and d.kind ~= "reverse" then
        ctx.problem(w, "its event (seq %d) has kind %q", ev.seq, tostring(d.kind))
    end
    if _M.legacy(ctx, ev) then return end
    if type(d.body_hash) ~= "string" or #d.body_hash ~= 32 then
        ctx.problem(w, "its event (seq %d) carries no body hash", ev.seq)
    end
    if d.created_at_ms ~= rec.created_at_ms then
        ctx.problem(w, "created_at_ms is %s, its event (seq %d) says %s",
                    ctx.num(rec.created_at_ms), ev.seq, ctx.num(d.created_at_ms))
    end
end

-- usage.shortfall: names a usage transfer; its amount is the negative outputs on the
-- tenant's receivable in the charged asset (the rater's E:shortfall).
function _M.check_shortfalls(ctx)
    for tid, ev in pairs(ctx.ev[events.SHORTFALL]) do
        local w = where(ev.seq)
        local tr = ctx.transfers[tid]
        local tenant, amount, code = (type(ev.data) == "string" and ev.data or ""):match(
            "^tenant=([%x%-]+) amount=(%S+) asset=([%w_.:%-]+)$")
        local m = tr and tr.t and usage.decode_metadata(tr.t.metadata)
        if not tr then
            ctx.problem(w, "usage.shortfall of transfer %s, which is not stored", hex(tid))
        elseif not (tenant and m) or usage.tenant_text(m.tenant) ~= tenant then
            ctx.problem(w, "usage.shortfall whose data does not name its transfer's tenant")
        else
            local recv, short = usage.account("receivable", m.tenant), 0
            for _, o in ipairs(tr.t.outputs) do
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
