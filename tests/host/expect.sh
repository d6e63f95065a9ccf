#!/bin/sh
# Runs a command and checks its exit status and output (ctest's PASS_REGULAR_EXPRESSION
# ignores the exit status; these tests are about both).
#
#   expect.sh [-o REGEX]... [-e REGEX]... [-O] [-E] EXIT_STATUS COMMAND [ARGS...]
#     -o REGEX  stdout must match REGEX (grep -E); may be repeated
#     -e REGEX  stderr must match REGEX; may be repeated
#     -O        stdout must be empty
#     -E        stderr must be empty
set -u

nl='
'
out_re="" err_re="" out_empty=0 err_empty=0
while [ $# -gt 0 ]; do
    case "$1" in
        -o) out_re="$out_re$2$nl"; shift 2 ;;
        -e) err_re="$err_re$2$nl"; shift 2 ;;
        -O) out_empty=1; shift ;;
        -E) err_empty=1; shift ;;
        *) break ;;
    esac
done
[ $# -ge 2 ] || { echo "usage: expect.sh [-o RE] [-e RE] [-O] [-E] STATUS CMD..." >&2; exit 2; }
want=$1
shift

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ra-expect.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
"$@" >"$tmp/out" 2>"$tmp/err"
got=$?

fail=0
say() { echo "expect.sh: $*" >&2; fail=1; }
[ "$got" -eq "$want" ] || say "exit status $got, expected $want"
# Each pattern on its own (grep -E with a newline-separated list would accept any one).
check() { # check STREAM FILE PATTERNS
    printf '%s' "$3" | while IFS= read -r re; do
        grep -Eq -- "$re" "$2" || { echo "expect.sh: $1 does not match /$re/" >&2; echo x; }
    done
}
[ -z "$(check stdout "$tmp/out" "$out_re")" ] || fail=1
[ -z "$(check stderr "$tmp/err" "$err_re")" ] || fail=1
[ "$out_empty" -eq 0 ] || [ ! -s "$tmp/out" ] || say "stdout is not empty"
[ "$err_empty" -eq 0 ] || [ ! -s "$tmp/err" ] || say "stderr is not empty"

if [ "$fail" -ne 0 ]; then
    echo "--- command: $*" >&2
    echo "--- stdout:" >&2
    cat "$tmp/out" >&2
    echo "--- stderr:" >&2
    cat "$tmp/err" >&2
    exit 1
fi
cat "$tmp/out"
exit 0
