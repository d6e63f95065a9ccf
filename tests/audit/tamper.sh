#!/bin/sh
# What verify proves, and with what (docs/AUDIT.md, the table of that name; AUD-I-15,
# AUD-I-31, AUD-I-39, AUD-I-40; cmake/audit-tests.cmake, audit-tamper):
#
#   tamper.sh HOST MKLOG SOURCE_DIR WORK_DIR
#
# A signed log of 20 records in 3 segments (checkpoints at 7, 13 and 20), a copy of it at 13
# records (an old backup), and what was kept elsewhere at 20 records: the checkpoint file
# (--checkpoint), a ledger that carries it (ledger verify --audit), a witness that cosigned
# it (audit witness cosign; verify --witness-vkey with the witness's note). Each row applies
# one tamper to a fresh copy of the log and runs the five modes:
#
#   plain       audit verify DIR
#   vkey        audit verify --vkey PUB DIR
#   checkpoint  audit verify --vkey PUB --checkpoint KEPT.note DIR
#   ledger      ledger --db L verify --audit DIR --audit-vkey PUB
#   witness     audit verify --vkey PUB --witness-vkey W.pub --checkpoint STATE/<origin> DIR
#
# and compares what each caught (exit 1) with the table; the untouched log must pass all
# five. The witness also refuses to cosign the rolled-back and the forked log. Before this
# change `vkey` passed the log with its checkpoints deleted and the one rewritten without the
# key, and there was no witness.
set -u
host=$1 mk=$2 src=$3 work=$4
rm -rf "$work" && mkdir -p "$work" || exit 1
cd "$work" || exit 1
fail() { echo "tamper.sh: FAILED: $*" >&2; exit 1; }
export RAU_MKLOG_ROTATE=400

"$host" audit keygen ron-audit/gw-1/rejects sk vk >/dev/null || fail keygen
"$host" audit keygen --witness witness.example.com/w wsk wvk >/dev/null || fail "keygen witness"
for n in 7 13; do "$mk" pristine sk $n || fail "mklog $n"; done
cp -r pristine old13 || exit 1 # the old backup
"$mk" pristine sk 20 || fail "mklog 20"
[ "$(ls pristine/seg-*.rau | wc -l)" -eq 3 ] || fail "want three segments"
cp pristine/cp-00000000000000000020.note kept.note || exit 1
"$host" ledger --db ledger.db init >/dev/null || fail "ledger init"
"$host" run "$src/tests/audit/carry.lua" ledger.db kept.note >/dev/null || fail "carry"
mkdir state || exit 1
"$host" audit witness cosign --key wsk --state state --log-vkey vk --log pristine \
    >cosigned.note 2>/dev/null || fail "witness cosign"
wnote=state/ron-audit%2Fgw-1%2Frejects.note
[ -f "$wnote" ] || fail "no witness state $wnote"

# one mode on DIR: "caught" or "missed"
mode() {
    case $1 in
    plain) "$host" audit verify "$2" ;;
    vkey) "$host" audit verify --vkey vk "$2" ;;
    checkpoint) "$host" audit verify --vkey vk --checkpoint kept.note "$2" ;;
    ledger) "$host" ledger --db ledger.db verify --audit "$2" --audit-vkey vk ;;
    witness) "$host" audit verify --vkey vk --witness-vkey wvk --checkpoint "$wnote" "$2" ;;
    esac >"out.$1" 2>&1
    case $? in 0) echo missed ;; 1) echo caught ;; *) echo "error: $(cat "out.$1")" ;; esac
}

seg() { ls "$1"/seg-*.rau | sed -n "${2}p"; }
flen() { # the first frame's length in a segment: 4 + len + 8
    echo $((12 + $(od -An -tu1 -j24 -N4 "$1" | awk '{ print $1*16777216 + $2*65536 + $3*256 + $4 }')))
}

# tamper NAME: a fresh copy in t/, changed
tamper() {
    rm -rf t && cp -r pristine t || exit 1
    case $1 in
    none) ;;
    flip) printf 'Z' | dd of="$(seg t 2)" bs=1 seek=60 conv=notrunc 2>/dev/null ;;
    torn) s=$(seg t 3) && truncate -s -5 "$s" ;;
    middle) rm "$(seg t 2)" ;;
    swap)
        s=$(seg t 2) && l=$(flen "$s")
        dd if="$s" of=f1 bs=1 skip=24 count="$l" 2>/dev/null
        dd if="$s" of=f2 bs=1 skip=$((24 + l)) count="$l" 2>/dev/null
        dd if=f2 of="$s" bs=1 seek=24 conv=notrunc 2>/dev/null
        dd if=f1 of="$s" bs=1 seek=$((24 + l)) conv=notrunc 2>/dev/null ;;
    cut) # records 16..20 gone at a frame boundary (their segments and what names them)
        for s in t/seg-*.rau; do
            first=$(basename "$s" .rau | sed 's/^seg-0*//')
            if [ "$first" -gt 15 ]; then rm "$s"; else last=$s lfirst=$first; fi
        done
        truncate -s $((24 + (16 - lfirst) * $(flen "$last"))) "$last"
        rm -f t/head.rau t/cp-00000000000000000020.note ;;
    nocp) rm t/cp-*.note ;;
    nocpcut) tamper cut && rm t/cp-*.note ;;
    rewrite) rm -rf t && "$mk" t - 20 500 >/dev/null || fail "forge" ;;
    rollback) rm -rf t && cp -r old13 t ;;
    fork) rm -rf t && cp -r old13 t && "$mk" t sk 20 100 || fail "fork" ;;
    esac
}

# row NAME EXPECTED(plain vkey checkpoint ledger witness)
printf '%-9s %-7s %-7s %-7s %-7s %-7s\n' tamper plain vkey kept ledger witness >matrix.txt
row() {
    tamper "$1"
    got=""
    for m in plain vkey checkpoint ledger witness; do got="$got $(mode $m t)"; done
    printf '%-9s' "$1" >>matrix.txt
    for x in $got; do printf ' %-7s' "$x" >>matrix.txt; done
    echo >>matrix.txt
    [ "$got" = " $2" ] || { cat matrix.txt; for m in plain vkey checkpoint ledger witness; do
        echo "--- $m"; cat "out.$m"; done; fail "$1: got$got, want $2"; }
}
row none "missed missed missed missed missed"
row flip "caught caught caught caught caught"
row torn "caught caught caught caught caught"
row middle "caught caught caught caught caught"
row swap "caught caught caught caught caught"
row cut "missed missed caught caught caught"
row nocp "missed caught missed missed missed" # (the records are intact: a kept one covers them)
row nocpcut "missed caught caught caught caught"
row rewrite "missed caught caught caught caught"
row rollback "missed missed caught caught caught"
row fork "missed missed caught caught caught"
cat matrix.txt

# the witness refuses to cosign the rolled-back log and the forked one, and keeps its state
cp "$wnote" before.note
tamper rollback
"$host" audit witness cosign --key wsk --state state --log-vkey vk --log t >w.txt 2>&1 &&
    fail "the witness cosigned a rollback"
grep -q "REFUSED: rollback: the checkpoint covers 13 records, this witness cosigned 20" w.txt ||
    fail "rollback: $(cat w.txt)"
tamper fork
"$host" audit witness cosign --key wsk --state state --log-vkey vk --log t >w.txt 2>&1 &&
    fail "the witness cosigned a fork"
grep -q "REFUSED: fork: the log's tree of 33 records does not extend the tree of 20" w.txt ||
    fail "fork: $(cat w.txt)"
cmp -s before.note "$wnote" || fail "a refusal changed the witness's state"
# and cosigns the log grown on: its state moves on
tamper none
"$mk" t sk 25 >/dev/null || fail "grow"
"$host" audit witness cosign --key wsk --state state --log-vkey vk --log t >w.txt 2>&1 ||
    fail "the grown log: $(cat w.txt)"
"$host" audit verify --vkey vk --witness-vkey wvk --checkpoint "$wnote" t >v.txt 2>&1 ||
    fail "verify against the witness's new state: $(cat v.txt)"
grep -q "cosigned by the witness covers 25 records" v.txt || fail "$(cat v.txt)"
echo "tamper.sh: ok (11 rows x 5 modes as in docs/AUDIT.md)"
