-- The script `ron-accounting ledger ...` runs (host/cli/ledgerops.c): the arguments after
-- the verb are this chunk's `...`; ron.ledger.cli does the work and gives the exit code.
os.exit(require("ron.ledger.cli").main({ ... }))
