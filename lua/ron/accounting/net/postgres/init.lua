-- Forwarding stub for one release (issue 26): ron.accounting.net.postgres is now
-- ron.base.net.postgres (lua/ron/accounting/compat.lua lists every renamed module).
return require("ron.accounting.compat").forward(...)
