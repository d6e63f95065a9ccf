-- ron.accounting: the Lua contract of PRODUCT.md §5 (open, record, rollover, slices,
-- pending/ack, metrics, shm, decode). The hot-path properties (no garbage, JIT) live in
-- accounting_hotpath_spec.lua.
local S = require("support")
local ffi = require("ffi")
local acct = require("ron.accounting")

local T0, TA, TB = S.T0, S.TENANT_A, S.TENANT_B
local INVALID = 'accounting_rejected_total{reason="invalid"}'

describe("ron.accounting", function()
    local meters
    local function open(cfg)
        local m, err = acct.open(cfg)
        assert.is_nil(err)
        meters[#meters + 1] = m
        return m
    end
    -- A meter on an injected clock starting at `at`. -> the meter, the clock
    local function on_clock(at)
        local clock = S.clock(at)
        return open(S.cfg { clock = clock.fn }), clock
    end
    before_each(function() meters = {} end)
    after_each(function()
        for _, m in ipairs(meters) do m:close() end
    end)

    describe("module", function()
        it("reports the library version", function()
            assert.matches("^%d+%.%d+%.%d+$", acct.version())
            assert.equal(acct._VERSION, acct.version())
        end)

        it("names every error of the taxonomy", function()
            for _, name in ipairs { "CapacityExceeded", "Busy", "DegradedExporter",
                                    "OversizeFrame", "SchemaViolation", "PersistenceFull",
                                    "DuplicateExport", "OrderOverflow", "WalCorrupt", "Timeout",
                                    "Canceled", "InvalidArgument" } do
                assert.equal(name, acct.errors[name])
            end
        end)

        it("b3hex is BLAKE3 as b3sum computes it", function()
            for _, s in ipairs { "", "abc", string.rep("x", 100000), "a\0b" } do
                assert.equal(S.b3sum(s), acct.b3hex(s))
            end
            -- The published BLAKE3 test vector for the empty input.
            assert.equal("af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262",
                         acct.b3hex(""))
        end)

        it("tenant() parses UUIDs of either case into handles", function()
            local t = assert(acct.tenant(TA:upper()))
            assert.is_true(ffi.istype("ra_tenant_t", t))
            assert.equal(TA, tostring(t))
            for _, bad in ipairs { "", "not-a-uuid", TA:sub(1, 35), TA .. "0",
                                   TA:gsub("%-", "+", 1), TA:sub(1, 35) .. "g" } do
                local h, err = acct.tenant(bad)
                S.fails("^InvalidArgument: ", h, err)
            end
            local h, err = acct.tenant(42)
            S.fails("^InvalidArgument: ", h, err)
        end)
    end)

    describe("open", function()
        it("applies the documented defaults", function()
            local m = open()
            assert.equal(300, m:window_len())
            assert.same({ "bytes", "requests", "cpu_units" }, m:dimensions())
            -- entries_max is 2 x capacity_rows (core/plane.c): the default 200000 is used.
            assert.equal(2 * acct.DEFAULTS.capacity_rows,
                         S.metric(m, "accounting_plane_entries_max"))
            assert.equal(1, S.metric(m, "accounting_amnesia")) -- RAM only, and said
            assert.is_false(m:degraded())
        end)

        it("registers extra dimensions after the built-ins", function()
            local m = open(S.cfg { dimensions = { "egress", "gpu_ms", "bytes" } })
            assert.same({ "bytes", "requests", "cpu_units", "egress", "gpu_ms" }, m:dimensions())
            assert.equal(3, m:dimension("egress"))
            assert.equal(4, m:dimension("gpu_ms"))
            local id, err = m:dimension("nope")
            S.fails("^NotFound: ", id, err)
        end)

        it("rejects unknown keys", function()
            local m, err = acct.open { window_len_s = 60, windowlen = 60 }
            assert.is_nil(m)
            assert.equal("InvalidArgument: unknown configuration key 'windowlen'", err)
        end)

        local bad = {
            { "window_len_s below 60", { window_len_s = 59 }, "window_len_s 59 is outside 60..3600" },
            { "window_len_s above 3600", { window_len_s = 3601 }, "outside 60..3600" },
            { "window_len_s fractional", { window_len_s = 300.5 }, "window_len_s must be an integer" },
            { "window_len_s a string", { window_len_s = "300" }, "window_len_s must be an integer" },
            { "window_len_s negative", { window_len_s = -300 }, "window_len_s must be an integer" },
            { "window_len_s wrapping uint32", { window_len_s = 2 ^ 32 + 300 }, "must be an integer" },
            { "shards not a power of two", { shards = 3 }, "shards 3 is not a power of two" },
            { "shards zero", { shards = 0 }, "not a power of two" },
            { "shards too many", { shards = 8192 }, "not a power of two in 1..4096" },
            { "capacity_rows zero", { capacity_rows = 0 }, "capacity_rows 0 is outside" },
            { "pending_slices_cap zero", { pending_slices_cap = 0 }, "pending_slices_cap 0 is outside" },
            { "dimensions not a list", { dimensions = "egress" }, "dimensions must be a list" },
            { "dimension with capitals", { dimensions = { "Egress" } }, "dimension name 'Egress' is invalid" },
            { "dimension starting with a digit", { dimensions = { "1x" } }, "is invalid" },
            { "dimension with a space", { dimensions = { "a b" } }, "is invalid" },
            { "dimension empty", { dimensions = { "" } }, "is invalid" },
            { "dimension of 33 bytes", { dimensions = { string.rep("a", 33) } }, "is invalid" },
            { "dimension with a NUL", { dimensions = { "ok\0bad" } }, "contains a NUL byte" },
            { "dimension not a string", { dimensions = { 7 } }, "dimensions%[1%] must be a string" },
            { "dimensions with a hole", { dimensions = { [2] = "x" } }, "must be a list" },
            { "dimension listed twice", { dimensions = { "gpu", "gpu" } }, "listed twice" },
            { "amnesia not a boolean", { amnesia = 1 }, "amnesia must be a boolean" },
            { "shm empty", { shm = "" }, "shm is empty" },
            { "clock not a function", { clock = 5 }, "clock must be a function" },
            { "host with a space", { host = "a host" }, "host 'a host' must be" },
            { "host too long", { host = string.rep("h", 65) }, "must be 0..64" },
            { "subject_key too short", { subject_key = "abcd" }, "subject_key must be 64 hex" },
            { "subject_key not hex", { subject_key = string.rep("z", 64) }, "64 hex" },
            { "wal not a table", { wal = "/var/lib/x" }, "wal must be a table" },
            { "wal unknown key", { wal = { dir = "/tmp", fsync = true } }, "unknown key wal.fsync" },
            { "wal without dir", { wal = { max_bytes = 10 } }, "wal.dir is required" },
            { "wal max_bytes negative", { wal = { dir = "/tmp", max_bytes = -1 } }, "wal.max_bytes must be a positive integer" },
            { "wal max_age_s fractional", { wal = { dir = "/tmp", max_age_s = 1.5 } }, "wal.max_age_s must be" },
            { "wal max_age_s negative", { wal = { dir = "/tmp", max_age_s = -1 } }, "wal.max_age_s must be a non%-negative integer" },
            { "wal max_entries zero", { wal = { dir = "/tmp", max_entries = 0 } }, "wal.max_entries must be a positive integer" },
        }
        for _, case in ipairs(bad) do
            it("rejects " .. case[1], function()
                local m, err = acct.open(case[2])
                if m then m:close() end
                S.fails("^InvalidArgument: ", m, err)
                assert.matches(case[3], err)
            end)
        end

        it("rejects more than 32 dimensions", function()
            local dims = {}
            for i = 1, 30 do dims[i] = "d" .. i end
            local m, err = acct.open { dimensions = dims }
            if m then m:close() end
            assert.is_nil(m)
            assert.equal("InvalidArgument: more than 32 dimensions", err)
        end)

        it("accepts wal.max_age_s = 0: no age limit, as in the C core", function()
            local m = assert(acct.open { wal = { dir = S.tmpname(".wal"), max_age_s = 0 } })
            m:close()
        end)

        it("accepts WAL caps beyond the pending ring (the backlog waits on disk); refuses "
           .. "amnesia with a WAL", function()
            local dir = S.tmpname(".wal")
            local m, err = acct.open { wal = { dir = dir, max_entries = 200000 },
                                      pending_slices_cap = 16 }
            assert(m, err)
            m:close()
            m, err = acct.open { wal = { dir = dir }, amnesia = true }
            S.fails("^InvalidArgument: amnesia = true never writes a file", m, err)
        end)

        it("raises when cfg is not a table (misuse)", function()
            assert.has_error(function() acct.open("window_len_s=60") end,
                             "ron.accounting.open: cfg must be a table or nil")
        end)

        it("close is idempotent and later calls raise", function()
            local m = assert(acct.open(S.cfg()))
            assert.is_true(m:close())
            assert.is_true(m:close())
            assert.has_error(function() m:record(TA, "a", "bytes", 1) end,
                             "ron.accounting: the meter is closed")
            assert.has_error(function() m:rollover(T0) end, "ron.accounting: the meter is closed")
            assert.has_error(function() m:metrics() end, "ron.accounting: the meter is closed")
        end)

        it("cdata() is the ra_meter_t * until close, rollover_cap() the out-array size", function()
            local ffi = require("ffi")
            local m = assert(acct.open(S.cfg { pending_slices_cap = 77 }))
            local p = m:cdata()
            assert.is_true(ffi.istype("ra_meter_t *", p) and p ~= nil)
            assert.equal(77, m:rollover_cap())
            assert.equal(0, m:pending_count())
            m:close()
            assert.is_nil(m:cdata())
            assert.has_error(function() m.cdata({}) end)
        end)

        it("set_stripe: striped handles record apart, sealing sums them", function()
            print("seed: none (no randomness)")
            local path = S.tmpname(".plane")
            local clock = S.clock(T0 + 5)
            local a = open(S.cfg { shm = path, clock = clock.fn })
            local b = open(S.cfg { shm = path, clock = clock.fn })
            assert.is_true(b:set_stripe(7))
            for _, bad in ipairs { -1, 1024, 1.5, "1" } do
                local ok, err = b:set_stripe(bad)
                S.fails("^InvalidArgument: stripe", ok, err)
            end
            for _ = 1, 10 do
                assert(a:record(TA, "alice", "bytes", 1))
                assert(b:record(TA, "alice", "bytes", 100))
            end
            local entries = a:metrics():match("\naccounting_plane_entries (%d+)")
            assert.equal("2", entries) -- one entry per stripe
            local sealed = assert(a:rollover(T0 + 60))
            assert.equal(1, #sealed)
            assert.equal(1, #sealed[1].rows)
            assert.equal(1010, tonumber(sealed[1].rows[1].inc))
        end)

        it("raises when a method is called without a meter (misuse)", function()
            local m = open(S.cfg())
            assert.has_error(function() m.record(nil, TA, "a", "bytes", 1) end)
            assert.has_error(function() m.record({}, TA, "a", "bytes", 1) end)
            assert.has_error(function() m.rollover("x") end)
            assert.has_error(function() m:ack({}) end, "ron.accounting: ack(slice): expected a slice")
        end)
    end)

    describe("record", function()
        local m, clock
        before_each(function()
            clock = S.clock(T0 + 5)
            m = open(S.cfg { clock = clock.fn, dimensions = { "egress" } })
        end)

        it("accepts strings, handles, numeric ids and 64-bit cdata", function()
            local t = assert(acct.tenant(TA))
            local s = assert(m:subject("alice"))
            assert.is_true(ffi.istype("ra_subject_t", s))
            assert.is_true(m:record(TA, "alice", "bytes", 1))
            assert.is_true(m:record(TA:upper(), "alice", "bytes", 2))
            assert.is_true(m:record(t, s, "bytes", 3))
            assert.is_true(m:record(t, "alice", m:dimension("bytes"), 4ULL))
            assert.is_true(m:record(TA, s, 0, 5LL))
            assert.is_true(m:record(t, s, "egress", 2 ^ 53 - 1))
            assert.is_true(m:record(t, s, "bytes", 0)) -- a no-op, not an error
            local slices = assert(m:rollover(T0 + 60))
            local by = S.by_stream(slices)
            assert.equal(2, #slices)
            local bytes = by[TA .. "/bytes"]
            assert.equal(1, #bytes.rows)
            assert.equal(tostring(s), bytes.rows[1].subject)
            assert.equal(15ULL, bytes.rows[1].inc)
            assert.equal(2 ^ 53 - 1, tonumber(by[TA .. "/egress"].rows[1].inc))
            assert.equal(0, S.metric(m, INVALID))
        end)

        it("hashes subjects with the meter's key", function()
            local key1, key2 = string.rep("ab", 32), string.rep("cd", 32)
            local m1 = open(S.cfg { subject_key = key1 })
            local m1b = open(S.cfg { subject_key = key1:upper() })
            local m2 = open(S.cfg { subject_key = key2 })
            local d = open(S.cfg())
            local h = tostring(m1:subject("alice"))
            assert.matches("^%x+$", h)
            assert.equal(32, #h)
            assert.equal(h, tostring(m1b:subject("alice")))
            assert.not_equal(h, tostring(m2:subject("alice")))
            assert.not_equal(h, tostring(d:subject("alice")))
            assert.not_equal(h, tostring(m1:subject("bob")))
        end)

        -- Every bad argument: an error value (never raised), counted as invalid by the core.
        local huge = 2 ^ 53
        local bad = {
            { "G-1 negative increments rejected", TA, "a", "bytes", -1 },
            { "G-1 negative int64 increments rejected", TA, "a", "bytes", -1LL },
            { "fractional increments", TA, "a", "bytes", 1.5 },
            { "NaN increments", TA, "a", "bytes", 0 / 0 },
            { "infinite increments", TA, "a", "bytes", math.huge },
            { "increments of 2^53 as Lua numbers", TA, "a", "bytes", huge },
            { "string increments", TA, "a", "bytes", "5" },
            { "missing increments", TA, "a", "bytes", nil },
            { "double cdata increments", TA, "a", "bytes", ffi.new("double", 1) },
            { "unknown dimension names", TA, "a", "nope", 1 },
            { "out-of-range dimension ids", TA, "a", 99, 1 },
            { "negative dimension ids", TA, "a", -1, 1 },
            { "fractional dimension ids", TA, "a", 0.5, 1 },
            { "missing dimensions", TA, "a", nil, 1 },
            { "malformed tenants", "not-a-uuid", "a", "bytes", 1 },
            { "tenants with a bad character", TA:sub(1, 35) .. "x", "a", "bytes", 1 },
            { "tenant numbers", 42, "a", "bytes", 1 },
            { "missing tenants", nil, "a", "bytes", 1 },
            { "tenant handles of the wrong type", ffi.new("ra_subject_t"), "a", "bytes", 1 },
            { "subject numbers", TA, 42, "bytes", 1 },
            { "missing subjects", TA, nil, "bytes", 1 },
            { "subject handles of the wrong type", TA, ffi.new("ra_tenant_t"), "bytes", 1 },
        }
        for _, case in ipairs(bad) do
            it(case[1] .. ": error value, counted as invalid", function()
                local before = S.metric(m, INVALID)
                local ok, err = m:record(case[2], case[3], case[4], case[5])
                S.fails("^InvalidArgument: ", ok, err)
                assert.equal(before + 1, S.metric(m, INVALID))
            end)
        end

        -- The same bad arguments through key() (the inc cases through record_key()).
        for _, case in ipairs(bad) do
            it(case[1] .. " through key handles: error value, counted as invalid", function()
                local before = S.metric(m, INVALID)
                local k, kerr = m:key(case[2], case[3], case[4])
                local ok, err
                if k then
                    ok, err = m:record_key(k, case[5])
                else
                    ok, err = k, kerr
                end
                S.fails("^InvalidArgument: ", ok, err)
                assert.equal(before + 1, S.metric(m, INVALID))
            end)
        end

        it("records through key handles like record(), in one row per subject", function()
            local k = assert(m:key(TA, "alice", "bytes"))
            assert.is_true(ffi.istype("ra_key_t", k))
            assert.matches("^ron%.accounting key " .. TA:gsub("%-", "%%-") .. " %x+ dimension 0$",
                           tostring(k))
            local k2 = assert(m:key(acct.tenant(TA), m:subject("alice"), m:dimension("egress")))
            assert.is_true(m:record_key(k, 1))
            assert.is_true(m:record_key(k, 2ULL))
            assert.is_true(m:record(TA, "alice", "bytes", 4)) -- the same entry
            assert.is_true(m:record_key(k, 0))
            assert.is_true(m:record_key(k2, 2 ^ 53 - 1))
            assert.equal(2, S.metric(m, "accounting_plane_entries")) -- two keys
            clock.now = T0 + 65 -- the next window: the handle's entry moves on
            assert.is_true(m:record_key(k, 8))
            for _, bad in ipairs { 42, "k", ffi.new("ra_tenant_t"), false } do
                local ok, err = m:record_key(bad, 1)
                S.fails("^InvalidArgument: key must be", ok, err)
            end
            assert.is_nil(m:record_key(nil, 1))
            assert.equal(5, S.metric(m, INVALID))
            m:set_degraded(true)
            local ok, err = m:record_key(k, 1)
            S.fails("^DegradedExporter: ", ok, err)
            m:set_degraded(false)
            local bytes, egress = {}, {}
            for _, sl in ipairs(assert(m:rollover(T0 + 120))) do
                local list = sl.dimension == "bytes" and bytes or egress
                list[#list + 1] = sl
            end
            assert.equal(2, #bytes)
            assert.equal(1, #egress)
            assert.equal(T0, bytes[1].id.window_start_s)
            assert.equal(7ULL, bytes[1].rows[1].inc)
            assert.equal(8ULL, bytes[2].rows[1].inc)
            assert.equal(tostring(m:subject("alice")), bytes[1].rows[1].subject)
            assert.equal(2 ^ 53 - 1, tonumber(egress[1].rows[1].inc))
        end)

        it("G-1 counters only grow within a window; rejected records change nothing", function()
            local t, s = acct.tenant(TA), m:subject("a")
            assert.is_true(m:record(t, s, "bytes", 10))
            assert.is_nil(m:record(t, s, "bytes", -3))
            assert.is_nil(m:record(t, s, "bytes", -1LL))
            assert.is_true(m:record(t, s, "bytes", 5))
            local slices = assert(m:rollover(T0 + 60))
            assert.equal(1, #slices)
            assert.equal(15ULL, slices[1].rows[1].inc)
        end)

        it("G-19 saturates at UINT64_MAX and counts accounting_overflow_total", function()
            local max = 0xFFFFFFFFFFFFFFFFULL
            assert.is_true(m:record(TA, "a", "egress", max - 1))
            assert.is_true(m:record(TA, "a", "egress", 5))
            assert.is_true(m:record(TA, "a", "egress", max))
            local slices = assert(m:rollover(T0 + 60))
            assert.equal(max, slices[1].rows[1].inc)
            assert.equal(2, S.metric(m, 'accounting_overflow_total{dimension="egress"}'))
            assert.equal(0, S.metric(m, 'accounting_overflow_total{dimension="bytes"}'))
        end)

        it("I-8 degraded mode refuses records with DegradedExporter", function()
            assert.is_true(m:set_degraded(true))
            assert.is_true(m:degraded())
            local ok, err = m:record(TA, "a", "bytes", 1)
            assert.is_nil(ok)
            assert.equal("DegradedExporter: exporter degraded", err)
            assert.equal(1, S.metric(m, 'accounting_rejected_total{reason="degraded"}'))
            assert.equal(1, S.metric(m, "accounting_degraded"))
            m:set_degraded(false)
            assert.is_true(m:record(TA, "a", "bytes", 1))
        end)

        it("I-7 a full plane sheds new keys with CapacityExceeded", function()
            local small = open(S.cfg { capacity_rows = 2, clock = clock.fn })
            local err
            local accepted = 0
            for i = 1, 64 do
                local ok, e = small:record(TA, "subject-" .. i, "bytes", 1)
                if not ok then err = e break end
                accepted = accepted + 1
            end
            assert.equal("CapacityExceeded: capacity exceeded", err)
            assert.equal(4, accepted) -- entries = 2 x capacity_rows
            assert.equal(1, S.metric(small, 'accounting_rejected_total{reason="capacity"}'))
            -- Existing keys still count.
            assert.is_true(small:record(TA, "subject-1", "bytes", 1))
        end)

        it("uses the injected clock: records land in the clock's window", function()
            assert.is_true(m:record(TA, "a", "bytes", 1)) -- T0 + 5
            clock.now = T0 + 65
            assert.is_true(m:record(TA, "a", "bytes", 2))
            clock.now = T0 + 125
            local slices = assert(m:rollover())
            assert.equal(2, #slices)
            assert.equal(T0, slices[1].id.window_start_s)
            assert.equal(1ULL, slices[1].rows[1].inc)
            assert.equal(T0 + 60, slices[2].id.window_start_s)
            assert.equal(2ULL, slices[2].rows[1].inc)
        end)

        it("a clock before 1970 is an invalid record, not the system clock", function()
            clock.now = -5
            local ok, err = m:record(TA, "a", "bytes", 1)
            S.fails("^InvalidArgument: ", ok, err)
            assert.equal(1, S.metric(m, INVALID))
        end)
    end)

    describe("rollover and slices", function()
        local m, clock
        before_each(function()
            m, clock = on_clock(T0 + 10.5)
        end)

        local function record_window()
            assert.is_true(m:record(TA, "alice", "bytes", 10))
            assert.is_true(m:record(TA, "bob", "bytes", 5))
            assert.is_true(m:record(TA, "alice", "bytes", 7))
            assert.is_true(m:record(TA, "carol", "bytes", 1))
            assert.is_true(m:record(TB, "alice", "requests", 1))
        end

        it("seals nothing before the window ends", function()
            record_window()
            assert.same({}, assert(m:rollover(T0 + 59.999)))
            assert.same({}, m:pending())
        end)

        it("seals the ended window into one slice per (tenant, dimension)", function()
            record_window()
            local slices = assert(m:rollover(T0 + 60))
            assert.equal(2, #slices)
            local by = S.by_stream(slices)
            local a, b = by[TA .. "/bytes"], by[TB .. "/requests"]
            assert.is_table(a)
            assert.is_table(b)
            assert.equal(TA, a.tenant)
            assert.equal("bytes", a.dimension)
            assert.same({ window_start_s = T0, window_len_s = 60, seq = 1 }, a.id)
            assert.equal(S.ZERO_B3, a.prev_b3)
            assert.is_true(a.amnesia)
            assert.equal("spec-host", a.host)
            assert.equal(3, #a.rows)
            assert.equal(3, a:row_count())
            assert.equal(23, S.total(a))
            local want = {
                [tostring(m:subject("alice"))] = 17ULL,
                [tostring(m:subject("bob"))] = 5ULL,
                [tostring(m:subject("carol"))] = 1ULL,
            }
            for _, r in ipairs(a.rows) do
                assert.matches("^" .. string.rep("%x", 32) .. "$", r.subject)
                assert.equal(r.subject:lower(), r.subject)
                assert.is_true(ffi.istype("uint64_t", r.inc))
                assert.equal(want[r.subject], r.inc)
            end
            assert.equal(1, S.total(b))
            assert.equal(1, b.id.seq)
            assert.equal(S.ZERO_B3, b.prev_b3)
        end)

        it("rows come in canonical order: ascending subject bytes", function()
            for i = 1, 200 do assert.is_true(m:record(TA, "s" .. i, "bytes", i)) end
            local s = assert(m:rollover(T0 + 60))[1]
            assert.equal(200, #s.rows)
            for i = 2, #s.rows do
                assert.is_true(s.rows[i - 1].subject < s.rows[i].subject)
            end
            assert.equal(200 * 201 / 2, S.total(s))
        end)

        it("b3 is the BLAKE3 of encode(), exactly as b3sum computes it", function()
            record_window()
            for _, s in ipairs(assert(m:rollover(T0 + 60))) do
                local bytes = s:encode()
                assert.is_string(bytes)
                assert.equal("RONS", bytes:sub(1, 4))
                assert.matches("^" .. string.rep("%x", 64) .. "$", s.b3)
                assert.equal(S.b3sum(bytes), s.b3)
                assert.equal(acct.b3hex(bytes), s.b3)
            end
        end)

        it("chains a stream: seq + 1 and prev_b3 = the previous b3", function()
            record_window()
            local first = S.by_stream(assert(m:rollover(T0 + 60)))
            clock.now = T0 + 70
            assert.is_true(m:record(TA, "alice", "bytes", 3))
            clock.now = T0 + 130
            assert.is_true(m:record(TA, "alice", "bytes", 4))
            local second = assert(m:rollover(T0 + 120))
            assert.equal(1, #second)
            local s2 = second[1]
            assert.equal(TA, s2.tenant)
            assert.equal(2, s2.id.seq)
            assert.equal(T0 + 60, s2.id.window_start_s)
            assert.equal(first[TA .. "/bytes"].b3, s2.prev_b3)
            assert.equal(3, S.total(s2))
            local third = assert(m:rollover(T0 + 180))
            assert.equal(3, third[1].id.seq)
            assert.equal(s2.b3, third[1].prev_b3)
            assert.equal(4, S.total(third[1]))
        end)

        it("G-15 seals a boundary once, whatever the clock does", function()
            record_window()
            assert.equal(2, #assert(m:rollover(T0 + 60)))
            assert.same({}, assert(m:rollover(T0 + 60)))
            assert.same({}, assert(m:rollover(T0 + 61.5)))
            assert.same({}, assert(m:rollover(T0 + 58))) -- the clock jumped back
            assert.same({}, assert(m:rollover(T0 + 60)))
            assert.equal(2, #m:pending())
        end)

        it("rollover() without now_s reads cfg.clock", function()
            record_window()
            assert.same({}, assert(m:rollover()))
            clock.now = T0 + 60.2
            assert.equal(2, #assert(m:rollover()))
        end)

        it("rejects an unusable time as a value", function()
            local s, err = m:rollover(-1)
            S.fails("^InvalidArgument: ", s, err)
            for _, bad in ipairs { 0 / 0, math.huge, 1e300, 2 ^ 53 } do
                s, err = m:rollover(bad)
                S.fails("^InvalidArgument: ", s, err)
            end
            clock.now = -60
            s, err = m:rollover()
            S.fails("^InvalidArgument: cfg.clock returned", s, err)
            assert.has_error(function() m:rollover("soon") end)
        end)

        it("G-2 the same events give the same encodings and digests", function()
            local other = open(S.cfg { clock = clock.fn })
            for _, mm in ipairs { m, other } do
                for i = 1, 50 do
                    assert.is_true(mm:record(i % 2 == 0 and TA or TB, "s" .. i % 7,
                                             i % 3 == 0 and "requests" or "bytes", i))
                end
            end
            local a, b = assert(m:rollover(T0 + 60)), assert(other:rollover(T0 + 60))
            assert.equal(4, #a)
            assert.equal(#a, #b)
            for i = 1, #a do
                assert.equal(a[i]:encode(), b[i]:encode())
                assert.equal(a[i].b3, b[i].b3)
            end
        end)

        it("G-6 amnesia is carried by slices and metrics", function()
            local ram = open(S.cfg { clock = clock.fn, amnesia = true })
            assert.is_true(ram:record(TA, "a", "bytes", 1))
            local s = assert(ram:rollover(T0 + 60))[1]
            assert.is_true(s.amnesia)
            assert.equal(1, S.metric(ram, "accounting_amnesia"))
            assert.is_true(assert(acct.decode(s:encode())).amnesia)
        end)

        it("G-6 amnesia = false: pending slices survive a restart from the WAL, digests unchanged", function()
            local dir = S.tmpname(".wal")
            local cfg = function() return S.cfg { clock = clock.fn, wal = { dir = dir } } end
            local w = open(cfg())
            assert.equal(0, S.metric(w, "accounting_amnesia"))
            assert.is_true(w:record(TA, "a", "bytes", 5))
            local sealed = assert(w:rollover(T0 + 60))
            assert.equal(1, #sealed)
            assert.is_false(sealed[1].amnesia)
            local b3 = sealed[1].b3
            w:close()
            local again = open(cfg())
            local pending = again:pending()
            assert.equal(1, #pending)
            assert.equal(b3, pending[1].b3)
            assert.equal(1, S.metric(again, "accounting_wal_replayed_slices_total"))
            assert.is_true(again:ack(pending[1])) -- compaction follows
            assert.equal(0, S.metric(again, "accounting_wal_segments"))
            -- the chain continues after every segment is gone
            assert.is_true(again:record(TA, "a", "bytes", 7))
            local next = assert(again:rollover(T0 + 120))[1]
            assert.equal(2, next.id.seq)
            assert.equal(b3, next.prev_b3)
            again:close()
        end)

        it("refuses amnesia = false while there is no WAL, instead of lying in every slice", function()
            local bad, err = acct.open(S.cfg { amnesia = false })
            S.fails("^InvalidArgument: amnesia = false needs a write%-ahead log", bad, err)
        end)

        it("slices outlive their meter", function()
            record_window()
            local slices = assert(m:rollover(T0 + 60))
            local b3 = slices[1].b3
            m:close()
            collectgarbage()
            collectgarbage()
            assert.equal(b3, acct.b3hex(slices[1]:encode()))
            assert.equal(b3, S.b3sum(slices[1]:encode()))
        end)
    end)

    describe("pending and ack", function()
        local m, clock
        before_each(function()
            m, clock = on_clock(T0 + 1)
        end)

        it("lists sealed slices oldest first until they are ACKed", function()
            assert.is_true(m:record(TA, "a", "bytes", 1))
            local w1 = assert(m:rollover(T0 + 60))
            clock.now = T0 + 61
            assert.is_true(m:record(TA, "a", "bytes", 2))
            assert.is_true(m:record(TB, "a", "bytes", 2))
            local w2 = assert(m:rollover(T0 + 120))
            assert.equal(1, #w1)
            assert.equal(2, #w2)
            local p = m:pending()
            assert.equal(3, #p)
            assert.equal(3, S.metric(m, "accounting_pending_slices"))
            assert.equal(w1[1].b3, p[1].b3)
            assert.equal(w2[1].b3, p[2].b3)
            assert.equal(w2[2].b3, p[3].b3)

            assert.is_true(m:ack(p[2]))
            local ok, err = m:ack(p[2])
            S.fails("^NotFound: ", ok, err)
            local left = m:pending()
            assert.equal(2, #left)
            assert.equal(w1[1].b3, left[1].b3)
            assert.equal(w2[2].b3, left[2].b3)
            -- Identity is (slice id, b3): a decoded copy ACKs the original.
            assert.is_true(m:ack(assert(acct.decode(left[1]:encode()))))
            assert.is_true(m:ack(left[2]))
            assert.same({}, m:pending())
            assert.equal(0, S.metric(m, "accounting_pending_slices"))
        end)

        it("a full pending ring: the slices sealed so far and CapacityExceeded; nothing lost",
           function()
            local small = open(S.cfg { clock = clock.fn, pending_slices_cap = 2 })
            assert.is_true(small:record(TA, "a", "bytes", 1))           -- window T0
            clock.now = T0 + 61
            assert.is_true(small:record(TA, "a", "bytes", 2))           -- window T0 + 60
            assert.is_true(small:record(TB, "a", "bytes", 3))
            -- Three slices are due; two fit. What was sealed comes back with the error.
            local sealed, err = small:rollover(T0 + 120)
            assert.equal("CapacityExceeded: capacity exceeded", err)
            assert.is_table(sealed)
            assert.is_true(#sealed >= 1 and #sealed <= 2)
            local pending = small:pending()
            assert.equal(#sealed, #pending)
            for i = 1, #sealed do assert.equal(sealed[i].b3, pending[i].b3) end
            assert.equal(1, S.metric(small, 'accounting_rejected_total{reason="pending_full"}'))
            -- A full ring seals nothing: a plain error.
            if #pending == 2 then
                local none, err2 = small:rollover(T0 + 120)
                assert.is_nil(none)
                assert.equal("CapacityExceeded: capacity exceeded", err2)
            end
            -- ACK and retry until everything is sealed: every count arrives exactly once.
            local all = {}
            for _, s in ipairs(sealed) do all[#all + 1] = s end
            for _ = 1, 4 do
                for _, s in ipairs(small:pending()) do assert.is_true(small:ack(s)) end
                local more, e = small:rollover(T0 + 120)
                if not more then error(e) end
                for _, s in ipairs(more) do all[#all + 1] = s end
                if #more == 0 and not e then break end
            end
            assert.equal(3, #all)
            local by = {}
            for _, s in ipairs(all) do
                by[s.tenant .. "/" .. s.id.window_start_s] = S.total(s)
            end
            assert.same({ [TA .. "/" .. T0] = 1, [TA .. "/" .. (T0 + 60)] = 2,
                          [TB .. "/" .. (T0 + 60)] = 3 }, by)
            assert.same({}, assert(small:rollover(T0 + 120)))
        end)
    end)

    describe("metrics", function()
        it("renders Prometheus text", function()
            local m = open(S.cfg())
            local text = assert(m:metrics())
            assert.matches("# TYPE accounting_rejected_total counter\n", text, 1, true)
            assert.matches("# TYPE accounting_record_latency_seconds histogram\n", text, 1, true)
            assert.equal(0, S.metric(m, INVALID))
            assert.equal("\n", text:sub(-1))
        end)

        it("grows its buffer for a long exposition", function()
            local dims = {}
            for i = 1, 29 do dims[i] = "dimension_with_a_long_name_" .. i end
            local m = open(S.cfg { dimensions = dims })
            local text = assert(m:metrics())
            assert.is_true(#text > 4096)
            for i = 1, 29 do
                assert.equal(0, S.metric(m, ('accounting_overflow_total{dimension="%s"}')
                                            :format(dims[i])))
            end
        end)
    end)

    describe("G-21", function()
        it("G-21 window length cannot change on a live meter", function()
            local m = open(S.cfg { window_len_s = 300 })
            local refused = 'accounting_rejected_total{reason="config_change"}'
            assert.is_true(m:set_window_len(300)) -- the same value is not a change
            assert.equal(0, S.metric(m, refused))
            local ok, err = m:set_window_len(60)
            assert.is_nil(ok)
            assert.equal(
                "InvalidArgument: window_len_s cannot change on a live meter; restart required",
                err)
            assert.equal(1, S.metric(m, refused))
            -- 2^32 + 300 must not wrap to 300 on its way to uint32_t.
            ok = m:set_window_len(2 ^ 32 + 300)
            assert.is_nil(ok)
            assert.equal(2, S.metric(m, refused))
            assert.equal(300, m:window_len())
            assert.has_error(function() m:set_window_len("60") end)
        end)

        it("G-21 a shm plane keeps its window length across processes", function()
            local path = S.tmpname(".plane")
            local a = open(S.cfg { shm = path, window_len_s = 60 })
            local b, err = acct.open(S.cfg { shm = path, window_len_s = 120 })
            S.fails("^Incompatible: .*window_len_s=60", b, err)
            a:close()
            os.remove(path)
        end)
    end)

    describe("shm", function()
        local path
        before_each(function() path = S.tmpname(".plane") end)
        after_each(function() os.remove(path) end)

        it("two meters share one counter plane; only one of them seals", function()
            local clock = S.clock(T0 + 3)
            local a = open(S.cfg { shm = path, clock = clock.fn })
            local b = open(S.cfg { shm = path, clock = clock.fn })
            assert.is_true(a:record(TA, "x", "bytes", 1))
            assert.is_true(b:record(TA, "x", "bytes", 2))
            assert.is_true(b:record(TA, "y", "bytes", 4))
            assert.is_nil(b:record(TA, "y", "bytes", -4)) -- counted in the shared plane

            local slices = assert(a:rollover(T0 + 60))
            assert.equal(1, #slices)
            local s = slices[1]
            assert.equal(2, #s.rows)
            assert.equal(7, S.total(s))
            local incs = {}
            for _, r in ipairs(s.rows) do incs[r.subject] = r.inc end
            assert.equal(3ULL, incs[tostring(a:subject("x"))])
            assert.equal(4ULL, incs[tostring(b:subject("y"))])

            local none, err = b:rollover(T0 + 120)
            S.fails("^Busy: ", none, err)
            assert.equal(1, S.metric(a, INVALID))
            assert.equal(1, S.metric(b, INVALID))

            -- The sealer keeps sealing what either meter records.
            clock.now = T0 + 61
            assert.is_true(b:record(TA, "x", "bytes", 5))
            local next = assert(a:rollover(T0 + 120))
            assert.equal(2, next[1].id.seq)
            assert.equal(s.b3, next[1].prev_b3)
            assert.equal(5, S.total(next[1]))
            assert.same({}, b:pending())
        end)

        it("a closed sealer hands the lock to the next meter", function()
            local a = assert(acct.open(S.cfg { shm = path }))
            local b = open(S.cfg { shm = path })
            assert.same({}, assert(a:rollover(T0 + 60)))
            assert.matches("^Busy: ", select(2, b:rollover(T0 + 60)))
            a:close()
            assert.same({}, assert(b:rollover(T0 + 120)))
        end)
    end)

    describe("decode", function()
        local bytes
        before_each(function()
            local clock = S.clock(T0)
            local m = open(S.cfg { clock = clock.fn, amnesia = true })
            assert.is_true(m:record(TA, "a", "bytes", 1))
            assert.is_true(m:record(TA, "b", "bytes", 2))
            bytes = assert(m:rollover(T0 + 60))[1]:encode()
        end)

        it("round-trips canonical bytes", function()
            local s = assert(acct.decode(bytes))
            assert.equal(bytes, s:encode())
            assert.equal(S.b3sum(bytes), s.b3)
            assert.equal(TA, s.tenant)
            assert.equal("bytes", s.dimension)
            assert.same({ window_start_s = T0, window_len_s = 60, seq = 1 }, s.id)
            assert.equal(S.ZERO_B3, s.prev_b3)
            assert.equal("spec-host", s.host)
            assert.is_true(s.amnesia)
            assert.equal(3, S.total(s))
        end)

        it("rejects anything that is not canonical encoding v1", function()
            local function rejects(b, name)
                local s, err = acct.decode(b)
                S.fails("^" .. name .. ": ", s, err)
            end
            rejects("", "SchemaViolation")
            rejects("garbage", "SchemaViolation")
            rejects(bytes:sub(1, -2), "SchemaViolation")             -- truncated row
            rejects(bytes .. "\0", "SchemaViolation")                -- trailing byte
            rejects("X" .. bytes:sub(2), "SchemaViolation")          -- magic
            rejects(bytes:sub(1, 4) .. "\2" .. bytes:sub(6), "SchemaViolation") -- version
            rejects(string.rep("\0", 2 ^ 20 + 1), "OversizeFrame")
            assert.has_error(function() acct.decode(42) end)
        end)
    end)
end)
