#!/bin/sh
# A graceful stop under load leaves no pending saga (issue 27; docs/ops/run.md "Verify"):
# the whole product on the fast clock (one 60 s window per second) with --demo 20000, so
# the rater commits every second; SIGTERM at a fixed schedule of moments (ROUNDS rounds,
# each on a fresh state directory), then `verify DIR` at once, without a restart: exit 0,
# no pending saga, and the log says the drain finished each ledger's commits.
#
#   stop-drain.sh HOST SOURCE_DIR WORK_DIR [ROUNDS]
. "$2/tests/host/lib.sh" && host_test stop-drain.sh "$@" || exit 1
rounds=${4:-4}
HOST_TEST_LOGS="verify*.out"
pid=
fast_product_conf fast.lua
i=1
while [ "$i" -le "$rounds" ]; do
    "$host" run "$src/examples/daemon.lua" --config fast.lua --var "var$i" --demo 20000 \
        >"demo$i.log" 2>&1 &
    pid=$!
    wait_line "demo$i.log" "INFO demo: 3 tenants with prepaid wallets" 60 \
        "round $i: the demo's wallets funded"
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
