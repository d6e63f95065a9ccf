#!/bin/sh
# `make run` as a newcomer sees it (issue 27 items 1-3; label host):
#
#   run.sh HOST SOURCE_DIR WORK_DIR
#
# 1. The make-run command itself (examples/daemon.lua, flags only: the embedded defaults)
#    with --demo 1000 --window 60 on a fresh state directory: at most 15 lines before the
#    daemon is ready, the banner names what runs (meter -> ledger -> wallet -> audit), the
#    secret files and the three next commands; the configuration line lists only the
#    flags given; the secrets are files of mode 0600 whose contents are never logged.
# 2. The same composition on a fast injected clock (one 60-second window per real second;
#    the configuration file says systems = "all", as the defaults do) with --demo 5000:
#    slices are sealed and rated into var/ledger.db, a prepaid balance goes down (GET
#    balance twice), the smallest wallet runs dry (the wallet's line, wallet_dry_total).
# 3. `verify DIR` on the stopped state directory: one line per link, all OK, exit 0; a
#    byte flipped in the audit log: that link FAILED, the verdict FAILED, exit 1.
. "$2/tests/host/lib.sh" && host_test run.sh "$@" || exit 1
HOST_TEST_LOGS="*.out"
pid=
wait_for() { # wait_for SECONDS CMD...: polls CMD every 0.2 s while the daemon lives
    n=$(($1 * 5)); shift
    while [ "$n" -gt 0 ]; do
        "$@" && return 0
        kill -0 "$pid" 2>/dev/null || return 1
        sleep 0.2; n=$((n - 1))
    done
    return 1
}
stop() { kill -TERM "$pid"; wait "$pid"; rc=$?; pid=; [ $rc -eq 0 ] || fail "exit $rc on SIGTERM"; }
mode() { stat -c %a "$1"; }
T3=3e9a1b5c-7d2f-4a6e-b1c8-5f0d3e7a9b24 # the demo's third tenant: the smallest wallet

# ---- 1. the make-run command on the embedded defaults ---------------------------------
"$host" run "$src/examples/daemon.lua" --var var1 --demo 1000 --window 60 \
    --listen 127.0.0.1:0 >first.log 2>&1 &
pid=$!
ready1() { grep -q "verify var1\$" first.log; }
wait_for 60 ready1 || fail "no banner (its last line names verify var1)"
lines=$(grep -n "verify var1\$" first.log | head -1 | cut -d: -f1)
[ "$lines" -le 15 ] || fail "$lines lines before the daemon is ready, at most 15"
for re in "running: meter -> ledger -> wallet -> audit" "var1/audit.key" "var1/operator.token" \
    "examples/record.lua --var var1" "/balance" "var1/ledger.db" \
    "INFO configuration: demo_rate=1000 listen=127.0.0.1:0 var_dir=var1 window_len_s=60\$"; do
    grep -q -- "$re" first.log || fail "the banner has no '$re'"
done
grep -q "=false" first.log && fail "defaulted keys logged: $(grep '=false' first.log)"
port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\) .*|\1|p' first.log)
[ -n "$port" ] || fail "no 'listening on' line"
wait_for 30 sh -c "[ \"\$(curl -s http://127.0.0.1:$port/readyz)\" = ready ]" ||
    fail "/readyz never said ready: $(curl -s "http://127.0.0.1:$port/readyz")"
for f in var1/audit.key var1/operator.token; do
    [ "$(mode "$f")" = 600 ] || fail "$f has mode $(mode "$f"), expected 600"
    secret=$(cat "$f")
    grep -qF -- "$secret" first.log && fail "the secret of $f is in the log"
done
[ -s var1/audit.vkey ] || fail "no verifier key var1/audit.vkey"
stop
# a second start keeps the secrets (created once) and says nothing of creating them
tok=$(cat var1/operator.token)
"$host" run "$src/examples/daemon.lua" --var var1 --window 60 --listen 127.0.0.1:0 \
    >second.log 2>&1 &
pid=$!
ready2() { grep -q "verify var1\$" second.log; }
wait_for 60 ready2 || fail "the second start has no banner"
grep -q "created" second.log && fail "the second start created secrets again"
[ "$(cat var1/operator.token)" = "$tok" ] || fail "the operator token changed"
grep -q "INFO configuration: listen=127.0.0.1:0 var_dir=var1 window_len_s=60\$" second.log ||
    fail "configuration line: $(grep configuration: second.log)"
stop

# ---- 2. sealed, rated, balances down, a wallet dry (fast clock) ------------------------
fast_product_conf fast.lua
"$host" run "$src/examples/daemon.lua" --config fast.lua --var var --demo 5000 >demo.log 2>&1 &
pid=$!
funded() { grep -q "INFO demo: 3 tenants with prepaid wallets" demo.log; }
wait_for 60 funded || fail "the demo's wallets were never funded"
port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\) .*|\1|p' demo.log)
wallet=$(sed -n 's|.*prepaid wallets (\([0-9a-f-]*\) .*|\1|p' demo.log)
[ -n "$port" ] && [ -n "$wallet" ] || fail "no port or wallet id in the log"
balance() {
    curl -s -H "Authorization: Bearer $(cat var/operator.token)" \
        "http://127.0.0.1:$port/v1/accounts/$wallet/balance?asset=USD" |
        sed -n 's/.*"balance":\([0-9-]*\).*/\1/p'
}
rated() {
    curl -s "http://127.0.0.1:$port/metrics" >metrics.out
    grep -q '^accounting_exports_total{status="ok"} [1-9]' metrics.out
}
wait_for 60 rated || fail "no slice exported into the ledger: $(grep exports metrics.out)"
b1=$(balance)
[ -n "$b1" ] || fail "GET balance of $wallet: no balance"
down() { b2=$(balance); [ -n "$b2" ] && [ "$b2" -lt "$b1" ]; }
wait_for 60 down || fail "the balance of $wallet never went down from $b1 (now ${b2:-?})"
dry() { grep -q "wallet ran dry: tenant=$T3" demo.log; }
wait_for 60 dry || fail "the smallest wallet never ran dry"
curl -s "http://127.0.0.1:$port/metrics" >metrics.out
grep -q '^wallet_dry_total{asset="USD"} [1-9]' metrics.out ||
    grep -q '^wallet_dry_total [1-9]' metrics.out ||
    fail "wallet_dry_total is not counted: $(grep dry metrics.out)"
stop
grep -q "ERROR" demo.log && fail "an ERROR in the log: $(grep ERROR demo.log | head -3)"

# ---- 3. one verify for the chain -------------------------------------------------------
# Start again without traffic and let the WAL drain (the slices the stop left unexported
# get rated), so the whole chain is verified; verify right after a stop under load, with
# nothing drained after it: tests/host/stop-drain.sh (host-stop-drain).
"$host" run "$src/examples/daemon.lua" --config fast.lua --var var >idle.log 2>&1 &
pid=$!
port=
drained() {
    [ -n "$port" ] || port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\) .*|\1|p' idle.log)
    [ -n "$port" ] && curl -s "http://127.0.0.1:$port/metrics" >metrics.out &&
        grep -q '^accounting_wal_entries 0$' metrics.out &&
        grep -q '^accounting_backlog_slices 0$' metrics.out
}
wait_for 60 drained || fail "the WAL never drained after the restart"
stop
"$host" verify var >verify.out 2>&1
rc=$?
[ $rc -eq 0 ] || fail "verify var: exit $rc"
for l in wal slices transfers balances audit checkpoints; do
    grep -Eq "^  $l +OK " verify.out || fail "verify: no OK line for $l"
done
grep -q "^OK: every link holds$" verify.out || fail "verify: no verdict"
grep -Eq "^  slices +OK .* [1-9][0-9]* usage slices" verify.out || fail "verify: no usage slices"
seg=$(ls -S var/audit/* | head -1)
size=$(stat -c %s "$seg")
off=$((size / 2))
byte=$(od -An -tu1 -j "$off" -N1 "$seg" | tr -d ' ')
printf '%b' "\\$(printf '%03o' $(((byte + 1) % 256)))" |
    dd of="$seg" bs=1 seek="$off" conv=notrunc 2>/dev/null
"$host" verify var >tampered.out 2>&1
rc=$?
[ $rc -eq 1 ] || fail "verify after a flipped byte in $seg: exit $rc, expected 1"
grep -Eq "^  audit +FAILED" tampered.out || fail "the audit link did not fail"
grep -q "^FAILED" tampered.out || fail "no FAILED verdict"
echo "run.sh: OK ($lines lines before ready)"
