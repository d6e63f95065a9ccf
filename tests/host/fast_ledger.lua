-- fast_clock.lua's settings plus the ledger exporter on SQLite (var/ledger.db, the acme
-- card, book main): the daemon the audit host tests run. A test's --config file does
--   local cfg = dofile(SRC .. "/tests/host/fast_ledger.lua")(R0, SRC)
-- and adds its own audit table.
return function(r0, src)
    local cfg = dofile(src .. "/tests/host/fast_clock.lua")(r0)
    cfg.capacity_rows, cfg.shards = 10000, 4
    cfg.exporter = { module = "ron.ledger.exporter",
                     store = { backend = "sqlite", path = "var/ledger.db", offload = true },
                     card = src .. "/examples/cards/acme.lua", book = "main", node = "gw-1" }
    return cfg
end
