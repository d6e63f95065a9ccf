-- Forwarding stub for one release (issue 26): ron.accounting.daemon.demo is now
-- ron.node.demo (lua/ron/accounting/compat.lua lists every renamed module).
return require("ron.accounting.compat").forward(...)
