#!/bin/sh
# Proofs for the people the records are about (docs/AUDIT.md, AUD-I-41; label host): a daemon
# with ingest and the audit trail (a key, audit.tokens for an operator and two tenants).
#
#   audit-proofs.sh HOST LUAJIT SOURCE_DIR WORK_DIR
#
#  1. refused requests of tenant T1 and T2 become records; the trail's newest checkpoint
#     (GET /v1/audit/checkpoint) verifies with the log's key (`audit proof checkpoint --url`);
#  2. `audit proof inclusion --url --token-file T1 --vkey` proves every one of T1's records in
#     the signed checkpoint (the CLI checks the record against the leaf and the proof against
#     the signed root), and the daemon's raw answer passes an RFC 9162 verifier written for
#     the tests (tests/audit/rfc9162.lua: its own SHA-256 and arithmetic, the record hashed
#     to the leaf, the root the signed one);
#  3. T1's token is refused T2's records (403, the record not sent) and the daemon's own
#     records (no tenant); the operator's token gets any; no token is 401; a tree past what
#     is durable is 404;
#  4. later records, a newer checkpoint: `audit proof consistency --url --checkpoint OLD`
#     proves the new one extends the old (and rfc9162.lua checks the raw answer); a witness
#     cosigns through the routes (`audit witness cosign --url`) twice as the trail grows.
luajit=$2
. "$3/tests/host/lib.sh" && host_test audit-proofs.sh "$1" "$3" "$4" || exit 1
check() { "$luajit" "$src/tests/audit/rfc9162.lua" "$@"; }

T1=6f1c3c1e-2b7a-4d5e-9a43-0c8e5b1f7a21
T2=b2d4e6f8-1a3c-4e5f-8b7d-9c0e2f4a6b8d
printf 'tok-ingest-1' >i1.tok && printf 'tok-ingest-2' >i2.tok
printf 'tok-audit-op' >op.tok && printf 'tok-audit-1' >a1.tok && printf 'tok-audit-2' >a2.tok
b3() { b3sum --no-names "$1"; }
"$host" audit keygen ron-audit/node-9/daemon signer.key verifier.pub >/dev/null || fail keygen
"$host" audit keygen --witness witness.example/w wsk wvk >/dev/null || fail "keygen witness"
cat >conf.lua <<EOF
return { listen = "127.0.0.1:0", status_interval_s = 0, drain_deadline_ms = 2000,
    window_len_s = 60, capacity_rows = 10000, shards = 4,
    ingest = { tokens = { ["$(b3 i1.tok)"] = "$T1", ["$(b3 i2.tok)"] = "$T2" },
               log_every = 100000 },
    audit = { key_path = "signer.key", writer_id = "node-9", checkpoint_every = 1000,
              checkpoint_interval_ms = 100, interval_ms = 5,
              tokens = { ["$(b3 op.tok)"] = "operator", ["$(b3 a1.tok)"] = "$T1",
                         ["$(b3 a2.tok)"] = "$T2" } } }
EOF
daemon_start d.log conf.lua var
trap 'kill -9 $pid 2>/dev/null' EXIT
# a refused request of a tenant: wrong content type (the record names the token's tenant)
refuse() { curl -s -o /dev/null -H "Authorization: Bearer $(cat "$1")" -H 'Content-Type: text/plain' \
    -d x "$base/v1/records"; }
for _ in 1 2 3 4; do refuse i1.tok; refuse i2.tok; done
# the newest checkpoint covers them all (every checkpoint_interval_ms)
wait_cp() { # wait_cp MIN_SIZE -> cp.note
    n=200
    while :; do
        "$host" audit proof checkpoint --url "$base" --token-file op.tok --vkey verifier.pub \
            >cp.note 2>cp.err && [ "$(sed -n 2p cp.note)" -ge "$1" ] && break
        n=$((n - 1)); [ $n -gt 0 ] || fail "no checkpoint of $1 records: $(cat cp.note cp.err)"
        sleep 0.05
    done
}
wait_cp 9
size=$(sed -n 2p cp.note)
root=$(sed -n 3p cp.note | base64 -d | od -An -tx1 | tr -d ' \n')
cp cp.note old.note

# 2. every record of T1, through the CLI and raw
"$host" audit verify --list var/audit >list.txt 2>&1 # (a live log: its tail may be torn)
t1=$(awk -v t="tenant=\"$T1\"" '$1 == "record" && index($0, t) && $2 <= '"$size"' { print $2 }' list.txt)
[ "$(echo "$t1" | wc -w)" -ge 4 ] || fail "T1's records: $t1"
t2=$(awk -v t="tenant=\"$T2\"" '$1 == "record" && index($0, t) { print $2; exit }' list.txt)
own=$(awk '$1 == "record" && $3 == "daemon" { print $2; exit }' list.txt)
for seq in $t1; do
    "$host" audit proof inclusion --url "$base" --token-file a1.tok --vkey verifier.pub \
        --checkpoint old.note "$seq" \
        >incl.txt 2>&1 || fail "inclusion $seq: $(cat incl.txt)"
    grep -q "^OK: record $seq is in the signed checkpoint of $size records" incl.txt || fail "$(cat incl.txt)"
    grep -q "^record $seq reject .*tenant=\"$T1\"" incl.txt || fail "the record: $(cat incl.txt)"
    check "$root" <incl.txt || fail "rfc9162.lua: the CLI's output for $seq"
    curl -s -H "Authorization: Bearer $(cat a1.tok)" \
        "$base/v1/audit/inclusion?stream=daemon&seq=$seq&size=$size" >raw.txt
    check "$root" <raw.txt || fail "rfc9162.lua: the daemon's answer for $seq: $(cat raw.txt)"
done
# a changed hash in the answer is refused by the independent verifier
awk '/^proof\[0\] / { c = substr($2, 1, 1); $2 = (c == "f" ? "e" : "f") substr($2, 2) } { print }' \
    raw.txt >bad.txt
check "$root" <bad.txt 2>/dev/null && fail "a changed proof hash verified"

# 3. who may ask about what
code() { curl -s -o /dev/null -w '%{http_code}' ${2:+-H "Authorization: Bearer $(cat "$2")"} "$base$1"; }
[ "$(code "/v1/audit/inclusion?seq=$t2&size=$size" a1.tok)" = 403 ] || fail "T1 got T2's record"
[ "$(code "/v1/audit/inclusion?seq=$own&size=$size" a1.tok)" = 403 ] || fail "T1 got the daemon's"
[ "$(code "/v1/audit/inclusion?seq=$t2&size=$size" a2.tok)" = 200 ] || fail "T2's own record"
[ "$(code "/v1/audit/inclusion?seq=$own&size=$size" op.tok)" = 200 ] || fail "the operator"
[ "$(code "/v1/audit/inclusion?seq=1&size=$size")" = 401 ] || fail "no token"
[ "$(code "/v1/audit/checkpoint" i1.tok)" = 401 ] || fail "an ingest token is not an audit token"
[ "$(code "/v1/audit/inclusion?seq=1&size=999999" op.tok)" = 404 ] || fail "past the durable head"
[ "$(code "/v1/audit/checkpoint?stream=nope" op.tok)" = 404 ] || fail "unknown stream"
"$host" audit proof inclusion --url "$base" --token-file a1.tok --vkey verifier.pub "$t2" \
    >forbidden.txt 2>&1 && fail "the CLI got T2's record with T1's token"
grep -q "answered 403" forbidden.txt || fail "$(cat forbidden.txt)"

# 4. consistency and a witness over the routes
mkdir state
"$host" audit witness cosign --key wsk --state state --log-vkey verifier.pub --url "$base" \
    --token-file op.tok >w1.note 2>w1.err || fail "witness 1: $(cat w1.note w1.err)"
for _ in 1 2 3; do refuse i1.tok; done
wait_cp $((size + 3))
size2=$(sed -n 2p cp.note)
root2=$(sed -n 3p cp.note | base64 -d | od -An -tx1 | tr -d ' \n')
"$host" audit proof consistency --url "$base" --token-file a1.tok --vkey verifier.pub \
    --checkpoint old.note >cons.txt 2>&1 || fail "consistency: $(cat cons.txt)"
grep -q "^OK: the signed checkpoint of $size2 records extends the one of $size" cons.txt ||
    fail "$(cat cons.txt)"
check "$root2" "$root" <cons.txt || fail "rfc9162.lua: the CLI's consistency output"
curl -s -H "Authorization: Bearer $(cat a2.tok)" \
    "$base/v1/audit/consistency?from=$size&to=$size2" >raw.txt
check "$root2" "$root" <raw.txt || fail "rfc9162.lua: the daemon's consistency answer"
"$host" audit witness cosign --key wsk --state state --log-vkey verifier.pub --url "$base" \
    --token-file op.tok >w2.note 2>w2.err || fail "witness 2: $(cat w2.note w2.err)"
[ "$(sed -n 2p w2.note)" = "$size2" ] || fail "the witness cosigned $(sed -n 2p w2.note)"
kill -TERM "$pid"
wait "$pid" || fail "daemon exit $?"
trap - EXIT
"$host" audit verify --vkey verifier.pub --witness-vkey wvk \
    --checkpoint "state/ron-audit%2Fnode-9%2Fdaemon.note" var/audit >v.txt 2>&1 ||
    fail "verify with the witness: $(cat v.txt)"
echo "audit-proofs.sh: ok ($(echo "$t1" | wc -w) inclusion proofs of T1 in $size records, consistency $size -> $size2)"
