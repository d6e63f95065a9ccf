-- ron.ledger.codec: a small deterministic serializer for the engine's own records (the
-- saga's write-ahead data, event data) and SHA-256 for request body hashes. The ledger's
-- domain values have their canonical encodings in the C core (docs/LEDGER-FORMAT.md); this
-- is only for the engine's bookkeeping, which a store keeps as opaque bytes.
--
-- Values: nil, booleans, numbers (exact integers or not), int64_t cdata, strings, and tables
-- of those keyed by strings or numbers. Keys are written sorted, so equal tables give equal
-- bytes (the body hash of a request depends on its content, not on table order).
local ffi = require("ffi")

local concat = table.concat
local format = string.format
local sort = table.sort
local sub = string.sub
local tonumber = tonumber
local tostring = tostring
local type = type

local _M = {}

local int64_t = ffi.typeof("int64_t")

local function key_less(a, b)
    local ta, tb = type(a), type(b)
    if ta ~= tb then return ta < tb end
    return a < b
end

-- The headers of strings and tables ("s<len>:", "T<count>:") by length and count, made
-- once (a format per string and per table was most of an engine record's encoding: every
-- batch encodes its members' requests, each transfer's event data, issue 25).
local HDR_MAX = 4096
local s_hdr, t_hdr = { fmt = "s%d:" }, { fmt = "T%d:" }
local function hdr(cache, n)
    local h = cache[n]
    if h then return h end
    h = format(cache.fmt, n)
    if n <= HDR_MAX then cache[n] = h end
    return h
end

-- put(v, out, n) -> n: appends v's pieces at out[n + 1 ..] and returns the new count (an
-- explicit count instead of #out per piece; a string's header and its bytes as two pieces,
-- so its bytes are copied once, by the final concat). The bytes are the same as ever: the
-- records in a store are read back by recover().
local function put(v, out, n)
    local t = type(v)
    if v == nil then n = n + 1; out[n] = "n"
    elseif t == "boolean" then n = n + 1; out[n] = v and "t" or "f"
    elseif t == "number" then n = n + 1; out[n] = format("d%.17g;", v)
    elseif t == "cdata" and ffi.istype(int64_t, v) then
        n = n + 1
        out[n] = "i" .. tostring(v):gsub("LL$", "") .. ";"
    elseif t == "string" then
        out[n + 1], out[n + 2] = hdr(s_hdr, #v), v
        n = n + 2
    elseif t == "table" then
        local keys, nk, mixed, kt = {}, 0, false, nil
        for k in pairs(v) do
            local tk = type(k)
            if tk ~= "string" and tk ~= "number" then
                error("ron.ledger.codec: table key of type " .. tk, 3)
            end
            if kt == nil then kt = tk elseif tk ~= kt then mixed = true end
            nk = nk + 1
            keys[nk] = k
        end
        -- keys of one type sort alike by their own < (in C, without a Lua comparator call
        -- per comparison); only a table with string and number keys needs key_less
        if nk > 1 then
            if mixed then sort(keys, key_less) else sort(keys) end
        end
        n = n + 1
        out[n] = hdr(t_hdr, nk)
        for i = 1, nk do
            local k = keys[i]
            n = put(k, out, n)
            n = put(v[k], out, n)
        end
    else
        error("ron.ledger.codec: cannot encode a " .. t, 3)
    end
    return n
end

function _M.encode(v)
    local out = {}
    put(v, out, 0)
    return concat(out)
end

-- ---- a request's body (issue 25) ----
-- encode_body(kind, metadata, movements, overdraft, target): the bytes encode writes for
-- the table { kind =, metadata =, movements =, overdraft =, target = } (the part of a
-- request its body hash covers, ron.ledger.engine.requests), without the generic walk's
-- key table and sort per table where the shape is a request's: movements a plain array,
-- each movement { amount, asset = { code, scale }, from, to } and no other field. Any other
-- shape, at any level, takes the generic walk there: the bytes are encode's either way
-- (spec/ron/ledger/codec_spec.lua draws both). A body of two movements: 2.4-2.6 us and 632
-- bytes allocated, against 6.3-10.5 us and 1,643 bytes for the generic walk
-- (bench-ledger-batch-mem's body case).

local function piece(k) return format("s%d:%s", #k, k) end
local K_AMOUNT, K_ASSET, K_FROM, K_TO = piece("amount"), piece("asset"), piece("from"), piece("to")
local K_CODE, K_SCALE = piece("code"), piece("scale")
-- the body's keys' pieces, in encode's order (sorted)
local BODY = { piece("kind"), piece("metadata"), piece("movements"), piece("overdraft"),
               piece("target") }
local IDX = {} -- put(i)'s piece for a list's index i
for i = 1, 64 do IDX[i] = format("d%.17g;", i) end

-- t's keys, up to max + 1 (a count past max is enough to refuse the shape)
local function count_keys(t, max)
    local n = 0
    for _ in pairs(t) do
        n = n + 1
        if n > max then break end
    end
    return n
end

local function put_asset(a, out, n)
    if type(a) ~= "table" or a.code == nil or a.scale == nil or count_keys(a, 2) ~= 2 then
        return put(a, out, n)
    end
    out[n + 1], out[n + 2] = hdr(t_hdr, 2), K_CODE
    n = put(a.code, out, n + 2)
    out[n + 1] = K_SCALE
    return put(a.scale, out, n + 1)
end

local function put_movement(m, out, n)
    if type(m) ~= "table" or m.amount == nil or m.asset == nil or m.from == nil or m.to == nil
       or count_keys(m, 4) ~= 4 then
        return put(m, out, n)
    end
    out[n + 1], out[n + 2] = hdr(t_hdr, 4), K_AMOUNT
    n = put(m.amount, out, n + 2)
    out[n + 1] = K_ASSET
    n = put_asset(m.asset, out, n + 1)
    out[n + 1] = K_FROM
    n = put(m.from, out, n + 1)
    out[n + 1] = K_TO
    return put(m.to, out, n + 1)
end

-- a list whose keys are exactly 1..#l (else the generic walk)
local function put_movements(l, out, n)
    if type(l) ~= "table" then return put(l, out, n) end
    local len = #l
    if count_keys(l, len) ~= len then return put(l, out, n) end
    for i = 1, len do
        if l[i] == nil then return put(l, out, n) end
    end
    n = n + 1
    out[n] = hdr(t_hdr, len)
    for i = 1, len do
        n = n + 1
        out[n] = IDX[i] or format("d%.17g;", i)
        n = put_movement(l[i], out, n)
    end
    return n
end

-- field i of BODY with value x, when present: -> n, nk
local function put_field(i, x, out, n, nk)
    if x == nil then return n, nk end
    out[n + 1] = BODY[i]
    if i == 3 then return put_movements(x, out, n + 1), nk + 1 end
    return put(x, out, n + 1), nk + 1
end

function _M.encode_body(kind, metadata, movements, overdraft, target)
    local out, n, nk = { "" }, 1, 0
    n, nk = put_field(1, kind, out, n, nk)
    n, nk = put_field(2, metadata, out, n, nk)
    n, nk = put_field(3, movements, out, n, nk)
    n, nk = put_field(4, overdraft, out, n, nk)
    n, nk = put_field(5, target, out, n, nk)
    out[1] = hdr(t_hdr, nk)
    return concat(out, "", 1, n)
end

-- encode_fields(keys, x): the bytes encode writes for the table of x's fields named in keys
-- (string keys in ascending order, as encode sorts them), without building that table or
-- sorting its keys: for records of a fixed shape written per transfer (an event's data).
function _M.encode_fields(keys, x)
    local out, n, nk = { "" }, 1, 0
    for i = 1, #keys do
        local v = x[keys[i]]
        if v ~= nil then
            nk = nk + 1
            n = put(keys[i], out, n)
            n = put(v, out, n)
        end
    end
    out[1] = hdr(t_hdr, nk)
    return concat(out, "", 1, n)
end

local function get(s, i)
    local c = sub(s, i, i)
    if c == "n" then return nil, i + 1
    elseif c == "t" then return true, i + 1
    elseif c == "f" then return false, i + 1
    elseif c == "d" then
        local e = s:find(";", i, true)
        return tonumber(sub(s, i + 1, e - 1)), e + 1
    elseif c == "i" then
        local e = s:find(";", i, true)
        local digits = sub(s, i + 1, e - 1)
        local neg = digits:sub(1, 1) == "-"
        local v = int64_t(0)
        for k = neg and 2 or 1, #digits do v = v * 10 + (digits:byte(k) - 48) end
        return neg and -v or v, e + 1
    elseif c == "s" then
        local e = s:find(":", i, true)
        local n = tonumber(sub(s, i + 1, e - 1))
        return sub(s, e + 1, e + n), e + n + 1
    elseif c == "T" then
        local e = s:find(":", i, true)
        local n = tonumber(sub(s, i + 1, e - 1))
        local r = {}
        i = e + 1
        for _ = 1, n do
            local k, v
            k, i = get(s, i)
            v, i = get(s, i)
            r[k] = v
        end
        return r, i
    end
    error(format("ron.ledger.codec: bad tag %q at %d", c, i), 2)
end

function _M.decode(s)
    local v, i = get(s, 1)
    if i ~= #s + 1 then error("ron.ledger.codec: trailing bytes", 2) end
    return v
end

-- SHA-256 from libcrypto (the core links it already; LED-2's hash).
ffi.cdef [[ unsigned char *SHA256(const unsigned char *d, size_t n, unsigned char *md); ]]
local crypto
for _, name in ipairs { "crypto", "libcrypto.so.3", "libcrypto.so.1.1" } do
    local ok, lib = pcall(ffi.load, name)
    if ok then
        crypto = lib
        break
    end
end
local md = ffi.new("unsigned char[32]")

function _M.sha256(s)
    if not crypto then error("ron.ledger.codec: libcrypto not found", 2) end
    crypto.SHA256(s, #s, md)
    return ffi.string(md, 32)
end

return _M
