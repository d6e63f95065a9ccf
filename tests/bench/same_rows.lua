-- same_rows.lua: the "same rows" baseline of the ledger's benchmarks (issue 15: "a plain
-- INSERT loop of the same rows"; issue 25: what the rows a transfer writes cost by
-- themselves). The rows a measured run wrote, recorded from the write primitives' arguments
-- while it ran (postings, transfers, their transfer_accounts rows, intents and the engine's
-- claims, events), are INSERTed again into a scratch copy of the store's tables (schema.ddl:
-- the same columns, keys and indexes, no triggers: a plain INSERT maintains no projection)
-- with plain multi-row INSERTs (no ON CONFLICT, no reads, no saga record, no guard, the
-- transfer's n and the event's seq given by the loop), in the run's own groups, each group
-- flushed once, on a connection to the same store. Not written: the balance projection's
-- upserts, the reservations' and consumptions' UPDATEs of postings already stored, the saga
-- record, the stream heads.
--
--   local SR = require("same_rows")
--   local rec = SR.recording(s)        wraps s's write primitives and apply (rec.on, rec.cur)
--   rec.on = true ... rec.on = false   what ran meanwhile is kept, in group rec.cur (or,
--                                      with rec.per_phase, a new group after every phase
--                                      that committed), up to group rec.max when set (the
--                                      lists kept are live heap: the collector walks them
--                                      while the run goes on)
--   SR.freeze(rec)                     what it kept, serialized into one string (no tables)
--   SR.run(s, rec, exec_ddl, o)        (takes what rec kept) -> { rows =, seconds =, by_table = { [t] = seconds,
--                                         commit = (one_tx), flush = },
--                                         groups =, transfers = (rows of transfers), cpu = }
--     s: a store whose drv:write runs one statement now (the synchronous SQLite driver, or
--     PostgreSQL's); exec_ddl(stmt) -> ok; o.one_tx: each group in one transaction
--     (drv:atomic, SQLite) instead of one per statement; o.clock: the wall clock in seconds
--     (default luv's); o.cpu: a clock of this process's CPU (its seconds in .cpu); o.tag:
--     in the scratch tables' names (one set per tag); o.prefill: the scratch tables filled
--     first with as many rows as the store's (below; the transfers copied in .prefilled);
--     o.merge (default 1): every o.merge consecutive groups written as one (groups of 64
--     from the wallet's 32: what 64 connections could put in one commit at most); o.keep:
--     what rec kept stays for another run (frozen rows only).
local sql = require("ron.ledger.store.sql")
local schema = require("ron.ledger.store.schema")
local claims = require("ron.ledger.store.sql_claims")

local format = string.format

local M = {}

M.ROWS = {
    postings = { cols = { "transfer_id", "idx", "account", "asset_code", "scale", "amount",
                          "status", "reservation", "created_by", "consumed_by", "shard" },
                 types = "bibbiiibbbi" },
    transfers = { cols = { "n", "id", "bytes", "intent", "book", "created_at_ms", "metadata" },
                  types = "ibbbbib", overriding = true },
    transfer_accounts = { cols = { "account", "n" }, types = "bi" },
    intents = { cols = { "key", "status", "transfer_id", "code", "message", "body_hash" },
                types = "bbbibb" },
    events = { cols = { "book", "seq", "transfer_id", "kind", "data" }, types = "bibbb" },
    -- SQLite keeps the engine's claims apart (schema 4, ron.ledger.store.sql_claims)
    claims = { cols = { "intent", "status", "transfer_id", "code", "message", "body_hash" },
               types = "bbbibb" },
}
M.ROW_ORDER = { "postings", "transfers", "transfer_accounts", "intents", "claims", "events" }
local ROWS, ROW_ORDER = M.ROWS, M.ROW_ORDER
local PSTATUS = { active = 0, pending_inactive = 1, inactive = 2 }

-- The primitives whose arguments are rows (the lists copied while the run goes on: ~1 us
-- per slice; converted to rows after it)
local RECORDED = { insert_postings = true, store_transfers = true, put_intents = true,
                   append_events = true }

local function keeper(rec)
    return function(name, a, b)
        if rec.max and rec.cur > rec.max then return end
        local l = rec.calls[rec.cur]
        if not l then l = {}; rec.calls[rec.cur] = l end
        -- the list copied (a caller may reuse its table), not its rows
        local list = name == "append_events" and b or a
        local copy = {}
        for i = 1, #list do copy[i] = list[i] end
        if name == "append_events" then l[#l + 1] = { name, a, copy }
        else l[#l + 1] = { name, copy } end
    end
end

function M.recording(s)
    local rec = { on = false, cur = 1, calls = {} }
    local keep = keeper(rec)
    for name in pairs(RECORDED) do
        local orig = s[name]
        s[name] = function(self, a, b, ...)
            if rec.on and not rec.in_phase then keep(name, a, b) end
            return orig(self, a, b, ...)
        end
    end
    -- a phase (LED-67): its primitives, once it committed (PostgreSQL and the offloaded
    -- SQLite store run them outside this instance's methods; the synchronous one through
    -- them, which then record nothing themselves)
    local apply = s.apply
    local nested = not (s.offloaded or s.backend == "postgres")
    s.apply = function(self, ops, o)
        rec.in_phase = nested
        local res, err, cls = apply(self, ops, o)
        rec.in_phase = false
        if rec.on and res and res.ok then
            local any = false
            for _, op in ipairs(ops) do
                if RECORDED[op[1]] then
                    keep(op[1], op[2], op[3])
                    any = true
                end
            end
            if any and rec.per_phase then rec.cur = rec.cur + 1 end
        end
        return res, err, cls
    end
    return rec
end

-- One call's rows into rows[table]; add(t, row, key) -> false for a row seen already
local function call_rows(c, ctr, add)
    local name, a, b = c[1], c[2], c[3]
    if name == "insert_postings" then
        for _, p in ipairs(a) do
            add("postings", { p.id.transfer_id, p.id.index, p.account, p.asset.code,
                              p.asset.scale, p.amount, PSTATUS[p.status or "active"],
                              p.reservation, p.created_by or p.id.transfer_id,
                              p.consumed_by, sql.shard(p.id.transfer_id, p.id.index) },
                p.id.transfer_id .. p.id.index)
        end
    elseif name == "store_transfers" then
        for _, e in ipairs(a) do
            local r = e.rec
            if add("transfers", { ctr.n + 1, r.id, r.bytes, r.intent, r.book,
                                  r.created_at_ms or 0, r.metadata }, r.id) then
                ctr.n = ctr.n + 1
                for _, acc in ipairs(e.involved or {}) do
                    add("transfer_accounts", { acc, ctr.n }, acc .. ctr.n)
                end
            end
        end
    elseif name == "put_intents" then
        for _, e in ipairs(a) do
            local o = e.outcome
            local ci = claims.intent_of(ctr.store, e.key)
            add(ci and "claims" or "intents", { ci or e.key, o.status, o.transfer_id,
                                                o.code, o.message, o.body_hash }, e.key)
        end
    else -- append_events(book, list)
        for _, e in ipairs(b) do
            if add("events", { a, ctr.seq + 1, e.transfer_id, e.kind, e.data },
                   a .. "\0" .. e.transfer_id .. "\0" .. e.kind) then
                ctr.seq = ctr.seq + 1
            end
        end
    end
end

-- What rec kept, as one string (LuaJIT's string.buffer serializer): a run measured after the
-- recording one then has no tables of it for its collector to walk. run() takes it back.
local sbuf = require("string.buffer")
function M.freeze(rec)
    rec.frozen = sbuf.encode(rec.calls)
    rec.calls = {}
end

-- A group's recorded calls -> { [table] = rows }; ctr = { n =, seq =, seen = {}, store = }
-- runs over the groups (the transfer's n and the event's seq a plain INSERT loop would
-- give; a row written again after a short count, e.g. an event whose seq a racing lane
-- took, or a claim turned into its outcome, once).
local function rows_of(calls, ctr)
    local rows = {}
    for _, t in ipairs(ROW_ORDER) do rows[t] = {} end
    local seen = ctr.seen
    local function add(t, row, key)
        key = t .. "\0" .. key
        if seen[key] then return false end
        seen[key] = true
        local l = rows[t]
        l[#l + 1] = row
        return true
    end
    for _, c in ipairs(calls or {}) do call_rows(c, ctr, add) end
    return rows
end

-- The scratch tables: the store's own DDL under another prefix, without the triggers.
local function ddl(dialect, prefix)
    local out = {}
    for _, stmt in ipairs(schema.ddl(dialect, prefix)) do
        if not stmt:find("TRIGGER", 1, true) and not stmt:find("FUNCTION", 1, true)
           and not stmt:find("^UPDATE") then
            out[#out + 1] = stmt
        end
    end
    return out
end

local insert_cache = {}
local function insert_text(dialect, prefix, t, n)
    local key = dialect .. prefix .. t .. "#" .. n
    if not insert_cache[key] then
        local d = ROWS[t]
        local one = "(" .. d.types:gsub(".", "?%0,"):sub(1, -2) .. ")"
        insert_cache[key] = sql.render(dialect, prefix, "INSERT INTO @" .. t .. " ("
            .. table.concat(d.cols, ", ") .. ")"
            .. ((d.overriding and dialect == "postgres") and " OVERRIDING SYSTEM VALUE" or "")
            .. " VALUES " .. string.rep(one, n, ","))
    end
    return insert_cache[key]
end

-- One group's rows, table by table, in multi-row INSERTs of at most 1024 rows and 5632
-- parameters (postings: 512, the store's own bound); the seconds of each table added to
-- by_table. -> rows written
local function write(s, prefix, rows, by_table, clock)
    local total = 0
    for _, t in ipairs(ROW_ORDER) do
        local list, w = rows[t], #ROWS[t].types
        local chunk = math.min(1024, math.floor(5632 / w))
        local t0 = clock()
        for i = 1, #list, chunk do
            local n = math.min(chunk, #list - i + 1)
            local b = { n = n * w }
            for j = 0, n - 1 do
                local r = list[i + j]
                for c = 1, w do b[j * w + c] = r[c] end
            end
            assert(assert(s.drv:write(insert_text(s.dialect, prefix, t, n), b)) == n)
        end
        by_table[t] = (by_table[t] or 0) + (clock() - t0)
        total = total + #list
    end
    return total
end

-- o.prefill: the scratch tables first filled, untimed, with as many rows as the store's own
-- tables hold, so that the run's rows go into B-trees of the ledger's size: a random key
-- lands in a leaf of its own in a large tree and shares one in a small tree, and a commit
-- writes every leaf it dirtied (issue 25, docs/WALLET.md "Rows keyed by content": the
-- rows alone ran 1,510 transfers/s into tables of 1,000 transfers, 1,011 into tables of
-- 100,000). Each copied row's keys that name content are random bytes of their length
-- (the run's own rows are in the store too, so a copy as it is would collide), and its
-- numbers (a transfer's n, an event's seq) negative, so the run's rows come after them as
-- the store's do.
local function rand(dialect, col)
    if dialect == "postgres" then
        return format("substr(sha256(random()::text::bytea), 1, least(32, length(%s))) || "
                      .. "substr(%s, 33)", col, col)
    end
    return format("randomblob(min(32, length(%s))) || substr(%s, 33)", col, col)
end
local PREFILL = { -- table -> its columns in the copy: the keys random, the numbers negated
    postings = { transfer_id = "rand" },
    transfers = { n = "neg", id = "rand" },
    transfer_accounts = { n = "neg" },
    intents = { key = "rand" },
    claims = { intent = "rand" },
    events = { seq = "neg", transfer_id = "rand" },
}
-- -> the transfers copied
local function prefill(s, prefix)
    local copied = 0
    for _, t in ipairs(ROW_ORDER) do
        local cols, sel = ROWS[t].cols, {}
        for i, c in ipairs(cols) do
            local how = PREFILL[t][c]
            sel[i] = how == "rand" and rand(s.dialect, c) or how == "neg" and ("-" .. c) or c
        end
        local src = sql.render(s.dialect, s.prefix, "@" .. t)
        local dst = sql.render(s.dialect, prefix, "@" .. t)
        -- (SQLite's claims table is its own: a PostgreSQL store keeps none)
        if t ~= "claims" or s.dialect == "sqlite" then
            local n = assert(s.drv:write("INSERT INTO " .. dst .. " ("
                .. table.concat(cols, ", ") .. ") " .. ((ROWS[t].overriding
                and s.dialect == "postgres") and "OVERRIDING SYSTEM VALUE " or "")
                .. "SELECT " .. table.concat(sel, ", ") .. " FROM " .. src, { n = 0 }))
            if t == "transfers" then copied = n end
        end
    end
    return copied
end

-- Every k consecutive groups' rows as one group's (in their order: the transfers' n and
-- the events' seq stay consecutive).
local function merged(conv, k)
    if k <= 1 then return conv end
    local out = {}
    for i = 1, #conv, k do
        local g = {}
        for _, t in ipairs(ROW_ORDER) do
            local l = {}
            for j = i, math.min(#conv, i + k - 1) do
                for _, r in ipairs(conv[j][t]) do l[#l + 1] = r end
            end
            g[t] = l
        end
        out[#out + 1] = g
    end
    return out
end

-- The groups rec recorded, converted before the clock starts, then written group by group,
-- each flushed (durability ack). -> the figures above (and prefilled: the store's
-- transfers copied first, o.prefill)
function M.run(s, rec, exec_ddl, o)
    o = o or {}
    local clock = o.clock or function() return require("luv").hrtime() / 1e9 end
    local sfx = o.tag and ("_" .. o.tag) or ""
    local prefix = s.dialect == "postgres" and ('"' .. s.schema .. '_rows' .. sfx .. '".')
                   or ("rows" .. sfx .. "_")
    for _, stmt in ipairs(ddl(s.dialect, prefix)) do assert(exec_ddl(stmt)) end
    local prefilled = o.prefill and prefill(s, prefix) or nil
    -- (what rec kept is taken, unless o.keep: it records anew from group 1)
    local calls = rec.frozen and sbuf.decode(rec.frozen) or rec.calls
    assert(not o.keep or rec.frozen, "same_rows: o.keep needs frozen rows (SR.freeze)")
    if not o.keep then rec.calls, rec.cur, rec.frozen = {}, 1, nil end
    local ctr, conv = { n = 0, seq = 0, seen = {}, store = s }, {}
    for gi = 1, table.maxn(calls) do
        if calls[gi] then conv[#conv + 1] = rows_of(calls[gi], ctr) end
    end
    conv = merged(conv, o.merge or 1)
    local by_table, nrows = {}, 0
    local cpu0 = o.cpu and o.cpu()
    local t0 = clock()
    local tc
    for _, rows in ipairs(conv) do
        if o.one_tx and s.drv.atomic then
            assert(s.drv:atomic(function()
                nrows = nrows + write(s, prefix, rows, by_table, clock)
                tc = clock()
                return true
            end))
            by_table.commit = (by_table.commit or 0) + (clock() - tc)
        else
            nrows = nrows + write(s, prefix, rows, by_table, clock)
        end
        tc = clock()
        if s.durability == "ack" then assert(s:flush() == 1) end
        by_table.flush = (by_table.flush or 0) + (clock() - tc)
    end
    return { rows = nrows, seconds = clock() - t0, by_table = by_table, groups = #conv,
             transfers = ctr.n, cpu = o.cpu and (o.cpu() - cpu0),
             prefilled = prefilled }
end

return M
