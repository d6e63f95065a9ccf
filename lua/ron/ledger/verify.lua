-- ron.ledger.verify: check a ledger store without trusting it (PRODUCT.md §9, research
-- ledger.md §2e item 8; docs/LEDGER.md "What verify proves"; `ron-accounting ledger verify`).
-- Read only: the CLI opens the store read-only (SQLite mode=ro, PostgreSQL a read-only
-- transaction, LED-69) and everything is read in one snapshot when the store offers one.
--
--   local verify = require("ron.ledger.verify")
--   local summary = verify.run(store, { book = "main", report = fn(where, what),
--                                       file_ledger = dir?, wal = dir?, host = exe?,
--                                       audit = dir?, audit_vkey = f? })
--   -- summary = { transfers, postings, balances, assets, accounts, intents, usage, streams,
--   --             losses, events, sagas, unchecked, slices_checked, problems }
--
-- Every row of every table is either derived from the transfers and the event feed and
-- checked against them, or one of the inputs verify cannot check, listed with the reason in
-- ron.ledger.verify.inputs (and docs/LEDGER.md, which a spec keeps equal). In this order:
--  0. the schema is the one this code creates (verify.schema); ledger_meta, books;
--  1. the event feed: gapless from 1, one book, known kinds (verify.feed);
--  2. accounts: each version's columns are its canonical bytes, its `account` event holds
--     them, versions change the status only (verify.rows);
--  3. transfers: bytes, id, columns, event (intent, kind, body hash, created_at_ms); then
--     replayed in the feed's order, each after the transfers it spends from: inputs made
--     by exactly one transfer and spent once, conservation, pins, policies and floors at
--     every point, reversals, usage transfers (verify.walk);
--  4. postings and the balance projection against the replay (verify.money);
--  5. intents (outcomes, rejections, claims, the keys events name), heads, sagas (each is
--     reported: a commit interrupted), transfer_accounts (verify.rows);
--  6. each usage stream is a chain: seqs 1..head without a hole except accepted losses
--     (`usage.loss` events), each slice's prev_b3 the previous slice's b3 (or the loss
--     record's link), the stored head the last of them; every usage.shortfall's amount;
--  7. with file_ledger (a file ledger directory, docs/EXPORT.md §2): every slice stored
--     there re-hashes to its b3 and is consumed by exactly one usage transfer citing the
--     same b3 and quantity, and every usage transfer's slice of such a stream is there;
--     with wal (a metering WAL directory, and host = the ron-accounting executable): the
--     ledger is not ahead of any producer head and cites the b3 of every pending frame and
--     head it consumed;
--  8. every `audit.checkpoint` event (ron.ledger.attest) holds the signed note of its id's
--     (origin, size); with audit_vkey its signature verifies; with audit (an audit log
--     directory) each carried root is the root of the log's first `size` records, each
--     `ledger` record names this ledger's transfer at its event seq, and the feed's records
--     match the feed: a rolled-back tail, a rewritten event, another created_at_ms are found.
-- Every problem names its table and key ("postings <transfer>:<index>", "balances <account>
-- <asset> shard <n>", "intents <key>", "events seq <n>", "transfers #<n> <id>", ...) and
-- what differs.
-- Memory (I-7, docs/LEDGER.md "Verify's memory"): every table is read a page at a time
-- (store:scan), never whole; what is kept across rows is fixed-size per transfer and per
-- output (verify.walk: ~330 bytes a transfer, ~500 a wallet's), and each phase's state is
-- dropped before the next phase that does not read it.
local acct = require("ron.accounting")
local attest = require("ron.ledger.attest")
local B = require("ron.ledger.bigint")
local ledger = require("ron.ledger")
local loss = require("ron.accounting.export.loss")
local usage = require("ron.ledger.usage")
local feed = require("ron.ledger.verify.feed")
local money = require("ron.ledger.verify.money")
local rows = require("ron.ledger.verify.rows")
local schema = require("ron.ledger.verify.schema")
local walk = require("ron.ledger.verify.walk")

local format, hex = string.format, ledger.hex
local ipairs, pairs, pcall, tostring, type, sort = ipairs, pairs, pcall, tostring, type, table.sort

local _M = {}

-- An integer exactly (LED-4: never a Lua number's default conversion; ron.ledger.bigint's
-- dec, an unsigned 64-bit value too); anything else (a hostile store's cell) as is.
local function num(v)
    local t = type(v)
    if t == "cdata" or (t == "number" and v % 1 == 0) then
        local ok, s = pcall(B.dec, v)
        if ok then return s end
    end
    return tostring(v)
end
_M.num = num

-- The accepted losses of the feed: "tenant16 dim" -> list of { first, last, link }.
local function losses_of(ctx)
    local losses = {}
    for _, ev in ipairs(ctx.losses_ev) do
        local rec = type(ev.data) == "string" and ev.data or ""
        local link = rec:sub(77, 108)
        if not loss.seq(rec, link) then
            ctx.problem(feed.where(ev.seq), "a usage.loss event without a loss record")
        elseif ev.transfer_id ~= usage.b3(rec) then
            ctx.problem(feed.where(ev.seq), "a usage.loss event whose id is not its "
                        .. "record's b3")
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
            ctx.sum.losses = ctx.sum.losses + 1
        end
    end
    return losses
end

-- One stream's chain: its slices and accepted losses from 1 to its top; its stored head.
local function chain(ctx, k, s, lost_list)
    local tenant, dim = k:sub(1, 16), k:sub(18)
    local name = rows.stream_name(tenant, dim)
    local lost = {}
    for _, l in ipairs(lost_list or {}) do
        for q = l.first, l.last do lost[q] = l end
    end
    local top = 0
    for q in pairs(s.seqs) do if q > top then top = q end end
    for q in pairs(lost) do if q > top then top = q end end
    local prev, link = usage.ZERO32, { [0] = usage.ZERO32 }
    for q = 1, top do
        local sl, w = s.seqs[q], format("stream %s seq %d", name, q)
        if sl and lost[q] then ctx.problem(w, "consumed by %s and given up", sl.where) end
        if sl then
            if sl.prev_b3 ~= prev then
                ctx.problem(w, "its prev_b3 is not the previous slice's b3 (%s)", sl.where)
            end
            prev = sl.b3
        elseif lost[q] then
            prev = q == lost[q].last and lost[q].link or usage.ZERO32
        else
            ctx.problem(w, "no transfer consumed it and no loss was accepted")
        end
        link[q] = prev
    end
    -- The head is the chain's end, or an earlier link of it (none: before seq 1): the
    -- exporter moves a head after its batch's commits, so a crash or a shutdown between
    -- leaves it behind, and the next put of those slices answers dup and moves it (docs:
    -- "Inputs verify cannot check", `stream-head-behind`). Never ahead, never off the chain.
    local h = ctx.store:get_stream(tenant, dim)
    local at = h and type(h.seq) == "number" and link[h.seq]
    if top > 0 and not (h and h.seq == top and h.b3 == prev) then
        if (h == nil) or (at and at == h.b3) then
            ctx.sum.heads_behind = (ctx.sum.heads_behind or 0) + 1
        else
            ctx.problem(format("usage_streams %s", name), "the stored head is seq %s b3 %s, "
                        .. "no link of the chain, which ends at seq %d b3 %s", num(h.seq),
                        hex(tostring(h.b3)), top, hex(prev))
        end
    end
end

-- 6: every usage stream a chain; -> the streams known ("tenant16 dim" -> true).
local function streams(ctx)
    local losses = losses_of(ctx)
    local keys, known = {}, {}
    for k in pairs(ctx.slices) do keys[#keys + 1] = k end
    for k in pairs(losses) do if not ctx.slices[k] then keys[#keys + 1] = k end end
    sort(keys)
    for _, k in ipairs(keys) do
        ctx.sum.streams = ctx.sum.streams + 1
        known[k] = true
        chain(ctx, k, ctx.slices[k] or { seqs = {} }, losses[k])
    end
    return known
end

-- For --audit (ron.ledger.attest): the feed again, each event as the trail's records name
-- it (seq, kind, id; a checkpoint's data), and every transfer's created_at_ms by its hex
-- id. Without it only the checkpoint events (ctx.checkpoints) and no created_at.
local function attest_inputs(ctx, opts)
    if not opts.audit then return ctx.checkpoints, {} end
    local list, created, T = {}, {}, ctx.tx
    feed.each(ctx, function(ev)
        list[#list + 1] = { seq = ev.seq, kind = ev.kind, transfer_id = ev.transfer_id,
                            data = ev.kind == attest.KIND and ev.data or nil }
    end)
    for ord = 1, T.count do created[hex(T.id[ord])] = T.cat[ord] end
    return list, created
end

-- The phases in order, each reading its tables a page at a time; what a phase leaves that
-- no later one reads is dropped before the next (I-7; docs/LEDGER.md "Verify's memory").
local function body(ctx, opts)
    schema.check(ctx)
    rows.meta(ctx)
    rows.books(ctx)
    feed.read(ctx)
    rows.sagas(ctx)
    rows.accounts(ctx)
    walk.read(ctx)
    walk.replay(ctx)
    local T = ctx.tx
    ctx.ev_unstored, T.done = nil, nil
    if not opts.audit then T.cat = nil end
    money.postings(ctx)
    money.balances(ctx)
    ctx.out, ctx.pairs, T.base, T.nout = nil, nil, nil, nil
    rows.intents(ctx)
    ctx.by_intent, ctx.alias, T.bh, T.intent, T.outcome = nil, nil, nil, nil, nil
    rows.heads(ctx)
    rows.transfer_accounts(ctx)
    ctx.n_ord, T.pins, T.seq = nil, nil, nil
    feed.check_shortfalls(ctx)
    ctx.kept, ctx.ord_of, ctx.bal, ctx.need_head = nil, nil, nil, nil
    rows.streams(ctx, streams(ctx))
    if opts.file_ledger then _M.file_ledger(opts.file_ledger, ctx.slices, ctx.problem, ctx.sum) end
    if opts.wal then
        _M.wal(opts.wal, opts.host or "ron-accounting", ctx.slices, ctx.problem, ctx.sum)
    end
    local list, created = attest_inputs(ctx, opts)
    ctx.tx = nil
    attest.check(list, { audit = opts.audit, book = ctx.book, audit_vkey = opts.audit_vkey,
                         created_at = created }, ctx.problem, ctx.sum)
    ctx.sum.accounts = 0
    for _ in pairs(ctx.accounts) do ctx.sum.accounts = ctx.sum.accounts + 1 end
    return ctx.sum
end

function _M.run(store, opts)
    opts = opts or {}
    local ctx = { store = store, book = opts.book or "main", num = num, slices = {},
                  sum = { transfers = 0, postings = 0, balances = 0, assets = 0, usage = 0,
                          streams = 0, losses = 0, events = 0, slices_checked = 0,
                          problems = 0, sagas = 0, intents = 0, unchecked = 0 } }
    function ctx.problem(where, what, ...)
        ctx.sum.problems = ctx.sum.problems + 1
        if opts.report then opts.report(where, format(what, ...)) end
    end
    if not store.snapshot then
        body(ctx, opts)
    else
        local sum, err = store:snapshot(function() return body(ctx, opts) end)
        if not sum then ctx.problem("store", "cannot read in one snapshot: %s", tostring(err)) end
    end
    -- What verify read is dropped here, not when ctx is: compiled traces may hold ctx (or a
    -- table of it) as a constant until they are flushed (verify.feed.each_row).
    local sum = ctx.sum
    for k in pairs(ctx) do ctx[k] = nil end
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

-- One slice record of a file ledger against the slices its stream's usage transfers
-- consumed (s: nil when none did); one found is marked in_file.
local function file_record(where, bytes, trailer, s, problem, sum)
    local sl = acct.decode(bytes)
    if not sl then return problem(where, "does not decode") end
    if usage.unhex(sl.b3) ~= trailer then
        return problem(where, "its bytes do not hash to its trailer")
    end
    sum.slices_checked = sum.slices_checked + 1
    local mine = s and s.seqs[sl.id.seq]
    if not mine then
        problem(where, "seq %d is consumed by no transfer", sl.id.seq)
    elseif mine.b3 ~= trailer or mine.q ~= usage.quantity(sl) then
        problem(where, "%s cites another slice (b3 or quantity differ)", mine.where)
    else
        mine.in_file = true
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
                if bytes:sub(1, 4) ~= "RONL" then -- (RONL: an accepted loss's record)
                    file_record(format("file ledger %s record %d", f, idx), bytes, trailer, s,
                                problem, sum)
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
