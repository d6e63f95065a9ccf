-- ron.ledger.attest: audit checkpoints carried in the ledger's event feed (issue 16,
-- PRODUCT.md §9, docs/AUDIT.md "Cross-attestation", LED-60, LED-61, AUD-I-30, AUD-I-31).
--
-- The slice encoding has no metadata field (docs/FORMAT.md §1), so the ledger's gapless
-- event feed carries the audit trail's checkpoints: one event of kind "audit.checkpoint"
-- per carried (origin, size), its data the signed note byte for byte (C2SP: anyone with
-- the verifier key checks it without us). The event's id (the feed's transfer_id column)
-- is derived from (origin, size), so carrying one checkpoint twice (a restart, two tasks)
-- appends nothing, and carrying ANOTHER root for the same (origin, size) is refused: the
-- audit log was rewritten (a fork or a rollback).
--
--   local attest = require("ron.ledger.attest")
--   local cp = attest.from_file(dir .. "/cp-00000000000000001000.note")  -- or nil, err
--   local cp = attest.parse(note)        -- { origin, size, root (hex), note } or nil, err
--   led:attest(cp)                       -- ron.ledger.ledger: { event_seq, replayed }
--   attest.latest(dir, size)             -- the cp of <dir>/cp-<size>.note (the daemon)
--   attest.check(events, opts, problem, sum)   -- `ledger verify [--audit DIR]`
local ffi = require("ffi")
local fs = require("ron.base.fs")
local ledger = require("ron.ledger")
local B = require("ron.ledger.bigint")
local codec = require("ron.ledger.codec")
-- libronaudit checks the notes' signatures (a build without RA_BUILD_AUDIT has none: an
-- error only when a check needs it)
local has_audit, audit_lib = pcall(require, "ron.audit.lib")

local byte, char, concat, format = string.byte, string.char, table.concat, string.format
local floor, tonumber, tostring, type = math.floor, tonumber, tostring, type
local ipairs, pairs = ipairs, pairs

local _M = { KIND = "audit.checkpoint" }

local B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local B64_VAL = {}
for i = 1, 64 do B64_VAL[byte(B64, i)] = i - 1 end

-- Standard base64 with padding (the checkpoint's root line); nil when malformed.
local function unbase64(s)
    if #s % 4 ~= 0 then return nil end
    local out, acc, bits = {}, 0, 0
    local pad = s:match("(=*)$")
    if #pad > 2 then return nil end
    for i = 1, #s - #pad do
        local v = B64_VAL[byte(s, i)]
        if not v then return nil end
        acc, bits = acc * 64 + v, bits + 6
        if bits >= 8 then
            bits = bits - 8
            local d = 2 ^ bits
            out[#out + 1] = char(floor(acc / d))
            acc = acc % d
        end
    end
    return concat(out)
end

-- The event id: SHA-256 of a domain tag, the origin and the size. Deterministic, so a
-- second carry of the same checkpoint finds the first one (the feed's unique (book, id,
-- kind)); never a transfer id (those are double SHA-256 of a transfer's bytes).
function _M.id(origin, size)
    return codec.sha256(format("ron-ledger audit.checkpoint v1\n%s\n%d", origin, size))
end

-- Parses a C2SP signed note holding a tlog checkpoint: { origin, size, root (64 hex),
-- note } or nil, why. The signature is not checked here (attest.check does, with a key).
function _M.parse(note)
    if type(note) ~= "string" or #note > 4096 then return nil, "not a note" end
    local origin, size, root64, rest = note:match("^([^\n]+)\n(%d+)\n([A-Za-z0-9+/=]+)\n(.*)$")
    if not origin then return nil, "not a checkpoint note (origin, size, root lines)" end
    if not rest:match("^\n\226\128\148 ") then -- a blank line, then "— name sig"
        return nil, "the checkpoint has no signature line"
    end
    local n = tonumber(size)
    if not n or n < 1 or n >= 2 ^ 53 or (#size > 1 and size:sub(1, 1) == "0") then
        return nil, "bad tree size " .. size
    end
    local raw = unbase64(root64)
    if not raw or #raw ~= 32 then return nil, "the root is not 32 bytes of base64" end
    return { origin = origin, size = n, root = ledger.hex(raw), note = note }
end

-- The checkpoint of <dir>/cp-<size 20 digits>.note (audit/log.c writes it to a temporary
-- file and renames it: reading it never sees half a note, unlike the log's in-memory copy
-- that a sync on the threadpool may be rewriting).
function _M.latest(dir, size)
    local path = format("%s/cp-%020d.note", dir, size)
    return _M.from_file(path)
end

function _M.from_file(path)
    local f, err = io.open(path, "rb")
    if not f then return nil, err end
    local note = f:read("*a")
    f:close()
    local cp, perr = _M.parse(note)
    if not cp then return nil, path .. ": " .. perr end
    return cp
end

-- The event's data is the note; an existing event for (origin, size) must hold the same
-- root (else the trail forked). -> nil | "why" (a Conflict).
function _M.same(ev, cp)
    local had = _M.parse(ev.data or "")
    if not had then return "the carried event's data is not a checkpoint" end
    if had.origin ~= cp.origin or had.size ~= cp.size then
        return "the carried event names another checkpoint"
    end
    if had.root ~= cp.root then
        return format("checkpoint %s size %d is carried with root %s (event seq %s), the audit "
                      .. "log now has root %s: the audit log was rewritten (a fork or a "
                      .. "rollback)", cp.origin, cp.size, had.root, B.dec(ev.seq), cp.root)
    end
end

-- ---- verification (`ron-accounting ledger verify --audit DIR [--audit-vkey FILE]`) ----

-- The trail's `ledger.event` records (AUD-I-32) against the feed (LED-70): a feed (the
-- records' `ledger` name) is this ledger's when one of its records names the event at its
-- seq; then every one of its records must: a record beyond the feed's end is an event the
-- ledger lost (its tail rolled back, restored from an older copy), a record naming another
-- event than the ledger's at that seq a rewritten feed, and a transfer's record carries its
-- created_at_ms (the record's ts). fed[name][seq] counts the matching records.
function _M.feed_records(recs, by_seq, fed, opts, problem)
    local function same(r, ev)
        return ev and ev.kind == r.kind and ledger.hex(ev.transfer_id) == r.id
    end
    local ours, head = {}, 0
    for _, r in ipairs(recs) do if same(r, by_seq[r.seq]) then ours[r.ledger] = true end end
    for seq in pairs(by_seq) do if seq > head then head = seq end end
    for _, r in ipairs(recs) do
        local ev = by_seq[r.seq]
        local where = format("events seq %d", r.seq or 0)
        if not ours[r.ledger] then -- luacheck: ignore 542 (another store's feed)
        elseif not ev then
            problem(where, "is in the audit trail (record %d: %s %s, feed %s) but not in the "
                    .. "ledger, whose feed ends at seq %d: the ledger was rolled back", r.n,
                    tostring(r.kind), tostring(r.id), r.ledger, head)
        elseif not same(r, ev) then
            problem(where, "is %s %s in the ledger, the audit trail recorded %s %s (record %d): "
                    .. "the feed was rewritten", ev.kind, ledger.hex(ev.transfer_id),
                    tostring(r.kind), tostring(r.id), r.n)
        else
            local f = fed[r.ledger] or {}
            fed[r.ledger] = f
            f[r.seq] = (f[r.seq] or 0) + 1
            local at = opts.created_at and ev.kind == "transfer" and opts.created_at[r.id]
            if at and at ~= r.ts then
                problem("transfers " .. r.id, "created_at_ms is %d, the audit trail recorded %d "
                        .. "(record %d)", at, r.ts or -1, r.n)
            end
        end
    end
end

local read_file = fs.read_file

-- events: the book's feed (every event, by seq); opts.audit = an audit log directory,
-- opts.audit_vkey = a verifier key file; problem(where, fmt, ...) as ron.ledger.verify's.
-- Fills sum.attested (audit.checkpoint events) and, with a directory, sum.audit_records
-- and sum.audit_ledger_records (the trail's `ledger` records that name this ledger's
-- transfers, each checked against its event).
function _M.check(events, opts, problem, sum)
    sum.attested = 0
    local vkey
    if opts.audit_vkey then
        vkey = read_file(opts.audit_vkey)
        if not vkey then
            problem("audit", "cannot read the verifier key %s", opts.audit_vkey)
            return
        end
        vkey = vkey:gsub("%s+$", "")
    end
    -- A sharded trail (AUD-I-38): chain i > 1's checkpoints are signed by the key named
    -- <name>.<i-1>, whose verifier key is <audit_vkey>.<i-1> (a note verifies only with the
    -- key of its origin, AUD-I-10).
    local vname = vkey and vkey:match("^([^+]+)%+")
    local vkeys = {}
    local function vkey_for(origin)
        local sfx = vname and origin:sub(1, #vname) == vname and origin:sub(#vname + 1)
        if not sfx or not sfx:match("^%.%d+$") then return vkey, opts.audit_vkey end
        if vkeys[sfx] == nil then
            local k = read_file(opts.audit_vkey .. sfx)
            vkeys[sfx] = k and k:gsub("%s+$", "") or false
        end
        return vkeys[sfx] or vkey, vkeys[sfx] and (opts.audit_vkey .. sfx) or opts.audit_vkey
    end
    local C
    if vkey or opts.audit then
        if not has_audit then error(audit_lib, 0) end
        C = audit_lib
    end
    local carried, transfer_seq = {}, {} -- transfer_seq: hex id -> its event's seq
    -- the feed's records (AUD-I-32): per feeding task (the record's `ledger`: a wallet and
    -- a rater on one store and book feed the same events twice, once each), seq -> count
    local by_seq, fed = {}, {}
    for _, ev in ipairs(events) do
        by_seq[tonumber(ev.seq)] = ev
        if ev.kind == "transfer" then transfer_seq[ledger.hex(ev.transfer_id)] = ev.seq end
        if ev.kind == _M.KIND then
            sum.attested = sum.attested + 1
            local where = format("event seq %d (audit.checkpoint)", ev.seq)
            local cp, err = _M.parse(ev.data or "")
            if not cp then
                problem(where, "%s", err)
            elseif _M.id(cp.origin, cp.size) ~= ev.transfer_id then
                problem(where, "its id is not the id of (%s, %d)", cp.origin, cp.size)
            else
                cp.where = where
                carried[#carried + 1] = cp
                if vkey then
                    local k, kpath = vkey_for(cp.origin)
                    local sz, root = ffi.new("uint64_t[1]"), ffi.new("uint8_t[32]")
                    local rc = C.rau_checkpoint_verify(cp.note, #cp.note, k, #k, sz, root)
                    if rc ~= 0 then
                        problem(where, "the carried note does not verify with %s: %s",
                                kpath, ffi.string(C.rau_err_name(rc)))
                    end
                end
            end
        end
    end
    if not opts.audit then return end
    -- The log itself, with every carried note as a checkpoint kept elsewhere: the verifier
    -- recomputes the root of the log's first `size` records for each (a rewritten log, or
    -- one restored from an old backup, has other roots: a fork; a shorter one: a rollback).
    -- The chains: DIR, and for a sharded trail its subdirectories <stream>.<i> (AUD-I-38),
    -- each a log of its own with its own origin (from its checkpoint files).
    local function ls(d, pat)
        local out = {}
        local p = io.popen("ls -p '" .. d:gsub("'", "'\\''") .. "' 2>/dev/null")
        for name in (p and p:lines() or function() end) do
            if name:match(pat) then out[#out + 1] = name end
        end
        if p then p:close() end
        table.sort(out)
        return out
    end
    local function origin_of(d)
        local cps = ls(d, "^cp%-%d+%.note$")
        local cp = cps[1] and _M.from_file(d .. "/" .. cps[1])
        return cp and cp.origin
    end
    local dir = opts.audit
    local chains = { { dir = dir, origin = origin_of(dir), cps = {} } }
    local log_origin = chains[1].origin
    for _, name in ipairs(ls(dir, "^[A-Za-z0-9._-]+%.%d+/$")) do
        local d = dir .. "/" .. name:sub(1, -2)
        chains[#chains + 1] = { dir = d, origin = origin_of(d), cps = {} }
    end
    for _, cp in ipairs(carried) do
        local into = chains[1]
        for _, ch in ipairs(chains) do
            if ch.origin == cp.origin then into = ch end
        end
        into.cps[#into.cps + 1] = cp
    end
    local records, ledger_recs, feed_recs = 0, 0, {}
    local paths = {}
    local report = ffi.cast("rau_report_fn", function(_, where, what)
        local w = ffi.string(where)
        local cp = paths[w]
        problem(cp and cp.where or ("audit " .. w), "%s%s", ffi.string(what),
                cp and format(" (carried checkpoint %s size %d root %s)", cp.origin, cp.size,
                              cp.root) or "")
    end)
    local attr = ffi.new("rau_attr_t[1]")
    local each = ffi.cast("rau_record_fn", function(_, r)
        records = records + 1
        local kind = ffi.string(C.rau_record_kind(r))
        if kind ~= "ledger" and kind ~= "ledger.event" then return end
        local a = {}
        for i = 0, tonumber(C.rau_record_attr_count(r)) - 1 do
            if C.rau_record_attr(r, i, attr) == 0 then
                local k = ffi.string(attr[0].key, attr[0].key_len)
                if attr[0].type == C.RAU_ATTR_STR then
                    a[k] = ffi.string(attr[0].str, attr[0].str_len)
                else
                    a[k] = tonumber(attr[0].num)
                end
            end
        end
        if a.book ~= (opts.book or "main") then return end
        if kind == "ledger.event" then
            -- judged once the log is read (feed_records): a feed is this ledger's when one
            -- of its records names the event at its seq (another store may use the book name)
            feed_recs[#feed_recs + 1] = { ledger = tostring(a.ledger), seq = a.event_seq,
                                          kind = a.event, id = a.id,
                                          ts = tonumber(C.rau_record_ts_ms(r)),
                                          n = tonumber(C.rau_record_seq(r)) }
            return
        end
        if type(a.transfer) ~= "string" then return end
        -- Only transfers of this ledger: a daemon's trail may hold another store's (the
        -- wallet's ledger and the rater's can share a book name).
        local seq = transfer_seq[a.transfer]
        if seq then
            ledger_recs = ledger_recs + 1
            if seq ~= a.event_seq then
                problem(format("audit record %d", tonumber(C.rau_record_seq(r))),
                        "names transfer %s at event seq %s, the ledger has it at %d",
                        a.transfer, a.event_seq and B.dec(a.event_seq) or "none", seq)
            end
        end
    end)
    -- Each chain with every note carried for its origin as a checkpoint kept elsewhere: the
    -- verifier recomputes the root of the log's first `size` records for each (a rewritten
    -- log, or one restored from an old backup, has other roots: a fork; a shorter one: a
    -- rollback).
    for ci, ch in ipairs(chains) do
        local files = {}
        for i, cp in ipairs(ch.cps) do
            if ci == 1 and log_origin and cp.origin ~= log_origin and not vkey then
                problem(cp.where, "origin %s is not the audit log's (%s)", cp.origin, log_origin)
            end
            local path = os.tmpname()
            local f = io.open(path, "wb")
            f:write(cp.note)
            f:close()
            files[i], paths[path] = path, cp
        end
        local extra = ffi.new("const char *[?]", #files + 1)
        for i, path in ipairs(files) do extra[i - 1] = path end
        local k = vkey
        if vkey and ch.origin then k = vkey_for(ch.origin) end
        local n = ffi.new("uint64_t[1]")
        local rc = C.rau_verify_dir_list(ch.dir, k, extra, #files, report, each, nil, n)
        for _, path in ipairs(files) do os.remove(path) end
        if rc < 0 then
            problem("audit " .. ch.dir, "%s", ffi.string(C.rau_err_name(rc)))
        end
    end
    report:free()
    each:free()
    sum.audit_records, sum.audit_ledger_records = records, ledger_recs
    _M.feed_records(feed_recs, by_seq, fed, opts, problem)
    -- The feed's records: every event up to the last one recorded, each exactly once.
    local through, nfed = 0, 0
    for name, f in pairs(fed) do
        local top = 0
        for seq, k in pairs(f) do
            nfed = nfed + k
            if seq > top then top = seq end
        end
        for seq = 1, top do
            if not f[seq] then
                problem(format("event seq %d", seq), "not in the audit trail (the %s feed's "
                        .. "records reach seq %d)", name, top)
            elseif f[seq] > 1 then
                problem(format("event seq %d", seq), "in the audit trail %d times (the %s feed)",
                        f[seq], name)
            end
        end
        if top > through then through = top end
    end
    sum.audit_feed_records, sum.audit_feed_through = nfed, through
end

return _M
