-- ron.ledger.verify.money: the postings and the balance projection against the replayed
-- transfers (verify.walk; docs/LEDGER.md "What verify proves"). Every posting row is the
-- output of exactly one transfer, with that output's owner, asset and amount, its id's
-- shard, created by that transfer, and the status its spends imply (Inactive and consumed by
-- the one transfer that spent it, else Active with no reservation); every output has its
-- row. Every projection row (account, asset, shard) is the sum of that shard's unspent
-- outputs, rows of pairs no posting explains included, and every asset sums to 0.
local ledger = require("ron.ledger")
local schema = require("ron.ledger.store.schema")
local scan = require("ron.ledger.store.scan")
local walk = require("ron.ledger.verify.walk")

local format, hex, ipairs, pairs, tostring, type =
      string.format, ledger.hex, ipairs, pairs, tostring, type

local _M = {}

local pkey, akey, add = walk.pkey, walk.akey, walk.add
local STATUS = { [0] = "active", "pending_inactive", "inactive" }

local function shard_of(tid, index) return (index + tid:byte(1)) % schema.SHARDS end

local function pwhere(tid, idx)
    return format("postings %s:%s", hex(tostring(tid)), tostring(idx))
end

-- One stored posting against the output it should be (p from ctx.created).
local function posting(ctx, row, p)
    local w = pwhere(row.transfer_id, row.idx)
    if row.account ~= p.account or row.asset_code ~= p.asset.code or row.scale ~= p.asset.scale
       or row.amount ~= p.amount then
        ctx.problem(w, "is %s %s/%s %s in the store, its transfer's output %s %s %s",
                    hex(tostring(row.account)), tostring(row.asset_code), ctx.num(row.scale),
                    ctx.num(row.amount), hex(p.account), akey(p.asset), ctx.num(p.amount))
    end
    if row.created_by ~= row.transfer_id then
        ctx.problem(w, "created_by is %s, not its transfer", hex(tostring(row.created_by)))
    end
    if row.shard ~= shard_of(p.tid, p.index) then
        ctx.problem(w, "its shard is %s, its id's is %d", ctx.num(row.shard),
                    shard_of(p.tid, p.index))
    end
    local status = STATUS[row.status] or tostring(row.status)
    if p.by then
        if status ~= "inactive" or row.consumed_by ~= p.by then
            ctx.problem(w, "is %s (consumed by %s), its spends say inactive, consumed by %s",
                        status, row.consumed_by and hex(row.consumed_by) or "none", hex(p.by))
        end
    elseif status ~= "active" or row.consumed_by ~= nil or row.reservation ~= nil then
        ctx.problem(w, "is %s%s%s, no transfer spends it: active, unreserved", status,
                    row.consumed_by and " consumed by " .. hex(row.consumed_by) or "",
                    row.reservation and " reserved" or "")
    end
end

-- Every posting row; every output of the replay has one.
function _M.postings(ctx)
    local rows, err = scan.all(ctx.store, "postings")
    if not rows then return ctx.problem("postings", "cannot read: %s", tostring(err)) end
    local seen = {}
    for _, row in ipairs(rows) do
        local k = type(row.transfer_id) == "string" and type(row.idx) == "number"
                  and pkey(row.transfer_id, row.idx)
        local p = k and ctx.created[k]
        if not p then
            ctx.problem(pwhere(row.transfer_id, row.idx),
                        "no transfer of the feed created it (%s %s/%s %s)",
                        hex(tostring(row.account)), tostring(row.asset_code),
                        ctx.num(row.scale), ctx.num(row.amount))
        else
            seen[k] = true
            posting(ctx, row, p)
        end
    end
    for k, p in pairs(ctx.created) do
        if not seen[k] then ctx.problem(pwhere(p.tid, p.index), "missing from the store") end
    end
    ctx.sum.postings = #rows
end

local function bkey(account, code, scale, shard)
    return format("%s\0%s\0%s\0%s", tostring(account), tostring(code), tostring(scale),
                  tostring(shard))
end

-- The projection: expected per (pair, shard) from the replay's unspent outputs.
local function expected(ctx)
    local want, touched, pairs_n, per_asset = {}, {}, {}, {}
    for _, p in pairs(ctx.created) do
        local shard = shard_of(p.tid, p.index)
        local k = bkey(p.account, p.asset.code, p.asset.scale, shard)
        touched[k] = true
        if not p.by then
            local e = want[k]
            if not e then
                e = { account = p.account, asset = p.asset, shard = shard, amount = 0 }
                want[k] = e
            end
            e.amount = add(e.amount, p.amount)
            pairs_n[p.account .. akey(p.asset)] = true
            per_asset[akey(p.asset)] = add(per_asset[akey(p.asset)] or 0, p.amount)
        end
    end
    return want, touched, pairs_n, per_asset
end

function _M.balances(ctx)
    local want, touched, pairs_n, per_asset = expected(ctx)
    local rows, err = scan.all(ctx.store, "balances")
    if not rows then return ctx.problem("balances", "cannot read: %s", tostring(err)) end
    local seen = {}
    for _, r in ipairs(rows) do
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
    end
    for k, e in pairs(want) do
        if not seen[k] and e.amount ~= 0 then
            ctx.problem(format("balances %s %s shard %d", hex(e.account), akey(e.asset), e.shard),
                        "missing: the unspent postings of this shard sum to %s",
                        ctx.num(e.amount))
        end
    end
    for _ in pairs(pairs_n) do ctx.sum.balances = ctx.sum.balances + 1 end
    for a, v in pairs(per_asset) do
        ctx.sum.assets = ctx.sum.assets + 1
        if v ~= 0 then
            ctx.problem("asset " .. a, "not conserved: its balances sum to %s", ctx.num(v))
        end
    end
end

return _M
