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
-- Across phases the record carries recovery as before (LED-31): a crash leaves the state
-- of the last phase that committed, never part of one. A finalize is atomic, so it needs no
-- point-of-no-return record of its own: a record in phase finalizing is only ever left by
-- an older binary (its finalize went step by step), and recover() rolls it forward through
-- the same call, step by step when the state shows only part of it (Ledger:_finalize_steps).
local codec = require "ron.ledger.codec"
local ledger = require "ron.ledger"

local error, ipairs = error, ipairs

local _M = {}

_M.CLAIM_PREFIX = string.rep("\255", 256)
local EVENT_KIND = "transfer"

-- One phase, retried while the store answers "retry" (nothing applied) or "io" (maybe
-- applied, the reply lost). -> res, maybe: maybe is true when an earlier attempt may have
-- committed, so a missed guard may be the phase's own effect (the caller reads back). A
-- failure that outlives the retries aborts the drive like a primitive's (LED-32).
function _M.apply(led, ops, opts)
    local s = led.store
    local err, class, maybe = nil, nil, false
    for attempt = 1, led.prim_retries + 1 do
        local res, e, c = s:apply(ops, opts)
        if res then return res, maybe end
        err, class = e, c
        if class == "bug" then break end
        if class ~= "retry" then maybe = true end
        if attempt <= led.prim_retries then led.pause(attempt) end
    end
    error({ ledger_store_failure = true, name = "apply", err = err, class = class }, 0)
end

-- ---- open: the claim (LED-27) ----

-- -> true (ctx.sid holds the intent's claim and the record exists), or false, { answer }.
function _M.open(led, ctx, record)
    local req = ctx.req
    local key = _M.CLAIM_PREFIX .. req.intent
    ctx.phase = "reserving"
    local res = _M.apply(led, {
        { "get_intent", req.intent },
        { "save_saga", ctx.sid, "reserving", record, led.node },
        { "put_intent", key, { status = "claimed", message = ctx.sid,
                               body_hash = req.body_hash }, expect = 1 },
    })
    if res.ok then return true end
    -- the claim is there already: an outcome, our own earlier attempt, or another saga's
    local prior = res[1][1]
    if prior then return false, { led:_outcome(req, prior) } end
    local cur = led:_read("get_intent", key)
    if cur and cur.message == ctx.sid then return true end
    return led:_claim_lost(ctx, cur)
end

-- ---- reserve: inputs and heads, all or none (LED-28, LED-29) ----

local function reserve_ops(led, ctx, record)
    local ops = { { "save_saga", ctx.sid, "reserving", record, led.node } }
    local ids = ctx.t.inputs
    if #ids > 0 then ops[2] = { "reserve_postings", ids, ctx.sid, expect = #ids } end
    for _, h in ipairs(ctx.heads) do
        ops[#ops + 1] = { "ensure_head", h.account, h.asset }
        ops[#ops + 1] = { "acquire_head", h.account, h.asset, ctx.sid, expect = 1, head = true }
    end
    return ops
end

-- Everything the phase takes is ctx's: its earlier attempt committed (the reply was lost).
local function all_ours(led, ctx)
    local ids = ctx.t.inputs
    if #ids > 0 then
        local got = led:_p("get_postings", ids)
        if #got ~= #ids then return false end
        for _, p in ipairs(got) do
            if p.status ~= "pending_inactive" or p.reservation ~= ctx.sid then return false end
        end
    end
    if #ctx.heads > 0 then
        local hs = led:_p("get_heads", ctx.heads)
        for i = 1, #ctx.heads do
            if not hs[i] or hs[i].holder ~= ctx.sid then return false end
        end
    end
    return true
end

-- -> "full" (ctx.sid holds every input and head), "taken" (an input is not Active: resolve
-- again) or "held" (another saga holds a head, still after waiting: resolve again). Nothing
-- is held unless "full". A head held by another saga is waited for (pause), the phase
-- tried again: meanwhile this saga holds nothing.
function _M.reserve(led, ctx, record)
    local ops = reserve_ops(led, ctx, record)
    for w = 1, led.head_waits + 1 do
        local res, maybe = _M.apply(led, ops)
        if res.ok then return "full" end
        if maybe then
            if all_ours(led, ctx) then return "full" end
            led:_compensate { sid = ctx.sid, t = ctx.t, heads = ctx.heads }
        end
        if not ops[res.at].head then return "taken" end
        if w > led.head_waits then break end
        led.stats.head_waits = led.stats.head_waits + 1
        led.pause(w)
    end
    return "held"
end

-- ---- finalize (LED-31, LED-33) ----

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
        ops[#ops + 1] = { "release_head", h.account, h.asset, sid }
    end
    ops[#ops + 1] = { "delete_saga", sid }
    -- last: the book's seq is the one hot row every commit takes (PostgreSQL locks it
    -- here, for the shortest time, ron.ledger.store.pg_phase)
    ops[#ops + 1] = { "append_event", led.book, tid, EVENT_KIND,
                      codec.encode { intent = t.intent, kind = ctx.req.kind,
                                     target = ctx.req.target }, expect = 1, event = true }
    ops[#ops + 1] = { "get_event", led.book, tid, EVENT_KIND }
    return ops
end

local function inputs_ours(led, ctx)
    local ids = ctx.t.inputs
    if #ids == 0 then return true end
    local got = led:_p("get_postings", ids)
    if #got ~= #ids then return false end
    for _, p in ipairs(got) do
        if p.status ~= "pending_inactive" or p.reservation ~= ctx.sid then return false end
    end
    return true
end

-- -> the receipt. A missed guard means nothing of this call applied: the transfer was
-- committed before (a lost reply: its intent says so), or the event's seq was taken by a
-- racing append (tried again), or the inputs are all still ours (tried again), or the state
-- holds part of a finalize that went step by step (an older binary's record, or a store
-- that cut a batch short): rolled forward step by step, every step verified.
function _M.finalize(led, ctx)
    local ops = finalize_ops(led, ctx)
    local flush = led.flush_on_ack
    for _ = 1, led.max_attempts * 4 do
        local res = _M.apply(led, ops, { flush = flush })
        if res.ok then
            local ev = res[#ops][1]
            return led:_committed(ctx, ev, flush and res.flushed)
        end
        if not ops[res.at].event then
            local cur = led:_read("get_intent", ctx.t.intent)
            if cur and cur.status == "committed" and cur.transfer_id == ctx.tid then
                local ev = led:_read("get_event", led.book, ctx.tid, EVENT_KIND)
                if ev then return led:_committed(ctx, ev, false) end
            end
            if not inputs_ours(led, ctx) then return led:_finalize_steps(ctx) end
        end
        led.pause(1)
    end
    return led:_finalize_steps(ctx)
end

_M.EVENT_KIND = EVENT_KIND

return _M
