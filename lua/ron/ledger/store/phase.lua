-- ron.ledger.store.phase: the store's transaction call, shared by every backend
-- (docs/LEDGER.md "Phases", LED-67; the contract is ron.ledger.store's "Phases").
--
--   local res, err, class = store:apply(ops [, { flush = true }])
--   ops = { { "name", args..., expect = n? }, ... }   the contract's primitives, in order
--   res = { ok = true, [i] = { n = k, results of op i... } }       every op ran, every
--                                                                    expect met: committed
--       | { ok = false, at = i, [1..i] = results }                  op i's first result was
--                                                                    not its expect: nothing
--                                                                    of the phase applied
--   nil, err, class                                                  a store failure: nothing
--                                                                    applied, or (class io,
--                                                                    the reply lost) maybe all
--   res.flushed                                                      opts.flush: after the
--                                                                    commit, flush() (LED-50)
--                                                                    made it durable
--
-- The primitives stay the dumb ones of the contract, each with its own count; a phase only
-- puts them in ONE transaction and ONE call to the store: no reader sees a state between
-- them, one commit covers them, and an `expect` (a guard) turns "this op did not count what
-- the engine planned" into "nothing happened" instead of a state to read back and repair.
-- This module holds what every backend shares: the ops' check and the sequential run (the
-- memory store and SQLite inside their transaction; PostgreSQL pipelines the same
-- statements, ron.ledger.store.pg_phase).
local type, error, ipairs, pairs, select, format =
      type, error, ipairs, pairs, select, string.format

local prof = require("ron.ledger.store.sqlite_profile")

local _M = {}

_M.MAX_OPS = 4096

-- The primitives a phase may hold: the contract's reads and writes (not flush, close, many
-- or apply itself).
_M.PRIMITIVES = {}
for _, n in ipairs {
    "create_book", "get_book", "list_books",
    "create_account", "append_account_version", "get_account", "get_accounts",
    "insert_postings", "reserve_postings", "release_postings", "deactivate_postings",
    "get_postings", "get_postings_by_account", "get_balances", "get_balance",
    "count_accounts_at", "count_balances_at_least", -- the one-transaction commit's guards
    "count_balances_at_most",
    "ensure_head", "acquire_head", "release_head", "get_heads",
    "store_transfer", "get_transfer",
    "put_intent", "get_intent",
    "save_saga", "delete_saga",
    "append_event", "get_event", "head_seq",
    "get_stream", "advance_stream",
    "get_intents", "put_intents", "get_postings_by_pairs", "deactivate_many",
    "store_transfers", "append_events", "get_events_for", "get_streams", "insert_streams",
    "advance_streams",
    "check_lease", -- a leased engine's guard (LED-71)
} do _M.PRIMITIVES[n] = true end

-- The primitives that write (a leased engine runs each in a transaction with its guard,
-- ron.ledger.lease), and the ones that only read: every other primitive but the lease's
-- guard. An offloaded SQLite store runs reads on its reader connection (issue 25).
_M.WRITES = {}
for _, n in ipairs {
    "create_book", "create_account", "append_account_version",
    "insert_postings", "reserve_postings", "release_postings", "deactivate_postings",
    "ensure_head", "acquire_head", "release_head", "store_transfer", "put_intent",
    "save_saga", "delete_saga", "append_event", "advance_stream",
    "put_intents", "deactivate_many", "store_transfers", "append_events", "insert_streams",
    "advance_streams",
} do _M.WRITES[n] = true end
_M.READS = {}
for n in pairs(_M.PRIMITIVES) do
    if not _M.WRITES[n] and n ~= "check_lease" then _M.READS[n] = true end
end

-- A phase that only reads (no write, no guard), and asks no flush: it may run on any
-- connection that sees every commit made before it began.
function _M.reads_only(ops, opts)
    if opts ~= nil and type(opts) == "table" and opts.flush then return false end
    if type(ops) ~= "table" then return false end
    for i = 1, #ops do
        local op = ops[i]
        if type(op) ~= "table" or not _M.READS[op[1]] then return false end
    end
    return true
end

local function misuse(msg) error("ron.ledger.store: apply: " .. msg, 3) end

function _M.check(ops, opts)
    if type(ops) ~= "table" then misuse("expects a list of { \"name\", args..., expect = n? }") end
    if #ops > _M.MAX_OPS then misuse(format("at most %d ops per phase", _M.MAX_OPS)) end
    if opts ~= nil and type(opts) ~= "table" then misuse("opts must be a table") end
    for i, op in ipairs(ops) do
        if type(op) ~= "table" or not _M.PRIMITIVES[op[1]] then
            misuse(format("op %d: not a primitive a phase may hold: %s", i,
                          tostring(type(op) == "table" and op[1] or op)))
        end
        local e = op.expect
        if e ~= nil and (type(e) ~= "number" or e < 0 or e % 1 ~= 0) then
            misuse(format("op %d: expect must be a count", i))
        end
    end
end

-- (...) as a list with its count: the store's modules' one copy (a result may hold nils)
local function pack(...) return { n = select("#", ...), ... } end
_M.pack = pack

-- The ops one after the other on s (inside the caller's transaction): the answer above, or
-- nil, err, class at the first failure. The caller rolls back unless res.ok.
function _M.run(s, ops)
    local res = { ok = true }
    for i, op in ipairs(ops) do
        local w0, c0
        if prof.scope then w0, c0 = prof.now() end
        local r = pack(s[op[1]](s, unpack(op, 2, table.maxn(op))))
        if w0 then prof.add(prof.op_key(op[1]), w0, c0) end
        if r[1] == nil and r[2] ~= nil then return nil, r[2], r[3] end
        res[i] = r
        if op.expect ~= nil and r[1] ~= op.expect then
            res.ok, res.at = false, i
            return res
        end
    end
    return res
end

return _M
