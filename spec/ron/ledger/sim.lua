-- The ledger's deterministic simulator (LED-35; research §2e item 9, TigerBeetle's VOPR in
-- miniature): the engine (lua/ron/ledger/ledger.lua) over the in-memory store, whose fault
-- hook is the simulator's hand on every primitive.
--
--   exhaustive(scenario)  the scenario's last operation is run once to count its primitives,
--                         then once per (primitive i, fault): a crash before / after i, an
--                         error before / after i, a zero and a partial batch at i, a storm of
--                         errors from i on (the retries run out: Unavailable). After each run:
--                         recover() (and a replay of the request), then verify().
--   random(opts)          N sagas as coroutines, interleaved at every primitive by a seeded
--                         scheduler, with random crashes (the whole process dies: every saga in
--                         flight is lost), errors and partial batches; after each crash
--                         recover() then verify(); verify() again at the end.
--
-- verify() is the list of invariants: conservation per asset, no posting consumed twice, no
-- PendingInactive left, no head held, no saga left, the projection equal to the sum of the
-- postings, every transfer's id recomputed from its bytes, every committed intent exactly
-- one transfer and exactly one event, events gapless, floors kept, every answer a caller got
-- consistent with what is stored. Every failure names the seed.
local bit = require("bit")
local L = require("ron.ledger.ledger")
local events = require("ron.ledger.events")
local scan = require("ron.ledger.store.scan")
local ledger = require("ron.ledger")
local memory = require("ron.ledger.store.memory")
local model = require("ron.ledger.model")

local format = string.format

local M = {}

-- ---- a seeded generator (xorshift32), independent of math.random ----

function M.rng(seed)
    local x = bit.tobit(seed)
    if x == 0 then x = 0x2545F491 end
    return function(n)
        x = bit.bxor(x, bit.lshift(x, 13))
        x = bit.bxor(x, bit.rshift(x, 17))
        x = bit.bxor(x, bit.lshift(x, 5))
        local u = x < 0 and x + 4294967296 or x
        return n and (u % n + 1) or u / 4294967296
    end
end

local CRASH = setmetatable({}, { __tostring = function() return "simulated crash" end })
M.CRASH = CRASH

local USD = { code = "USD", scale = 2 }
local EUR = { code = "EUR", scale = 2 }
M.USD, M.EUR = USD, EUR

local function id16(c) return string.rep(c, 16) end
M.EXT, M.RECV = id16("E"), id16("R")
M.ACCOUNTS = {
    { id = M.EXT, policy = "uncapped" },
    { id = M.RECV, policy = "uncapped" },
    { id = id16("K"), policy = "capped", floor = -100 },
    { id = id16("k"), policy = "capped", floor = -40 },
    { id = id16("A"), policy = "no_overdraft" },
    { id = id16("B"), policy = "no_overdraft" },
    { id = id16("C"), policy = "no_overdraft" },
    { id = id16("D"), policy = "no_overdraft" },
}

-- ---- the invariants ----

local function ak(a) return a.code .. "/" .. a.scale end

-- Returns true, or false and the first broken invariant. `answers` (optional): the outcomes
-- callers were given, { {intent=, ok=bool, transfer_id=, code=, body_hash=} }.
-- Every posting, transfer and event of a store: the memory store's scans, or paging through
-- the contract's reads (a SQL store).
local function all_postings(store)
    if store.scan_postings then return store:scan_postings() end
    local r = {}
    for _, a in ipairs(store:list_accounts()) do
        for _, p in ipairs(store:get_postings_by_account(a.id)) do r[#r + 1] = p end
    end
    return r
end

local function all_transfers(store)
    local r, after = {}, nil
    repeat
        local page = store:list_transfers(after, 500)
        for _, t in ipairs(page) do r[#r + 1] = t end
        after = page[#page] and page[#page].n
    until #page < 500
    return r
end

local function all_events(store, book)
    local r = {}
    repeat
        local page = store:get_events_since(book, #r, 500)
        for _, e in ipairs(page) do r[#r + 1] = e end
    until #page < 500
    return r
end

local function all_heads(store)
    if store.list_heads then return store:list_heads() end
    local prs = {}
    for _, a in ipairs(store:list_accounts()) do
        for _, asset in ipairs { USD, EUR } do
            prs[#prs + 1] = { account = a.id, asset = asset }
        end
    end
    local hs, r = store:get_heads(prs), {}
    for i, pr in ipairs(prs) do
        if hs[i] then r[#r + 1] = { account = pr.account, asset = pr.asset,
                                    holder = hs[i].holder } end
    end
    return r
end

function M.verify(store, book, answers)
    local function bad(...) return false, format(...) end
    local posts = all_postings(store)
    local by_key, sums, per_pair = {}, {}, {}
    for _, p in ipairs(posts) do
        by_key[memory.posting_key(p.id)] = p
        if p.status == "pending_inactive" then
            return bad("posting %s:%d left PendingInactive (reservation %s)",
                       ledger.hex(p.id.transfer_id):sub(1, 12), p.id.index, tostring(p.reservation))
        end
        if p.status == "active" then
            sums[ak(p.asset)] = (sums[ak(p.asset)] or 0) + p.amount
            local k = p.account .. ak(p.asset)
            local e = per_pair[k]
            if not e then
                e = { account = p.account, asset = p.asset, sum = 0 }
                per_pair[k] = e
            end
            e.sum = e.sum + p.amount
        end
    end
    for a, s in pairs(sums) do
        if s ~= 0 then return bad("conservation: asset %s sums to %s", a, tostring(s)) end
    end
    -- the projection
    local pairs_l = {}
    for _, acct in ipairs(store:list_accounts()) do
        for _, asset in ipairs { USD, EUR } do
            local k = acct.id .. ak(asset)
            pairs_l[#pairs_l + 1] = { account = acct.id, asset = asset, sum = per_pair[k] and
                                      per_pair[k].sum or 0, acct = acct }
        end
    end
    local bals = store:get_balances(pairs_l)
    for i, pr in ipairs(pairs_l) do
        if bals[i] ~= pr.sum then
            return bad("projection of %s %s is %s, postings sum to %s", pr.account:sub(1, 1),
                       ak(pr.asset), tostring(bals[i]), tostring(pr.sum))
        end
        local a = pr.acct
        local floor = a.policy == "capped" and a.floor or (a.policy == "no_overdraft" and 0)
        if floor and pr.sum < floor then
            return bad("floor: %s %s at %s below %s", pr.account:sub(1, 1), ak(pr.asset),
                       tostring(pr.sum), tostring(floor))
        end
    end
    -- transfers: ids, inputs consumed exactly by them, outputs present
    local transfers = all_transfers(store)
    local consumed_n, by_tid, by_intent = 0, {}, {}
    for _, rec in ipairs(transfers) do
        local t = assert(ledger.decode_transfer(rec.bytes))
        if ledger.transfer_id(t) ~= rec.id then return bad("transfer id does not match bytes") end
        if by_intent[t.intent] then
            return bad("intent %q committed twice", t.intent)
        end
        by_intent[t.intent] = rec.id
        by_tid[rec.id] = t
        for _, ref in ipairs(t.inputs) do
            local p = by_key[memory.posting_key(ref)]
            if not p or p.status ~= "inactive" or p.consumed_by ~= rec.id then
                return bad("input of %s not consumed by it", ledger.hex(rec.id):sub(1, 12))
            end
            consumed_n = consumed_n + 1
        end
        for i, o in ipairs(t.outputs) do
            local p = by_key[memory.posting_key { transfer_id = rec.id, index = i - 1 }]
            if not p or p.account ~= o.account or p.amount ~= o.amount then
                return bad("output %d of %s missing", i, ledger.hex(rec.id):sub(1, 12))
            end
        end
        local outcome = store:get_intent(t.intent)
        if not outcome or outcome.status ~= "committed" or outcome.transfer_id ~= rec.id then
            return bad("transfer %s without its committed intent", ledger.hex(rec.id):sub(1, 12))
        end
    end
    local inactive = 0
    for _, p in ipairs(posts) do if p.status == "inactive" then inactive = inactive + 1 end end
    if inactive ~= consumed_n then
        return bad("%d inactive postings, %d consumed by transfers (consumed twice or lost)",
                   inactive, consumed_n)
    end
    -- events: gapless, one per transfer; every account version and every stored rejection
    -- one too (LED-68)
    local evs = all_events(store, book)
    local seen, ntransfer, other = {}, 0, {}
    for i, e in ipairs(evs) do
        if e.seq ~= i then return bad("event seq %d at position %d (gap)", e.seq, i) end
        if e.kind == events.TRANSFER then
            if seen[e.transfer_id] or not by_tid[e.transfer_id] then
                return bad("event %d: transfer twice or unknown", i)
            end
            seen[e.transfer_id] = true
            ntransfer = ntransfer + 1
        elseif other[e.kind .. e.transfer_id] then
            return bad("event %d: a %s event twice", i, e.kind)
        else
            other[e.kind .. e.transfer_id] = e
        end
    end
    if ntransfer ~= #transfers then
        return bad("%d transfer events for %d transfers", ntransfer, #transfers)
    end
    for _, a in ipairs(scan.all(store, "accounts")) do
        local e = other[events.ACCOUNT .. events.account_id(a.bytes)]
        if not e or e.data ~= a.bytes then return bad("account version without its event") end
    end
    for _, o in ipairs(scan.all(store, "intents")) do
        if o.status == "rejected" and not other[events.REJECTION .. events.rejection_id(o.key)] then
            return bad("rejection of %q without its event", o.key)
        end
    end
    if store:head_seq(book) ~= #evs then return bad("head_seq disagrees") end
    -- nothing held, nothing pending
    for _, h in ipairs(all_heads(store)) do
        if h.holder ~= nil then return bad("head %s held by %s", h.account:sub(1, 1), h.holder) end
    end
    local pend = store:list_pending_sagas()
    if #pend > 0 then return bad("%d sagas pending (first %s)", #pend, pend[1].phase) end
    -- what callers were told
    for _, a in ipairs(answers or {}) do
        local o = store:get_intent(a.intent)
        if a.ok then
            if not o or o.status ~= "committed" or o.transfer_id ~= a.transfer_id then
                return bad("intent %q answered committed, stored %s", a.intent,
                           o and o.status or "nothing")
            end
        elseif a.code == L.ERR.Conflict then
            if not o or o.body_hash == a.body_hash then
                return bad("intent %q answered Conflict without another body stored", a.intent)
            end
        elseif not L.RETRY[a.code] and a.code ~= L.ERR.InvalidRequest then
            if not o or o.status ~= "rejected" or o.code ~= a.code then
                return bad("intent %q answered %s, stored %s", a.intent, L.NAME[a.code],
                           o and (o.status .. " " .. tostring(o.code)) or "nothing")
            end
        end
    end
    return true
end

-- The model oracle on every last-step validation (LED-12): the same code, the same deltas.
function M.model_check(stats)
    return function(t, accts, consumed, bals, plan, err, code)
        stats.model_checks = (stats.model_checks or 0) + 1
        local mplan, mname = model.validate(t, accts, consumed, bals)
        local cname = code and L.NAME[code]
        if (plan == nil) ~= (mplan == nil) or (mname and mname ~= cname) then
            error(format("model disagrees: core %s, model %s", tostring(cname or "ok"),
                         tostring(mname or "ok")))
        end
        if plan then
            for i, d in ipairs(plan.deltas) do
                local m = mplan.deltas[i]
                if not m or m.after ~= d.after or m.before ~= d.before then
                    error("model disagrees on delta " .. i)
                end
            end
        end
        if err then stats.model_rejections = (stats.model_rejections or 0) + 1 end
    end
end

-- ---- exhaustive single-operation search ----

local function mv(from, to, amount, asset)
    return { from = from, to = to, amount = amount, asset = asset or USD }
end
M.mv = mv

local function new_world(fault)
    local store = memory.new { fault = fault }
    return store
end

-- M.saga_only: the engines commit through the saga's phases only (no one-transaction
-- commit, LED-72): the specs run every scenario both ways.
local function open_ledger(store, nonce, stats)
    return L.new { store = store, book = "main", node = "n1", nonce = nonce,
                   clock = function() return 1700000000000 end, one_tx = not M.saga_only,
                   check = M.model_check(stats) }
end

local function setup_accounts(led)
    for _, a in ipairs(M.ACCOUNTS) do assert(led:create_account(a)) end
end

-- A setup that funds each { account letter, amount } from EXT, in order (intents d1, d2, ...).
local function deposits(...)
    local funds = { ... }
    return function(led)
        for i, d in ipairs(funds) do
            assert(led:commit { intent = "d" .. i, movements = { mv(M.EXT, id16(d[1]), d[2]) } })
        end
    end
end

-- Scenarios: setup(led) commits the history before; op(led) is the operation under test
-- (returns the engine's answer; the request is replayable).
M.SCENARIOS = {
    {
        name = "pay with change (no-overdraft)",
        setup = deposits({ "A", 100 }, { "A", 50 }),
        op = function(led)
            return led:commit { intent = "op", movements = { mv(id16("A"), id16("B"), 120) } }
        end,
    },
    {
        name = "capped debit with heads, shortfall to a receivable",
        setup = deposits({ "K", 30 }, { "C", 10 }),
        op = function(led)
            return led:commit { intent = "op", movements = { mv(id16("K"), id16("B"), 90),
                                                             mv(id16("C"), id16("B"), 25),
                                                             mv(id16("k"), id16("D"), 5, EUR) },
                                overdraft = { [id16("C")] = id16("k") } }
        end,
    },
    {
        name = "reversal",
        setup = function(led)
            assert(led:commit { intent = "d1", movements = { mv(M.EXT, id16("A"), 100) } })
            local r = assert(led:commit { intent = "p", movements = { mv(id16("A"), id16("K"), 60),
                                                                      mv(id16("A"), id16("B"), 7) } })
            led.sim_target = r.transfer_id
        end,
        op = function(led) return led:reverse(led.sim_target, "op") end,
    },
    {
        name = "rejection (floor)",
        setup = function(led)
            assert(led:commit { intent = "d1", movements = { mv(id16("k"), id16("A"), 35) } })
        end,
        op = function(led)
            return led:commit { intent = "op", movements = { mv(id16("k"), id16("A"), 6) } }
        end,
    },
}

-- The batch path (commit_many, LED-51..LED-56) as one operation: its answer is the list of
-- outcomes folded into one (a transfer id or an error code per request), or the first
-- Unavailable (a retry class: the caller sends the batch again).
local function batch_op(reqs)
    return function(led)
        local res = led:commit_many(reqs)
        local sig = {}
        for i, r in ipairs(res) do
            if r[1] == nil and L.RETRY[r[3]] then return nil, r[2], r[3] end
            sig[i] = r[1] and r[1].transfer_id or ("E" .. tostring(r[3]))
        end
        return { transfer_id = table.concat(sig, "|") }
    end
end
M.batch_op = batch_op

M.SCENARIOS[#M.SCENARIOS + 1] = {
    name = "batch: chained change, a rejection in the middle",
    setup = deposits({ "A", 100 }, { "B", 50 }),
    op = batch_op {
        { intent = "b1", movements = { mv(id16("A"), id16("B"), 10) } },
        { intent = "b2", movements = { mv(id16("A"), id16("C"), 20) } },
        { intent = "b3", movements = { mv(id16("A"), id16("D"), 500) } },
        { intent = "b4", movements = { mv(id16("A"), id16("B"), 30) } },
        { intent = "b5", movements = { mv(id16("B"), id16("C"), 85) } },
    },
}
M.SCENARIOS[#M.SCENARIOS + 1] = {
    name = "batch: capped payer, heads, receivable, floor",
    setup = deposits({ "K", 30 }, { "C", 10 }),
    op = batch_op {
        { intent = "b1", movements = { mv(id16("K"), id16("B"), 30) } },
        { intent = "b2", movements = { mv(id16("K"), id16("B"), 50) } },
        { intent = "b3", movements = { mv(id16("C"), id16("B"), 25) },
          overdraft = { [id16("C")] = id16("k") } },
        { intent = "b4", movements = { mv(id16("K"), id16("B"), 90) } },
        { intent = "b1", movements = { mv(id16("K"), id16("B"), 30) } },
    },
}
M.SCENARIOS[#M.SCENARIOS + 1] = {
    -- no rejection: the one-transaction batch (LED-74) where the engine tries it
    name = "batch: plain chain, a capped payer (one transaction)",
    setup = deposits({ "A", 100 }, { "B", 50 }, { "K", 30 }),
    op = batch_op {
        { intent = "b1", movements = { mv(id16("A"), id16("B"), 10) } },
        { intent = "b2", movements = { mv(id16("A"), id16("C"), 20) } },
        { intent = "b3", movements = { mv(id16("B"), id16("C"), 55) } },
        { intent = "b4", movements = { mv(id16("K"), id16("B"), 20) } },
        { intent = "b5", movements = { mv(id16("A"), id16("B"), 30) } },
    },
}

local function balances(store)
    local r = {}
    for _, a in ipairs(M.ACCOUNTS) do
        for _, asset in ipairs { USD, EUR } do
            r[#r + 1] = store:get_balances({ { account = a.id, asset = asset } })[1]
        end
    end
    return r
end

local FAULTS = { "crash_before", "crash_after", "err_before", "err_after", "zero", "partial",
                 "storm" }
M.FAULTS = FAULTS
local BATCH = { reserve_postings = true, release_postings = true, deactivate_postings = true,
                insert_postings = true,
                -- the batch path's (LED-51): a partial count at each
                deactivate_many = true, put_intents = true, store_transfers = true,
                append_events = true }
-- the list a batch primitive applies (append_events: after the book)
local function batch_list(name, arg, arg2)
    if name == "append_events" then return arg2 end
    return arg
end

-- Runs one scenario under every (primitive, fault); returns the number of cases run.
function M.exhaustive(sc, stats)
    stats = stats or {}
    -- baseline: count the op's primitives and keep its result
    local count, counting = 0, false
    local store = new_world(function(phase)
        if counting and phase == "before" then count = count + 1 end
    end)
    local led = open_ledger(store, "base", stats)
    setup_accounts(led)
    sc.setup(led)
    counting = true
    local base_r, _, base_code = sc.op(led)
    counting = false
    local base_bal = balances(store)
    assert(M.verify(store, "main"))
    local cases = 0
    for i = 1, count do
        for _, fault in ipairs(FAULTS) do
            cases = cases + 1
            local n, armed, storm = 0, false, 0
            local what
            local st = new_world(function(phase, name, arg, arg2)
                arg = batch_list(name, arg, arg2)
                if not armed then return end
                if phase == "before" then n = n + 1 end
                if storm > 0 then
                    if phase == "before" then
                        storm = storm - 1
                        return { err = "storm", class = "io" }
                    end
                    return
                end
                if n ~= i then return end
                if phase == "before" then
                    what = name
                    if fault == "crash_before" then error(CRASH, 0) end
                    if fault == "err_before" then return { err = "injected", class = "retry" } end
                    if fault == "zero" and BATCH[name] then return { limit = 0 } end
                    if fault == "partial" and BATCH[name] and type(arg) == "table" then
                        return { limit = math.floor(#arg / 2) }
                    end
                    if fault == "storm" then
                        storm = 64
                        return { err = "storm", class = "io" }
                    end
                elseif phase == "after" and n == i then
                    if fault == "crash_after" then error(CRASH, 0) end
                    if fault == "err_after" then
                        n = n + 0.5 -- once
                        return { err = "reply lost", class = "io" }
                    end
                end
            end)
            local l2 = open_ledger(st, "x", stats)
            setup_accounts(l2)
            sc.setup(l2)
            armed = true
            local ok, r, err, code = pcall(sc.op, l2)
            armed, storm = false, 0
            local where = format("scenario %q, primitive %d (%s), fault %s", sc.name, i,
                                 tostring(what), fault)
            if not ok and r ~= CRASH then error(where .. ": " .. tostring(r)) end
            if ok and fault ~= "storm" and fault ~= "crash_before" and fault ~= "crash_after" then
                -- a single fault changes nothing a caller sees
                if (r == nil) ~= (base_r == nil) or (code ~= base_code) then
                    error(format("%s: answer %s (%s), baseline %s", where, tostring(r ~= nil),
                                 tostring(err), tostring(base_r ~= nil)))
                end
            end
            if ok and r == nil and not L.RETRY[code] and code ~= base_code then
                error(where .. ": rejected " .. tostring(err))
            end
            -- restart, recover, replay: the outcome is the baseline's
            local l3 = open_ledger(st, "y", stats)
            local rep = assert(l3:recover())
            for _, x in ipairs(rep) do
                if not x.ok and L.RETRY[x.code] then error(where .. ": recover " .. x.err) end
            end
            l3.sim_target = l2.sim_target
            local r3, err3, code3 = sc.op(l3)
            if (r3 == nil) ~= (base_r == nil) or code3 ~= base_code then
                error(format("%s: replay %s (%s)", where, tostring(r3 ~= nil), tostring(err3)))
            end
            if r3 and base_r and r3.transfer_id ~= base_r.transfer_id then
                -- the same state resolves to the same transfer
                error(where .. ": replay committed another transfer")
            end
            local vok, verr = M.verify(st, "main")
            if not vok then error(where .. ": " .. verr) end
            local b = balances(st)
            for k = 1, #b do
                if b[k] ~= base_bal[k] then error(where .. ": balances differ from baseline") end
            end
        end
    end
    return cases, count
end

-- ---- random interleavings with crashes ----

-- The batch path's detours (LED-54: members handed to the single path, lost claims, change
-- spent in its batch) and its one-transaction batches (LED-74), summed over the engines.
local function batch_stats(stats, engines)
    for _, l in ipairs(engines) do
        for _, k in ipairs { "handovers", "claims_lost", "chained", "atomic_batches" } do
            stats[k] = (stats[k] or 0) + (l.stats[k] or 0)
        end
    end
end

-- opts: seed, ops (operations started), conc (sagas at once), p_crash, p_err, p_partial.
function M.random(opts)
    local seed = opts.seed
    local R = M.rng(seed)
    local stats = { crashes = 0, commits = 0, rejections = 0, unavailable = 0, conflicts = 0,
                    replays = 0, verifies = 0, calls = 0 }
    local mine = {}
    local in_recover = false
    local store
    store = memory.new { fault = function(phase, name, arg, arg2)
        arg = batch_list(name, arg, arg2)
        local co = coroutine.running()
        if not (co and mine[co]) and not in_recover then return end
        if phase == "before" then
            stats.calls = stats.calls + 1
            if R() < opts.p_crash then error(CRASH, 0) end
            if R() < opts.p_err then return { err = "injected", class = "retry" } end
            if BATCH[name] and type(arg) == "table" and R() < opts.p_partial then
                return { limit = R(#arg + 1) - 1 }
            end
            -- a phase is one transaction: no other saga runs inside it (LED-67)
            if co and mine[co] and not store.in_apply then coroutine.yield() end
        else
            if R() < opts.p_crash then error(CRASH, 0) end
            if R() < opts.p_err then return { err = "reply lost", class = "io" } end
        end
    end }
    local nonce = 0
    local engines = {}
    local function open()
        nonce = nonce + 1
        local l = open_ledger(store, "r" .. nonce, stats)
        engines[#engines + 1] = l
        l.pause = function()
            local co = coroutine.running()
            if co and mine[co] then coroutine.yield() end
        end
        return l
    end
    local led = open()
    in_recover = false
    setup_accounts(led)
    local ids = {}
    for _, a in ipairs(M.ACCOUNTS) do ids[#ids + 1] = a.id end
    local sent, committed, answers = {}, {}, {}
    local function pick_acct(skip_ext)
        local k = skip_ext and R(#ids - 1) + 1 or R(#ids)
        return ids[k]
    end
    local function next_op(k)
        local x = R()
        local intent = "i" .. k
        if opts.p_batch and R() < opts.p_batch then
            -- a batch (commit_many) of a few payments, racing the single sagas
            local list = {}
            for j = 1, R(5) + 1 do
                local from = pick_acct(true)
                if R() < 0.3 then from = ids[R(2) + 2] end
                local to = pick_acct()
                if to == from then to = M.EXT end
                list[j] = { intent = intent .. "." .. j,
                            movements = { mv(from, to, R(60), R() < 0.8 and USD or EUR) } }
                if R() < 0.2 then list[j].overdraft = { [from] = M.RECV } end
                -- a request sent before (maybe still in flight: its claim is another saga's)
                if #sent > 0 and R() < 0.15 then
                    local prev = sent[#sent - R(math.min(#sent, 4)) + 1]
                    if prev.kind == "commit" then list[j] = prev.req end
                end
            end
            return "batch", list
        end
        if x < 0.32 then
            local to = pick_acct(true)
            return "commit", { intent = intent, movements = { mv(M.EXT, to, R(200) + 9,
                                                               R() < 0.8 and USD or EUR) } }
        elseif x < 0.70 then
            local mvs = {}
            for j = 1, R(3) do
                local from = pick_acct(true)
                -- the capped accounts are the hot payers: their floors are the race to win
                if R() < (opts.p_capped or 0.3) then from = ids[R(2) + 2] end
                local to = pick_acct()
                if to == from then to = M.EXT end
                mvs[j] = mv(from, to, R(80), R() < 0.8 and USD or EUR)
            end
            local od
            if R() < 0.25 then od = { [mvs[1].from] = R() < 0.5 and M.RECV or ids[4] } end
            return "commit", { intent = intent, movements = mvs, overdraft = od }
        elseif x < 0.78 and #committed > 0 then
            return "reverse", { target = committed[R(#committed)], intent = intent }
        elseif x < 0.93 and #sent > 0 then
            local prev = sent[R(#sent)]
            if prev.kind == "commit" and R() < 0.3 then
                local req = { intent = prev.req.intent, movements = { mv(M.EXT, ids[5], 1) } }
                return "commit", req, true
            end
            return prev.kind, prev.req
        elseif x < 0.97 then
            local a = ids[R(#ids - 2) + 2]
            return R() < 0.5 and "freeze" or "unfreeze", { id = a }
        end
        return "commit", { intent = intent, movements = { mv(M.EXT, pick_acct(true), 5) } }
    end
    local live, started = {}, 0
    local function crash_and_recover()
        stats.crashes = stats.crashes + 1
        for co in pairs(live) do mine[co] = nil end
        live = {}
        -- a new process: recover() until nothing is pending (errors and crashes can hit the
        -- recovery itself; each attempt is a new process)
        -- every other recovery runs without faults: then no saga may stay Unavailable (a
        -- dead process's sagas must not wait for each other)
        local clean = stats.crashes % 2 == 0
        for attempt = 1, 50 do
            led = open()
            in_recover = not clean and attempt < 40
            local ok, rep = pcall(led.recover, led)
            in_recover = false
            if ok and rep and clean then
                for _, x in ipairs(rep) do
                    if not x.ok and L.RETRY[x.code] then
                        error(format("seed %d: a fault-free recover() left %s: %s", seed, x.id,
                                     tostring(x.err)))
                    end
                end
            end
            if ok and rep then
                local left = #store:list_pending_sagas()
                if left == 0 then break end
            elseif not ok and rep ~= CRASH then
                error(format("seed %d: recover raised %s", seed, tostring(rep)))
            end
            if attempt == 50 then
                local why = {}
                for _, sg in ipairs(store:list_pending_sagas()) do
                    why[#why + 1] = sg.id .. " " .. sg.phase
                end
                for _, x in ipairs(ok and rep or {}) do
                    why[#why + 1] = format("recovered %s %s ok=%s %s", tostring(x.id),
                                           tostring(x.phase), tostring(x.ok), tostring(x.err))
                end
                error(format("seed %d: recovery never converged: %s", seed,
                             table.concat(why, "; ")))
            end
        end
        stats.verifies = stats.verifies + 1
        local vok, verr = M.verify(store, "main", answers)
        if not vok then error(format("seed %d after crash %d: %s", seed, stats.crashes, verr)) end
    end
    local function record(kind, req, r, err, code)
        if kind == "freeze" or kind == "unfreeze" then return end
        if kind == "batch" then
            stats.batches = (stats.batches or 0) + 1
            for i, x in ipairs(r) do
                sent[#sent + 1] = { kind = "commit", req = req[i] }
                record("commit", req[i], x[1], x[2], x[3])
            end
            return
        end
        local body = L.body_hash(kind, req)
        if r then
            stats.commits = stats.commits + (r.replayed and 0 or 1)
            stats.replays = stats.replays + (r.replayed and 1 or 0)
            answers[#answers + 1] = { intent = req.intent, ok = true, transfer_id = r.transfer_id }
            committed[#committed + 1] = r.transfer_id
        else
            if L.RETRY[code] then stats.unavailable = stats.unavailable + 1
            elseif code == L.ERR.Conflict then stats.conflicts = stats.conflicts + 1
            else stats.rejections = stats.rejections + 1 end
            answers[#answers + 1] = { intent = req.intent, ok = false, code = code,
                                      body_hash = body, err = err }
        end
    end
    -- Floors hold at every step, not only at rest: a capped pair whose head nobody holds has
    -- no commit half-way through its debits, so its projection is a committed balance.
    local capped = {}
    for _, a in ipairs(M.ACCOUNTS) do
        if a.policy == "capped" then
            for _, asset in ipairs { USD, EUR } do
                capped[#capped + 1] = { account = a.id, asset = asset, floor = a.floor }
            end
        end
    end
    local function check_floors()
        local heads = store:get_heads(capped)
        local bals = store:get_balances(capped)
        for i, c in ipairs(capped) do
            if not (heads[i] and heads[i].holder) and bals[i] < c.floor then
                error(format("seed %d: floor: %s %s at %s below %s (mid-run)", seed,
                             c.account:sub(1, 1), ak(c.asset), tostring(bals[i]),
                             tostring(c.floor)))
            end
        end
        stats.floor_checks = (stats.floor_checks or 0) + 1
    end
    while started < opts.ops or next(live) do
        local n_live = 0
        for _ in pairs(live) do n_live = n_live + 1 end
        if started < opts.ops and n_live < opts.conc then
            started = started + 1
            local kind, req = next_op(started)
            if kind == "commit" or kind == "reverse" then
                sent[#sent + 1] = { kind = kind, req = req }
            end
            local l = led
            local co = coroutine.create(function()
                if kind == "batch" then return l:commit_many(req) end
                if kind == "commit" then return l:commit(req)
                elseif kind == "reverse" then return l:reverse(req.target, req.intent)
                elseif kind == "freeze" then return l:freeze(req.id)
                else return l:unfreeze(req.id) end
            end)
            mine[co] = true
            live[co] = { kind = kind, req = req, n = started }
        else
            -- resume a random live saga
            local list = {}
            for co in pairs(live) do list[#list + 1] = co end
            table.sort(list, function(a, b) return live[a].n < live[b].n end)
            local co = list[R(#list)]
            local res = { coroutine.resume(co) }
            if not res[1] then
                if res[2] == CRASH then
                    crash_and_recover()
                else
                    error(format("seed %d: %s", seed, debug.traceback(co, tostring(res[2]))))
                end
            elseif coroutine.status(co) == "dead" then
                local op = live[co]
                live[co], mine[co] = nil, nil
                record(op.kind, op.req, res[2], res[3], res[4])
            end
            if res[1] then check_floors() end
        end
    end
    -- the end: a last recovery without faults, then everything must hold
    in_recover = false
    led = open()
    assert(led:recover())
    local vok, verr = M.verify(store, "main", answers)
    if not vok then error(format("seed %d at the end: %s", seed, verr)) end
    stats.verifies = stats.verifies + 1
    stats.transfers = #all_transfers(store)
    stats.events = store:head_seq("main")
    batch_stats(stats, engines)
    return stats
end

return M
