# shellcheck shell=sh
# Shared by the checkers' self-tests (tests/docs/*-selftest.sh, tests/lint/*-selftest.sh),
# sourced first with the test's arguments (LUAJIT [CHECKER]): it sets luajit, checker, tmp
# (a directory removed at exit, whose t/ is the tree under test) and fails=0.
luajit=$1
checker=${2:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
fails=0

# tree PATH...: $tmp/t becomes a fresh copy of these paths of the repository.
tree() {
    rm -rf "$tmp/t"
    mkdir -p "$tmp/t"
    tar cf - "$@" | (cd "$tmp/t" && tar xf -)
}
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
