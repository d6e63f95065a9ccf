#!/bin/sh
# bench-ingest.sh: POST /v1/records on the daemon under wrk (loopback, bounded), issue 5
# "Load"; part of the bench target (cmake/bench.cmake), never of `make test`.
#
#   sh tests/bench/bench-ingest.sh HOST SOURCE_DIR WORK_DIR [--quick] [--out FILE]
#       [--seconds S] [--batch N] [--conns N]
#
# HOST is the ron-accounting binary; WORK_DIR gets the daemons' state (wiped first).
# Runs, each against a fresh daemon (examples/daemon.lua, real clock, 300 s windows,
# listen 127.0.0.1, one token), wrk -t1 (2 vCPUs: one for wrk, one for the daemon's loop):
#   healthz      GET /healthz: the HTTP stack's floor (baseline)
#   handler      the handler alone in-process, no HTTP (bench-ingest-handler.lua; baseline)
#   http         batches of --batch records (1000 subjects x 2 dimensions, keys bounded)
#                for --seconds: requests/s, records/s, latency p50/p99, the daemon's RSS
#                before/after; accounting_ingest_records_total must equal 200s x batch
#   full_meter   capacity_rows = 1000 and every record a new key: the plane fills within
#                a few requests, then 429 (Retry-After) instead of memory: the answers per
#                status, records applied, RSS before/after/peak (VmHWM)
# One BENCH {json} line per run on stdout (and appended to --out).
set -eu
host=$1 src=$2 work=$3
shift 3
out="" seconds=10 batch=100 conns=16 quick=0
bench_name=bench-ingest.sh
. "$src/tests/bench/ingest-lib.sh"
bench_opt() { # this script's own options, for bench_ingest_args: the words taken
    case $1 in
    --quick) quick=1 seconds=2; return 1 ;;
    esac
    return 0
}
bench_ingest_args "$@"
bench_ingest_setup
rss_kb() { awk '$1 == "VmRSS:" { print $2 }' "/proc/$pid/status"; }
# anonymous memory only: the heap (Lua, h2o, buffers), not the counter plane's file pages
anon_kb() { awk '$1 == "RssAnon:" { print $2 }' "/proc/$pid/status"; }
hwm_kb() { awk '$1 == "VmHWM:" { print $2 }' "/proc/$pid/status"; }
status_n() { sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p" "$2" | head -1; }

start_daemon() { # start_daemon NAME CAPACITY_ROWS
    cat >"$1.lua" <<EOF
return { listen = "127.0.0.1:0", status_interval_s = 0, capacity_rows = $2,
         ingest = { tokens = { ["$HASH"] = "$TENANT" }, log_every = 100000 } }
EOF
    bench_daemon "$1"
}
stop_daemon() { kill -TERM "$pid"; wait "$pid" || true; pid=""; }
run_wrk() { # run_wrk MODE PATH OUTFILE: the daemon's RssAnon sampled every 0.5 s meanwhile
    INGEST_TOKEN=$TOKEN INGEST_TENANT=$TENANT INGEST_BATCH=$batch INGEST_MODE=$1 \
        wrk -t1 -c"$conns" -d"${seconds}s" -s "$src/tests/bench/wrk-ingest.lua" \
        "http://127.0.0.1:$port$2" >"$3" 2>&1 &
    wpid=$!
    : >"$3.anon"
    while kill -0 $wpid 2>/dev/null; do anon_kb >>"$3.anon"; sleep 0.5; done
    wait $wpid
    grep '^WRK ' "$3" | sed 's/^WRK //' >"$3.json"
    [ -s "$3.json" ] || { cat "$3" >&2; exit 1; }
}
# anon_series FILE: the sampled RssAnon as a JSON array (first, then every 4th, the last)
anon_series() { awk 'NR == 1 || NR % 4 == 0 { a[++n] = $1 } { last = $1 }
    END { if (a[n] != last) a[++n] = last; printf "["
          for (i = 1; i <= n; i++) printf "%s%d", (i > 1 ? "," : ""), a[i]; printf "]" }' "$1"; }

# ---- baselines -------------------------------------------------------------------------
start_daemon base 200000
run_wrk healthz /healthz healthz.txt
h_req=$(wrkfield requests healthz.txt.json)
h_us=$(wrkfield duration_us healthz.txt.json)
h_rps=$(awk -v r="$h_req" -v u="$h_us" 'BEGIN { printf "%.0f", r / (u / 1e6) }')
bench "{\"bench\":\"ingest\",\"case\":\"healthz\",\"conns\":$conns,\"seconds\":$seconds,\"req_per_s\":$h_rps,\"p50_us\":$(wrkfield p50_us healthz.txt.json),\"p99_us\":$(wrkfield p99_us healthz.txt.json)}"
stop_daemon
handler=$("$host" run "$src/tests/bench/bench-ingest-handler.lua" "$batch" $((quick ? 1 : 3)) |
          sed -n 's/^HANDLER //p')
hd_rps=$(echo "$handler" | sed -n 's/.*"records_per_s":\([0-9]*\).*/\1/p')
bench "{\"bench\":\"ingest\",\"case\":\"handler\",\"batch\":$batch,${handler#\{}"

# ---- http: records/s and p99 -----------------------------------------------------------
start_daemon http 200000
rss0=$(rss_kb) anon0=$(anon_kb)
run_wrk reuse /v1/records http.txt
rss1=$(rss_kb) anon1=$(anon_kb)
curl -s "http://127.0.0.1:$port/metrics" >http.metrics
stop_daemon
req=$(wrkfield requests http.txt.json)
us=$(wrkfield duration_us http.txt.json)
ok=$(status_n 200 http.txt.json)
ok=${ok:-0}
recorded=$(sed -n 's/^accounting_ingest_records_total \([0-9]*\)$/\1/p' http.metrics)
# wrk stops with up to --conns requests in flight: answered after it counted, recorded all
[ "$recorded" -ge $((ok * batch)) ] && [ "$recorded" -le $(((ok + conns) * batch)) ] || {
    echo "bench-ingest.sh: the daemon recorded $recorded, wrk saw $ok x $batch" >&2; exit 1; }
[ "$ok" -eq "$req" ] || echo "bench-ingest.sh: WARNING: $((req - ok)) non-200 answers" >&2
rps=$(awk -v r="$req" -v u="$us" 'BEGIN { printf "%.0f", r / (u / 1e6) }')
recs=$(awk -v r="$ok" -v b="$batch" -v u="$us" 'BEGIN { printf "%.0f", r * b / (u / 1e6) }')
r_h=$(awk -v a="$rps" -v b="$h_rps" 'BEGIN { printf "%.3f", a / b }')
r_hd=$(awk -v a="$recs" -v b="$hd_rps" 'BEGIN { printf "%.3f", a / b }')
bench "{\"bench\":\"ingest\",\"case\":\"http\",\"batch\":$batch,\"conns\":$conns,\"seconds\":$seconds,\"req_per_s\":$rps,\"records_per_s\":$recs,\"p50_us\":$(wrkfield p50_us http.txt.json),\"p99_us\":$(wrkfield p99_us http.txt.json),\"max_us\":$(wrkfield max_us http.txt.json),\"status\":$(sed -n 's/.*"status":\({[^}]*}\).*/\1/p' http.txt.json),\"records_recorded\":$recorded,\"rss_kb_before\":$rss0,\"rss_kb_after\":$rss1,\"anon_kb_before\":$anon0,\"anon_kb_after\":$anon1,\"anon_kb_during\":$(anon_series http.txt.anon),\"ratios\":{\"req_per_s_vs_healthz\":$r_h,\"records_per_s_vs_handler\":$r_hd}}"

# ---- full_meter: 429 instead of memory -------------------------------------------------
start_daemon full 1000
rss0=$(rss_kb) anon0=$(anon_kb)
run_wrk new /v1/records full.txt
rss1=$(rss_kb) anon1=$(anon_kb)
hwm=$(hwm_kb)
curl -s "http://127.0.0.1:$port/metrics" >full.metrics
stop_daemon
ok=$(status_n 200 full.txt.json)
busy=$(status_n 429 full.txt.json)
recorded=$(sed -n 's/^accounting_ingest_records_total \([0-9]*\)$/\1/p' full.metrics)
cap429=$(sed -n 's/^accounting_ingest_rejected_total{reason="capacity"} \([0-9]*\)$/\1/p' full.metrics)
[ "${busy:-0}" -gt 0 ] && [ "$cap429" -ge "$busy" ] && [ "$cap429" -le $((busy + conns)) ] || {
    echo "bench-ingest.sh: expected 429s from a full meter: wrk $busy, metric $cap429" >&2; exit 1; }
# the plane holds 2 x capacity_rows entries: nothing beyond it was recorded
[ "$recorded" -le 2000 ] || { echo "bench-ingest.sh: $recorded records in a 2000-entry plane" >&2; exit 1; }
bench "{\"bench\":\"ingest\",\"case\":\"full_meter\",\"capacity_rows\":1000,\"batch\":$batch,\"conns\":$conns,\"seconds\":$seconds,\"requests\":$(wrkfield requests full.txt.json),\"status\":$(sed -n 's/.*"status":\({[^}]*}\).*/\1/p' full.txt.json),\"records_applied\":$recorded,\"p99_us\":$(wrkfield p99_us full.txt.json),\"rss_kb_before\":$rss0,\"rss_kb_after\":$rss1,\"rss_kb_peak\":$hwm,\"anon_kb_before\":$anon0,\"anon_kb_after\":$anon1,\"anon_kb_during\":$(anon_series full.txt.anon)}"
