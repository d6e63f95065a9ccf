-- ron.ledger.exporter_batch: the exporter's batch path (LED-55, docs/LEDGER-RATING.md §7):
-- e:put_many's lanes, each one led:commit_many with its streams' heads read once and moved
-- once. Its methods are installed on ron.ledger.exporter's class, which owns the state they
-- use (streams, tenants, counts, the store, the engine); the stream keys and the statuses
-- acknowledged are written here once, for both paths.
local chain = require("ron.accounting.export.chain")
local usage = require("ron.ledger.usage")
local phases = require("ron.ledger.phases")

local ipairs, pairs, type, tostring, format = ipairs, pairs, type, tostring, string.format

local _M = { SHORTFALL_EVENT = "usage.shortfall" }

local SHORTFALL_EVENT = _M.SHORTFALL_EVENT
local ZERO32 = usage.ZERO32

-- a stream's key in the exporter's maps
local function key(tenant16, dim) return tenant16 .. dim end
-- the store's key of get_streams' answer
local function store_key(tenant16, dim) return tenant16 .. "\0" .. dim end
_M.key, _M.store_key = key, store_key

-- the answers that acknowledge a slice (made durable before they are given)
local ACKED = { ok = true, dup = true }
_M.ACKED = ACKED

local E = {} -- this concern's methods

-- ---- the batch (LED-55): one commit_many per lane; the store's round trips per batch ----
-- The chain contract decides each slice exactly as _put does, against the stream's head
-- read once per batch (get_streams) and moved in memory by the batch's earlier slices of
-- the same stream; dups below the stored head are told by their committed intents read at
-- once (get_intents); the wallets' statuses are read at once (get_accounts); the accepted
-- slices are rated in order (a stream's next slice rated on its predecessor's used_after)
-- and committed by ONE led:commit_many; the shortfall events are appended at once
-- (append_events) and every stream's head moves once, from its stored head to its last
-- slice committed in order (advance_streams / insert_streams: one statement each), in the
-- commit's own phase when every slice of the batch commits there with no shortfall
-- (commit_many's opts.also: one write transaction and one store call fewer per batch),
-- else after it.
-- One deviation from one-by-one puts, documented in docs/LEDGER-RATING.md: a slice whose
-- predecessor in the same batch failed is answered as one by one would (gap), but its
-- transfer may already be committed (its intent holds it; the re-sent slice then finds it:
-- dup). The daemon's runtime never sends two slices of one stream in one put_many.
function E:_put_batch(slices, idx, results)
    -- b: the batch's state, passed through its phases; answers are counted once, at the end
    -- (a later phase may still change some)
    local b = { idx = idx, results = results, infos = {}, pos = {}, dup_of = {}, stopped = {} }
    self.counts.puts = self.counts.puts + #idx
    for p, i in ipairs(idx) do b.pos[i] = p end
    if not self:_batch_heads(b, slices) then return self:_settle_batch(b) end
    local cand, dup_q = self:_batch_admit(b)
    self:_batch_dups(b, dup_q)
    if #cand == 0 then return self:_settle_batch(b) end
    local order, reqs, rated_of = self:_batch_rate(b, cand, self:_batch_wallets(b, cand))
    if #reqs == 0 then return self:_settle_batch(b) end
    local last = self:_batch_commit(b, order, reqs, rated_of)
    if last then self:_batch_move_heads(b, order, last) end
    return self:_settle_batch(b)
end

local function answer(b, i, status, detail) b.results[i] = { status, detail } end
local function failed(b, i, err) b.results[i] = { nil, err } end

-- The slices' infos and their streams' heads (read at once): false when the store failed.
function E:_batch_heads(b, slices)
    local keys, seen, kk = {}, {}, {}
    for _, i in ipairs(b.idx) do
        local s = slices[i]
        local t16 = usage.tenant_raw(s.tenant)
        -- (k: the stream's key, made once a slice; each concatenation is a string looked up
        -- in LuaJIT's table, ~8 of them a slice before, issue 25)
        local k = key(t16, s.dimension)
        b.infos[i] = { info = usage.from_slice(s), t16 = t16, dim = s.dimension, s = s, k = k }
        if not seen[k] then
            seen[k] = true
            keys[#keys + 1] = { tenant = t16, dimension = s.dimension }
            kk[#keys] = k
        end
    end
    b.heads = {}
    for c = 1, #keys, 1024 do
        local part = {}
        for j = c, math.min(#keys, c + 1023) do part[#part + 1] = keys[j] end
        local got, err = self.store:get_streams(part)
        if not got then
            for _, i in ipairs(b.idx) do failed(b, i, err) end
            return false
        end
        for j, p in ipairs(part) do
            local h = got[store_key(p.tenant, p.dimension)]
            b.heads[kk[c + j - 1]] = { seq = h and h.seq or 0,
                                                    b3 = h and h.b3 or ZERO32,
                                                    stored = h ~= nil }
        end
    end
    return true
end

-- The chain contract (ron.accounting.export.chain), in order, against the heads moved in
-- memory by the batch's earlier slices. -> the slices to commit, those below the stored
-- head whose intents tell dup from conflict
function E:_batch_admit(b)
    local vhead, dup_q, cand = {}, {}, {}
    for k, h in pairs(b.heads) do vhead[k] = { seq = h.seq, b3 = h.b3, batch = {}, at = {} } end
    for _, i in ipairs(b.idx) do
        local x = b.infos[i]
        local info, k = x.info, x.k
        local v = vhead[k]
        local seq = info.seq
        if type(seq) == "number" and seq <= v.seq and v.batch[seq] == info.b3 then
            b.dup_of[i] = v.at[seq] -- the batch's own slice: answered as that one ends
        else
            local verdict, detail = chain.admit(v.seq, v.b3, seq, info.prev_b3, info.b3)
            if verdict == "ok" then
                cand[#cand + 1] = i
                v.seq, v.b3 = seq, info.b3
                v.batch[seq], v.at[seq] = info.b3, i
            elseif verdict == "dup" then
                answer(b, i, "dup")
            elseif verdict == "below" and seq <= b.heads[k].seq then
                dup_q[#dup_q + 1] = i -- a committed intent below the stored head: dup
            elseif verdict == "below" then
                answer(b, i, "conflict", format("%s/%s seq %d: another slice holds this seq "
                                                .. "(head %d)", x.s.tenant, x.dim, seq, v.seq))
            else
                answer(b, i, verdict, detail)
            end
        end
    end
    return cand, dup_q
end

-- Below the stored head: dup when a committed transfer holds the slice's intent.
function E:_batch_dups(b, dup_q)
    if #dup_q == 0 then return end
    local ks = {}
    for j, i in ipairs(dup_q) do
        local x = b.infos[i]
        ks[j] = usage.intent(x.t16, x.dim, x.info.seq, x.info.b3)
    end
    local got, err = self.store:get_intents(ks)
    for j, i in ipairs(dup_q) do
        local x = b.infos[i]
        if not got then failed(b, i, err)
        elseif got[ks[j]] and got[ks[j]].status == "committed" then answer(b, i, "dup")
        else
            answer(b, i, "conflict", format("%s/%s seq %d: another slice holds this seq "
                                            .. "(head %d)", x.s.tenant, x.dim, x.info.seq,
                                            b.heads[x.k].seq))
        end
    end
end

-- The tenants' accounts (created once) and their wallets' statuses, read at once.
-- -> { [tenant16] = the error that stops its slices }
function E:_batch_wallets(b, cand)
    local tenants, tlist = {}, {}
    for _, i in ipairs(cand) do
        local t16 = b.infos[i].t16
        if not tenants[t16] then
            tenants[t16] = true
            tlist[#tlist + 1] = t16
        end
    end
    local bad = {}
    local wallets = {}
    for _, t16 in ipairs(tlist) do
        if not self.tenants[t16] then
            local ok, err = self:tenant_accounts(t16)
            if not ok then bad[t16] = err end
        end
        wallets[#wallets + 1] = self.accounts("wallet", t16)
    end
    local wst, werr = {}, nil
    for c = 1, #wallets, 1024 do
        local part = {}
        for j = c, math.min(#wallets, c + 1023) do part[#part + 1] = wallets[j] end
        local got, err = self.store:get_accounts(part)
        if not got then werr = err break end
        for id, a in pairs(got) do wst[id] = a end
    end
    for _, t16 in ipairs(tlist) do
        local w = wst[self.accounts("wallet", t16)]
        if werr then bad[t16] = werr
        elseif not bad[t16] and not w then bad[t16] = "LedgerError: the wallet account vanished"
        elseif not bad[t16] and w.status ~= "open" then
            bad[t16] = format("Frozen: the wallet of tenant %s is %s: its usage waits",
                              usage.tenant_text(t16), tostring(w.status))
        end
    end
    return bad
end

-- Rated in order; a stream's slice after a refused one is not committed (gap, as one by
-- one: the head stays before the refused slice). -> the slices rated in order, their
-- requests, their ratings
function E:_batch_rate(b, cand, bad)
    local reqs, rated_of, order, stopped = {}, {}, {}, b.stopped
    for _, i in ipairs(cand) do
        local x = b.infos[i]
        local k = x.k
        if stopped[k] then
            answer(b, i, "gap", format("head is seq %d", stopped[k].seq - 1))
        elseif bad[x.t16] then
            failed(b, i, bad[x.t16])
            stopped[k] = { seq = x.info.seq, pos = b.pos[i] }
        else
            local used, err = self:period_used(x.info, x.t16, k)
            local req, rated
            if used then req, rated = usage.request(x.info, self.card, used, self.accounts) end
            if not req then
                failed(b, i, err or rated)
                stopped[k] = { seq = x.info.seq, pos = b.pos[i] }
            else
                reqs[#reqs + 1] = req
                order[#order + 1] = i
                rated_of[i] = rated
                x.req = req
                -- the next slice of this stream rates on this one's used_after
                self:_remember(x.t16, x.info, rated.period, rated.used_after, k)
            end
        end
    end
    return order, reqs, rated_of
end

-- The heads' moves of a batch: each stream from its stored head to its slice last[k].
-- -> the new streams', the stored ones', and both as { k =, m = } in last's order
local function moves_of(b, last)
    local ins, adv, moves = {}, {}, {}
    for k, i in pairs(last) do
        local x, h = b.infos[i], b.heads[k]
        local m = { tenant = x.t16, dimension = x.dim, seq = x.info.seq, b3 = x.info.b3,
                    prev_seq = h.seq, prev_b3 = h.b3 }
        moves[#moves + 1] = { k = k, m = m }
        if h.stored then adv[#adv + 1] = m else ins[#ins + 1] = m end
    end
    return ins, adv, moves
end

local function add_chunked(ops, name, list)
    for _, part in ipairs(phases.slices(list, phases.BATCH_IDS)) do
        ops[#ops + 1] = { name, part, expect = #part }
    end
end

-- commit_many's opts.also: the heads' moves as ops of the batch's own phase, when the phase
-- commits every slice of the batch (planned[j]: request j's transfer) and none leaves a
-- shortfall (its event goes after the commit, before the head moves: a re-sent slice must
-- still find the head before it then). Each op expects its whole list: another writer's
-- move of one of the heads meanwhile applies nothing, and the commit goes the saga's way,
-- the heads after it as before (a compare-and-set each).
function E:_batch_heads_ops(b, order, planned)
    local last = {}
    for j, i in ipairs(order) do
        local x, t = b.infos[i], planned[j]
        if not t or self:shortfall(nil, x.req, t) ~= 0 then return nil end
        last[x.k] = i
    end
    local ins, adv = moves_of(b, last)
    local ops = {}
    add_chunked(ops, "insert_streams", ins)
    add_chunked(ops, "advance_streams", adv)
    return ops
end

-- ONE led:commit_many; outcomes in order (a stream stops at its first failed commit), the
-- shortfall events appended at once. -> each stream's last slice committed | nil (the
-- events could not be appended: nothing is answered ok). b.heads_moved: the heads moved in
-- the commit's phase.
function E:_batch_commit(b, order, reqs, rated_of)
    local res = self.led:commit_many(reqs, { also = function(planned)
        return self:_batch_heads_ops(b, order, planned)
    end })
    b.heads_moved = res.also_done
    local last, shorts, stopped = {}, {}, b.stopped
    for j, i in ipairs(order) do
        local x = b.infos[i]
        local k = x.k
        local r, cerr = res[j][1], res[j][2]
        if stopped[k] then
            answer(b, i, "gap", format("head is seq %d", stopped[k].seq - 1))
        elseif not r then
            failed(b, i, "LedgerError: " .. tostring(cerr))
            stopped[k] = { seq = x.info.seq, pos = b.pos[i] }
            self.streams[k] = nil -- its used_after was never committed
        else
            x.r = r
            last[k] = i
            -- (heads moved in the phase: _batch_heads_ops found no shortfall in its plan)
            local short = b.heads_moved and 0 or self:shortfall(r.transfer_id, x.req, r.transfer)
            if short ~= 0 then
                shorts[#shorts + 1] = { transfer_id = r.transfer_id, kind = SHORTFALL_EVENT,
                    data = format("tenant=%s amount=%s asset=%s", usage.tenant_text(x.t16),
                                  tostring(short), rated_of[i].asset.code) }
            end
        end
    end
    if #shorts > 0 then
        local n, eerr = self.store:append_events(self.book, shorts)
        if not n then
            for _, i in ipairs(order) do
                if b.infos[i].r then
                    failed(b, i, eerr)
                    b.infos[i].r = nil
                end
            end
            return nil
        end
        self.counts.shortfalls = self.counts.shortfalls + n
    end
    return last
end

-- Every stream's head once: from its stored head to its last slice committed in order
-- (insert_streams / advance_streams: one statement each); then the answers.
function E:_batch_move_heads(b, order, last)
    local outcome = {}
    if b.heads_moved then -- (in the commit's own phase: E:_batch_heads_ops)
        for k in pairs(last) do outcome[k] = "ok" end
    else
        outcome = self:_move_heads_after(b, last)
    end
    for _, i in ipairs(order) do
        local x = b.infos[i]
        if x.r then
            local o = outcome[x.k]
            if o == "ok" then answer(b, i, x.r.replayed and "dup" or "ok")
            elseif o == "moved" then answer(b, i, "dup") -- another writer moved it there
            else
                failed(b, i, o)
                self.streams[x.k] = nil
            end
        end
    end
end

-- The heads' compare-and-set moves after the commit: -> { [stream key] = "ok" | "moved"
-- (another writer moved it to the same place) | the error }
function E:_move_heads_after(b, last)
    local store = self.store
    local ins, adv, moves = moves_of(b, last)
    local n1, err1 = 0, nil
    if #ins > 0 then n1, err1 = store:insert_streams(ins) end
    local n2, err2 = 0, nil
    if n1 and #adv > 0 then n2, err2 = store:advance_streams(adv) end
    local moved_all = n1 and n2 and n1 + n2 == #moves
    local now = {}
    if not moved_all and n1 and n2 then
        local ps = {}
        for j, mv in ipairs(moves) do
            ps[j] = { tenant = mv.m.tenant, dimension = mv.m.dimension }
        end
        now = store:get_streams(ps) or {}
    end
    local outcome = {}
    for _, mv in ipairs(moves) do
        if moved_all then outcome[mv.k] = "ok"
        elseif not (n1 and n2) then outcome[mv.k] = err1 or err2
        else
            local h = now[store_key(mv.m.tenant, mv.m.dimension)]
            if h and h.seq == mv.m.seq and h.b3 == mv.m.b3 then outcome[mv.k] = "moved"
            else outcome[mv.k] = "LedgerError: the stream's head moved meanwhile" end
        end
    end
    return outcome
end

-- The last pass, in the batch's order: a slice repeated in the batch is answered as its
-- first copy ended (dup when that one was acknowledged, else the same failure); a stream
-- whose slice failed answers what one put at a time would have after it (the head stays
-- before the failed slice: the same seq fails alike, later seqs are gaps). Then counted.
function E:_settle_batch(b)
    local results = b.results
    for _, i in ipairs(b.idx) do
        local x = b.infos[i]
        local st = b.stopped[x.k]
        local j = b.dup_of[i]
        if j then
            local r = results[j]
            if r and ACKED[r[1]] then results[i] = { "dup" }
            else results[i] = { r and r[1], r and r[2] } end
        elseif st and b.pos[i] > st.pos and type(x.info.seq) == "number"
               and x.info.seq >= st.seq then
            if x.info.seq > st.seq then
                results[i] = { "gap", format("head is seq %d", st.seq - 1) }
            end
        end
    end
    for _, i in ipairs(b.idx) do
        local r = results[i]
        if r and r[1] then self:_count(r[1])
        elseif r then self:_count("fail") end
    end
end

_M.methods = E
return _M
