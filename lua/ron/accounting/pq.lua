-- Forwarding stub for one release (0.1 -> 0.2): ron.accounting.pq is now
-- ron.base.net.postgres_c (lua/ron/accounting/compat.lua lists every renamed module).
return require("ron.accounting.compat").forward(...)
