-- Forwarding stub for one release (0.1 -> 0.2): ron.accounting.exporters.chaos is now
-- ron.accounting.export.exporters.chaos (lua/ron/accounting/compat.lua lists every renamed module).
return require("ron.accounting.compat").forward(...)
