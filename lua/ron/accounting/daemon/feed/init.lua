-- Forwarding stub for one release (issue 26): ron.accounting.daemon.feed is now
-- ron.node.feed (lua/ron/accounting/compat.lua lists every renamed module).
return require("ron.accounting.compat").forward(...)
