#!/bin/sh
# signal.sh HOST SCRIPT MODE [ARG]: runs `HOST run SCRIPT ARG`, waits for "ready" on its
# stdout, then sends
#   MODE=term      one SIGTERM: exit 0 within 2 s, the drain result on stderr
#   MODE=int-twice SIGINT, then another 100 ms later while the drain still waits for a
#                  stubborn task (ARG=stubborn): the second forces exit 1 at once
set -u
host=$1 script=$2 mode=$3 arg=${4:-}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ra-signal.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# shellcheck disable=SC2086 # $arg is empty or one word: absent when empty
"$host" run "$script" $arg >"$tmp/out" 2>"$tmp/err" &
pid=$!
i=0
until grep -q '^ready$' "$tmp/out" 2>/dev/null; do
    i=$((i + 1))
    [ $i -le 500 ] || { echo "signal.sh: no 'ready' after 5 s" >&2; kill -KILL $pid; exit 1; }
    sleep 0.01
done
start=$(date +%s%N)
case "$mode" in
    term) kill -TERM $pid ;;
    int-twice) kill -INT $pid; sleep 0.1; kill -INT $pid ;;
esac
wait $pid
rc=$?
ms=$(( ($(date +%s%N) - start) / 1000000 ))
echo "--- stdout"; cat "$tmp/out"; echo "--- stderr"; cat "$tmp/err"
echo "signal.sh: exit $rc after $ms ms"
fail=0
case "$mode" in
    term)
        [ $rc -eq 0 ] || { echo "signal.sh: exit status $rc, expected 0" >&2; fail=1; }
        [ $ms -lt 2000 ] || { echo "signal.sh: took $ms ms (limit 2000)" >&2; fail=1; }
        grep -q 'SIGTERM: graceful shutdown' "$tmp/err" || { echo "signal.sh: no shutdown line" >&2; fail=1; }
        grep -Eq 'drain after SIGTERM: finished=[0-9]+ aborted=[0-9]+' "$tmp/err" ||
            { echo "signal.sh: no drain result" >&2; fail=1; }
        grep -q '^sleeper woke: nil Canceled$' "$tmp/out" || { echo "signal.sh: sleeper not canceled" >&2; fail=1; }
        if [ "$arg" = stubborn ]; then
            grep -Eq 'aborted=1 \(stubborn=1\)' "$tmp/err" ||
                { echo "signal.sh: the stubborn task was not aborted" >&2; fail=1; }
        else
            grep -Eq 'finished=[0-9]+ aborted=0 ' "$tmp/err" || { echo "signal.sh: unexpected drain" >&2; fail=1; }
        fi ;;
    int-twice)
        [ $rc -eq 1 ] || { echo "signal.sh: exit status $rc, expected 1" >&2; fail=1; }
        grep -q 'second signal (SIGINT): exiting now' "$tmp/err" ||
            { echo "signal.sh: no forced-exit line" >&2; fail=1; } ;;
esac
exit $fail
