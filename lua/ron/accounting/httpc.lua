-- Forwarding stub for one release (0.1 -> 0.2): ron.accounting.httpc is now
-- ron.base.net.http_client (lua/ron/accounting/compat.lua lists every renamed module).
return require("ron.accounting.compat").forward(...)
