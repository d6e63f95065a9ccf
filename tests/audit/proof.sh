#!/bin/sh
# `ron-accounting audit proof` end to end (AUD-I-8; cmake/audit-tests.cmake, audit-cli-proof):
#
#   proof.sh HOST MKLOG LUAJIT SOURCE_DIR WORK_DIR
#
# A signed log of 13 records (audit-mklog): the inclusion proofs of every seq and the
# consistency proofs from every smaller size, in the trees of 7, 8 and 13 records, are
# printed by the verb and checked by an independent RFC 9162 checker (tests/audit/rfc9162.lua: SHA-256 through
# libsodium by FFI, its own arithmetic); a changed proof hash is refused by that checker;
# each seq's inclusion in the signed checkpoint verifies. A fork: a backup of the first 8
# records, restored after the log reached 13 (checkpoint kept by a witness) and grown with
# other events, has no consistency proof to the witness's checkpoint (exit 1) while the
# original has. A damaged log gives no proof; bad arguments exit 2.
set -u
host=$1 mk=$2 luajit=$3 src=$4 work=$5
rm -rf "$work" && mkdir -p "$work" || exit 1
cd "$work" || exit 1
fail() { echo "proof.sh: FAILED: $*" >&2; exit 1; }
check() { "$luajit" "$src/tests/audit/rfc9162.lua"; }

"$host" audit keygen ron-audit/gw-1/rejects sk vk >/dev/null || fail keygen
"$mk" log sk 8 || fail mklog
cp -r log backup
"$mk" log sk 13 || fail "mklog 13" # the first 8 deduplicate: 13 records
cp log/cp-00000000000000000013.note witness.note

n=0
# (the library's own test checks every proof up to 40 leaves; here the verb's output, for
# the sizes around a power of two and the whole log, each checked independently)
proofs() { # proofs KIND FIRST SIZE: KIND proofs of FIRST..SIZE in a tree of SIZE, each checked
    i=$2
    while [ "$i" -le "$3" ]; do
        "$host" audit proof "$1" log "$i" "$3" >p.txt || fail "$1 $i $3"
        check <p.txt || fail "independent check: $1 $i $3"
        n=$((n + 1))
        i=$((i + 1))
    done
}
for size in 7 8 13; do
    proofs inclusion 1 $size
    proofs consistency 0 $size
done
# a changed hash in a proof is refused by the independent checker
"$host" audit proof inclusion log 5 13 | awk '/^proof\[1\] / {
    c = substr($2, 1, 1); $2 = (c == "f" ? "e" : "f") substr($2, 2) } { print }' >p.txt
grep -q '^proof\[1\] ' p.txt || fail "no proof[1] to change"
check <p.txt 2>/dev/null && fail "a changed proof hash verified"

seq=1
while [ $seq -le 13 ]; do
    "$host" audit proof inclusion --vkey vk --checkpoint witness.note log $seq >p.txt ||
        fail "inclusion $seq in the signed checkpoint"
    grep -q "OK: verified against the checkpoint's signed root" p.txt || fail "signed root"
    check <p.txt || fail "independent check: signed inclusion $seq"
    seq=$((seq + 1))
done

# the fork: the backup restored and grown with other events
"$mk" backup sk 13 100 || fail "mklog on the backup"
"$host" audit verify --vkey vk backup >/dev/null || fail "the fork verifies on its own"
"$host" audit proof consistency --vkey vk --checkpoint witness.note log >p.txt ||
    fail "the original is not consistent with the witness"
"$host" audit proof consistency --vkey vk --checkpoint witness.note backup >p.txt
rc=$?
[ $rc -eq 1 ] || fail "the fork: exit $rc"
grep -q "a fork" p.txt || fail "the fork is not named"

# a damaged log gives no proof; usage
printf 'Z' | dd of=log/seg-00000000000000000001.rau bs=1 seek=300 conv=notrunc 2>/dev/null
"$host" audit proof inclusion log 1 >p.txt
[ $? -eq 1 ] && grep -q "does not verify" p.txt || fail "a damaged log gave a proof"
"$host" audit proof inclusion log >/dev/null 2>&1
[ $? -eq 2 ] || fail "usage"
"$host" audit proof consistency log x 3 >/dev/null 2>&1
[ $? -eq 2 ] || fail "usage 2"
"$host" audit proof inclusion log 14 >/dev/null 2>&1
[ $? -eq 1 ] || fail "seq past the log"
echo "proof.sh: ok ($n proofs checked independently, the fork refused)"
