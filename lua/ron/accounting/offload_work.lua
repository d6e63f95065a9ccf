-- Forwarding stub for one release (0.1 -> 0.2): ron.accounting.offload_work is now
-- ron.accounting.runtime.offload_work (lua/ron/accounting/compat.lua lists every renamed module).
return require("ron.accounting.compat").forward(...)
