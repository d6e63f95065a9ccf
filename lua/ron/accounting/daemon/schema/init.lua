-- Forwarding stub for one release (issue 26): ron.accounting.daemon.schema is now
-- ron.node.schema (lua/ron/accounting/compat.lua lists every renamed module).
return require("ron.accounting.compat").forward(...)
