-- ron.audit.proofs: an RFC 6962 / RFC 9162 proof read straight from a log directory, as text
-- (the daemon's proof routes, AUD-I-41; docs/AUDIT.md "Proofs for the people the records are
-- about"). The lines are the ones `ron-accounting audit proof` prints, so its client mode and
-- any RFC 9162 verifier read both:
--
--   inclusion: seq <seq> (leaf index <seq-1>) in the tree of <size> records
--   record <hex of the record's canonical bytes>      (its leaf is SHA-256(0x00 || them))
--   leaf <hex>
--   root <hex>                                        (of the first <size> records)
--   proof[0] <hex> ...                                (RFC 9162 order)
--
--   consistency: the tree of <size1> records -> the tree of <size2> records
--   root1 <hex>
--   root2 <hex>
--   proof[0] <hex> ...
--
-- Runs in the libuv threadpool (ron.audit.offload.audit_proof): the log is
-- read once up to <size> records (rau_dir_inclusion / rau_dir_consistency, memory O(log n)).
local ffi = require("ffi")
local C = require("ron.audit.lib")
local audit = require("ron.audit")

local format, concat, tonumber = string.format, table.concat, tonumber

local _M = {}

local dp = ffi.new("rau_dir_proof_t[1]")
local errbuf = ffi.new("char[?]", 512)
local rec_out = ffi.new("rau_record_t *[1]")
local attr = ffi.new("rau_attr_t[1]")

-- The record's tenant attribute (a string), or nil when it has none.
local function tenant_of(p, n)
    if C.rau_record_decode(p, n, rec_out) ~= 0 then return nil end
    local r, t = rec_out[0], nil
    for i = 0, tonumber(C.rau_record_attr_count(r)) - 1 do
        local a = attr[0]
        if C.rau_record_attr(r, i, attr) == 0 and a.type == C.RAU_ATTR_STR and
           ffi.string(a.key, a.key_len) == "tenant" then
            t = ffi.string(a.str, a.str_len)
        end
    end
    C.rau_record_free(r)
    return t
end

local function proof_lines(out, p)
    for i = 0, p.count - 1 do
        out[#out + 1] = format("proof[%d] %s", i, audit.hex(p.proof + 32 * i, 32))
    end
end

-- kind "inclusion" (a = seq, b = size) or "consistency" (a = size1, b = size2), over the log
-- in dir -> text, tenant (inclusion: the record's tenant attribute, nil when none)
-- | nil, "Name: why".
function _M.text(kind, dir, a, b)
    local rc
    if kind == "inclusion" then
        rc = C.rau_dir_inclusion(dir, a, b, dp, errbuf, 512)
    else
        rc = C.rau_dir_consistency(dir, a, b, dp, errbuf, 512)
    end
    if rc ~= 0 then return nil, audit.err_text(rc, ffi.string(errbuf)) end
    local p, out = dp[0], {}
    if kind == "inclusion" then
        out[1] = format("inclusion: seq %d (leaf index %d) in the tree of %d records", a, a - 1, b)
        out[2] = "record " .. audit.hex(p.record, p.record_len)
        out[3] = "leaf " .. audit.hex(p.leaf, 32)
        out[4] = "root " .. audit.hex(p.root2, 32)
        proof_lines(out, p)
        return concat(out, "\n") .. "\n", tenant_of(p.record, p.record_len)
    end
    out[1] = format("consistency: the tree of %d records -> the tree of %d records", a, b)
    out[2] = "root1 " .. audit.hex(p.root1, 32)
    out[3] = "root2 " .. audit.hex(p.root2, 32)
    proof_lines(out, p)
    return concat(out, "\n") .. "\n"
end

return _M
