-- ron.ledger.verify.money: the postings and the balance projection against the replayed
-- transfers (verify.walk; docs/LEDGER.md "What verify proves"). Every posting row is the
-- output of exactly one transfer, with that output's owner, asset and amount, its id's
-- shard, created by that transfer, and the status its spends imply (Inactive and consumed by
-- the one transfer that spent it, else Active with no reservation); every output has its
-- row. Every projection row (account, asset, shard) is the sum of that shard's unspent
-- outputs, rows of pairs no posting explains included, and every asset sums to 0. Both
-- tables are read a page at a time; the replay's outputs are ctx.out's slots (verify.walk),
-- and a posting row found marks its slot (8 bytes a posting, this phase only).
local ledger = require("ron.ledger")
local schema = require("ron.ledger.store.schema")
local feed = require("ron.ledger.verify.feed")
local walk = require("ron.ledger.verify.walk")
local tnew = require("table.new")

local format, hex, pairs, tonumber, tostring, type =
      string.format, ledger.hex, pairs, tonumber, tostring, type

local _M = {}

local akey, add = walk.akey, walk.add
local STATUS = { [0] = "active", "pending_inactive", "inactive" }

local function shard_of(tid, index) return (index + tid:byte(1)) % schema.SHARDS end

local function pwhere(tid, idx)
    return format("postings %s:%s", hex(tostring(tid)), tostring(idx))
end

local function pw(row) return pwhere(row.transfer_id, row.idx) end -- (made for a problem only)

-- One stored posting against the output it should be (slot: its place in ctx.out).
local function posting(ctx, row, slot, idx)
    local O = ctx.out
    local pair, amount, by = O.pair[slot], O.amt[slot], O.by[slot]
    local account, asset = pair.account, pair.asset
    if row.account ~= account or row.asset_code ~= asset.code or row.scale ~= asset.scale
       or row.amount ~= amount then
        ctx.problem(pw(row), "is %s %s/%s %s in the store, its transfer's output %s %s %s",
                    hex(tostring(row.account)), tostring(row.asset_code), ctx.num(row.scale),
                    ctx.num(row.amount), hex(account), akey(asset), ctx.num(amount))
    end
    if row.created_by ~= row.transfer_id then
        ctx.problem(pw(row), "created_by is %s, not its transfer", hex(tostring(row.created_by)))
    end
    local shard = shard_of(row.transfer_id, idx)
    if row.shard ~= shard then
        ctx.problem(pw(row), "its shard is %s, its id's is %d", ctx.num(row.shard), shard)
    end
    local status = STATUS[row.status] or tostring(row.status)
    if by then
        local spender = ctx.tx.id[by]
        if status ~= "inactive" or row.consumed_by ~= spender then
            ctx.problem(pw(row), "is %s (consumed by %s), its spends say inactive, consumed by %s",
                        status, row.consumed_by and hex(row.consumed_by) or "none", hex(spender))
        end
    elseif status ~= "active" or row.consumed_by ~= nil or row.reservation ~= nil then
        ctx.problem(pw(row), "is %s%s%s, no transfer spends it: active, unreserved", status,
                    row.consumed_by and " consumed by " .. hex(row.consumed_by) or "",
                    row.reservation and " reserved" or "")
    end
end

-- The slot of a posting row's output and its index (its idx as the key text `%08x` read it
-- before: a fraction truncated), or nil.
local function slot_of(ctx, row)
    local tid, idx = row.transfer_id, row.idx
    if type(tid) ~= "string" or type(idx) ~= "number" then return nil end
    if idx % 1 ~= 0 then idx = tonumber(format("%x", idx), 16) end
    return walk.created(ctx, tid, idx), idx
end

-- Every posting row, a page at a time; every output of the replay has one.
function _M.postings(ctx)
    local T, n, seen = ctx.tx, 0, tnew(ctx.out.count, 0) -- (a slot found: 8 bytes a posting)
    local ok = feed.each_row(ctx, "postings", function(row)
        n = n + 1
        local slot, idx = slot_of(ctx, row)
        if not slot then
            ctx.problem(pwhere(row.transfer_id, row.idx),
                        "no transfer of the feed created it (%s %s/%s %s)",
                        hex(tostring(row.account)), tostring(row.asset_code),
                        ctx.num(row.scale), ctx.num(row.amount))
        else
            seen[slot] = true
            posting(ctx, row, slot, idx)
        end
    end)
    if not ok then return end
    for ord = 1, T.count do
        local base = T.base[ord]
        for i = 0, base and T.nout[ord] - 1 or -1 do
            if not seen[base + i] then
                ctx.problem(pwhere(T.id[ord], i), "missing from the store")
            end
        end
    end
    ctx.sum.postings = n
    seen = nil -- luacheck: ignore 331 (not a trace's constant: verify.feed.each_row)
end

local function bkey(account, code, scale, shard)
    return format("%s\0%s\0%s\0%s", tostring(account), tostring(code), tostring(scale),
                  tostring(shard))
end

-- The projection: expected per (pair, shard) from the replay's unspent outputs.
local function expected(ctx)
    local want, touched, pairs_n, per_asset = {}, {}, {}, {}
    local O, T = ctx.out, ctx.tx
    for ord = 1, T.count do
        local base, tid = T.base[ord], T.id[ord]
        for i = 0, base and T.nout[ord] - 1 or -1 do
            local slot = base + i
            local pair, amount = O.pair[slot], O.amt[slot]
            local account, asset = pair.account, pair.asset
            local shard = shard_of(tid, i)
            local k = bkey(account, asset.code, asset.scale, shard)
            touched[k] = true
            if not O.by[slot] then
                local e = want[k]
                if not e then
                    e = { account = account, asset = asset, shard = shard, amount = 0 }
                    want[k] = e
                end
                e.amount = add(e.amount, amount)
                pairs_n[account .. akey(asset)] = true
                per_asset[akey(asset)] = add(per_asset[akey(asset)] or 0, amount)
            end
        end
    end
    return want, touched, pairs_n, per_asset
end

function _M.balances(ctx)
    local want, touched, pairs_n, per_asset = expected(ctx)
    local seen = {}
    local ok = feed.each_row(ctx, "balances", function(r)
        local k = bkey(r.account, r.asset_code, r.scale, r.shard)
        local w = format("balances %s %s/%s shard %s", hex(tostring(r.account)),
                         tostring(r.asset_code), ctx.num(r.scale), ctx.num(r.shard))
        seen[k] = true
        if not touched[k] then
            ctx.problem(w, "is %s, and no posting of this pair falls in this shard",
                        ctx.num(r.amount))
        elseif r.amount ~= (want[k] and want[k].amount or 0) then
            ctx.problem(w, "is %s, the unspent postings of this shard sum to %s",
                        ctx.num(r.amount), ctx.num(want[k] and want[k].amount or 0))
        end
    end)
    if not ok then return end
    for k, e in pairs(want) do
        if not seen[k] and e.amount ~= 0 then
            ctx.problem(format("balances %s %s shard %d", hex(e.account), akey(e.asset), e.shard),
                        "missing: the unspent postings of this shard sum to %s",
                        ctx.num(e.amount))
        end
    end
    -- luacheck: ignore 331 (not a trace's constant: verify.feed.each_row)
    want, touched, seen = nil, nil, nil
    for _ in pairs(pairs_n) do ctx.sum.balances = ctx.sum.balances + 1 end
    for a, v in pairs(per_asset) do
        ctx.sum.assets = ctx.sum.assets + 1
        if v ~= 0 then
            ctx.problem("asset " .. a, "not conserved: its balances sum to %s", ctx.num(v))
        end
    end
end

return _M
