-- Audit checkpoints carried in the ledger's event feed (lua/ron/ledger/attest.lua,
-- Ledger:attest, docs/AUDIT.md "Cross-attestation": AUD-I-30, AUD-I-31, LED-60, LED-61):
-- a real signed log (ron.audit with an Ed25519 key), the engine over the in-memory store,
-- and ron.ledger.verify with the log directory and the verifier key.
local ffi = require("ffi")
local S = require("support")

local has_ledger = pcall(require, "ron.ledger")
if not S.runs_if(has_ledger, "attest",
                 "no ledger in this build (RA_BUILD_LEDGER)") then
    return
end

local audit = require("ron.audit")
local C = require("ron.audit.lib")
local A = require("ron.ledger.attest")
local L = require("ron.ledger.ledger")
local ledger = require("ron.ledger")
local memory = require("ron.ledger.store.memory")
local verify = require("ron.ledger.verify")

local ORIGIN = "ron-audit/gw-1/daemon"

local function keygen(dir, origin, sfx)
    local sk, vk = ffi.new("char[256]"), ffi.new("char[256]")
    assert(C.rau_note_keygen(origin or ORIGIN, sk, 256, vk, 256) == 0)
    local skp = dir .. "/signer.key" .. (sfx or "")
    local vkp = dir .. "/verifier.pub" .. (sfx or "")
    local f = assert(io.open(skp, "wb"))
    f:write(ffi.string(sk), "\n")
    f:close()
    f = assert(io.open(vkp, "wb"))
    f:write(ffi.string(vk), "\n")
    f:close()
    return skp, vkp
end

-- n records in a fresh log with a checkpoint every `every`; its directory.
local function make_log(dir, skp, n, every, salt, stream)
    os.execute("mkdir -p '" .. dir .. "'")
    local lg = assert(audit.open { writer_id = "gw-1", stream = stream or "daemon", dir = dir,
                                   key_path = skp, checkpoint_every = every })
    for i = 1, n do
        assert(lg:emit("reject", { reason = "no_token", n = i, salt = salt or "a" },
                       1700000000000 + i))
        if i % every == 0 then assert(lg:drain()) end
    end
    assert(lg:drain())
    local cp = lg:latest_checkpoint()
    assert(lg:close())
    return cp
end

local function engine()
    local s = memory.new {}
    return L.new { store = s, book = "main", node = "n1", nonce = "t",
                   clock = function() return 1000 end }, s
end

local function run_verify(s, o)
    local problems = {}
    o.book = "main"
    o.report = function(where, what) problems[#problems + 1] = where .. ": " .. what end
    local sum = verify.run(s, o)
    return sum, problems
end

describe("audit checkpoints in the ledger's feed", function()
    local tmp, skp, vkp
    before_each(function()
        tmp = S.tmpname("")
        os.remove(tmp)
        os.execute("mkdir -p '" .. tmp .. "'")
        skp, vkp = keygen(tmp)
    end)
    after_each(function() os.execute("rm -rf '" .. tmp .. "'") end)

    it("parses the note and derives the id from (origin, size)", function()
        local cp = make_log(tmp .. "/log", skp, 10, 5)
        assert.equal(10, cp.size)
        local p = assert(A.parse(cp.note))
        assert.same({ ORIGIN, 10, cp.root }, { p.origin, p.size, p.root })
        local f = assert(A.latest(tmp .. "/log", 10))
        assert.equal(cp.note, f.note)
        assert.equal(32, #A.id(ORIGIN, 10))
        assert.not_equal(A.id(ORIGIN, 10), A.id(ORIGIN, 5))
        assert.is_nil(A.parse(cp.note:gsub("\n\n.*", "\n")))       -- no signature
        assert.is_nil(A.parse(cp.note:gsub("\n10\n", "\n010\n")))  -- non-canonical size
        assert.is_nil((A.latest(tmp .. "/log", 7)))                 -- no such checkpoint
    end)

    it("appends one event per (origin, size), idempotent, and refuses another root", function()
        local led, s = engine()
        make_log(tmp .. "/log", skp, 10, 5)
        local cp5 = assert(A.latest(tmp .. "/log", 5))
        local cp10 = assert(A.latest(tmp .. "/log", 10))
        local r1 = assert(led:attest(cp5))
        assert.same({ 1, false }, { r1.event_seq, r1.replayed })
        local r2 = assert(led:attest(cp10))
        assert.same({ 2, false }, { r2.event_seq, r2.replayed })
        -- a restart carries the newest again: nothing appended, the first seq returned
        local r3 = assert(led:attest(cp10))
        assert.same({ 2, true }, { r3.event_seq, r3.replayed })
        assert.equal(2, s:head_seq("main"))
        -- a rewritten log (same key, other records): same (origin, size), another root
        local fork = make_log(tmp .. "/fork", skp, 10, 5, "b")
        assert.not_equal(cp10.root, fork.root)
        local r, err, code = led:attest(fork)
        assert.is_nil(r)
        assert.equal(L.ERR.Conflict, code)
        assert.matches("rewritten", err)
        assert.equal(2, s:head_seq("main"))
        -- a note that is not the checkpoint it claims to be
        local bad = { note = cp10.note, size = 11 }
        r, err, code = led:attest(bad)
        assert.is_nil(r)
        assert.equal(L.ERR.InvalidRequest, code)
    end)

    it("ledger verify: carried roots against the log, both ways; a fork is reported",
       function()
        local led, s = engine()
        make_log(tmp .. "/log", skp, 15, 5)
        for _, n in ipairs { 5, 10, 15 } do
            assert(led:attest(assert(A.latest(tmp .. "/log", n))))
        end
        local sum, problems = run_verify(s, { audit = tmp .. "/log", audit_vkey = vkp })
        assert.same({}, problems)
        assert.equal(3, sum.attested)
        assert.equal(15, sum.audit_records)
        -- the log rewritten: a valid chain on its own, other roots than the ledger carries
        os.execute("rm -rf '" .. tmp .. "/log'")
        make_log(tmp .. "/log", skp, 15, 5, "forged")
        local ok = audit.verify(tmp .. "/log", (io.open(vkp):read("*l")))
        assert.is_true(ok) -- the forged log alone verifies
        sum, problems = run_verify(s, { audit = tmp .. "/log", audit_vkey = vkp })
        assert.equal(3, #problems, table.concat(problems, "\n"))
        assert.matches("audit.checkpoint", problems[1])
        -- a rollback: the log cut back to 7 records (a shorter, older copy)
        os.execute("rm -rf '" .. tmp .. "/log'")
        make_log(tmp .. "/log", skp, 7, 5)
        sum, problems = run_verify(s, { audit = tmp .. "/log" })
        local covers = 0
        for _, p in ipairs(problems) do
            if p:find("covers", 1, true) then covers = covers + 1 end
        end
        assert.equal(2, covers, table.concat(problems, "\n")) -- sizes 10 and 15
        -- without the log: notes and ids still checked; a wrong key is reported
        os.execute("mkdir -p '" .. tmp .. "/k2'")
        local _, other = keygen(tmp .. "/k2")
        sum, problems = run_verify(s, { audit_vkey = other })
        assert.equal(3, #problems, table.concat(problems, "\n"))
        sum, problems = run_verify(s, {})
        assert.same({}, problems)
        assert.equal(3, sum.attested)
    end)
    it("AUD-I-38: ledger verify checks every chain of a sharded trail with its own key",
       function()
        local led, s = engine()
        keygen(tmp, ORIGIN .. ".1", ".1") -- signer.key.1, verifier.pub.1
        local log = tmp .. "/log"
        make_log(log, skp, 10, 5)
        make_log(log .. "/daemon.1", skp .. ".1", 15, 5, "c2", "daemon.1")
        for _, n in ipairs { 5, 10 } do assert(led:attest(assert(A.latest(log, n)))) end
        for _, n in ipairs { 5, 15 } do
            assert(led:attest(assert(A.latest(log .. "/daemon.1", n))))
        end
        local sum, problems = run_verify(s, { audit = log, audit_vkey = vkp })
        assert.same({}, problems)
        assert.equal(4, sum.attested)
        assert.equal(25, sum.audit_records) -- both chains read
        -- chain 2 rewritten: its carried roots are reported, chain 1's are not
        os.execute("rm -rf '" .. log .. "/daemon.1'")
        make_log(log .. "/daemon.1", skp .. ".1", 15, 5, "forged", "daemon.1")
        sum, problems = run_verify(s, { audit = log, audit_vkey = vkp })
        assert.equal(2, #problems, table.concat(problems, "\n"))
        for _, p in ipairs(problems) do assert.matches("daemon.1", p, 1, true) end
        -- without chain 2's verifier key its notes do not verify with chain 1's
        os.remove(vkp .. ".1")
        os.execute("rm -rf '" .. log .. "/daemon.1'")
        sum, problems = run_verify(s, { audit_vkey = vkp })
        assert.equal(2, #problems, table.concat(problems, "\n"))
    end)

    it("ledger verify: the feed's ledger.event records, each event seq exactly once",
       function()
        local led, s = engine()
        local EXT, ACC = ("e"):rep(16), ("a"):rep(16)
        assert(led:create_account { id = EXT, policy = "uncapped" })
        assert(led:create_account { id = ACC })
        for i = 1, 3 do -- two account versions, three transfers: five events (LED-68)
            assert(led:commit { intent = "top-up " .. i, movements = {
                { from = EXT, to = ACC, amount = i, asset = { code = "USD", scale = 2 } } } })
        end
        local evs = s:get_events_since("main", 0, 10)
        assert.equal(5, #evs)
        local k = 0
        local function trail(seqs) -- a log with one ledger.event record per seq listed
            k = k + 1
            local dir = tmp .. "/trail" .. k
            os.execute("mkdir -p '" .. dir .. "'")
            local lg = assert(audit.open { writer_id = "gw-1", stream = "daemon", dir = dir })
            for i, q in ipairs(seqs) do
                -- a transfer's record carries its created_at_ms (the feed's, LED-70); an
                -- account's any other ts (so a repeat is two records: the log folds equal ones)
                assert(lg:emit("ledger.event", { book = "main", ledger = "exporter",
                                                 event_seq = q, event = evs[q].kind,
                                                 id = ledger.hex(evs[q].transfer_id) },
                               evs[q].kind == "transfer" and 1000 or i))
            end
            assert(lg:drain())
            assert(lg:close())
            return dir
        end
        local sum, problems = run_verify(s, { audit = trail { 1, 2, 3, 4, 5 } })
        assert.same({}, problems)
        assert.same({ 5, 5 }, { sum.audit_feed_records, sum.audit_feed_through })
        sum, problems = run_verify(s, { audit = trail { 1, 2, 3, 5 } }) -- a hole
        assert.equal(1, #problems, table.concat(problems, "\n"))
        assert.matches("event seq 4: not in the audit trail", problems[1], 1, true)
        -- twice (another ts: not folded by the log, so two records)
        sum, problems = run_verify(s, { audit = trail { 1, 2, 2, 3, 4, 5 } })
        assert.equal(1, #problems, table.concat(problems, "\n"))
        assert.matches("event seq 2: in the audit trail 2 times", problems[1], 1, true)
        assert.same({ 6, 5 }, { sum.audit_feed_records, sum.audit_feed_through })
    end)
end)
