-- Forwarding stub for one release (issue 26): ron.accounting.export.exporters.ledger is now
-- ron.ledger.exporter (lua/ron/accounting/compat.lua lists every renamed module).
return require("ron.accounting.compat").forward(...)
