-- wallet.conf.lua: metering, the ledger exporter and ron-wallet on one node (docs/WALLET.md):
-- sealed slices are rated into ron-ledger (SQLite var/ledger.db, examples/cards/acme.lua) and
-- the wallet serves prepaid balances over the same ledger and book, so usage shows in the
-- wallet's balances and statements.
--
--   build/ron-accounting run examples/daemon.lua --config examples/wallet.conf.lua --demo 50
--   curl -s -X POST -H 'Authorization: Bearer demo-operator' \
--        -H 'Content-Type: application/json' -H 'Idempotency-Key: top-up-1' \
--        -d '{"to":"<uuid>","asset":"USD","amount":5000,"nonce":1}' \
--        http://127.0.0.1:9464/v1/issue
--   curl -s -H 'Authorization: Bearer demo-operator' \
--        'http://127.0.0.1:9464/v1/accounts/<uuid>/balance?asset=USD'
--
-- A tenant's usage wallet (the account the rater charges) is
-- `ron-accounting ledger --db var/ledger.db accounts --tenant TENANT`'s "wallet" id; its 32
-- hex digits written 8-4-4-4-12 are its wallet UUID. The tokens below are demo tokens in
-- clear text for the example only: a real configuration holds their BLAKE3 digests
-- (`printf %s TOKEN | b3sum`), never the tokens. `make run` runs the same
-- composition on embedded defaults (docs/ops/run.md); this file names every part.
local b3hex = require("ron.accounting").b3hex
return {
    var_dir = "var",
    listen = "127.0.0.1:9464",
    exporter = {
        module = "ron.ledger.exporter",
        store = { backend = "sqlite", path = "var/ledger.db", offload = true },
        card = "examples/cards/acme.lua",
        book = "main",
        node = "gw-1",
    },
    wallet = {
        tokens = { [b3hex("demo-operator")] = "operator" },
        assets = { USD = 2 },
        store = { backend = "sqlite", path = "var/ledger.db" }, -- the rater's ledger
        book = "main",
        node = "wallet-1",
    },
}
