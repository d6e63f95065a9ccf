#!/bin/sh
# bench-ingest-audit.sh: issue 16's target end to end: POST /v1/records refused at the rate
# the daemon can refuse them, with the audit trail off (the baseline) and on (one chain, two
# chains), same run; part of the bench target (cmake/bench.cmake), never of `make test`.
#
#   sh tests/bench/bench-ingest-audit.sh HOST SOURCE_DIR WORK_DIR [--quick] [--out FILE]
#       [--seconds S] [--batch N] [--conns N] [--cases "forbidden bad_dimension capacity"]
#       [--audits "off chain1 chains2"] [--rounds R]
#
# HOST is the ron-accounting binary; WORK_DIR gets the daemons' state (wiped first). For
# each case, fresh daemons (examples/daemon.lua, real clock, listen 127.0.0.1, one token):
# audit = false (off: the baseline), audit = {} (chain1), audit = { shards = 2 } (chains2),
# interleaved over --rounds rounds (3; --quick: 1) since the machine is shared: a figure is
# the median over the rounds; wrk -t1 (2 vCPUs:
# one for wrk, one for the daemon's loop; the audit sink's appends and fdatasyncs run on
# the libuv threadpool and share those two cores) sends --batch records per request:
#   forbidden      every record names another tenant: 403 forbidden_tenant (decoded first)
#   bad_dimension  the last record names an unknown dimension: 400 (the decoder's refusal)
#   capacity       capacity_rows = 1000 and every record a new key: 429 once the plane is full
# A request is refused whole (ingest is all or nothing, docs/ops/ingest.md): one refusal,
# one `reject` audit record. Per run: refusals/s (requests answered with the refusal),
# refused records/s (x batch), the ingest's p50/p99 under wrk, and after SIGTERM (the trail
# drained and closed) `audit verify --list` of every chain: it must pass, and the `reject`
# records of source ingest plus the `dropped` of the gap records must equal the refusals
# the endpoint counted (accounting_ingest_rejected_total, summed over reasons); the shed
# count (audit_drop_total) is printed. One BENCH {json} line per run, then per case and
# configuration one "summary" line: the medians of refusals/s and p99 over the rounds and
# the ratio of the median refusals/s to audit off's (stdout, and appended to --out).
set -eu
host=$1 src=$2 work=$3
shift 3
out="" seconds=5 batch=1 conns=16 cases="forbidden bad_dimension capacity"
audits="off chain1 chains2" rounds=3
bench_name=bench-ingest-audit.sh
. "$src/tests/bench/ingest-lib.sh"
bench_opt() { # this script's own options, for bench_ingest_args: the words taken
    case $1 in
    --quick) seconds=2 rounds=1; return 1 ;;
    --cases) cases=$2; return 2 ;;
    --audits) audits=$2; return 2 ;;
    --rounds) rounds=$2; return 2 ;;
    esac
    return 0
}
bench_ingest_args "$@"
bench_ingest_setup
die() { echo "bench-ingest-audit.sh: $*" >&2; exit 1; }

metric_sum() { # metric_sum PREFIX FILE: the sum of the samples of one family
    awk -v p="$1" 'index($0, p) == 1 { s += $NF } END { printf "%d", s }' "$2"; }

start_daemon() { # start_daemon NAME CAPACITY_ROWS AUDIT (a repeated NAME starts anew)
    rm -rf "$1" "$1".*
    cat >"$1.lua" <<EOF
return { listen = "127.0.0.1:0", status_interval_s = 0, capacity_rows = $2,
         drain_deadline_ms = 30000,
         ingest = { tokens = { ["$HASH"] = "$TENANT" }, log_every = 1000000 },
         audit = $3 }
EOF
    bench_daemon "$1"
}
stop_daemon() {
    kill -TERM "$pid"
    rc=0
    wait "$pid" || rc=$?
    pid=""
    [ $rc -eq 0 ] || die "daemon exit $rc after SIGTERM"
}

base_rps=""
run() { # run CASE AUDIT_LABEL AUDIT_CFG
    name="$1-$2"
    mode=$1
    cap=200000
    if [ "$1" = capacity ]; then mode=new cap=1000; fi
    start_daemon "$name" $cap "$3"
    INGEST_TOKEN=$TOKEN INGEST_TENANT=$TENANT INGEST_BATCH=$batch INGEST_MODE=$mode \
        wrk -t1 -c"$conns" -d"${seconds}s" -s "$src/tests/bench/wrk-ingest.lua" \
        "http://127.0.0.1:$port/v1/records" >"$name.wrk" 2>&1
    grep '^WRK ' "$name.wrk" | sed 's/^WRK //' >"$name.json"
    [ -s "$name.json" ] || { cat "$name.wrk" >&2; die "no wrk summary"; }
    load=$(cut -d' ' -f1 /proc/loadavg)
    sleep 0.3 # requests wrk left in flight are answered (and counted) by now
    curl -s "http://127.0.0.1:$port/metrics" >"$name.metrics"
    t0=$(date +%s.%N)
    stop_daemon
    t1=$(date +%s.%N)
    refused=$(metric_sum 'accounting_ingest_rejected_total{' "$name.metrics")
    shed=$(metric_sum 'audit_drop_total{' "$name.metrics")
    req=$(wrkfield requests "$name.json")
    us=$(wrkfield duration_us "$name.json")
    # the refusals wrk saw answered: every non-200 status
    wrk_refused=$(sed -n 's/.*"status":{\([^}]*\)}.*/\1/p' "$name.json" | tr ',' '\n' |
                  awk -F: '$1 != "\"200\"" { s += $2 } END { printf "%d", s }')
    rps=$(awk -v r="$wrk_refused" -v u="$us" 'BEGIN { printf "%.0f", r / (u / 1e6) }')
    recs=$(awk -v r="$rps" -v b="$batch" 'BEGIN { printf "%.0f", r * b }')
    [ "$refused" -ge "$wrk_refused" ] && [ "$refused" -le $((wrk_refused + conns)) ] ||
        die "$name: the endpoint counted $refused refusals, wrk saw $wrk_refused"
    trail="" gaps=0 verify_s=0
    if [ "$2" != off ]; then
        : >"$name.list"
        v0=$(date +%s.%N)
        for d in "$name/audit" "$name"/audit/daemon.*; do
            [ -d "$d" ] || continue
            "$host" audit verify --list "$d" >>"$name.list" 2>&1 ||
                { tail -5 "$name.list" >&2; die "$name: audit verify $d failed"; }
        done
        v1=$(date +%s.%N)
        verify_s=$(awk -v a="$v0" -v b="$v1" 'BEGIN { printf "%.2f", b - a }')
        trail=$(grep -c '^record [0-9]* reject .*source="ingest"' "$name.list" || true)
        gaps=$(sed -n 's/^record [0-9]* gap .*dropped=\([0-9]*\).*/\1/p' "$name.list" |
               awk '{ s += $1 } END { printf "%d", s }')
        [ $((trail + gaps)) -eq "$refused" ] ||
            die "$name: $trail reject records + $gaps dropped in gap records, $refused refused"
        [ "$gaps" -eq "$shed" ] || echo "bench-ingest-audit.sh: $name: gap records count" \
            "$gaps shed, audit_drop_total said $shed before the stop" >&2
    fi
    stop_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
    ratio=1.000
    if [ "$2" = off ]; then base_rps=$rps; else
        ratio=$(awk -v a="$rps" -v b="$base_rps" 'BEGIN { printf "%.3f", a / b }'); fi
    echo "$1 $2 $rps $(wrkfield p99_us "$name.json") $load" >>results.txt
    bench "{\"bench\":\"ingest_audit\",\"case\":\"$1\",\"audit\":\"$2\",\"batch\":$batch,\"conns\":$conns,\"seconds\":$seconds,\"requests\":$req,\"refusals_per_s\":$rps,\"refused_records_per_s\":$recs,\"p50_us\":$(wrkfield p50_us "$name.json"),\"p99_us\":$(wrkfield p99_us "$name.json"),\"max_us\":$(wrkfield max_us "$name.json"),\"status\":$(sed -n 's/.*"status":\({[^}]*}\).*/\1/p' "$name.json"),\"refused_counted\":$refused,\"trail_rejects\":${trail:-0},\"gap_dropped\":$gaps,\"stop_s\":$stop_s,\"verify_s\":$verify_s,\"load1\":$load,\"ratios\":{\"refusals_per_s_vs_audit_off\":$ratio}}"
}

r=0
while [ $r -lt "$rounds" ]; do
r=$((r + 1))
for c in $cases; do
    for a in $audits; do
        case $a in
        off) run "$c" off false ;;
        chain1) run "$c" chain1 "{}" ;;
        chains2) run "$c" chains2 "{ shards = 2 }" ;;
        *) die "unknown audit configuration $a" ;;
        esac
    done
done
done

# medians over the rounds (the lower middle for an even count)
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
for c in $cases; do
    base_med=$(awk -v c="$c" '$1 == c && $2 == "off" { print $3 }' results.txt | median)
    for a in $audits; do
        m=$(awk -v c="$c" -v a="$a" '$1 == c && $2 == a { print $3 }' results.txt | median)
        p=$(awk -v c="$c" -v a="$a" '$1 == c && $2 == a { print $4 }' results.txt | median)
        l=$(awk -v c="$c" -v a="$a" '$1 == c && $2 == a { print $5 }' results.txt | sort -n |
            tr '\n' ',' | sed 's/,$//')
        ratio=$(awk -v a="$m" -v b="$base_med" 'BEGIN { printf "%.3f", a / b }')
        bench "{\"bench\":\"ingest_audit\",\"summary\":true,\"case\":\"$c\",\"audit\":\"$a\",\"batch\":$batch,\"rounds\":$rounds,\"refusals_per_s_median\":$m,\"p99_us_median\":$p,\"load1\":[$l],\"ratios\":{\"refusals_per_s_median_vs_audit_off\":$ratio}}"
    done
done
