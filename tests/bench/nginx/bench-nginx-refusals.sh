#!/bin/sh
# The nginx path of issue 16's target (AUD-I-35), end to end: nginx workers refuse records
# (requests without a tenant: counted as `invalid` in the plane, answered as usual) ->
# the plane's refusal ring -> the sidecar's reader -> its audit trail:
#
#   bench-nginx-refusals.sh NGINX HOST SOURCE_DIR WORK_DIR LIBRONACCT [--seconds S]
#       [--out RESULTS.jsonl]
#
# Two runs in the same invocation, each a fresh nginx (Lua path, 2 workers) and sidecar
# (tests/nginx/lib.sh: fast injected clock): the sidecar without `audit` (the baseline)
# and with `audit = {}`. wrk -t1 -c16 GET /hello without X-Tenant-Id for S seconds (5).
# Figures: refusals/s (requests/s: each request is one refused record), p50/p99, and with
# the trail, after nginx quit and the sidecar stopped (its reader reads the ring once more
# at stop): `audit verify` passes, the `reject` records of source plane, the `lost` count
# (what the 1024-entry ring overwrote before the reader came: `reject` records with
# reason lost and their `count`) and the trail's shed (gap records' `dropped`); their sum
# must equal the plane's accounting_rejected_total{reason="invalid"}. A BENCH {json} line
# per run (stdout and --out). Not a test: a bench, run with its own nginx on loopback.
set -u
NGX=$1 HOST=$2 SRC=$3 WORK0=$4 LIB=$5
shift 5
S=5 OUT=""
while [ $# -gt 0 ]; do
    case $1 in
        --seconds) S=$2; shift ;;
        --out) OUT=$2; shift ;;
        *) echo "bench-nginx-refusals: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
LIB=$(readlink -f "$LIB") SRC=$(readlink -f "$SRC") HOST=$(readlink -f "$HOST")
[ -n "$OUT" ] && { touch "$OUT"; OUT=$(readlink -f "$OUT"); }
NAME="bench-nginx-refusals"
MODULE=""
. "$SRC/tests/nginx/lib.sh"
trap cleanup EXIT
trap 'exit 1' INT TERM

bench() { echo "BENCH $1"; [ -z "$OUT" ] || echo "BENCH $1" >>"$OUT"; }
wrkfield() { sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p" "$2"; }

base=""
for mode in off on; do
    WORK="$WORK0/$mode"
    setup lua
    [ $mode = on ] && sed -i 's|^    listen = false,|    audit = {}, listen = false,|' gateway.lua
    start_sidecar sidecar1.log
    start_nginx
    # one WRK {json} line with p50/p99 (the ingest bench's script in its get mode: a plain
    # GET of the URL, without a tenant)
    INGEST_TOKEN=x INGEST_TENANT=x INGEST_MODE=get wrk -t1 -c16 -d"${S}s" \
        -s "$SRC/tests/bench/wrk-ingest.lua" "$BASE/hello" >wrk.txt 2>&1 || fail "wrk"
    grep '^WRK ' wrk.txt | sed 's/^WRK //' >wrk.json
    [ -s wrk.json ] || { cat wrk.txt >&2; fail "no wrk summary"; }
    sleep 0.5 # the log phases of the last requests
    inv=$(metric 'accounting_rejected_total{reason="invalid"}')
    load=$(cut -d' ' -f1 /proc/loadavg)
    stop_nginx
    sleep 0.5
    stop_sidecar
    req=$(wrkfield requests wrk.json)
    us=$(wrkfield duration_us wrk.json)
    rps=$(awk -v r="$req" -v u="$us" 'BEGIN { printf "%.0f", r / (u / 1e6) }')
    [ "$inv" -ge "$req" ] || fail "the plane counted $inv invalid, wrk sent $req"
    pr=0 lost=0 gaps=0
    if [ $mode = on ]; then
        "$HOST" audit verify --list var/audit >audit.txt 2>&1 ||
            { tail -5 audit.txt >&2; fail "audit verify"; }
        pr=$(grep -c '^record [0-9]* reject .*reason="invalid" source="plane"' audit.txt)
        lost=$(sed -n 's/^record [0-9]* reject .*count=\([0-9]*\) .*reason="lost".*/\1/p' \
               audit.txt | awk '{ s += $1 } END { print s + 0 }')
        gaps=$(sed -n 's/^record [0-9]* gap .*dropped=\([0-9]*\).*/\1/p' audit.txt |
               awk '{ s += $1 } END { print s + 0 }')
        [ $((pr + lost + gaps)) -eq "$inv" ] ||
            fail "$pr plane reject records + $lost lost + $gaps shed != $inv refused"
    fi
    ratio=1.000
    if [ $mode = off ]; then base=$rps; else
        ratio=$(awk -v a="$rps" -v b="$base" 'BEGIN { printf "%.3f", a / b }'); fi
    bench "{\"bench\":\"nginx_refusals\",\"audit\":\"$mode\",\"seconds\":$S,\"conns\":16,\"requests\":$req,\"refusals_per_s\":$rps,\"p50_us\":$(wrkfield p50_us wrk.json),\"p99_us\":$(wrkfield p99_us wrk.json),\"plane_invalid\":$inv,\"trail_rejects\":$pr,\"lost\":$lost,\"gap_dropped\":$gaps,\"load1\":$load,\"ratios\":{\"refusals_per_s_vs_audit_off\":$ratio}}"
done
