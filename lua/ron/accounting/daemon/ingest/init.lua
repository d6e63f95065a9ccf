-- Forwarding stub for one release (issue 26): ron.accounting.daemon.ingest is now
-- ron.node.ingest (lua/ron/accounting/compat.lua lists every renamed module).
return require("ron.accounting.compat").forward(...)
