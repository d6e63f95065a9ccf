-- A ledger carries an audit checkpoint (tests/audit/tamper.sh; docs/AUDIT.md
-- "Cross-attestation"): the note's event appended to the ledger's feed, as the daemon's
-- audit_attest task does.
--
--   ron-accounting run tests/audit/carry.lua LEDGER.db NOTE-FILE
local store = require("ron.ledger.store")
local L = require("ron.ledger.ledger")
local A = require("ron.ledger.attest")

local db, note = arg[1], arg[2]
local s = assert(store.open { backend = "sqlite", path = db })
local led = L.new { store = s, book = "main", node = "tamper" }
local cp = assert(A.from_file(note))
local r, err = led:attest(cp)
if not r then
    io.stderr:write("carry.lua: ", tostring(err), "\n")
    os.exit(1)
end
print(string.format("carried %s size %d at event seq %d", cp.origin, cp.size, r.event_seq))
s:close()
