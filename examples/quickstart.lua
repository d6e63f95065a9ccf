-- quickstart.lua: ron-accounting on one page.
--
--   make run                                    (builds, then runs this script)
--   build/ron-accounting run examples/quickstart.lua
--
-- The script walks through what the product does:
--
--   1. open a meter: a counter plane private to this process, 300-second UTC windows;
--   2. record a deterministic mix of traffic (three tenants, a few subjects each, the
--      built-in dimensions bytes, requests and cpu_units) over three windows;
--   3. roll the windows over: each (tenant, dimension) with activity in a window becomes
--      one sealed, immutable slice with a BLAKE3 digest (b3), chained to the previous
--      slice of its stream through prev_b3;
--   4. write each slice's canonical bytes to ./var/quickstart/ and let b3sum, an
--      independent BLAKE3 implementation, confirm every digest;
--   5. check the hash chains and conservation (what was recorded is what was sealed);
--   6. ACK the slices, as a downstream ledger would, and show a few metrics.
--
-- Windows are 300 s long. Instead of waiting a quarter of an hour, the meter gets an
-- injected clock (cfg.clock) that this script moves forward by hand: simulated time,
-- real slices.

local acct = require("ron.accounting")

local WINDOW_S = 300
local T0 = 1735689600 -- 2025-01-01T00:00:00Z, a window boundary
local WINDOWS = 3
local REQUESTS_PER_WINDOW = 1000
local OUT_DIR = "var/quickstart"
local ZERO_B3 = string.rep("0", 64)

local function iso(t)
    return os.date("!%Y-%m-%dT%H:%M:%SZ", t)
end

local function fail(msg)
    io.stderr:write("quickstart: FAILED: ", msg, "\n")
    os.exit(1)
end

-- os.execute returns 0 under Lua 5.1 semantics and true under 5.2 compatibility.
local function sh(cmd)
    local ok = os.execute(cmd)
    return ok == 0 or ok == true
end

---------------------------------------------------------------------------------------
-- The traffic. Tenants are UUIDs; subjects are opaque strings (user ids, API keys). The
-- meter hashes a subject with keyed BLAKE3 before it is counted, so raw identifiers never
-- reach a slice: rows carry 128-bit subject digests.
---------------------------------------------------------------------------------------
local TENANTS = {
    { name = "acme", id = "6f1c3c1e-2b7a-4d5e-9a43-0c8e5b1f7a21",
      subjects = { "user:alice", "user:bob", "api-key:acme-ci" } },
    { name = "globex", id = "b2d4e6f8-1a3c-4e5f-8b7d-9c0e2f4a6b8d",
      subjects = { "user:carol", "api-key:globex-etl" } },
    { name = "initech", id = "3e9a1b5c-7d2f-4a6e-b1c8-5f0d3e7a9b24",
      subjects = { "user:peter", "user:samir", "user:milton", "api-key:initech-tps" } },
}
local NAME_OF = {}
for _, t in ipairs(TENANTS) do NAME_OF[t.id] = t.name end

-- Which tenants are active in which window (1-based): streams appear only with activity,
-- so initech's first slices are in window 2 and globex has none in window 3.
local ACTIVE = { { 1, 2 }, { 1, 2, 3 }, { 1, 3 } }

-- A tiny deterministic generator (Park-Miller; products stay below 2^53, so Lua numbers
-- are exact): every run records exactly the same traffic.
local seed = 20250101
local function rand(n) -- 1..n
    seed = seed * 16807 % 2147483647
    return seed % n + 1
end

---------------------------------------------------------------------------------------
-- 1. Open a meter on the simulated clock.
---------------------------------------------------------------------------------------
local now = T0
local meter = assert(acct.open {
    window_len_s = WINDOW_S,
    clock = function() return now end, -- UTC seconds; without it, the system clock
})

print(("ron-accounting quickstart: %d windows of %d s on a simulated clock (no waiting)")
    :format(WINDOWS, WINDOW_S))
print("tenants:")
for _, t in ipairs(TENANTS) do print(("  %-8s %s"):format(t.name, t.id)) end

-- Errors on the hot path are values, never exceptions.
local ok, err = meter:record("not-a-uuid", "user:alice", "requests", 1)
print(("record with a malformed tenant -> %s, %s"):format(tostring(ok), tostring(err)))

---------------------------------------------------------------------------------------
-- 2. + 3. Record a window of traffic, move the clock past its end, roll over.
---------------------------------------------------------------------------------------
-- meter:record(), plus our own running totals to check conservation against in step 5.
local recorded = {} -- ["<tenant>/<dimension>"] = total recorded
local function record(tenant, subject, dimension, inc)
    assert(meter:record(tenant, subject, dimension, inc))
    local key = tenant .. "/" .. dimension
    recorded[key] = (recorded[key] or 0) + inc
end

local sealed = {} -- every slice, in the order rollover returned them

for w = 1, WINDOWS do
    local start = T0 + (w - 1) * WINDOW_S
    local active = ACTIVE[w]
    for i = 1, REQUESTS_PER_WINDOW do
        -- Spread the requests over the window, as a gateway would see them.
        now = start + math.floor((i - 1) * WINDOW_S / REQUESTS_PER_WINDOW)
        local t = TENANTS[active[rand(#active)]]
        local subject = t.subjects[rand(#t.subjects)]
        record(t.id, subject, "requests", 1)
        record(t.id, subject, "bytes", 200 + rand(64 * 1024))
        record(t.id, subject, "cpu_units", rand(20))
    end

    -- Inside a window there is nothing to seal yet.
    if w == 1 then
        local none = assert(meter:rollover())
        print(("\nrollover() at %s, inside the window: %d slices"):format(iso(now), #none))
    end

    now = start + WINDOW_S -- the boundary: window w has ended
    local slices = assert(meter:rollover())
    print(("\nwindow %s: %d requests recorded; rollover() at %s sealed %d slices")
        :format(iso(start), REQUESTS_PER_WINDOW, iso(now), #slices))
    for _, s in ipairs(slices) do
        print(("  tenant %s (%s)  %-9s  seq %d  window_start %s  rows %d")
            :format(s.tenant, NAME_OF[s.tenant] or "?", s.dimension, tonumber(s.id.seq),
                    iso(tonumber(s.id.window_start_s)), #s.rows))
        print(("      b3 %s  prev_b3 %s…"):format(s.b3, s.prev_b3:sub(1, 16)))
        sealed[#sealed + 1] = s
    end
end

---------------------------------------------------------------------------------------
-- 4. The canonical bytes, on disk, checked by b3sum.
---------------------------------------------------------------------------------------
assert(sh("mkdir -p " .. OUT_DIR), "cannot create " .. OUT_DIR)
sh("rm -f " .. OUT_DIR .. "/*.slice") -- only this run's slices
local files, by_path = {}, {}
for _, s in ipairs(sealed) do
    local path = ("%s/%s-%s-%d.slice"):format(OUT_DIR, s.tenant, s.dimension, tonumber(s.id.seq))
    local f = assert(io.open(path, "wb"))
    f:write(s:encode())
    f:close()
    files[#files + 1] = path
    by_path[path] = s
end
print(("\nwrote %d slices to %s/"):format(#files, OUT_DIR))

if not sh("command -v b3sum >/dev/null 2>&1") then
    fail("b3sum is not installed (Debian package b3sum; tools/deps.sh installs it)")
end
local confirmed = 0
local p = assert(io.popen("b3sum " .. table.concat(files, " ")))
for line in p:lines() do
    local digest, path = line:match("^(%x+)%s+(.+)$")
    local s = by_path[path]
    if s and digest == s.b3 then
        confirmed = confirmed + 1
    else
        print(("  MISMATCH %s: b3sum %s, slice.b3 %s"):format(tostring(path), tostring(digest),
            s and s.b3 or "(no such slice)"))
    end
end
p:close()
print(("b3sum confirms %d/%d digests"):format(confirmed, #files))
if confirmed ~= #files then fail("b3sum disagrees with slice.b3") end

---------------------------------------------------------------------------------------
-- 5. Hash chains and conservation.
---------------------------------------------------------------------------------------
local streams, order = {}, {} -- ["<tenant>/<dimension>"] = slices in seq order
for _, s in ipairs(sealed) do
    local key = s.tenant .. "/" .. s.dimension
    if not streams[key] then
        streams[key] = {}
        order[#order + 1] = key
    end
    table.insert(streams[key], s)
end

local example
for _, key in ipairs(order) do
    local prev
    for _, s in ipairs(streams[key]) do
        local seq = tonumber(s.id.seq)
        local want_seq = prev and tonumber(prev.id.seq) + 1 or 1
        local want_prev = prev and prev.b3 or ZERO_B3
        if seq ~= want_seq then
            fail(("%s: seq %d, expected %d"):format(key, seq, want_seq))
        end
        if s.prev_b3 ~= want_prev then
            fail(("%s seq %d: prev_b3 does not link to the previous b3"):format(key, seq))
        end
        if seq == 2 and not example then example = { key = key, s1 = prev, s2 = s } end
        prev = s
    end
end
print(("\nchains: %d streams, every seq 1 starts from zero and every prev_b3 is the previous b3")
    :format(#order))
if example then
    local t, dim = example.key:match("^(.-)/(.+)$")
    print(("  %s %s: seq 2 prev_b3 %s…"):format(NAME_OF[t], dim, example.s2.prev_b3:sub(1, 24)))
    print(("  %s %s: seq 1 b3      %s…"):format(NAME_OF[t], dim, example.s1.b3:sub(1, 24)))
end

for key, total in pairs(recorded) do
    local got = 0
    for _, s in ipairs(streams[key] or {}) do
        for _, row in ipairs(s.rows) do got = got + tonumber(row.inc) end
    end
    if got ~= total then fail(("%s: recorded %d, sealed %d"):format(key, total, got)) end
end
print("conservation: for every stream, the sealed rows add up to exactly what was recorded")

---------------------------------------------------------------------------------------
-- 6. ACK (the downstream stored the slices) and metrics.
---------------------------------------------------------------------------------------
local pending = meter:pending()
for _, s in ipairs(pending) do assert(meter:ack(s)) end
print(("\nacked %d pending slices; %d left pending"):format(#pending, #meter:pending()))

print("\nmetrics (Prometheus text, excerpt):")
local SHOW = {
    accounting_sealed_windows_total = true,
    accounting_sealed_slices_total = true, accounting_sealed_rows_total = true,
    accounting_pending_slices = true, accounting_stream_heads = true,
    accounting_plane_entries_max = true,
}
for line in meter:metrics():gmatch("[^\n]+") do
    if SHOW[line:match("^([%w_]+)")] then print("  " .. line) end
end

meter:close()
print(("\nquickstart: OK (%d slices sealed and verified, %d streams chained)")
    :format(#sealed, #order))
