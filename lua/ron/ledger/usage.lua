-- ron.ledger.usage: a sealed usage slice -> a commit request of the ledger engine
-- (docs/LEDGER-RATING.md §4-§6; ledger-design "Engine contract"; research ledger.md §2e
-- item 5 and §5). Pure: the same slice, card and period usage give the same bytes.
--
--   local usage = require("ron.ledger.usage")
--   local info = usage.from_slice(slice)          -- { tenant, dimension, seq, window_start_s,
--                                                 --   window_len_s, b3, prev_b3 (raw 32 B),
--                                                 --   quantity (decimal string) }
--   local req, rated = usage.request(info, card, used)   -- or nil, "RatingError: ..."
--   -- req = { intent, body_hash, movements, metadata, overdraft } for led:commit(req)
--   usage.intent(tenant, dimension, seq, b3)      -- the intent key (LED-R-5)
--   usage.encode_metadata(m) / usage.decode_metadata(bytes)   -- LED-R-6
--   usage.account(kind, tenant?)                  -- 16-byte account ids (LED-R-7)
--
-- Movements (LED-R-8): the slice's units of the dimension's unit asset from the book's
-- usage_source account (uncapped: it issues them) to the tenant's usage account, always
-- (so every slice, even a free one, is consumed by exactly one transfer), and, when the
-- charge is not zero, the charge from the tenant's wallet (no_overdraft, prepaid) to the
-- book's revenue account, with overdraft = { [wallet] = receivable }: what the wallet
-- lacks is taken from the tenant's receivable account (uncapped: the tenant's debt).
local bit = require("bit")
local ffi = require("ffi")
local B = require("ron.ledger.bigint")
local b3 = require("ron.base.b3")

local band, rshift = bit.band, bit.rshift
local byte, char, sub, format = string.byte, string.char, string.sub, string.format
local type, tonumber, error = type, tonumber, error

local _M = {}

_M.INTENT_TAG = "U\1"     -- intent keys of usage transfers: 'U', version 1
_M.META_MAGIC = "UM\1"    -- usage metadata: 'U' 'M', version 1
_M.ZERO16 = string.rep("\0", 16)
_M.ZERO32 = string.rep("\0", 32)

-- ---- bytes ----

local function u8(n) return char(n) end
-- Big-endian into a byte buffer from offset at, -> the offset after: the one byte-order
-- rule of the intent keys and the metadata.
local function put_u32(buf, at, n)
    buf[at], buf[at + 1] = band(rshift(n, 24), 255), band(rshift(n, 16), 255)
    buf[at + 2], buf[at + 3] = band(rshift(n, 8), 255), band(n, 255)
    return at + 4
end
-- n: a non-negative Lua number (< 2^53) or a uint64_t/int64_t cdata
local TWO32, TWO53 = 2 ^ 32, 2 ^ 53
local function put_u64(buf, at, n)
    -- an exact Lua number: two u32 halves in plain arithmetic (a cdata per call, and a
    -- loop over it, cost ~1 us per key and metadata field: several per rated slice)
    if type(n) == "number" and n >= 0 and n < TWO53 and n % 1 == 0 then
        local lo = n % TWO32
        return put_u32(buf, put_u32(buf, at, (n - lo) / TWO32), lo)
    end
    local v = ffi.new("uint64_t", n)
    for i = at + 7, at, -1 do
        buf[i] = tonumber(band(v, 255))
        v = rshift(v, 8)
    end
    return at + 8
end
local b8 = ffi.new("uint8_t[8]")
local function u64be(n) return ffi.string(b8, put_u64(b8, 0, n)) end
local function get_u64(s, i) -- uint64_t cdata
    local v = ffi.new("uint64_t", 0)
    for k = 0, 7 do v = v * 256 + byte(s, i + k) end
    return v
end
local function num(v) -- a u64 cdata as a Lua number when exact, else the cdata
    if v < 2 ^ 53 then return tonumber(v) end
    return v
end

-- Table-driven (gsub with a table): a closure per call (FNEW) aborts every trace through
-- here, and each slice's b3 and prev_b3 come in hex.
local UNHEX, HEX = {}, {}
for i = 0, 255 do
    local lo, up = format("%02x", i), format("%02X", i)
    HEX[char(i)] = lo
    UNHEX[lo], UNHEX[up] = char(i), char(i)
    UNHEX[lo:sub(1, 1) .. up:sub(2, 2)], UNHEX[up:sub(1, 1) .. lo:sub(2, 2)] = char(i), char(i)
end
-- Up to 64 bytes (a b3, a tenant) through a byte loop the JIT compiles; anything else, or
-- a character that is not hex, by gsub (which leaves a non-hex pair as it is).
local unhex_buf = ffi.new("uint8_t[64]")
local function nibble(c)
    if c >= 48 and c <= 57 then return c - 48 end
    if c >= 97 and c <= 102 then return c - 87 end
    if c >= 65 and c <= 70 then return c - 55 end
    return nil
end
local function unhex(h)
    local n = #h
    if n % 2 == 0 and n <= 128 then
        for i = 0, n / 2 - 1 do
            local a, b = nibble(byte(h, 2 * i + 1)), nibble(byte(h, 2 * i + 2))
            if not a or not b then return (h:gsub("%x%x", UNHEX)) end
            unhex_buf[i] = a * 16 + b
        end
        return ffi.string(unhex_buf, n / 2)
    end
    return (h:gsub("%x%x", UNHEX))
end
local function hex(s)
    return (s:gsub(".", HEX))
end
_M.hex, _M.unhex = hex, unhex

-- Pure functions of a few tenants, asked several times per rated slice (a UUID's parse, an
-- account id's BLAKE3): memoized, each cache dropped whole when it reaches MEMO_MAX.
local MEMO_MAX = 4096
local function memo()
    return { n = 0, v = {} }
end
local function memo_put(m, k, v)
    if m.n >= MEMO_MAX then m.n, m.v = 0, {} end
    m.n = m.n + 1
    m.v[k] = v
    return v
end
local raw_memo = memo()

-- A tenant as 16 raw bytes (from its lowercase/uppercase UUID text, or already raw).
local function tenant_raw(t)
    if type(t) == "string" and #t == 16 then return t end
    local hit = raw_memo.v[t]
    if hit then return hit end
    if type(t) == "string" and #t == 36 and t:match("^%x+%-%x+%-%x+%-%x+%-%x+$") then
        return memo_put(raw_memo, t, unhex((t:gsub("-", ""))))
    end
    error("ron.ledger.usage: a tenant is a UUID string or 16 bytes, got " .. tostring(t), 3)
end
_M.tenant_raw = tenant_raw

function _M.tenant_text(raw)
    local h = hex(raw)
    return format("%s-%s-%s-%s-%s", h:sub(1, 8), h:sub(9, 12), h:sub(13, 16), h:sub(17, 20),
                  h:sub(21, 32))
end

local function raw32(v, what)
    if type(v) == "string" and #v == 32 then return v end
    if type(v) == "string" and #v == 64 and v:match("^%x+$") then return unhex(v) end
    error("ron.ledger.usage: " .. what .. " must be 32 bytes or 64 hex digits", 3)
end

-- (the dimensions seen good, remembered: the pattern match is not compiled by the JIT and
-- took a fifth of a rated slice's request, twice per slice, issue 25; a handful of names)
local dims_ok = memo()
local function check_dim(d)
    if dims_ok.v[d] then return end
    if type(d) ~= "string" or #d < 1 or #d > 32 or not d:match("^[a-z][a-z0-9_]*$") then
        error("ron.ledger.usage: bad dimension " .. tostring(d), 3)
    end
    memo_put(dims_ok, d, true)
end

-- ---- account ids (LED-R-7) ----

_M.b3 = b3.raw

_M.TENANT_KINDS = { wallet = true, receivable = true, usage = true }
_M.SYSTEM_KINDS = { revenue = true, usage_source = true, external = true }

-- The id of a tenant's account (kind wallet | receivable | usage) or of a system account
-- of the book (revenue | usage_source | external, no tenant): the first 16 bytes of
-- BLAKE3("ron-ledger usage account v1" 00 kind 00 tenant16), tenant16 = 16 zero bytes for
-- a system account.
-- (memoized by kind, then tenant: no key string made per call, where kind .. tenant was a
-- string looked up in LuaJIT's table seven times a rated slice, issue 25)
local account_memo = memo() -- v: kind -> { [tenant16] = id }; n: ids in all
function _M.account(kind, tenant)
    if _M.TENANT_KINDS[kind] then
        tenant = tenant_raw(tenant)
    elseif _M.SYSTEM_KINDS[kind] then
        tenant = _M.ZERO16
    else
        error("ron.ledger.usage: unknown account kind " .. tostring(kind), 2)
    end
    local byk = account_memo.v[kind]
    local id = byk and byk[tenant]
    if id then return id end
    id = sub(b3.raw("ron-ledger usage account v1\0" .. kind .. "\0" .. tenant), 1, 16)
    if account_memo.n >= MEMO_MAX then account_memo.n, account_memo.v = 0, {} end
    byk = account_memo.v[kind]
    if not byk then
        byk = {}
        account_memo.v[kind] = byk
    end
    byk[tenant], account_memo.n = id, account_memo.n + 1
    return id
end
_M._account_memo = function() return account_memo.n, MEMO_MAX end -- (rate_spec)

-- ---- intent key (LED-R-5) ----

-- 'U' 01 | tenant (16) | d (u8) | dimension (d) | seq (u64 BE) | b3 (32): at most 91 bytes.
-- Length-prefixed and fixed-width fields: binary-safe and unambiguous.
function _M.intent(tenant, dimension, seq, slice_b3)
    check_dim(dimension)
    return _M.INTENT_TAG .. tenant_raw(tenant) .. u8(#dimension) .. dimension .. u64be(seq)
           .. raw32(slice_b3, "b3")
end

function _M.decode_intent(k)
    if type(k) ~= "string" or sub(k, 1, 2) ~= _M.INTENT_TAG or #k < 2 + 16 + 1 + 1 + 8 + 32 then
        return nil
    end
    local d = byte(k, 19)
    if #k ~= 19 + d + 8 + 32 then return nil end
    return { tenant = sub(k, 3, 18), dimension = sub(k, 20, 19 + d),
             seq = num(get_u64(k, 20 + d)), b3 = sub(k, 28 + d) }
end

-- ---- metadata (LED-R-6) ----

-- The metadata is written into one buffer and made a string once (issue 25: a table of 17
-- pieces and ~24 short strings per rated slice, 0.65 KB and ~2 us, before).
local META_MAX = 3 + 16 + 1 + 32 + 8 + 8 + 4 + 32 + 32 + 1 + 255 + 1 + 255 + 4 * 8
local mbuf = ffi.new("uint8_t[?]", META_MAX)
local function put_s(at, s)
    ffi.copy(mbuf + at, s, #s)
    return at + #s
end
local function put_u8(at, n, what)
    if n > 255 then error("ron.ledger.usage: " .. what .. " is longer than 255 bytes", 3) end
    mbuf[at] = n
    return at + 1
end

-- A quantity field: a decimal string (or an integer) as u64. Up to 15 digits it is an exact
-- Lua number (< 2^53): no bigint on the way (the common case, four per rated slice).
local function meta_u64(v, what)
    local n = B.exact_num(v)
    if n then return n end
    local x = B.to_u64(B.from(v))
    if not x then error("ron.ledger.usage: " .. what .. " exceeds 2^64 - 1", 3) end
    return x
end

-- Big-endian like the ledger's canonical format (docs/LEDGER-FORMAT.md §0):
--   'U' 'M' 01 | tenant 16 | d u8 | dimension d | seq u64 | window_start_s u64 |
--   window_len_s u32 | b3 32 | prev_b3 32 | v u8 | card version v | p u8 | period p |
--   quantity u64 | used u64 | used_after u64 | amount u64
function _M.encode_metadata(m)
    check_dim(m.dimension)
    local tenant, b3s, prev = tenant_raw(m.tenant), raw32(m.b3, "b3"), raw32(m.prev_b3, "prev_b3")
    local qv, uv, av, mv = meta_u64(m.quantity, "quantity"), meta_u64(m.used, "used"),
                           meta_u64(m.used_after, "used_after"), meta_u64(m.amount, "amount")
    local at = put_s(put_s(0, _M.META_MAGIC), tenant)
    at = put_s(put_u8(at, #m.dimension, "dimension"), m.dimension)
    at = put_u32(mbuf, put_u64(mbuf, put_u64(mbuf, at, m.seq), m.window_start_s),
                 m.window_len_s)
    at = put_s(put_s(at, b3s), prev)
    at = put_s(put_u8(at, #m.version, "version"), m.version)
    at = put_s(put_u8(at, #m.period, "period"), m.period)
    at = put_u64(mbuf, put_u64(mbuf, at, qv), uv)
    at = put_u64(mbuf, put_u64(mbuf, at, av), mv)
    return ffi.string(mbuf, at)
end

-- -> table (quantity, used, used_after, amount as decimal strings) | nil
function _M.decode_metadata(s)
    if type(s) ~= "string" or sub(s, 1, 3) ~= _M.META_MAGIC or #s < 20 then return nil end
    local i = 4
    local m = { tenant = sub(s, i, i + 15) }
    i = i + 16
    local d = byte(s, i)
    m.dimension = sub(s, i + 1, i + d)
    i = i + 1 + d
    if #s < i + 8 + 8 + 4 + 64 + 1 then return nil end
    m.seq = num(get_u64(s, i))
    m.window_start_s = num(get_u64(s, i + 8))
    local a, b, c, e = byte(s, i + 16, i + 19)
    m.window_len_s = ((a * 256 + b) * 256 + c) * 256 + e
    i = i + 20
    m.b3, m.prev_b3 = sub(s, i, i + 31), sub(s, i + 32, i + 63)
    i = i + 64
    local v = byte(s, i)
    m.version = sub(s, i + 1, i + v)
    i = i + 1 + v
    local p = byte(s, i)
    if not p then return nil end
    m.period = sub(s, i + 1, i + p)
    i = i + 1 + p
    if #s ~= i + 31 then return nil end
    local function dec(k) return (tostring(get_u64(s, k)):gsub("ULL$", "")) end
    m.quantity, m.used, m.used_after, m.amount = dec(i), dec(i + 8), dec(i + 16), dec(i + 24)
    -- canonical: re-encoding gives the same bytes
    local ok, again = pcall(_M.encode_metadata, m)
    if not ok or again ~= s then return nil end
    return m
end

-- ---- slices ----

-- The usage of a slice: the sum of its rows' counters (exact, as a decimal string).
local uint64_t = ffi.typeof("uint64_t")
function _M.quantity(slice)
    -- exact in a Lua number while the sum stays below 2^53 (every real slice): no bigint
    local n = 0
    for _, row in ipairs(slice.rows) do
        local v = row.inc
        if type(v) == "cdata" and ffi.istype(uint64_t, v) and v < TWO53 then v = tonumber(v) end
        if type(v) ~= "number" or v < 0 or v % 1 ~= 0 or n + v >= TWO53 then
            n = nil
            break
        end
        n = n + v
    end
    if n then return format("%d", n) end
    local sum = B.from(0)
    for _, row in ipairs(slice.rows) do sum = B.add(sum, B.from(row.inc)) end
    return B.tostring(sum)
end

function _M.from_slice(s)
    return {
        tenant = s.tenant, dimension = s.dimension, seq = s.id.seq,
        window_start_s = s.id.window_start_s, window_len_s = s.id.window_len_s,
        b3 = unhex(s.b3), prev_b3 = unhex(s.prev_b3), quantity = _M.quantity(s),
    }
end

-- request(info, card, used[, accounts]) -> request, rated | nil, "RatingError: ..."
-- used: the units of the same period rated before this slice (decimal string or integer).
-- accounts(kind, tenant) -> 16 bytes overrides usage.account.
function _M.request(info, card, used, accounts)
    accounts = accounts or _M.account
    local rated, err = card:rate { dimension = info.dimension,
                                   window_start_s = info.window_start_s,
                                   quantity = info.quantity, used = used or 0 }
    if not rated then return nil, err end
    local units = B.exact_num(rated.quantity) or B.to_amount(B.from(rated.quantity))
    if not units then
        return nil, format("RatingError: %s units in one slice exceed 2^63 - 1", rated.quantity)
    end
    local tenant = tenant_raw(info.tenant)
    local b3raw = raw32(info.b3, "b3")
    local wallet = accounts("wallet", tenant)
    local movements = {
        { from = accounts("usage_source"), to = accounts("usage", tenant),
          asset = rated.unit_asset, amount = units },
    }
    if rated.amount_text ~= "0" then
        movements[2] = { from = wallet, to = accounts("revenue"), asset = rated.asset,
                         amount = rated.amount }
    end
    local req = {
        intent = _M.intent(tenant, info.dimension, info.seq, b3raw),
        body_hash = b3raw,
        movements = movements,
        metadata = _M.encode_metadata {
            tenant = tenant, dimension = info.dimension, seq = info.seq,
            window_start_s = info.window_start_s, window_len_s = info.window_len_s,
            b3 = b3raw, prev_b3 = info.prev_b3, version = rated.version,
            period = rated.period, quantity = rated.quantity, used = rated.used,
            used_after = rated.used_after, amount = rated.amount_text,
        },
        overdraft = { [wallet] = accounts("receivable", tenant) },
    }
    return req, rated
end

return _M
