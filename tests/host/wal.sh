#!/bin/sh
# Host tests of `verify` and `wal inspect` (cmake/host-tests.cmake, label host).
#
#   wal.sh CASE HOST SOURCE_DIR WORK_DIR
#
# Every case builds its own WAL with tests/host/wal-make.lua through `HOST run` (a real
# meter, cfg.wal, records, rollovers, ACKs that compact), in WORK_DIR/<case>:
#   verify-ok      verify exits 0 with "OK", nothing on stderr, and changes nothing
#   verify-flip    one byte of the oldest segment's first frame flipped: exit 1, the report
#                  names the file and offset 32, and the directory is unchanged
#   verify-torn    garbage appended to the newest segment (a torn tail): exit 1, "torn tail"
#                  with the file and offset; verify does not cut it (the directory is
#                  unchanged), and a meter opened afterwards does
#   verify-file    verify of one segment file: exit 0 "OK"
#   verify-gap     a WAL without ACKs (no checkpoint) loses its second segment: exit 1 and
#                  a CHAIN BREAK naming the missing seqs
#   inspect        wal inspect, text and --json, checked by wal-inspect-check.lua against
#                  the pending slices of a meter reopened on the WAL
#   golden         the golden WAL of docs/FORMAT.md §4.8 (no wal-make.lua): verify says OK,
#                  inspect shows the fields the page annotates
. "$3/tests/host/lib.sh" && host_case wal.sh "$@" || exit 1
wal=$dir/wal

make_wal() { # make_wal [WINDOWS [noack]]
    run_lua "$dir/make.out" "$src/tests/host/wal-make.lua" "$wal" "$@"
    grep -q '^wal-make: ok [1-9]' "$dir/make.out" || fail "wal-make.lua printed no pending count"
}

oldest() { ls "$wal"/*.seg | sort | head -n 1; }
newest() { ls "$wal"/*.seg | sort | tail -n 1; }

case "$case_" in
verify-ok)
    make_wal
    verify_keeps 0 "$wal" "$wal"
    tail -n 1 "$dir/verify.out" | grep -qx 'OK' || fail "no final OK line"
    grep -Eq '^  segments +[1-9][0-9]* \(' "$dir/verify.out" || fail "no segments line"
    grep -Eq '^  chain links +[1-9][0-9]* checked, 0 breaks' "$dir/verify.out" ||
        fail "no chain links line"
    [ -s "$dir/verify.err" ] && fail "stderr is not empty: $(cat "$dir/verify.err")"
    ;;
verify-flip)
    make_wal
    seg=$(oldest)
    # Offset 62: inside the payload of the first frame (header 32 + frame header 24 + 6).
    printf '\377' | dd of="$seg" bs=1 seek=62 conv=notrunc 2>/dev/null || fail "dd"
    verify_keeps 1 "$wal" "$wal"
    grep -Fq "$seg" "$dir/verify.out" || fail "the report does not name $seg"
    grep -Eq "corrupt frame at offset 32" "$dir/verify.out" || fail "no 'corrupt frame at offset 32'"
    grep -Eq '^FAILED: ' "$dir/verify.out" || fail "no FAILED line"
    ;;
verify-torn)
    make_wal
    seg=$(newest)
    size=$(wc -c <"$seg")
    printf 'RWF1 a write that never finished' >>"$seg"
    verify_keeps 1 "$wal" "$wal"
    grep -Eq "torn tail at offset $size" "$dir/verify.out" || fail "no 'torn tail at offset $size'"
    grep -Fq "$seg" "$dir/verify.out" || fail "the report does not name $seg"
    grep -Eq '^  torn bytes +32$' "$dir/verify.out" || fail "torn bytes is not 32"
    # A meter (not verify) repairs it: the tail is cut and kept as .broken.
    cat >"$dir/reopen.lua" <<'EOF'
local acct = require "ron.accounting"
local m = assert(acct.open { window_len_s = 60, capacity_rows = 1024,
                             pending_slices_cap = 256, wal = { dir = arg[1] } })
m:close()
EOF
    "$host" run "$dir/reopen.lua" "$wal" 2>/dev/null || fail "reopen"
    [ -f "$seg.broken" ] || fail "the meter did not keep the torn tail as .broken"
    run_verify 0 "$wal"
    grep -Eq '1 \.broken' "$dir/verify.out" || fail "verify does not mention the .broken file"
    ;;
verify-gap)
    make_wal 4 noack
    rm -f "$(ls "$wal"/*.seg | sort | sed -n 2p)"
    run_verify 1 "$wal"
    grep -Eq '^CHAIN BREAK [0-9a-f-]+/[a-z_]+: slice seq 3 .*: seq 2\.\.2 missing and no heads checkpoint covers them$' \
        "$dir/verify.out" || fail "no CHAIN BREAK for the missing seq 2"
    grep -Eq '^FAILED: 0 problems .*, [1-9][0-9]* chain breaks$' "$dir/verify.out" || fail "no FAILED line"
    ;;
verify-file)
    make_wal
    run_verify 0 "$(newest)"
    grep -q 'one segment file' "$dir/verify.out" || fail "not in file mode"
    tail -n 1 "$dir/verify.out" | grep -qx 'OK' || fail "no final OK line"
    ;;
golden)
    mkdir -p "$wal"
    "$host" run "$src/tests/host/wal-golden.lua" "$src/docs/FORMAT.md" "$wal" || fail "wal-golden.lua"
    run_verify 0 "$wal"
    tail -n 1 "$dir/verify.out" | grep -qx 'OK' || fail "no final OK line"
    grep -Eq '^  chain links +1 checked, 0 breaks \(1 streams, 1 heads' "$dir/verify.out" ||
        fail "the chain does not link to the checkpoint"
    "$host" wal inspect "$wal" >"$dir/inspect.out" || fail "wal inspect"
    cat "$dir/inspect.out"
    for re in \
        '^head tenant=123e4567-e89b-12d3-a456-426614174000 dimension=bytes seq=1 last_window=2023-11-14T22:00:00Z b3=c6c96d1956149d44$' \
        '^segment id=0000000000000001 file=.*/0000000000000001\.seg bytes=233 frames=1 created=2023-11-14T22:05:00\.000Z$' \
        '^  frame seq=1 tenant=123e4567-e89b-12d3-a456-426614174000 dimension=bytes window=2023-11-14T22:00:00Z slice_seq=1 rows=2 b3=c6c96d1956149d44 state=pending$'; do
        grep -Eq "$re" "$dir/inspect.out" || fail "inspect does not match /$re/"
    done
    ;;
inspect)
    make_wal
    "$host" run "$src/tests/host/wal-inspect-check.lua" "$host" "$wal" || fail "wal-inspect-check.lua"
    ;;
*)
    fail "unknown case"
    ;;
esac
echo "wal.sh $case_: ok"
