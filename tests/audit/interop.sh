#!/bin/sh
# The audit trail against the reference implementations of the formats it claims
# (docs/AUDIT.md "Interoperating"; cmake/audit-tests.cmake, audit-interop):
#
#   interop.sh HOST MKLOG SOURCE_DIR WORK_DIR
#
# Go's golang.org/x/mod/sumdb/note and sumdb/tlog (Debian golang-golang-x-mod-dev, built in
# GOPATH mode, offline) and a cosignature/v1 written in tests/audit/interop/interop.go from
# c2sp.org/tlog-cosignature:
#  1. a signed log of 20 records (checkpoints at 7, 13 and 20) and a witness's cosignature of
#     its newest checkpoint (`audit witness cosign`): every checkpoint opens with note.Open
#     under the log's key with tlog's root of the records; the cosigned note opens under the
#     log's key and under the witness's; every inclusion and consistency proof of
#     `audit proof` for those sizes is tlog's ProveRecord / ProveTree and passes
#     CheckRecord / CheckTree;
#  2. the other way: a checkpoint of the same records signed by a key Go made, with 14 more
#     signatures, a witness's cosignature made in Go and a 5 kB signature of an unknown key
#     (17 signature lines): `audit verify --vkey --witness-vkey --checkpoint` accepts it
#     (before: every signature line was decoded as 4+64 bytes, notes capped at 1 KiB).
set -u
host=$1 mk=$2 src=$3 work=$4
rm -rf "$work" && mkdir -p "$work" || exit 1
cd "$work" || exit 1
fail() { echo "interop.sh: FAILED: $*" >&2; exit 1; }
command -v go >/dev/null || fail "go is not installed (tools/deps.sh: golang-go)"
[ -d /usr/share/gocode/src/golang.org/x/mod/sumdb ] ||
    fail "golang.org/x/mod is not installed (tools/deps.sh: golang-golang-x-mod-dev)"
export GOPATH=/usr/share/gocode GO111MODULE=off GOCACHE="$work/gocache" GOFLAGS=
cp "$src/tests/audit/interop/interop.go" . || exit 1
go build -o interop interop.go || fail "go build"

"$host" audit keygen ron-audit/gw-1/rejects sk vk >/dev/null || fail keygen
"$host" audit keygen --witness witness.example.com/ron wsk wvk >/dev/null || fail "keygen --witness"
for n in 7 13 20; do "$mk" log sk $n || fail "mklog $n"; done
mkdir state || exit 1
"$host" audit witness cosign --key wsk --state state --log-vkey vk --log log >cosigned.note ||
    fail "witness cosign: $(cat cosigned.note)"
./interop check "$host" log vk wvk cosigned.note || fail "the Go checks"

mkdir go log2 || exit 1
./interop make log go || fail "the Go vectors"
cp log/seg-*.rau log2/ || exit 1 # the records without this log's own checkpoints
"$host" audit verify --vkey go/go.vkey --witness-vkey go/go-witness.vkey \
    --checkpoint go/go.note log2 >verify.txt 2>&1 || fail "Go's note: $(cat verify.txt)"
grep -q "cosigned by the witness covers 20 records" verify.txt || fail "$(cat verify.txt)"
echo "interop.sh: ok"
