-- Forwarding stub for one release (issue 26): ron.accounting.daemon.receiver is now
-- ron.node.receiver (lua/ron/accounting/compat.lua lists every renamed module).
return require("ron.accounting.compat").forward(...)
