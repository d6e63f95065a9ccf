#!/bin/sh
# Host tests of `verify` on a file ledger (cmake/host-tests.cmake, label host).
#
#   ledger.sh CASE HOST SOURCE_DIR WORK_DIR
#
# Every case builds its own ledger with tests/host/ledger-make.lua through `HOST run` (a
# real meter, ron.accounting.export.exporters.file), in WORK_DIR/<case>:
#   ok      verify exits 0 with "OK" and changes nothing
#   flip    one byte of a record's slice bytes flipped: exit 1, the file and record named
#   torn    half a record appended to a stream: exit 1, "torn tail"
#   chain   a middle record removed from a stream: exit 1, a CHAIN BREAK naming the file
#   file    verify of one stream file: exit 0 "OK"
. "$3/tests/host/lib.sh" && host_case ledger.sh "$@" || exit 1
ledger=$dir/ledger

run_lua "$dir/make.out" "$src/tests/host/ledger-make.lua" "$ledger" 4
grep -qx 'ledger-make: ok 16' "$dir/make.out" || fail "ledger-make.lua did not store 16 slices"
stream=$ledger/123e4567-e89b-12d3-a456-426614174000/bytes.ledger
[ -f "$stream" ] || fail "no $stream"

# u32 LE length of the record at offset $1 of $stream
len_at() { od -An -tu4 -j "$1" -N4 "$stream" | tr -d ' '; }

case "$case_" in
ok)
    verify_keeps 0 "$ledger" "$ledger"
    tail -n 1 "$dir/verify.out" | grep -qx 'OK' || fail "no final OK line"
    grep -Eq '^  streams +4 files' "$dir/verify.out" || fail "no streams line"
    grep -Eq '^  records +16 valid' "$dir/verify.out" || fail "no records line"
    grep -Eq '^  chain links +16 checked, 0 breaks' "$dir/verify.out" || fail "no chain line"
    [ -s "$dir/verify.err" ] && fail "stderr is not empty: $(cat "$dir/verify.err")"
    ;;
flip)
    # Record 2: its length field sits after record 1; flip a row byte of its slice.
    n1=$(len_at 0)
    off2=$((4 + n1 + 32))
    n2=$(len_at $off2)
    pos=$((off2 + 4 + n2 - 3))
    printf '\125' | dd of="$stream" bs=1 seek=$pos conv=notrunc 2>/dev/null || fail "dd"
    verify_keeps 1 "$ledger" "$ledger"
    grep -Fq "CORRUPT $stream: record 2 at offset $off2: BLAKE3" "$dir/verify.out" ||
        fail "the report does not name $stream record 2"
    grep -Eq '^FAILED: ' "$dir/verify.out" || fail "no FAILED line"
    ;;
torn)
    size=$(wc -c <"$stream")
    # shellcheck disable=SC2094 # appends a copy of the head on purpose (a torn record)
    head -c 100 "$stream" >>"$stream"
    run_verify 1 "$ledger"
    grep -Fq "CORRUPT $stream: record 5 at offset $size: torn tail" "$dir/verify.out" ||
        fail "no torn tail at record 5, offset $size"
    ;;
chain)
    n1=$(len_at 0)
    off2=$((4 + n1 + 32))
    n2=$(len_at $off2)
    off3=$((off2 + 4 + n2 + 32))
    { head -c "$off2" "$stream"; tail -c +$((off3 + 1)) "$stream"; } >"$dir/cut" || fail "cut"
    cat "$dir/cut" >"$stream"
    run_verify 1 "$ledger"
    grep -Fq "CHAIN BREAK $stream: record 2 at offset $off2: seq 3 follows seq 1" \
        "$dir/verify.out" || fail "no CHAIN BREAK for the missing seq 2"
    ;;
file)
    run_verify 0 "$stream"
    grep -q 'one file-ledger stream' "$dir/verify.out" || fail "not verified as one stream"
    grep -Eq '^  records +4 valid' "$dir/verify.out" || fail "no records line"
    tail -n 1 "$dir/verify.out" | grep -qx 'OK' || fail "no final OK line"
    ;;
*) fail "unknown case" ;;
esac
echo "ledger.sh $case_: ok"
