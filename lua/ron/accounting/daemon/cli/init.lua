-- Forwarding stub for one release (issue 26): ron.accounting.daemon.cli is now
-- ron.node.cli (lua/ron/accounting/compat.lua lists every renamed module).
return require("ron.accounting.compat").forward(...)
