-- ron.ledger.exporter: the metering runtime's exporter into ron-ledger (docs/LEDGER-RATING.md
-- §7, docs/EXPORT.md §1; PRODUCT.md §9). It belongs to the ledger and uses only the meter's
-- export contract (the slice, the statuses, ron.accounting.export.loss); its old name
-- ron.accounting.export.ron.ledger.exporter forwards here for one release. Each slice is rated
-- with the operator's rate card (ron.ledger.rate), mapped to one commit of the engine
-- (ron.ledger.usage, ron.ledger.ledger) and consumed exactly once: the stream's chain is
-- enforced here, per stream, on the store's usage_streams (ok | dup | conflict | gap).
--
--   local ledger = require("ron.ledger.exporter")
--   local e = assert(ledger.new {
--       store = { backend = "sqlite", path = "var/ledger.db" },   -- or an open store
--       card = "cards/acme.lua",        -- or a card from ron.ledger.rate
--       book = "main", node = "n1",     -- the engine's book and node name
--       audit = fn(kind, attrs),        -- optional: a "ledger" record per committed
--   })                                  -- transfer (the daemon calls e:set_audit(fn))
--   e:put(slice)            -> ok | dup | conflict | gap [, detail] | nil, err
--   e:put_many(slices)      -> { { status, detail } | { nil, err } per slice } (the batch
--                              path: one led:commit_many per lane, heads moved once, one
--                              flush; LED-55, docs/LEDGER-RATING.md §7:
--                              ron.ledger.exporter_batch)
--   e:head(tenant, dim)     -> { seq, b3 = hex } | nil | nil, err
--   e:accept_loss{ tenant, dimension, through_seq, link_b3, reason, now_s } -> { from, to }
--   e:close()
--
-- A put, in order (LED-R-8):
--  1. the stream's head h (get_stream; none: seq 0, 32 zero bytes) decides as the export
--     contract says: seq <= h.seq: dup when a committed transfer holds this slice's intent
--     (tenant|dimension|seq|b3), else conflict; seq > h.seq + 1: gap; prev_b3 ~= h.b3:
--     conflict;
--  2. the period's usage so far: the used_after of the previous slice's transfer (its
--     intent is tenant|dimension|seq-1|prev_b3) when it is of the same period, else 0;
--  3. the tenant's accounts exist (created on first use: wallet no_overdraft, receivable
--     and usage uncapped); a frozen or closed wallet answers nil, err before the commit
--     (a refusal stored under the slice's intent would stop the stream for good);
--  4. led:commit(usage.request(...)); a stored outcome is returned for a replay;
--  5. a usage.shortfall event when the wallet did not cover the charge;
--  6. advance_stream(seq, b3 from h): 1 -> ok; 0 -> re-read: already there -> dup, else
--     nil, err (another writer moved it: the runtime retries and then sees dup or conflict).
-- A crash between 4 and 6 leaves the transfer committed and the head behind: the re-sent
-- slice finds its committed intent (the engine returns the first outcome) and the head
-- moves then. Nothing is ever charged twice: the intent is unique.
--
-- Accepted losses (docs/EXPORT.md §2): one `usage.loss` event holding the loss record of the
-- range (ron.accounting.export.loss, the record of its last seq), then the head moves to
-- through_seq with link_b3. `ron-accounting ledger verify` lists them.
--
-- Capability: `blocking` is the store's (a synchronous SQLite store blocks the calling
-- thread: the runtime then refuses it on the loop; open it with offload = true there).
local L = require("ron.ledger.ledger")
local chain = require("ron.accounting.export.chain")
local exporters = require("ron.accounting.export.exporters")
local ledger = require("ron.ledger")
local loss = require("ron.accounting.export.loss")
local rate = require("ron.ledger.rate")
local store_mod = require("ron.ledger.store")
local task = require("ron.base.task")
local usage = require("ron.ledger.usage")
local xbatch = require("ron.ledger.exporter_batch")
local xlease = require("ron.ledger.exporter_lease")

local type, error, tostring, setmetatable, pcall, format =
      type, error, tostring, setmetatable, pcall, string.format

local _M = { LOSS_EVENT = "usage.loss", SHORTFALL_EVENT = xbatch.SHORTFALL_EVENT }

local ZERO32 = usage.ZERO32
local key, ACKED = xbatch.key, xbatch.ACKED
local MAX_CACHE = 100000 -- streams and tenants remembered (then forgotten all at once)

local E = {}
E.__index = E
-- the batch path's methods (ron.ledger.exporter_batch); a name both define is a bug
for name, f in pairs(xbatch.methods) do
    assert(E[name] == nil, name)
    E[name] = f
end

local OPTS = { store = true, card = true, book = true, node = true, engine = true,
               clock = true, accounts = true, parallel = true, lane_min = true, audit = true,
               lease = true } -- lease: the node's lease (ron.ledger.exporter_lease)

-- new(opts) -> exporter | nil, err. No I/O: the store is opened and the book, the system
-- accounts and pending sagas are dealt with on the first put/head (a task, when the store
-- is offloaded).
function _M.new(opts)
    if type(opts) ~= "table" then error("ron.ledger.exporter.new: expects an options table", 2) end
    for k in pairs(opts) do
        if not OPTS[k] and k ~= "module" then
            return nil, format("ron.ledger.exporter.new: unknown option %q", tostring(k))
        end
    end
    local card = opts.card
    if type(card) == "string" then
        local err
        card, err = rate.load(card)
        if not card then return nil, err end
    elseif type(card) ~= "table" or type(card.rate) ~= "function" then
        return nil, "ron.ledger.exporter.new: card must be a rate card file or a card"
    end
    if type(opts.store) ~= "table" then
        return nil, "ron.ledger.exporter.new: store must be { backend = ..., ... } or a store"
    end
    for _, k in ipairs { "parallel", "lane_min" } do
        local v = opts[k]
        if v ~= nil and (type(v) ~= "number" or v % 1 ~= 0 or v < 1 or v > 65536) then
            return nil, format("ron.ledger.exporter.new: %s must be an integer in 1..65536, got %s",
                               k, tostring(v))
        end
    end
    local lok, lerr = xlease.check(opts.lease, "lease")
    if not lok then return nil, "ron.ledger.exporter.new: " .. lerr end
    local self = setmetatable({
        store_opts = opts.store, card = card, book = opts.book or "main",
        lease_opts = opts.lease,
        node = opts.node or "node1", clock = opts.clock, led = opts.engine,
        parallel = opts.parallel, -- put_many's lanes at once on PostgreSQL (default 4)
        lane_min = opts.lane_min or 128, -- slices a lane gets at least (LED-66)
        -- fn(kind, attrs): a "ledger" record per committed transfer, adapted once
        audit_hook = opts.audit and L.audit_hook(opts.audit),
        accounts = opts.accounts or usage.account,
        streams = {}, nstreams = 0, tenants = {}, ntenants = 0,
        counts = { puts = 0, ok = 0, dup = 0, conflict = 0, gap = 0, fail = 0, shortfalls = 0 },
    }, E)
    if type(opts.store.get_stream) == "function" then self.store = opts.store end
    local so = self.store or opts.store
    self.blocking = so.blocking == true
        or (not self.store and so.backend == "sqlite" and not so.offload) or nil
    return self
end

-- The daemon hands its audit trail over once it runs (ron.node): fn(kind, attrs).
function E:set_audit(fn)
    self.audit_hook = L.audit_hook(fn)
end

-- Carries an audit checkpoint { origin, size, root, note } in the book's event feed
-- (ron.ledger.ledger:attest; the daemon's audit_attest task, docs/AUDIT.md
-- "Cross-attestation") -> { event_seq, replayed } | nil, err, code.
function E:attest(cp)
    local led, err = self:engine()
    if not led then return nil, err end
    return led:attest(cp)
end

-- The engine once the exporter is ready (the daemon's ledger feed task reads its events).
function E:engine()
    local ok, err = self:ready()
    if not ok then return nil, err end
    return self.led
end

-- The store, the engine, the book and its system accounts: once.
function E:ready()
    if self.is_ready then return true end
    -- One starter: the runtime's workers (one task per stream) all put at once, and two
    -- recover() runs of one engine must not drive the same saga. The others fail locally
    -- (retried with backoff) until the first is done.
    if self.readying then return nil, "LedgerError: the ledger is starting (recovering)" end
    self.readying = true
    local done, ok, err = pcall(self._start, self)
    self.readying = nil
    if not done then return nil, "LedgerError: " .. tostring(ok) end
    return ok, err
end

function E:_start()
    if not self.store then
        local so = self.store_opts
        if so.backend == "postgres" and so.node == nil and so.db == nil then
            -- LED-65: the store's connections carry the engine's node, so recover() can
            -- fence what a dead process of this node still runs on the server
            local c = {}
            for k, v in pairs(so) do c[k] = v end
            c.node = self.node
            so = c
        end
        local s, err = store_mod.open(so)
        if not s then return nil, "LedgerError: " .. tostring(err) end
        self.store = s
    end
    if not self.led then
        -- flush = false: put/put_many flush once before they answer (wip/perf, LED-50)
        -- LED-58: the book's revenue and usage source are credited / debited by every
        -- rated slice; their history would be the whole feed again (2 of a slice's ~13
        -- rows), so the engine does not list transfers under them (the tenants' accounts
        -- keep theirs)
        self.led = L.new { store = self.store, book = self.book, node = self.node,
                           clock = self.clock, flush = false,
                           unindexed = { [self.accounts("revenue")] = true,
                                         [self.accounts("usage_source")] = true },
                           -- set_audit may come later: the hook reads self.audit_hook
                           audit = function(r)
                               if self.audit_hook then self.audit_hook(r) end
                           end }
    end
    if self.lease_opts and not self.led.lease then
        local lok, lerr = xlease.start(self) -- before recover: under this process's epoch
        if not lok then return nil, lerr end
    end
    local ok, err = self.led:recover()
    if ok == nil and err then return nil, err end
    local n
    n, err = self.store:create_book(self.book, "created by ron.ledger.exporter")
    if not n then return nil, err end
    for _, kind in ipairs { "revenue", "usage_source" } do
        ok, err = self:ensure_account(self.accounts(kind), "uncapped")
        if not ok then return nil, err end
    end
    self.is_ready = true
    return true
end

-- Through the engine even when the account exists (once per tenant per process:
-- tenant_accounts remembers): create_account is idempotent and appends the version's event
-- when a crash left the row without it (LED-68).
function E:ensure_account(id, policy)
    local r, cerr = self.led:create_account { id = id, policy = policy }
    if r then return r end
    local a, err = self.store:get_account(id) -- created with other settings: as it is
    if a then return a end
    return nil, cerr or err
end

-- The tenant's wallet (checked open), receivable and usage accounts.
function E:tenant_accounts(tenant16)
    local t = self.tenants[tenant16]
    if not t then
        t = {}
        for _, k in ipairs { { "wallet", "no_overdraft" }, { "receivable", "uncapped" },
                             { "usage", "uncapped" } } do
            local a, err = self:ensure_account(self.accounts(k[1], tenant16), k[2])
            if not a then return nil, err end
        end
        if self.ntenants >= MAX_CACHE then self.tenants, self.ntenants = {}, 0 end
        self.tenants[tenant16] = t
        self.ntenants = self.ntenants + 1
    end
    -- The wallet's status may change (freeze): read it each time, it is one row.
    local w, err = self.store:get_account(self.accounts("wallet", tenant16))
    if not w then return nil, err or "LedgerError: the wallet account vanished" end
    if w.status ~= "open" then
        return nil, format("Frozen: the wallet of tenant %s is %s: its usage waits",
                           usage.tenant_text(tenant16), tostring(w.status))
    end
    return t
end


-- The units of the slice's period rated before it (decimal string).
-- (k: the stream's key when the caller has it made)
function E:period_used(info, tenant16, k)
    if info.seq <= 1 then return "0" end
    local period = self.card:period_of(info.window_start_s)
    local c = self.streams[k or key(tenant16, info.dimension)]
    if c and c.seq == info.seq - 1 and c.b3 == info.prev_b3 then
        return c.period == period and c.used_after or "0"
    end
    local o, err = self.store:get_intent(usage.intent(tenant16, info.dimension, info.seq - 1,
                                                      info.prev_b3))
    if err then return nil, err end
    if not o or o.status ~= "committed" then return "0" end -- an accepted loss: restart
    local rec
    rec, err = self.store:get_transfer(o.transfer_id)
    if not rec then return nil, err or "LedgerError: a committed intent without its transfer" end
    local m = usage.decode_metadata(rec.metadata)
    if not m or m.period ~= period or m.dimension ~= info.dimension then return "0" end
    return m.used_after
end

local function remember(self, tenant16, info, period, used_after, k)
    if self.nstreams >= MAX_CACHE then self.streams, self.nstreams = {}, 0 end
    k = k or key(tenant16, info.dimension)
    if not self.streams[k] then self.nstreams = self.nstreams + 1 end
    self.streams[k] = { seq = info.seq, b3 = info.b3, period = period, used_after = used_after }
end
E._remember = remember

-- The part of the charge the wallet did not cover: the receivable's outputs in the
-- transfer (negative amounts), from the stored canonical bytes.
function E:shortfall(transfer_id, req, t)
    if not req.movements[2] then return 0 end
    if not t then -- a replay: the stored transfer (a new commit hands its own over)
        local rec = self.store:get_transfer(transfer_id)
        if not rec or not rec.bytes then return 0 end
        t = ledger.decode_transfer(rec.bytes)
        if not t then return 0 end
    end
    local recv, cur, short = next(req.overdraft) and req.overdraft[req.movements[2].from],
                             req.movements[2].asset, 0
    for _, o in ipairs(t.outputs) do
        if o.account == recv and o.asset.code == cur.code and o.amount < 0 then
            short = short - o.amount
        end
    end
    return short
end

local function count(self, status)
    self.counts[status] = (self.counts[status] or 0) + 1
end
E._count = count

local function fail(self, err)
    count(self, "fail")
    return nil, err
end

-- ---- wip/perf (LED-50): durable before acknowledged, one flush per call ----------------
-- With the store's durability "ack" the primitives of a put commit without a sync; the
-- answer ok or dup is given only after store:flush() (one sync for all of them: the log is
-- ordered). put_many is group commit: the slices of different tenants are put at once
-- (tasks over the PostgreSQL pool; one tenant's slices in order, they share its wallet),
-- then ONE flush covers the batch. A failed flush turns every ok/dup of the call into a
-- failure: the runtime re-sends, and the re-sent slice finds its committed intent (dup).

function E:_durable(results)
    local store = self.store
    if not store or type(store.flush) ~= "function" then return results end
    local any = false
    for _, r in ipairs(results) do
        if ACKED[r[1]] then any = true break end
    end
    if not any then return results end
    local n, err = store:flush()
    if n then return results end
    for i, r in ipairs(results) do
        if ACKED[r[1]] then
            count(self, "fail")
            results[i] = { nil, "LedgerError: not durable: " .. tostring(err) }
        end
    end
    return results
end

function E:put(s)
    if type(s) ~= "table" or type(s.id) ~= "table" then
        error("ron.ledger.exporter: put expects a slice", 2)
    end
    local r = self:_durable { { self:_put(s) } }
    return r[1][1], r[1][2]
end

function E:put_many(slices)
    if type(slices) ~= "table" then error("ron.ledger.exporter: put_many expects a list", 2) end
    for _, s in ipairs(slices) do
        if type(s) ~= "table" or type(s.id) ~= "table" then
            error("ron.ledger.exporter: put_many expects slices", 2)
        end
    end
    local results = {}
    local ok, err = self:ready()
    if not ok then
        for i = 1, #slices do results[i] = { fail(self, err) } end
        return results
    end
    -- lanes: tenants spread over at most `width` lanes, each tenant's slices in one lane in
    -- the batch's order (a tenant's slices share its wallet); each lane is ONE batch through
    -- the engine's commit_many (LED-55), the lanes at once over the PostgreSQL pool
    local par = self.store.backend == "postgres" and (self.parallel or 4) or 1
    if par <= 1 then return self:_put_lanes(slices, results, 1) end
    -- Lanes of at least lane_min slices (LED-66): a lane's store calls and the server's
    -- per-statement work are shared by its slices, and a lane of one slice per tenant shares
    -- nothing else. 256 streams (one call of 256, one slice each) rated 3471-3821 slices/s
    -- in 4 lanes of 64 and 4097-4324 in 1 or 2 lanes (the server 103-120 us of CPU per
    -- slice instead of 154); 1024 streams keep 4 lanes of 256.
    local width = math.min(par, math.max(1, math.floor(#slices / self.lane_min)))
    -- One call's lanes at a time (LED-64): a second call (the runtime's put_parallel
    -- flushers, a daemon with more streams than put_batch) waits for the first instead of
    -- doubling the lanes on the pool: 2 calls of 1024 at once rated 1942 slices/s where one
    -- after the other rated 2902 (docs/LEDGER.md, "The daemon's shape"). The lanes are the
    -- concurrency; more of them only wait for connections and for the hot balance rows.
    if not self.gate then
        self.gate = task.channel(1, "ledger_put_many")
        self.gate:try_send(true)
    end
    -- (a spec reads put_many_waited: the calls that found another one running)
    if self.gate:depth() == 0 then self.put_many_waited = (self.put_many_waited or 0) + 1 end
    local tok, gerr = self.gate:recv()
    if not tok then
        for i = 1, #slices do results[i] = { fail(self, "Canceled: " .. tostring(gerr)) } end
        return results
    end
    local pok, r = pcall(self._put_lanes, self, slices, results, width)
    self.gate:try_send(true)
    if not pok then error(r, 0) end
    return r
end

function E:_put_lanes(slices, results, width)
    local lanes, lane_of, rr = {}, {}, 0
    for i, s in ipairs(slices) do
        local t = tostring(s.tenant)
        local lane = lane_of[t]
        if not lane then
            rr = rr + 1
            local w = (rr - 1) % width + 1
            lanes[w] = lanes[w] or {}
            lane = lanes[w]
            lane_of[t] = lane
        end
        lane[#lane + 1] = i
    end
    self.last_lanes = #lanes -- (a spec reads it)
    if #lanes <= 1 then
        if lanes[1] then self:_put_batch(slices, lanes[1], results) end
    else
        local hs = {}
        for w, lane in ipairs(lanes) do
            hs[w] = task.spawn("ledger_put_many", function()
                self:_put_batch(slices, lane, results)
            end)
        end
        for _, h in ipairs(hs) do
            local jok, jerr = h:join()
            if not jok then
                error("ron.ledger.exporter: put_many lane failed: " .. tostring(jerr), 0)
            end
        end
    end
    for i = 1, #slices do
        if not results[i] then results[i] = { fail(self, "LedgerError: not put") } end
    end
    return self:_durable(results)
end

-- One slice, without the flush (put and put_many flush once).
function E:_put(s)
    self.counts.puts = self.counts.puts + 1
    local ok, err = self:ready()
    if not ok then return fail(self, err) end
    local store = self.store
    local info = usage.from_slice(s)
    local tenant16 = usage.tenant_raw(s.tenant)
    local h
    h, err = store:get_stream(tenant16, s.dimension)
    if err then return fail(self, err) end
    local hseq, hb3 = h and h.seq or 0, h and h.b3 or ZERO32
    local seq = info.seq
    local verdict, detail = chain.admit(hseq, hb3, seq, info.prev_b3, info.b3)
    if verdict == "below" then -- dup when a committed transfer holds the slice's intent
        local o
        o, err = store:get_intent(usage.intent(tenant16, s.dimension, seq, info.b3))
        if err then return fail(self, err) end
        verdict = o and o.status == "committed" and "dup" or "conflict"
        detail = format("%s/%s seq %d: another slice holds this seq (head %d)", s.tenant,
                        s.dimension, seq, hseq)
    end
    if verdict == "dup" then
        count(self, "dup")
        return "dup"
    elseif verdict ~= "ok" then
        count(self, verdict)
        return verdict, detail
    end
    local used
    used, err = self:period_used(info, tenant16)
    if not used then return fail(self, err) end
    ok, err = self:tenant_accounts(tenant16)
    if not ok then return fail(self, err) end
    local req, rated = usage.request(info, self.card, used, self.accounts)
    if not req then return fail(self, rated) end
    local r, cerr = self.led:commit(req)
    if not r then return fail(self, "LedgerError: " .. tostring(cerr)) end
    local short = self:shortfall(r.transfer_id, req)
    if short ~= 0 then
        local n, eerr = store:append_event(self.book, r.transfer_id, _M.SHORTFALL_EVENT,
            format("tenant=%s amount=%s asset=%s", usage.tenant_text(tenant16), tostring(short),
                   rated.asset.code))
        if not n then return fail(self, eerr) end
        if n == 1 then self.counts.shortfalls = self.counts.shortfalls + 1 end
    end
    local n, aerr = store:advance_stream(tenant16, s.dimension, seq, info.b3,
                                         hseq > 0 and hseq or nil, hseq > 0 and hb3 or nil)
    if not n then return fail(self, aerr) end
    remember(self, tenant16, info, rated.period, rated.used_after)
    if n == 1 then
        local status = r.replayed and "dup" or "ok"
        count(self, status)
        return status
    end
    local h2
    h2, err = store:get_stream(tenant16, s.dimension)
    if h2 and h2.seq == seq and h2.b3 == info.b3 then
        count(self, "dup")
        return "dup"
    end
    return fail(self, err or "LedgerError: the stream's head moved meanwhile")
end

function E:head(tenant, dimension)
    local ok, err = self:ready()
    if not ok then return nil, err end
    local h
    h, err = self.store:get_stream(usage.tenant_raw(tenant), dimension)
    if not h then return nil, err end
    if h.seq == 0 then return nil end
    return { seq = h.seq, b3 = usage.hex(h.b3) }
end

function E:accept_loss(o)
    local reason, err = loss.check(o)
    if not reason then return nil, err end
    local ok
    ok, err = self:ready()
    if not ok then return nil, err end
    local tenant16 = usage.tenant_raw(o.tenant)
    local h
    h, err = self.store:get_stream(tenant16, o.dimension)
    if err then return nil, err end
    local hseq, hb3 = h and h.seq or 0, h and h.b3 or ZERO32
    local recs
    recs, err = loss.records(o, hseq, hb3)
    if not recs then return nil, err end
    local last = recs[#recs]
    local id = usage.b3(last.bytes)
    local n
    for _ = 1, 8 do -- 0: the event exists, or a racing insert took the seq
        n, err = self.store:append_event(self.book, id, _M.LOSS_EVENT, last.bytes)
        if not n then return nil, err end
        if n == 1 or self.store:get_event(self.book, id, _M.LOSS_EVENT) then break end
    end
    n, err = self.store:advance_stream(tenant16, o.dimension, last.seq, last.link,
                                       hseq > 0 and hseq or nil, hseq > 0 and hb3 or nil)
    if not n then return nil, err end
    if n == 0 then return nil, "LedgerError: the stream's head moved meanwhile: try again" end
    self.streams[key(tenant16, o.dimension)] = nil
    return { from = recs[1].seq, to = last.seq }
end

E.stats = exporters.stats

function E:close()
    if self.store and not self.closed and type(self.store.close) == "function"
       and self.store_opts ~= self.store then
        pcall(self.store.close, self.store)
    end
    self.closed = true
end

return _M
