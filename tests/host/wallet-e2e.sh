#!/bin/sh
# End to end, gateway records to a wallet statement (issue 17; docs/WALLET.md §5, WLT-9):
# records -> seal -> WAL -> export runtime -> ron.ledger.exporter (rate card) -> ron-wallet on
# the same SQLite ledger (tests/host/wallet-e2e.lua: prepaid balances down window by window,
# statements citing the slices, dry wallets published), then `ledger verify --wal` across
# the whole chain (slice digests in the WAL -> usage transfers -> the wallet's transfers ->
# balances), and a flipped byte of the wallet's top-up caught. cmake/wallet.cmake, label host.
#
#   wallet-e2e.sh HOST SOURCE_DIR WORK_DIR [sqlite|postgres]
# (postgres: a real PostgreSQL started here holds the ledger; the CLI verifies it by URI.)
. "$2/tests/host/lib.sh" && host_test wallet-e2e.sh "$@" || exit 1
backend=${4:-sqlite}
. "$src/tests/host/ledger-db.sh"
ledger_db "$backend"
e2e_card "$work/card.lua"

run_lua "$work/run.out" "$src/tests/host/wallet-e2e.lua" "$work" 6 "$db"
cat "$work/run.out"
line=$(grep '^wallet-e2e: ok ' "$work/run.out") || fail "no ok line"
nusage=$(printf '%s\n' "$line" | cut -d' ' -f3) topup=$(printf '%s\n' "$line" | cut -d' ' -f5)
[ "$nusage" = 18 ] || fail "$nusage usage transfers, expected 18 (3 tenants x 6 windows)"

# The whole chain: every transfer re-hashed (the wallet's issues and the rater's charges),
# postings and balances recomputed, conservation, the usage streams' digest chains, and the
# WAL's heads and frames cited by the ledger.
expect_exit 0 "$work/verify.out" "$host" ledger --db "$db" verify --wal "$work/wal"
grep -q '^20 transfers (18 usage)' "$work/verify.out" ||
    fail "verify did not see 20 transfers (2 wallet issues + 18 usage)"
grep -q ', 3 WAL heads and frames$' "$work/verify.out" || fail "verify did not read the 3 heads"
grep -qx 'OK' "$work/verify.out" || fail "no OK"

# Flip one byte (the 60th) of the wallet's top-up as stored: verify names that transfer.
flip_transfer_byte "$topup" || fail "updating the top-up $topup"
expect_exit 1 "$work/verify2.out" "$host" ledger --db "$db" verify --wal "$work/wal"
grep -q "^transfers #[0-9]* $topup: " "$work/verify2.out" || fail "the flipped top-up is not named"
grep -q '^FAILED: ' "$work/verify2.out" || fail "no FAILED line"
echo "wallet-e2e.sh: ok"
