-- Forwarding stub for one release (0.1 -> 0.2): ron.accounting.ingest is now
-- ron.node.ingest (lua/ron/accounting/compat.lua lists every renamed module).
return require("ron.accounting.compat").forward(...)
