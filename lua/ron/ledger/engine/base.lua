-- ron.ledger.engine.base: the engine's codes and the predicates over its errors, the constants
-- and helpers its concerns share, and its store calls (a primitive retried; a failure that
-- outlives the retries aborts the drive, and guard turns it into Unavailable, LED-32).
-- A concern of the engine ron.ledger.ledger, which installs the methods below
-- (_M.methods) on its one Ledger class.
local ledger = require("ron.ledger")
local lease_mod = require("ron.ledger.lease")
local phases = require("ron.ledger.phases")
local plan_cache = require("ron.ledger.engine.plan_cache")
local view = require("ron.ledger.view")

local error = error
local format = string.format
local pcall = pcall
local type = type

local _M = {}
local Ledger = {} -- this concern's methods

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

-- A member commit_many handed back to its caller (opts.hand_back): not driven yet, in
-- flight on this engine until drive_handed (a result's .handed names it).
local HANDED = "handed back to the caller: saga "

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

local function fail(code, msg)
    return nil, NAME[code] .. ": " .. msg, code
end

local hex = ledger.hex

local asset_key = view.asset_key

-- ---- store calls ----

-- One primitive, retried while the store says "retry" or "io" (each primitive is idempotent
-- or its effect is read back by the caller). A failure that outlives the retries aborts the
-- drive with a table error that _guard turns into Unavailable (LED-32).
-- The store's primitive name, tried again (prim_retries times, a pause between) while it
-- fails with other than a bug; final(a, b) says which answers are not failures.
local function retried(self, final, name, ...)
    local s = self.store
    local err, class
    for attempt = 1, self.prim_retries + 1 do
        local a, b, c = s[name](s, ...)
        if final(a, b) then return a, b, c end
        err, class = b, c
        if class == "bug" then break end
        if attempt <= self.prim_retries then self.pause(attempt) end
    end
    error({ ledger_store_failure = true, name = name, err = err, class = class }, 0)
end

local function written(a) return a ~= nil end
local function read(a, b) return a ~= nil or b == nil end

function Ledger:_p(name, ...)
    -- LED-71: a leased engine's write runs with its lease's guard
    if self.lease and lease_mod.WRITES[name] then return phases.write(self, name, ...) end
    -- LED-73: a lone write of postings empties the plan cache (before and after it)
    if self.pcache and plan_cache.POSTING_WRITES[name] then
        plan_cache.clear(self.pcache)
        local r = { retried(self, written, name, ...) }
        plan_cache.clear(self.pcache)
        return unpack(r, 1, table.maxn(r))
    end
    return retried(self, written, name, ...)
end

local function store_failure(e)
    return type(e) == "table" and e.ledger_store_failure
end

-- Reads may legitimately return nil (no row): they do not go through _p's nil check.
function Ledger:_read(name, ...)
    return (retried(self, read, name, ...))
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

_M.fail = fail
_M.guard = guard
_M.hex = hex
_M.EVENT_KIND = EVENT_KIND
_M.FIRST_PAGE = FIRST_PAGE
_M.MAX_INPUTS = MAX_INPUTS
_M.SELECT_LIMIT = SELECT_LIMIT
_M.asset_key = asset_key
_M.net_pair = view.net_pair
_M.HELD = HELD
_M.HANDED = HANDED
_M.IN_FLIGHT = IN_FLIGHT
_M.RACE = RACE
_M.store_failure = store_failure
_M.CLAIM_PREFIX = CLAIM_PREFIX
_M.methods = Ledger
return _M
