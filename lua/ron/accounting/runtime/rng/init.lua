-- Forwarding stub for one release (issue 26): ron.accounting.runtime.rng is now
-- ron.base.rng (lua/ron/accounting/compat.lua lists every renamed module).
return require("ron.accounting.compat").forward(...)
