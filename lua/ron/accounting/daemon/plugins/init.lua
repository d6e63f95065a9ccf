-- Forwarding stub for one release (issue 26): ron.accounting.daemon.plugins is now
-- ron.node.plugins (lua/ron/accounting/compat.lua lists every renamed module).
return require("ron.accounting.compat").forward(...)
