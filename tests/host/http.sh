#!/bin/sh
# Host test of the HTTP surface (cmake/host-tests.cmake, label host).
#
#   http.sh HOST SOURCE_DIR WORK_DIR
#
# Runs tests/host/http.lua (a real meter, the export runtime, a file ledger, http.serve on
# port 0) and, with curl: /healthz 200; /readyz 200; /metrics 200 and valid for
# `promtool check metrics` with the runtime's families present; 404 and 405; the listener
# bound to 127.0.0.1 only; /readyz 503 "stopping" once the runtime is stopped; then the
# script ends its tasks without closing the server and the host must exit 0.
# Timing: only generous upper bounds (polls of up to 30 s).
set -u
host=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work" || exit 1
pid=""
fail() {
    echo "http.sh: FAILED: $*" >&2
    echo "--- script stdout:" >&2; cat "$work/out" >&2 2>/dev/null
    echo "--- script stderr:" >&2; cat "$work/err" >&2 2>/dev/null
    [ -n "$pid" ] && kill "$pid" 2>/dev/null
    exit 1
}

"$host" run "$src/tests/host/http.lua" "$work" >"$work/out" 2>"$work/err" &
pid=$!

# wait_for CMD...: retries CMD every 0.1 s for up to 30 s
wait_for() {
    i=0
    while ! "$@" >/dev/null 2>&1; do
        i=$((i + 1))
        [ $i -gt 300 ] && return 1
        kill -0 "$pid" 2>/dev/null || return 1
        sleep 0.1
    done
}
wait_for grep -q '^http: port [0-9]' "$work/out" || fail "the server did not start"
port=$(sed -n 's/^http: port \([0-9]*\)$/\1/p' "$work/out")
base=http://127.0.0.1:$port

# get PATH [CURL ARGS...] -> body in $work/body, status in $code
get() {
    p=$1; shift
    code=$(curl -sS -m 10 -o "$work/body" -w '%{http_code}' "$@" "$base$p") ||
        fail "curl $p"
}

get /healthz;  [ "$code" = 200 ] && grep -qx ok "$work/body" || fail "/healthz: $code"
get /readyz;   [ "$code" = 200 ] && grep -qx ready "$work/body" || fail "/readyz: $code"
get /nope;     [ "$code" = 404 ] || fail "/nope: $code, expected 404"
get /metrics -X POST; [ "$code" = 405 ] || fail "POST /metrics: $code, expected 405"

# The runtime has sealed and exported the first window (4 slices) before we judge it.
exported='^accounting_exports_total{status="ok"} [1-9]'
wait_for sh -c "curl -sS -m 10 '$base/metrics' | grep -q '$exported'" ||
    fail "no export counted on /metrics"
ctype=$(curl -sS -m 10 -o "$work/metrics" -w '%{content_type}' "$base/metrics") ||
    fail "curl /metrics"
case "$ctype" in
    "text/plain; version=0.0.4"*) ;;
    *) fail "/metrics content type: $ctype" ;;
esac
promtool check metrics <"$work/metrics" >"$work/promtool.out" 2>&1 || {
    cat "$work/promtool.out" >&2; fail "promtool check metrics"; }
for fam in ron_queue_depth ron_tasks_spawned_total ron_tasks_aborted_total accounting_export_retries_total \
    accounting_busy_rejections_total accounting_export_backlog accounting_degraded \
    accounting_rejected_total accounting_sealed_slices_total ron_tasks_live ron_lua_heap_bytes; do
    grep -q "^# TYPE $fam " "$work/metrics" || fail "/metrics lacks the family $fam"
    n=$(grep -c "^# TYPE $fam " "$work/metrics")
    [ "$n" = 1 ] || fail "/metrics describes $fam $n times"
done

# Loopback only: the one listening socket on $port is 127.0.0.1 (0100007F in /proc).
hexport=$(printf '%04X' "$port")
listen=$(awk -v p=":$hexport" '$4 == "0A" && substr($2, length($2) - 4) == p {print $2}' \
    /proc/net/tcp /proc/net/tcp6)
[ "$listen" = "0100007F:$hexport" ] || fail "listening on '$listen', expected 127.0.0.1 only"

# Stop the runtime: not ready any more, the reason on its own line.
: >"$work/stop"
wait_for grep -q '^http: runtime stopped' "$work/out" || fail "the runtime did not stop"
get /readyz; [ "$code" = 503 ] && grep -qx stopping "$work/body" ||
    fail "/readyz after stop: $code $(cat "$work/body")"
get /healthz;  [ "$code" = 200 ] || fail "/healthz after stop: $code"

# A connection left open and idle while the script ends (curl's telnet mode holds it,
# fed by a sleep): the host must close it on its way out, not crash or wait.
# (All of it on /dev/null: a lingering sleep must not hold ctest's output pipes.)
( (sleep 25 | curl -sS -m 25 "telnet://127.0.0.1:$port") </dev/null >/dev/null 2>&1 & )
established() { # the server side of a connection to $port is ESTABLISHED (01)
    awk -v p=":$hexport" '$4 == "01" && substr($2, length($2) - 4) == p {f=1} END {exit !f}' \
        /proc/net/tcp
}
wait_for established || fail "the idle client did not connect"
: >"$work/quit"
i=0
while kill -0 "$pid" 2>/dev/null; do
    i=$((i + 1)); [ $i -gt 300 ] && fail "the host did not exit after the script's tasks ended"
    sleep 0.1
done
wait "$pid"; rc=$?
pid=""
[ "$rc" = 0 ] || fail "host exit status $rc, expected 0"
grep -q 'closing the event loop\|leaking' "$work/err" && fail "unclean loop close"
echo "http.sh: ok (port $port)"
