-- ron.accounting.export.loss: the accepted-loss record (docs/EXPORT.md §2, "Accepted
-- losses"), shared by the ledgers that record an operator's accepted loss (exporters.file,
-- exporters.postgres). Little-endian like the slice encoding:
--   RONL, version 1, flags 0, reserved 0, tenant (16), accepted_at_s (u64), reserved (u32),
--   seq (u64), prev_b3 (32), link_b3 (32, the b3 the next record links to), range first and
--   last seq (u64 each), dimension (u8 length + bytes), reason (u8 length + printable ASCII)
--
--   loss.check(o) -> reason | nil, err     the operator's request, checked
--   loss.records(o, head_seq, head_raw) -> { { seq =, bytes =, link = raw32 }, ... } | nil, err
--   loss.seq(bytes, link) -> seq | nil     a well-formed record whose link_b3 is link
local bit = require("bit")

local band, rshift = bit.band, bit.rshift
local byte, char, rep = string.byte, string.char, string.rep
local floor, type, tonumber = math.floor, type, tonumber

local _M = {}

_M.MAGIC = "RONL"
_M.MAX_RANGE = 1000000 -- seqs one accept_loss may give up (one record each)
_M.MAX_REASON = 200
local ZERO32 = rep("\0", 32)
local UUID_PATTERN = "^" .. rep("%x", 8) .. "%-" .. rep("%x", 4) .. "%-" .. rep("%x", 4) .. "%-"
                     .. rep("%x", 4) .. "%-" .. rep("%x", 12) .. "$"

local function u32le(n)
    return char(band(n, 255), band(rshift(n, 8), 255), band(rshift(n, 16), 255),
                band(rshift(n, 24), 255))
end

local function u64le(n)
    local lo = n % 4294967296
    return u32le(lo) .. u32le((n - lo) / 4294967296)
end

local function get_u64(s, i) -- exact below 2^53, which every real seq is
    local a, b, c, d = byte(s, i, i + 3)
    local e, f, g, h = byte(s, i + 4, i + 7)
    return (e + f * 256 + g * 65536 + h * 16777216) * 4294967296
           + a + b * 256 + c * 65536 + d * 16777216
end

local function fromhex(h)
    return (h:gsub("%x%x", function(x) return char(tonumber(x, 16)) end))
end

-- -> the reason ("" when none) | nil, "InvalidArgument: ..."
function _M.check(o)
    if type(o) ~= "table" or type(o.tenant) ~= "string" or not o.tenant:match(UUID_PATTERN)
       or type(o.dimension) ~= "string" or not o.dimension:match("^[a-z][a-z0-9_]*$")
       or #o.dimension > 32 or type(o.through_seq) ~= "number" or o.through_seq < 1
       or o.through_seq ~= floor(o.through_seq) or o.through_seq >= 2 ^ 53
       or type(o.link_b3) ~= "string" or not o.link_b3:match("^" .. rep("%x", 64) .. "$") then
        return nil, "InvalidArgument: accept_loss expects { tenant = uuid, dimension = name, "
                    .. "through_seq = n >= 1, link_b3 = 64 hex digits, reason = text }"
    end
    local reason = o.reason or ""
    if type(reason) ~= "string" or #reason > _M.MAX_REASON
       or not reason:match("^[\32-\126]*$") then
        return nil, ("InvalidArgument: accept_loss: the reason must be printable ASCII, at most "
                     .. "%d bytes"):format(_M.MAX_REASON)
    end
    return reason
end

-- The records of an accepted loss of seqs head_seq + 1 .. o.through_seq, chained from the
-- head's b3 (raw); the last one's link is o.link_b3 (the prev_b3 of the slice that follows),
-- the others' 32 zero bytes.
function _M.records(o, head_seq, head_raw)
    local reason, err = _M.check(o)
    if not reason then return nil, err end
    local first, last = head_seq + 1, o.through_seq
    if last < first then
        return nil, ("InvalidArgument: accept_loss: nothing is missing: the ledger's head of "
                     .. "%s/%s is seq %d"):format(o.tenant, o.dimension, head_seq)
    end
    if last - first + 1 > _M.MAX_RANGE then
        return nil, ("InvalidArgument: accept_loss: %d seqs at once (at most %d)"):format(
            last - first + 1, _M.MAX_RANGE)
    end
    local fixed = _M.MAGIC .. "\1\0\0\0" .. fromhex(o.tenant:gsub("-", ""))
        .. u64le(floor(o.now_s or os.time())) .. "\0\0\0\0"
    local tail = u64le(first) .. u64le(last) .. char(#o.dimension) .. o.dimension
        .. char(#reason) .. reason
    local out, prev = {}, head_raw
    for seq = first, last do
        local link = seq == last and fromhex(o.link_b3) or ZERO32
        out[#out + 1] = { seq = seq, bytes = fixed .. u64le(seq) .. prev .. link .. tail,
                          link = link, prev = prev }
        prev = link
    end
    return out
end

-- nil, or the seq of a well-formed loss record whose link_b3 is link.
function _M.seq(bytes, link)
    local n = #bytes
    if n < 127 or bytes:sub(1, 8) ~= "RONL\1\0\0\0" or bytes:sub(33, 36) ~= "\0\0\0\0" then
        return nil
    end
    local d = byte(bytes, 125)
    if d < 1 or d > 32 or 126 + d > n then return nil end
    local r = byte(bytes, 126 + d)
    if r > _M.MAX_REASON or 126 + d + r ~= n then return nil end
    if not bytes:sub(127 + d):match("^[\32-\126]*$") then return nil end
    local seq, first, last = get_u64(bytes, 37), get_u64(bytes, 109), get_u64(bytes, 117)
    if seq < first or seq > last or first < 1 then return nil end
    if bytes:sub(77, 108) ~= link then return nil end
    return seq
end

return _M
