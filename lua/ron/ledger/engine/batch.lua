-- ron.ledger.engine.batch: the batch path (LED-51..LED-56): commit_many, its one saga record,
-- the claims of its members and its drive (the plan: batch_plan; the finalize: batch_final).
-- A concern of the engine ron.ledger.ledger, which installs the methods below
-- (_M.methods) on its one Ledger class.
local codec = require("ron.ledger.codec")
local base = require("ron.ledger.engine.base")
local requests = require("ron.ledger.engine.requests")
local phases = require("ron.ledger.phases")
local pipeline = require("ron.ledger.engine.pipeline")

local error = error
local format = string.format
local pcall = pcall
local sort = table.sort
local type = type

local CLAIM_PREFIX = base.CLAIM_PREFIX
local ERR = base.ERR
local HANDED = base.HANDED
local EVENT_KIND = base.EVENT_KIND
local body_of = requests.body_of
local check_request = requests.check_request
local fail = base.fail
local guard = base.guard
local store_failure = base.store_failure

local _M = {}
local Ledger = {} -- this concern's methods

-- ---- the batch path (LED-51..LED-56) ----
--
-- commit_many(reqs) -> { { r, err, code } per request }: the outcomes of committing reqs
-- one after another, in order, with the store's round trips per batch instead of per
-- request. Each request is still its own transfer with its own content id, intent, stored
-- outcome and event; ONE saga record (id = the batch's sid) carries the batch:
--   reserving   data = the requests (each with its member sid "<sid>/<k>", the owner of its
--               intent's claim); once planned, every transfer's canonical bytes and the heads
--   finalizing  the same, plus the deterministic rejections to store and the members handed
--               over to the single path (see below); recover() rolls it forward
-- A batch given back before its point of no return (recover(), a retry adopting it) drives
-- its members one by one through the single path, each under its member sid: the claim is
-- theirs, so the outcome is exactly the single path's.
--
-- Planning is in memory: one read of the intents (outcomes and claims), one save, one put of
-- the claims, one read of the accounts, one of the payers' largest postings (with a probe
-- for reservations in flight), one of the balances; then the requests in order, resolved
-- by the single path's own code over the in-memory view, where a later transfer of a payer
-- may spend an earlier one's change. Such an intermediate posting is INSERTED ALREADY
-- CONSUMED (status inactive, consumed_by the later transfer) in the finalize: it never is
-- Active in the store, so no other saga can select it, and the projection never counts it
-- (verify: it is consumed by exactly one transfer, like any other input). A request that
-- is rejected deterministically gets its stored rejection and leaves the view unchanged; a
-- request that meets reservations in flight on a short pair (a race) is handed over: after
-- the batch it is driven by the single path (which retries, or answers Unavailable).
local BATCH_IDS = phases.BATCH_IDS           -- ids, keys, pairs per call (sql.MAX_BATCH)
local BATCH_POSTINGS = phases.BATCH_POSTINGS -- postings per insert (sql.MAX_POSTINGS)
local BATCH_QUERIES = 128 -- get_postings_by_pairs queries per call
local slices, rec_chunks = phases.slices, phases.rec_chunks

-- A write primitive over a list, chunked: the sum of the counts.
function Ledger:_pw(name, list, n, ...)
    local total = 0
    for _, c in ipairs(slices(list, n)) do total = total + self:_p(name, c, ...) end
    return total
end

function Ledger:_intents_of(keys)
    local out = {}
    for _, c in ipairs(slices(keys, BATCH_IDS)) do
        for k, v in pairs(self:_p("get_intents", c)) do out[k] = v end
    end
    return out
end

-- The accounts of ids from the store; every one read is remembered (LED-63). With cached,
-- the ones remembered are answered from memory and only the others read; the second
-- result is then true when some answer came from memory.
--
-- The cache (LED-63) serves the batch PLAN only, which decides nothing final on its own:
-- an account is append-only versions, every transfer pins the versions it was planned with
-- (LED-9), and the last step before the point of no return reads every account again from
-- the store (_revalidate_batch, uncached, LED-30): a version that moved since (frozen,
-- closed, another floor, by any process) refuses the pin, the batch is planned again, and
-- that read has refreshed the cache. A deterministic rejection is stored without a last
-- step, so a plan that rejects anything after using the cache is made again from the store
-- (_plan_batch). Bounded: account_cache entries, then emptied and refilled.
function Ledger:_accounts_of(ids, cached)
    local out, want, hit = self:_cached_accounts(ids, cached)
    for _, c in ipairs(slices(want, BATCH_IDS)) do
        for k, v in pairs(self:_p("get_accounts", c)) do
            out[k] = v
            self:_remember_account(k, v)
        end
    end
    return out, hit
end

-- -> out (the accounts of ids the cache answers, when cached), want (the ids to read from
-- the store), hit (some answer came from memory)
function Ledger:_cached_accounts(ids, cached)
    local out, hit = {}, false
    local want, cache = ids, self.acache
    if cached and self.account_cache > 0 then
        want = {}
        for _, id in ipairs(ids) do
            local a = cache[id]
            if a then out[id], hit = a, true else want[#want + 1] = id end
        end
    end
    return out, want, hit
end

function Ledger:_remember_account(id, a)
    if self.account_cache <= 0 then return end
    local cache = self.acache
    if not cache[id] then
        if self.acache_n >= self.account_cache then
            cache = {}
            self.acache, self.acache_n = cache, 0
        end
        self.acache_n = self.acache_n + 1
    end
    cache[id] = a
end

function Ledger:_forget_account(id)
    if self.acache[id] then
        self.acache[id] = nil
        self.acache_n = self.acache_n - 1
    end
end

function Ledger:_list_read(name, list, n, ...)
    local out = {}
    for _, c in ipairs(slices(list, n)) do
        for _, v in ipairs(self:_p(name, c, ...)) do out[#out + 1] = v end
    end
    return out
end

-- A posting's key in the batch's maps (an index's hex digits precomputed: several per
-- posting per batch, the format was visible in the profile).
local IDX8 = {}
for i = 0, 255 do IDX8[i] = format("%08x", i) end
local function pkey(id) return id.transfer_id .. (IDX8[id.index] or format("%08x", id.index)) end

-- A member's claim key: 256 bytes 0xff and its intent (phases.CLAIM_PREFIX). (Kept on the
-- member, two more fields grew its table by more than the two concatenations it saved.)
local function claim_key(e) return CLAIM_PREFIX .. e.req.intent end

-- A member's claim row: the intent claimed by its saga (its sid), with the body's hash.
local function claim_of(e)
    return { key = claim_key(e),
             outcome = { status = "claimed", message = e.sid, body_hash = e.req.body_hash } }
end

-- opts.hand_back (issue 29 item 3): the members the batch hands over to the single path
-- (reservations in flight on a short pair: another saga, maybe a dead node's, holds the
-- payer's postings) are not driven here; each is answered { nil, HANDED.., Unavailable,
-- handed = h } at once and stays in flight on this engine (its own saga record, its claim)
-- until the caller drives it with drive_handed(h): the rest of the batch does not wait for
-- a drive that may find the payer held for all its attempts. A caller that takes the opt
-- drives every h it gets (else the intent stays in flight here until recover()).
--
-- opts.read and opts.check (issue 25): a caller whose own checks and claim rows go with the
-- batch's (the wallet's Idempotency-Keys), without a read and a write transaction of its own.
-- opts.read lists more intents-table keys for the batch's first read; before anything is
-- written, opts.check(got) is called with every row that read found (the members' intents,
-- their claims, opts.read's keys; the same read the batch decides replays on) and returns
-- drop, claims:
--   drop    { [i] = true }: members the caller answers itself; nothing of them is done and
--           their result is { nil, "dropped by the caller's check", InvalidRequest,
--           dropped = true }
--   claims  put_intents entries ({ key =, outcome = }) the batch writes in its first write:
--           in the one-transaction batch's phase (each chunk's expect: a row another writer
--           put meanwhile applies nothing there, and the saga's way follows), else on their
--           own before the batch's claims, or when the batch writes nothing else (replays
--           only). A key found there afterwards with another body hash fails every member
--           of the batch with Unavailable before the ledger wrote anything (the caller's
--           single path decides them).
--
-- opts.also (issue 25): a caller's own writes that go with the batch's, in its one
-- transaction, when every one of them can: also(planned) is called once the one-transaction
-- batch (LED-74) has its plan, with planned[j] = the transfer the phase commits for
-- request j (absent: anything else, a replay, a rejection, a member handed over), and
-- returns phase ops ({ "name", args..., expect = n }: the store's write primitives a phase
-- may hold) or nil. They go into the phase after the caller's claims, all of them or nothing
-- of the batch: a count short of its expect applies nothing and the batch takes the saga's
-- way without them. commit_many's results then carry `also_done = true` when the phase
-- with them committed; without it (nil returned, the saga's way, a reply lost) the caller
-- writes them itself. The exporter moves its streams' heads this way (ron.ledger.
-- exporter_batch): one write transaction and one store call fewer per put_many.
--
-- opts.pending and opts.after (issue 25, ron.ledger.engine.pipeline): a caller that keeps
-- two batches in flight gives each a token (opts.pending, a table of its own) and the later
-- one the earlier's (opts.after): the later one reads and plans while the earlier's phase
-- runs, on the state that phase leaves, and sends its own only once the earlier ended
-- with that plan applied; otherwise it plans again from the store. Answers are those of
-- committing the earlier batch, then the later one.
local TOKEN_OPTS = { "after", "pending" }
local FN_OPTS = { "check", "also" }
function Ledger:commit_many(reqs, opts)
    if type(reqs) ~= "table" then error("ron.ledger: commit_many expects a list", 2) end
    for _, k in ipairs(FN_OPTS) do
        if opts ~= nil and opts[k] ~= nil and type(opts[k]) ~= "function" then
            error("ron.ledger: commit_many's opts." .. k .. " must be a function", 2)
        end
    end
    for _, k in ipairs(TOKEN_OPTS) do
        if opts ~= nil and opts[k] ~= nil and type(opts[k]) ~= "table" then
            error("ron.ledger: commit_many's opts." .. k .. " must be a table", 2)
        end
    end
    local tok = opts ~= nil and opts.pending or nil
    if tok == nil then return self:_commit_many(reqs, opts) end
    -- (opts.pending: its waiters go on however this ends, or when the caller says so:
    -- tok.hold, ron.ledger.engine.pipeline)
    local r = { pcall(self._commit_many, self, reqs, opts) }
    if not tok.hold then pipeline.done(tok) end
    if not r[1] then error(r[2], 0) end
    return r[2]
end

function Ledger:_commit_many(reqs, opts)
    local hand_back = opts ~= nil and opts.hand_back
    local results, live, later, seen = {}, {}, {}, {}
    for i, req in ipairs(reqs) do
        local bad = check_request(req)
        if not bad and req.kind ~= nil and req.kind ~= "commit" then
            bad = "commit_many takes commit requests"
        end
        if bad then
            results[i] = { fail(ERR.InvalidRequest, bad) }
        else
            local r = { kind = "commit", intent = req.intent, movements = req.movements,
                        metadata = req.metadata or "", overdraft = req.overdraft,
                        keys = req.keys }
            r.body_hash = req.body_hash or codec.sha256(body_of(r))
            -- the same intent twice: the later one is a replay of the earlier's outcome
            if seen[r.intent] then later[#later + 1] = { i = i, req = r }
            else
                seen[r.intent] = true
                live[#live + 1] = { i = i, req = r }
            end
        end
    end
    local ok, err, code = guard(nil, self._batch, self, live, results, later, opts)
    -- the one-transaction batch's phase was its own flush (LED-50, LED-74): none follows
    -- unless a member ran after it
    local durable = results.flushed
    results.flushed = nil
    if ok == nil then
        for _, e in ipairs(live) do
            if not results[e.i] then results[e.i] = { nil, err, code } end
        end
    end
    -- what the batch handed over, and replays of an intent seen earlier in it: one by one
    sort(later, function(a, b) return a.i < b.i end)
    for _, e in ipairs(later) do
        if e.sid and hand_back then
            -- (marked before any store call: nobody adopts it meanwhile)
            self.inflight[e.sid] = true
            self.stats.handed_back = (self.stats.handed_back or 0) + 1
            results[e.i] = { nil, HANDED .. e.sid, ERR.Unavailable,
                             handed = { sid = e.sid, req = e.req } }
        elseif e.sid then
            results[e.i] = { guard(nil, self._drive, self, e.sid, e.req) }
        else
            results[e.i] = { self:_run(e.req) }
        end
    end
    if self.flush_on_ack then
        local any = false
        for i = 1, #reqs do
            local r = results[i]
            if r[1] ~= nil or (r[3] ~= ERR.InvalidRequest and r[3] ~= ERR.Unavailable) then
                any = true
            end
        end
        if any and not (durable and #later == 0) then
            local n, ferr = self:flush()
            if not n then
                for i = 1, #reqs do
                    local r = results[i]
                    if r[1] ~= nil or (r[3] ~= ERR.InvalidRequest and r[3] ~= ERR.Unavailable) then
                        results[i] = { fail(ERR.Unavailable, "not durable: " .. tostring(ferr)) }
                    end
                end
            end
        end
    end
    self.stats.batches = (self.stats.batches or 0) + 1
    return results
end

-- A member commit_many(reqs, { hand_back = true }) handed back (its result's .handed):
-- driven now through the single path under its member sid, as commit_many drives it
-- without the opt (the same outcome, flushed as commit's); once.
function Ledger:drive_handed(h)
    if type(h) ~= "table" or type(h.sid) ~= "string" or type(h.req) ~= "table" then
        error("ron.ledger: drive_handed expects a handed-back member", 2)
    end
    if h.driven then error("ron.ledger: a handed-back member is driven once", 2) end
    h.driven = true
    self.inflight[h.sid] = nil
    return self:_acked(guard(nil, self._drive, self, h.sid, h.req))
end

-- Replays found by the batch's first read: their stored outcomes, events read at once.
function Ledger:_replays(list, results)
    local tids = {}
    for _, x in ipairs(list) do
        local st = x.stored
        if st.status == "committed" and not (st.body_hash and x.e.req.body_hash
                                             and st.body_hash ~= x.e.req.body_hash) then
            tids[#tids + 1] = st.transfer_id
        end
    end
    local evs = {}
    for _, c in ipairs(slices(tids, BATCH_IDS)) do
        for k, v in pairs(self:_p("get_events_for", self.book, c, EVENT_KIND)) do evs[k] = v end
    end
    for _, x in ipairs(list) do
        local req, st = x.e.req, x.stored
        if st.body_hash and req.body_hash and st.body_hash ~= req.body_hash then
            results[x.e.i] = { fail(ERR.Conflict, "intent already used with another body") }
        else
            self.stats.replays = self.stats.replays + 1
            if st.status == "committed" then
                local ev = evs[st.transfer_id]
                results[x.e.i] = { { transfer_id = st.transfer_id, status = "committed",
                                     event_seq = ev and ev.seq, replayed = true } }
            else
                results[x.e.i] = { nil, st.message, st.code }
            end
        end
    end
end

-- opts.check's verdict on the batch's first read (commit_many's header): the dropped
-- members answered and taken out of live, the caller's claims returned.
local function caller_check(opts, got, live, results)
    local drop, claims = opts.check(got)
    if drop == nil or next(drop) == nil then return live, claims end
    local keep = {}
    for _, e in ipairs(live) do
        if drop[e.i] then
            results[e.i] = { nil, "dropped by the caller's check", ERR.InvalidRequest,
                             dropped = true }
        else keep[#keep + 1] = e end
    end
    return keep, claims
end

-- The caller's claims (opts.check's) on their own: a key there already with another body
-- hash (another writer claimed it since the read) fails the batch before the ledger writes
-- anything.
function Ledger:_caller_claims(claims)
    if claims == nil or #claims == 0 then return end
    if self:_pw("put_intents", claims, BATCH_IDS) == #claims then return end
    local ks = {}
    for i, c in ipairs(claims) do ks[i] = c.key end
    local cur = self:_intents_of(ks)
    for _, c in ipairs(claims) do
        local row = cur[c.key]
        if not row or row.body_hash ~= c.outcome.body_hash then
            error({ ledger_store_failure = true, name = "put_intents", class = "retry",
                    err = "a key of the batch was claimed with another body meanwhile" }, 0)
        end
    end
end

function Ledger:_batch(live, results, later, opts)
    if #live == 0 then return true end
    local keys = {}
    for _, e in ipairs(live) do
        keys[#keys + 1] = e.req.intent
        keys[#keys + 1] = claim_key(e)
    end
    local check = opts ~= nil and opts.check
    if check then
        for _, k in ipairs(opts.read or {}) do keys[#keys + 1] = k end
    end
    local got = self:_intents_of(keys)
    local claims
    if check then
        live, claims = caller_check(opts, got, live, results)
        if #live == 0 then return true end
    end
    local todo, replays = {}, {}
    for _, e in ipairs(live) do
        local prior = got[e.req.intent]
        if prior then replays[#replays + 1] = { e = e, stored = prior }
        elseif got[claim_key(e)] then
            later[#later + 1] = e -- another saga holds it: the single path waits or adopts
            self.stats.claims_lost = (self.stats.claims_lost or 0) + 1
        else todo[#todo + 1] = e end
    end
    if #todo == 0 then
        self:_caller_claims(claims)
        self:_replays(replays, results)
        return true
    end
    self:_replays(replays, results)
    local sid = self:_new_sid()
    for k, e in ipairs(todo) do e.k, e.sid = k, sid .. "/" .. k end
    local ctx = { sid = sid, batch = todo, created_at_ms = self.clock(), claims = claims,
                  also = opts ~= nil and opts.also or nil,
                  after = opts ~= nil and opts.after or nil,
                  pending = opts ~= nil and opts.pending or nil }
    local sids = { sid }
    for _, e in ipairs(todo) do sids[#sids + 1] = e.sid end
    for _, x in ipairs(sids) do self.inflight[x] = true end
    local r = { pcall(guard, function()
        if ctx.phase ~= "finalizing" then
            local ok, e = pcall(self._give_back_batch, self, ctx)
            if not ok and not store_failure(e) then error(e, 0) end
        end
    end, self._batch_body, self, ctx, results, later) }
    for _, x in ipairs(sids) do self.inflight[x] = nil end
    if not r[1] then error(r[2], 0) end
    self:_note_failed(sid, r[2], r[3], r[4])
    return unpack(r, 2, table.maxn(r))
end

-- The batch's record (LED-53). Reserving: the members' requests (encoded once per batch),
-- the store postings it reserves and the heads it takes: what give-back and a drive of
-- each member through the single path need. Finalizing: what the finalize needs and no
-- more: each transfer's canonical bytes (its intent and metadata inside) with its body
-- hash, the rejections to store, the members handed over (their requests), the heads.
local function batch_data(ctx, phase)
    if phase == "finalizing" then
        local items, rejects, handover = {}, {}, {}
        for i, it in ipairs(ctx.items) do
            items[i] = { k = it.e.k, t = it.tbytes, h = it.e.req.body_hash, keys = it.e.req.keys }
        end
        for i, x in ipairs(ctx.rejects or {}) do
            rejects[i] = { k = x.e.k, intent = x.e.req.intent, h = x.e.req.body_hash,
                           code = x.code, message = x.err, keys = x.e.req.keys }
        end
        for i, x in ipairs(ctx.handover or {}) do handover[i] = { k = x.e.k, req = x.e.req } end
        return codec.encode { kind = "batch", fin = true, items = items, rejects = rejects,
                              handover = handover, heads = ctx.heads,
                              created_at_ms = ctx.created_at_ms }
    end
    if not ctx.members_enc then
        local members = {}
        for i, e in ipairs(ctx.batch) do members[i] = { k = e.k, req = e.req } end
        ctx.members_enc = codec.encode(members)
    end
    local ins = {}
    for i, x in ipairs(ctx.ins or {}) do ins[i] = x.id end
    return codec.encode { kind = "batch", members = ctx.members_enc, ins = ins,
                          heads = ctx.heads, created_at_ms = ctx.created_at_ms }
end

function Ledger:_save_batch(ctx, phase)
    ctx.phase = phase
    self:_p("save_saga", ctx.sid, phase, batch_data(ctx, phase), self.node)
end

-- The postings of the store a planned batch consumes (not the ones it creates itself).
local function store_inputs(items)
    local mine, ids = {}, {}
    for _, it in ipairs(items or {}) do mine[it.tid] = true end
    for _, it in ipairs(items or {}) do
        for _, ref in ipairs(it.t.inputs) do
            if not mine[ref.transfer_id] then ids[#ids + 1] = { id = ref, consumed_by = it.tid } end
        end
    end
    return ids
end

-- Compensation of a batch: its reservations and heads back (each chunk read back as the
-- single path's _compensate does).
function Ledger:_give_back_batch(ctx)
    local ins = ctx.ins or store_inputs(ctx.items)
    local ids = {}
    for i, x in ipairs(ins) do ids[i] = x.id end
    for _, c in ipairs(slices(ids, BATCH_IDS)) do
        self:_compensate { sid = ctx.sid, t = { inputs = c } }
    end
    self:_compensate { sid = ctx.sid, heads = ctx.heads }
    ctx.items, ctx.ins, ctx.heads, ctx.rejects, ctx.handover = nil, nil, nil, nil, nil
end

-- The claims, at once; a short count is read back (a lost reply, a partial batch, or
-- another saga's claim). -> the members another saga holds (the single path takes them).
function Ledger:_claim_batch(ctx, record)
    local claims = {}
    for i, e in ipairs(ctx.batch) do claims[i] = claim_of(e) end
    local lost = {}
    -- the record and the claims: one phase (a claim never exists without a record that
    -- names its member, LED-67)
    ctx.phase = "reserving"
    local ops = { { "save_saga", ctx.sid, "reserving", record, self.node } }
    for _, c in ipairs(slices(claims, BATCH_IDS)) do ops[#ops + 1] = { "put_intents", c } end
    local res, n = phases.apply(self, ops), 0
    for k = 2, #ops do n = n + res[k][1] end
    if n == #claims then return lost end
    local ks = {}
    for i, c in ipairs(claims) do ks[i] = c.key end
    for round = 1, self.max_attempts + 1 do
        local cur = self:_intents_of(ks)
        local missing = {}
        lost = {}
        for _, e in ipairs(ctx.batch) do
            local c = cur[claim_key(e)]
            if not c then missing[#missing + 1] = claim_of(e)
            elseif c.message ~= e.sid then lost[#lost + 1] = e end
        end
        if #missing == 0 then break end
        if round > self.max_attempts then
            error({ ledger_store_failure = true, name = "put_intents",
                    err = "claims not stored", class = "io" }, 0)
        end
        self:_pw("put_intents", missing, BATCH_IDS)
    end
    return lost
end

function Ledger:_batch_body(ctx, results, later)
    -- LED-74: the plain case in one phase (ron.ledger.engine.batch_atomic); nothing of it
    -- applied otherwise, and the saga's phases below plan it again
    if self.one_tx then
        local done = self:_atomic_batch(ctx, results, later)
        if done ~= nil then return done end
    end
    -- (a pipeline's batch before this one ends first: the saga's reads are the store's)
    pipeline.wait(ctx.after)
    ctx.after = nil
    -- the caller's claims (commit_many's opts.check), unless the one phase above wrote them
    local claims = ctx.claims
    ctx.claims = nil
    self:_caller_claims(claims)
    local claimed = false
    for _ = 1, self.max_attempts do
        self.stats.resolves = self.stats.resolves + 1
        -- plan (reads only), then the record and the claims
        self:_plan_batch(ctx)
        if not claimed then
            claimed = true
            local lost = self:_claim_batch(ctx, batch_data(ctx, "reserving"))
            if #lost > 0 then
                local gone, keep = {}, {}
                for _, e in ipairs(lost) do gone[e] = true end
                self.stats.claims_lost = (self.stats.claims_lost or 0) + #lost
                for _, e in ipairs(ctx.batch) do
                    if gone[e] then
                        e.sid = nil -- not ours: the single path from the start
                        later[#later + 1] = e
                    else keep[#keep + 1] = e end
                end
                ctx.batch, ctx.members_enc = keep, nil
                if #keep == 0 then
                    self:_p("delete_saga", ctx.sid)
                    return true
                end
                self:_plan_batch(ctx)
            end
        end
        -- the record with the plan, the store's postings it consumes and the heads: one
        -- phase, all or none (LED-67), with the last step's reads after them (LED-30, as the
        -- single path's: one round trip fewer than three)
        local ids = {}
        for i, x in ipairs(ctx.ins) do ids[i] = x.id end
        local aids, prs = self:_last_reads(ctx)
        ctx.ids = aids
        local got, pre = phases.reserve(self, ctx, batch_data(ctx, "reserving"), ids, prs)
        if got == "full" then
            local ok, err, accts = self:_revalidate_batch(ctx, pre)
            if ok then
                -- the pairs the chain moves, guarded by its finalize: a miss (another
                -- writer moved one past what the chain's move fits) is a race like a moved
                -- balance: give back and plan again, where the overflow is refused
                ctx.limits = phases.batch_limits(ctx.items, accts)
                local done = self:_finalize_batch(ctx, results, later)
                ctx.limits = nil
                if done ~= false then return done end
            elseif err then error(err) end
            self:_give_back_batch(ctx)
        end
        self.pause(1)
    end
    -- Still racing: the saga stays (reserving, holding nothing) for a retry or recover().
    return fail(ERR.Unavailable, "postings or heads kept changing; retry")
end

_M.BATCH_IDS = BATCH_IDS
_M.BATCH_QUERIES = BATCH_QUERIES
_M.pkey = pkey
_M.claim_key = claim_key
_M.claim_of = claim_of
_M.store_inputs = store_inputs
_M.BATCH_POSTINGS = BATCH_POSTINGS
_M.rec_chunks = rec_chunks
_M.slices = slices
_M.methods = Ledger
return _M
