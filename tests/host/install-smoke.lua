-- install-tree: run by the INSTALLED host. ron.accounting must come from the install
-- prefix (arg[1]), not from the source tree, and must reach the core through ffi.C.
local acct = require("ron.accounting")

local prefix = assert(arg[1], "usage: install-smoke.lua PREFIX")
local found = package.searchpath("ron.accounting", package.path)
assert(found and found:sub(1, #prefix + 1) == prefix .. "/",
       "ron.accounting came from " .. tostring(found) .. ", not from " .. prefix)

local now = 1735689600 -- 2025-01-01T00:00:00Z
local meter = assert(acct.open { window_len_s = 60, clock = function() return now end })
local tenant = "00000000-0000-4000-8000-000000000001"
assert(meter:record(tenant, "user:a", "requests", 3))
assert(meter:record(tenant, "user:b", "requests", 4))
now = now + 60
local slices = assert(meter:rollover())
assert(#slices == 1, "expected 1 slice, got " .. #slices)
local s = slices[1]
assert(s.tenant == tenant and s.dimension == "requests" and tonumber(s.id.seq) == 1)
assert(#s.rows == 2 and tonumber(s.rows[1].inc) + tonumber(s.rows[2].inc) == 7)
assert(#s.b3 == 64 and s.prev_b3 == string.rep("0", 64))
assert(#s:encode() > 0)
meter:close()
print("install-smoke.lua: ok (ron.accounting from " .. found .. ", b3 " .. s.b3 .. ")")
