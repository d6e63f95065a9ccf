-- An independent RFC 9162 §2.1.3.2 / §2.1.4.2 proof checker (SHA-256 through libsodium by
-- FFI, not libronaudit) for `audit proof` output and the daemon's proof routes' answers
-- (tests/audit/proof.sh, AUD-I-8; tests/host/audit-proofs.sh, AUD-I-41):
--
--   luajit tests/audit/rfc9162.lua [ROOT-HEX [ROOT1-HEX]] < proof   exit 0: it verifies
--
-- It reads the verb's lines (inclusion: seq, size, leaf, root; consistency: sizes, root1,
-- root2; proof[i]) and checks them with its own arithmetic. A "record <hex>" line (the
-- daemon sends the record) must hash to the leaf (RFC 6962: SHA-256(0x00 || record)).
-- ROOT-HEX (and ROOT1-HEX): the roots the caller trusts (a signed checkpoint's), which the
-- answer's must equal.
local ffi = require("ffi")
ffi.cdef [[
int crypto_hash_sha256(unsigned char *out, const unsigned char *in, unsigned long long inlen);
]]
local na = ffi.load("sodium")
local out = ffi.new("unsigned char[32]")

local function sha(s)
    na.crypto_hash_sha256(out, s, #s)
    return ffi.string(out, 32)
end
local function node(l, r) return sha("\1" .. l .. r) end
local function unhex(h) return (h:gsub("..", function(x) return string.char(tonumber(x, 16)) end)) end

local text = io.read("*a")
local proof = {}
for i, h in text:gmatch("proof%[(%d+)%] (%x+)") do proof[tonumber(i) + 1] = unhex(h) end

local function bit_and(a, b) return require("bit").band(a, b) end
local function rshift(a, n) return require("bit").rshift(a, n) end

-- The walk both proofs share (RFC 9162 §2.1.3.2 step 5, §2.1.4.2 step 7): for each node c
-- of path, while sn is not 0, left(c) when LSB(fn) is set or fn == sn (then fn and sn
-- shifted right until LSB(fn) is set or fn is 0), else right(c); fn and sn shifted right
-- once. -> whether sn ended 0 (and never was before a node)
local function walk(path, fn, sn, left, right)
    for _, c in ipairs(path) do
        if sn == 0 then return false end
        if bit_and(fn, 1) == 1 or fn == sn then
            left(c)
            while bit_and(fn, 1) == 0 and fn ~= 0 do fn, sn = rshift(fn, 1), rshift(sn, 1) end
        else
            right(c)
        end
        fn, sn = rshift(fn, 1), rshift(sn, 1)
    end
    return sn == 0
end

local function inclusion(index, size, leaf, root)
    if index >= size then return false end
    local r = leaf
    return walk(proof, index, size - 1, function(p) r = node(p, r) end,
                function(p) r = node(r, p) end) and r == root
end

local function consistency(s1, s2, root1, root2)
    if s1 == s2 then return #proof == 0 and root1 == root2 end
    if s1 == 0 then return #proof == 0 end
    if #proof == 0 then return false end
    local p = {}
    for i, h in ipairs(proof) do p[i] = h end
    -- a power of two: root1 is the first node of the path
    local x = s1
    while bit_and(x, 1) == 0 do x = rshift(x, 1) end
    if x == 1 then table.insert(p, 1, root1) end
    local fn, sn = s1 - 1, s2 - 1
    while bit_and(fn, 1) == 1 do fn, sn = rshift(fn, 1), rshift(sn, 1) end
    local fr, sr = p[1], p[1]
    return walk({ unpack(p, 2) }, fn, sn, function(c) fr, sr = node(c, fr), node(c, sr) end,
                function(c) sr = node(sr, c) end) and fr == root1 and sr == root2
end

local ok
local seq, size = text:match("inclusion: seq (%d+) %(leaf index %d+%) in the tree of (%d+)")
if seq then
    local leaf, root = text:match("\nleaf (%x+)"), text:match("\nroot (%x+)")
    local rec = text:match("\nrecord (%x+)\n")
    ok = inclusion(tonumber(seq) - 1, tonumber(size), unhex(leaf), unhex(root))
         and (not rec or sha("\0" .. unhex(rec)) == unhex(leaf))
         and (not arg[1] or arg[1] == root)
else
    local s1, s2 = text:match("consistency: the tree of (%d+) records %-> the tree of (%d+)")
    local r1, r2 = text:match("\nroot1 (%x+)"), text:match("\nroot2 (%x+)")
    ok = s1 and consistency(tonumber(s1), tonumber(s2), unhex(r1), unhex(r2))
         and (not arg[1] or arg[1] == r2) and (not arg[2] or arg[2] == r1)
end
if not ok then
    io.stderr:write("rfc9162.lua: the proof does NOT verify\n", text)
    os.exit(1)
end
