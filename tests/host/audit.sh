#!/bin/sh
# Issue 16 phase 2 end to end (AUD-I-21): a real daemon with the audit trail configured
# (examples/daemon.lua with `ingest` and `audit`; label host):
#
#   audit.sh HOST SOURCE_DIR WORK_DIR
#
# A checkpoint key pair from `audit keygen`; the daemon on a fast injected clock with
# audit = { key_path, checkpoint_every = 4 }. curl sends refused requests (3 without a
# token, 2 with an unknown one, 1 with a wrong Content-Type, 1 with another tenant's
# record) and one good batch; /metrics has the audit families; an accept-loss on a stream
# that is not stuck is refused (404) and still an audit record (an operator action). After
# SIGTERM (exit 0): `audit verify --list --vkey` passes and lists exactly those rejects
# with {tenant, dimension, reason}, the operator record and the daemon's start and stop,
# every checkpoint signed. A second start continues the same chain (seq goes on, verify
# passes again). --check refuses amnesia with a dir (exit 2).
. "$2/tests/host/lib.sh" && host_test audit.sh "$@" || exit 1
HOST_TEST_LOGS="list.txt"

T1=6f1c3c1e-2b7a-4d5e-9a43-0c8e5b1f7a21
T2=b2d4e6f8-1a3c-4e5f-8b7d-9c0e2f4a6b8d
TOK1=audit-token-one.x
H1=$(printf %s "$TOK1" | b3sum --no-names) || fail "b3sum"

"$host" audit keygen ron-audit/node-7/daemon signer.key verifier.pub || fail "keygen"

r0=$(date +%s)
fast_conf fast.lua <<EOF
    capacity_rows = 10000, shards = 4,
    ingest = { tokens = { ["$H1"] = "$T1" }, log_every = 1000 },
    audit = { key_path = "signer.key", checkpoint_every = 4, writer_id = "node-7" },
EOF

start_daemon() { # start_daemon LOG
    "$host" run "$src/examples/daemon.lua" --config fast.lua --var var >"$1" 2>&1 &
    pid=$!
    listening "$1" 10 || fail "the daemon did not start listening"
    url="http://127.0.0.1:$port/v1/records"
}
stop_daemon() {
    kill -TERM $pid
    wait $pid
    rc=$?
    [ $rc -eq 0 ] || fail "daemon exit $rc after SIGTERM"
}
post() { # post TOKEN CONTENT-TYPE BODY: prints the status code
    curl -s -o resp.json -w '%{http_code}' ${1:+-H "Authorization: Bearer $1"} \
        -H "Content-Type: $2" --data-binary "$3" "$url"
}
rec() { printf '{"records":[{"tenant":"%s","subject":"u","dimension":"%s","value":%s}]}' "$@"; }

start_daemon d1.log
grep -q "INFO audit trail var/audit (node-7/daemon, checkpoints every 4 records" d1.log ||
    fail "no audit line in the log"
grep -q "INFO audit trail opened empty" d1.log || fail "run 1: how the open went"
for i in 1 2 3; do
    [ "$(post "" application/json "$(rec $T1 bytes 1)")" = 401 ] || fail "no token $i"
done
for i in 1 2; do
    [ "$(post wrong-token application/json "$(rec $T1 bytes 1)")" = 401 ] || fail "bad token"
done
[ "$(post $TOK1 text/plain "$(rec $T1 bytes 1)")" = 415 ] || fail "content type"
[ "$(post $TOK1 application/json "$(rec $T2 requests 1)")" = 403 ] || fail "forbidden"
[ "$(post $TOK1 application/json "$(rec $T1 bytes 5)")" = 200 ] || fail "good batch"
code=$(curl -s -o loss.json -w '%{http_code}' -H 'Content-Type: application/json' \
    --data-binary "{\"tenant\":\"$T1\",\"dimension\":\"bytes\",\"reason\":\"test\"}" \
    "http://127.0.0.1:$port/v1/admin/streams/accept-loss")
[ "$code" = 404 ] || fail "accept-loss on a stream that is not stuck: $code $(cat loss.json)"
# the sink worker makes them durable within its interval
n=50
while [ $n -gt 0 ]; do
    curl -s "http://127.0.0.1:$port/metrics" >metrics.txt
    grep -q '^audit_durable_seq \(9\|1[0-9]\)$' metrics.txt && break
    sleep 0.1; n=$((n - 1))
done
[ $n -gt 0 ] || fail "audit_durable_seq did not reach 9: $(grep '^audit_' metrics.txt)"
grep -q '^audit_drop_total{reason="audit_backpressure"} 0$' metrics.txt || fail "drop metric"
grep -q '^audit_io_timeouts_total{op="wal"} 0$' metrics.txt || fail "io timeouts metric"
stop_daemon

"$host" audit verify --list --vkey verifier.pub var/audit >list.txt 2>&1 || fail "verify"
grep -q '^OK: ' list.txt || fail "no OK line"
cnt() { grep -c "$1" list.txt; }
[ "$(cnt 'reject.*reason="no_token".*source="ingest".*status=401.*tenant="-"')" = 3 ] ||
    fail "3 no_token rejects"
[ "$(cnt 'reason="bad_token"')" = 2 ] || fail "2 bad_token rejects"
[ "$(cnt "dimension=\"-\" n=[0-9]* reason=\"content_type\" source=\"ingest\" status=415 tenant=\"$T1\"")" = 1 ] ||
    fail "the content_type reject with its tenant"
[ "$(cnt "dimension=\"requests\" n=[0-9]* reason=\"forbidden_tenant\" records=1 source=\"ingest\" status=403 tenant=\"$T1\"")" = 1 ] ||
    fail "the forbidden_tenant reject with tenant and dimension"
[ "$(cnt "^record [0-9]* operator .*action=\"accept_loss\".*outcome=\"NotFound\".*peer=\"127.0.0.1\".*tenant=\"$T1\"")" = 1 ] ||
    fail "the refused accept-loss as an operator record"
[ "$(cnt '^record [0-9]* daemon .*event="start"')" = 1 ] || fail "a start record"
[ "$(cnt '^record [0-9]* daemon .*event="stop"')" = 1 ] || fail "a stop record"
[ "$(cnt '^record [0-9]* gap ')" = 0 ] || fail "nothing was shed"
n1=$(grep -c '^record ' list.txt)
ls var/audit/cp-*.note >/dev/null 2>&1 || fail "no checkpoint note"

# a second run continues the chain, from the head file (AUD-I-37); the log says so
start_daemon d2.log
grep -q "INFO audit trail opened from its head file ([0-9]* records hashed, [0-9]* decoded)" d2.log ||
    fail "run 2: the open did not say it used the head file: $(grep 'audit trail' d2.log)"
[ "$(post "" application/json "$(rec $T1 bytes 1)")" = 401 ] || fail "no token (run 2)"
stop_daemon
"$host" audit verify --list --vkey verifier.pub var/audit >list.txt 2>&1 || fail "verify 2"
n2=$(grep -c '^record ' list.txt)
# start, (readiness), the reject, stop
[ "$n2" -ge $((n1 + 3)) ] || fail "run 2: at least $n1 + 3 records expected, got $n2"
[ "$(cnt 'reason="no_token"')" = 4 ] || fail "run 2: the fourth no_token reject"
[ "$(cnt '^record [0-9]* daemon .*event="start"')" = 2 ] || fail "run 2: its start record"

# --check refuses what the audit trail would refuse at open (AUD-I-13)
cat >amnesia.lua <<EOF
return { audit = { amnesia = true, dir = "x" } }
EOF
"$host" run "$src/examples/daemon.lua" --config amnesia.lua --check >check.log 2>&1
rc=$?
[ $rc -eq 2 ] || fail "--check with amnesia and dir: exit $rc"
grep -q "amnesia = true forbids dir" check.log || fail "the amnesia message"
echo "audit.sh: ok ($n2 records, every reject audited, chain continued across restarts)"
