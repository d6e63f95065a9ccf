-- Forwarding stub for one release (issue 26): ron.accounting.net.http_server is now
-- ron.base.net.http_server (lua/ron/accounting/compat.lua lists every renamed module).
return require("ron.accounting.compat").forward(...)
