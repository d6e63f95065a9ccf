-- ron.ledger.store.sql_base: what every SQL primitive of ron.ledger.store.sql is made of: the
-- per-call bounds and the enum codes, the argument checks (a misuse raises), the statement
-- cache and rendering per dialect (sql_text's texts), running one statement on the driver
-- (PostgreSQL's plain-first inserts) and decoding the rows read back. The concern modules
-- (sql_rows, sql_batch, sql_lease) require it; ron.ledger.store.sql re-exports its public
-- names.
local codes = require("ron.ledger.codes")
local schema = require("ron.ledger.store.schema")
local sql_text = require("ron.ledger.store.sql_text")

local type, error, tonumber, ipairs, format, byte =
      type, error, tonumber, ipairs, string.format, string.byte

local BUILD, NOW_MS, PG_ARRAY = sql_text.BUILD, sql_text.NOW_MS, sql_text.PG_ARRAY

local _M = {}

-- Per call (one statement, its parameters bounded: the host's libpq binding takes ~8000).
_M.MAX_BATCH = 1024       -- ids or pairs
_M.MAX_POSTINGS = 512     -- postings to insert (11 parameters each)
_M.SHARDS = schema.SHARDS

local PSTATUS, PSTATUS_NAME = codes.PSTATUS, codes.PSTATUS_NAME
local POLICY, POLICY_NAME = codes.POLICY, codes.POLICY_NAME
local ASTATUS, ASTATUS_NAME = codes.ASTATUS, codes.ASTATUS_NAME
_M.PSTATUS, _M.PSTATUS_NAME = PSTATUS, PSTATUS_NAME

local function misuse(fname, msg) error("ron.ledger.store: " .. fname .. ": " .. msg, 3) end

local function bytes_arg(fname, v, what, len)
    if type(v) ~= "string" or (len and #v ~= len) then
        misuse(fname, format("%s must be %s", what, len and (len .. " bytes") or "a string"))
    end
    return v
end

local TWO53 = 2 ^ 53
local function int_arg(fname, v, what)
    if type(v) == "number" then
        if v % 1 == 0 and v <= TWO53 and v >= -TWO53 then return v end
    elseif type(v) == "cdata" then
        return v
    end
    misuse(fname, what .. " must be an integer (number or int64_t)")
end

local function asset_arg(fname, a)
    if type(a) ~= "table" or type(a.code) ~= "string" or type(a.scale) ~= "number" then
        misuse(fname, "asset must be { code = string, scale = integer }")
    end
    return a
end

local function list_arg(fname, l, what, max)
    if type(l) ~= "table" then misuse(fname, what .. " must be a list") end
    max = max or _M.MAX_BATCH
    if #l > max then misuse(fname, format("at most %d %s per call", max, what)) end
    return l
end

-- Amounts read back: numbers up to 2^53, int64_t beyond (as ron.ledger returns them).
local function amount(v)
    if type(v) == "cdata" then
        if v <= TWO53 and v >= -TWO53 then return tonumber(v) end
        return v
    end
    return v
end
_M.amount = amount

-- The shard of a posting in the balance projection (LED-19).
function _M.shard(transfer_id, index)
    return (index + byte(transfer_id, 1)) % _M.SHARDS
end

local PG_TYPE = { b = "bytea", i = "bigint", B = "bytea[]", I = "bigint[]" }
local ARRAY_KIND = { b = "bytea", i = "int8" }

-- "?b"/"?i" (and "?B"/"?I": arrays, PostgreSQL only) -> the dialect's placeholders;
-- "@name" -> the table's (prefixed) name.
function _M.render(dialect, prefix, text)
    text = schema.expand(text, prefix):gsub("{now_ms}", NOW_MS[dialect])
    if dialect == "postgres" then
        local k = 0
        return (text:gsub("%?([biBI])", function(t)
            k = k + 1
            return "$" .. k .. "::" .. PG_TYPE[t]
        end))
    end
    return (text:gsub("%?[bi]", "?"))
end

-- binds (at scalars, the groups' tuples, trailing scalars) -> the same with each group's
-- tuples as one array per column: { array = "bytea" | "int8", n = rows, ... } (the driver
-- encodes it).
local function pg_binds(spec, binds, n, n2)
    local out, at = {}, spec.at
    for i = 1, at do out[i] = binds[i] end
    local k, src = at, at
    for g, types in ipairs(spec.groups) do
        local rows = g == 1 and n or (n2 or 0)
        local w = #types
        for c = 1, w do
            local col = { array = ARRAY_KIND[types:sub(c, c)], n = rows }
            local j = src + c
            for r = 1, rows do
                col[r] = binds[j]
                j = j + w
            end
            out[k + c] = col
        end
        k, src = k + w, src + rows * w
    end
    local last = binds.n or #binds
    for i = src + 1, last do
        k = k + 1
        out[k] = binds[i]
    end
    out.n = k
    return out
end

-- The statement text and its binds for (name, list length n[, n2]); and for a spec marked
-- plain, the same statement without its ON CONFLICT DO NOTHING (see run below).
_M.TEXT_BUDGET = 4194304 -- bytes of statement texts a store keeps (per VM)
local clear = require("table.clear")

local function stmt(self, name, n, n2, binds)
    local spec = self.dialect == "postgres" and PG_ARRAY[name]
    if spec then
        local key = name .. "[]"
        local s = self.sql_cache[key]
        if not s then
            s = _M.render(self.dialect, self.prefix, spec.sql)
            self.sql_cache[key] = s
            if spec.plain then
                local p, k = s:gsub(" ON CONFLICT DO NOTHING", "", 1)
                assert(k == 1, name)
                self.sql_cache[key .. "plain"] = p
            end
        end
        return s, pg_binds(spec, binds, n, n2), self.sql_cache[key .. "plain"]
    end
    local key = n and (name .. "#" .. n .. (n2 and ("#" .. n2) or "")) or name
    local cache = self.sql_cache
    local s = cache[key]
    if not s then
        s = _M.render(self.dialect, self.prefix, BUILD[name](n, n2))
        -- I-7: a text per list length (SQLite) grew with every length met (put_intents:
        -- 10.1 MB over 1..1024): past TEXT_BUDGET bytes the texts start anew, emptied in
        -- place (pg_phase and scan keep entries here too); a text made again is the same
        -- string, so a connection's prepared statement of it is found as before
        local bytes = (self.sql_text_bytes or 0) + #s
        if bytes > _M.TEXT_BUDGET then
            clear(cache)
            bytes = #s
            self.sql_cache_resets = (self.sql_cache_resets or 0) + 1
        end
        cache[key], self.sql_text_bytes = s, bytes
    end
    return s, binds
end

-- ---------------------------------------------------------------------------------------
-- row decoding

local function account_row(r)
    return { id = r[1], version = amount(r[2]), policy = POLICY_NAME[amount(r[3])],
             floor = amount(r[4]), status = ASTATUS_NAME[amount(r[5])], bytes = r[6] }
end
local ACCOUNT_T = "biiiib"

local function posting_row(r)
    return { id = { transfer_id = r[1], index = amount(r[2]) }, account = r[3],
             asset = { code = r[4], scale = amount(r[5]) }, amount = amount(r[6]),
             status = PSTATUS_NAME[amount(r[7])], reservation = r[8], created_by = r[9],
             consumed_by = r[10] }
end
local POSTING_T = "bibbiiibbb"

local function transfer_row(r)
    return { n = amount(r[1]), id = r[2], bytes = r[3], intent = r[4], book = r[5],
             created_at_ms = amount(r[6]), metadata = r[7] }
end
local TRANSFER_T = "ibbbbib"

local function event_row(r)
    return { book = r[1], seq = amount(r[2]), transfer_id = r[3], kind = r[4], data = r[5] }
end
local EVENT_T = "bibbb"

local function map_rows(rows, f)
    local out = {}
    for i = 1, #rows do out[i] = f(rows[i]) end
    return out
end


-- PostgreSQL, the inserts marked plain (insert_postings, put_intents, store_transfers,
-- append_events): the statement runs first WITHOUT its ON CONFLICT DO NOTHING, whose
-- speculative insertion costs every row a probe of each unique index and a WAL record more
-- (postings: ~15 % of the statement); only when that fails on a duplicate key (SQLSTATE
-- 23505: the row is there, or a racing statement inserted it first; the failed statement
-- changed nothing) does the conditional form run, and its count is the answer. Either way
-- ONE statement took effect, with the count the conditional form alone would give on the
-- same state (a duplicate is rare on the common path: replays are answered from the intents
-- before anything is inserted again).
local function run(self, method, name, n, binds, rtypes, n2)
    local text, b, plain = stmt(self, name, n, n2, binds)
    local drv = self.drv
    -- inside a PostgreSQL phase (ron.ledger.store.pg_phase): the statement is collected, the
    -- phase picks its form
    if drv.phase then return drv[method](drv, text, b, rtypes, plain) end
    if plain then
        local r, err, class, sqlstate = self.drv[method](self.drv, plain, b, rtypes)
        if r or sqlstate ~= "23505" then return r, err, class end
    end
    return self.drv[method](self.drv, text, b, rtypes)
end

local function write(self, name, n, binds, n2)
    return run(self, "write", name, n, binds, nil, n2)
end

local function read(self, name, n, binds, rtypes, n2)
    return run(self, "read", name, n, binds, rtypes, n2)
end

local function read_one(self, name, n, binds, rtypes, f)
    local rows, err, class = read(self, name, n, binds, rtypes)
    if not rows then return nil, err, class end
    if rows[1] == nil then return nil end
    return f(rows[1])
end

local function read_all(self, name, n, binds, rtypes, f)
    local rows, err, class = read(self, name, n, binds, rtypes)
    if not rows then return nil, err, class end
    return map_rows(rows, f)
end

_M.misuse = misuse
_M.bytes_arg = bytes_arg
_M.int_arg = int_arg
_M.asset_arg = asset_arg
_M.list_arg = list_arg
_M.write = write
_M.read = read
_M.read_one = read_one
_M.read_all = read_all
_M.map_rows = map_rows
_M.account_row = account_row
_M.posting_row = posting_row
_M.transfer_row = transfer_row
_M.event_row = event_row
_M.ACCOUNT_T, _M.POSTING_T, _M.TRANSFER_T, _M.EVENT_T = ACCOUNT_T, POSTING_T, TRANSFER_T, EVENT_T
_M.POLICY, _M.ASTATUS = POLICY, ASTATUS

return _M
