-- Forwarding stub for one release (issue 26): ron.accounting.daemon is now
-- ron.node (lua/ron/accounting/compat.lua lists every renamed module).
return require("ron.accounting.compat").forward(...)
