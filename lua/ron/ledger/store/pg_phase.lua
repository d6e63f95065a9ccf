-- ron.ledger.store.pg_phase: store:apply on PostgreSQL (LED-67; the contract is
-- ron.ledger.store's "Phases", the shared rules ron.ledger.store.phase's).
--
-- A phase is ONE round trip: its primitives' statements go to one connection of the pool in
-- libpq's pipeline mode (pq.c conn:pipeline), followed by a sync, so the server runs them
-- as one implicit transaction and commits at the sync; a statement that fails aborts the
-- rest and the whole transaction. The statements are the primitives' own (ron.ledger.store.sql,
-- collected by running each primitive against a driver that hands its statement over
-- instead of running it), with three differences:
--   - a guard is checked by the server: an op with `expect` has its statement wrapped so
--     that its count goes through @rl_expect(count, expect), which raises SQLSTATE RL001
--     when they differ; an insert with a guard runs in its plain form (no ON CONFLICT DO
--     NOTHING: a duplicate key, 23505, is the same miss). Either aborts the transaction:
--     nothing of the phase applied, and the answer names the op;
--   - when the phase consumes or inserts postings, it locks the balance rows they touch in
--     key order just before the first posting write (the projection's triggers touch them
--     statement by statement, and two phases in opposite directions would otherwise wait
--     for each other in a cycle: PostgreSQL finds a deadlock only after deadlock_timeout,
--     1 s), and the phase's writes of intents, transfers, heads and records are sent
--     before that lock (order below: the lock is held to the commit);
--   - before its first event it takes the book's transaction lock (pg_advisory_xact_lock):
--     every phase numbers the book's next seq after the one before it committed, instead of
--     colliding on it and starting over. The event is the phase's last write, so the lock
--     is held for the shortest time.
-- opts.flush (durability "ack"): the flush statement (LED-50) is the phase's last statement,
-- before the sync: it turns synchronous_commit on for this transaction and writes its WAL
-- record, so the phase's own commit waits for the WAL flush, which makes every earlier
-- asynchronous commit durable too: one round trip and one transaction for the phase and
-- its durability (before issue 25: the flush after the sync, a second transaction). A phase
-- whose guard misses rolls back with its flush: res.flushed is set only when it committed.
local pg = require("ron.ledger.store.pg_wire")
local sql = require("ron.ledger.store.sql")
local schema = require("ron.ledger.store.schema")
local sql_text = require("ron.ledger.store.sql_text")

local coroutine, error, ipairs, pairs, setmetatable, tonumber, tostring, format =
      coroutine, error, ipairs, pairs, setmetatable, tonumber, tostring, string.format

local _M = {}

-- A driver that hands each statement to the phase (a coroutine yield) instead of running
-- it; the phase resumes the primitive with the statement's result.
local Collect = { phase = true }
Collect.__index = Collect
function Collect.write(_, text, binds, _, plain)
    return coroutine.yield("write", text, binds, nil, plain)
end
function Collect.read(_, text, binds, rtypes, plain)
    return coroutine.yield("read", text, binds, rtypes, plain)
end
function Collect.atomic(_, fn) return fn() end

local pack = require("ron.ledger.store.phase").pack

local POSTING_WRITES = { deactivate_postings = true, deactivate_many = true,
                         insert_postings = true }
local APPENDS = { append_event = true, append_events = true }

local function bytea_col(n) return { array = "bytea", n = n } end
local function int_col(n) return { array = "int8", n = n } end

-- The balance rows the phase's posting writes touch, locked in key order: the rows of the
-- postings it consumes (read from postings) and of those it inserts (not Inactive).
-- (FEW: the lists counted as 1 row, so the generic plan probes the keys: sql_text.FEW)
local FEW = sql_text.FEW
local LOCK_BALANCES = "SELECT 1 FROM @balances b JOIN (SELECT p.account, p.asset_code, p.scale, "
    .. "p.shard FROM @postings p JOIN unnest(?B, ?I) WITH ORDINALITY AS q (t, i, n) "
    .. "ON p.transfer_id = q.t AND p.idx = q.i WHERE q.n" .. FEW .. " UNION "
    .. "SELECT o.account, o.asset_code, o.scale, o.shard FROM unnest(?B, ?B, ?I, ?I) "
    .. "WITH ORDINALITY AS o (account, asset_code, scale, shard, n) WHERE o.n" .. FEW .. ") "
    .. "AS k ON b.account = k.account AND b.asset_code = k.asset_code AND b.scale = k.scale "
    .. "AND b.shard = k.shard ORDER BY b.account, b.asset_code, b.scale, b.shard FOR UPDATE OF b"
_M.LOCK_BALANCES = LOCK_BALANCES

local function lock_balances(st, ops)
    local ti, ii, oa, oc, os_, osh = bytea_col(0), int_col(0), bytea_col(0), bytea_col(0),
                                     int_col(0), int_col(0)
    local any = false
    for _, op in ipairs(ops) do
        local name = op[1]
        if name == "deactivate_postings" then
            for _, id in ipairs(op[2]) do
                ti.n, ii.n = ti.n + 1, ii.n + 1
                ti[ti.n], ii[ii.n] = id.transfer_id, id.index
            end
        elseif name == "deactivate_many" then
            for _, e in ipairs(op[2]) do
                ti.n, ii.n = ti.n + 1, ii.n + 1
                ti[ti.n], ii[ii.n] = e.id.transfer_id, e.id.index
            end
        elseif name == "insert_postings" then
            for _, p in ipairs(op[2]) do
                if (p.status or "active") ~= "inactive" then
                    oa.n = oa.n + 1
                    oa[oa.n], oc[oa.n] = p.account, p.asset.code
                    os_[oa.n], osh[oa.n] = p.asset.scale, sql.shard(p.id.transfer_id, p.id.index)
                end
            end
        end
        any = any or (POSTING_WRITES[name] and #op[2] > 0)
    end
    if not any then return nil end
    oc.n, os_.n, osh.n = oa.n, oa.n, oa.n
    local text = st.sql_cache.lock_balances
    if not text then
        text = sql.render("postgres", st.prefix, LOCK_BALANCES)
        st.sql_cache.lock_balances = text
    end
    return { text, pg.params { n = 6, ti, ii, oa, oc, os_, osh }, prep = true }
end

local function event_lock(st, book)
    return { "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
             { n = 1, "ron.ledger events\0" .. tostring(st.schema) .. "\0" .. book },
             prep = true }
end

-- The statement of an op with a guard: its count through @rl_expect (RL001 when it is not
-- the expected one). A write (INSERT / UPDATE) gets RETURNING 1 and is counted; a
-- primitive that already answers its count as a row (store_transfer, store_transfers,
-- append_events) gets its count(*) wrapped.
local function guarded(st, kind, text, nbinds)
    local fn = st.prefix .. "rl_expect"
    local k = "$" .. (nbinds + 1) .. "::bigint"
    if kind == "write" then
        return "WITH w AS (" .. text .. " RETURNING 1) SELECT " .. fn .. "(count(*), " .. k
               .. ") FROM w"
    end
    local out, m = text:gsub("SELECT count%(%*%)", "SELECT " .. fn .. "(count(*), " .. k .. ")")
    if m ~= 1 then error("ron.ledger.store.pg_phase: no count to guard in: " .. text, 0) end
    return out
end

-- Runs each op's primitive up to its statement. -> list of { i, kind, text, binds, rtypes,
-- co } (an op that needs no statement answers at once: done[i]).
local function collect(st, ops)
    local view = setmetatable({ drv = setmetatable({}, Collect), dialect = "postgres",
                                prefix = st.prefix, sql_cache = st.sql_cache,
                                durability = st.durability, schema = st.schema }, sql.Store)
    local stmts, done = {}, {}
    for i, op in ipairs(ops) do
        local co = coroutine.create(function()
            return pack(view[op[1]](view, unpack(op, 2, table.maxn(op))))
        end)
        local r = pack(coroutine.resume(co))
        if not r[1] then error(r[2], 0) end -- misuse: as the primitive raises it
        if coroutine.status(co) == "dead" then
            done[i] = r[2]
        else
            local kind, text, binds, rtypes, plain = r[2], r[3], r[4], r[5], r[6]
            local nb = binds.n or #binds
            local b = binds
            if op.expect ~= nil then
                text = guarded(st, kind, plain or text, nb)
                b = {}
                for j = 1, nb do b[j] = binds[j] end
                b[nb + 1], b.n = op.expect, nb + 1
            end
            stmts[#stmts + 1] = { i = i, kind = kind, text = text, binds = b, rtypes = rtypes,
                                  co = co }
        end
    end
    return stmts, done
end

-- The phase's statements in the order they are sent (issue 25): the balance rows' lock
-- just before the first posting write (their triggers update those rows), and the writes
-- of tables no posting write touches (MOVABLE: intents, transfers, heads, records, the
-- lease's check) that follow it moved ahead of it; from the first event on (the book's
-- lock) the rest as it is. A statement of any other kind after the first posting write
-- keeps its place and every later one too (it may read what the posting writes change);
-- a phase with a posting write after its first event goes as it is, the lock first.
-- Why: the lock is held to the commit, and the hot rows (revenue, a shared source: every
-- batch touches all their shards) serialize every phase that writes them. Taken first, as
-- it was, it held them over the claims, the reservation, the guards, the transfers and the
-- outcomes too, and four rating lanes' phases ran one after another (`--pg-stats`: the
-- lock statement was ~40 % of the server's statement time, mostly waiting; docs/LEDGER.md
-- "PostgreSQL's balance lock"). Deadlocks: after its lock a phase waits only for rows it
-- created or reserved itself and for the book's lock, which a phase takes after its own
-- balance lock or without one; before it, the claims a phase inserts are in key order and
-- the postings it reserves in id order (ron.ledger.engine.batch_atomic; the single path's
-- one posting list is sorted already). -> rest, posts, tail
local MOVABLE = { put_intent = true, put_intents = true, store_transfer = true,
                  store_transfers = true, release_head = true, delete_saga = true,
                  save_saga = true, check_lease = true }

local function order(ops, stmts)
    local rest, posts, tail, stuck = {}, {}, {}, false
    for _, s in ipairs(stmts) do
        local name = ops[s.i][1]
        if #tail > 0 or APPENDS[name] then tail[#tail + 1] = s
        elseif #posts == 0 and not POSTING_WRITES[name] then rest[#rest + 1] = s
        elseif MOVABLE[name] and not stuck then rest[#rest + 1] = s
        else
            posts[#posts + 1] = s
            stuck = stuck or not POSTING_WRITES[name]
        end
    end
    -- (a posting write after an event: the whole phase as it is, the lock first)
    for _, s in ipairs(tail) do
        if POSTING_WRITES[ops[s.i][1]] then return {}, stmts, {} end
    end
    return rest, posts, tail
end
_M.order = order -- (spec/ron/ledger/pg_phase_order_spec.lua)

local MISS = { RL001 = true, ["23505"] = true }

-- the phase's statements as named prepared statements (ron.base.net.pg_prepared, issue 25:
-- the server parsed and planned each one again per phase, about as long as it ran them),
-- the list joins too: their lists are counted as 1 row (sql_text.FEW), so their generic
-- plans probe the primary keys as the custom ones do (before, a hash join over a scan of
-- the postings: 0.2 ms at 1,000 postings and growing; spec "generic plans")
local PREPARE = { prepare = true }

-- The op's own answer from its statement's result (the primitive resumed with it: a
-- guarded write's count is its row, a read's rows are decoded as the driver's).
local function answer(s, op, r)
    local v
    if s.kind == "read" then v = pg.decode(r, s.rtypes)
    elseif op.expect ~= nil then v = tonumber(r[1] and r[1][1]) or 0
    else v = r.affected or 0 end
    local ok, res = coroutine.resume(s.co, v)
    if not ok then error(res, 0) end
    if coroutine.status(s.co) ~= "dead" then
        error(format("ron.ledger.store.pg_phase: %s made a second statement", op[1]), 0)
    end
    return res
end

function _M.apply(st, ops, opts)
    local stmts, done = collect(st, ops)
    local res = { ok = true }
    for i in pairs(done) do res[i] = done[i] end
    -- an op that needed no statement and missed its guard: nothing sent, nothing applied
    for i, op in ipairs(ops) do
        if done[i] and op.expect ~= nil and done[i][1] ~= op.expect then
            res.ok, res.at = false, i
            return res
        end
    end
    if #stmts == 0 then return res end
    local list, of = {}, {}
    local events = false
    local function add(s)
        if not events and APPENDS[ops[s.i][1]] then
            events = true
            list[#list + 1] = event_lock(st, ops[s.i][2])
        end
        list[#list + 1] = { s.text, pg.params(s.binds), prep = true }
        of[#list] = s
    end
    local rest, posts, tail = order(ops, stmts)
    for _, s in ipairs(rest) do add(s) end
    if #posts > 0 then
        local lock = lock_balances(st, ops)
        if lock then list[#list + 1] = lock end
    end
    for _, s in ipairs(posts) do add(s) end
    for _, s in ipairs(tail) do add(s) end
    -- the flush as the phase's last statement: its commit is then synchronous (one
    -- transaction, one WAL flush; issue 25), and it has a WAL record of its own whatever
    -- the ops wrote
    local flush = opts and opts.flush and st.durability == "ack"
    if flush then
        list[#list + 1] = { schema.expand(sql.FLUSH.postgres, st.prefix), prep = true }
    end
    local n_phase = #list
    list[#list + 1] = "sync"
    local out, err, sqlstate, cls = st.drv.db:pipeline(list, st.prepare and PREPARE or nil)
    if not out then return pg.fail(err, sqlstate, cls) end
    -- in order: the first failure aborted the rest, and the whole transaction with it
    for k = 1, n_phase do
        local r, s = out[k], of[k]
        if r.error then
            if s and ops[s.i].expect ~= nil and MISS[r.sqlstate] then
                res.ok, res.at = false, s.i
                return res
            end
            return pg.fail(r.error, r.sqlstate, "server")
        end
        if r.aborted then return pg.fail("aborted without an error", nil, "client") end
        if s then res[s.i] = answer(s, ops[s.i], r) end
    end
    -- (every statement answered without an error, the flush's included: committed so)
    if flush then res.flushed = true end
    return res
end

return _M
