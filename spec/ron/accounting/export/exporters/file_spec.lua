-- ron.accounting.export.exporters.file: the file ledger enforces the export contract of
-- docs/EXPORT.md (ok, dup, conflict, gap), is durable and append-only, survives a torn
-- record, and serialises concurrent writers (G-3, G-16). The exporter interface check
-- (ron.accounting.export.exporters) is here too.
local S = require("support")
local acct = require("ron.accounting")
local exporter = require("ron.accounting.export.exporters")
local file = require("ron.accounting.export.exporters.file")

local T0, TA = S.T0, S.TENANT_A

local chain = S.chain

-- Records of a ledger file: { {len, bytes, trailer}, ... } and the bytes after the last
-- complete record.
local function records(path)
    local data = S.read_file(path)
    local out, off = {}, 1
    while off + 3 <= #data do
        local a, b, c, d = data:byte(off, off + 3)
        local n = a + b * 256 + c * 65536 + d * 16777216
        if off + 4 + n + 32 - 1 > #data then break end
        out[#out + 1] = { n = n, bytes = data:sub(off + 4, off + 3 + n),
                          trailer = data:sub(off + 4 + n, off + 3 + n + 32) }
        off = off + 4 + n + 32
    end
    return out, data:sub(off)
end

local function mode_of(path)
    local out = S.run("stat -c %a " .. S.shell_quote(path))
    return (out:gsub("%s+$", ""))
end

describe("ron.accounting.export.exporters.check", function()
    it("accepts a table with put and close, head optional", function()
        local e = { put = function() return "ok" end, close = function() end }
        assert.equal(e, exporter.check(e))
        e.head = function() end
        assert.equal(e, exporter.check(e))
    end)

    it("raises on a malformed exporter", function()
        assert.has_error(function() exporter.check(nil) end,
                         "ron.accounting.export.exporters: an exporter must be a table, got nil")
        assert.has_error(function() exporter.check { close = function() end } end,
                         "ron.accounting.export.exporters: exporter.put must be a function, got nil")
        assert.has_error(function() exporter.check { put = function() end } end,
                         "ron.accounting.export.exporters: exporter.close must be a function, got nil")
        assert.has_error(function()
            exporter.check { put = function() end, close = function() end, head = 1 }
        end, "ron.accounting.export.exporters: exporter.head must be a function or nil, got number")
    end)

    it("names the seven answers of the contract", function()
        for _, s in ipairs { "ok", "dup", "conflict", "gap", "retry_network",
                             "retry_remote_5xx", "retry_timeout" } do
            assert.is_true(exporter.is_status(s))
        end
        assert.is_false(exporter.is_status("fail"))
        assert.is_true(exporter.ACKED.dup)
        assert.is_nil(exporter.ACKED.conflict)
        assert.is_true(exporter.RETRYABLE.retry_timeout)
    end)

    it("the file ledger is an exporter", function()
        local dir = S.tmpname(".ledger")
        local l = assert(file.new { dir = dir })
        assert.equal(l, exporter.check(l))
        l:close()
        S.run("rm -rf " .. S.shell_quote(dir))
    end)
end)

describe("ron.accounting.export.exporters.file", function()
    local dir, repairs
    local function ledger(extra)
        local opts = { dir = dir, fsync = true, on_repair = function(i) repairs[#repairs + 1] = i end }
        for k, v in pairs(extra or {}) do opts[k] = v end
        return assert(file.new(opts))
    end
    local function stream_path() return dir .. "/" .. TA .. "/bytes.ledger" end
    -- A fresh ledger and n chained slices of TA/bytes (S.chain) to put into it.
    local function with_chain(n) return ledger(), chain(n) end

    before_each(function()
        dir = S.tmpname(".ledger")
        repairs = {}
    end)
    after_each(function() S.run("rm -rf " .. S.shell_quote(dir)) end)

    it("list_heads lists every stream's head; a meter seeded with them continues the chains",
       function()
        local l = ledger()
        assert.same({}, l:list_heads())
        local c = chain(3)
        for i = 1, 3 do assert.equal("ok", l:put(c[i])) end
        local hs = assert(l:list_heads())
        assert.same({ { tenant = TA, dimension = "bytes", seq = 3, b3 = c[3].b3 } }, hs)
        -- a fresh meter (its heads lost) seeded with the ledger's: the next slice is seq 4
        local clock = S.clock(T0 + 60 * 3 + 5)
        local m = assert(acct.open(S.cfg { clock = clock.fn }))
        assert.is_true(m:seed_head(hs[1].tenant, hs[1].dimension, hs[1]))
        assert.is_true(m:seed_head(TA, "bytes", hs[1])) -- the same head again: fine
        local ok, err = m:seed_head(TA, "bytes", { seq = 2, b3 = c[2].b3 })
        S.fails("^Incompatible: ", ok, err)
        assert.matches("^InvalidArgument: ", select(2, m:seed_head(TA, "nope", hs[1])))
        assert.matches("^InvalidArgument: ", select(2, m:seed_head(TA, "bytes", { seq = 0 })))
        assert.matches("^InvalidArgument: ", select(2, m:seed_head("x", "bytes", hs[1])))
        assert(m:record(TA, "alice", "bytes", 9))
        local s4 = assert(m:rollover(T0 + 60 * 4))[1]
        assert.equal(4, s4.id.seq)
        assert.equal(c[3].b3, s4.prev_b3)
        assert.equal("ok", l:put(s4))
        m:close()
        -- without the seed a fresh meter forks: seq 1 again, which the ledger refuses
        local m2 = assert(acct.open(S.cfg { clock = clock.fn }))
        clock.now = T0 + 60 * 4 + 5
        assert(m2:record(TA, "alice", "bytes", 1))
        local f1 = assert(m2:rollover(T0 + 60 * 5))[1]
        assert.equal(1, f1.id.seq)
        assert.equal("conflict", (l:put(f1)))
        m2:close()
    end)

    it("creates the layout: marker, 0700 directories, 0600 stream files", function()
        local l, c = with_chain(1)
        assert.equal("ok", l:put(c[1]))
        assert.equal(file.MARKER_TEXT, S.read_file(dir .. "/LEDGER"))
        assert.equal("700", mode_of(dir))
        assert.equal("700", mode_of(dir .. "/" .. TA))
        assert.equal("600", mode_of(stream_path()))
        assert.equal("600", mode_of(dir .. "/LEDGER"))
        l:close()
    end)

    it("stores each record as u32 length, the canonical bytes, their BLAKE3", function()
        local l, c = with_chain(3)
        for i = 1, 3 do assert.equal("ok", l:put(c[i])) end
        local recs, rest = records(stream_path())
        assert.equal(3, #recs)
        assert.equal("", rest)
        for i = 1, 3 do
            assert.equal(c[i]:encode(), recs[i].bytes)
            assert.equal(c[i].b3, S.b3sum(recs[i].bytes))
            local d = assert(acct.decode(recs[i].bytes))
            assert.equal(i, d.id.seq)
            assert.equal(c[i].b3, (recs[i].trailer:gsub(".", function(ch)
                return ("%02x"):format(ch:byte()) end)))
        end
        assert.same({ seq = 3, b3 = c[3].b3 }, l:head(TA, "bytes"))
        l:close()
    end)

    it("G-3: replaying put() N times for one (slice_id, b3) stores one entry", function()
        local l, c = with_chain(2)
        assert.equal("ok", l:put(c[1]))
        for _ = 1, 5 do assert.equal("dup", (l:put(c[1]))) end
        assert.equal("ok", l:put(c[2]))
        for _ = 1, 5 do
            assert.equal("dup", (l:put(c[2])))
            assert.equal("dup", (l:put(c[1]))) -- below the head: looked up in the file
        end
        assert.equal(2, #records(stream_path()))
        l:close()
    end)

    it("a fork (same seq, another b3) is a conflict and is not stored", function()
        local l = ledger()
        local c, fork = chain(2), chain(2, 100)
        assert.are_not.equal(c[1].b3, fork[1].b3)
        assert.equal("ok", l:put(c[1]))
        local st, detail = l:put(fork[1])
        assert.equal("conflict", st)
        assert.matches("seq 1 is stored with b3 " .. c[1].b3, detail, 1, true)
        -- seq 2 of the fork links to the fork's seq 1, not to the head: conflict too
        st, detail = l:put(fork[2])
        assert.equal("conflict", st)
        assert.matches("prev_b3 is not the b3", detail, 1, true)
        assert.equal("ok", l:put(c[2]))
        assert.equal("conflict", (l:put(fork[1]))) -- below the head
        assert.equal("conflict", (l:put(fork[2])))
        local recs = records(stream_path())
        assert.equal(2, #recs)
        assert.equal(c[2]:encode(), recs[2].bytes)
        l:close()
    end)

    it("skipping a seq is a gap, not stored; the chain then continues", function()
        local l, c = with_chain(4)
        assert.equal("gap", (l:put(c[2]))) -- a new stream starts at seq 1
        assert.equal("ok", l:put(c[1]))
        local st, detail = l:put(c[3])
        assert.equal("gap", st)
        assert.equal("head is seq 1", detail)
        assert.equal(1, #records(stream_path()))
        for i = 2, 4 do assert.equal("ok", l:put(c[i])) end
        assert.same({ seq = 4, b3 = c[4].b3 }, l:head(TA, "bytes"))
        l:close()
    end)

    it("accept_loss records the missing seqs as given up; the next slice is then ok", function()
        local l, c = with_chain(5)
        assert.equal("ok", l:put(c[1]))
        assert.equal("gap", (l:put(c[4]))) -- seqs 2, 3 never arrive
        local r, err = l:accept_loss { tenant = TA, dimension = "bytes", through_seq = 3,
                                       link_b3 = c[4].prev_b3, reason = "segment lost",
                                       now_s = 1767225600 }
        assert.is_nil(err)
        assert.same({ from = 2, to = 3 }, r)
        assert.same({ seq = 3, b3 = c[4].prev_b3 }, l:head(TA, "bytes"))
        assert.equal("ok", l:put(c[4]))
        assert.equal("ok", l:put(c[5]))
        -- the loss records: RONL, seq at 36, trailer = link (zeros, then c[4]'s prev_b3)
        local recs = records(stream_path())
        assert.equal(5, #recs)
        assert.equal("RONL", recs[2].bytes:sub(1, 4))
        assert.equal(string.rep("\0", 32), recs[2].trailer)
        assert.equal(3, file._loss_seq(recs[3].bytes, recs[3].trailer))
        assert.is_nil(file._loss_seq(recs[3].bytes, recs[2].trailer)) -- a trailer that is not its link
        assert.is_nil(file._loss_seq(recs[3].bytes:sub(1, -2), recs[3].trailer))
        -- a replay of a given-up seq's real slice is a conflict (the loss stands), a fresh
        -- instance loads the heads through loss records
        assert.equal("conflict", (l:put(c[2])))
        l:close()
        local l2 = ledger()
        assert.same({ seq = 5, b3 = c[5].b3 }, l2:head(TA, "bytes"))
        assert.equal("dup", (l2:put(c[5])))
        l2:close()
        assert.equal(0, (S.verify(dir)))
        -- verify checks a loss record like any other: a changed byte of its reason is caught
        local data = S.read_file(stream_path())
        local at = data:find("segment lost", 1, true)
        S.write_file(stream_path(), data:sub(1, at - 1) .. "\1" .. data:sub(at + 1))
        local rc, out = S.verify(dir)
        assert.equal(1, rc)
        assert.truthy(out:find("an accepted-loss record that does not decode", 1, true), out)
    end)

    it("accept_loss refuses bad arguments and a range with nothing missing", function()
        local l, c = with_chain(2)
        assert.equal("ok", l:put(c[1]))
        local link = c[2].prev_b3
        local function try(o)
            local base = { tenant = TA, dimension = "bytes", through_seq = 2, link_b3 = link }
            for k, v in pairs(o) do base[k] = v end
            local r, err = l:accept_loss(base)
            assert.is_nil(r)
            return err
        end
        assert.truthy(try({ through_seq = 1 }):find("nothing is missing: the ledger's head of "
                                                     .. TA .. "/bytes is seq 1", 1, true))
        assert.truthy(try({ tenant = "nope" }):find("^InvalidArgument"))
        assert.truthy(try({ dimension = "Bytes" }):find("^InvalidArgument"))
        assert.truthy(try({ link_b3 = "00" }):find("^InvalidArgument"))
        assert.truthy(try({ through_seq = 1.5 }):find("^InvalidArgument"))
        assert.truthy(try({ reason = "tab\there" }):find("printable ASCII"))
        assert.truthy(try({ reason = string.rep("x", 201) }):find("at most 200"))
        assert.truthy(try({ through_seq = 1000002 }):find("1000001 seqs at once"))
        assert.equal(1, #records(stream_path())) -- nothing written
        l:close()
    end)

    it("seq 1 with a non-zero prev_b3 on a new stream is a conflict", function()
        local l, c = with_chain(1)
        -- Rewrite seq 1's prev_b3 (bytes 44..75) and decode: a valid slice of another chain.
        local bytes = c[1]:encode()
        local forged = assert(acct.decode(bytes:sub(1, 44) .. ("\1"):rep(32) .. bytes:sub(77)))
        assert.equal(1, forged.id.seq)
        local st, detail = l:put(forged)
        assert.equal("conflict", st)
        assert.equal("seq 1 must have a zero prev_b3", detail)
        assert.is_nil(l:head(TA, "bytes"))
        assert.equal("", S.read_file(stream_path()))
        l:close()
    end)

    it("reopening loads the heads from the files", function()
        local l, c = with_chain(3)
        for i = 1, 2 do assert.equal("ok", l:put(c[i])) end
        l:close()
        assert.has_error(function() l:put(c[3]) end, "ron.accounting.export.exporters.file: the ledger is closed")
        local l2 = ledger()
        assert.same({ seq = 2, b3 = c[2].b3 }, l2:head(TA, "bytes"))
        assert.is_nil(l2:head(S.TENANT_B, "bytes"))
        assert.equal("dup", (l2:put(c[2])))
        assert.equal("gap", (l2:put(chain(4)[4])))
        assert.equal("ok", l2:put(c[3]))
        l2:close()
    end)

    it("cuts a torn last record on load, keeps it aside, never misreads it", function()
        local l, c = with_chain(3)
        for i = 1, 2 do assert.equal("ok", l:put(c[i])) end
        l:close()
        local good = S.read_file(stream_path())
        local rec3 = c[3]:encode()
        local partial = string.char(#rec3 % 256, math.floor(#rec3 / 256) % 256, 0, 0)
                        .. rec3:sub(1, 50)
        S.write_file(stream_path(), good .. partial)
        local l2 = ledger()
        assert.same({ seq = 2, b3 = c[2].b3 }, l2:head(TA, "bytes"))
        assert.equal(1, #repairs)
        assert.equal(#good, repairs[1].offset)
        assert.equal(#partial, repairs[1].bytes)
        assert.equal(partial, S.read_file(repairs[1].broken))
        assert.equal(good, S.read_file(stream_path()))
        assert.equal("ok", l2:put(c[3]))
        assert.equal(3, #records(stream_path()))
        l2:close()
    end)

    it("cuts a complete last record whose digest does not verify (zeros never landed)", function()
        local l, c = with_chain(2)
        assert.equal("ok", l:put(c[1]))
        assert.equal("ok", l:put(c[2]))
        l:close()
        local data = S.read_file(stream_path())
        local n1 = records(stream_path())[1].n + 36
        -- Zero the middle of the second record's payload, as a lost data page would.
        local broken = data:sub(1, n1 + 60) .. ("\0"):rep(20) .. data:sub(n1 + 81)
        S.write_file(stream_path(), broken)
        local l2 = ledger()
        assert.same({ seq = 1, b3 = c[1].b3 }, l2:head(TA, "bytes"))
        assert.equal(1, #repairs)
        assert.equal(n1, repairs[1].offset)
        assert.equal("ok", l2:put(c[2])) -- re-sent from the head
        l2:close()
    end)

    it("a zero-filled tail is cut; corruption elsewhere is an error, not a cut", function()
        local l, c = with_chain(2)
        assert.equal("ok", l:put(c[1]))
        l:close()
        local good = S.read_file(stream_path())
        S.write_file(stream_path(), good .. ("\0"):rep(100))
        local l2 = ledger()
        assert.equal("ok", l2:put(c[2]))
        assert.equal(1, #repairs)
        l2:close()
        -- A nonsense length with more bytes behind it than one record can hold.
        S.write_file(stream_path(), S.read_file(stream_path()) .. "\255\255\255\255"
                     .. ("x"):rep(1048576 + 100))
        local l3 = ledger()
        local h, err = l3:head(TA, "bytes")
        S.fails("^IoError: .*corrupt ledger at offset %d+: record length", h, err)
        l3:close()
    end)

    it("G-16: two instances racing on one stream store exactly one ordered chain", function()
        local a, b = ledger(), ledger()
        local c, fork = chain(6), chain(6, 50)
        local counts = {}
        local function put(l, s)
            local st = l:put(s)
            counts[st] = (counts[st] or 0) + 1
            return st
        end
        -- Interleaved copies of one chain, one instance lagging, plus a forked writer.
        for i = 1, 6 do
            put(a, c[i])
            put(b, c[i])
            put(b, fork[i])
            if i > 1 then put(a, c[i - 1]) end
        end
        assert.equal(6, counts.ok)
        assert.equal(11, counts.dup)
        assert.equal(6, counts.conflict)
        local recs = records(stream_path())
        assert.equal(6, #recs)
        for i = 1, 6 do assert.equal(c[i]:encode(), recs[i].bytes) end
        a:close()
        b:close()
    end)

    it("G-16: two processes racing on one stream store exactly one ordered chain", function()
        local luajit = "luajit"
        local c, fork = chain(8), chain(8, 7)
        local work = S.tmpname(".race")
        assert.equal(0, select(2, S.run("mkdir -p " .. S.shell_quote(work))))
        for i = 1, 8 do
            S.write_file(work .. "/c" .. i, c[i]:encode())
            S.write_file(work .. "/f" .. i, fork[i]:encode())
        end
        -- Each writer sends its chain twice over, the second one starting with the fork.
        local script = work .. "/racer.lua"
        S.write_file(script, ([[
package.path = %q .. "lua/?.lua;" .. package.path
local acct = require("ron.accounting")
local file = require("ron.accounting.export.exporters.file")
local work, name = arg[1], arg[2]
local l = assert(file.new { dir = %q })
local function load(p) local f = assert(io.open(p, "rb")) local s = f:read("*a") f:close()
                       return assert(acct.decode(s)) end
local seen = {}
for round = 1, 3 do
    for i = 1, 8 do
        local order = name == "a" and { "c", "f" } or { "f", "c" }
        for _, k in ipairs(order) do
            local st, err = l:put(load(work .. "/" .. k .. i))
            assert(st, err)
            seen[st] = (seen[st] or 0) + 1
        end
    end
end
print(name, seen.ok or 0, seen.dup or 0, seen.conflict or 0, seen.gap or 0)
]]):format(S.abs_root(), dir))
        local cmd = ("cd %s && (%s racer.lua %s a > a.out 2>&1 & %s racer.lua %s b > b.out 2>&1 & wait)")
            :format(S.shell_quote(work), luajit, S.shell_quote(work), luajit, S.shell_quote(work))
        local out, rc = S.run(cmd)
        assert.equal(0, rc, out)
        local ok_total = 0
        for _, n in ipairs { "a", "b" } do
            local line = S.read_file(work .. "/" .. n .. ".out")
            local who, ok, dup, conflict, gap = line:match("^(%a)\t(%d+)\t(%d+)\t(%d+)\t(%d+)")
            assert.equal(n, who, line)
            assert.equal(48, ok + dup + conflict + gap, line)
            assert.equal(0, tonumber(gap), line) -- each writer holds the full chain in order
            ok_total = ok_total + tonumber(ok)
        end
        assert.equal(8, ok_total)
        local recs = records(stream_path())
        assert.equal(8, #recs)
        -- One ordered chain: seq 1..8, each linking to the previous one, whichever won.
        local prev = S.ZERO_B3
        for i = 1, 8 do
            local d = assert(acct.decode(recs[i].bytes))
            assert.equal(i, d.id.seq)
            assert.equal(prev, d.prev_b3)
            prev = d.b3
        end
        S.run("rm -rf " .. S.shell_quote(work))
    end)
end)
