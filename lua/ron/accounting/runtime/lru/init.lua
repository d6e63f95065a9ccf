-- Forwarding stub for one release (issue 26): ron.accounting.runtime.lru is now
-- ron.base.lru (lua/ron/accounting/compat.lua lists every renamed module).
return require("ron.accounting.compat").forward(...)
