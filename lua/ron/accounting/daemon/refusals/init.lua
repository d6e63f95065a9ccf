-- Forwarding stub for one release (issue 26): ron.accounting.daemon.refusals is now
-- ron.node.refusals (lua/ron/accounting/compat.lua lists every renamed module).
return require("ron.accounting.compat").forward(...)
