-- ron.ledger.ledger: the engine (issue 15, docs/LEDGER.md "The commit path"). Accounts,
-- commit, reverse, recover, balances, history and the event feed over any Store
-- (lua/ron/ledger/store/*: the same primitives with the same counts on every backend).
--
--   local L = require("ron.ledger.ledger")
--   local led = L.new { store = s, book = "main", node = "n1", clock = fn_ms?, audit = fn?,
--                       flush = false? }   -- false: the caller calls led:flush() (LED-50)
--   led:recover()
--   led:create_account { id = 16B, policy = "no_overdraft"|"capped"|"uncapped", floor = n }
--   local r, err, code = led:commit { intent =, body_hash =?, movements =, metadata =?,
--                                     overdraft = { [from] = receivable }? }
--   local results = led:commit_many { req, req, ... }  -- { { r, err, code } per request }:
--                   the answers of committing them one by one, round trips per batch
--                   (the batch path, engine/batch.lua, LED-51..LED-56)
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
--
-- This file builds the Ledger class and the module's API; the engine's concerns live in
-- lua/ron/ledger/engine/ (base: codes, helpers, store calls; accounts; reads; requests;
-- resolve; saga: the single path; batch, batch_plan, batch_final: the batch path;
-- recovery), each returning its methods, which are installed below on the one class.
local clock = require("ron.base.clock")
local accounts = require("ron.ledger.engine.accounts")
local base = require("ron.ledger.engine.base")
local batch = require("ron.ledger.engine.batch")
local batch_atomic = require("ron.ledger.engine.batch_atomic")
local batch_final = require("ron.ledger.engine.batch_final")
local batch_plan = require("ron.ledger.engine.batch_plan")
local reads = require("ron.ledger.engine.reads")
local recovery = require("ron.ledger.engine.recovery")
local requests = require("ron.ledger.engine.requests")
local resolve = require("ron.ledger.engine.resolve")
local saga = require("ron.ledger.engine.saga")

local type = type

local hex = base.hex

local _M = {}

-- The engine's codes and the predicates over its errors (ron.ledger.engine.base).
_M.ERR, _M.NAME, _M.RETRY = base.ERR, base.NAME, base.RETRY
_M.is_in_flight, _M.is_contention, _M.is_held = base.is_in_flight, base.is_contention,
    base.is_held
_M.body_hash = requests.body_hash
_M._batch_ctx = recovery._batch_ctx

local Ledger = {}
Ledger.__index = Ledger

-- Every concern's methods on the one class; a name two concerns define is a bug.
for _, m in ipairs { base, accounts, reads, requests, resolve, saga, batch, batch_plan,
                     batch_final, batch_atomic, recovery } do
    for name, f in pairs(m.methods) do
        assert(Ledger[name] == nil, name)
        Ledger[name] = f
    end
end


local function random_nonce()
    local f = io.open("/dev/urandom", "rb")
    local s = f and f:read(8) or tostring(os.time()) .. tostring({})
    if f then f:close() end
    return hex(s)
end

-- opts[k] when given, else whether the store is PostgreSQL's (a switch on by default there)
local function on_postgres(opts, k)
    if opts[k] == nil then return opts.store.backend == "postgres" end
    return opts[k] == true
end

function _M.new(opts)
    assert(type(opts) == "table" and opts.store, "ron.ledger.ledger: opts.store required")
    local self = setmetatable({
        store = opts.store,
        book = opts.book or "main",
        node = opts.node or "n1",
        clock = opts.clock or clock.wall_ms, -- a transfer's created_at_ms
        audit = opts.audit,
        check = opts.check, -- test hook: called with every last-step validation's inputs
        pause = opts.pause or function() end, -- between waits (a head held by another saga)
        nonce = opts.nonce or random_nonce(),
        max_attempts = opts.max_attempts or 8,
        head_waits = opts.head_waits or 64,
        prim_retries = opts.prim_retries or 3,
        -- wip/perf (LED-50): flush = false when the caller flushes (group commit)
        flush_on_ack = opts.flush ~= false,
        -- LED-72: a single commit tries the one-transaction commit first, LED-74: a batch
        -- its one-transaction batch (false: the saga's phases only)
        one_tx = opts.one_tx ~= false,
        -- LED-73: the pairs the one-transaction commit remembers (ron.ledger.engine.plan_cache:
        -- a payer's postings, balances; 0: none, every commit reads first)
        plan_cache = opts.plan_cache or 4096,
        -- LED-58: accounts whose history does not list transfers ({ [id16] = true }: a
        -- book's system accounts that every rated slice touches; the feed lists them all)
        unindexed = opts.unindexed or {},
        -- LED-57: a batch's independent writes at once (_together); needs the host's tasks
        overlap = on_postgres(opts, "overlap"),
        -- the batch's rows in lock order (outputs by the balance rows they update, claims by
        -- intent, reserved postings by id): where writers run at once and wait on each
        -- other's row locks (PostgreSQL); SQLite's one writer and the memory store never
        -- wait, and the sorts cost the rating 3-6 us of loop CPU a slice (issue 25)
        lock_order = on_postgres(opts, "lock_order"),
        -- LED-63: the batch plan's accounts from a bounded cache (0: none); 16384: a
        -- tenant has 3 accounts, 4096 thrashed at 2048 tenants
        account_cache = opts.account_cache or 16384,
        acache = {}, acache_n = 0,
        seq = 0,
        inflight = {},
        -- LED-71: the sagas this engine took over from a dead peer and has not decided yet
        -- (id -> true; Ledger:resume_idle), at most TAKEN_MAX
        taken = {}, taken_n = 0,
        stats = { commits = 0, rejections = 0, replays = 0, resolves = 0, head_waits = 0,
                  recovered = 0 },
    }, Ledger)
    return self
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

return _M
