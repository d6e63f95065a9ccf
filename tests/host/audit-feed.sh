#!/bin/sh
# The ledger's feed in the audit trail, exactly once (issue 16; docs/AUDIT.md "The ledger's
# feed in the trail", AUD-I-32): a real daemon (examples/daemon.lua) on a fast injected
# clock with demo traffic, the ledger exporter (SQLite) and the audit trail. Each event of
# the ledger's feed (transfers, carried checkpoints) becomes one `ledger.event` record.
#  1. run 1 (SIGTERM), run 2 (demo traffic, then kill -9: a torn trail tail, sagas cut);
#  2. the feed's cursor is then rewound to 0, as if every cursor write had been lost;
#  3. run 3 (no traffic) replays the whole feed into the trail: every record folds into
#     its first one; `ledger verify --audit` finds every event seq 1..T exactly once,
#     with T at least the feed's head before run 3, and `audit verify` passes.
#
#   audit-feed.sh HOST SOURCE_DIR WORK_DIR
. "$2/tests/host/lib.sh" && host_test audit-feed.sh "$@" || exit 1
HOST_TEST_LOGS="*.txt"

"$host" audit keygen ron-audit/ron-accounting/daemon signer.key verifier.pub >/dev/null ||
    fail "keygen"
r0=$(date +%s)
cat >fast.lua <<EOF2
local cfg = dofile("$src/tests/host/fast_ledger.lua")($r0, "$src")
cfg.audit = { key_path = "$work/signer.key", checkpoint_every = 50, attest_interval_ms = 100,
            feed_interval_ms = 100 }
return cfg
EOF2

start() { # start LOG DEMO
    "$host" run "$src/examples/daemon.lua" --config fast.lua --var var --demo "$2" >"$1" 2>&1 &
    pid=$!
}

start run1.log 30
sleep 6
kill -TERM "$pid"
wait "$pid" || fail "run 1: the daemon exited $?"
grep -q 'audit feed: the exporter ledger.s feed is in the trail through seq' run1.log ||
    fail "run 1: the feed never caught up"

start run2.log 30
sleep 5
kill -KILL "$pid"
wait "$pid"

# the head of the feed before run 3 (verify names the sagas kill -9 cut: exit 1 is fine)
"$host" ledger --db var/ledger.db verify >verify2.txt 2>&1
h2=$(sed -n 's/.* accepted losses, \([0-9][0-9]*\) events.*/\1/p' verify2.txt)
[ -n "$h2" ] && [ "$h2" -ge 1 ] || fail "no events after run 2"
c2=$(cat var/audit/feed-exporter-main.seq)
echo 0 >var/audit/feed-exporter-main.seq # every cursor write lost: replay it all

start run3.log 0
i=0
until grep -q 'audit feed: the exporter ledger.s feed is in the trail through seq' run3.log; do
    i=$((i + 1))
    [ "$i" -le 600 ] || { kill -TERM "$pid"; fail "run 3: the feed never caught up"; }
    kill -0 "$pid" 2>/dev/null || fail "run 3: the daemon ended early"
    sleep 0.1
done
kill -TERM "$pid"
wait "$pid" || fail "run 3: the daemon exited $?"

"$host" audit verify --vkey verifier.pub var/audit >audit.txt 2>&1 || fail "audit verify"
"$host" ledger --db var/ledger.db recover >recover.txt 2>&1 || fail "ledger recover"
"$host" ledger --db var/ledger.db verify --audit var/audit --audit-vkey verifier.pub \
    >cross.txt 2>&1 || fail "ledger verify --audit (a seq missing or twice?)"
line=$(sed -n 's/.*, \([0-9][0-9]*\) of its feed through seq \([0-9][0-9]*\)).*/\1 \2/p' cross.txt)
f=${line% *} t=${line#* }
[ -n "$line" ] && [ "$f" -eq "$t" ] && [ "$t" -ge "$h2" ] ||
    fail "feed records $f through seq $t, the feed had $h2 events before run 3"
echo "ok: $h2 events before run 3 (cursor $c2 rewound to 0), $f feed records for seqs 1..$t, each once"
