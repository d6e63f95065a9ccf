-- Forwarding stub for one release (0.1 -> 0.2): ron.accounting.fairness.round_robin is now
-- ron.accounting.export.fairness.round_robin (lua/ron/accounting/compat.lua lists every renamed
-- module).
return require("ron.accounting.compat").forward(...)
