-- ron.ledger.ledger: the engine (issue 15, docs/LEDGER.md "The commit path"). Accounts,
-- commit, reverse, recover, balances, history and the event feed over any Store
-- (lua/ron/ledger/store/*: the same primitives with the same counts on every backend).
--
--   local L = require "ron.ledger.ledger"
--   local led = L.new { store = s, book = "main", node = "n1", clock = fn_ms?, audit = fn?,
--                       flush = false? }   -- false: the caller calls led:flush() (LED-50)
--   led:recover()
--   led:create_account { id = 16B, policy = "no_overdraft"|"capped"|"uncapped", floor = n }
--   local r, err, code = led:commit { intent =, body_hash =?, movements =, metadata =?,
--                                     overdraft = { [from] = receivable }? }
--   local results = led:commit_many { req, req, ... }  -- { { r, err, code } per request }:
--                   the answers of committing them one by one, round trips per batch
--                   (the batch path below, LED-51..LED-56)
--
-- The commit path is one linear function driven by a persisted phase (LED-26): nothing is
-- written before the saga's write-ahead record, nothing is decided from a count alone (a
-- count that is not the full one is read back, LED-28), every end-state is verified, and a
-- saga past its point of no return is only ever rolled forward (LED-31). A store error that
-- outlives the retries is "Unavailable" (a retry class, LED-32), never a rejection.
--
-- The intent key is the commit's second identity (LED-27): its outcome, success or
-- deterministic rejection, is stored once and returned to every replay; a replay with
-- another body is a Conflict. An intent is claimed (a row under a key no caller can send:
-- 256 bytes of 0xff then the intent) before anything is reserved, so two sagas for one
-- intent can never both pass their point of no return.
local A = require "ron.ledger.attest"
local B = require "ron.ledger.bigint"
local codec = require "ron.ledger.codec"
local events = require "ron.ledger.events"
local ledger = require "ron.ledger"
local lease_mod = require "ron.ledger.lease"
local phases = require "ron.ledger.phases"
local task = require "ron.base.task"
local view = require "ron.ledger.view"

local error = error
local format = string.format
local pcall = pcall
local sort = table.sort
local type = type

local _M = {}

-- The engine's own codes (the core's are ledger.ERR, -1..-20).
local ERR = {
    Conflict = -101,       -- the intent was used with another body
    Unavailable = -102,    -- retry class: the store failed or stayed busy; nothing is decided
    InvalidRequest = -103, -- the request is malformed (never stored: not an outcome)
    NotFound = -104,       -- reverse: no such transfer
    Bug = -105,            -- an end-state that cannot happen did (double spend, lost row)
}
for name, code in pairs(ledger.ERR) do ERR[name] = code end
_M.ERR = ERR
local NAME = {}
for name, code in pairs(ERR) do NAME[code] = name end
_M.NAME = NAME

-- Codes a caller retries: never stored under an intent, never InsufficientFunds (LED-32).
_M.RETRY = { [ERR.Unavailable] = true }

-- An Unavailable whose intent another saga is committing right now (a caller that answers
-- "in flight, retry later", like the wallet's 409, asks is_in_flight instead of reading
-- the message itself).
local IN_FLIGHT = "intent in flight"
function _M.is_in_flight(err, code)
    return code == ERR.Unavailable and type(err) == "string"
        and err:find(IN_FLIGHT, 1, true) ~= nil
end

-- Contention (issue 29 item 3): an Unavailable that is a race with other sagas (postings or
-- heads taken, an intent in flight), not the store failing. A caller's circuit breaker,
-- which is for the ledger being unreachable or failing, does not count it. HELD: every
-- attempt of the drive found the payer's postings reserved by the same other saga (a
-- saga of a stopped or dead node, until it is recovered: ron.ledger.lease), where a race
-- with live sagas meets a different holder each time.
local CHANGING, HELD = "kept changing", "postings held by saga "
function _M.is_contention(err, code)
    if code ~= ERR.Unavailable or type(err) ~= "string" then return false end
    return err:find(CHANGING, 1, true) ~= nil or err:find(HELD, 1, true) ~= nil
        or err:find(IN_FLIGHT, 1, true) ~= nil or err:find("keeps changing", 1, true) ~= nil
end
function _M.is_held(err, code)
    return code == ERR.Unavailable and type(err) == "string"
        and err:find(HELD, 1, true) ~= nil
end

-- Validation codes that mean "the state moved under us": re-resolve, do not store.
local RACE = {
    [ERR.AccountVersionMismatch] = true,
    [ERR.UnknownPosting] = true,
    [ERR.PostingSpent] = true,
}

local MAX_INPUTS = 256
local SELECT_LIMIT, FIRST_PAGE = view.SELECT_LIMIT, view.FIRST_PAGE
local CLAIM_PREFIX = phases.CLAIM_PREFIX
local EVENT_KIND = phases.EVENT_KIND

local Ledger = {}
Ledger.__index = Ledger

local function fail(code, msg)
    return nil, NAME[code] .. ": " .. msg, code
end

local function hex(s) return ledger.hex(s) end

local function asset_key(a) return a.code .. "\0" .. a.scale end

-- The wall clock in ms, a transfer's created_at_ms: luv's gettimeofday (inside the host);
-- os.time()'s whole seconds only where luv is absent (plain LuaJIT). os.time() alone gave
-- every transfer of a second the same time, a multiple of 1000 (issue 24).
local luv_ok, luv = pcall(require, "luv")
local function now_ms()
    if luv_ok then
        local s, us = luv.gettimeofday()
        return s * 1000 + math.floor(us / 1000)
    end
    return os.time() * 1000
end

local function random_nonce()
    local f = io.open("/dev/urandom", "rb")
    local s = f and f:read(8) or tostring(os.time()) .. tostring({})
    if f then f:close() end
    return hex(s)
end

function _M.new(opts)
    assert(type(opts) == "table" and opts.store, "ron.ledger.ledger: opts.store required")
    local self = setmetatable({
        store = opts.store,
        book = opts.book or "main",
        node = opts.node or "n1",
        clock = opts.clock or now_ms,
        audit = opts.audit,
        check = opts.check, -- test hook: called with every last-step validation's inputs
        pause = opts.pause or function() end, -- between waits (a head held by another saga)
        nonce = opts.nonce or random_nonce(),
        max_attempts = opts.max_attempts or 8,
        head_waits = opts.head_waits or 64,
        prim_retries = opts.prim_retries or 3,
        -- wip/perf (LED-50): flush = false when the caller flushes (group commit)
        flush_on_ack = opts.flush ~= false,
        -- LED-58: accounts whose history does not list transfers ({ [id16] = true }: a
        -- book's system accounts that every rated slice touches; the feed lists them all)
        unindexed = opts.unindexed or {},
        -- LED-57: a batch's independent writes at once (_together); needs the host's tasks
        overlap = opts.overlap == nil and opts.store.backend == "postgres" or opts.overlap == true,
        -- LED-63: the batch plan's accounts from a bounded cache (0: none); 16384: a
        -- tenant has 3 accounts, 4096 thrashed at 2048 tenants
        account_cache = opts.account_cache or 16384,
        acache = {}, acache_n = 0,
        seq = 0,
        inflight = {},
        stats = { commits = 0, rejections = 0, replays = 0, resolves = 0, head_waits = 0,
                  recovered = 0 },
    }, Ledger)
    return self
end

-- ---- store calls ----

-- One primitive, retried while the store says "retry" or "io" (each primitive is idempotent
-- or its effect is read back by the caller). A failure that outlives the retries aborts the
-- drive with a table error that _guard turns into Unavailable (LED-32).
function Ledger:_p(name, ...)
    -- LED-71: a leased engine's write runs with its lease's guard
    if self.lease and lease_mod.WRITES[name] then return phases.write(self, name, ...) end
    local s = self.store
    local err, class
    for attempt = 1, self.prim_retries + 1 do
        local a, b, c = s[name](s, ...)
        if a ~= nil then return a, b, c end
        err, class = b, c
        if class == "bug" then break end
        if attempt <= self.prim_retries then self.pause(attempt) end
    end
    error({ ledger_store_failure = true, name = name, err = err, class = class }, 0)
end

local function store_failure(e)
    return type(e) == "table" and e.ledger_store_failure
end

-- Reads may legitimately return nil (no row): they do not go through _p's nil check.
function Ledger:_read(name, ...)
    local s = self.store
    local err, class
    for attempt = 1, self.prim_retries + 1 do
        local a, b, c = s[name](s, ...)
        if a ~= nil or b == nil then return a end
        err, class = b, c
        if class == "bug" then break end
        if attempt <= self.prim_retries then self.pause(attempt) end
    end
    error({ ledger_store_failure = true, name = name, err = err, class = class }, 0)
end

-- Runs fn; a store failure becomes Unavailable (or Bug); anything else (a simulated crash,
-- a programming error) propagates untouched.
local function guard(on_failure, fn, ...)
    local r = { pcall(fn, ...) }
    if r[1] then return unpack(r, 2, table.maxn(r)) end
    local e = r[2]
    if store_failure(e) then
        if on_failure then on_failure() end
        local code = e.class == "bug" and ERR.Bug or ERR.Unavailable
        return fail(code, format("store %s failed: %s", e.name, tostring(e.err)))
    end
    error(e, 0)
end

-- ---- accounts (LED-8, LED-9: append-only versions) ----

function Ledger:create_account(a)
    if type(a) ~= "table" or type(a.id) ~= "string" or #a.id ~= 16 then
        return fail(ERR.InvalidRequest, "account id must be 16 bytes")
    end
    local policy = a.policy or "no_overdraft"
    if policy ~= "no_overdraft" and policy ~= "capped" and policy ~= "uncapped" then
        return fail(ERR.InvalidRequest, "unknown policy " .. tostring(policy))
    end
    local floor = policy == "capped" and (a.floor or 0) or 0
    if floor > 0 then return fail(ERR.InvalidRequest, "a floor is <= 0") end
    local acct = { id = a.id, version = 1, policy = policy, floor = floor,
                   status = a.status or "open", book = self.book }
    acct.bytes = ledger.encode_account(acct)
    return guard(nil, function()
        -- the row and its event (LED-68): one phase (LED-67)
        if phases.account(self, "create_account", acct) then return acct end
        local cur = self:_read("get_account", a.id)
        if cur and cur.version == 1 and cur.policy == policy and cur.floor == floor then
            -- (ours, its reply lost; or a row an older binary wrote: its event then)
            self:_account_event(cur)
            return cur
        end
        if cur and (cur.policy ~= policy or cur.floor ~= floor) then
            return fail(ERR.Conflict, "account " .. hex(a.id) .. " exists with other settings")
        end
        return cur
    end)
end

function Ledger:_set_status(id, status)
    self:_forget_account(id)
    return guard(nil, function()
        for _ = 1, self.max_attempts do
            local cur = self:_read("get_account", id)
            if not cur then return fail(ERR.NotFound, "no account " .. hex(id)) end
            if cur.status == status then
                self:_account_event(cur) -- (as create_account's: ours, or an older row)
                return cur
            end
            if cur.status == "closed" then
                return fail(ERR.AccountClosed, "account " .. hex(id) .. " is closed for good")
            end
            local nxt = { id = id, version = cur.version + 1, policy = cur.policy,
                          floor = cur.floor, status = status, book = cur.book }
            nxt.bytes = ledger.encode_account(nxt)
            if phases.account(self, "append_account_version", nxt) then return nxt end
            -- missed: another version landed first (or ours, reply lost): read and decide
            -- again.
        end
        return fail(ERR.Unavailable, "account " .. hex(id) .. " keeps changing")
    end)
end

-- Appends (book, id, kind, data) once (LED-68): 0 = it exists, or a racing insert took the
-- seq (read back, again). -> the event; a store that keeps refusing aborts the drive. (The
-- engine writes a row and its event in one phase; this is for a row found without one.)
function Ledger:_append_once(id, kind, data)
    for _ = 1, self.max_attempts * 4 do
        self:_p("append_event", self.book, id, kind, data)
        local ev = self:_read("get_event", self.book, id, kind)
        if ev then return ev end
        self.pause(1)
    end
    error({ ledger_store_failure = true, name = "append_event",
            err = kind .. " event not appended", class = "io" }, 0)
end

-- An account version is an event of the feed (LED-68): its data the canonical bytes, so a
-- version row the feed does not name, or other bytes than it names, is found by verify.
function Ledger:_account_event(acct)
    local bytes = acct.bytes or ledger.encode_account(acct)
    return self:_append_once(events.account_id(bytes), events.ACCOUNT, bytes)
end

-- A stored rejection is an event of the feed (LED-68): deleting the intent's row, or
-- changing its code, message or body hash, is found by verify. The engine stores both in
-- one phase (phases.reject); this appends the event of a rejection stored without one (an
-- older binary's), before its saga's record goes, so a crash in between leaves it to
-- recover() (_resume).
function Ledger:_rejection_event(req, stored)
    if stored.status ~= "rejected" then return end
    return self:_append_once(phases.rejection_event(req, stored))
end

function Ledger:freeze(id) return self:_set_status(id, "frozen") end
function Ledger:unfreeze(id) return self:_set_status(id, "open") end
function Ledger:close(id) return self:_set_status(id, "closed") end

function Ledger:account(id)
    return guard(nil, function() return self:_read("get_account", id) end)
end

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

-- ---- requests ----

local function check_asset(a)
    return type(a) == "table" and type(a.code) == "string" and type(a.scale) == "number"
end

local function check_amount(v)
    if type(v) == "number" then return v > 0 and v % 1 == 0 and v <= 2 ^ 53 end
    return type(v) == "cdata" and v > 0
end

local function check_request(req)
    if type(req) ~= "table" then return "request must be a table" end
    local k = req.intent
    if type(k) ~= "string" or #k < 1 or #k > 255 then return "intent must be 1..255 bytes" end
    if req.body_hash ~= nil and (type(req.body_hash) ~= "string" or #req.body_hash ~= 32) then
        return "body_hash must be 32 bytes"
    end
    if req.metadata ~= nil and type(req.metadata) ~= "string" then
        return "metadata must be a string"
    end
    if req.keys ~= nil then
        if type(req.keys) ~= "table" or #req.keys > 4 then return "keys must be a list of <= 4" end
        for _, key in ipairs(req.keys) do
            if type(key) ~= "string" or #key < 1 or #key > 512 then
                return "a key is 1..512 bytes"
            end
        end
    end
    if req.kind == "reverse" then return nil end
    if type(req.movements) ~= "table" or #req.movements == 0 then
        return "movements must be a non-empty array"
    end
    for i, m in ipairs(req.movements) do
        if type(m) ~= "table" or type(m.from) ~= "string" or #m.from ~= 16 or
            type(m.to) ~= "string" or #m.to ~= 16 then
            return format("movements[%d]: from and to must be 16-byte account ids", i)
        end
        if not check_asset(m.asset) then return format("movements[%d]: bad asset", i) end
        if not check_amount(m.amount) then
            return format("movements[%d]: amount must be a positive integer", i)
        end
    end
    if req.overdraft ~= nil then
        if type(req.overdraft) ~= "table" then return "overdraft must be a table" end
        for from, to in pairs(req.overdraft) do
            if type(from) ~= "string" or #from ~= 16 or type(to) ~= "string" or #to ~= 16 then
                return "overdraft maps 16-byte account ids to 16-byte account ids"
            end
        end
    end
end

-- The part of a request its body hash covers (when the caller gives none).
local function body_of(req)
    return codec.encode { kind = req.kind, movements = req.movements, metadata = req.metadata,
                          overdraft = req.overdraft, target = req.target }
end

-- The body hash the engine stores for a request without one (kind "commit" or "reverse").
function _M.body_hash(kind, req)
    if req.body_hash then return req.body_hash end
    if kind == "reverse" then
        return codec.sha256(body_of { kind = "reverse", metadata = req.metadata or "",
                                      target = req.target })
    end
    return codec.sha256(body_of { kind = "commit", movements = req.movements,
                                  metadata = req.metadata or "", overdraft = req.overdraft })
end

function Ledger:commit(req)
    local bad = check_request(req)
    if bad then return fail(ERR.InvalidRequest, bad) end
    local r = { kind = "commit", intent = req.intent, movements = req.movements,
                metadata = req.metadata or "", overdraft = req.overdraft, keys = req.keys }
    r.body_hash = req.body_hash or codec.sha256(body_of(r))
    return self:_acked(self:_run(r))
end

-- A reversal: a new transfer that consumes what transfer_id created and recreates what it
-- consumed, through the same path (LED-34).
function Ledger:reverse(transfer_id, intent, opts)
    opts = opts or {}
    if type(transfer_id) ~= "string" or #transfer_id ~= 32 then
        return fail(ERR.InvalidRequest, "transfer id must be 32 bytes")
    end
    local r = { kind = "reverse", intent = intent, target = transfer_id,
                metadata = opts.metadata or "", body_hash = opts.body_hash }
    local bad = check_request(r)
    if bad then return fail(ERR.InvalidRequest, bad) end
    r.body_hash = r.body_hash or codec.sha256(body_of(r))
    return self:_acked(self:_run(r))
end

-- ---- outcomes ----

-- wip/perf (LED-50): an outcome is durable before it is returned. With the store's
-- durability "ack" its primitives commit without a sync; one flush() here makes all of them
-- (and a replayed outcome read back) durable. A stored rejection is flushed too; a request
-- refused before any write (InvalidRequest) and Unavailable (nothing acknowledged) are not.
-- A failed flush answers Unavailable: the caller's retry finds the intent and flushes again.
-- new { flush = false }: the caller flushes (the exporter's group commit).
function Ledger:flush()
    if not self.store.flush then return 0 end
    return guard(nil, function() return self:_p("flush") end)
end

-- durable (an internal 4th value): the outcome's last phase flushed in the same call
-- (LED-67), nothing left to flush.
function Ledger:_acked(r, err, code, durable)
    if durable then return r, err, code end
    if not self.flush_on_ack or (r == nil and (code == ERR.InvalidRequest
                                               or code == ERR.Unavailable)) then
        return r, err, code
    end
    local n, ferr = self:flush()
    if not n then return fail(ERR.Unavailable, "not durable: " .. tostring(ferr)) end
    return r, err, code
end

function Ledger:_outcome(req, stored)
    if stored.body_hash and req.body_hash and stored.body_hash ~= req.body_hash then
        return fail(ERR.Conflict, "intent already used with another body")
    end
    self.stats.replays = self.stats.replays + 1
    if stored.status == "committed" then
        local ev = self:_read("get_event", self.book, stored.transfer_id, EVENT_KIND)
        return { transfer_id = stored.transfer_id, status = "committed",
                 event_seq = ev and ev.seq, replayed = true }
    end
    return nil, stored.message, stored.code
end

function Ledger:_new_sid()
    self.seq = self.seq + 1
    return format("%s:%s:%d", self.node, self.nonce, self.seq)
end

function Ledger:_run(req)
    -- (the prior outcome is read by the saga's open phase, with its claim: LED-67)
    return guard(nil, self._drive, self, self:_new_sid(), req)
end

-- ---- resolve (read only): request -> transfer, or a deterministic rejection ----

-- Returns t, info or nil, err, code (a rejection to store) or false, err, code (a race:
-- try again).
-- Where resolution reads from: a view (ron.ledger.view) of one read of the accounts, the
-- payers' postings and the balances, for the single path and a batch alike (LED-52), so a
-- batch picks exactly the postings one-by-one commits would.
-- (module-level helpers of _resolve_commit: no closure per request, see pairs_of)
local NONE = {}
local function net_pair(list, by_k, account, asset)
    local k = account .. asset_key(asset)
    local p = by_k[k]
    if not p then
        p = { account = account, asset = asset, net = 0 }
        by_k[k] = p
        list[#list + 1] = p
    end
    return p
end
local function want_id(ids, seen, id)
    if not seen[id] then
        seen[id] = true
        ids[#ids + 1] = id
    end
end
local function ref_less(a, b)
    if a.transfer_id ~= b.transfer_id then return a.transfer_id < b.transfer_id end
    return a.index < b.index
end

function Ledger:_resolve_commit(req, src)
    local pairs_, by_k = {}, {}
    for _, m in ipairs(req.movements) do
        local pf = net_pair(pairs_, by_k, m.from, m.asset)
        local a = ledger.amount_sub(pf.net, m.amount)
        if not a then return fail(ERR.AmountOverflow, "movement sums overflow") end
        pf.net = a
        local pt = net_pair(pairs_, by_k, m.to, m.asset)
        local c = ledger.amount_add(pt.net, m.amount)
        if not c then return fail(ERR.AmountOverflow, "movement sums overflow") end
        pt.net = c
    end
    local ids, seen = {}, {}
    for _, p in ipairs(pairs_) do want_id(ids, seen, p.account) end
    for from, to in pairs(req.overdraft or NONE) do
        want_id(ids, seen, from)
        want_id(ids, seen, to)
    end
    local accts = src:accounts(ids)
    for _, id in ipairs(ids) do
        if not accts[id] then return fail(ERR.UnknownAccount, "no account " .. hex(id)) end
    end
    local inputs, outputs, consumed = {}, {}, {}
    for _, p in ipairs(pairs_) do
        if p.net < 0 then
            local need = -p.net
            -- The largest few first: when they cover the need, greedy largest-first over
            -- all postings picks exactly these (the store orders as selection does, LED-10);
            -- only a short page is read again in full.
            local lim = FIRST_PAGE
            local list = src:page(p.account, p.asset, lim)
            local cap = MAX_INPUTS - #inputs
            local picks, sum, change, avail = ledger.select_postings(list, p.account, p.asset,
                                                                     need, cap)
            -- wip/perf: selection takes only positive postings; a full page ending in one
            -- <= 0 (largest first) means there are no more (an uncapped source or a
            -- receivable holds only negatives: re-reading 1024 of them per commit grew the
            -- cost with history, bench-ledger-rating-pg)
            if not picks and #list == FIRST_PAGE and list[FIRST_PAGE].amount > 0 then
                lim = SELECT_LIMIT
                list = src:page(p.account, p.asset, lim)
                picks, sum, change, avail = ledger.select_postings(list, p.account, p.asset,
                                                                   need, cap)
            end
            if picks then
                for _, i in ipairs(picks) do
                    inputs[#inputs + 1] = list[i].id
                    consumed[#consumed + 1] = list[i]
                end
                if change ~= 0 then
                    outputs[#outputs + 1] = { account = p.account, asset = p.asset,
                                              amount = change }
                end
            elseif change == ERR.InsufficientFunds then
                -- sum (4th value) is what the account has; the shortfall goes to the
                -- receivable the caller named, or onto the account itself when its policy
                -- lets it hold a negative posting (the floor is checked by validation).
                -- Postings other sagas hold are value in flight, not value missing: a short
                -- account with reservations on the pair is a race (retry), never a stored
                -- InsufficientFunds or an overdraft (LED-32).
                local holder = src:held(p.account, p.asset)
                if holder then
                    return false, "reservations in flight", ERR.Unavailable, holder
                end
                -- So are the outputs of a saga past the point of no return: between its
                -- inputs' deactivation and its outputs' insertion (a window a store stall
                -- holds open) the account shows neither the spent posting nor its change.
                if src:finalizing_to(p.account, p.asset) then
                    return false, "a finalizing transfer credits the account", ERR.Unavailable
                end
                -- The reads above are not one snapshot: a saga that finished (or gave its
                -- reservation back) between the first read and these checks left Active
                -- postings the first read could not see. Read them again last: value that
                -- was reserved, then finalizing, then Active is seen by one of the reads.
                -- (A batch's view is one read per batch: the same list, nothing to compare.)
                local again = src:page(p.account, p.asset, lim)
                local _, _, _, avail2 = ledger.select_postings(again, p.account, p.asset,
                                                               need, cap)
                if avail2 ~= avail then -- nil when they now cover the need
                    return false, "the account's postings changed meanwhile", ERR.Unavailable
                end
                local recv = req.overdraft and req.overdraft[p.account]
                if not recv and accts[p.account].policy == "no_overdraft" then
                    return fail(ERR.InsufficientFunds, format(
                        "account %s has %s of %s %s, needs %s", hex(p.account),
                        B.dec(avail), p.asset.code, tostring(p.asset.scale), B.dec(need)))
                end
                if avail > 0 then
                    local all, s2 = ledger.select_postings(list, p.account, p.asset, avail, cap)
                    if not all then
                        return fail(ERR.LimitExceeded, "too many postings to drain " ..
                                    hex(p.account))
                    end
                    assert(s2 == avail)
                    for _, i in ipairs(all) do
                        inputs[#inputs + 1] = list[i].id
                        consumed[#consumed + 1] = list[i]
                    end
                end
                outputs[#outputs + 1] = { account = recv or p.account, asset = p.asset,
                                          amount = -(need - avail) }
            else
                return nil, sum, change -- LimitExceeded, AmountOverflow: deterministic
            end
        elseif p.net > 0 then
            outputs[#outputs + 1] = { account = p.account, asset = p.asset, amount = p.net }
        end
    end
    if #inputs > 1 then sort(inputs, ref_less) end
    return { inputs = inputs, outputs = outputs, metadata = req.metadata, intent = req.intent },
        consumed, accts
end

-- After the early look refused a transfer: true when a posting it picked is no longer
-- Active. The balances it read are then not the postings' snapshot (another saga consumed a
-- pick and its change is not inserted yet: the projection shows the debit without the
-- change), so the refusal is a race to resolve again, not a rejection to store (LED-32).
function Ledger:_picks_moved(consumed)
    if #consumed == 0 then return false end
    local ids = {}
    for i, p in ipairs(consumed) do ids[i] = p.id end
    local now = self:_p("get_postings", ids)
    if #now ~= #ids then return true end
    for _, p in ipairs(now) do if p.status ~= "active" then return true end end
    return false
end

-- The (account, asset) keys every saga in phase finalizing (any node) has a credit (a
-- positive output) to: value in flight that a debit must wait for, not a stored
-- InsufficientFunds (LED-32). A single saga's record holds its transfer (t), a batch's its
-- transfers (items[i].t). Only on the short-account path; the saga table holds the sagas
-- running or left to recover().
function Ledger:_finalizing_outputs()
    local keys = {}
    for _, s in ipairs(self:_p("list_pending_sagas")) do
        if s.phase == "finalizing" then
            local d = codec.decode(s.data)
            local bytes = {}
            if d and d.t then
                bytes[1] = d.t
            elseif d and d.kind == "batch" then
                for _, it in ipairs(d.items or {}) do bytes[#bytes + 1] = it.t end
            end
            for _, b in ipairs(bytes) do
                for _, o in ipairs(ledger.decode_transfer(b).outputs) do
                    -- only a credit can be the value a short payer waits for: a negative
                    -- output (an uncapped source's issue, a receivable's debt) never covers
                    -- a need (every rated slice gives the usage source one: with lanes, each
                    -- batch that met another lane's finalizing record handed all its
                    -- members to the single path)
                    if o.amount > 0 then keys[o.account .. asset_key(o.asset)] = true end
                end
            end
        end
    end
    return keys
end

function Ledger:_finalizing_to(account, asset)
    return self:_finalizing_outputs()[account .. asset_key(asset)] == true
end

function Ledger:_resolve_reverse(req)
    local rec = self:_read("get_transfer", req.target)
    if not rec then return fail(ERR.NotFound, "no transfer " .. hex(req.target)) end
    local orig = ledger.decode_transfer(rec.bytes)
    local outs = {}
    for i = 1, #orig.outputs do outs[i] = { transfer_id = req.target, index = i - 1 } end
    local created = self:_p("get_postings", outs)
    local was = self:_p("get_postings", orig.inputs)
    if #created ~= #outs or #was ~= #orig.inputs then
        return fail(ERR.Bug, "transfer " .. hex(req.target) .. " has lost postings")
    end
    for _, p in ipairs(created) do
        if p.status == "inactive" then
            return fail(ERR.PostingSpent, "transfer " .. hex(req.target) ..
                        " created postings that are already spent")
        end
        if p.status ~= "active" then return false, "reserved by another saga", ERR.Unavailable end
    end
    local outputs, ids, seen = {}, {}, {}
    for i, p in ipairs(was) do
        outputs[i] = { account = p.account, asset = p.asset, amount = p.amount }
    end
    for _, p in ipairs(created) do
        if not seen[p.account] then seen[p.account] = true ids[#ids + 1] = p.account end
    end
    for _, o in ipairs(outputs) do
        if not seen[o.account] then seen[o.account] = true ids[#ids + 1] = o.account end
    end
    local accts = self:_p("get_accounts", ids)
    for _, id in ipairs(ids) do
        if not accts[id] then return fail(ERR.UnknownAccount, "no account " .. hex(id)) end
    end
    return { inputs = outs, outputs = outputs, intent = req.intent,
             metadata = req.metadata ~= "" and req.metadata or "reverses " .. hex(req.target) },
        created, accts
end

-- The accounts whose history lists t (one transfer_accounts row each): every pinned
-- account but the engine's unindexed ones (LED-58).
function Ledger:_involved(t)
    local involved, skip = {}, self.unindexed
    for _, p in ipairs(t.pins) do
        if not skip[p.account] then involved[#involved + 1] = p.account end
    end
    return involved
end

-- Pins (every involved account at the version just read) and the pairs to validate.
local function complete(t, consumed, accts)
    local seen, ids = {}, {}
    for _, p in ipairs(consumed) do
        if not seen[p.account] then seen[p.account] = true ids[#ids + 1] = p.account end
    end
    for _, o in ipairs(t.outputs) do
        if not seen[o.account] then seen[o.account] = true ids[#ids + 1] = o.account end
    end
    local sorted = {}
    for i, id in ipairs(ids) do sorted[i] = id end
    sort(sorted)
    t.pins = {}
    for i, id in ipairs(sorted) do t.pins[i] = { account = id, version = accts[id].version } end
    return ids
end

-- The (account, asset) pairs of t, in order of first appearance.
-- (No local closures in these helpers: creating one (FNEW) is not compiled by LuaJIT and
-- aborts every trace through them, several times per transfer.)
local function add_pair(r, seen, account, asset)
    local k = account .. asset_key(asset)
    if not seen[k] then
        seen[k] = true
        r[#r + 1] = { account = account, asset = asset }
    end
end
local function pairs_of(t, consumed)
    local r, seen = {}, {}
    for _, p in ipairs(consumed) do add_pair(r, seen, p.account, p.asset) end
    for _, o in ipairs(t.outputs) do add_pair(r, seen, o.account, o.asset) end
    return r
end

-- The heads to take (LED-29): every capped pair the transfer debits (consumes a posting of,
-- or gives a negative output), in sorted order (no deadlock between two sagas).
local function add_head(r, seen, accts, account, asset)
    local a = accts[account]
    if a and a.policy == "capped" then
        local k = account .. asset_key(asset)
        if not seen[k] then
            seen[k] = true
            r[#r + 1] = { account = account, asset = asset, key = k }
        end
    end
end
local function by_key(a, b) return a.key < b.key end
local function heads_of(t, consumed, accts)
    local r, seen = {}, {}
    for _, p in ipairs(consumed) do add_head(r, seen, accts, p.account, p.asset) end
    for _, o in ipairs(t.outputs) do
        if o.amount < 0 then add_head(r, seen, accts, o.account, o.asset) end
    end
    if #r == 0 then return r end
    sort(r, by_key)
    for _, h in ipairs(r) do h.key = nil end
    return r
end

local function list_accounts(ids, accts)
    local r = {}
    for i, id in ipairs(ids) do r[i] = accts[id] end
    return r
end

-- ---- the saga ----

local function saga_data(ctx)
    return codec.encode { req = ctx.req, t = ctx.tbytes, tid = ctx.tid, heads = ctx.heads,
                          created_at_ms = ctx.created_at_ms }
end

function Ledger:_save(ctx, phase)
    ctx.phase = phase
    self:_p("save_saga", ctx.sid, phase, saga_data(ctx), self.node)
end

-- Releases what ctx holds before the point of no return (compensation; LED-28).
-- Each release is read back: a count short of the full one (a lost reply, a partial batch)
-- must not leave a posting PendingInactive or a head held by a saga that gave up.
function Ledger:_compensate(ctx)
    local ids = ctx.t and ctx.t.inputs or {}
    for round = 1, self.max_attempts + 1 do
        if #ids == 0 then break end
        if self:_p("release_postings", ids, ctx.sid) ~= #ids then
            local left = {}
            for _, p in ipairs(self:_p("get_postings", ids)) do
                if p.status == "pending_inactive" and p.reservation == ctx.sid then
                    left[#left + 1] = p.id
                end
            end
            ids = left
        else
            ids = {}
        end
        if round > self.max_attempts and #ids > 0 then
            error({ ledger_store_failure = true, name = "release_postings",
                    err = "postings stay reserved", class = "io" }, 0)
        end
    end
    local heads = ctx.heads or {}
    for i = #heads, 1, -1 do
        local h = heads[i]
        if self:_p("release_head", h.account, h.asset, ctx.sid) ~= 1 then
            local cur = self:_p("get_heads", { h })[1]
            if cur and cur.holder == ctx.sid then
                self:_p("release_head", h.account, h.asset, ctx.sid)
                cur = self:_p("get_heads", { h })[1]
                if cur and cur.holder == ctx.sid then
                    error({ ledger_store_failure = true, name = "release_head",
                            err = "head stays held", class = "io" }, 0)
                end
            end
        end
    end
    ctx.t, ctx.tbytes, ctx.tid, ctx.heads = nil, nil, nil, nil
end

-- Another saga holds the intent's claim (cur; the open phase, ron.ledger.phases): false + a
-- result to return (its outcome, Conflict, Unavailable, or the answer of adopting it).
function Ledger:_claim_lost(ctx, cur)
    -- ours never reserved anything: drop its record (a saga driven again may have one)
    self:_p("delete_saga", ctx.sid)
    local final = self:_read("get_intent", ctx.req.intent)
    if final then return false, { self:_outcome(ctx.req, final) } end
    if cur and cur.body_hash ~= ctx.req.body_hash then
        return false, { fail(ERR.Conflict, "intent in flight with another body") }
    end
    local holder = cur and cur.message
    if holder and not self.inflight[holder] then
        -- A saga of this node that nobody drives (it failed with Unavailable): adopt it.
        -- Marked before the next store call (a scheduling point) so no one adopts it twice.
        self.inflight[holder] = true
        local found, batch
        -- a member of a batch ("<batch sid>/<k>") whose batch record is still there
        local bsid = holder:match("^(.+)/%d+$")
        for _, s in ipairs(self:_p("list_pending_sagas", self.node)) do
            if s.id == holder then found = s end
            if bsid and s.id == bsid and not self.inflight[bsid] then batch = s end
        end
        self.inflight[holder] = nil
        if found then return false, { self:_resume(found) } end
        if batch then
            self:_resume(batch)
            local now = self:_read("get_intent", ctx.req.intent)
            if now then return false, { self:_outcome(ctx.req, now) } end
        end
    end
    return false, { fail(ERR.Unavailable, IN_FLIGHT .. " in saga " .. tostring(holder)) }
end

-- Stores a deterministic rejection under the intent (LED-27), after compensation: the
-- outcome, its event and the record's deletion in one phase, flushed in the same call
-- (LED-67, LED-68: phases.reject).
function Ledger:_reject(ctx, err, code)
    self:_compensate(ctx)
    local stored, res = phases.reject(self, ctx, { status = "rejected", code = code,
                                                   message = err,
                                                   body_hash = ctx.req.body_hash })
    if not stored then return fail(ERR.Bug, "intent neither stored nor present") end
    self.stats.rejections = self.stats.rejections + 1
    if stored.status == "committed" then return self:_outcome(ctx.req, stored) end
    return nil, stored.message, stored.code, self.flush_on_ack and res.flushed
end

-- The last step before the point of no return (LED-30): re-read accounts, consumed
-- postings and balances, and validate against them.
-- reads: what the reserve phase read after taking the inputs and heads ({ accts,
-- consumed, prs, bals }, the same transaction), else (its reply was lost) read now.
function Ledger:_revalidate(ctx, reads)
    local t = ctx.t
    local accts, consumed, prs, bals
    if reads then
        accts, consumed, prs, bals = reads.accts, reads.consumed, reads.prs, reads.bals
    else
        accts = self:_p("get_accounts", ctx.ids)
        consumed = #t.inputs > 0 and self:_p("get_postings", t.inputs) or {}
    end
    for _, p in ipairs(consumed) do
        if p.status ~= "pending_inactive" or p.reservation ~= ctx.sid then
            return false, "a reserved posting is not ours any more", ERR.Bug
        end
    end
    if not reads then
        prs = pairs_of(t, consumed)
        bals = self:_p("get_balances", prs)
    end
    local balances = {}
    for i, pr in ipairs(prs) do
        balances[i] = { account = pr.account, asset = pr.asset, amount = bals[i] }
    end
    local alist = {}
    for _, id in ipairs(ctx.ids) do if accts[id] then alist[#alist + 1] = accts[id] end end
    local plan, err, code = ledger.validate_and_plan(t, alist, consumed, balances)
    if self.check then self.check(t, alist, consumed, balances, plan, err, code) end
    if plan then return plan end
    return nil, err, code
end

-- One drive of a saga to an outcome.
function Ledger:_drive(sid, req)
    local ctx = { sid = sid, req = req, created_at_ms = self.clock() }
    self.inflight[sid] = true
    local r = { pcall(guard, function()
        -- Before the point of no return a failure releases what it holds, best effort (the
        -- saga record stays: recover() or the caller's retry finishes it).
        if ctx.phase ~= "finalizing" then
            local ok, e = pcall(self._compensate, self, ctx)
            if not ok and not store_failure(e) then error(e, 0) end
        end
    end, self._drive_body, self, ctx) }
    self.inflight[sid] = nil
    if not r[1] then error(r[2], 0) end
    return unpack(r, 2, table.maxn(r))
end

function Ledger:_drive_body(ctx)
    local req = ctx.req
    -- the prior outcome, the record, the claim and the plan's reads: one phase (LED-67)
    local r = req.kind ~= "reverse" and view.wants({ req }) or nil
    local ok, res = phases.open(self, ctx, saga_data(ctx), r)
    if not ok then return unpack(res, 1, table.maxn(res)) end
    local src = res -- (the view of the open phase's reads, or nil)
    local held = nil -- the one saga every attempt found holding the payer's postings
    for attempt = 1, self.max_attempts do
        self.stats.resolves = self.stats.resolves + 1
        local t, consumed, accts, holder
        if r then
            src = src or phases.reads(self, r)
            t, consumed, accts, holder = self:_resolve_commit(req, src)
            if attempt == 1 then held = holder elseif holder ~= held then held = false end
        else
            t, consumed, accts = self:_resolve_reverse(req)
        end
        if t == nil then return self:_reject(ctx, consumed, accts) end
        if t then
            ctx.ids = complete(t, consumed, accts)
            -- An early look: a transfer the current state refuses is refused before
            -- anything is reserved (the same check runs again as the last step).
            local prs = pairs_of(t, consumed)
            local plan, err, code = ledger.validate_and_plan(t, list_accounts(ctx.ids, accts),
                consumed, self:_balances(prs, src), true)
            if not plan and not RACE[code] and not self:_picks_moved(consumed) then
                return self:_reject(ctx, err, code)
            end
            if plan then
                ctx.t, ctx.tid = t, plan.transfer_id
                ctx.tbytes = plan.bytes
                ctx.heads = heads_of(t, consumed, accts)
                -- the record, the inputs and the heads (all or none) and the last step's
                -- reads: one phase (LED-67)
                local got, reads = phases.reserve(self, ctx, saga_data(ctx), t.inputs, prs)
                if got == "full" then
                    local plan2, err2, code2 = self:_revalidate(ctx, reads)
                    if plan2 then return self:_finalize(ctx) end
                    if code2 == ERR.Bug then error(err2) end
                    if not RACE[code2] then return self:_reject(ctx, err2, code2) end
                    self:_compensate(ctx)
                end
                ctx.t, ctx.tbytes, ctx.tid, ctx.heads = nil, nil, nil, nil
            end
        end
        src = nil
        self.pause(1)
    end
    -- Still racing: the saga stays (reserving, holding nothing) for the retry or recover().
    if held then
        return fail(ERR.Unavailable, HELD .. tostring(held) .. " for every attempt; retry")
    end
    return fail(ERR.Unavailable, "postings or heads kept changing; retry")
end

-- The balances of prs as validation takes them: from the view src (its one read), else
-- read now.
function Ledger:_balances(prs, src)
    local out, bals = {}, nil
    for i, pr in ipairs(prs) do
        local v = src and src.bal[pr.account .. asset_key(pr.asset)]
        if v == nil then
            bals = bals or self:_p("get_balances", prs)
            v = bals[i]
        end
        out[i] = { account = pr.account, asset = pr.asset, amount = v }
    end
    return out
end

-- The finalize: one phase (ron.ledger.phases, LED-67); also what recover() runs for a saga
-- found in phase finalizing.
function Ledger:_finalize(ctx) return phases.finalize(self, ctx) end

-- The finalize step by step, for a state that holds part of one (an older binary's record
-- in phase finalizing): past the point of no return, every step verified, every step
-- idempotent (LED-31).
function Ledger:_finalize_steps(ctx)
    local t, tid, sid = ctx.t, ctx.tid, ctx.sid
    if ctx.phase ~= "finalizing" then self:_save(ctx, "finalizing") end
    -- 1. consume: every input Inactive, consumed by this transfer (the double-spend guard).
    if #t.inputs > 0 then
        for round = 1, self.max_attempts + 1 do
            self:_p("deactivate_postings", t.inputs, sid, tid)
            local done, left = 0, 0
            for _, p in ipairs(self:_p("get_postings", t.inputs)) do
                if p.status == "inactive" and p.consumed_by == tid then done = done + 1
                elseif p.status == "pending_inactive" and p.reservation == sid then
                    left = left + 1
                else
                    error(format("ron.ledger: double spend refused: posting %s:%d of saga %s "
                                 .. "is %s (consumed by %s)", hex(p.id.transfer_id), p.id.index,
                                 sid, p.status, p.consumed_by and hex(p.consumed_by) or "-"))
                end
            end
            if done == #t.inputs then break end
            if round > self.max_attempts or left + done ~= #t.inputs then
                error("ron.ledger: inputs of saga " .. sid .. " lost")
            end
        end
    end
    -- 2. create: every output exists.
    local outs = {}
    for i = 1, #t.outputs do outs[i] = ledger.output_posting(t, tid, i) end
    if #outs > 0 and self:_p("insert_postings", outs) ~= #outs then
        -- Short count: some exist already (a replay) or the batch was cut; read back.
        local ids = {}
        for i, o in ipairs(outs) do ids[i] = o.id end
        for round = 1, self.max_attempts + 1 do
            if #self:_p("get_postings", ids) == #outs then break end
            if round > self.max_attempts then
                error("ron.ledger: outputs of " .. hex(tid) .. " missing after insert")
            end
            self:_p("insert_postings", outs)
        end
    end
    -- 3. the transfer record.
    local involved = self:_involved(t)
    local rec = { id = tid, bytes = ctx.tbytes, intent = t.intent, book = self.book,
                  created_at_ms = ctx.created_at_ms, metadata = t.metadata }
    if self:_p("store_transfer", rec, involved) ~= 1 then
        local got = self:_read("get_transfer", tid)
        if not got or got.bytes ~= ctx.tbytes then
            error("ron.ledger: transfer " .. hex(tid) .. " not stored")
        end
    end
    -- 4. the intent's outcome.
    local outcome = { status = "committed", transfer_id = tid, body_hash = ctx.req.body_hash }
    if self:_p("put_intent", t.intent, outcome) ~= 1 then
        local cur = self:_read("get_intent", t.intent)
        if not cur or cur.status ~= "committed" or cur.transfer_id ~= tid then
            error("ron.ledger: intent of " .. hex(tid) .. " holds another outcome")
        end
    end
    -- 5. the event, gapless (LED-33): 0 = it exists, or a racing insert took the seq.
    local ev
    for _ = 1, self.max_attempts * 4 do
        self:_p("append_event", self.book, tid, EVENT_KIND, phases.event_data(ctx))
        ev = self:_read("get_event", self.book, tid, EVENT_KIND)
        if ev then break end
        self.pause(1)
    end
    if not ev then return fail(ERR.Unavailable, "event of " .. hex(tid) .. " not appended") end
    -- 6. heads back, record gone.
    for i = #(ctx.heads or {}), 1, -1 do
        local h = ctx.heads[i]
        self:_p("release_head", h.account, h.asset, sid)
    end
    self:_p("delete_saga", sid)
    return self:_committed(ctx, ev)
end

-- The receipt of a committed transfer (its event ev); durable: its finalize flushed.
function Ledger:_committed(ctx, ev, durable)
    self.stats.commits = self.stats.commits + 1
    if self.audit then
        self.audit { kind = "transfer", transfer_id = ctx.tid, intent = ctx.t.intent,
                     event_seq = ev.seq, book = self.book }
    end
    return { transfer_id = ctx.tid, status = "committed", event_seq = ev.seq, replayed = false },
        nil, nil, durable
end

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
    local out, hit = {}, false
    local want, cache = ids, self.acache
    if cached and self.account_cache > 0 then
        want = {}
        for _, id in ipairs(ids) do
            local a = cache[id]
            if a then out[id], hit = a, true else want[#want + 1] = id end
        end
    end
    for _, c in ipairs(slices(want, BATCH_IDS)) do
        for k, v in pairs(self:_p("get_accounts", c)) do
            out[k] = v
            self:_remember_account(k, v)
        end
    end
    return out, hit
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

function Ledger:commit_many(reqs)
    if type(reqs) ~= "table" then error("ron.ledger: commit_many expects a list", 2) end
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
    local ok, err, code = guard(nil, self._batch, self, live, results, later)
    if ok == nil then
        for _, e in ipairs(live) do
            if not results[e.i] then results[e.i] = { nil, err, code } end
        end
    end
    -- what the batch handed over, and replays of an intent seen earlier in it: one by one
    sort(later, function(a, b) return a.i < b.i end)
    for _, e in ipairs(later) do
        if e.sid then
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
        if any then
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

function Ledger:_batch(live, results, later)
    if #live == 0 then return true end
    local keys = {}
    for _, e in ipairs(live) do
        keys[#keys + 1] = e.req.intent
        keys[#keys + 1] = CLAIM_PREFIX .. e.req.intent
    end
    local got = self:_intents_of(keys)
    local todo, replays = {}, {}
    for _, e in ipairs(live) do
        local prior = got[e.req.intent]
        if prior then replays[#replays + 1] = { e = e, stored = prior }
        elseif got[CLAIM_PREFIX .. e.req.intent] then
            later[#later + 1] = e -- another saga holds it: the single path waits or adopts
            self.stats.claims_lost = (self.stats.claims_lost or 0) + 1
        else todo[#todo + 1] = e end
    end
    self:_replays(replays, results)
    if #todo == 0 then return true end
    local sid = self:_new_sid()
    for k, e in ipairs(todo) do e.k, e.sid = k, sid .. "/" .. k end
    local ctx = { sid = sid, batch = todo, created_at_ms = self.clock() }
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
    local function claim_of(e)
        return { key = CLAIM_PREFIX .. e.req.intent,
                 outcome = { status = "claimed", message = e.sid, body_hash = e.req.body_hash } }
    end
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
            local c = cur[CLAIM_PREFIX .. e.req.intent]
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
        -- phase, all or none (LED-67)
        local ids = {}
        for i, x in ipairs(ctx.ins) do ids[i] = x.id end
        if phases.reserve(self, ctx, batch_data(ctx, "reserving"), ids) == "full" then
            local ok, err = self:_revalidate_batch(ctx)
            if ok then return self:_finalize_batch(ctx, results, later) end
            if err then error(err) end
            self:_give_back_batch(ctx)
        end
        self.pause(1)
    end
    -- Still racing: the saga stays (reserving, holding nothing) for a retry or recover().
    return fail(ERR.Unavailable, "postings or heads kept changing; retry")
end

-- Reads once, then resolves and validates the members in order over the in-memory view.
-- Sets ctx.items (the transfers, in order), ctx.rejects, ctx.handover, ctx.heads.
function Ledger:_plan_batch(ctx)
    local reqs = {}
    for i, e in ipairs(ctx.batch) do reqs[i] = e.req end
    local r = view.wants(reqs)
    local ids, qs, payers = r.ids, r.qs, r.payers
    -- the plan's three reads at once (reads only, none needs another's answer: LED-62)
    local accts, res, got, cached
    self:_read_at_once(function() accts, cached = self:_accounts_of(ids, not ctx.fresh) end,
                       function() res = self:_list_read("get_postings_by_pairs", qs,
                                                        BATCH_QUERIES) end,
                       function() got = self:_list_read("get_balances", r.bpairs, BATCH_IDS) end)
    local src = view.source(self, r, accts, res, got, true)
    local more = {}
    for _, p in ipairs(payers) do
        -- the single path's second page, read up front for a pair whose first page may not
        -- hold all its positive postings (the plan moves the lists as it goes)
        if #p.list == FIRST_PAGE and p.list[FIRST_PAGE].amount > 0 then
            more[#more + 1] = p
        end
    end
    if #more > 0 then
        local q2 = {}
        for i, p in ipairs(more) do
            q2[i] = { account = p.account, asset = p.asset, status = "active",
                      limit = SELECT_LIMIT }
        end
        local r2 = self:_list_read("get_postings_by_pairs", q2, BATCH_QUERIES)
        for i, p in ipairs(more) do p.list = r2[i] end
    end
    local bal, pidx = src.bal, r.pidx
    local items, rejects, handover, heads, hseen = {}, {}, {}, {}, {}
    for _, e in ipairs(ctx.batch) do
        local k = e.k
        local t, consumed, a3 = self:_resolve_commit(e.req, src)
        if t == nil then
            rejects[#rejects + 1] = { k = k, e = e, err = consumed, code = a3 }
        elseif t == false then
            handover[#handover + 1] = { k = k, e = e }
        else
            local cids = complete(t, consumed, a3)
            local prs = pairs_of(t, consumed)
            local balances = {}
            for i, pr in ipairs(prs) do
                balances[i] = { account = pr.account, asset = pr.asset,
                                amount = bal[pr.account .. asset_key(pr.asset)] or 0 }
            end
            local plan, err, code = ledger.validate_and_plan(t, list_accounts(cids, a3),
                                                             consumed, balances, true)
            if not plan and RACE[code] then
                handover[#handover + 1] = { k = k, e = e }
            elseif not plan then
                rejects[#rejects + 1] = { k = k, e = e, err = err, code = code }
            else
                -- the view moves on: balances, the payers' postings
                for _, d in ipairs(plan.deltas) do
                    bal[d.account .. asset_key(d.asset)] = d.after
                end
                local gone, touched = {}, {}
                for _, p in ipairs(consumed) do
                    gone[pkey(p.id)] = true
                    touched[p.account .. asset_key(p.asset)] = true
                end
                for pk in pairs(touched) do
                    local pool = pidx[pk]
                    local kept = {}
                    for _, p in ipairs(pool.list) do
                        if not gone[pkey(p.id)] then kept[#kept + 1] = p end
                    end
                    pool.list = kept
                end
                local tid = plan.transfer_id
                for i = 1, #t.outputs do
                    local o = ledger.output_posting(t, tid, i)
                    local pool = pidx[o.account .. asset_key(o.asset)]
                    if pool then
                        local l = pool.list
                        local j = #l + 1
                        while j > 1 and view.largest_less(o, l[j - 1]) do
                            l[j] = l[j - 1]
                            j = j - 1
                        end
                        l[j] = o
                    end
                end
                items[#items + 1] = { k = k, e = e, t = t, tid = tid, cids = cids,
                                      tbytes = plan.bytes }
                for _, h in ipairs(heads_of(t, consumed, a3)) do
                    local hk = h.account .. asset_key(h.asset)
                    if not hseen[hk] then
                        hseen[hk] = true
                        h.key = hk
                        heads[#heads + 1] = h
                    end
                end
            end
        end
    end
    if cached and #rejects > 0 then
        -- a rejection is stored as it is (no last step): decided on the store's accounts,
        -- never on remembered ones (LED-63)
        self.stats.plans_uncached = (self.stats.plans_uncached or 0) + 1
        ctx.fresh = true
        return self:_plan_batch(ctx)
    end
    sort(heads, function(a, b) return a.key < b.key end)
    for _, h in ipairs(heads) do h.key = nil end
    ctx.items, ctx.rejects, ctx.handover, ctx.heads = items, rejects, handover, heads
    ctx.ins = store_inputs(items)
end

-- The last step before the point of no return (LED-30, for the whole chain): accounts, the
-- reserved store postings and balances read again; each transfer validated in order
-- against them, a later one seeing the earlier ones' effects. true, or false (re-plan: the
-- state moved), or false, err (a reserved posting is not ours: a bug).
function Ledger:_revalidate_batch(ctx)
    local items = ctx.items
    if #items == 0 then return true end
    local ids, seen, prs, pseen = {}, {}, {}, {}
    for _, it in ipairs(items) do
        for _, p in ipairs(it.t.pins) do
            if not seen[p.account] then
                seen[p.account] = true
                ids[#ids + 1] = p.account
            end
        end
    end
    local ins = store_inputs(items)
    local rids = {}
    for i, x in ipairs(ins) do rids[i] = x.id end
    local rows, accts, got = {}, nil, nil
    -- the accounts and the reserved postings at once (LED-62); the balances need the
    -- postings' pairs
    self:_read_at_once(function() accts = self:_accounts_of(ids) end,
                       function() got = self:_list_read("get_postings", rids, BATCH_IDS) end)
    for _, p in ipairs(got) do
        if p.status ~= "pending_inactive" or p.reservation ~= ctx.sid then
            return false, "a reserved posting is not ours any more"
        end
        rows[pkey(p.id)] = p
    end
    local made = {}
    local chain = {}
    for _, it in ipairs(items) do
        local consumed = {}
        for i, ref in ipairs(it.t.inputs) do
            local p = rows[pkey(ref)] or made[pkey(ref)]
            if not p then return false end -- lost: re-plan (never happens with ours held)
            consumed[i] = p
        end
        it.consumed = consumed
        for _, pr in ipairs(pairs_of(it.t, consumed)) do
            local k = pr.account .. asset_key(pr.asset)
            if not pseen[k] then
                pseen[k] = true
                prs[#prs + 1] = pr
            end
        end
        for i = 1, #it.t.outputs do
            local o = ledger.output_posting(it.t, it.tid, i)
            made[pkey(o.id)] = o
        end
    end
    got = self:_list_read("get_balances", prs, BATCH_IDS)
    for i, pr in ipairs(prs) do chain[pr.account .. asset_key(pr.asset)] = got[i] end
    for _, it in ipairs(items) do
        local balances = {}
        for i, pr in ipairs(pairs_of(it.t, it.consumed)) do
            balances[i] = { account = pr.account, asset = pr.asset,
                            amount = chain[pr.account .. asset_key(pr.asset)] }
        end
        local alist = {}
        for _, id in ipairs(it.cids) do if accts[id] then alist[#alist + 1] = accts[id] end end
        local plan, err, code = ledger.validate_and_plan(it.t, alist, it.consumed, balances)
        if self.check then self.check(it.t, alist, it.consumed, balances, plan, err, code) end
        if not plan then return false end
        if plan.transfer_id ~= it.tid then return false, "a planned transfer changed its id" end
        for _, d in ipairs(plan.deltas) do chain[d.account .. asset_key(d.asset)] = d.after end
    end
    return true
end

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
local function by_sort_key(x, y) return x.sort_key < y.sort_key end

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
    for _, it in ipairs(items) do
        for i = 1, #it.t.outputs do
            local o = ledger.output_posting(it.t, it.tid, i)
            local by = chained[pkey(o.id)]
            if by then o.status, o.consumed_by = "inactive", by end
            outs[#outs + 1] = o
        end
    end
    -- in the order of the balance rows their insert trigger updates (account, asset, shard):
    -- two batches inserting at once lock the hot rows (revenue, a shared source) in the same
    -- order, so they wait for each other instead of deadlocking (PostgreSQL detects a
    -- deadlock only after deadlock_timeout, 1 s by default)
    for _, o in ipairs(outs) do o.sort_key = row_key(o) end
    sort(outs, by_sort_key)
    for i, o in ipairs(outs) do
        o.sort_key = nil
        oids[i] = o.id
    end
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

-- A batch found in the store (recover(), or a member's retry adopting it): finalizing ->
-- rolled forward; reserving -> given back, then each member driven by the single path.
local function batch_ctx(s, d)
    local ctx = { sid = s.id, phase = s.phase, heads = d.heads, created_at_ms = d.created_at_ms,
                  batch = {} }
    local by = {}
    local function member(k, req)
        local e = by[k]
        if not e then
            e = { k = k, req = req, sid = s.id .. "/" .. k }
            by[k] = e
            ctx.batch[#ctx.batch + 1] = e
        end
        return e
    end
    if d.fin then
        ctx.items, ctx.rejects, ctx.handover = {}, {}, {}
        for i, x in ipairs(d.items) do
            local t = ledger.decode_transfer(x.t)
            ctx.items[i] = { k = x.k, t = t, tbytes = x.t, tid = ledger.transfer_id(t),
                             e = member(x.k, { intent = t.intent, body_hash = x.h,
                                               keys = x.keys }) }
        end
        for i, x in ipairs(d.rejects) do
            ctx.rejects[i] = { k = x.k, code = x.code, err = x.message,
                               e = member(x.k, { intent = x.intent, body_hash = x.h,
                                                 keys = x.keys }) }
        end
        for i, x in ipairs(d.handover) do ctx.handover[i] = { k = x.k, e = member(x.k, x.req) } end
    else
        for _, m in ipairs(codec.decode(d.members)) do member(m.k, m.req) end
        ctx.ins = {}
        for i, id in ipairs(d.ins or {}) do ctx.ins[i] = { id = id } end
    end
    sort(ctx.batch, function(a, b) return a.k < b.k end)
    return ctx
end
_M._batch_ctx = batch_ctx

-- deferred (recover()): a list that gets the members a finalizing batch handed over, as
-- saga records to drive later, instead of driving them here.
function Ledger:_resume_batch(s, d, deferred)
    local ctx = batch_ctx(s, d)
    self.inflight[s.id] = true
    for _, e in ipairs(ctx.batch) do self.inflight[e.sid] = true end
    local r
    if s.phase == "finalizing" then
        r = { guard(nil, self._finalize_batch, self, ctx) }
        if r[1] then
            -- the members it handed over: their saga records exist now; drive them (a
            -- member that is still racing answers Unavailable: its record stays, and so
            -- does this answer)
            self.inflight[s.id] = nil
            for _, e in ipairs(ctx.batch) do self.inflight[e.sid] = nil end
            for _, x in ipairs(ctx.handover or {}) do
                local m = { id = x.e.sid, phase = "reserving", node = self.node,
                            data = codec.encode { req = x.e.req,
                                                  created_at_ms = ctx.created_at_ms } }
                if deferred then deferred[#deferred + 1] = m
                else
                    local rr = { guard(nil, self._resume, self, m) }
                    if rr[1] == nil and rr[3] == ERR.Unavailable then r = rr end
                end
            end
        end
    else
        r = { guard(nil, function()
            self:_give_back_batch(ctx)
            -- each member saga first, then this record goes: a crash in between leaves the
            -- members recoverable on their own
            for _, e in ipairs(ctx.batch) do
                self:_p("save_saga", e.sid, "reserving",
                        codec.encode { req = e.req, created_at_ms = ctx.created_at_ms },
                        self.node)
            end
            self:_p("delete_saga", s.id)
            return true
        end) }
    end
    self.inflight[s.id] = nil
    for _, e in ipairs(ctx.batch) do self.inflight[e.sid] = nil end
    if r[1] and s.phase ~= "finalizing" then
        for _, e in ipairs(ctx.batch) do
            local rr = { guard(nil, self._resume, self,
                               { id = e.sid, phase = "reserving",
                                 data = codec.encode { req = e.req,
                                                       created_at_ms = ctx.created_at_ms } }) }
            if rr[1] == nil and rr[3] == ERR.Unavailable then r = rr end
        end
    end
    self.stats.recovered = self.stats.recovered + 1
    return unpack(r, 1, table.maxn(r))
end

-- The engine's audit hook for a trail that takes (kind, attrs) of printable values
-- (ron.audit.host:emit, the daemon's audit_emit; AUD-I-*): one "ledger" record per committed
-- transfer, its id and intent in hex. emit may be nil (no trail).
function _M.audit_hook(emit)
    if not emit then return nil end
    return function(r)
        return emit("ledger", { event = r.kind, transfer = hex(r.transfer_id),
                                intent = hex(r.intent), event_seq = r.event_seq, book = r.book })
    end
end

-- Resumes a saga found in the store (recover(), or adoption by a caller's retry).
-- deferred: see _resume_batch.
function Ledger:_resume(s, deferred)
    local d = codec.decode(s.data)
    if d.kind == "batch" then return self:_resume_batch(s, d, deferred) end
    local ctx = { sid = s.id, req = d.req, phase = s.phase, tbytes = d.t, tid = d.tid,
                  heads = d.heads, created_at_ms = d.created_at_ms }
    if ctx.tbytes then ctx.t = ledger.decode_transfer(ctx.tbytes) end
    self.inflight[s.id] = true
    local r
    if s.phase == "finalizing" then
        r = { guard(nil, self._finalize, self, ctx) }
    else
        -- Not past the point of no return: give back what it may hold, then drive it again
        -- from the start (it re-resolves and re-validates against the current state).
        r = { guard(nil, function()
            self:_compensate(ctx)
            local prior = self:_read("get_intent", ctx.req.intent)
            local claim = self:_read("get_intent", CLAIM_PREFIX .. ctx.req.intent)
            if prior or (claim and claim.message ~= s.id) then
                -- (its own rejection stored and the record left: an older binary's crash
                -- between the two; its event appended if missing, LED-68)
                if prior and claim and claim.message == s.id then
                    self:_rejection_event(ctx.req, prior)
                end
                self:_p("delete_saga", s.id)
                if prior then return self:_outcome(ctx.req, prior) end
                -- Another saga claimed the intent first (this one died before its claim):
                -- that one decides the outcome; this record was never more than a draft.
                return { status = "abandoned", saga = s.id, holder = claim.message }
            end
            return true
        end) }
        if r[1] == true then
            self.inflight[s.id] = nil
            return self:_drive(s.id, ctx.req)
        end
    end
    self.inflight[s.id] = nil
    self.stats.recovered = self.stats.recovered + 1
    return unpack(r, 1, table.maxn(r))
end

-- On start (and whenever wanted): every saga of this node that nobody drives is finished:
-- finalizing ones rolled forward, reserving ones released and driven again (LED-31).
-- Returns a list of { id, phase, ok, err, code }.
--
-- Order matters: a dead process leaves several sagas, and a reserving one driven again must
-- not find its siblings' reservations or heads (nobody would ever release them: it would
-- wait for itself). So finalizing sagas are rolled forward first (they release their
-- heads), then every reserving saga gives back what it holds, then each is driven again.
-- The members a finalizing batch handed over to the single path are driven with the
-- reserving ones, after the give-back: driven at once they waited for a posting a dead
-- sibling still held, gave up (Unavailable) and their records stayed (LED-31).
--
-- opts.node (LED-71): the sagas of another node, whose lease this engine's node took over
-- (ron.ledger.lease; the caller ended that node's backends): the same recovery, each saga
-- driven again under this engine's node (its record becomes this node's).
function Ledger:recover(opts)
    local report = {}
    local node = opts and opts.node or self.node
    -- LED-65: a dead process of this node may still have statements running on the server;
    -- they end (or are ended) before anything is read (a store opened with this node)
    local store = self.store
    if node == self.node and type(store.fence) == "function" and store.node == self.node then
        local n, ferr, fcls = store:fence()
        if not n then return nil, ferr, fcls == "io" and ERR.Unavailable or ERR.Bug end
        self.stats.fenced = (self.stats.fenced or 0) + n
    end
    local list, err = guard(nil, function() return self:_p("list_pending_sagas", node) end)
    if not list then return nil, err end
    local function add(s, r, e, code)
        report[#report + 1] = { id = s.id, phase = s.phase, ok = r ~= nil, err = e, code = code }
    end
    local reserving, handed, seen = {}, {}, {}
    for _, s in ipairs(list) do
        if not self.inflight[s.id] then
            if s.phase == "finalizing" then add(s, self:_resume(s, handed))
            else
                reserving[#reserving + 1] = s
                seen[s.id] = true
            end
        end
    end
    for _, m in ipairs(handed) do -- (a member's record the dead process had written: listed)
        if not seen[m.id] then
            reserving[#reserving + 1] = m
            seen[m.id] = true
        end
    end
    local ready = {}
    for _, s in ipairs(reserving) do
        local d = codec.decode(s.data)
        local ok, e, code
        if d.kind == "batch" then
            local ctx = _M._batch_ctx(s, d)
            ok, e, code = guard(nil, function()
                self:_give_back_batch(ctx)
                return true
            end)
        else
            local ctx = { sid = s.id, heads = d.heads,
                          t = d.t and ledger.decode_transfer(d.t) or nil }
            ok, e, code = guard(nil, function()
                self:_compensate(ctx)
                return true
            end)
        end
        if ok then ready[#ready + 1] = s else add(s, nil, e, code) end
    end
    for _, s in ipairs(ready) do
        if not self.inflight[s.id] then add(s, self:_resume(s)) end
    end
    return report
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

return _M
