-- ron.ledger.store.sql_lease: the node leases of ron.ledger.store.sql (LED-71).
local base = require("ron.ledger.store.sql_base")

local bytes_arg, int_arg, amount, write, read, read_all =
      base.bytes_arg, base.int_arg, base.amount, base.write, base.read, base.read_all

local _M = {}
-- the methods, installed on the Store class by ron.ledger.store.sql
local Store = {}
_M.methods = Store

-- node leases (LED-71, ron.ledger.lease) --------------------------------------------------
-- A node's lease row: { node, epoch, owner, expires_ms } in the store's clock. The engine
-- of a node guards every write with check_lease (its node and epoch) in the same
-- transaction, so once a survivor took a dead node's lease over (epoch + 1) no statement of
-- that node's earlier process lands any more.

local function lease_count(rows, err, class)
    if not rows then return nil, err, class end
    return amount(rows[1] and rows[1][1]) or 0
end

-- -> the epoch now held (> 0) | 0 (another node owns the row, unexpired)
function Store:lease_acquire(node, ttl_ms)
    bytes_arg("lease_acquire", node, "node")
    return lease_count(read(self, "lease_acquire", nil,
        { n = 3, node, node, int_arg("lease_acquire", ttl_ms, "ttl_ms") }, "i"))
end

-- -> 1 | 0 (the row is not (node, epoch, owner) any more: lost)
function Store:lease_renew(node, epoch, owner, ttl_ms)
    bytes_arg("lease_renew", node, "node")
    return write(self, "lease_renew", nil, { n = 4, int_arg("lease_renew", ttl_ms, "ttl_ms"),
        node, int_arg("lease_renew", epoch, "epoch"), bytes_arg("lease_renew", owner, "owner") })
end

-- The expired row (node, epoch, expires_ms as listed) -> owner, epoch + 1. -> 1 | 0
function Store:lease_takeover(node, epoch, expires_ms, owner, ttl_ms)
    bytes_arg("lease_takeover", node, "node")
    bytes_arg("lease_takeover", owner, "owner")
    int_arg("lease_takeover", epoch, "epoch")
    int_arg("lease_takeover", expires_ms, "expires_ms")
    int_arg("lease_takeover", ttl_ms, "ttl_ms")
    if self.dialect == "postgres" then
        return lease_count(read(self, "lease_takeover_pg", nil,
            { n = 5, node, epoch, expires_ms, owner, ttl_ms }, "i"))
    end
    return write(self, "lease_takeover", nil,
                 { n = 5, owner, ttl_ms, node, epoch, expires_ms })
end

-- -> 1 | 0: the row (node, epoch, owner) is free (nobody owns it, nothing to recover)
function Store:lease_release(node, epoch, owner)
    return write(self, "lease_release", nil, { n = 3, bytes_arg("lease_release", node, "node"),
        int_arg("lease_release", epoch, "epoch"), bytes_arg("lease_release", owner, "owner") })
end

-- -> { { node, epoch, owner?, expires_ms?, now_ms }, ... } by node
function Store:list_leases()
    return read_all(self, "list_leases", nil, { n = 0 }, "bibii", function(r)
        return { node = r[1], epoch = amount(r[2]), owner = r[3], expires_ms = amount(r[4]),
                 now_ms = amount(r[5]) }
    end)
end

-- -> 1 | 0: (node, epoch) holds the node's lease (a phase's guard: expect = 1)
function Store:check_lease(node, epoch)
    bytes_arg("check_lease", node, "node")
    int_arg("check_lease", epoch, "epoch")
    if self.dialect == "postgres" then
        return lease_count(read(self, "check_lease_pg", nil, { n = 2, node, epoch }, "i"))
    end
    return lease_count(read(self, "check_lease", nil, { n = 3, node, epoch, node }, "i"))
end

return _M
