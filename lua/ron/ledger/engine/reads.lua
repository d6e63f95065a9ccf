-- ron.ledger.engine.reads: the reads (balances, history, the event feed, a transfer) and attest
-- (an audit checkpoint carried in the event feed, LED-60).
-- A concern of the engine ron.ledger.ledger, which installs the methods below
-- (_M.methods) on its one Ledger class.
local ledger = require("ron.ledger")
local A = require("ron.ledger.attest")
local base = require("ron.ledger.engine.base")
local phases = require("ron.ledger.phases")

local ipairs, type = ipairs, type

local ERR = base.ERR
local fail = base.fail
local guard = base.guard

local _M = {}
local Ledger = {} -- this concern's methods

-- ---- reads ----

function Ledger:balance(account, asset)
    return guard(nil, function()
        return self:_p("get_balances", { { account = account, asset = asset } })[1]
    end)
end

function Ledger:history(account, opts)
    opts = opts or {}
    return guard(nil, function()
        return self:_p("get_transfers_for_account", account, opts.limit or 100, opts.before)
    end)
end

function Ledger:events_since(after_seq, limit)
    return guard(nil, function()
        return self:_p("get_events_since", self.book, after_seq or 0, limit or 100)
    end)
end

function Ledger:transfer(id)
    return guard(nil, function()
        local rec = self:_read("get_transfer", id)
        if not rec then return nil end
        rec.transfer = ledger.decode_transfer(rec.bytes)
        return rec
    end)
end

-- The transfers of ids in one store call per 1024 (a read-only phase: one hop or round
-- trip, not one per transfer): -> { [i] = the record as transfer(ids[i]) gives it, or
-- false } | nil, err. The wallet's cache reads a batch of events' transfers this way.
-- (a function made once, not a closure per call: once per poll of the wallet's feed, the
-- closure aborted the trace of the poll's loop, issue 25)
local function transfers_of(self, ids)
    local out = {}
    for _, c in ipairs(phases.slices(ids, phases.BATCH_IDS)) do
        local ops = {}
        for i, id in ipairs(c) do ops[i] = { "get_transfer", id } end
        local res = phases.apply(self, ops)
        for i = 1, #c do
            local rec = res[i][1]
            if rec then rec.transfer = ledger.decode_transfer(rec.bytes) end
            out[#out + 1] = rec or false
        end
    end
    return out
end

function Ledger:transfers(ids)
    return guard(nil, transfers_of, self, ids)
end

-- Carries an audit checkpoint { origin, size, root (hex), note } in the book's event feed
-- (issue 16, LED-60, ron.ledger.attest): one "audit.checkpoint" event whose data is the
-- signed note, appended like a transfer's event (gapless; 0 = it exists or a racing insert
-- took the seq). Idempotent per (origin, size): -> { event_seq, replayed }; another root
-- for a carried (origin, size) is a Conflict (the audit log was rewritten).
function Ledger:attest(cp)
    local parsed, perr = A.parse(type(cp) == "table" and cp.note or nil)
    if not parsed then return fail(ERR.InvalidRequest, "attest: " .. tostring(perr)) end
    if (cp.size and cp.size ~= parsed.size) or (cp.root and cp.root ~= parsed.root) then
        return fail(ERR.InvalidRequest, "attest: the note is not the checkpoint given")
    end
    local id = A.id(parsed.origin, parsed.size)
    return guard(nil, function()
        for _ = 1, self.max_attempts * 4 do
            local n = self:_p("append_event", self.book, id, A.KIND, parsed.note)
            local ev = self:_read("get_event", self.book, id, A.KIND)
            if ev then
                local why = A.same(ev, parsed)
                if why then return fail(ERR.Conflict, why) end
                return { event_seq = ev.seq, replayed = n ~= 1 }
            end
            self.pause(1)
        end
        return fail(ERR.Unavailable, "attest: the event was not appended")
    end)
end

_M.methods = Ledger
return _M
