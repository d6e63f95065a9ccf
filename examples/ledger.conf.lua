-- ledger.conf.lua: the daemon with usage rated into ron-ledger (docs/LEDGER-RATING.md §7):
-- metering and the ledger exporter on one loop, the ledger in SQLite.
--
--   build/ron-accounting ledger --db var/ledger.db init
--   build/ron-accounting run examples/daemon.lua --config examples/ledger.conf.lua --demo 50
--   build/ron-accounting ledger --db var/ledger.db accounts
--   build/ron-accounting ledger --db var/ledger.db verify
--
-- Every sealed slice is rated with examples/cards/acme.lua and committed as one transfer
-- (tenant wallet -> revenue, the shortfall on the tenant's receivable); the stream's chain
-- is kept in the ledger's usage_streams, so the file ledger is not used. SQLite runs in the
-- threadpool (offload = true): the loop never waits for the disk. `make run` runs this, the
-- wallet and the audit trail on embedded defaults (docs/ops/run.md).
return {
    var_dir = "var",
    exporter = {
        module = "ron.ledger.exporter",
        store = { backend = "sqlite", path = "var/ledger.db", offload = true },
        card = "examples/cards/acme.lua",
        book = "main",
        node = "gw-1",
    },
}
