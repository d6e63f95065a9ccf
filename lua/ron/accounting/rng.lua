-- Forwarding stub for one release (0.1 -> 0.2): ron.accounting.rng is now
-- ron.base.rng (lua/ron/accounting/compat.lua lists every renamed module).
return require("ron.accounting.compat").forward(...)
