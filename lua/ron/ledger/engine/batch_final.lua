-- ron.ledger.engine.batch_final: the batch path's point of no return and after (LED-31, LED-53,
-- LED-56): every step one batched statement, every end-state verified.
-- A concern of the engine ron.ledger.ledger, which installs the methods below
-- (_M.methods) on its one Ledger class.
local task = require("ron.base.task")
local ledger = require("ron.ledger")
local codec = require("ron.ledger.codec")
local base = require("ron.ledger.engine.base")
local batch = require("ron.ledger.engine.batch")
local events = require("ron.ledger.events")
local phases = require("ron.ledger.phases")

local error = error
local format = string.format
local pcall = pcall
local sort = table.sort

local BATCH_IDS = batch.BATCH_IDS
local BATCH_POSTINGS = batch.BATCH_POSTINGS
local ERR = base.ERR
local EVENT_KIND = base.EVENT_KIND
local fail = base.fail
local hex = base.hex
local pkey = batch.pkey
local rec_chunks = batch.rec_chunks
local slices = batch.slices
local store_inputs = batch.store_inputs

local _M = {}
local Ledger = {} -- this concern's methods

-- The point of no return and after, for a batch (LED-31): every step one batched statement
-- (chunked at the stores' bounds), every end-state verified by counts or read back, every
-- step idempotent. Also what recover() runs for a batch found in phase finalizing.
-- Writes a batch's rows and reads them back until every one is present (LED-31): a short
-- count (a replay, a batch cut short) is not a failure; only what is still missing is sent
-- again. write(list) -> count; missing(list) -> the rows of list not present yet (it raises
-- on one present with other content: never overwritten).
function Ledger:_write_all(list, write, missing, what)
    if #list == 0 or write(list) == #list then return end
    for round = 1, self.max_attempts + 1 do
        local left = missing(list)
        if #left == 0 then return end
        if round > self.max_attempts then error("ron.ledger: " .. what) end
        write(left)
    end
end

local SHARD2 = {}
for i = 0, 15 do SHARD2[i] = format("%02d", i) end
local function row_key(o)
    return o.account .. o.asset.code .. "\0" .. o.asset.scale .. "\0"
           .. SHARD2[(o.id.index + o.id.transfer_id:byte(1)) % 16]
           .. pkey(o.id)
end

-- Two of the batch's writes at once (LED-57): after the point of no return, with a store
-- that serves statements at once (PostgreSQL's pool: overlap, default on for it), f runs in
-- a task while g runs here, so the server works on both while the loop is free; else one
-- after the other, f first (the order the steps are listed in). Only writes that depend on
-- neither are paired: outputs with transfer records (different tables), then outcomes with
-- events (both after the records and the outputs: a committed intent always finds its
-- transfer, an event its transfer and its postings). Every step is idempotent and verified,
-- so a crash may leave any subset of a pair: recover() rolls the batch forward as before.
-- Both are joined before an error of either is raised (nothing of the batch runs on after).
-- Reads at once (LED-62): the batch plan's reads (accounts, the payers' postings, the
-- balances) need no answer of one another, so on a store that serves statements at once
-- (overlap) all but the last run in tasks while the last runs here: one round trip's wait
-- instead of three. They are reads of the plan, which the last step before the point of no
-- return validates again (LED-30): nothing decided from them needs them to be one snapshot,
-- any more than one after the other. Without overlap: one after the other, in order. Every
-- one is joined before an error of any is raised.
function Ledger:_read_at_once(...)
    local fs = { ... }
    if not self.overlap then
        for _, f in ipairs(fs) do f() end
        return
    end
    local hs = {}
    for i = 1, #fs - 1 do hs[i] = task.spawn("ledger_read", pcall, fs[i]) end
    local okl, el = pcall(fs[#fs])
    local first
    for _, h in ipairs(hs) do
        local jok, ok1, e1 = h:join()
        if not jok then first = first or ok1
        elseif not ok1 then first = first or e1 end
    end
    self.stats.reads_at_once = (self.stats.reads_at_once or 0) + 1
    if first ~= nil then error(first, 0) end
    if not okl then error(el, 0) end
end

function Ledger:_together(f, g)
    if not self.overlap then
        f()
        g()
        return
    end
    local h = task.spawn("ledger_write", pcall, f)
    local ok2, e2 = pcall(g)
    local jok, ok1, e1 = h:join()
    self.stats.overlapped = (self.stats.overlapped or 0) + 1
    if not jok then error(ok1, 0) end
    if not ok1 then error(e1, 0) end
    if not ok2 then error(e2, 0) end
end

-- The batch's events: each transfer's, then each stored rejection's (LED-68).
local function batch_events(ctx)
    local evlist = {}
    for i, it in ipairs(ctx.items) do
        evlist[i] = { transfer_id = it.tid, kind = EVENT_KIND,
                      data = events.transfer_data { intent = it.t.intent, kind = "commit",
                                                    body_hash = it.e.req.body_hash,
                                                    created_at_ms = ctx.created_at_ms,
                                                    keys = it.e.req.keys } }
    end
    for _, x in ipairs(ctx.rejects or {}) do
        local id, kind, data = phases.rejection_event(x.e.req, { code = x.code, message = x.err,
                                                                 body_hash = x.e.req.body_hash })
        evlist[#evlist + 1] = { transfer_id = id, kind = kind, data = data }
    end
    return evlist
end

function Ledger:_finalize_batch(ctx, results, later)
    return phases.finalize_batch(self, ctx, results, later)
end

-- The rows a batch's finalize writes: the store's postings it consumes (each by its own
-- transfer), every output (one a later transfer of the batch spends inserted consumed, in
-- the order of the balance rows, LED-56), the transfer records, the intents' outcomes
-- (committed, and the deterministic rejections) and the events, gapless and consecutive in
-- the batch's order (LED-22, LED-33), the rejections' after the transfers' (LED-68).
function Ledger:_batch_rows(ctx)
    local items = ctx.items
    local mine = {}
    for _, it in ipairs(items) do mine[it.tid] = it end
    local chained = {}
    for _, it in ipairs(items) do
        for _, ref in ipairs(it.t.inputs) do
            if mine[ref.transfer_id] then chained[pkey(ref)] = it.tid end
        end
    end
    local outs, oids = {}, {}
    local any_chained = next(chained) ~= nil
    for _, it in ipairs(items) do
        for i = 1, #it.t.outputs do
            local o = ledger.output_posting(it.t, it.tid, i)
            local by = any_chained and chained[pkey(o.id)]
            if by then o.status, o.consumed_by = "inactive", by end
            outs[#outs + 1] = o
        end
    end
    if self.lock_order then
        -- in the order of the balance rows their insert trigger updates (account, asset,
        -- shard): two batches inserting at once lock the hot rows (revenue, a shared source)
        -- in the same order, so they wait for each other instead of deadlocking (PostgreSQL
        -- detects a deadlock only after deadlock_timeout, 1 s by default). The keys are
        -- unique (a posting id ends each) and sorted as strings by the sort itself, without
        -- a Lua comparator called per comparison (~12 per output in a batch of 1024).
        local keys, by_key = {}, {}
        for i, o in ipairs(outs) do
            local k = row_key(o)
            keys[i], by_key[k] = k, o
        end
        sort(keys)
        for i, k in ipairs(keys) do outs[i] = by_key[k] end
    end
    for i, o in ipairs(outs) do oids[i] = o.id end
    local recs, outcomes, expect = {}, {}, {}
    for i, it in ipairs(items) do
        recs[i] = { rec = { id = it.tid, bytes = it.tbytes, intent = it.t.intent, book = self.book,
                            created_at_ms = ctx.created_at_ms, metadata = it.t.metadata },
                    involved = self:_involved(it.t) }
        outcomes[i] = { key = it.t.intent, outcome = { status = "committed",
                        transfer_id = it.tid, body_hash = it.e.req.body_hash } }
        expect[it.t.intent] = it.tid
    end
    for _, x in ipairs(ctx.rejects or {}) do
        outcomes[#outcomes + 1] = { key = x.e.req.intent, outcome = { status = "rejected",
                                    code = x.code, message = x.err,
                                    body_hash = x.e.req.body_hash } }
    end
    return { ins = store_inputs(items), outs = outs, oids = oids, recs = recs,
             outcomes = outcomes, expect = expect, events = batch_events(ctx),
             chained = chained }
end

-- The stored events of list ({ transfer_id, kind }: a transfer's, a rejection's) into evs,
-- by id: read back by kind, a chunk at a time.
function Ledger:_events_of(list, evs)
    local ids = {}
    for _, x in ipairs(list) do
        ids[x.kind] = ids[x.kind] or {}
        ids[x.kind][#ids[x.kind] + 1] = x.transfer_id
    end
    for kind, l in pairs(ids) do
        for _, c in ipairs(slices(l, BATCH_IDS)) do
            for k, v in pairs(self:_p("get_events_for", self.book, c, kind)) do evs[k] = v end
        end
    end
end

-- The finalize of a batch step by step (a state that holds part of one: an older binary's
-- record in phase finalizing, or a store that cut a batch's statement short): past the
-- point of no return, every step one batched statement (chunked at the stores' bounds),
-- every end-state verified by counts or read back, every step idempotent (LED-31).
function Ledger:_finalize_batch_steps(ctx, results, later, rows)
    local sid = ctx.sid
    if ctx.phase ~= "finalizing" then self:_save_batch(ctx, "finalizing") end
    -- 1. consume the store's postings, each by its own transfer (the double-spend guard)
    local ins = rows.ins
    if #ins > 0 then
        local ids = {}
        for i, x in ipairs(ins) do ids[i] = x.id end
        for round = 1, self.max_attempts + 1 do
            self:_pw("deactivate_many", ins, BATCH_IDS, sid)
            local want = {}
            for _, x in ipairs(ins) do want[pkey(x.id)] = x.consumed_by end
            local done, left = 0, 0
            for _, p in ipairs(self:_list_read("get_postings", ids, BATCH_IDS)) do
                local by = want[pkey(p.id)]
                if p.status == "inactive" and p.consumed_by == by then done = done + 1
                elseif p.status == "pending_inactive" and p.reservation == sid then
                    left = left + 1
                else
                    error(format("ron.ledger: double spend refused: posting %s:%d of batch %s "
                                 .. "is %s (consumed by %s)", hex(p.id.transfer_id), p.id.index,
                                 sid, p.status, p.consumed_by and hex(p.consumed_by) or "-"))
                end
            end
            if done == #ins then break end
            if round > self.max_attempts or left + done ~= #ins then
                error("ron.ledger: inputs of batch " .. sid .. " lost")
            end
        end
    end
    -- 2. every output; 3. the transfer records
    local outs, oids, recs = rows.outs, rows.oids, rows.recs
    local function write_outputs()
        self:_write_all(outs,
            function(list) return self:_pw("insert_postings", list, BATCH_POSTINGS) end,
            function(list)
                local have = {}
                for _, p in ipairs(self:_list_read("get_postings", oids, BATCH_IDS)) do
                    have[pkey(p.id)] = true
                end
                local missing = {}
                for _, o in ipairs(list) do
                    if not have[pkey(o.id)] then missing[#missing + 1] = o end
                end
                return missing
            end, "outputs of batch " .. sid .. " missing after insert")
    end
    local function store_recs(list)
        local n = 0
        for _, chunk in ipairs(rec_chunks(list)) do n = n + self:_p("store_transfers", chunk) end
        return n
    end
    local function write_recs()
        self:_write_all(recs, store_recs, function(list)
            local missing = {}
            for _, r in ipairs(list) do
                local got = self:_read("get_transfer", r.rec.id)
                if not got then missing[#missing + 1] = r
                elseif got.bytes ~= r.rec.bytes then
                    error("ron.ledger: transfer " .. hex(r.rec.id)
                          .. " stored with other bytes")
                end
            end
            return missing
        end, "transfers of batch " .. sid .. " not stored")
    end
    -- (LED-57) the outputs and the transfer records at once, then the outcomes and the
    -- events at once: see _together
    self:_together(write_outputs, write_recs)
    -- 4. the intents' outcomes: committed, and the deterministic rejections
    local outs_i, expect = rows.outcomes, rows.expect
    -- what the store holds for the batch's intents after a short count (a rejection replayed
    -- over an earlier outcome answers that outcome, below)
    local stored = {}
    local function write_outcomes()
        self:_write_all(outs_i,
            function(list) return self:_pw("put_intents", list, BATCH_IDS) end,
            function(list)
                local ks = {}
                for i, o in ipairs(list) do ks[i] = o.key end
                stored = self:_intents_of(ks)
                local missing = {}
                for _, o in ipairs(list) do
                    local cur = stored[o.key]
                    if not cur then missing[#missing + 1] = o
                    elseif expect[o.key] and (cur.status ~= "committed"
                                              or cur.transfer_id ~= expect[o.key]) then
                        error("ron.ledger: intent of " .. hex(expect[o.key])
                              .. " holds another outcome")
                    end
                end
                return missing
            end, "outcomes of batch " .. sid .. " not stored")
    end
    -- 5. the events, gapless and consecutive in the batch's order (LED-22, LED-33), then
    -- the rejections' (LED-68)
    local evs = {}
    local pending = rows.events
    local function write_events()
        for _ = 1, self.max_attempts * 4 do
            if #pending == 0 then break end
            local unknown = {}
            for _, c in ipairs(slices(pending, BATCH_IDS)) do
                local n, first = self:_p("append_events", self.book, c)
                if n == #c and first then
                    -- all of the chunk, consecutive from first: no read back
                    for j, x in ipairs(c) do evs[x.transfer_id] = { seq = first + j - 1 } end
                else
                    for _, x in ipairs(c) do unknown[#unknown + 1] = x end
                end
            end
            self:_events_of(unknown, evs)
            local left = {}
            for _, x in ipairs(pending) do
                if not evs[x.transfer_id] then left[#left + 1] = x end
            end
            pending = left
            if #pending > 0 then self.pause(1) end
        end
    end
    self:_together(write_outcomes, write_events)
    if #pending > 0 then
        return fail(ERR.Unavailable, "events of batch " .. sid .. " not appended")
    end
    -- 6. members handed over to the single path: their own saga records before this one
    -- goes (a crash then leaves each recoverable on its own)
    for _, x in ipairs(ctx.handover or {}) do
        self:_p("save_saga", x.e.sid, "reserving", self:_member_record(ctx, x.e), self.node)
    end
    -- 7. heads back, record gone
    for i = #(ctx.heads or {}), 1, -1 do
        local h = ctx.heads[i]
        self:_p("release_head", h.account, h.asset, sid)
    end
    self:_p("delete_saga", sid)
    return self:_batch_done(ctx, results, later, evs, stored, rows)
end

-- A member's own saga record (phase reserving: its request; the single path drives it).
function Ledger:_member_record(ctx, e)
    return codec.encode { req = e.req, created_at_ms = ctx.created_at_ms }
end

-- The answers of a finalized batch (evs: its events by transfer id; stored: the outcomes
-- read back after a short count, a rejection replayed over an earlier outcome answers that;
-- rows: _batch_rows').
function Ledger:_batch_done(ctx, results, later, evs, stored, rows)
    local items = ctx.items
    for _ in pairs(rows.chained) do self.stats.chained = (self.stats.chained or 0) + 1 end
    self.stats.handovers = (self.stats.handovers or 0) + #(ctx.handover or {})
    self.stats.commits = self.stats.commits + #items
    self.stats.rejections = self.stats.rejections + #(ctx.rejects or {})
    for _, it in ipairs(items) do
        local ev = evs[it.tid]
        if self.audit then
            self.audit { kind = "transfer", transfer_id = it.tid, intent = it.t.intent,
                         event_seq = ev.seq, book = self.book }
        end
        if results then
            results[it.e.i or it.k] = { { transfer_id = it.tid, status = "committed",
                                          event_seq = ev.seq, replayed = false,
                                          transfer = it.t } }
        end
    end
    if results then
        for _, x in ipairs(ctx.rejects or {}) do
            local cur = stored[x.e.req.intent]
            if cur and cur.status == "committed" then
                results[x.e.i] = { self:_outcome(x.e.req, cur) }
            elseif cur then
                results[x.e.i] = { nil, cur.message, cur.code }
            else
                results[x.e.i] = { nil, x.err, x.code }
            end
        end
        for _, x in ipairs(ctx.handover or {}) do later[#later + 1] = x.e end
    end
    return true
end

_M.methods = Ledger
return _M
