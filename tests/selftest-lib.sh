# shellcheck shell=sh disable=SC2154 # luajit, checker, tmp, fails: set by the sourcing test
# Shared by the checkers' self-tests (tests/docs/*-selftest.sh, tests/lint/*-selftest.sh),
# sourced after they set luajit, checker, tmp (a directory whose t/ is the tree) and fails=0.
#
# expect RC PATTERN NAME: run the checker on the tree; its exit code and stderr must match.
expect() {
    rc=0
    "$luajit" "$checker" "$tmp/t" > "$tmp/out" 2> "$tmp/err" || rc=$?
    ok=1
    [ "$rc" -eq "$1" ] || ok=0
    if [ -n "$2" ] && ! grep -qF -- "$2" "$tmp/err"; then ok=0; fi
    if [ "$ok" -eq 0 ]; then
        echo "FAIL $3: exit $rc (want $1), stderr:" >&2
        cat "$tmp/err" >&2
        fails=$((fails + 1))
    else
        echo "ok   $3"
    fi
}

# The end of a self-test: its exit status.
finish() {
    if [ "$fails" -ne 0 ]; then
        echo "$fails case(s) failed" >&2
        exit 1
    fi
}
