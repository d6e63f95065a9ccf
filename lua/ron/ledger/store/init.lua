-- ron.ledger.store: where the ledger's state lives, as a Store of dumb primitives (issue 15,
-- docs/LEDGER.md "Store", requirement ids LED-16..LED-24). The engine
-- (ron.ledger.ledger) makes every decision; a store only answers conditional statements.
--
--   local store = require("ron.ledger.store")
--   local s, err, class = store.open { backend = "sqlite", path = "ledger.db" [, ...] }
--   local s, err, class = store.open { backend = "postgres", conninfo = "...", schema = "..." }
--   local s = store.open { backend = "memory" }     -- ron.ledger.store.memory, when present
--
-- Options per backend: ron.ledger.store.sqlite (path, synchronous, busy_timeout_ms, offload,
-- max_queue, cache_mb, checkpoint_ms, reader) and ron.ledger.store.postgres (conninfo or db,
-- schema, connections). open() creates the tables idempotently and refuses a newer schema
-- version (LED-24).
--
-- THE CONTRACT (every backend, same semantics; spec/ron/ledger/store_conformance.lua checks
-- it on each of them):
--
-- Values are plain Lua tables. Ids are raw byte strings: account 16 B, transfer 32 B, a
-- posting id { transfer_id = 32 B, index = n }. Amounts, versions, seqs are integers: Lua
-- numbers when |x| <= 2^53, int64_t cdata beyond (what ron.ledger returns; both are
-- accepted). Assets { code = bytes, scale = n }. Statuses are the names of ron.ledger
-- ("active" | "pending_inactive" | "inactive"; "open" | "frozen" | "closed";
-- "no_overdraft" | "capped" | "uncapped").
--
-- Write primitives are ONE conditional statement each (LED-16) and return the affected
-- count, or nil, "Code: message", class with class "retry" (serialization failure 40001,
-- deadlock 40P01, SQLITE_BUSY / SQLITE_LOCKED, an offloaded store's full queue), "io"
-- (connection, disk, timeout) or "bug" (anything else: a constraint, bad SQL, misuse
-- reported by the database). Misuse found before any I/O (a wrong type, an id of the wrong
-- length) raises. Reads return tables, or nil when absent, or nil, err, class.
--
-- Books       create_book(id, meta) -> n; get_book(id) -> { id, meta }; list_books()
-- Accounts    create_account(acct) -> n        (acct.version must be 1; a second create: 0)
--   (LED-17)  append_account_version(acct) -> n (only when the current max version is
--             acct.version - 1: a gap, an overwrite or the loser of a race counts 0)
--             get_account(id) -> latest { id, version, policy, floor, status, bytes };
--             get_accounts(ids) -> { [id] = latest }; get_account_history(id) -> list by
--             version; list_accounts() -> latest of each. bytes = ron.ledger.encode_account
--             (computed when the caller gives none). count_accounts_at(list) -> how many
--             of list ({ id, version }) are their account's latest version (a guard, LED-72).
-- Postings    insert_postings(list) -> n inserted (present ids count 0); a posting is
--   (LED-18)  { id, account, asset, amount, status = "active"?, reservation?, created_by =
--             id.transfer_id?, consumed_by? }
--             reserve_postings(ids, rid) -> n     (active -> pending_inactive, stamped rid)
--             release_postings(ids, rid) -> n     (pending_inactive with reservation rid ->
--                                                  active, reservation cleared)
--             deactivate_postings(ids, rid, consumed_by) -> n  (rid: pending_inactive with
--                                                  that rid -> inactive; rid nil: active ->
--                                                  inactive; consumed_by recorded)
--             get_postings(ids) -> list (any status, by id); get_postings_by_account(account,
--             asset?, status?, limit?, order?) order "largest" = amount descending then id
--             ascending (selection's order, LED-10), "id" (default) = id ascending.
--             At most 512 postings (sql.MAX_POSTINGS) or 1024 ids or pairs (sql.MAX_BATCH)
--             per call.
-- Balances    get_balances(pairs) -> { amount per pair in order } (pairs { account, asset });
--   (LED-19)  get_balance(account, asset). Sum of the pair's Active + PendingInactive
--             postings, read from the projection table `balances` (16 shards per pair,
--             shard = (index + first byte of the transfer id) % 16) that triggers on
--             `postings` maintain in the posting's own statement: O(1) in the history.
--             count_balances_at_least(list) -> how many of list ({ account, asset, min })
--             have a balance of at least min (a guard, LED-72); count_balances_at_most(list)
--             -> how many of list ({ account, asset, max }) have one of at most max (a
--             guard against a credit past 2^63 - 1 when another writer raised the pair).
-- Heads       ensure_head(account, asset) -> n (creates the lease row, version 0);
--   (LED-20)  acquire_head(account, asset, saga) -> n (1: held by saga, version + 1; 0: held
--             by someone, or no row); release_head(account, asset, saga) -> n (only its
--             holder); get_heads(pairs) -> { [i] = { version, holder } | nil, n = #pairs }
-- Transfers   store_transfer({ id, bytes, intent, book, created_at_ms, metadata },
--             involved_accounts) -> n (1 first time, 0 after); the transfer row and its
--             transfer_accounts rows are atomic (PostgreSQL: one statement; SQLite: one
--             transaction). get_transfer(id) -> { n, id, bytes, intent, book, created_at_ms,
--             metadata }; get_transfers_for_account(account, limit, before_n?) newest first;
--             list_transfers(after_n?, limit) oldest first (n: the row's insertion number).
-- Intents     put_intent(key, { status = "committed"|"rejected"|"claimed", transfer_id?, code?,
--   (LED-21)  message?, body_hash? }) -> n (the first outcome stays: a second put counts 0);
--             get_intent(key) -> outcome + key
-- Sagas       save_saga(id, phase, data, node) -> 1 (upsert; phase "reserving" |
--             "finalizing"); list_pending_sagas(node?) -> list; delete_saga(id) -> n;
--             list_finalizing_sagas() -> the list of phase "finalizing" only (any node, by
--             id: a short payer's look, LED-32, reads no reserving record's data)
-- Events      append_event(book, transfer_id, kind, data) -> n: seq = max + 1 of the book in
--   (LED-22)  the same statement, gapless; 0 when (book, transfer_id, kind) exists OR a racing
--             insert took the seq (get_event(book, transfer_id, kind) tells which; the
--             caller retries the latter). get_events_since(book, after_seq, limit) by seq;
--             head_seq(book) (0 when empty).
-- Streams     get_stream(tenant, dimension) -> { seq, b3 } | nil; advance_stream(tenant,
--             dimension, seq, b3, prev_seq, prev_b3) -> n (prev_seq nil: the first slice,
--             insert; else only from exactly (prev_seq, prev_b3)).
-- Meta        get_meta(key), put_meta(key, value) (insert once); close().
-- Batch primitives (LED-51): what the engine's commit_many and the exporter's put_many use
--   so that the round trips are per batch. Each is still ONE statement (store_transfers on
--   SQLite: two in one transaction, as store_transfer; append_events on SQLite: the INSERT
--   and a read of the book's max in one transaction), bounded per call like the others:
--             get_intents(keys) -> { [key] = outcome + key }
--             put_intents({ { key =, outcome = } }) -> n (present keys keep theirs: 0)
--             get_postings_by_pairs({ { account, asset, status, limit } }) -> { [i] = that
--             query's postings, largest first } (at most 128 queries: UNION ALL of index
--             range scans, each with its own LIMIT)
--             deactivate_many({ { id =, consumed_by = } }, rid) -> n (PendingInactive with
--             reservation rid -> Inactive, each consumed by its own transfer)
--             store_transfers({ { rec =, involved = } }) -> n (as store_transfer, at most
--             6000 parameters: 6 per transfer + 2 per involved account)
--             append_events(book, { { transfer_id =, kind =, data = } }) -> n, first_seq
--             (the rows not there yet take max+1, max+2, ... in the list's order; n =
--             #list: their seqs are first_seq .. first_seq + n - 1; a row whose seq a
--             racing insert took is skipped: the caller reads back and appends it again)
--             get_events_for(book, transfer_ids, kind) -> { [transfer_id] = event }
--             get_streams({ { tenant, dimension } }) -> { [tenant .. "\0" .. dimension] =
--             { seq, b3 } }; insert_streams({ { tenant, dimension, seq, b3 } }) -> n (first
--             heads, once); advance_streams({ { tenant, dimension, seq, b3, prev_seq,
--             prev_b3 } }) -> n (each only from exactly its prev; one entry per stream)
-- Batches     many({ { "name", args... }, ... }) -> { { results... }, ... }: the primitives in
--             order, each its own statement, stopping after the first failure (the SQL
--             stores; the offloaded SQLite store runs the list in one pool call). Optional:
--             a backend without it is driven one primitive at a time.
-- Phases      apply(ops [, { flush = true }]) (LED-67; every backend): the primitives of one
--   (LED-67)  saga phase in ONE transaction and ONE call. ops = { { "name", args...,
--             expect = n? }, ... } (the primitives above, reads included; not flush, close,
--             many, apply). -> { ok = true, [i] = { n =, results of op i... } } when every op
--             ran and every expect met (committed); { ok = false, at = i, [1..i-1] = results }
--             when op i's count was not its expect (a guard: nothing of the phase applied);
--             nil, err, class on a failure (nothing applied; class "io": maybe all of it, the
--             reply lost). Every op is the primitive's own statement with its own count; no
--             reader sees a state between them. opts.flush: flush() after the commit, in the
--             same call (res.flushed). Memory: an undo journal, the fault hook around the call
--             and each op (store.in_apply inside); SQLite: one BEGIN IMMEDIATE transaction
--             (the offloaded driver: one pool hop), a primitive's own two statements in a
--             savepoint; PostgreSQL: one pipeline on one connection, one round trip
--             (ron.ledger.store.pg_phase: guards checked by the server, balance rows locked
--             in key order, the book's lock before its events).
local _M = {}

_M.BACKENDS = { sqlite = "ron.ledger.store.sqlite", postgres = "ron.ledger.store.postgres",
                memory = "ron.ledger.store.memory" }

function _M.open(opts)
    if type(opts) ~= "table" then error("store.open: expects an options table", 2) end
    local mod = _M.BACKENDS[opts.backend]
    if not mod then
        error("store.open: backend must be \"sqlite\", \"postgres\" or \"memory\", got "
              .. tostring(opts.backend), 2)
    end
    local o = {}
    for k, v in pairs(opts) do if k ~= "backend" then o[k] = v end end
    return require(mod).open(o)
end

return _M
