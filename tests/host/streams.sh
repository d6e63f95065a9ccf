#!/bin/sh
# A stuck stream and the operator's remedy, end to end (issue 14 item 1; label host):
#
#   streams.sh HOST SOURCE_DIR WORK_DIR
#
# A real daemon (fast clock, file ledger) exports a tenant's slices; the ledger is then
# restored from an older copy (a backup), so the daemon's next slice is a gap the ledger
# can never fill. Checks: the stream is stuck (`streams stuck`, /readyz 503 naming it, the
# accounting_streams_stuck gauge, one STUCK log line with the remedy); `streams
# accept-loss` gives up exactly the seqs the restore lost (the JSON answer, the log line);
# the stream goes on, /readyz is 200 again; `verify --totals` lists the accepted range and
# passes, and the ledger's total is what was recorded minus the usage of the lost seqs.
# Also: a stream that is not stuck (404, exit 1), a bad command line (exit 2).
. "$2/tests/host/lib.sh" && host_test streams.sh "$@" || exit 1
HOST_TEST_LOGS="*.out"

r0=$(date +%s)
cat >fast.lua <<EOF
local cfg = dofile("$src/tests/host/fast_clock.lua")($r0)
cfg.op_budget_ms = 300
cfg.backoff = { base_ms = 20, cap_ms = 50 }
return cfg
EOF
T=6f1c3c1e-2b7a-4d5e-9a43-0c8e5b1f7a21
start_daemon() {
    "$host" run "$src/examples/daemon.lua" --config fast.lua --var var >"$1" 2>&1 &
    pid=$!
    listening "$1" || fail "no 'listening on' in $1"
}
stop_daemon() {
    kill -TERM "$pid"
    wait "$pid" || fail "daemon exit $? after SIGTERM"
}
# record N: N windows of usage for tenant T, one record of 10 bytes per window
record() {
    i=0
    while [ "$i" -lt "$1" ]; do
        echo "$T user-1 bytes 10" |
            "$host" run "$src/examples/record.lua" --config fast.lua --var var - >>record.log 2>&1 ||
            fail "record.lua"
        sleep 1.1 # the next window (one per real second)
        i=$((i + 1))
    done
}
ledger_total() { "$host" verify --totals var/ledger 2>/dev/null | awk '$1 == "total" { print $4 }'; }
head_seq() { "$host" verify --totals var/ledger 2>/dev/null |
    sed -n 's/.*total .* (\([0-9]*\) slices.*/\1/p'; }

# ---- three slices land; a copy of the ledger is kept (the "backup") ----------------------
# (the landing waits are 60 s: alone a slice lands within ~2 s, but beside make test's
# heaviest tests the first three once took just over 20 s to land, all 30 units of them)
start_daemon d1.log
record 3
wait_for 60 test "$(ledger_total)" = 30 || fail "the first 3 slices never landed ($(ledger_total))"
stop_daemon
cp -a var/ledger ledger.backup || fail "cp"
# ---- two more land; then the ledger is restored from the backup: seqs 4, 5 are lost -----
start_daemon d2.log
record 2
wait_for 60 test "$(ledger_total)" = 50 || fail "slices 4, 5 never landed ($(ledger_total))"
stop_daemon
rm -rf var/ledger && mv ledger.backup var/ledger || fail "restore"
[ "$(ledger_total)" = 30 ] || fail "the restored ledger totals $(ledger_total), expected 30"

# ---- the next slice (seq 6) is a gap the ledger cannot fill: stuck ----------------------
start_daemon d3.log
record 1
stuck() { "$host" streams --url "$url" stuck >stuck.out 2>&1 && grep -q '"reason":"gap"' stuck.out; }
wait_for 20 stuck || fail "the stream never showed as stuck: $(cat stuck.out)"
grep -q "\"tenant\":\"$T\"" stuck.out && grep -q '"seq":6' stuck.out ||
    fail "stuck lists: $(cat stuck.out)"
code=$(curl -s -o readyz.out -w '%{http_code}' "$url/readyz")
[ "$code" = 503 ] && grep -q "1 stream stuck: $T/bytes at seq 6 (gap)" readyz.out ||
    fail "/readyz $code: $(cat readyz.out)"
curl -s "$url/metrics" | grep -q '^accounting_streams_stuck 1$' || fail "no stuck gauge"
[ "$(grep -c 'STUCK: stream' d3.log)" = 1 ] || fail "expected one STUCK line"
grep -q "ron-accounting streams accept-loss" d3.log || fail "the STUCK line names no remedy"

# ---- refusals -----------------------------------------------------------------------
"$host" streams --url "$url" accept-loss 3e9a1b5c-7d2f-4a6e-b1c8-5f0d3e7a9b24 bytes \
    >nostuck.out 2>nostuck.err
[ $? -eq 1 ] && grep -q '"error":"NotFound"' nostuck.out && grep -q "answered 404" nostuck.err ||
    fail "accept-loss of a stream that is not stuck: $(cat nostuck.out nostuck.err)"
"$host" streams --url "$url" accept-loss "$T" 'by"tes' >bad.out 2>&1
[ $? -eq 2 ] || fail "a quote in DIMENSION: expected exit 2"
"$host" streams --url "$url" frobnicate >bad.out 2>&1
[ $? -eq 2 ] || fail "an unknown subcommand: expected exit 2"

# ---- the operator accepts the loss: seqs 4..5 ------------------------------------------
"$host" streams --url "$url" accept-loss "$T" bytes --reason "ledger restored from backup" \
    >accept.out 2>accept.err || fail "accept-loss: $(cat accept.out accept.err)"
grep -q '"from":4' accept.out && grep -q '"to":5' accept.out && grep -q '"slices":2' accept.out ||
    fail "accept-loss answered: $(cat accept.out)"
grep -q "LOSS ACCEPTED: stream $T/bytes: seqs 4..5 (2 slices) given up by the operator (ledger restored from backup)" d3.log ||
    fail "no LOSS ACCEPTED line"
ready() { [ "$(curl -s "$url/readyz")" = ready ]; }
wait_for 20 ready || fail "/readyz never came back: $(curl -s "$url/readyz")"
wait_for 60 test "$(ledger_total)" = 40 || fail "slice 6 never landed ($(ledger_total))"
grep -q "advances again" d3.log || fail "no 'advances again' line"
curl -s "$url/metrics" >metrics.out
grep -q '^accounting_losses_accepted_total 1$' metrics.out &&
    grep -q '^accounting_lost_slices_total 2$' metrics.out &&
    grep -q '^accounting_streams_stuck 0$' metrics.out || fail "metrics after the accepted loss"
stop_daemon
"$host" verify --totals var/ledger >verify.out 2>&1 || fail "verify: $(cat verify.out)"
grep -q "LOSS ACCEPTED .*: seqs 4..5 given up by the operator at [0-9]* UTC s: ledger restored from backup" verify.out &&
    grep -q "accepted losses 2 seqs" verify.out && grep -q "^OK" verify.out ||
    fail "verify: $(cat verify.out)"
[ "$(head_seq)" = 4 ] || fail "the ledger holds $(head_seq) slices, expected 4 (1, 2, 3, 6)"
echo "streams.sh: OK (stuck at seq 6, seqs 4..5 accepted as lost, the stream went on)"
