-- Forwarding stub for one release (issue 26): ron.accounting.daemon.admin is now
-- ron.node.admin (lua/ron/accounting/compat.lua lists every renamed module).
return require("ron.accounting.compat").forward(...)
