#!/bin/sh
# Issue 16's target as a test (AUD-I-21, AUD-I-18; no timing asserted): every refusal of
# POST /v1/records is exactly one `reject` record in the trail, or counted in a gap record.
#
#   ingest-audit.sh HOST SOURCE_DIR WORK_DIR
#
# A plan of N requests drawn with a printed seed (SEED in the environment replaces it):
# no token (401), another tenant's records (403, 1..50 records each), an unknown dimension
# in the last record (400), a wrong Content-Type (415), new subjects on a full plane
# (capacity_rows = 4: 429), and good batches. One curl sends them all in order on one
# connection. Daemon 1 (audit = { shards = 2 }): the trail, both chains verified by `audit
# verify --list`, holds exactly one reject record of source ingest per refused request,
# per reason equal to the codes curl got and to accounting_ingest_rejected_total (a
# request of 50 refused records is ONE refusal: ingest is all or nothing, one record),
# and no gap. Daemon 2 (audit = { queue_cap = 1, batch = 1 }), the plan sent by 8 parallel
# connections: the queue sheds or not, but reject records + the refusals its gap records
# say they dropped (their `kinds`: "reject.ingest:N", beside any other kind shed meanwhile,
# e.g. a readiness change, all adding up to `dropped`) equal the refusals counted, and verify
# passes.
. "$2/tests/host/lib.sh" && host_test ingest-audit.sh "$@" || exit 1

SEED=${SEED:-16}
N=${N:-400}
echo "ingest-audit.sh: seed $SEED, $N requests"
T1=6f1c3c1e-2b7a-4d5e-9a43-0c8e5b1f7a21
T2=b2d4e6f8-1a3c-4e5f-8b7d-9c0e2f4a6b8d
TOK=ingest-audit-token
H1=$(printf %s "$TOK" | b3sum --no-names) || fail "b3sum"

# the plan: one body file and one curl config block per request; plan.txt: the kinds
mkdir -p bodies
awk -v seed="$SEED" -v n="$N" -v t1="$T1" -v t2="$T2" -v tok="$TOK" '
function rec(t, s, d, v) { return sprintf("{\"tenant\":\"%s\",\"subject\":\"%s\",\"dimension\":\"%s\",\"value\":%d}", t, s, d, v) }
BEGIN {
    srand(seed); fresh = 0
    for (i = 1; i <= n; i++) {
        r = int(rand() * 6); k = 1 + int(rand() * 50); b = ""; ct = "application/json"
        auth = "Bearer " tok
        if (r == 0) { kind = "no_token"; auth = ""; b = rec(t1, "u", "bytes", 1) }
        else if (r == 1) { kind = "forbidden_tenant"
            for (j = 1; j <= k; j++) b = b (j > 1 ? "," : "") rec(t2, "u" j, "bytes", j) }
        else if (r == 2) { kind = "unknown_dimension"
            for (j = 1; j < k; j++) b = b rec(t1, "u", "bytes", j) ","
            b = b rec(t1, "u", "no_such_dimension", 1) }
        else if (r == 3) { kind = "content_type"; ct = "text/plain"; b = rec(t1, "u", "bytes", 1) }
        else if (r == 4) { kind = "new_subjects"
            for (j = 1; j <= k; j++) b = b (j > 1 ? "," : "") rec(t1, "fresh" (++fresh), "requests", 1) }
        else { kind = "good"; b = rec(t1, "u", "bytes", 1) }
        f = sprintf("bodies/%d.json", i)
        printf "{\"records\":[%s]}", b > f
        close(f)
        if (kind == "good" || kind == "no_token" || kind == "content_type") k = 1
        print kind, k > "plan.txt"
        printf "url = \"URL\"\n" > "curl.cfg"
        if (auth != "") printf "header = \"Authorization: %s\"\n", auth > "curl.cfg"
        printf "header = \"Content-Type: %s\"\ndata-binary = \"@%s\"\noutput = \"/dev/null\"\n", ct, f > "curl.cfg"
        printf "write-out = \"%%{http_code}\\n\"\n" > "curl.cfg"
        if (i < n) print "next" > "curl.cfg"
    }
}' || fail "the plan"

start_daemon() { # start_daemon NAME AUDIT
    cat >"$1.lua" <<EOF
return { listen = "127.0.0.1:0", status_interval_s = 0, capacity_rows = 4,
         drain_deadline_ms = 30000,
         ingest = { tokens = { ["$H1"] = "$T1" }, log_every = 100000 },
         audit = $2 }
EOF
    "$host" run "$src/examples/daemon.lua" --config "$1.lua" --var "$1" >"$1.log" 2>&1 &
    pid=$!
    listening "$1.log" 10 || fail "$1: the daemon did not start listening"
    sed "s|URL|http://127.0.0.1:$port/v1/records|" curl.cfg >"$1.cfg"
}
stop_daemon() {
    kill -TERM $pid
    wait $pid
    rc=$?
    [ $rc -eq 0 ] || fail "daemon exit $rc after SIGTERM"
}
metric() { sed -n "s/^accounting_ingest_rejected_total{reason=\"$1\"} \([0-9]*\)$/\1/p" "$2"; }
refused_total() { awk '/^accounting_ingest_rejected_total\{/ { s += $NF } END { print s + 0 }' "$1"; }
verify_all() { # verify_all NAME: every chain verified, their lists concatenated in NAME.list
    : >"$1.list"
    for d in "$1/audit" "$1"/audit/daemon.*; do
        [ -d "$d" ] || continue
        "$host" audit verify --list "$d" >>"$1.list" 2>&1 || fail "$1: audit verify $d"
    done
    [ "$(grep -c '^OK: ' "$1.list")" -ge 1 ] || fail "$1: no OK line"
}

# ---- daemon 1: in order, nothing shed: one record per refused request ------------------
start_daemon d1 "{ shards = 2 }"
curl -s -K d1.cfg >codes.txt || fail "curl"
[ "$(wc -l <codes.txt)" -eq "$N" ] || fail "curl answered $(wc -l <codes.txt) of $N"
curl -s "http://127.0.0.1:$port/metrics" >d1.metrics
stop_daemon
verify_all d1
[ -d d1/audit/daemon.1 ] || fail "two chains expected (d1/audit/daemon.1)"
paste plan.txt codes.txt >outcome.txt
refused=$(awk '$3 != 200' outcome.txt | wc -l)
[ "$refused" -gt 0 ] || fail "nothing refused"
[ "$(refused_total d1.metrics)" -eq "$refused" ] ||
    fail "the endpoint counted $(refused_total d1.metrics) refusals, curl got $refused"
trail=$(grep -c '^record [0-9]* reject .*source="ingest"' d1.list)
[ "$trail" -eq "$refused" ] || fail "$trail reject records for $refused refused requests"
[ "$(grep -c '^record [0-9]* gap ' d1.list)" -eq 0 ] || fail "a gap record in d1"
# per reason: the trail, the metric and what curl got agree
for pair in no_token:401 forbidden_tenant:403 content_type:415 capacity:429; do
    reason=${pair%:*} code=${pair#*:}
    got=$(awk -v c="$code" '$3 == c' outcome.txt | wc -l)
    [ "$(metric "$reason" d1.metrics)" -eq "$got" ] || fail "$reason: metric vs $got x $code"
    [ "$(grep -c "^record [0-9]* reject .*reason=\"$reason\" .*source=\"ingest\"" d1.list)" \
        -eq "$got" ] || fail "$reason: reject records vs $got x $code"
done
# every refused kind got its refusal (the plan's 400s are the unknown dimensions)
[ "$(awk '$1 == "unknown_dimension" && $3 != 400' outcome.txt | wc -l)" -eq 0 ] ||
    fail "an unknown dimension not answered 400"
[ "$(awk '$1 == "forbidden_tenant" && $3 != 403' outcome.txt | wc -l)" -eq 0 ] ||
    fail "another tenant's records not answered 403"
bad400=$(awk '$3 == 400' outcome.txt | wc -l)
[ "$(metric unknown_dimension d1.metrics)" -eq "$bad400" ] || fail "unknown_dimension metric"
[ "$(grep -c '^record [0-9]* reject .*reason="unknown_dimension" source="ingest" status=400' \
    d1.list)" -eq "$bad400" ] || fail "the unknown_dimension reject records ($bad400)"
[ "$(awk '$3 == 429' outcome.txt | wc -l)" -gt 0 ] || fail "no capacity refusal (seed $SEED)"
# `records`: a refused request of K records is one reject record saying K (another
# tenant's: all of them), and on a full plane the records not recorded: with what the
# metric says was recorded, they add up to the records sent
sum_attr() { # sum_attr REASON: the sum of `records` over that reason's reject records
    grep "^record [0-9]* reject .*reason=\"$1\" " d1.list |
        sed -n 's/.* records=\([0-9]*\) .*/\1/p' | awk '{ s += $1 } END { print s + 0 }'; }
[ "$(sum_attr forbidden_tenant)" -eq "$(awk '$1 == "forbidden_tenant" { s += $2 }
    END { print s + 0 }' outcome.txt)" ] || fail "forbidden_tenant: records attributes"
recorded=$(sed -n 's/^accounting_ingest_records_total \([0-9]*\)$/\1/p' d1.metrics)
sent=$(awk '$1 == "good" || $1 == "new_subjects" { s += $2 } END { print s + 0 }' outcome.txt)
[ $((recorded + $(sum_attr capacity))) -eq "$sent" ] ||
    fail "$recorded recorded + $(sum_attr capacity) refused (records=) != $sent sent"
# the events are numbered once over both chains: n is unique
dup=$(sed -n 's/^record [0-9]* [a-z.]* .* n=\([0-9]*\) .*/\1/p' d1.list | sort | uniq -d |
      wc -l)
[ "$dup" -eq 0 ] || fail "$dup event numbers in two records"

# ---- daemon 2: a queue of one, parallel connections: shed, but counted exactly ---------
start_daemon d2 "{ queue_cap = 1, batch = 1 }"
curl -s --no-progress-meter --parallel --parallel-max 8 -K d2.cfg >codes2.txt || fail "curl (parallel)"
curl -s "http://127.0.0.1:$port/metrics" >d2.metrics
stop_daemon
verify_all d2
refused2=$(refused_total d2.metrics)
[ "$refused2" -eq "$(awk '$1 != 200' codes2.txt | wc -l)" ] || fail "d2: metric vs curl"
trail2=$(grep -c '^record [0-9]* reject .*source="ingest"' d2.list)
gaps_all=$(sed -n 's/^record [0-9]* gap .*dropped=\([0-9]*\).*/\1/p' d2.list |
           awk '{ s += $1 } END { print s + 0 }')
# a gap record names what it dropped (kinds="reject.ingest:N,readiness:M,..."): another kind
# shed beside the refusals (a readiness change, an HTTP-level reject) is not one of them
kinds2=$(sed -n 's/^record [0-9]* gap .*kinds="\([^"]*\)".*/\1/p' d2.list | tr ',' '\n')
gaps2=$(printf '%s\n' "$kinds2" | awk -F: '$1 == "reject.ingest" { s += $2 } END { print s + 0 }')
[ "$(printf '%s\n' "$kinds2" | awk -F: '{ s += $2 } END { print s + 0 }')" -eq "$gaps_all" ] ||
    fail "d2: the gap records' kinds do not add up to their dropped ($gaps_all)"
[ $((trail2 + gaps2)) -eq "$refused2" ] ||
    fail "d2: $trail2 reject records + $gaps2 shed in gap records != $refused2 refused"
if [ "$gaps2" -gt 0 ]; then
    grep -q '^record [0-9]* gap .*reason="audit_backpressure"' d2.list ||
        fail "d2: the gap records' reason"
fi
echo "ingest-audit.sh: ok (seed $SEED: $refused of $N refused, $trail reject records;" \
     "a queue of one: $trail2 records + $gaps2 shed = $refused2)"
