-- ron.ledger.rate: an operator's rate card, a versioned pure function from usage to money
-- (docs/LEDGER-RATING.md; research ledger.md §2e item 5; requirement ids LED-R-n).
--
--   local rate = require("ron.ledger.rate")
--   local card, err = rate.load("cards/acme-2026-11.lua")   -- or rate.new(table, source)
--   local r, err = card:rate { dimension = "bytes", window_start_s = 1764547200,
--                              quantity = 1500, used = 0 }
--   -- r = { amount = n (minor units; a Lua number below 2^53, else int64_t cdata),
--   --       amount_text = "decimal", quantity = "decimal", used = "decimal",
--   --       used_after = "decimal", period = "2025-12", version = card.version,
--   --       asset = card.currency, unit_asset = { code =, scale = 0 } }
--
-- A card file is Lua returning a table (evaluated with no globals, under an instruction
-- budget; it may compute its table but sees nothing of the process):
--
--   return {
--       version = "acme-2026-11",                 -- [A-Za-z0-9._:-], 1..64 bytes (LED-R-1)
--       currency = { code = "USD", scale = 2 },   -- the money asset (amounts in minor units)
--       period = "month",                         -- "window" | "day" | "month" (UTC): when the
--                                                 -- free allowance and the tiers start again
--       dimensions = {
--           bytes = { per = 1000000, free = 1000000000,
--                     tiers = { { upto = 1000000000000, price = 10 }, { price = 5 } } },
--           requests = { per = 1000, price = 2 },  -- one tier
--       },
--   }
--
-- The charge (LED-R-2, LED-R-3): within one period, with Q the period's cumulative units,
-- B = max(0, Q - free) the billable units and units_t(B) the part of B inside tier t,
--     C(Q) = floor( sum_t units_t(B) * price_t / per )         (integer arithmetic only)
-- and a slice of q units after `used` units of the same period is charged
--     amount = C(used + q) - C(used).
-- The amounts of a period's slices add up to exactly C(total) whatever the slicing (the
-- sum telescopes): a tenant pays the same for one big slice as for a thousand small ones,
-- and a fraction of a minor unit is never charged (floor, once, on the running total).
local B = require("ron.ledger.bigint")

local type, pairs, ipairs, tostring, error, setmetatable, pcall =
      type, pairs, ipairs, tostring, error, setmetatable, pcall
local format = string.format

local _M = { PERIODS = { window = true, day = true, month = true } }

local DIM_PATTERN = "^[a-z][a-z0-9_]*$"
local VERSION_PATTERN = "^[A-Za-z0-9._:-]+$"
local ASSET_PATTERN = "^[A-Za-z0-9_.:-]+$"

local Card = {}
Card.__index = Card

-- ---- the exact fast path (issue 25) ----

-- C(Q) in Lua numbers when every value it meets is an integer below 2^52, where a double is
-- exact: card:rate took 3-5 us and 1.4 KB of bigint tables per rated slice, for quantities
-- that are almost always small. FAST_MAX bounds Q times the dimension's largest price, so
-- each tier's units * price and their sum stay below it; a card's bound at or above 2^53 is
-- +inf here (a Q below 2^52 never reaches it). Anything larger takes the bigint way, which
-- stays the definition (rate_spec compares the two).
local FAST_MAX, TWO53, HUGE = 2 ^ 52, 2 ^ 53, math.huge
local floor = math.floor

local function num_of(b) -- a bigint -> an exact number below 2^53, or +inf
    local s = B.tostring(b)
    local n = #s <= 16 and tonumber(s) or HUGE
    return n < TWO53 and n or HUGE
end

local function fast_of(d)
    local maxp, tiers = 0, {}
    for i, t in ipairs(d.tiers) do
        tiers[i] = { lo = num_of(t.lo), hi = t.hi and num_of(t.hi) or HUGE, price = t.price }
        if t.price > maxp then maxp = t.price end
    end
    -- Q < qmax: Q * maxp < 2^52
    return { free = num_of(d.free), tiers = tiers, per = d.per,
             qmax = maxp > 0 and floor(FAST_MAX / maxp) or FAST_MAX }
end

-- C(Q) for Q < f.qmax, the header's formula in numbers.
local function charge_n(f, q)
    local billable = q > f.free and q - f.free or 0
    local sum = 0
    for _, t in ipairs(f.tiers) do
        if billable <= t.lo then break end
        local top = billable < t.hi and billable or t.hi
        sum = sum + (top - t.lo) * t.price
    end
    -- Exact: sum / per is rounded to nearest, but a quotient below 2^52 / per that is not
    -- an integer lies at least 1 / per below the next one, more than half a unit in the last
    -- place there (under 1 / (2 per)): the rounding never reaches it.
    return floor(sum / f.per)
end
_M._charge_n = charge_n

_M.fast = true -- (rate_spec turns it off to compare)

-- ---- validation ----

local function bad(source, path, msg)
    return nil, format("RateCardError: %s: %s%s", source, path ~= "" and path .. ": " or "", msg)
end

local function known_keys(t, keys)
    for k in pairs(t) do
        if not keys[k] then return tostring(k) end
    end
end

local function small_int(v, lo)
    return type(v) == "number" and v % 1 == 0 and v >= lo and v <= B.SMALL_MAX
end

-- A quantity in a card: an exact non-negative integer number, or a decimal string.
local function quantity(v)
    if type(v) == "number" and v >= 0 and v % 1 == 0 and v <= 2 ^ 53 then return B.from(v) end
    if type(v) == "string" and v:match("^%d+$") and #v <= 40 then return B.from(v) end
    return nil
end

local function check_dimension(source, name, d)
    local path = "dimensions." .. name
    if type(d) ~= "table" then return bad(source, path, "must be a table") end
    local unknown = known_keys(d, { per = true, free = true, tiers = true, price = true,
                                    asset = true })
    if unknown then
        return bad(source, path, "unknown key " .. unknown
                   .. " (known: per, free, price, tiers, asset)")
    end
    local out = { per = d.per or 1 }
    if not small_int(out.per, 1) then
        return bad(source, path .. ".per", "must be an integer 1 .. 2147483647, got "
                   .. tostring(d.per))
    end
    out.free = quantity(d.free or 0)
    if not out.free then
        return bad(source, path .. ".free", "must be a non-negative integer (a number up to "
                   .. "2^53 or a decimal string), got " .. tostring(d.free))
    end
    local tiers = d.tiers
    if d.price ~= nil then
        if tiers ~= nil then return bad(source, path, "give either price or tiers, not both") end
        tiers = { { price = d.price } }
    end
    if type(tiers) ~= "table" or #tiers == 0 then
        return bad(source, path, "needs price = n or tiers = { { upto =, price = }, ..., "
                   .. "{ price = } }")
    end
    out.tiers = {}
    local lo = B.from(0)
    for i, t in ipairs(tiers) do
        local tp = format("%s.tiers[%d]", path, i)
        if type(t) ~= "table" then return bad(source, tp, "must be a table") end
        local unk = known_keys(t, { upto = true, price = true })
        if unk then return bad(source, tp, "unknown key " .. unk .. " (known: upto, price)") end
        if not small_int(t.price, 0) then
            return bad(source, tp .. ".price", "must be an integer 0 .. 2147483647 (minor units "
                       .. "per `per` units), got " .. tostring(t.price))
        end
        local hi
        if i < #tiers then
            hi = quantity(t.upto)
            if not hi then
                return bad(source, tp .. ".upto", "must be a non-negative integer (every tier "
                           .. "but the last has an upper bound), got " .. tostring(t.upto))
            end
            if B.cmp(hi, lo) <= 0 then
                return bad(source, tp .. ".upto", format("must be greater than the previous "
                           .. "tier's bound (%s)", B.tostring(lo)))
            end
        elseif t.upto ~= nil then
            return bad(source, tp .. ".upto", "the last tier has no upper bound (remove upto)")
        end
        out.tiers[i] = { lo = lo, hi = hi, price = t.price }
        lo = hi
    end
    if #tiers ~= (function() local n = 0 for _ in pairs(tiers) do n = n + 1 end return n end)()
    then
        return bad(source, path .. ".tiers", "must be a list (keys 1..n only)")
    end
    local code = d.asset or ("u:" .. name)
    if type(code) ~= "string" or #code < 1 or #code > 15 or not code:match(ASSET_PATTERN) then
        return bad(source, path .. ".asset", format("the quantity's asset code must be 1..15 "
                   .. "bytes of A-Z a-z 0-9 _ . : - (the default u:<dimension> is too long "
                   .. "for %q: name one), got %s", name, tostring(code)))
    end
    out.asset = { code = code, scale = 0 }
    out.fast = fast_of(out)
    return out
end

-- new(t, source) -> card | nil, "RateCardError: <source>: <where>: <what>"
function _M.new(t, source)
    source = source or "rate card"
    if type(t) ~= "table" then return bad(source, "", "must return a table, got " .. type(t)) end
    local unknown = known_keys(t, { version = true, currency = true, period = true,
                                    dimensions = true })
    if unknown then
        return bad(source, "", "unknown key " .. unknown
                   .. " (known: version, currency, period, dimensions)")
    end
    if type(t.version) ~= "string" or #t.version < 1 or #t.version > 64
       or not t.version:match(VERSION_PATTERN) then
        return bad(source, "version", "must be 1..64 bytes of A-Z a-z 0-9 . _ : -, got "
                   .. tostring(t.version))
    end
    local cur = t.currency
    if type(cur) ~= "table" or type(cur.code) ~= "string" or not cur.code:match(ASSET_PATTERN)
       or #cur.code > 15 or not small_int(cur.scale, 0) or cur.scale > 18 then
        return bad(source, "currency", "must be { code = 1..15 bytes of A-Z a-z 0-9 _ . : -, "
                   .. "scale = 0..18 }")
    end
    local period = t.period or "month"
    if not _M.PERIODS[period] then
        return bad(source, "period", "must be \"window\", \"day\" or \"month\", got "
                   .. tostring(t.period))
    end
    if type(t.dimensions) ~= "table" or next(t.dimensions) == nil then
        return bad(source, "dimensions", "must be a table of dimension name = pricing")
    end
    local dims, codes = {}, { [cur.code] = "currency" }
    local names = {}
    for name in pairs(t.dimensions) do names[#names + 1] = name end
    table.sort(names, function(a, b) return tostring(a) < tostring(b) end)
    for _, name in ipairs(names) do
        if type(name) ~= "string" or not name:match(DIM_PATTERN) or #name > 32 then
            return bad(source, "dimensions", "a dimension name must match [a-z][a-z0-9_]* "
                       .. "(1..32 bytes), got " .. tostring(name))
        end
        local d, err = check_dimension(source, name, t.dimensions[name])
        if not d then return nil, err end
        if codes[d.asset.code] then
            return bad(source, "dimensions." .. name .. ".asset", format("asset code %q is "
                       .. "already used by %s", d.asset.code, codes[d.asset.code]))
        end
        codes[d.asset.code] = "dimensions." .. name
        dims[name] = d
    end
    return setmetatable({
        version = t.version,
        currency = { code = cur.code, scale = cur.scale },
        period = period,
        dims = dims,
        source = source,
        periods = {}, nperiods = 0, -- (period_of's memo)
    }, Card)
end

-- The card file's chunk runs with an empty environment, JIT off (so the hook fires) and
-- at most this many VM instructions.
local BUDGET = 10000000

-- load(path) -> card | nil, err
function _M.load(path)
    local f, oerr = io.open(path, "rb")
    if not f then return nil, "RateCardError: cannot read " .. tostring(oerr) end
    local text = f:read("*a")
    f:close()
    local chunk, perr = loadstring(text, "@" .. path)
    if not chunk then return nil, "RateCardError: " .. tostring(perr) end
    setfenv(chunk, {})
    jit.off(chunk, true)
    local count = 0
    debug.sethook(function()
        count = count + 1
        if count * 10000 > BUDGET then error("instruction budget exceeded", 2) end
    end, "", 10000)
    local ok, t = pcall(chunk)
    debug.sethook()
    if not ok then return nil, "RateCardError: " .. path .. ": " .. tostring(t) end
    return _M.new(t, path)
end

-- ---- the function ----

-- The period a window belongs to (LED-R-4): "w<window_start_s>", "YYYY-MM-DD" or "YYYY-MM",
-- UTC, from the window's start.
local PERIODS_MAX = 4096
local function period_text(period, window_start_s)
    if period == "window" then return format("w%d", window_start_s) end
    if period == "day" then return os.date("!%Y-%m-%d", window_start_s) end
    return os.date("!%Y-%m", window_start_s)
end

-- (remembered per window start, forgotten all at once at PERIODS_MAX: os.date took a sixth
-- of a rated slice's request, issue 25; a window start is shared by every stream's slice)
function Card:period_of(window_start_s)
    local memo = self.periods
    local p = memo[window_start_s]
    if p then return p end
    p = period_text(self.period, window_start_s)
    if self.nperiods >= PERIODS_MAX then
        memo = {}
        self.periods, self.nperiods = memo, 0
    end
    memo[window_start_s], self.nperiods = p, self.nperiods + 1
    return p
end

function Card:asset_of(dimension)
    local d = self.dims[dimension]
    return d and d.asset
end

-- C(Q): the charge for Q cumulative units of one period (see the header).
local function charge(d, q)
    local billable = B.cmp(q, d.free) > 0 and B.sub(q, d.free) or B.from(0)
    local sum = B.from(0)
    for _, t in ipairs(d.tiers) do
        if B.cmp(billable, t.lo) <= 0 then break end
        local top = t.hi and B.min(billable, t.hi) or billable
        sum = B.add(sum, B.mul_small(B.sub(top, t.lo), t.price))
    end
    return (B.div_small(sum, d.per))
end
_M._charge = charge

-- rate{ dimension, window_start_s, quantity, used } -> result | nil, "RatingError: ..."
-- quantity and used: non-negative integers (numbers, u64 cdata, decimal strings).
function Card:rate(o)
    local d = self.dims[o.dimension]
    if not d then
        return nil, format("RatingError: rate card %s has no price for dimension %q",
                           self.version, tostring(o.dimension))
    end
    if type(o.window_start_s) ~= "number" or o.window_start_s % 1 ~= 0 then
        error("ron.ledger.rate: window_start_s must be an integer", 2)
    end
    -- (each below 2^53: their sum is below qmax <= 2^52 exactly when the exact one is)
    local qn, un = _M.fast and B.exact_num(o.quantity), B.exact_num(o.used or 0)
    if qn and un and qn + un < d.fast.qmax then return self:_rated(o, d, qn, un) end
    local q, used = B.from(o.quantity), B.from(o.used or 0)
    local after = B.add(used, q)
    if not B.to_u64(after) then
        return nil, format("RatingError: the period's usage of %s would exceed 2^64 - 1",
                           o.dimension)
    end
    local amount = B.sub(charge(d, after), charge(d, used))
    local n = B.to_amount(amount)
    if not n then
        return nil, format("RatingError: the charge %s for %s exceeds 2^63 - 1 minor units",
                           B.tostring(amount), o.dimension)
    end
    return self:_result(o, d, n, B.tostring(amount), B.tostring(q), B.tostring(used),
                        B.tostring(after))
end

-- The fast path's rating (numbers: q + used < qmax).
function Card:_rated(o, d, q, used)
    local f, after = d.fast, q + used
    local n = charge_n(f, after) - charge_n(f, used)
    return self:_result(o, d, n, format("%d", n), format("%d", q), format("%d", used),
                        format("%d", after))
end

function Card:_result(o, d, n, amount_text, q, used, after)
    return {
        amount = n,
        amount_text = amount_text,
        quantity = q,
        used = used,
        used_after = after,
        period = self:period_of(o.window_start_s),
        version = self.version,
        asset = self.currency,
        unit_asset = d.asset,
    }
end

return _M
