-- ron.ledger.store.pg_wire: values between the ledger's statements and libpq (the host's
-- ron.base.net.postgres_c through ron.base.net.postgres): parameters out (bytes as binary
-- bytea, int64 as decimal text, list columns as binary arrays), rows in (bytea unhexed,
-- integers exact), errors classified (retry, io, bug). Shared by the PostgreSQL store
-- (ron.ledger.store.postgres) and its phases (ron.ledger.store.pg_phase).
local ffi = require("ffi")
local sql = require("ron.ledger.store.sql")
local pg = require("ron.base.net.postgres")

local type, tostring, tonumber, byte, sub = type, tostring, tonumber, string.byte, string.sub

local _M = {}

local pq_mod
local function pq()
    if not pq_mod then pq_mod = pg.pq() end
    return pq_mod
end

-- (26000: a named prepared statement the session no longer has, ron.base.net.pg_prepared:
-- nothing ran, and the connection's names are forgotten for the retry)
local RETRY_STATES = { ["40001"] = true, ["40P01"] = true, ["26000"] = true }
local IO_CLASSES = { ["08"] = true, ["53"] = true, ["57"] = true, ["58"] = true }

function _M.classify(sqlstate, class)
    if class == "server" then
        if sqlstate and RETRY_STATES[sqlstate] then return "retry" end
        if sqlstate and IO_CLASSES[sub(sqlstate, 1, 2)] then return "io" end
        return "bug"
    end
    if class == "client" then return "bug" end
    return "io" -- network, timeout, closed, canceled
end

-- -> nil, err, class, sqlstate (the 4th value: ron.ledger.store.sql tells a duplicate key,
-- 23505, from the rest)
local function fail(err, sqlstate, class)
    local cls = _M.classify(sqlstate, class)
    if cls == "retry" then
        err = "Busy: " .. tostring(err)
    end
    return nil, err, cls, sqlstate
end

local int64_t = ffi.typeof("int64_t")

-- A decimal string -> Lua number (<= 2^53) or int64_t.
local function int_of(s)
    if s == nil then return nil end
    if #s <= 15 then return tonumber(s) end
    local neg, i, v = false, 1, int64_t(0)
    if byte(s, 1) == 45 then neg, i = true, 2 end
    for k = i, #s do v = v * 10 + (byte(s, k) - 48) end
    if neg then v = -v end
    return sql.amount(v)
end

-- bytea's hex text -> bytes: in C (pq.unhex) inside the host, one call per value (a batch
-- read returns thousands); pg.unhex's Lua loop elsewhere.
local unhex
unhex = function(v)
    local f = pcall(pq) and pq().unhex or pg.unhex
    unhex = f
    return f(v)
end


local function int64_text(v) return (tostring(int64_t(v)):gsub("LL$", "")) end

-- binds -> libpq parameters: bytes as binary bytea, int64_t as decimal text, a column of a
-- list primitive ({ array = "bytea" | "int8", n = rows, ... }, ron.ledger.store.sql's
-- PG_ARRAY) as one binary array (pq.array; an int64_t element as its decimal text).
local function params(binds)
    local p = { n = binds.n or #binds }
    local m = pq()
    local bytea = m.bytea
    for i = 1, p.n do
        local v = binds[i]
        local t = type(v)
        if t == "string" then
            p[i] = bytea(v)
        elseif t == "cdata" then
            p[i] = int64_text(v)
        elseif t == "table" then
            if v.array == "int8" then
                for j = 1, v.n do
                    if type(v[j]) == "cdata" then v[j] = int64_text(v[j]) end
                end
            end
            p[i] = m.array(v.array, v, v.n)
        else
            p[i] = v
        end
    end
    return p
end


-- rows as libpq's text -> values by position: rtypes one letter per column, "b" bytes
-- (bytea's hex text unhexed), "i" an integer.
local function decode(rows, rtypes)
    local out = {}
    local nt = #rtypes
    for i = 1, rows.n or #rows do
        local r, o = rows[i], {}
        for j = 1, nt do
            local v = r[j]
            if v ~= nil then
                if byte(rtypes, j) == 98 then v = unhex(v) else v = int_of(v) end
            end
            o[j] = v
        end
        out[i] = o
    end
    return out
end
_M.decode, _M.fail = decode, fail
_M.pq, _M.params, _M.decode, _M.fail = pq, params, decode, fail

return _M
