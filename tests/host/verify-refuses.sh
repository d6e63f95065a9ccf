#!/bin/sh
# `verify` refuses what is not a WAL or a ledger (issue 14 item 12; label host):
#
#   verify-refuses.sh HOST WORK_DIR
#
# Before: an empty directory, /proc and a daemon's state directory were "OK" (exit 0); in a
# file ledger, a FIFO named like a stream hung `verify --totals` and a symbolic link to
# /dev/zero was an empty stream. Now: exit 2 with the reason for the directories; the FIFO
# and the link are reported as problems (exit 1), never read.
set -u
host=$1 work=$2
rm -rf "$work" && mkdir -p "$work" || exit 1
fail() { echo "verify-refuses.sh: FAILED: $*" >&2; exit 1; }

expect() { # expect STATUS REGEX PATH...
    want=$1 re=$2; shift 2
    timeout -s KILL 20 "$host" verify "$@" >"$work/out" 2>&1
    rc=$?
    [ "$rc" = "$want" ] || fail "verify $*: exit $rc, expected $want: $(cat "$work/out")"
    grep -Eq "$re" "$work/out" || fail "verify $*: no '$re' in: $(cat "$work/out")"
}
mkdir -p "$work/empty" "$work/state/wal" "$work/state/ledger"
expect 2 "empty is neither a WAL directory .* nor a file ledger" "$work/empty"
expect 2 "/proc is neither a WAL directory" /proc
expect 2 "a daemon's state directory\\? verify its wal/ or ledger/" "$work/state"

t="$work/ledger/00000000-0000-4000-8000-000000000001"
mkdir -p "$t" || exit 1
printf 'ron-accounting file ledger v1\n' >"$work/ledger/LEDGER"
mkfifo "$t/bytes.ledger" || exit 1
ln -s /dev/zero "$t/requests.ledger" || exit 1
expect 1 "bytes.ledger: not a regular file \\(a FIFO, a device or a socket\\): refused" \
    --totals "$work/ledger"
grep -q "requests.ledger: cannot read: a symbolic link (refused)" "$work/out" ||
    fail "the link to /dev/zero: $(cat "$work/out")"
expect 2 "" "$t/requests.ledger"
echo "verify-refuses.sh: OK"
