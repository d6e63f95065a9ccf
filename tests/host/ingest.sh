#!/bin/sh
# G-6.1 end to end: POST /v1/records on a real daemon (examples/daemon.lua with `ingest`;
# label host):
#
#   ingest.sh HOST SOURCE_DIR WORK_DIR
#
# The daemon runs on a fast injected clock (one 60-second window per real second, rollover
# every 200 ms), listens on 0.0.0.0 (ingest is why one listens publicly) and exports into
# the file ledger WORK_DIR/var/ledger. curl posts batches for two tenants with their own
# bearer tokens (configured as BLAKE3 digests, computed here with b3sum); every answer's
# "applied" count goes into expected.txt, so the ledger must hold exactly what the daemon
# said it accepted. Phases:
#   1. good batches (200), refused ones that must record nothing (401 no or unknown token,
#      403 another tenant's record, 400 unknown field / negative / fractional / exponent /
#      malformed, 415 content type, 413 over 1 MiB), an Idempotency-Key replay (200,
#      nothing twice); /metrics from a loopback peer (counters equal what was sent) and 403
#      from a non-loopback one; SIGTERM; `verify --totals` equals expected exactly.
#   2. a plane with capacity_rows = 50: a batch of 300 new keys is cut short with 429,
#      Retry-After and "applied" (only that prefix is expected); a keyed batch is resent
#      until it completes (each record exactly once); totals exact again.
. "$2/tests/host/lib.sh" && host_test ingest.sh "$@" || exit 1

T1=6f1c3c1e-2b7a-4d5e-9a43-0c8e5b1f7a21
T2=b2d4e6f8-1a3c-4e5f-8b7d-9c0e2f4a6b8d
TOK1=ingest-token-one.x
TOK2=ingest-token-two.y
# docs/ops/ingest.md: the daemon stores a token's BLAKE3 digest, never the token
H1=$(printf %s "$TOK1" | b3sum --no-names) && H2=$(printf %s "$TOK2" | b3sum --no-names) ||
    fail "b3sum"

r0=$(date +%s)
# conf FILE CAPACITY: the daemon's configuration (fast clock, public, ingest with both tokens)
conf() {
    fast_conf "$1" <<EOF
    listen = "0.0.0.0:0", capacity_rows = $2, shards = 4,
    ingest = { tokens = { ["$H1"] = "$T1", ["$H2"] = "$T2" }, log_every = 1 },
EOF
}
start_daemon() { # start_daemon CONFIG VAR LOG
    "$host" run "$src/examples/daemon.lua" --config "$1" --var "$2" >"$3" 2>&1 &
    pid=$!
    listening "$3" 10 || fail "the daemon did not start listening"
    url="$url/v1/records"
}

# gen TENANT FIRST COUNT DIM TAG: a batch body on stdout, one record per line on fd 3
# ("tenant dim value"), subjects TAG-<i mod 7> (or all distinct with TAG=new-*)
gen() {
    awk -v t="$1" -v first="$2" -v n="$3" -v dim="$4" -v tag="$5" 'BEGIN {
        printf "{\"records\":["
        for (i = first; i < first + n; i++) {
            s = (tag ~ /^new-/) ? tag "-" i : tag "-" (i % 7)
            v = (i * 37) % 5000 + 1
            printf "%s{\"tenant\":\"%s\",\"subject\":\"%s\",\"dimension\":\"%s\",\"value\":%d}",
                (i > first ? "," : ""), t, s, dim, v
            print t, dim, v > "/dev/fd/3"
        }
        printf "]}"
    }'
}
# post TOKEN BODYFILE [EXTRA CURL ARGS]: prints the status code; the answer is in resp.json
post() {
    tok=$1 body=$2; shift 2
    curl -s -o resp.json -w '%{http_code}' -H "Authorization: Bearer $tok" \
        -H 'Content-Type: application/json' --data-binary @"$body" "$@" "$url"
}
applied() { sed -n 's/.*"applied":\([0-9]*\).*/\1/p' resp.json; }
# accept RECORDS_FILE N: the first N records of the batch count
accept() { head -n "$2" "$1" >>expected.txt; }

totals() { # totals VAR: the ledger's per-stream sums equal expected.txt's
    awk '{ s[$1 " " $2] += $3 } END { for (k in s) print k, s[k] }' expected.txt |
        sort >want.txt
    "$host" verify --totals "$1/ledger" 2>/dev/null |
        awk '$1 == "total" { print $2, $3, $4 }' | sort >got.txt
    cmp -s want.txt got.txt
}

# ---- phase 1 ---------------------------------------------------------------------------
conf fast.lua 200000
: >expected.txt
start_daemon fast.lua var d1.log
grep -q "INFO ingest: POST http://0.0.0.0:$port/v1/records (2 token(s)" d1.log ||
    fail "no ingest line in the log"

i=0
for b in 1 2 3 4 5 6; do
    if [ $((b % 2)) -eq 1 ]; then t=$T1 tok=$TOK1; else t=$T2 tok=$TOK2; fi
    dim=bytes; [ $b -gt 4 ] && dim=requests
    gen $t $((b * 1000)) 150 $dim user >body.json 3>recs.txt
    code=$(post $tok body.json) || fail "curl batch $b"
    [ "$code" = 200 ] || fail "batch $b: HTTP $code: $(cat resp.json)"
    [ "$(applied)" = 150 ] || fail "batch $b: $(cat resp.json)"
    accept recs.txt 150
    i=$((i + 150))
done
# the same body with an Idempotency-Key twice: recorded once
gen $T1 9000 40 cpu_units user >body.json 3>recs.txt
code=$(post $TOK1 body.json -H 'Idempotency-Key: batch-9000')
[ "$code" = 200 ] && [ "$(applied)" = 40 ] || fail "keyed batch: $code $(cat resp.json)"
accept recs.txt 40
code=$(post $TOK1 body.json -H 'Idempotency-Key: batch-9000')
[ "$code" = 200 ] && grep -q '"skipped":40' resp.json || fail "keyed replay: $code $(cat resp.json)"

# refused: nothing recorded, each with its status and reason
refuse() { # refuse WANT_CODE REASON TOKEN BODYFILE [CURL ARGS]
    want=$1 reason=$2; shift 2
    code=$(post "$@")
    [ "$code" = "$want" ] || fail "expected $want ($reason), got $code: $(cat resp.json)"
    [ "$reason" = - ] || grep -q "\"reason\":\"$reason\"" resp.json ||
        fail "expected reason $reason: $(cat resp.json)"
}
gen $T1 1 3 bytes user >good.json 3>/dev/null
refuse 401 bad_token wrong-token good.json
code=$(curl -s -o resp.json -w '%{http_code}' -H 'Content-Type: application/json' \
    --data-binary @good.json "$url")
[ "$code" = 401 ] && grep -q no_token resp.json || fail "no token: $code"
refuse 403 forbidden_tenant $TOK2 good.json
refuse 415 content_type $TOK1 good.json -H 'Content-Type: text/plain'
sed 's/"value":\([0-9]*\)}\]}$/"value":\1,"unit":"B"}]}/' good.json >bad.json
refuse 400 unknown_field $TOK1 bad.json
for v in -5 2.5 1e3 9007199254740992 '"7"'; do
    sed "s/\"value\":[0-9]*}\]}\$/\"value\":$v}]}/" good.json >bad.json
    refuse 400 - $TOK1 bad.json
    grep -q '"field":"records\[2\].value"' resp.json || fail "value $v: $(cat resp.json)"
done
printf '{"records":[{"tenant":' >bad.json
refuse 400 malformed_json $TOK1 bad.json
head -c 1048577 /dev/zero | tr '\0' ' ' >big.json
refuse 413 - $TOK1 big.json
# exactly 1 MiB is fine (a good batch padded with whitespace)
{ cat good.json; head -c $((1048576 - $(wc -c <good.json))) /dev/zero | tr '\0' ' '; } >full.json
code=$(post $TOK1 full.json)
[ "$code" = 200 ] || fail "a 1 MiB body: $code $(cat resp.json)"
gen $T1 1 3 bytes user >/dev/null 3>recs.txt
accept recs.txt 3
i=$((i + 43))

# /metrics: loopback peers only (listen 0.0.0.0, metrics_public = false)
curl -s "http://127.0.0.1:$port/metrics" >metrics.txt || fail "GET /metrics"
grep -q "^accounting_ingest_records_total $i\$" metrics.txt ||
    fail "records_total: $(grep ingest_records metrics.txt), want $i"
for r in no_token:1 bad_token:1 forbidden_tenant:1 content_type:1 unknown_field:1 \
         bad_value:4 wrong_type:1 malformed_json:1 oversize:1; do
    grep -q "^accounting_ingest_rejected_total{reason=\"${r%:*}\"} ${r#*:}\$" metrics.txt ||
        fail "rejected ${r%:*}: $(grep "reason=\"${r%:*}\"" metrics.txt), want ${r#*:}"
done
grep -q '^accounting_ingest_skipped_records_total 40$' metrics.txt || fail "skipped"
# I-14: reject lines with tenant, dimension, reason; never a token or a subject
grep -q "WARN ingest: reject reason=forbidden_tenant status=403 tenant=$T2 dimension=bytes" d1.log ||
    fail "no sampled reject line for the 403"
grep -q -e "$TOK1" -e "$TOK2" -e "user-" d1.log && fail "a token or a subject in the log"
ip=$(ip -o -4 addr show scope global 2>/dev/null | awk '{ print $4 }' | cut -d/ -f1 | head -1)
if [ -n "$ip" ]; then
    code=$(curl -s -o /dev/null -w '%{http_code}' "http://$ip:$port/metrics")
    [ "$code" = 403 ] || fail "/metrics from $ip: $code, expected 403"
    code=$(curl -s -o /dev/null -w '%{http_code}' "http://$ip:$port/readyz")
    [ "$code" = 403 ] || fail "/readyz from $ip: $code, expected 403"
    url="http://$ip:$port/v1/records"
    gen $T2 7000 10 bytes user >body.json 3>recs.txt
    code=$(post $TOK2 body.json)
    [ "$code" = 200 ] || fail "ingest from $ip: $code $(cat resp.json)"
    accept recs.txt 10
    url="http://127.0.0.1:$port/v1/records"
    echo "ingest.sh: non-loopback peer $ip: /metrics 403, ingest 200"
else
    echo "ingest.sh: no non-loopback address here: the peer check is the spec's only"
fi

wait_for 60 totals var || { diff want.txt got.txt >&2; fail "ledger totals never matched"; }
kill -TERM $pid
wait $pid
rc=$?
[ $rc -eq 0 ] || fail "daemon exit $rc after SIGTERM"
"$host" verify var/ledger >verify.out 2>&1 || { cat verify.out >&2; fail "verify var/ledger"; }
totals var || fail "totals changed after shutdown"
echo "ingest.sh: phase 1 OK: $(wc -l <expected.txt) records accepted, ledger totals exact:"
cat got.txt

# ---- phase 2: a full plane -------------------------------------------------------------
conf small.lua 50
: >expected.txt
start_daemon small.lua var2 d2.log
gen $T1 1 300 bytes new-x >body.json 3>recs.txt
code=$(post $TOK1 body.json -D headers.txt)
xcode=$code
case $code in
429)
    grep -qi '^retry-after: [1-9][0-9]*' headers.txt || fail "429 without Retry-After"
    grep -q '"error":"CapacityExceeded"' resp.json || fail "429: $(cat resp.json)" ;;
200) echo "ingest.sh: note: the 300-key batch fit (a window passed mid-batch)" ;;
*) fail "full plane: HTTP $code $(cat resp.json)" ;;
esac
ax=$(applied)
[ -n "$ax" ] && [ "$ax" -le 300 ] || fail "no applied count: $(cat resp.json)"
accept recs.txt "$ax" # only what the daemon says it recorded: never resent
echo "ingest.sh: 300 new keys into capacity_rows = 50: HTTP $code, applied $ax," \
     "$(grep -i '^retry-after' headers.txt | tr -d '\r')"
# a keyed batch resent until complete: each record exactly once
gen $T2 1 300 bytes new-y >bodyy.json 3>recsy.txt
tries=0
while :; do
    code=$(post $TOK2 bodyy.json -H 'Idempotency-Key: y-1')
    tries=$((tries + 1))
    [ "$code" = 200 ] && break
    [ "$code" = 429 ] || fail "keyed resend: HTTP $code $(cat resp.json)"
    [ $tries -lt 100 ] || fail "the keyed batch never completed: $(cat resp.json)"
    sleep 0.3
done
grep -q '"applied":300' resp.json || fail "keyed batch: $(cat resp.json)"
accept recsy.txt 300
echo "ingest.sh: keyed 300-key batch complete after $tries attempt(s): $(cat resp.json)"
wait_for 60 totals var2 || { diff want.txt got.txt >&2; fail "phase 2 totals never matched"; }
curl -s "http://127.0.0.1:$port/metrics" >metrics2.txt
kill -TERM $pid
wait $pid
rc=$?
[ $rc -eq 0 ] || fail "daemon exit $rc after SIGTERM (phase 2)"
totals var2 || fail "phase 2 totals changed after shutdown"
if [ "$xcode" = 429 ] || [ $tries -gt 1 ]; then
    grep -q '^accounting_ingest_rejected_total{reason="capacity"} [1-9]' metrics2.txt ||
        fail "capacity rejects not counted: $(grep 'reason="capacity"' metrics2.txt)"
fi
echo "ingest.sh: OK: phase 2 totals exact:"
cat got.txt
