-- Forwarding stub for one release (issue 26): ron.accounting.daemon.http is now
-- ron.node.http (lua/ron/accounting/compat.lua lists every renamed module).
return require("ron.accounting.compat").forward(...)
