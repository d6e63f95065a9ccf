-- Forwarding stub for one release (issue 26): ron.accounting.net.postgres_c is now
-- ron.base.net.postgres_c (lua/ron/accounting/compat.lua lists every renamed module).
return require("ron.accounting.compat").forward(...)
