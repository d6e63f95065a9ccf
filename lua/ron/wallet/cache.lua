-- ron.wallet.cache: the wallet's balance cache, kept coherent from the ledger's event feed
-- (seed 004 §2 "Cache Invalidator", docs/WALLET.md §5, WLT-6).
--
--   local cache = require("ron.wallet.cache")
--   local c = cache.new { ledger = led, entries = 100000, batch = 256, lag_events = 4096,
--                         clock = fn_ms }
--   c:get(account, asset_code)            -> amount, read_ms | nil
--   c:begin_read(account) ... c:put(account, asset_code, amount)   (a miss read through)
--   c:poll()                              -> true | nil, err  (one catch-up; from a task)
--   c:note_commit(tid, ms, seq)           the wallet's own commit, its accounts dropped
--   c.seq                                 every event up to it is applied
--   c:staleness_ms()                      since the cache last saw the ledger's head
--
-- Coherence: an entry is dropped when an event names its account (the event's transfer's
-- pins: every account a transfer involves is pinned). A read that raced an invalidation of
-- its account is not stored (begin_read marks the account; an invalidation meanwhile spoils
-- the read). A feed more than lag_events behind the ledger's head is lag: everything is
-- dropped and the feed jumps to the head (wallet_bus_lagged_total). Entries are bounded: two
-- generations of at most `entries` each (the most recently used survive), kept off the Lua
-- heap (ron.base.numcache: 80 bytes an entry; a key over its 56 bytes is not cached).
--
-- The wallet's own commits (issue 25): the wallet drops the entries of a commit's accounts
-- when the commit answers (its pins: ron.wallet.money), before any read can see the commit's
-- balances, and notes the commit's event (seq, transfer id). The feed trusts that drop: it
-- steps over a run of noted seqs after its own without a store call (seqs are gapless per
-- book, LED-33, so a run of noted seqs holds no other writer's event), and does not read a
-- noted event's transfer back. Every other event is applied as above; a note the feed
-- passed already, or one dropped at the bound (4096), costs only that saving.
local events = require("ron.ledger.events")
local numcache = require("ron.base.numcache")

local floor = math.floor
local pairs, setmetatable, type, error, pcall = pairs, setmetatable, type, error, pcall

local _M = {}

-- Buckets, in ms, of wallet_invalidation_lag_seconds (a commit's acknowledgement -> its
-- entries dropped by the feed: how stale a cached balance can be, measured).
_M.LAG_BUCKETS = { 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000 }

local Cache = {}
Cache.__index = Cache

function _M.new(o)
    if type(o) ~= "table" or not o.ledger then error("cache.new: ledger required", 2) end
    local self = setmetatable({
        led = o.ledger, entries = o.entries or 100000, batch = o.batch or 256,
        lag_events = o.lag_events or 4096,
        clock = o.clock or function() return floor(os.time() * 1000) end,
        on_shortfall = o.on_shortfall, -- fn(event) for each usage.shortfall event
        -- fn(intent, body_hash) -> the accounts of the wallet's own commit of that request
        -- still running (its answer not yet given), or nil
        own_running = o.own_running,
        -- (off the Lua heap: as Lua objects, 200,000 cached balances made the collector's
        -- sweep cost one group commit 61-79 ms of the loop in every cycle, issue 25)
        balances = numcache.new(o.entries or 100000),
        codes = {}, -- the asset codes ever cached (few: the wallet's configured assets)
        reading = {}, -- account -> true (reading) | "spoiled"
        seq = 0, ok_ms = nil, started = false,
        lagged_total = 0, invalidations_total = 0, events_total = 0, polls_failed_total = 0,
        -- the own commits noted: seq -> transfer id, seq -> ms (two maps: no table per
        -- commit, issue 25)
        lag_hist = {}, lag_sum = 0, lag_count = 0, lag_max = 0, noted = {}, noted_ms = {},
        n_noted = 0,
        -- the feed's store calls by kind, the transfers it read back, own events it trusted
        feed_calls = { events = 0, transfers = 0, head = 0 }, transfers_read_total = 0,
        own_events_total = 0, own_running_total = 0,
    }, Cache)
    for i = 1, #_M.LAG_BUCKETS + 1 do self.lag_hist[i] = 0 end
    return self
end

local function key(account, asset) return account .. "\0" .. asset end

function Cache:get(account, asset)
    return self.balances:get(key(account, asset))
end

function Cache:begin_read(account)
    if not self.reading[account] then self.reading[account] = true end
end

-- Stores a balance read after begin_read(account), unless an invalidation spoiled it.
function Cache:put(account, asset, amount)
    local r = self.reading[account]
    self.reading[account] = nil
    if r ~= true then return false end
    self.codes[asset] = true
    self.balances:put(key(account, asset), amount, self.clock())
    return true
end

-- O(assets), not O(entries): a key is the account and an asset code, and the codes are few.
function Cache:invalidate(account)
    self.invalidations_total = self.invalidations_total + 1
    if self.reading[account] then self.reading[account] = "spoiled" end
    for code in pairs(self.codes) do self.balances:delete(key(account, code)) end
end

function Cache:clear()
    self.balances:clear()
    for a in pairs(self.reading) do self.reading[a] = "spoiled" end
end

function Cache:size() return self.balances:count() end

local function observe_lag(self, ms)
    if ms < 0 then ms = 0 end
    local b = #_M.LAG_BUCKETS + 1
    for i, le in ipairs(_M.LAG_BUCKETS) do
        if ms <= le then b = i break end
    end
    self.lag_hist[b] = self.lag_hist[b] + 1
    self.lag_sum, self.lag_count = self.lag_sum + ms, self.lag_count + 1
    if ms > self.lag_max then self.lag_max = ms end
end

-- The wallet's own commit tid, its event seq, was acknowledged at ms, its accounts dropped
-- already (Cache:invalidate): when the feed passes its event, the time in between is
-- observed (wallet_invalidation_lag_seconds) and its transfer is not read back. Bounded: at
-- most 4096 noted (then all forgotten: the feed reads those back). A seq the feed has passed
-- is not noted: its event was applied before this answer (on SQLite most of a busy group's
-- are: the feed met them running), a lag of 0.
function Cache:note_commit(tid, ms, seq)
    if seq == nil then return end
    if seq <= self.seq then return observe_lag(self, 0) end
    if self.n_noted >= 4096 then self.noted, self.noted_ms, self.n_noted = {}, {}, 0 end
    if not self.noted[seq] then
        self.noted[seq], self.noted_ms[seq] = tid, ms
        self.n_noted = self.n_noted + 1
    end
end

function Cache:staleness_ms()
    if not self.ok_ms then return nil end
    return self.clock() - self.ok_ms
end

-- The note of event seq when it is the wallet's own commit tid (consumed: the lag
-- observed), or nil.
local function own(self, seq, tid)
    local n = self.noted[seq]
    if n == nil or n ~= tid then return nil end
    local ms = self.noted_ms[seq]
    self.noted[seq], self.noted_ms[seq] = nil, nil
    self.n_noted = self.n_noted - 1
    observe_lag(self, self.clock() - ms)
    return n
end

-- Steps seq over the run of own commits' events right after it: no store call.
local function skip_own(self)
    local n = self.noted[self.seq + 1]
    while n do
        own(self, self.seq + 1, n)
        self.seq = self.seq + 1
        self.events_total = self.events_total + 1
        self.own_events_total = self.own_events_total + 1
        n = self.noted[self.seq + 1]
    end
end

-- The accounts of ev when it is a transfer of the wallet's own request still running: its
-- event's data names the request (intent, body hash: ron.ledger.events), the wallet knows
-- that request's accounts. A committed group's events are in the store before the group's
-- answers: a poll in between would read them back. -> accounts | nil
local function running(self, ev)
    if not self.own_running or ev.kind ~= events.TRANSFER then return nil end
    local d = events.decode(ev.data)
    if not d or type(d.intent) ~= "string" then return nil end
    return self.own_running(d.intent, d.body_hash)
end

-- What the feed knows of ev before any read: "own" (noted: its accounts were dropped at
-- its answer), { accounts } (running), false (no money), or nil (read it back).
local function known(self, ev)
    if events.NO_MONEY[ev.kind] then return false end
    local n = self.noted[ev.seq]
    if n ~= nil and n == ev.transfer_id then return "own" end
    local accounts = running(self, ev)
    if accounts then return { accounts = accounts } end
    return nil
end

-- The transfers of evs' money events that are not the wallet's own (one store call, not one
-- per event: on SQLite one pool hop on the store's one connection, which the committer's
-- phases and a balance read that missed wait behind, issue 25). -> recs by event index
-- (what known() says, or the record read back), or nil, err.
local function read_transfers(self, evs)
    local ids, at = {}, {}
    for i, ev in ipairs(evs) do
        local k = known(self, ev)
        if k == nil then
            ids[#ids + 1] = ev.transfer_id
            k = #ids
        end
        at[i] = k
    end
    if #ids == 0 then return at end
    self.feed_calls.transfers = self.feed_calls.transfers + 1
    local recs, terr = self.led:transfers(ids)
    if not recs then return nil, terr end
    self.transfers_read_total = self.transfers_read_total + #ids
    for i, k in ipairs(at) do
        if type(k) == "number" then at[i] = recs[k] end
    end
    return at
end

-- One event applied; rec: its transfer's record, "own" (the wallet's: its accounts dropped
-- when it answered), or false (no money, or no such transfer).
local function apply_event(self, ev, rec)
    if ev.kind == "usage.shortfall" and self.on_shortfall then
        -- the rater charged more than a wallet held: the wallet ran dry (WLT-9)
        pcall(self.on_shortfall, ev)
    end
    -- an audit checkpoint carried in the feed (ron.ledger.attest), an account version, a
    -- stored rejection, an accepted loss move no money (ron.ledger.events)
    if rec == "own" then
        own(self, ev.seq, ev.transfer_id)
        self.own_events_total = self.own_events_total + 1
    elseif rec and rec.accounts then
        for _, a in ipairs(rec.accounts) do self:invalidate(a) end
        self.own_running_total = self.own_running_total + 1
    elseif rec and rec.transfer then
        for _, p in ipairs(rec.transfer.pins) do self:invalidate(p.account) end
        -- noted while its transfer was read: the lag is still observed
        own(self, ev.seq, ev.transfer_id)
    elseif ev.kind == events.ACCOUNT then
        self:invalidate(ev.transfer_id:sub(1, 16)) -- its id begins with the account's
    elseif not events.NO_MONEY[ev.kind] then
        self:clear() -- cannot tell whom it involves: drop everything
    end
    self.seq = ev.seq
    self.events_total = self.events_total + 1
end

-- One batch of events applied: the entries they name dropped, seq moved past them.
-- -> true | nil, err (the transfers could not be read: nothing applied, seq unchanged).
local function apply_events(self, evs)
    local recs, terr = read_transfers(self, evs)
    if not recs then
        self.polls_failed_total = self.polls_failed_total + 1
        return nil, terr
    end
    for i, ev in ipairs(evs) do apply_event(self, ev, recs[i]) end
    return true
end

-- One catch-up: reads events after seq until the head (at most 64 batches; the run of own
-- commits' events after seq stepped over first), dropping the entries of every account
-- they involve. From a task (store calls may yield).
function Cache:poll()
    local led = self.led
    local now = self.clock()
    if not self.started then
        -- the first poll starts at the head: nothing is cached yet
        self.feed_calls.head = self.feed_calls.head + 1
        local head, err = led.store:head_seq(led.book)
        if head == nil then
            self.polls_failed_total = self.polls_failed_total + 1
            return nil, err
        end
        self.seq, self.started, self.ok_ms = head, true, now
        return true
    end
    for _ = 1, 64 do
        skip_own(self)
        self.feed_calls.events = self.feed_calls.events + 1
        local evs, err = led:events_since(self.seq, self.batch)
        if not evs then
            self.polls_failed_total = self.polls_failed_total + 1
            return nil, err
        end
        if #evs == self.batch then
            self.feed_calls.head = self.feed_calls.head + 1
            local head = led.store:head_seq(led.book)
            if head and head - self.seq > self.lag_events then
                self.lagged_total = self.lagged_total + 1
                self:clear()
                self.seq = head
                self.ok_ms = self.clock()
                return true
            end
        end
        local ok, err2 = apply_events(self, evs)
        if not ok then return nil, err2 end
        if #evs < self.batch then
            self.ok_ms = now
            return true
        end
    end
    return true
end

return _M
