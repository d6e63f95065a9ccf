#!/bin/sh
# Money = usage over many windows (issue 24 §5): tests/host/usage-windows.lua drives 12 windows
# on a simulated clock across a UTC midnight through meter -> WAL -> rating -> wallet, with a
# card of tiers, a free allowance and a daily period, and checks every charge against its own
# arithmetic; then `ledger verify --wal` walks the chain. cmake/wallet.cmake, label host.
#
#   usage-windows.sh HOST SOURCE_DIR WORK_DIR [sqlite|postgres]
set -u
host=$1 src=$2 work=$3 backend=${4:-sqlite}
rm -rf "$work" && mkdir -p "$work" || exit 1
fail() { echo "usage-windows.sh: FAILED: $*" >&2; exit 1; }
. "$src/tests/host/ledger-db.sh"
ledger_db "$backend"

"$host" run "$src/tests/host/usage-windows.lua" "$work" 12 "$db" >"$work/run.out" \
    2>"$work/run.err" || { cat "$work/run.out" "$work/run.err" >&2; fail "usage-windows.lua"; }
cat "$work/run.out"
line=$(grep '^usage-windows: ok ' "$work/run.out") || fail "no ok line"
n=$(printf '%s\n' "$line" | cut -d' ' -f3)
[ "$n" = 72 ] || fail "$n usage transfers, expected 72 (3 tenants x 2 dimensions x 12 windows)"

"$host" ledger --db "$db" verify --wal "$work/wal" >"$work/verify.out" 2>&1
rc=$?
cat "$work/verify.out"
[ "$rc" -eq 0 ] || fail "verify --wal exit $rc"
grep -qx 'OK' "$work/verify.out" || fail "no OK"
echo "usage-windows.sh: ok"
