#!/bin/sh
# ron-wallet on a real daemon (examples/daemon.lua with `wallet`, SQLite; label host;
# docs/WALLET.md WLT-4, WLT-5):
#
#   wallet.sh HOST SOURCE_DIR WORK_DIR
#
# 1. The operator creates two accounts and issues 1000 to A; 40 transfers of 7 from A to
#    B (Idempotency-Key kN, nonce N) are sent at once and the daemon is killed with
#    SIGKILL while they are in flight. Answers that arrived before the kill are kept.
# 2. A new daemon on the same ledger: every request is sent again as it was. Each must
#    answer 201 (committed before or now) with a body byte-identical to the answer it got
#    before the kill (when it got one) and to a third send, the replays marked
#    Idempotent-Replayed: true; A's balance is 1000 - 7 x commits, B's 7 x commits, so
#    nothing committed twice and nothing lost. A used nonce with another body is 409
#    nonce_used (the ledger, not RAM, remembered it). `ledger verify` passes on the wallet's
#    ledger: N + 1 transfers (the issue and every transfer once).
. "$2/tests/host/lib.sh" && host_test wallet.sh "$@" || exit 1

A=6f1e3c52-7d0b-4b8e-9a51-0c2f4e8d9a10
B=0a0b0c0d-0e0f-4101-8203-040506070809
HOP=$(printf %s op-token.1 | b3sum --no-names) && HA=$(printf %s a-token.2 | b3sum --no-names) ||
    fail "b3sum"
cat >conf.lua <<EOC
return { listen = "127.0.0.1:0", status_interval_s = 0, drain_deadline_ms = 2000,
    wallet = { tokens = { ["$HOP"] = "operator", ["$HA"] = "$A" }, assets = { USD = 2 } } }
EOC

start_daemon() { # start_daemon LOG
    "$host" run "$src/examples/daemon.lua" --config conf.lua --var "$work/var" >"$1" 2>&1 &
    pid=$!
    listening "$1" 10 || fail "the daemon did not start listening"
    n=100
    until [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz")" = 200 ]; do
        n=$((n - 1)); [ $n -gt 0 ] || fail "the wallet did not become ready"; sleep 0.1
    done
}
# post PATH TOKEN KEY BODY OUT: status on stdout, headers OUT.h, body OUT.b
post() {
    curl -s -D "$5.h" -o "$5.b" -w '%{http_code}' -X POST -H "Authorization: Bearer $2" \
        -H 'Content-Type: application/json' ${3:+-H "Idempotency-Key: $3"} -d "$4" \
        "http://127.0.0.1:$port$1"
}
body() { printf '{"from":"%s","to":"%s","asset":"USD","amount":7,"nonce":%d}' "$A" "$B" "$1"; }

start_daemon d1.log
[ "$(post /v1/accounts op-token.1 "" "{\"account\":\"$A\"}" acc)" = 200 ] || fail "create A"
[ "$(post /v1/accounts op-token.1 "" "{\"account\":\"$B\"}" acc)" = 200 ] || fail "create B"
[ "$(post /v1/issue op-token.1 i1 "{\"to\":\"$A\",\"asset\":\"USD\",\"amount\":1000,\"nonce\":1}" iss)" = 201 ] ||
    fail "issue: $(cat iss.b)"
N=40
i=1
while [ $i -le $N ]; do
    (st=$(post /v1/transfer a-token.2 "k$i" "$(body $i)" "first$i") && echo "$st" >"first$i.st") &
    i=$((i + 1))
done
n=500 # kill as soon as a few answers are back: some committed and answered, some not
while [ "$(ls first*.st 2>/dev/null | wc -l)" -lt 5 ] && [ $n -gt 0 ]; do sleep 0.01; n=$((n - 1)); done
kill -9 "$pid"
wait 2>/dev/null
before=$(ls first*.st 2>/dev/null | wc -l)

start_daemon d2.log
commits=0 i=1
while [ $i -le $N ]; do
    st=$(post /v1/transfer a-token.2 "k$i" "$(body $i)" "second$i")
    [ "$st" = 201 ] || fail "k$i after the restart: $st $(cat "second$i.b")"
    commits=$((commits + 1))
    if [ -f "first$i.st" ] && [ "$(cat "first$i.st")" = 201 ]; then
        cmp -s "first$i.b" "second$i.b" || fail "k$i: the replay's bytes differ from the first answer"
        grep -qi '^idempotent-replayed: true' "second$i.h" || fail "k$i: replay not marked"
    fi
    st=$(post /v1/transfer a-token.2 "k$i" "$(body $i)" "third$i")
    [ "$st" = 201 ] || fail "k$i third: $st"
    cmp -s "second$i.b" "third$i.b" || fail "k$i: the third answer's bytes differ"
    grep -qi '^idempotent-replayed: true' "third$i.h" || fail "k$i: third not marked"
    i=$((i + 1))
done
bal() {
    curl -s -H "Authorization: Bearer op-token.1" \
        "http://127.0.0.1:$port/v1/accounts/$1/balance?asset=USD" |
        sed -n 's/.*"balance":\([0-9-]*\).*/\1/p'
}
[ "$(bal $A)" = $((1000 - 7 * commits)) ] || fail "A's balance $(bal $A), want $((1000 - 7 * commits))"
[ "$(bal $B)" = $((7 * commits)) ] || fail "B's balance $(bal $B), want $((7 * commits))"
st=$(post /v1/transfer a-token.2 other "$(printf '{"from":"%s","to":"%s","asset":"USD","amount":8,"nonce":3}' "$A" "$B")" used)
[ "$st" = 409 ] && grep -q '"code":"nonce_used"' used.b || fail "a used nonce: $st $(cat used.b)"
kill -TERM "$pid"
wait "$pid" || fail "the daemon did not exit 0 on SIGTERM"
# the ledger the wallet wrote, across the kill: ids, postings, balances, conservation
"$host" ledger --db "$work/var/wallet-ledger.db" verify >verify.log 2>&1 ||
    fail "ledger verify: $(cat verify.log)"
grep -q "^$((N + 1)) transfers" verify.log || fail "ledger verify: $(cat verify.log)"
echo "wallet.sh: OK: $N transfers, $before answered before SIGKILL, every replay byte-identical; balances exact"
