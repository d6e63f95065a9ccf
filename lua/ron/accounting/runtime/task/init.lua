-- Forwarding stub for one release (issue 26): ron.accounting.runtime.task is now
-- ron.base.task (lua/ron/accounting/compat.lua lists every renamed module).
return require("ron.accounting.compat").forward(...)
