-- Forwarding stub for one release (0.1 -> 0.2): ron.accounting.exporter is now
-- ron.accounting.export.exporters (lua/ron/accounting/compat.lua lists every renamed module).
return require("ron.accounting.compat").forward(...)
