# shellcheck shell=sh
# What the ingest benchmarks share (bench-ingest.sh, bench-ingest-audit.sh; sourced before
# their options are read; needs host, src, work and the script's name in bench_name):
#
#   bench_ingest_args ARGS...  the options both take (--out, --seconds, --batch, --conns) into
#                        out, seconds, batch and conns; any other option goes to the script's
#                        bench_opt OPTION VALUE, which returns how many words it took (0: an
#                        unknown option, said on stderr, exit 2)
#   bench_ingest_setup   WORK_DIR wiped and made current; TENANT, TOKEN and HASH (the token's
#                        BLAKE3, as the daemon stores it); a daemon still running ($pid) is
#                        stopped when the script exits
#   bench JSON           "BENCH JSON" on stdout, and appended to $out when set
#   wrkfield NAME FILE   a number field of wrk-ingest.lua's JSON summary
#   bench_daemon NAME    examples/daemon.lua --config NAME.lua --var NAME in the background
#                        (output in NAME.log); waits for its "listening on" line (10 s), sets
#                        pid and port; exits showing the log when it never came
# shellcheck disable=SC2034,SC2154 # TENANT, TOKEN, HASH: the script's; host, src, work, out
bench_ingest_args() {
    while [ $# -gt 0 ]; do
        case $1 in
        --out | --seconds | --batch | --conns) # --NAME VALUE sets NAME (one of these four)
            eval "${1#--}=\$2"
            shift ;;
        *)
            took=0
            bench_opt "$1" "${2-}" || took=$?
            [ "$took" -gt 0 ] || { echo "$bench_name: unknown option $1" >&2; exit 2; }
            shift $((took - 1)) ;;
        esac
        shift
    done
}

bench_ingest_setup() {
    command -v wrk >/dev/null || { echo "$bench_name: wrk not found (Debian: wrk)" >&2; exit 1; }
    rm -rf "$work" && mkdir -p "$work"
    cd "$work" || exit 1
    TENANT=6f1c3c1e-2b7a-4d5e-9a43-0c8e5b1f7a21
    TOKEN=bench-ingest-token
    HASH=$(printf %s "$TOKEN" | b3sum --no-names)
    pid=""
    trap bench_cleanup EXIT
}

bench_cleanup() { [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; true; }

bench() {
    echo "BENCH $1"
    [ -z "$out" ] || echo "BENCH $1" >>"$out"
}

wrkfield() { sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p" "$2"; }

bench_daemon() {
    "$host" run "$src/examples/daemon.lua" --config "$1.lua" --var "$1" >"$1.log" 2>&1 &
    pid=$!
    port=""
    n=100
    while [ $n -gt 0 ] && [ -z "$port" ]; do
        sleep 0.1
        port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\) .*|\1|p' "$1.log")
        n=$((n - 1))
    done
    [ -n "$port" ] || { cat "$1.log" >&2; echo "$bench_name: no daemon" >&2; exit 1; }
}
