-- ron.ledger.verify: check a ledger store without trusting it (research ledger.md §2e item 8;
-- docs/LEDGER-RATING.md §8; `ron-accounting ledger verify`). Read only.
--
--   local verify = require "ron.ledger.verify"
--   local summary = verify.run(store, { book = "main", report = fn(where, what),
--                                       file_ledger = dir?, audit = dir?, audit_vkey = f? })
--   -- summary = { transfers, postings, balances, assets, usage, streams, losses, events,
--   --             slices_checked, problems }
--
-- What is recomputed, in this order:
--  1. every transfer, oldest first: its stored bytes decode strictly, re-hash to its id
--     (LED-2: double SHA-256 of the canonical bytes), carry its intent and metadata; each
--     input is an earlier transfer's output not consumed before (no double spend); per
--     asset, inputs and outputs sum to the same amount (LED-5); its intent's stored outcome
--     names it; its `transfer` event exists;
--  2. a usage transfer (metadata `UM` 01, docs/LEDGER-RATING.md §5): its intent is the
--     slice's (tenant|dimension|seq|b3), its unit output equals the metadata's quantity,
--     and revenue's output its amount; each slice (tenant, dimension, seq) is consumed by
--     exactly one transfer;
--  3. every posting the transfers imply is in the store with the same owner, asset, amount
--     and status (Active, or Inactive and consumed by the transfer that spent it);
--  4. every balance recomputed from those postings equals the store's projection;
--  5. conservation per asset: all balances of an asset sum to 0;
--  6. each usage stream is a chain: seqs 1..head without a hole except accepted losses
--     (`usage.loss` events), each slice's prev_b3 is the previous slice's b3 (or the loss
--     record's link), and the store's stream head is the last of them;
--  7. the event feed's seqs are 1..head without a gap;
--  8. with file_ledger (a file ledger directory, docs/EXPORT.md §2): every slice stored
--     there re-hashes to its b3 and is consumed by exactly one usage transfer citing the
--     same b3 and quantity, and every usage transfer's slice of such a stream is there;
--     with wal (a metering WAL directory, and host = the ron-accounting executable): the
--     ledger is not ahead of any producer head and cites the b3 of every pending frame and
--     head it consumed;
--  9. every `audit.checkpoint` event (ron.ledger.attest) holds the signed note of its id's
--     (origin, size); with audit_vkey its signature verifies; with audit (an audit log
--     directory) each carried root is the root of the log's first `size` records (a
--     rewritten or rolled-back log is reported) and each `ledger` record of the log that
--     names a transfer of this ledger names its event seq.
-- Every problem is reported with its position: "transfer #n <id hex>", "posting <id>:<i>",
-- "balance <account> <asset>", "stream <tenant>/<dimension> seq n".
local acct = require "ron.accounting"
local attest = require "ron.ledger.attest"
local ledger = require "ron.ledger"
local lo = require "ron.accounting.export.loss"
local usage = require "ron.ledger.usage"
local B = require "ron.ledger.bigint"

local format, hex = string.format, ledger.hex
local ipairs, pairs, tostring, sort = ipairs, pairs, tostring, table.sort

local _M = {}

local PAGE = 500

local function akey(a) return a.code .. "/" .. a.scale end
local function pkey(tid, i) return tid .. format("%08x", i) end
local amt = B.dec -- exact: a Lua number's own conversion keeps 14 digits

local function add(a, b)
    local r = ledger.amount_add(a, b)
    return r or (a + b) -- overflow of a recomputed sum is itself a finding elsewhere
end

function _M.run(store, opts)
    opts = opts or {}
    local book = opts.book or "main"
    local sum = { transfers = 0, postings = 0, balances = 0, assets = 0, usage = 0, streams = 0,
                  losses = 0, events = 0, slices_checked = 0, problems = 0 }
    local function problem(where, what, ...)
        sum.problems = sum.problems + 1
        if opts.report then opts.report(where, format(what, ...)) end
    end

    -- 1, 2: the transfers ------------------------------------------------------------------
    local posts, order = {}, {}       -- pkey -> { account, asset, amount, consumed_by }
    local slices = {}                 -- "tenant16 dim" -> { [seq] = { b3, prev_b3, q, where } }
    local events_of = {}              -- transfer id -> true (its transfer event)
    local revenue, source = usage.account("revenue"), usage.account("usage_source")
    local n_tr, after = 0, nil
    local events = {}
    do -- 7: the event feed, first (the transfers check their event)
        local last = 0
        while true do
            local page, err = store:get_events_since(book, last, PAGE)
            if not page then
                problem("events", "cannot read: %s", tostring(err))
                break
            end
            for _, ev in ipairs(page) do
                if ev.seq ~= last + 1 then
                    problem(format("event seq %d", last + 1), "missing (next is %s)",
                            amt(ev.seq))
                end
                last = ev.seq
                events[#events + 1] = ev
                if ev.kind == "transfer" then events_of[ev.transfer_id] = true end
            end
            if #page < PAGE then break end
        end
        sum.events = #events
        local head = store:head_seq(book)
        if head and head ~= last then
            problem("events", "the head seq is %s but the feed ends at %d", amt(head), last)
        end
    end
    while true do
        local page, err = store:list_transfers(after, PAGE)
        if not page then
            problem("transfers", "cannot read: %s", tostring(err))
            break
        end
        for _, rec in ipairs(page) do
            n_tr = n_tr + 1
            local where = format("transfer #%d %s", n_tr, hex(rec.id))
            local t, derr = ledger.decode_transfer(rec.bytes or "")
            if not t then
                problem(where, "its stored bytes do not decode (%s)", tostring(derr))
            else
                local id = ledger.transfer_id(t)
                if id ~= rec.id then
                    problem(where, "its stored bytes hash to %s, not to its id", hex(id))
                end
                if rec.intent ~= nil and rec.intent ~= t.intent then
                    problem(where, "the intent column differs from the canonical bytes")
                end
                if rec.metadata ~= nil and rec.metadata ~= t.metadata then
                    problem(where, "the metadata column differs from the canonical bytes")
                end
                local bal = {}
                for _, ref in ipairs(t.inputs) do
                    local k = pkey(ref.transfer_id, ref.index)
                    local p = posts[k]
                    if not p then
                        problem(where, "spends posting %s:%d that no earlier transfer created",
                                hex(ref.transfer_id), ref.index)
                    elseif p.consumed_by then
                        problem(where, "spends posting %s:%d already spent by %s",
                                hex(ref.transfer_id), ref.index, hex(p.consumed_by))
                    else
                        p.consumed_by = rec.id
                        bal[akey(p.asset)] = add(bal[akey(p.asset)] or 0, p.amount)
                    end
                end
                for i, o in ipairs(t.outputs) do
                    local k = pkey(rec.id, i - 1)
                    posts[k] = { account = o.account, asset = o.asset, amount = o.amount,
                                 tid = rec.id, index = i - 1 }
                    order[#order + 1] = k
                    bal[akey(o.asset)] = add(bal[akey(o.asset)] or 0, -o.amount)
                end
                for a, v in pairs(bal) do
                    if v ~= 0 then problem(where, "%s is not conserved (inputs - outputs = %s)",
                                           a, amt(v)) end
                end
                local o = store:get_intent(t.intent)
                if not o or o.status ~= "committed" or o.transfer_id ~= rec.id then
                    problem(where, "its intent's stored outcome does not name it (%s)",
                            o and tostring(o.status) or "no outcome")
                end
                if not events_of[rec.id] then problem(where, "has no transfer event") end
                -- 2: usage
                if t.metadata:sub(1, 3) == usage.META_MAGIC then
                    local m = usage.decode_metadata(t.metadata)
                    if not m then
                        problem(where, "its usage metadata does not decode")
                    else
                        sum.usage = sum.usage + 1
                        if t.intent ~= usage.intent(m.tenant, m.dimension, m.seq, m.b3) then
                            problem(where, "its intent is not its slice's")
                        end
                        local units, money = B.from(0), B.from(0)
                        for _, out in ipairs(t.outputs) do
                            if out.asset.scale == 0 and out.account ~= source and out.amount > 0
                               and out.account == usage.account("usage", m.tenant) then
                                units = B.add(units, B.from(out.amount))
                            elseif out.account == revenue and out.amount > 0 then
                                money = B.add(money, B.from(out.amount))
                            end
                        end
                        if B.tostring(units) ~= m.quantity then
                            problem(where, "moves %s units, its slice holds %s",
                                    B.tostring(units), m.quantity)
                        end
                        if B.tostring(money) ~= m.amount then
                            problem(where, "credits revenue %s, its rating says %s",
                                    B.tostring(money), m.amount)
                        end
                        local sk = m.tenant .. " " .. m.dimension
                        local s = slices[sk]
                        if not s then
                            s = { tenant = m.tenant, dimension = m.dimension, seqs = {} }
                            slices[sk] = s
                        end
                        if s.seqs[m.seq] then
                            problem(format("stream %s/%s seq %d", usage.tenant_text(m.tenant),
                                           m.dimension, m.seq),
                                    "consumed by two transfers: %s and %s",
                                    s.seqs[m.seq].where, where)
                        else
                            s.seqs[m.seq] = { b3 = m.b3, prev_b3 = m.prev_b3, q = m.quantity,
                                              where = where }
                        end
                    end
                end
            end
            after = rec.n or rec.id
        end
        if #page < PAGE then break end
    end
    sum.transfers = n_tr

    -- 3: the postings they imply --------------------------------------------------------------
    local balances, pairs_list = {}, {}
    for i = 1, #order, PAGE do
        local ids = {}
        for j = i, math.min(i + PAGE - 1, #order) do
            local p = posts[order[j]]
            ids[#ids + 1] = { transfer_id = p.tid, index = p.index }
        end
        local got, err = store:get_postings(ids)
        if not got then
            problem("postings", "cannot read: %s", tostring(err))
            break
        end
        local by = {}
        for _, g in ipairs(got) do by[pkey(g.id.transfer_id, g.id.index)] = g end
        for _, id in ipairs(ids) do
            local k = pkey(id.transfer_id, id.index)
            local p, g = posts[k], by[k]
            local where = format("posting %s:%d", hex(id.transfer_id), id.index)
            local want = p.consumed_by and "inactive" or "active"
            if not g then
                problem(where, "missing from the store")
            elseif g.account ~= p.account or akey(g.asset) ~= akey(p.asset)
                   or g.amount ~= p.amount then
                problem(where, "differs from its transfer's output (%s %s %s in the store)",
                        hex(g.account), akey(g.asset), amt(g.amount))
            elseif g.status ~= want then
                problem(where, "is %s, its transfers say %s", tostring(g.status), want)
            elseif p.consumed_by and g.consumed_by and g.consumed_by ~= p.consumed_by then
                problem(where, "consumed by %s in the store, by %s in the transfers",
                        hex(g.consumed_by), hex(p.consumed_by))
            end
            sum.postings = sum.postings + 1
            if not p.consumed_by then
                local bk = p.account .. akey(p.asset)
                local b = balances[bk]
                if not b then
                    b = { account = p.account, asset = p.asset, amount = 0 }
                    balances[bk] = b
                    pairs_list[#pairs_list + 1] = b
                end
                b.amount = add(b.amount, p.amount)
            end
        end
    end

    -- 4, 5: balances against the projection, conservation per asset ---------------------------
    local per_asset = {}
    for i = 1, #pairs_list, PAGE do
        local chunk = {}
        for j = i, math.min(i + PAGE - 1, #pairs_list) do
            chunk[#chunk + 1] = { account = pairs_list[j].account, asset = pairs_list[j].asset }
        end
        local got, err = store:get_balances(chunk)
        if not got then
            problem("balances", "cannot read: %s", tostring(err))
            break
        end
        for j, c in ipairs(chunk) do
            local b = pairs_list[i + j - 1]
            if got[j] ~= b.amount then
                problem(format("balance %s %s", hex(c.account), akey(c.asset)),
                        "the projection says %s, the postings %s", amt(got[j]), amt(b.amount))
            end
            sum.balances = sum.balances + 1
            per_asset[akey(b.asset)] = add(per_asset[akey(b.asset)] or 0, b.amount)
        end
    end
    for a, v in pairs(per_asset) do
        sum.assets = sum.assets + 1
        if v ~= 0 then problem("asset " .. a, "not conserved: its balances sum to %s", amt(v)) end
    end

    -- 6: usage streams -------------------------------------------------------------------------
    local losses = {} -- "tenant16 dim" -> list of { first, last, link }
    for _, ev in ipairs(events) do
        if ev.kind == "usage.loss" then
            local rec = ev.data or ""
            local link = rec:sub(77, 108)
            if not lo.seq(rec, link) then
                problem(format("event seq %d", ev.seq), "a usage.loss event without a loss record")
            else
                local b = { rec:byte(109, 124) }
                local function u64(o)
                    local v = 0
                    for k = 8, 1, -1 do v = v * 256 + b[o + k] end
                    return v
                end
                local d = rec:byte(125)
                local k = rec:sub(9, 24) .. " " .. rec:sub(126, 125 + d)
                losses[k] = losses[k] or {}
                local l = losses[k]
                l[#l + 1] = { first = u64(0), last = u64(8), link = link }
                sum.losses = sum.losses + 1
            end
        end
    end
    local keys = {}
    for k in pairs(slices) do keys[#keys + 1] = k end
    for k in pairs(losses) do if not slices[k] then keys[#keys + 1] = k end end
    sort(keys)
    for _, k in ipairs(keys) do
        sum.streams = sum.streams + 1
        local s = slices[k] or { seqs = {} }
        local tenant, dim = k:sub(1, 16), k:sub(18)
        local name = usage.tenant_text(tenant) .. "/" .. dim
        local lost = {}
        for _, l in ipairs(losses[k] or {}) do
            for q = l.first, l.last do lost[q] = l end
        end
        local top = 0
        for q in pairs(s.seqs) do if q > top then top = q end end
        for q in pairs(lost) do if q > top then top = q end end
        local prev = usage.ZERO32
        for q = 1, top do
            local sl = s.seqs[q]
            if sl and lost[q] then
                problem(format("stream %s seq %d", name, q), "consumed by %s and given up",
                        sl.where)
            end
            if sl then
                if sl.prev_b3 ~= prev then
                    problem(format("stream %s seq %d", name, q),
                            "its prev_b3 is not the previous slice's b3 (%s)", sl.where)
                end
                prev = sl.b3
            elseif lost[q] then
                prev = q == lost[q].last and lost[q].link or usage.ZERO32
            else
                problem(format("stream %s seq %d", name, q),
                        "no transfer consumed it and no loss was accepted")
            end
        end
        local h = store:get_stream(tenant, dim)
        if top > 0 and (not h or h.seq ~= top or h.b3 ~= prev) then
            problem("stream " .. name, "the stored head is %s, the transfers end at seq %d",
                    h and amt(h.seq) or "missing", top)
        end
    end

    -- A saga still pending: a commit interrupted (a crash, a shutdown mid-commit). Its
    -- postings may already be in the projection without their transfer: say why.
    local sagas = store:list_pending_sagas() or {}
    for _, sg in ipairs(sagas) do
        problem("saga " .. tostring(sg.id), "pending in phase %s: a commit was interrupted; "
                .. "`ron-accounting ledger recover` (or the exporter's next start) finishes it",
                tostring(sg.phase))
    end
    sum.sagas = #sagas

    -- 8: a file ledger's slices ----------------------------------------------------------------
    if opts.file_ledger then
        _M.file_ledger(opts.file_ledger, slices, problem, sum)
    end
    if opts.wal then
        _M.wal(opts.wal, opts.host or "ron-accounting", slices, problem, sum)
    end
    -- 9: carried audit checkpoints (ron.ledger.attest, LED-61): each parses and has its
    -- id; with audit_vkey its signature; with audit (a log directory) each is a root of that
    -- log, and the log's ledger records name this ledger's transfers at their event seqs.
    attest.check(events, { audit = opts.audit, book = book,
                                                 audit_vkey = opts.audit_vkey }, problem, sum)
    return sum
end

-- Cross-check against the metering WAL (docs/FORMAT.md §4) through `HOST wal inspect
-- --json DIR`: each stream head of the WAL's checkpoint is the producer's last sealed slice,
-- so the ledger is never ahead of it and a slice of that seq it consumed has the same b3;
-- each frame still pending (not ACKed) that the ledger consumed has the same b3.
function _M.wal(dir, host, slices, problem, sum)
    local function q(x) return "'" .. x:gsub("'", "'\\''") .. "'" end
    local p = io.popen(q(host) .. " wal inspect --json " .. q(dir) .. " 2>&1")
    local function field(line, k)
        return line:match('"' .. k .. '":"([^"]*)"') or line:match('"' .. k .. '":(%d+)')
    end
    local heads, tops = 0, {} -- the producer's last seq per stream: heads and frames
    for line in p:lines() do
        local ty = field(line, "type")
        local t, d = field(line, "tenant"), field(line, "dimension")
        if (ty == "head" or ty == "frame") and t and d then
            local ok, t16 = pcall(usage.tenant_raw, t)
            local k = ok and (t16 .. " " .. d)
            local s = k and slices[k]
            local seq = tonumber(ty == "head" and field(line, "seq") or field(line, "slice_seq"))
            local b3 = usage.unhex(field(line, "b3") or "")
            if ty == "head" then heads = heads + 1 end
            if k and seq and (not tops[k] or tops[k].seq < seq) then
                tops[k] = { seq = seq, name = t .. "/" .. d }
            end
            local mine = s and seq and s.seqs[seq]
            if mine and mine.b3 ~= b3 then
                problem(format("wal %s %s/%s seq %d", ty, t, d, seq),
                        "%s consumed another slice of this seq (b3 differs)", mine.where)
            end
            sum.wal_checked = (sum.wal_checked or 0) + 1
        elseif ty == "problem" then
            problem("wal " .. dir, "wal inspect: %s", line)
        end
    end
    for k, top in pairs(tops) do
        local last = 0
        for sq in pairs(slices[k] and slices[k].seqs or {}) do if sq > last then last = sq end end
        if last > top.seq then
            problem(format("wal stream %s", top.name), "the ledger consumed seq %d, beyond the "
                    .. "producer's last seq %d", last, top.seq)
        end
    end
    local okc, _, code = p:close()
    if heads == 0 and not (okc == true or code == 0) then
        problem("wal " .. dir, "`%s wal inspect --json` failed", host)
    end
end

-- Cross-check against a file ledger directory: <dir>/<tenant>/<dimension>.ledger records
-- (u32 LE n | n bytes | 32-byte trailer).
function _M.file_ledger(dir, slices, problem, sum)
    local p = io.popen("cd '" .. dir:gsub("'", "'\\''") .. "' && ls */*.ledger 2>/dev/null")
    local files = {}
    for line in p:lines() do files[#files + 1] = line end
    p:close()
    if #files == 0 then problem("file ledger " .. dir, "holds no stream file") end
    local seen = {}
    for _, f in ipairs(files) do
        local tenant_text, dim = f:match("^([%x%-]+)/([a-z][a-z0-9_]*)%.ledger$")
        if tenant_text then
            local k = usage.tenant_raw(tenant_text) .. " " .. dim
            seen[k] = true
            local fh = io.open(dir .. "/" .. f, "rb")
            local data = fh and fh:read("*a") or ""
            if fh then fh:close() end
            local off, idx, s = 1, 0, slices[k]
            while off + 3 <= #data do
                local a, b, c, d = data:byte(off, off + 3)
                local n = a + b * 256 + c * 65536 + d * 16777216
                local bytes = data:sub(off + 4, off + 3 + n)
                local trailer = data:sub(off + 4 + n, off + 3 + n + 32)
                off = off + 4 + n + 32
                idx = idx + 1
                if bytes:sub(1, 4) ~= "RONL" then
                    local where = format("file ledger %s record %d", f, idx)
                    local sl = acct.decode(bytes)
                    if not sl then
                        problem(where, "does not decode")
                    elseif usage.unhex(sl.b3) ~= trailer then
                        problem(where, "its bytes do not hash to its trailer")
                    else
                        sum.slices_checked = sum.slices_checked + 1
                        local mine = s and s.seqs[sl.id.seq]
                        if not mine then
                            problem(where, "seq %d is consumed by no transfer", sl.id.seq)
                        elseif mine.b3 ~= trailer or mine.q ~= usage.quantity(sl) then
                            problem(where, "%s cites another slice (b3 or quantity differ)",
                                    mine.where)
                        else
                            mine.in_file = true
                        end
                    end
                end
            end
        end
    end
    for k, s in pairs(slices) do
        if seen[k] then
            for q, sl in pairs(s.seqs) do
                if not sl.in_file then
                    problem(format("stream %s/%s seq %d", usage.tenant_text(s.tenant),
                                   s.dimension, q),
                            "%s consumed a slice the file ledger does not hold", sl.where)
                end
            end
        end
    end
end

return _M
