-- Forwarding stub for one release (issue 26): ron.accounting.daemon.attest is now
-- ron.node.attest (lua/ron/accounting/compat.lua lists every renamed module).
return require("ron.accounting.compat").forward(...)
