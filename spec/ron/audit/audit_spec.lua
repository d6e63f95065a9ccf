-- ron.audit from Lua (lua/ron/audit/): the same canonical bytes as the C golden vectors
-- (docs/AUDIT-FORMAT.md, NFC vs NFD), the bounded queue with Busy and
-- audit_drop_total{reason} (AUD-I-17), the Gap record with the exact count once the queue
-- drains (AUD-I-18), dedupe, amnesia, and verify.
local S = require("support")
local ffi = require("ffi")
local audit = require("ron.audit")

local function golden(name, field)
    local doc = S.read_file(S.root .. "docs/AUDIT-FORMAT.md")
    return doc:match("\ngolden " .. name .. " " .. field .. " (%x+)\n")
end

local function tohex(s)
    return (s:gsub(".", function(c) return ("%02x"):format(c:byte()) end))
end

local function unhex(h)
    return (h:gsub("%x%x", function(x) return string.char(tonumber(x, 16)) end))
end

local function tmpdir()
    local p = assert(io.popen("mktemp -d /tmp/rau-spec-XXXXXX"))
    local d = p:read("*l")
    p:close()
    return d
end

local T = 1700000000000

describe("ron.audit", function()
    it("encodes the golden vectors of docs/AUDIT-FORMAT.md, NFD input included", function()
        local b = assert(audit.encode("gw-1", "rejects", 1, nil, "reject", nil, T))
        assert.equal(golden("minimal", "bytes"), tohex(b))
        local prev = unhex(golden("reject", "self_hash"))
        local nfc = assert(audit.encode("gw-1", "rejects", 3, prev, "export.fail",
            { ["r\xc3\xa9gion"] = "caf\xc3\xa9" }, T + 2))
        local nfd = assert(audit.encode("gw-1", "rejects", 3, prev, "export.fail",
            { ["re\xcc\x81gion"] = "cafe\xcc\x81" }, T + 2))
        assert.equal(golden("nfc", "bytes"), tohex(nfc))
        assert.equal(nfc, nfd)
        prev = unhex(golden("nfc", "self_hash"))
        local ko = assert(audit.encode("gw-1", "rejects", 4, prev, "operator",
            { b = 1, a = 2, ["\xc3\xa9"] = 3, ab = 4, B = 5 }, T + 3))
        assert.equal(golden("keyorder", "bytes"), tohex(ko))
    end)

    it("refuses floats and wrong types, and reports SizeExceeded", function()
        assert.has_error(function() audit.encode("w", "s", 1, nil, "x", { f = 1.5 }, T) end)
        assert.has_error(function() audit.encode("w", "s", 1, nil, "x", { f = {} }, T) end)
        local ok, err = audit.encode("w", "s", 1, nil, "x", { v = ("x"):rep(2000) }, T)
        S.fails("^SizeExceeded: ", ok, err)
    end)

    it("refuses a directory in amnesia mode", function()
        local log, err = audit.open { writer_id = "w", stream = "s", amnesia = true, dir = "/tmp/x" }
        S.fails("^AmnesiaConflict: ", log, err)
        assert.has_error(function() audit.open { writer_id = "w", stream = "s", bogus = 1 } end)
    end)

    it("AUD-I-42: open_spec carries every open argument across VMs in one string", function()
        -- the threadpool's reopen: a pool body gets at most ron.base.offload.MAX_ARGS values
        local cfg = { writer_id = "gw-1", stream = "s.1", dir = "/var/x y", key_path = "k",
                      amnesia = false, checkpoint_every = 1000, rotate_bytes = 64 * 2 ^ 20,
                      batch_bytes = 8192, dedupe_window = 77, checkpoint_interval_ms = 60000 }
        local spec = audit.open_spec(cfg)
        assert.equal("string", type(spec))
        assert.same({ "gw-1", "s.1", "/var/x y", "k", false, 1000, 64 * 2 ^ 20, 8192, 77,
                      60000 }, audit.spec_args(spec))
        local a = audit.spec_args(audit.open_spec { writer_id = "w", stream = "s",
                                                    amnesia = true })
        assert.same({ "w", "s", nil, nil, true }, a)
        assert.is_nil(a[10])
    end)

    it("AUD-I-17 AUD-I-18: a full queue sheds with Busy, counts, and drains into a Gap record", function()
        local dir = tmpdir()
        local log = assert(audit.open { writer_id = "gw-1", stream = "rejects", dir = dir .. "/log",
                                        queue_cap = 4 })
        for i = 1, 4 do assert.is_true(log:emit("reject", { n = i }, T + i)) end
        for i = 5, 11 do
            local ok, err = log:emit("reject", { n = i }, T + i)
            S.fails("^Busy: ", ok, err)
        end
        assert.matches('audit_drop_total{reason="audit_backpressure"} 7\n', log:metrics(), 1, true)
        assert.matches('audit_queue_depth{queue="audit_work"} 4\n', log:metrics(), 1, true)
        assert.equal(4, log:drain())
        local st = log:stats()
        assert.equal(5, st.head_seq) -- four events and one gap
        assert.equal(5, st.durable_seq)
        assert.equal(1, st.syncs)    -- one group commit
        -- the head is exactly the Gap record we expect: dropped 7, from T+5 to T+11
        local ok, recs = audit.verify(dir .. "/log")
        assert.is_true(ok)
        assert.equal(5, recs)
        -- recompute the chain from scratch in Lua and compare heads
        local prev = nil
        local C = require("ron.audit.lib")
        local h = ffi.new("uint8_t[32]")
        for i = 1, 4 do
            local b = assert(audit.encode("gw-1", "rejects", i, prev, "reject", { n = i }, T + i))
            C.rau_record_hash(b, #b, h)
            prev = ffi.string(h, 32)
        end
        local gap = assert(audit.encode("gw-1", "rejects", 5, prev, "gap",
            { dropped = 7, from_ts_ms = T + 5, to_ts_ms = T + 11, reason = "audit_backpressure",
              head_seq = 0, kinds = "reject:7" },
            T + 11))
        C.rau_record_hash(gap, #gap, h)
        assert.equal(audit.hex(h, 32), st.head_hash)
        -- a second drain with nothing shed appends no second gap
        assert.is_true(log:emit("reject", { n = 12 }, T + 12))
        assert.equal(1, log:drain())
        assert.equal(6, log:stats().head_seq)
        assert.is_true(log:close())
        os.execute("rm -rf '" .. dir .. "'")
    end)

    it("AUD-I-18 AUD-I-6: two gaps with the same counts in the same millisecond stay two records",
       function()
        -- (a queue of one under 8 connections: the daemon's gaps of 5 in one ms folded into
        -- one record, 5 shed events in no record; the gap's head_seq keeps them apart)
        local log = assert(audit.open { writer_id = "w", stream = "s", amnesia = true,
                                        queue_cap = 1 })
        for round = 1, 2 do
            assert.is_true(log:emit("reject", { round = round }, T))
            assert.matches("^Busy: ", select(2, log:emit("reject", { round = round, x = 1 }, T)))
            assert.equal(1, log:drain())
            assert.equal(2 * round, log:stats().head_seq)
        end
        assert.equal(0, log:stats().duplicates)
        assert.is_true(log:close())
    end)

    it("AUD-I-37: open_info says whether the open used the head file, and why not", function()
        local host = require("ron.audit.host")
        local dir = tmpdir()
        local cfg = { writer_id = "w", stream = "s", dir = dir .. "/log" }
        local log = assert(audit.open(cfg))
        assert.same({ head_used = false, decoded = 0, hashed = 0, why = "no head file" },
                    log:open_info())
        assert.equal("opened empty", host.open_text(log:open_info()))
        for i = 1, 5 do assert.is_true(log:emit("reject", { n = i }, T + i)) end
        assert.equal(5, log:drain())
        assert.is_true(log:close())
        assert.is_nil(log:open_info())
        log = assert(audit.open(cfg))
        local o = log:open_info()
        assert.is_true(o.head_used)
        assert.equal(5, o.hashed)
        assert.equal(0, o.decoded)
        assert.equal("opened from its head file (5 records hashed, 0 decoded)", host.open_text(o))
        assert.is_true(log:close())
        -- without its head file: every record decoded, and why
        assert.is_true(os.remove(dir .. "/log/head.rau"))
        log = assert(audit.open(cfg))
        o = log:open_info()
        assert.same({ head_used = false, decoded = 5, hashed = 0, why = "no head file" }, o)
        assert.equal("opened by decoding all 5 records (no head file)", host.open_text(o))
        assert.is_true(log:close())
        os.execute("rm -rf '" .. dir .. "'")
    end)

    it("AUD-I-6: a re-emitted event keeps its first position", function()
        local log = assert(audit.open { writer_id = "w", stream = "s", amnesia = true })
        assert.is_true(log:emit("reject", { tenant = "a" }, T))
        assert.is_true(log:emit("reject", { tenant = "b" }, T))
        assert.is_true(log:emit("reject", { tenant = "a" }, T))
        assert.equal(3, log:drain())
        local st = log:stats()
        assert.equal(2, st.head_seq)
        assert.equal(1, st.duplicates)
        assert.is_true(log:close())
    end)

    it("verify reports problems with positions", function()
        local ok, problems = audit.verify("/nonexistent/audit")
        assert.is_nil(ok)
        assert.equal(1, #problems)
    end)
end)
