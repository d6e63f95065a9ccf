-- Forwarding stub for one release (issue 26): ron.accounting.net.http_client is now
-- ron.base.net.http_client (lua/ron/accounting/compat.lua lists every renamed module).
return require("ron.accounting.compat").forward(...)
