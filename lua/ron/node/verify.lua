-- ron.node.verify: `ron-accounting verify DIR` on a daemon's state directory (`make run`'s
-- var/; issue 27 item 3, docs/ops/run.md "Verify"): the whole chain, link by link, each
-- through the verifier of its system, read only:
--
--   wal          DIR/wal: frames, checksums, chains (`verify --quiet DIR/wal`)
--   slices       DIR/ledger.db: each usage slice consumed by exactly one transfer, each
--                stream a chain, the ledger not ahead of the WAL and citing its b3s
--                (or DIR/ledger, a file ledger: `verify DIR/ledger`)
--   transfers    every transfer re-hashed to its id, no double spend, its event
--   balances     every balance recomputed from postings, conservation per asset
--   audit        DIR/audit: frames, chain, checkpoints and their signatures (DIR/audit.vkey)
--   checkpoints  the audit checkpoints carried in the ledger are roots of the log, and the
--                log names the ledger's transfers
--
-- One line per link ("OK" or "FAILED" and what was counted), its first problems below it,
-- then the verdict. Exit 0 when every link holds, 1 when one fails, 2 for a bad command
-- line. The links a directory lacks (a meter-only one has no ledger.db) are "absent".
local ledger_verify_ok, lverify = pcall(require, "ron.ledger.verify")
local store_ok, store = pcall(require, "ron.ledger.store")

local format, concat = string.format, table.concat
local ipairs, tostring = ipairs, tostring

local _M = {}

_M.MAX_SHOWN = 5 -- problems printed per link

local out = io.stdout

local function exists(path)
    local f = io.open(path, "rb")
    if f then f:close() return true end
    return os.rename(path, path) ~= nil
end

local function sh_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

-- Runs the host with args; -> ok, lines
local function run_host(host, args)
    local q = {}
    for i, a in ipairs(args) do q[i] = sh_quote(a) end
    local p = io.popen(sh_quote(host) .. " " .. concat(q, " ") .. " 2>&1; echo \"rc=$?\"")
    local lines = {}
    for l in p:lines() do lines[#lines + 1] = l end
    p:close()
    local rc = tonumber(((table.remove(lines) or ""):match("^rc=(%d+)$")))
    return rc == 0, lines
end

local function link(name, ok, what, problems)
    out:write(format("  %-12s %-6s %s\n", name, ok == nil and "absent" or ok and "OK"
                     or "FAILED", what))
    for i = 1, math.min(#(problems or {}), _M.MAX_SHOWN) do
        out:write("               ", problems[i], "\n")
    end
    if problems and #problems > _M.MAX_SHOWN then
        out:write(format("               ... and %d more\n", #problems - _M.MAX_SHOWN))
    end
    return ok ~= false
end

-- The lines of a child verify that are problems (not its summary, OK or progress lines).
local function problems_of(lines)
    local p = {}
    for _, l in ipairs(lines) do
        if not l:match("^OK") and not l:match("^verify ") and not l:match("^note:")
           and not l:match("^  %a") then -- a summary line
            p[#p + 1] = l
        end
    end
    return p
end

-- A child verify's summary lines named by keys, as one line ("segments 2 (9819 bytes);
-- frames 60 valid; ...").
local function summary_of(lines, keys)
    local parts = {}
    for _, l in ipairs(lines) do
        for _, k in ipairs(keys) do
            local what = l:match("^  (" .. k .. " .*)")
            if what then parts[#parts + 1] = what:gsub("%s+", " ") end
        end
    end
    return concat(parts, "; ")
end

local function wal_link(host, dir)
    local wal = dir .. "/wal"
    if not exists(wal) then return link("wal", nil, wal) end
    local ok, lines = run_host(host, { "verify", "--quiet", wal })
    local summary = summary_of(lines, { "segments", "frames", "chain links" })
    return link("wal", ok, format("%s: %s", wal, summary), not ok and problems_of(lines) or nil)
end

-- Which link a ledger problem belongs to, by the first word of its position.
local LINK_OF = { transfer = "transfers", transfers = "transfers", events = "transfers",
                  event = "transfers", saga = "sagas", intent = "transfers",
                  posting = "balances", postings = "balances", balance = "balances",
                  balances = "balances", asset = "balances",
                  stream = "slices", wal = "slices", file = "slices", slice = "slices" }

local function ledger_links(host, dir)
    local db = dir .. "/ledger.db"
    if not exists(db) then
        if exists(dir .. "/ledger/LEDGER") then -- the meter-only profile's file ledger
            local ok, lines = run_host(host, { "verify", dir .. "/ledger" })
            return link("slices", ok, dir .. "/ledger (file ledger): " ..
                        summary_of(lines, { "streams", "records", "chain links" }),
                        not ok and problems_of(lines) or nil)
        end
        link("slices", nil, db)
        return true, false
    end
    if not (ledger_verify_ok and store_ok) then
        return link("slices", false, db .. ": this build has no ledger (RA_BUILD_LEDGER)")
    end
    local s, err = store.open { backend = "sqlite", path = db }
    if not s then return link("slices", false, format("%s: %s", db, tostring(err))) end
    local by = { slices = {}, transfers = {}, balances = {}, checkpoints = {}, sagas = {} }
    local audit = exists(dir .. "/audit") and dir .. "/audit" or nil
    local vkey = exists(dir .. "/audit.vkey") and dir .. "/audit.vkey" or nil
    local sum = lverify.run(s, { book = "main", wal = exists(dir .. "/wal") and dir .. "/wal",
                                 host = host, audit = audit, audit_vkey = vkey,
                                 report = function(where, what)
        local l = by[LINK_OF[where:match("^(%a+)")] or "checkpoints"]
        l[#l + 1] = where .. ": " .. what
    end })
    s:close()
    local all = link("slices", #by.slices == 0, format(
        "%s: %d usage slices in %d streams, each consumed by one transfer%s", db, sum.usage,
        sum.streams, sum.wal_checked and format("; %d WAL heads and frames cited",
                                                sum.wal_checked) or ""), by.slices)
    all = link("transfers", #by.transfers == 0, format(
        "%d transfers re-hashed to their ids, %d events in order", sum.transfers, sum.events),
        by.transfers) and all
    all = link("balances", #by.balances == 0, format(
        "%d balances recomputed from %d postings, %d assets conserved", sum.balances,
        sum.postings, sum.assets), by.balances) and all
    if #by.sagas > 0 then -- an interrupted commit (its postings show as balance problems)
        all = link("sagas", false, format("%d commits interrupted: `ron-accounting ledger " ..
                   "--db %s recover`, or the next start, finishes them", #by.sagas, db),
                   by.sagas) and all
    end
    return all, true, by.checkpoints, sum
end

local function audit_links(host, dir, has_ledger, cp_problems, sum)
    local adir = dir .. "/audit"
    if not exists(adir) then
        link("audit", nil, adir)
        return true
    end
    local vkey = dir .. "/audit.vkey"
    local args = exists(vkey) and { "audit", "verify", "--vkey", vkey, adir }
                 or { "audit", "verify", adir }
    local ok, lines = run_host(host, args)
    local last = lines[#lines] or ""
    local n = last:match("^OK: (%d+) records") or last:match(" in (%d+) records") or "?"
    local all = link("audit", ok, format("%s: %s records, chain and checkpoints%s", adir, n,
                                         exists(vkey) and " signed (" .. vkey .. ")"
                                         or " (no audit.vkey: signatures not checked)"),
                     not ok and problems_of(lines) or nil)
    if not has_ledger then return all end
    return link("checkpoints", #cp_problems == 0, format(
        "%d audit checkpoints carried in the ledger are roots of the log; %d of its records " ..
        "name the ledger's transfers", sum.attested or 0, sum.audit_ledger_records or 0),
        cp_problems) and all
end

-- verify DIR (host/cli/chainverify.c runs this with verify's arguments). -> exit code
function _M.main(args)
    local host = os.getenv("RA_BIN") or (arg and arg[-1]) or "ron-accounting"
    local dir
    for _, a in ipairs(args) do
        if a:sub(1, 1) ~= "-" then dir = dir or a end
    end
    if not dir then
        io.stderr:write("usage: ron-accounting verify DIR (a daemon's state directory)\n")
        return 2
    end
    dir = dir:gsub("/+$", "")
    out:write(format("verify %s (a daemon's state directory: WAL -> ledger slices -> " ..
                     "transfers -> balances -> audit checkpoints)\n", dir))
    local ok = wal_link(host, dir)
    local lok, has_ledger, cps, sum = ledger_links(host, dir)
    ok = lok and ok
    ok = audit_links(host, dir, has_ledger, cps or {}, sum or {}) and ok
    out:write(ok and "OK: every link holds\n" or "FAILED: a link does not hold (above)\n")
    return ok and 0 or 1
end

return _M
