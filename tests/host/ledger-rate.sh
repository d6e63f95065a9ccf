#!/bin/sh
# End to end: records -> seal -> WAL -> export runtime -> ron.ledger.exporter (SQLite, or a
# real PostgreSQL started here) -> balances equal to the rated usage; `ledger verify`
# passes; a flipped byte in a stored transfer is caught (exit 1, the transfer named).
# cmake/host-tests.cmake, label host.
#
#   ledger-rate.sh HOST SOURCE_DIR WORK_DIR [sqlite|postgres]
. "$2/tests/host/lib.sh" && host_test ledger-rate.sh "$@" || exit 1
backend=${4:-sqlite}
. "$src/tests/host/ledger-db.sh"
ledger_db "$backend"
e2e_card "$work/card.lua"

"$host" ledger --db "$db" init >"$work/init.out" 2>&1 || { cat "$work/init.out"; fail "init"; }
"$host" ledger --db "$db" transfer --from external \
    --to 00000000-0000-4000-8000-00000000000a:wallet --asset USD/2 --amount 300 \
    --intent topup-a-1 >"$work/topup.out" 2>&1 || { cat "$work/topup.out"; fail "top-up"; }

run_lua "$work/run.out" "$src/tests/host/ledger-rate.lua" "$work" 6 "$db"
cat "$work/run.out"
grep -q '^ledger-rate: ok 18 ' "$work/run.out" || fail "not 18 usage transfers"

expect_exit 0 "$work/verify.out" "$host" ledger --db "$db" verify # an untouched ledger
grep -q '^19 transfers (18 usage)' "$work/verify.out" || fail "verify did not see 19 transfers"
grep -qx 'OK' "$work/verify.out" || fail "no OK"
# ... and against the metering WAL the slices came from (its heads: the producer's).
"$host" ledger --db "$db" verify --wal "$work/wal" >"$work/verify-wal.out" 2>&1 ||
    { cat "$work/verify-wal.out"; fail "verify --wal"; }
grep -q ', 3 WAL heads and frames$' "$work/verify-wal.out" ||
    { cat "$work/verify-wal.out"; fail "verify --wal did not read the 3 heads"; }

# Flip one byte (the 60th) of the 5th transfer's stored canonical bytes.
id=$(transfer_id_at 4) || fail "reading the 5th transfer"
flip_transfer_byte "$id" || fail "updating the 5th transfer"
expect_exit 1 "$work/verify2.out" "$host" ledger --db "$db" verify
grep -q "^transfers #5 $id: " "$work/verify2.out" || fail "the flipped transfer is not named"
grep -q '^FAILED: ' "$work/verify2.out" || fail "no FAILED line"
echo "ledger-rate.sh: ok"
