#!/bin/sh
# A graceful stop under load leaves no pending saga (issue 27; docs/ops/run.md "Verify"):
# the whole product on the fast clock (one 60 s window per second) with --demo 20000, so
# the rater commits every second; SIGTERM at a fixed schedule of moments (ROUNDS rounds,
# each on a fresh state directory), then `verify DIR` at once, without a restart: exit 0,
# no pending saga, and the log says the drain finished each ledger's commits.
#
#   stop-drain.sh HOST SOURCE_DIR WORK_DIR [ROUNDS]
set -u
host=$1 src=$2 work=$3 rounds=${4:-4}
. "$src/tests/host/daemon-lib.sh" # fast_product_conf
rm -rf "$work" && mkdir -p "$work" || exit 1
cd "$work" || exit 1
pid=
fail() {
    echo "stop-drain.sh: FAILED: $*" >&2
    for f in "$work"/demo*.log "$work"/verify*.out; do
        [ -f "$f" ] && { echo "--- $f" >&2; tail -15 "$f" >&2; }
    done
    [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
    exit 1
}
fast_product_conf fast.lua
i=1
while [ "$i" -le "$rounds" ]; do
    "$host" run "$src/examples/daemon.lua" --config fast.lua --var "var$i" --demo 20000 \
        >"demo$i.log" 2>&1 &
    pid=$!
    n=0
    until grep -q "INFO demo: 3 tenants with prepaid wallets" "demo$i.log"; do
        n=$((n + 1)); [ $n -le 300 ] || fail "round $i: the demo's wallets were never funded"
        kill -0 "$pid" 2>/dev/null || fail "round $i: the daemon ended early"
        sleep 0.2
    done
    # the moments: 2.0, 2.7, 3.4, ... s into the load (the rater commits every second)
    sleep "$((2 + (i - 1) * 7 / 10)).$(((i - 1) * 7 % 10))"
    kill -TERM "$pid"
    wait "$pid"
    rc=$?
    pid=
    [ $rc -eq 0 ] || fail "round $i: exit $rc on SIGTERM"
    grep -q "ERROR" "demo$i.log" && fail "round $i: an ERROR in the log"
    for l in exporter wallet; do
        grep -q "INFO stop: the $l ledger's commits all finished (no pending saga)" \
            "demo$i.log" || fail "round $i: the stop did not say the $l ledger drained"
    done
    "$host" verify "var$i" >"verify$i.out" 2>&1
    rc=$?
    grep -q "pending" "verify$i.out" && fail "round $i: verify names a pending saga"
    [ $rc -eq 0 ] || fail "round $i: verify var$i: exit $rc"
    echo "stop-drain.sh: round $i: stopped under load, verify OK"
    i=$((i + 1))
done
echo "stop-drain.sh: OK ($rounds rounds)"
