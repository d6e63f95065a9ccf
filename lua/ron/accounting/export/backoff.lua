-- Forwarding stub for one release (issue 26): ron.accounting.export.backoff is now
-- ron.base.backoff (lua/ron/accounting/compat.lua lists every renamed module).
return require("ron.accounting.compat").forward(...)
