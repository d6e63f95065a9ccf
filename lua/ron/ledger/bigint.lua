-- ron.ledger.bigint: exact non-negative integers of any size for rating (docs/LEDGER-RATING.md
-- §3). Usage quantities are sums of u64 counters and a price times a quantity overflows
-- every machine integer; rating must never round through a float (LED-R-2), so quantities
-- and charges are computed here, in base 10^6 limbs (little-endian), and only the final
-- amount is turned into an int64 (which it must fit).
--
--   local B = require("ron.ledger.bigint")
--   B.from(v)            v: a non-negative integer Lua number (<= 2^53), a uint64_t/int64_t
--                        cdata, or a decimal string; raises on anything else
--   B.tostring(a)        decimal digits
--   B.cmp(a, b)          -1 | 0 | 1
--   B.add(a, b), B.sub(a, b) (a >= b), B.min(a, b), B.max(a, b)
--   B.mul_small(a, k)    k an integer 0 .. 2^31 - 1
--   B.div_small(a, k)    floor(a / k), k an integer 1 .. 2^31 - 1; returns quotient, remainder
--   B.to_u64(a)          uint64_t cdata | nil when a >= 2^64
--   B.to_amount(a)       a Lua number (< 2^53) or int64_t cdata | nil when a >= 2^63
--   B.is_zero(a)
--   B.is_decimal(s)      s is one or more decimal digits
--   B.exact_num(v)       v as an exact number (below 2^53, or up to 15 digits), else nil
--   B.dec(v)             the exact decimal text of an integer (below): the one rendering of
--                        a value that names money or order anywhere in ron.ledger/ron.wallet
local ffi = require("ffi")

local floor, type, tonumber, tostring, error = math.floor, type, tonumber, tostring, error
local format, concat, match, gsub = string.format, table.concat, string.match, string.gsub
local byte, sub = string.byte, string.sub

local BASE = 1000000
local SMALL_MAX = 2147483647

local _M = { SMALL_MAX = SMALL_MAX }

local function norm(a)
    local n = #a
    while n > 1 and a[n] == 0 do
        a[n] = nil
        n = n - 1
    end
    return a
end

-- True when s is one or more decimal digits (a byte loop the JIT compiles: the patterns
-- this replaced were a fifth of a rated slice's request, issue 25).
local function is_decimal(s)
    local n = #s
    if n == 0 then return false end
    for i = 1, n do
        local c = byte(s, i)
        if c < 48 or c > 57 then return false end
    end
    return true
end
_M.is_decimal = is_decimal

-- v as an exact Lua number when it plainly is one: a non-negative integer number below 2^53,
-- or decimal text of at most 15 digits; else nil (the bigint way takes it, or refuses it).
-- The common case of rating and its metadata: no bigint on the way (issue 25).
function _M.exact_num(v)
    if type(v) == "number" then
        return v >= 0 and v < 2 ^ 53 and v % 1 == 0 and v or nil
    end
    if type(v) == "string" and #v <= 15 and is_decimal(v) then return tonumber(v) end
    return nil
end

local function from_string(s)
    if not is_decimal(s) then
        error("ron.ledger.bigint: not a non-negative decimal integer: " .. s, 3)
    end
    local n, first = #s, 1
    while first < n and byte(s, first) == 48 do first = first + 1 end -- (leading zeros)
    local a, i = {}, n
    while i >= first do
        local j = i - 5
        if j < first then j = first end
        a[#a + 1] = tonumber(sub(s, j, i))
        i = j - 1
    end
    return norm(a)
end

local u64 = ffi.typeof("uint64_t")
local i64 = ffi.typeof("int64_t")

function _M.from(v)
    local t = type(v)
    if t == "number" then
        if v ~= v or v < 0 or v % 1 ~= 0 or v > 2 ^ 53 then
            error("ron.ledger.bigint: not an exact non-negative integer: " .. tostring(v), 2)
        end
        local a = {}
        repeat
            local r = v % BASE
            a[#a + 1] = r
            v = (v - r) / BASE
        until v == 0
        return a
    elseif t == "string" then
        return from_string(v)
    elseif t == "cdata" and (ffi.istype(u64, v) or ffi.istype(i64, v)) then
        if ffi.istype(i64, v) and v < 0 then
            error("ron.ledger.bigint: negative: " .. tostring(v), 2)
        end
        return from_string((tostring(u64(v)):gsub("ULL$", "")))
    elseif t == "table" then
        return v
    end
    error("ron.ledger.bigint: expects an integer, got " .. t, 2)
end

function _M.tostring(a)
    local parts = { tostring(a[#a]) }
    for i = #a - 1, 1, -1 do parts[#parts + 1] = format("%06d", a[i]) end
    return concat(parts)
end

-- The decimal text of an exact integer: a Lua number (integral, |v| <= 2^53), an int64_t or
-- uint64_t cdata, a bigint of this module, or a string of decimal digits (as it is). An
-- integer that names money or order (amount, nonce, seq, version, ledger seq, event seq)
-- is rendered through here and never through a Lua number's own conversion (tostring,
-- `..`, %s, %g keep 14 significant digits: 100000000000002 becomes "1e+14"). A number
-- beyond 2^53 is rendered as the integer it holds (which may not be the one meant: the
-- edges refuse such inputs before they become numbers); a fraction, NaN or inf raises.
function _M.dec(v)
    local t = type(v)
    if t == "number" then
        if v % 1 ~= 0 then -- (NaN and inf: v % 1 is NaN)
            error("ron.ledger.bigint.dec: not an integer: " .. format("%.17g", v), 2)
        end
        -- %d converts through int64_t: exact below 2^63; %.0f prints a double's exact value
        if v < 2 ^ 63 and v >= -2 ^ 63 then return format("%d", v) end
        return format("%.0f", v)
    elseif t == "cdata" and (ffi.istype(u64, v) or ffi.istype(i64, v)) then
        return (gsub(tostring(v), "U?LL$", ""))
    elseif t == "string" and match(v, "^%-?%d+$") then
        return v
    elseif t == "table" then
        return _M.tostring(v)
    end
    error("ron.ledger.bigint.dec: not an integer: " .. t, 2)
end

function _M.is_zero(a)
    return #a == 1 and a[1] == 0
end

function _M.cmp(a, b)
    if #a ~= #b then return #a < #b and -1 or 1 end
    for i = #a, 1, -1 do
        if a[i] ~= b[i] then return a[i] < b[i] and -1 or 1 end
    end
    return 0
end

function _M.min(a, b) return _M.cmp(a, b) <= 0 and a or b end
function _M.max(a, b) return _M.cmp(a, b) >= 0 and a or b end

function _M.add(a, b)
    local r, carry = {}, 0
    for i = 1, (#a > #b and #a or #b) do
        local s = (a[i] or 0) + (b[i] or 0) + carry
        if s >= BASE then
            r[i], carry = s - BASE, 1
        else
            r[i], carry = s, 0
        end
    end
    if carry > 0 then r[#r + 1] = carry end
    return r
end

-- a - b for a >= b (raises otherwise: a bug of the caller).
function _M.sub(a, b)
    local r, borrow = {}, 0
    for i = 1, #a do
        local s = a[i] - (b[i] or 0) - borrow
        if s < 0 then
            r[i], borrow = s + BASE, 1
        else
            r[i], borrow = s, 0
        end
    end
    if borrow ~= 0 or #b > #a then error("ron.ledger.bigint: sub would go negative", 2) end
    return norm(r)
end

local function small(k, lo)
    if type(k) ~= "number" or k % 1 ~= 0 or k < lo or k > SMALL_MAX then
        error("ron.ledger.bigint: small operand out of range: " .. tostring(k), 3)
    end
end

-- Limbs < 10^6 times k < 2^31 plus a carry stay below 2^53: exact in a double.
function _M.mul_small(a, k)
    small(k, 0)
    if k == 0 then return { 0 } end
    local r, carry = {}, 0
    for i = 1, #a do
        local p = a[i] * k + carry
        local lo = p % BASE
        r[i] = lo
        carry = (p - lo) / BASE
    end
    while carry > 0 do
        local lo = carry % BASE
        r[#r + 1] = lo
        carry = (carry - lo) / BASE
    end
    return norm(r)
end

function _M.div_small(a, k)
    small(k, 1)
    local q, rem = {}, 0
    for i = #a, 1, -1 do
        local cur = rem * BASE + a[i] -- < 2^31 * 10^6: exact
        local d = floor(cur / k)
        -- floor() of a double quotient can be off by one near an integer: correct it.
        local m = cur - d * k
        if m < 0 then d, m = d - 1, m + k elseif m >= k then d, m = d + 1, m - k end
        q[i], rem = d, m
    end
    return norm(q), rem
end

local U64_MAX = from_string("18446744073709551615")
local I64_MAX = from_string("9223372036854775807")
_M.U64_MAX, _M.I64_MAX = U64_MAX, I64_MAX

function _M.to_u64(a)
    if _M.cmp(a, U64_MAX) > 0 then return nil end
    local v = u64(0)
    for i = #a, 1, -1 do v = v * BASE + a[i] end
    return v
end

function _M.to_amount(a)
    if _M.cmp(a, I64_MAX) > 0 then return nil end
    if #a <= 2 or (#a == 3 and a[3] < 9007) then -- < 9.007e15 < 2^53
        local v = 0
        for i = #a, 1, -1 do v = v * BASE + a[i] end
        return v
    end
    local v = i64(0)
    for i = #a, 1, -1 do v = v * BASE + a[i] end
    return v
end

return _M
