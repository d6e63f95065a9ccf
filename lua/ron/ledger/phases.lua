-- ron.ledger.phases: the commit path's phases as store transactions (PRODUCT.md §9,
-- issue 29 items 1 and 2, docs/LEDGER.md "The path, step by step", LED-67).
--
-- The saga keeps the seed's dumb primitives and its write-ahead record, but each phase's
-- primitives go to the store in ONE call, run in ONE transaction (store:apply,
-- ron.ledger.store.phase):
--   open      the prior outcome read, the record (phase reserving) and the intent's claim
--   reserve   the record with the transfer, the reservation of its inputs and the capped
--             pairs' heads: all of them or none (a guard on each count)
--   finalize  the inputs consumed, the outputs inserted, the transfer stored, the intent's
--             outcome, the heads released, the record deleted and the event appended, with
--             the event read back: a reader sees the balances before the transfer or after
--             it, never between (issue 29: "a balance that never existed"), and no output
--             is spendable before the transfer that creates it is stored (a posting and its
--             transfer row commit together)
--   reject    the intent's rejection, its `rejection` event and the record's deletion
-- and outside the saga, an account version and its `account` event (ron.ledger.events): no
-- row the feed does not name, at any moment (verify, LED-68).
-- Across phases the record carries recovery as before (LED-31): a crash leaves the state
-- of the last phase that committed, never part of one. A finalize is atomic, so it needs no
-- point-of-no-return record of its own: a record in phase finalizing is only ever left by
-- an older binary (its finalize went step by step), and recover() rolls it forward through
-- the same call, step by step when the state shows only part of it (Ledger:_finalize_steps).
local events = require("ron.ledger.events")
local ffi = require("ffi")
local lease = require("ron.ledger.lease")
local ledger = require("ron.ledger")
local plan_cache = require("ron.ledger.engine.plan_cache")
local view = require("ron.ledger.view")

local error, ipairs = error, ipairs

local _M = {}

_M.CLAIM_PREFIX = string.rep("\255", 256)
local EVENT_KIND = events.TRANSFER

-- The stores' bounds per primitive call (ron.ledger.store.sql): a batch's lists are chunked.
local BATCH_IDS = 1024       -- ids, keys, pairs per call (sql.MAX_BATCH)
local BATCH_POSTINGS = 512   -- postings per insert (sql.MAX_POSTINGS)
local BATCH_PARAMS = 6000    -- store_transfers parameters per call
_M.BATCH_IDS, _M.BATCH_POSTINGS = BATCH_IDS, BATCH_POSTINGS

local slices = view.chunks
_M.slices = slices

-- The transfer records in chunks of the parameter budget (store_transfers' bound).
function _M.rec_chunks(list)
    local out, chunk, params = {}, {}, 0
    for _, r in ipairs(list) do
        local cost = 6 + 2 * #r.involved
        if #chunk > 0 and params + cost > BATCH_PARAMS then
            out[#out + 1] = chunk
            chunk, params = {}, 0
        end
        chunk[#chunk + 1] = r
        params = params + cost
    end
    if #chunk > 0 then out[#out + 1] = chunk end
    return out
end

-- A leased engine's phase (LED-71, ron.ledger.lease): a copy of ops with the lease's guard
-- last, when any op writes (a read-only phase needs none); raises once the lease is lost.
-- The guard goes last so the callers' indexes into the answer stay theirs, and on
-- PostgreSQL its shared lock is held only from the end of the phase to its commit.
local function guarded(l, ops)
    if l.lost then error(l:fenced_error(), 0) end
    local writes = false
    for _, op in ipairs(ops) do
        if lease.WRITES[op[1]] then
            writes = true
            break
        end
    end
    if not writes then return ops end
    local out = {}
    for i = 1, #ops do out[i] = ops[i] end
    out[#out + 1] = l:guard()
    return out
end

-- A lone write primitive of a leased engine (Ledger:_p): a phase of one op and the guard.
-- -> the primitive's own results
function _M.write(led, name, ...)
    local res = _M.apply(led, { { name, ... } })
    return unpack(res[1], 1, res[1].n)
end

-- One phase, retried while the store answers "retry" (nothing applied) or "io" (maybe
-- applied, the reply lost). -> res, maybe: maybe is true when an earlier attempt may have
-- committed, so a missed guard may be the phase's own effect (the caller reads back). A
-- failure that outlives the retries aborts the drive like a primitive's (LED-32).
function _M.apply(led, ops, opts)
    local s = led.store
    local err, class, maybe = nil, nil, false
    local l = led.lease
    local n_ops = #ops
    if l then ops = guarded(l, ops) end
    -- LED-73: postings written by anything but the one-transaction commit (which keeps its
    -- own cache entries) empty the plan cache, before the phase and after it
    local note = led.pcache and not (opts and opts.keep_cache)
    if note then plan_cache.note_writes(led, ops) end
    for attempt = 1, led.prim_retries + 1 do
        local res, e, c = s:apply(ops, opts)
        if note then plan_cache.note_writes(led, ops) end
        if res then
            -- LED-71: the lease's guard missed (another node took it over): nothing applied,
            -- and this engine writes no more
            if not res.ok and res.at > n_ops then
                l.lost = true
                error(l:fenced_error(), 0)
            end
            led.stats.phases = (led.stats.phases or 0) + 1
            return res, maybe
        end
        err, class = e, c
        if class == "bug" then break end
        if class ~= "retry" then maybe = true end
        if attempt <= led.prim_retries then led.pause(attempt) end
    end
    error({ ledger_store_failure = true, name = "apply", err = err, class = class }, 0)
end

-- ---- open: the claim (LED-27) ----

-- -> true, src (ctx.sid holds the intent's claim and the record exists; src: the view of
-- r's reads, ron.ledger.view, made in the same transaction when r is given), or false,
-- { answer }.
function _M.open(led, ctx, record, r)
    local req = ctx.req
    local key = _M.CLAIM_PREFIX .. req.intent
    ctx.phase = "reserving"
    local ops = {
        { "get_intent", req.intent },
        { "save_saga", ctx.sid, "reserving", record, led.node },
        { "put_intent", key, { status = "claimed", message = ctx.sid,
                               body_hash = req.body_hash }, expect = 1 },
    }
    if r then
        for _, op in ipairs(view.read_ops(r)) do ops[#ops + 1] = op end
    end
    local res = _M.apply(led, ops)
    if res.ok then
        if not r then return true end
        return true, view.source(led, r, view.answers(r, ops, res, 4))
    end
    -- the claim is there already: an outcome, our own earlier attempt, or another saga's
    local prior = res[1][1]
    if prior then return false, { led:_outcome(req, prior) } end
    local cur = led:_read("get_intent", key)
    if cur and cur.message == ctx.sid then return true end
    return led:_claim_lost(ctx, cur)
end

-- The view of r's reads (ron.ledger.view) in one call: one read-only phase.
function _M.reads(led, r)
    local ops = view.read_ops(r)
    return view.source(led, r, view.answers(r, ops, _M.apply(led, ops), 1))
end

-- ---- reserve: inputs and heads, all or none (LED-28, LED-29) ----

local function reserve_ops(led, ctx, record, ids, prs)
    local ops = { { "save_saga", ctx.sid, "reserving", record, led.node } }
    for _, c in ipairs(slices(ids, BATCH_IDS)) do
        ops[#ops + 1] = { "reserve_postings", c, ctx.sid, expect = #c }
    end
    for _, h in ipairs(ctx.heads) do
        ops[#ops + 1] = { "ensure_head", h.account, h.asset }
        ops[#ops + 1] = { "acquire_head", h.account, h.asset, ctx.sid, expect = 1, head = true }
    end
    if prs then
        -- the last step's reads (LED-30), after the inputs and heads are ours, each chunked
        -- at the stores' bound: a batch of 1024 streams pins ~3k accounts and moves ~4k
        -- pairs, which went to the store as reads of their own after the phase (issue 25)
        for _, c in ipairs(slices(ctx.ids, BATCH_IDS)) do
            ops[#ops + 1] = { "get_accounts", c, acc = true }
        end
        for _, c in ipairs(slices(ids, BATCH_IDS)) do
            ops[#ops + 1] = { "get_postings", c, posts = true }
        end
        for _, c in ipairs(slices(prs, BATCH_IDS)) do
            ops[#ops + 1] = { "get_balances", c, bals = true }
        end
    end
    return ops
end

-- The last step's reads out of a reserve phase's answer (the ops after the reservation and
-- the heads): -> accts (by id), the reserved postings, the balances in the order of prs.
local function last_answers(ops, res)
    local accts, consumed, bals, nb = {}, {}, {}, 0
    for k, op in ipairs(ops) do
        local v = res[k][1]
        if op.acc then
            for id, a in pairs(v) do accts[id] = a end
        elseif op.posts then
            for _, p in ipairs(v) do consumed[#consumed + 1] = p end
        elseif op.bals then
            for j = 1, #op[2] do bals[nb + j] = v[j] end
            nb = nb + #op[2]
        end
    end
    return accts, consumed, bals
end

-- Every posting of ids is PendingInactive and reserved by sid.
local function reserved_by(led, sid, ids)
    for _, c in ipairs(slices(ids, BATCH_IDS)) do
        local got = led:_p("get_postings", c)
        if #got ~= #c then return false end
        for _, p in ipairs(got) do
            if p.status ~= "pending_inactive" or p.reservation ~= sid then return false end
        end
    end
    return true
end

-- Everything the phase takes is ctx's: its earlier attempt committed (the reply was lost).
local function all_ours(led, ctx, ids)
    if not reserved_by(led, ctx.sid, ids) then return false end
    if #ctx.heads > 0 then
        local hs = led:_p("get_heads", ctx.heads)
        for i = 1, #ctx.heads do
            if not hs[i] or hs[i].holder ~= ctx.sid then return false end
        end
    end
    return true
end

-- The record, the reservation of ids (the inputs of ctx's transfer, or a batch's store
-- postings) and ctx.heads, in sorted order: -> "full" (ctx.sid holds every one), "taken"
-- (an input is not Active: plan again) or "held" (another saga holds a head, still after
-- waiting: plan again). Nothing is held unless "full": a head held by another saga is
-- waited for (pause) holding nothing, and the phase tried again. prs (the single path):
-- the last step's reads go in the same transaction, after the reservation and the heads:
-- "full", { accts, consumed, prs, bals } (nil when its reply was lost: read them then).
function _M.reserve(led, ctx, record, ids, prs)
    ctx.phase = "reserving"
    local ops = reserve_ops(led, ctx, record, ids, prs)
    for w = 1, led.head_waits + 1 do
        local res, maybe = _M.apply(led, ops)
        if res.ok then
            if not prs then return "full" end
            local accts, consumed, bals = last_answers(ops, res)
            return "full", { accts = accts, consumed = consumed, prs = prs, bals = bals }
        end
        if maybe then
            if all_ours(led, ctx, ids) then return "full" end
            for _, c in ipairs(slices(ids, BATCH_IDS)) do
                led:_compensate { sid = ctx.sid, t = { inputs = c } }
            end
            led:_compensate { sid = ctx.sid, heads = ctx.heads }
        end
        if not ops[res.at].head then return "taken" end
        if w > led.head_waits then break end
        led.stats.head_waits = led.stats.head_waits + 1
        led.pause(w)
    end
    return "held"
end

-- ---- finalize (LED-31, LED-33) ----

-- The data of ctx's transfer event (LED-68): what its canonical bytes do not hold.
function _M.event_data(ctx)
    local req = ctx.req
    return events.transfer_data { intent = ctx.t.intent, kind = req.kind, target = req.target,
                                  body_hash = req.body_hash, created_at_ms = ctx.created_at_ms,
                                  keys = req.keys }
end

local function finalize_ops(led, ctx)
    local t, tid, sid = ctx.t, ctx.tid, ctx.sid
    local ops = {}
    if #t.inputs > 0 then
        ops[1] = { "deactivate_postings", t.inputs, sid, tid, expect = #t.inputs }
    end
    local outs = {}
    for i = 1, #t.outputs do outs[i] = ledger.output_posting(t, tid, i) end
    if #outs > 0 then ops[#ops + 1] = { "insert_postings", outs, expect = #outs } end
    ops[#ops + 1] = { "store_transfer", { id = tid, bytes = ctx.tbytes, intent = t.intent,
                                          book = led.book, created_at_ms = ctx.created_at_ms,
                                          metadata = t.metadata },
                      led:_involved(t), expect = 1 }
    ops[#ops + 1] = { "put_intent", t.intent, { status = "committed", transfer_id = tid,
                                                body_hash = ctx.req.body_hash }, expect = 1 }
    for i = #(ctx.heads or {}), 1, -1 do
        local h = ctx.heads[i]
        ops[#ops + 1] = { "release_head", h.account, h.asset, sid, tail = true }
    end
    ops[#ops + 1] = { "delete_saga", sid, tail = true }
    -- last: the book's seq is the one hot row every commit takes (PostgreSQL locks it
    -- here, for the shortest time, ron.ledger.store.pg_phase)
    ops[#ops + 1] = { "append_event", led.book, tid, EVENT_KIND, _M.event_data(ctx),
                      expect = 1, event = true }
    ops[#ops + 1] = { "get_event", led.book, tid, EVENT_KIND }
    return ops
end
_M.finalize_ops = finalize_ops -- (and the one-transaction commit's, ron.ledger.engine.atomic)

local I64 = ffi.typeof("int64_t")
local MAX = 0x7fffffffffffffffLL -- 2^63 - 1, the largest balance
local MIN = -MAX -- the least balance (-2^63 is not an amount, LED-4): an uncapped pair's floor

-- The limits' guard lists of a plan's deltas, for another writer's moves since the balances
-- the plan was validated against: maxs, every pair it raises with the most balance it may
-- have when the plan applies, (MAX - after) + before (the overflow check `before + net <=
-- MAX` rearranged); mins, every pair of an uncapped account (accts: id -> account; nil: none)
-- it lowers with the least, MIN + (before - after) (the underflow check; a capped pair's
-- floor is guarded by its head, or by the one-transaction commit's floors). Each bound is
-- within the limits (int64 arithmetic wraps, the result does not).
function _M.limits(deltas, accts)
    local maxs, mins = {}, {}
    for _, d in ipairs(deltas) do
        if d.after > d.before then
            maxs[#maxs + 1] = { account = d.account, asset = d.asset,
                                max = (MAX - I64(d.after)) + I64(d.before) }
        elseif d.after < d.before and accts and accts[d.account]
               and accts[d.account].policy == "uncapped" then
            mins[#mins + 1] = { account = d.account, asset = d.asset,
                                min = MIN + (I64(d.before) - I64(d.after)) }
        end
    end
    return { maxs = maxs, mins = mins }
end

-- The limits of a batch's chain (items in order, each with its plan's deltas): every pair
-- the batch moves in all, from the balance its first transfer saw to its last one's after
-- (the chain's net move of the pair, guarded as one plan's).
function _M.batch_limits(items, accts)
    return _M.limits(_M.chain_pairs(items), accts)
end

-- The pairs a chain (items in order, each with its plan's deltas) moves, each once in
-- first-move order: { account, asset, before (the balance its first move saw), after (its
-- last move's), lo (the least after of a move lowering it), hi (the largest after of a
-- move raising it) } (the one-transaction batch's guards, LED-74).
function _M.chain_pairs(items)
    local net, order = {}, {}
    for _, it in ipairs(items) do
        for _, d in ipairs(it.deltas) do
            local k = d.account .. "\0" .. d.asset.code .. "\0" .. d.asset.scale
            local x = net[k]
            if not x then
                x = { account = d.account, asset = d.asset, before = d.before }
                net[k] = x
                order[#order + 1] = x
            end
            x.after = d.after
            if d.after < d.before and (x.lo == nil or d.after < x.lo) then x.lo = d.after end
            if d.after > d.before and (x.hi == nil or d.after > x.hi) then x.hi = d.after end
        end
    end
    return order
end

-- The limits' guards (lim: _M.limits) put first in ops, chunked at the stores' bound, each
-- marked `limit`: a miss means nothing of the phase applied.
local function limit_ops(ops, lim)
    if not lim then return ops end
    local g = {}
    for _, c in ipairs(slices(lim.maxs, BATCH_IDS)) do
        g[#g + 1] = { "count_balances_at_most", c, expect = #c, limit = true }
    end
    for _, c in ipairs(slices(lim.mins, BATCH_IDS)) do
        g[#g + 1] = { "count_balances_at_least", c, expect = #c, limit = true }
    end
    for _, op in ipairs(ops) do g[#g + 1] = op end
    return g
end

-- Nothing of a finalize is in the store yet: its inputs (the store's, ids) are all still
-- reserved by sid, or, without inputs, none of its outputs (oids) exists. (A finalize that
-- went step by step consumes every input before it inserts an output.)
local function untouched(led, sid, ids, oids)
    if #ids > 0 then return reserved_by(led, sid, ids) end
    for _, c in ipairs(slices(oids, BATCH_IDS)) do
        if #led:_p("get_postings", c) > 0 then return false end
    end
    return true
end

-- -> the receipt. A missed guard means nothing of this call applied: the transfer was
-- committed before (a lost reply: its intent says so), or the event's seq was taken by a
-- racing append, or nothing of it is in the store yet (tried again), or the state holds
-- part of a finalize that went step by step (an older binary's record in phase
-- finalizing): rolled forward step by step, every step verified.
--
-- ctx.limits (the saga's last validation's, _M.limits): checked first; a miss (a credited
-- pair raised past what the credit fits, an uncapped payer lowered past what the debit
-- fits, since that read) returns false, nothing applied: the saga gives back and validates
-- again.
function _M.finalize(led, ctx)
    local ops = limit_ops(finalize_ops(led, ctx), ctx.limits)
    local flush = led.flush_on_ack
    local oids
    for _ = 1, led.max_attempts * 4 do
        local res = _M.apply(led, ops, { flush = flush })
        if res.ok then
            local ev = res[#ops][1]
            return led:_committed(ctx, ev, flush and res.flushed)
        end
        if ops[res.at].limit then return false end
        if not ops[res.at].event then
            local cur = led:_read("get_intent", ctx.t.intent)
            if cur and cur.status == "committed" and cur.transfer_id == ctx.tid then
                local ev = led:_read("get_event", led.book, ctx.tid, EVENT_KIND)
                if ev then
                    -- the heads and the record went with it, unless a step-by-step
                    -- finalize stopped after its event
                    local tail = {}
                    for _, op in ipairs(ops) do if op.tail then tail[#tail + 1] = op end end
                    _M.apply(led, tail)
                    return led:_committed(ctx, ev, false)
                end
            end
            if not oids then
                oids = {}
                for i = 1, #ctx.t.outputs do oids[i] = { transfer_id = ctx.tid, index = i - 1 } end
            end
            if not untouched(led, ctx.sid, ctx.t.inputs, oids) then
                return led:_finalize_steps(ctx)
            end
        end
        led.pause(1)
    end
    return led:_finalize_steps(ctx)
end

-- ---- a rejection (LED-27, LED-67, LED-68) ----

-- The `rejection` event of req's stored outcome (ron.ledger.events): the outcome field for
-- field, and the keys naming the same request. -> id, kind, data
function _M.rejection_event(req, stored)
    return events.rejection_id(req.intent), events.REJECTION,
           events.rejection_data { intent = req.intent, code = stored.code,
                                   message = stored.message, body_hash = stored.body_hash,
                                   keys = req.keys }
end

local function store_gave_up(name, what)
    error({ ledger_store_failure = true, name = name, err = what, class = "io" }, 0)
end

-- The rejection stored, its event appended and ctx's record deleted: one phase, flushed in
-- the same call (durability "ack"). -> the outcome the intent holds, the phase's answer
-- (res.flushed); nil when the intent holds none. An outcome there already (this saga's
-- earlier attempt, its reply lost) is the answer: its event appended if it has none (a
-- rejection an older binary stored), then the record deleted.
function _M.reject(led, ctx, stored)
    local req, flush = ctx.req, led.flush_on_ack
    local id, kind, data = _M.rejection_event(req, stored)
    local ops = { { "put_intent", req.intent, stored, expect = 1 },
                  { "append_event", led.book, id, kind, data, expect = 1 },
                  { "delete_saga", ctx.sid } }
    for _ = 1, led.max_attempts * 4 do
        local res = _M.apply(led, ops, { flush = flush })
        if res.ok then return stored, res end
        if res.at == 1 then
            local cur = led:_read("get_intent", req.intent)
            if not cur then return nil end
            led:_rejection_event(req, cur)
            return cur, _M.apply(led, { ops[3] }, { flush = flush })
        end
        led.pause(1) -- (the event's seq taken by a racing append: again)
    end
    store_gave_up("apply", "rejection of saga " .. ctx.sid .. " not stored")
end

-- ---- accounts (LED-8, LED-9, LED-67, LED-68) ----

-- The account version acct (name: "create_account" or "append_account_version") and its
-- `account` event, whose data is its canonical bytes: one phase. -> true (both stored) or
-- false (the version missed its guard: the account exists, or another version landed
-- first, or ours did and the reply was lost; nothing of this call applied).
function _M.account(led, name, acct)
    local ops = { { name, acct, expect = 1 },
                  { "append_event", led.book, events.account_id(acct.bytes), events.ACCOUNT,
                    acct.bytes, expect = 1 } }
    for _ = 1, led.max_attempts * 4 do
        local res = _M.apply(led, ops)
        if res.ok then return true end
        if res.at == 1 then return false end
        led.pause(1) -- (the event's seq taken by a racing append: again)
    end
    store_gave_up("apply", "account event not appended")
end

-- ---- a batch's finalize (LED-53, LED-67) ----

local function batch_finalize_ops(led, ctx, rows)
    local sid, ops = ctx.sid, {}
    for _, c in ipairs(slices(rows.ins, BATCH_IDS)) do
        ops[#ops + 1] = { "deactivate_many", c, sid, expect = #c }
    end
    for _, c in ipairs(slices(rows.outs, BATCH_POSTINGS)) do
        ops[#ops + 1] = { "insert_postings", c, expect = #c }
    end
    for _, c in ipairs(_M.rec_chunks(rows.recs)) do
        ops[#ops + 1] = { "store_transfers", c, expect = #c }
    end
    for _, c in ipairs(slices(rows.outcomes, BATCH_IDS)) do
        ops[#ops + 1] = { "put_intents", c, expect = #c }
    end
    -- the members handed over to the single path get their own records
    for _, x in ipairs(ctx.handover or {}) do
        ops[#ops + 1] = { "save_saga", x.e.sid, "reserving", led:_member_record(ctx, x.e),
                          led.node }
    end
    for i = #(ctx.heads or {}), 1, -1 do
        local h = ctx.heads[i]
        ops[#ops + 1] = { "release_head", h.account, h.asset, sid }
    end
    ops[#ops + 1] = { "delete_saga", sid }
    for _, c in ipairs(slices(rows.events, BATCH_IDS)) do
        -- (event = true, the list is op[3]: the op goes to the store as it is, and a second
        -- reference to the list would be serialized twice for the offloaded driver)
        ops[#ops + 1] = { "append_events", led.book, c, expect = #c, event = true }
    end
    return ops
end

_M.batch_finalize_ops = batch_finalize_ops -- (and the one-transaction batch's, LED-74)

-- The events' seqs by transfer id out of a committed batch phase's answer (its
-- append_events ops marked `event`: consecutive from the first seq each returns).
function _M.batch_seqs(ops, res)
    local evs = {}
    for k, op in ipairs(ops) do
        if op.event then
            local first = res[k][2]
            for j, x in ipairs(op[3]) do evs[x.transfer_id] = { seq = first + j - 1 } end
        end
    end
    return evs
end

-- -> the batch's answers (Ledger:_batch_done). One phase: what the batch consumes, creates,
-- stores and appends, its members' records and its own record's deletion; a missed guard
-- is handled as the single finalize's (a racing event seq, or its store postings still
-- ours: again; else step by step). ctx.limits (the last step's chain, batch_limits) are
-- checked first; a miss returns false, nothing applied: the batch plans again.
function _M.finalize_batch(led, ctx, results, later)
    local rows = led:_batch_rows(ctx)
    local ops = batch_finalize_ops(led, ctx, rows)
    local ids = {}
    for i, x in ipairs(rows.ins) do ids[i] = x.id end
    ops = limit_ops(ops, ctx.limits)
    for _ = 1, led.max_attempts * 4 do
        local res = _M.apply(led, ops)
        if ops[res.at] and ops[res.at].limit then
            -- a pair moved since the last step's read past what the chain's move of it
            -- fits: nothing applied (unless an earlier attempt's reply was lost: then
            -- rolled forward step by step), the batch gives back and plans again
            if untouched(led, ctx.sid, ids, rows.oids) then return false end
            break
        end
        if res.ok then
            return led:_batch_done(ctx, results, later, _M.batch_seqs(ops, res), {}, rows)
        end
        if not ops[res.at].event and not untouched(led, ctx.sid, ids, rows.oids) then break end
        led.pause(1)
    end
    return led:_finalize_batch_steps(ctx, results, later, rows)
end

_M.EVENT_KIND = EVENT_KIND

return _M
