-- `ledger verify` against the cases issue 24 §2 and issue 29 item 2 found (docs/LEDGER.md
-- "What verify proves", LED-68..LED-70), each of which verify answered OK before (or, for
-- issue 29, reported problems on a healthy ledger): forged and missing rows by name, a
-- rolled-back tail with --audit, the replay's dependency order, the read-only open and the
-- refusal of what is no ledger, and the upgrade of an older store.
local ffi = require("ffi")
local S = require("support")
local M = require("ron.ledger.mutate")
local L = require("ron.ledger.ledger")
local codec = require("ron.ledger.codec")
local events = require("ron.ledger.events")
local ledger = require("ron.ledger")
local sqlite = require("ron.ledger.store.sqlite")

local hex, mv = ledger.hex, M.mv
local C3 = ("C"):rep(16)

local function q(s) return S.shell_quote(s) end

-- A small ledger: C is paid 100 and spends all of it; the last transfer is a plain payment.
local function small(path)
    local s = assert(sqlite.open { path = path })
    local led = L.new { store = s, book = "main", node = "sm", nonce = "s",
                        clock = function() return M.CLOCK end }
    assert(led:create_account { id = M.EXT, policy = "uncapped" })
    for _, id in ipairs { M.A, M.B, C3 } do assert(led:create_account { id = id }) end
    assert(led:commit { intent = "dep-a", movements = { mv(M.EXT, M.A, 1000) } })
    assert(led:commit { intent = "dep-c", movements = { mv(M.EXT, C3, 100) } })
    assert(led:commit { intent = "c-out", movements = { mv(C3, M.B, 100) } })
    assert((led:commit { intent = "c-over", movements = { mv(C3, M.B, 1) } }) == nil)
    assert(led:commit { intent = "pay-1", movements = { mv(M.A, M.B, 300) } })
    local last = assert(led:commit { intent = "pay-2", movements = { mv(M.A, M.B, 50) } })
    s:close()
    return last
end

local function with(path, sql)
    local s = assert(sqlite.open { path = path })
    assert(s.drv:exec(sql))
    s:close()
end

local function problems_of(path, opts)
    local ro = assert(sqlite.open { path = path, readonly = true })
    local problems, sum = M.verify(ro, opts)
    ro:close()
    return M.text(problems), sum
end

local function fresh()
    local path = S.tmpname(".db")
    return path, small(path)
end

describe("ledger verify finds what issue 24 §2 found it missing", function()
    it("an Active posting inserted for an account whose postings are all spent", function()
        local path = fresh()
        -- (the projection's trigger adds it: the wallet would show it and let it be spent)
        with(path, "INSERT INTO postings SELECT randomblob(32), 0, account, asset_code, scale, "
                   .. "amount, 0, NULL, created_by, NULL, shard FROM postings WHERE account = "
                   .. "X'" .. hex(C3) .. "' LIMIT 1")
        local text = problems_of(path)
        assert.matches("postings %x+:0: no transfer of the feed created it %(" .. hex(C3)
                       .. " USD/2 100%)", text)
        assert.matches("balances " .. hex(C3) .. " USD/2 shard %d+: is 100", text)
    end)

    it("a balance row changed for that account, or added for an unknown account", function()
        local path = fresh()
        with(path, "UPDATE balances SET amount = 5000 WHERE account = X'" .. hex(C3) .. "'")
        assert.matches("balances " .. hex(C3) .. " USD/2 shard %d+: is 5000, the unspent "
                       .. "postings of this shard sum to 0", (problems_of(path)))
        path = fresh()
        with(path, "INSERT INTO balances VALUES (X'" .. ("99"):rep(16) .. "', CAST('USD' AS "
                   .. "BLOB), 2, 3, 700)")
        assert.matches("balances " .. ("99"):rep(16) .. " USD/2 shard 3: is 700, and no posting "
                       .. "of this pair falls in this shard", (problems_of(path)))
    end)

    it("a policy flipped no_overdraft -> uncapped, a status flipped, bytes and all", function()
        local path = fresh()
        with(path, "UPDATE accounts SET policy = 2 WHERE id = X'" .. hex(M.A) .. "'")
        assert.matches("accounts " .. hex(M.A) .. " v1: its columns say uncapped floor 0 open, "
                       .. "its bytes no_overdraft", (problems_of(path)))
        -- the bytes rewritten to match: the version is no longer its event's
        path = fresh()
        local forged = ledger.encode_account { id = M.A, version = 1, policy = "uncapped",
                                               floor = 0, status = "open" }
        with(path, "UPDATE accounts SET policy = 2, bytes = X'" .. hex(forged) .. "' WHERE id = X'"
                   .. hex(M.A) .. "'")
        assert.matches("accounts " .. hex(M.A) .. " v1: its event %(seq %d+%) holds other bytes",
                       (problems_of(path)))
        -- a silent second version (frozen -> open has no event either)
        path = fresh()
        local v2 = ledger.encode_account { id = C3, version = 2, policy = "no_overdraft",
                                           floor = 0, status = "frozen" }
        with(path, "INSERT INTO accounts VALUES (X'" .. hex(C3) .. "', 2, 0, 0, 1, X'" .. hex(v2)
                   .. "')")
        assert.matches("accounts " .. hex(C3) .. " v2: no account event names this version",
                       (problems_of(path)))
    end)

    it("created_at_ms or book changed, an extra event, a body hash, a rejection deleted",
       function()
        local path, last = fresh()
        local id = hex(last.transfer_id)
        with(path, "UPDATE transfers SET created_at_ms = created_at_ms + 1000 WHERE id = X'"
                   .. id .. "'")
        assert.matches("transfers #%d+ " .. id .. ": created_at_ms is 1700000001123, its event "
                       .. "%(seq %d+%) says 1700000000123", (problems_of(path)))
        path = fresh()
        with(path, "UPDATE transfers SET book = CAST('other' AS BLOB) WHERE id = X'" .. id .. "'")
        assert.matches("transfers #%d+ " .. id .. ": its book column is \"other\"",
                       (problems_of(path)))
        path = fresh()
        with(path, "INSERT INTO events SELECT book, max(seq) + 1, randomblob(32), "
                   .. "CAST('transfer' AS BLOB), data FROM events")
        assert.matches("transfers %x+: missing: the transfer event at seq 11 names it",
                       (problems_of(path)))
        path = fresh()
        with(path, "UPDATE intents SET body_hash = randomblob(32) WHERE key = CAST('pay-1' AS BLOB)")
        assert.matches("intents pay%-1: its body hash differs from its transfer's event",
                       (problems_of(path)))
        path = fresh()
        with(path, "DELETE FROM intents WHERE key = CAST('c-over' AS BLOB)")
        assert.matches("intents c%-over: missing: the rejection event at seq %d+ names it",
                       (problems_of(path)))
    end)
end)

-- ---- a rolled-back tail and the audit trail (LED-70) ----

local function keygen(dir)
    local C = require("ron.audit.lib")
    local sk, vk = ffi.new("char[256]"), ffi.new("char[256]")
    assert(C.rau_note_keygen("ron-audit/gw-1/daemon", sk, 256, vk, 256) == 0)
    S.write_file(dir .. "/signer.key", ffi.string(sk) .. "\n")
    S.write_file(dir .. "/verifier.pub", ffi.string(vk) .. "\n")
    return dir .. "/signer.key", dir .. "/verifier.pub"
end

-- The daemon's feed into an audit log (ron.node.feed's records, AUD-I-32).
local function trail(path, dir)
    local audit = require("ron.audit")
    local feed = require("ron.node.feed")
    os.execute("mkdir -p " .. q(dir))
    local skp, vkp = keygen(dir)
    local lg = assert(audit.open { writer_id = "gw-1", stream = "daemon", dir = dir .. "/log",
                                   key_path = skp, checkpoint_every = 4 })
    local s = assert(sqlite.open { path = path })
    local led = L.new { store = s, book = "main", node = "fd" }
    local f = feed.new { dir = dir, name = "wallet", book = "main" }
    for _, ev in ipairs(assert(led:events_since(0, 1000))) do
        assert(lg:emit(f:record(led, ev)))
    end
    s:close()
    assert(lg:drain())
    assert(lg:close())
    return dir .. "/log", vkp
end

-- The whole last transfer rolled back: its row, event, postings, its inputs active again,
-- its intents, the projection recomputed.
local function roll_back(path, tid, intent)
    local t = "X'" .. hex(tid) .. "'"
    with(path, "DELETE FROM events WHERE transfer_id = " .. t .. "; "
               .. "DELETE FROM transfer_accounts WHERE n = (SELECT n FROM transfers WHERE id = "
               .. t .. "); DELETE FROM transfers WHERE id = " .. t .. "; "
               .. "DELETE FROM postings WHERE transfer_id = " .. t .. "; "
               .. "UPDATE postings SET status = 0, consumed_by = NULL, reservation = NULL "
               .. "WHERE consumed_by = " .. t .. "; "
               .. "DELETE FROM balances; INSERT INTO balances SELECT account, asset_code, scale, "
               .. "shard, sum(amount) FROM postings WHERE status <> 2 GROUP BY 1, 2, 3, 4")
    local s = assert(sqlite.open { path = path })
    -- its outcome, and its claim (SQLite keeps it apart, under the intent: schema 4)
    assert(s.drv:write("DELETE FROM intents WHERE key = ?", { n = 1, intent }) == 1)
    assert(s.drv:write("DELETE FROM claims WHERE intent = ?", { n = 1, intent }) == 1)
    s:close()
end

describe("a rolled-back tail (issue 24 §2)", function()
    it("is out of reach without --audit, found with it", function()
        local dir = S.tmpname(".audit")
        os.remove(dir)
        local path, last = fresh()
        local log, vkp = trail(path, dir)
        local text = problems_of(path, { audit = log, audit_vkey = vkp })
        assert.equal("", text)
        roll_back(path, last.transfer_id, "pay-2")
        -- a smaller, consistent ledger: verify alone cannot tell (docs: out of reach)
        assert.equal("", (problems_of(path)))
        text = problems_of(path, { audit = log, audit_vkey = vkp })
        assert.matches("events seq 10: is in the audit trail %(record %d+: transfer "
                       .. hex(last.transfer_id) .. ", feed wallet%) but not in the ledger, "
                       .. "whose feed ends at seq 9: the ledger was rolled back", text)
        -- another transfer at the rolled-back seq: a rewritten feed
        local s = assert(sqlite.open { path = path })
        local led = L.new { store = s, book = "main", node = "rw", nonce = "r" }
        assert(led:commit { intent = "pay-2b", movements = { mv(M.A, M.B, 51) } })
        s:close()
        text = problems_of(path, { audit = log, audit_vkey = vkp })
        assert.matches("events seq 10: is transfer %x+ in the ledger, the audit trail recorded "
                       .. "transfer " .. hex(last.transfer_id), text)
        os.execute("rm -rf " .. q(dir))
    end)

    it("a created_at_ms changed together with its event is found against the trail", function()
        local dir = S.tmpname(".audit")
        os.remove(dir)
        local path, last = fresh()
        local log, vkp = trail(path, dir)
        local s = assert(sqlite.open { path = path })
        local ev = assert(s:get_event("main", last.transfer_id, "transfer"))
        local d = events.decode(ev.data)
        d.created_at_ms = d.created_at_ms + 7
        assert(s.drv:write("UPDATE events SET data = ? WHERE seq = ?",
                           { n = 2, events.transfer_data(d), ev.seq }))
        assert(s.drv:write("UPDATE transfers SET created_at_ms = created_at_ms + 7 WHERE id = ?",
                           { n = 1, last.transfer_id }))
        s:close()
        assert.equal("", (problems_of(path)))
        assert.matches("transfers " .. hex(last.transfer_id) .. ": created_at_ms is "
                       .. "1700000000130, the audit trail recorded 1700000000123",
                       (problems_of(path, { audit = log, audit_vkey = vkp })))
        os.execute("rm -rf " .. q(dir))
    end)
end)

describe("the replay's order (issue 29 item 2)", function()
    it("a spend of change whose transfer's row and event came later is no problem", function()
        local path = fresh()
        -- pay-2 spends pay-1's change; make pay-2's row and event come first, as concurrent
        -- committers can leave them (outputs inserted before the row and the event)
        local s = assert(sqlite.open { path = path })
        local conn = s.drv
        local r1 = s:get_transfer(assert(s:get_intent("pay-1")).transfer_id)
        local r2 = s:get_transfer(assert(s:get_intent("pay-2")).transfer_id)
        local e1 = s:get_event("main", r1.id, "transfer")
        local e2 = s:get_event("main", r2.id, "transfer")
        local function swap(tbl, col, a, b, where)
            assert(conn:write(string.format("UPDATE %s SET %s = -1 WHERE %s = ?", tbl, col, where),
                              { n = 1, a }))
            assert(conn:write(string.format("UPDATE %s SET %s = ? WHERE %s = ?", tbl, col, where),
                              { n = 2, a, b }))
            assert(conn:write(string.format("UPDATE %s SET %s = ? WHERE %s = -1", tbl, col, where),
                              { n = 1, b }))
        end
        swap("transfer_accounts", "n", r1.n, r2.n, "n")
        swap("transfers", "n", r1.n, r2.n, "n")
        swap("events", "seq", e1.seq, e2.seq, "seq")
        s:close()
        assert.equal("", (problems_of(path)))
        -- and a spend of nothing stays a problem: pay-1's row gone, pay-2 spends its change
        path = fresh()
        with(path, "DELETE FROM transfers WHERE intent = CAST('pay-1' AS BLOB)")
        local text = problems_of(path)
        assert.matches("transfers #%d+ %x+: spends posting %x+:0 that no transfer created", text)
    end)
end)

describe("verify never writes (LED-69)", function()
    local bin = os.getenv("RA_BIN") or (S.root .. "build/ron-accounting")
    local has_bin = io.open(bin) ~= nil

    it("opens read-only: a write through it fails, the file is the same after", function()
        local path = fresh()
        local before = S.b3sum(assert(S.read_file(path)))
        local ro = assert(sqlite.open { path = path, readonly = true })
        local n, err, class = ro:create_book("x", "y")
        S.fails("readonly", n, err:lower())
        assert.equal("io", class)
        ro:close()
        if has_bin then
            local out, rc = S.run(q(bin) .. " ledger --db " .. q(path) .. " verify")
            assert.equal(0, rc, out)
            assert.matches("\nOK\n$", out)
        end
        assert.equal(before, S.b3sum(assert(S.read_file(path))))
    end)

    it("refuses what is no ledger, with exit 2 and a reason, and leaves it as it was",
       function()
        local empty, other, junk = S.tmpname(".db"), S.tmpname(".db"), S.tmpname(".db")
        S.write_file(empty, "")
        local s = assert(sqlite.open { path = other })
        s:close()
        -- another program's database: tables of its own, no ledger_meta
        with(other, "DROP TABLE ledger_meta; CREATE TABLE notes (x)")
        S.write_file(junk, ("not a database\n"):rep(100))
        for _, path in ipairs { empty, other, junk } do
            local ro, err = sqlite.open { path = path, readonly = true }
            S.fails("^NotALedger: ", ro, err)
        end
        assert.equal(0, #assert(S.read_file(empty)))
        if not has_bin then return pending("no ron-accounting binary at " .. bin) end
        for _, path in ipairs { empty, other, junk } do
            local out, rc = S.run(q(bin) .. " ledger --db " .. q(path) .. " verify")
            assert.equal(2, rc, out)
            assert.matches("NotALedger: .* holds no ledger", out)
        end
        assert.equal(0, #assert(S.read_file(empty)))
    end)
end)

describe("a schema-2 store (LED-68)", function()
    it("is upgraded once on open: its accounts and rejections become events, verify passes",
       function()
        local path = fresh()
        -- what a version-2 engine wrote: no account or rejection events, transfer events
        -- without body hash or created_at_ms
        local s = assert(sqlite.open { path = path })
        local conn = s.drv
        assert(conn:exec("DELETE FROM events WHERE kind IN (CAST('account' AS BLOB), "
                         .. "CAST('rejection' AS BLOB)); CREATE TABLE e2 AS SELECT * FROM events "
                         .. "ORDER BY seq; DELETE FROM events; INSERT INTO events SELECT book, "
                         .. "row_number() OVER (ORDER BY seq), transfer_id, kind, data FROM e2; "
                         .. "DROP TABLE e2; UPDATE ledger_meta SET value = CAST('2' AS BLOB) "
                         .. "WHERE key = CAST('schema_version' AS BLOB)"))
        for _, ev in ipairs(s:get_events_since("main", 0, 100)) do
            local d = events.decode(ev.data)
            assert(conn:write("UPDATE events SET data = ? WHERE seq = ?", { n = 2,
                codec.encode { intent = d.intent, kind = d.kind, target = d.target }, ev.seq }))
        end
        s:close()
        local ro, err = sqlite.open { path = path, readonly = true }
        S.fails("schema version 2, older than this code's 4: open it once", ro, err)
        s = assert(sqlite.open { path = path }) -- the upgrade
        local evs = s:get_events_since("main", 0, 100)
        assert.equal("ledger.upgrade", evs[6].kind) -- after the five transfers
        s:close()
        local text, sum = problems_of(path)
        assert.equal("", text)
        assert.equal(5, sum.transfers)
        s = assert(sqlite.open { path = path }) -- again: nothing more
        assert.equal(#evs, #s:get_events_since("main", 0, 100))
        s:close()
    end)
end)
