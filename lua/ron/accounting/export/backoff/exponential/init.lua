-- Forwarding stub for one release (issue 26): ron.accounting.export.backoff.exponential is now
-- ron.base.backoff.exponential (lua/ron/accounting/compat.lua lists every renamed module).
return require("ron.accounting.compat").forward(...)
