#!/bin/sh
# Usage, money and audit attest to each other (PRODUCT.md §9, issue 16; docs/AUDIT.md
# "Cross-attestation", AUD-I-30, AUD-I-31, LED-60, LED-61): a real daemon
# (examples/daemon.lua) on a fast injected clock with demo traffic, the ledger exporter
# (SQLite) and the audit trail with a signing key and a checkpoint every 5 records. The daemon's audit_attest task
# carries the checkpoints into the ledger's event feed.
#  1. run 1: `ledger verify --audit DIR --audit-vkey PUB` passes with >= 1 carried
#     checkpoint, and `audit verify --vkey PUB` passes;
#  2. runs 2 and 3 (no traffic, no new checkpoint: checkpoint_interval_ms = 0, and run 2 is
#     killed with SIGKILL, so it writes no stop checkpoint, AUD-I-39): each carries the
#     newest checkpoint (run 1's last, written at its stop) and run 3 appends nothing
#     (idempotent per (origin, size) across restarts);
#  3. the audit log rewritten (moved away, a new trail grown by run 4 under the same key):
#     `audit verify` of the new log alone passes, `ledger verify --audit` of it fails
#     naming the carried checkpoints it does not contain (a fork), and so does the old
#     log's cross-check now that the ledger also carries the new log's roots;
#  4. a sharded trail (audit.shards = 2, AUD-I-38; a fresh var): each chain verifies with
#     its own key, both chains' checkpoints are carried, and `ledger verify --audit`
#     checks both (a rewritten second chain is named).
#
#   audit-attest.sh HOST SOURCE_DIR WORK_DIR
. "$2/tests/host/lib.sh" && host_test audit-attest.sh "$@" || exit 1
HOST_TEST_LOGS="*.txt"

"$host" audit keygen ron-audit/ron-accounting/daemon signer.key verifier.pub >/dev/null ||
    fail "keygen"

r0=$(date +%s)
config() { # config EVERY [SHARDS [INTERVAL_MS]] -> fast.lua
    fast_conf fast.lua <<EOF2
    capacity_rows = 10000, shards = 4,
    exporter = { module = "ron.ledger.exporter",
                 store = { backend = "sqlite", path = "var/ledger.db", offload = true },
                 card = "$src/examples/cards/acme.lua", book = "main", node = "gw-1" },
    audit = { key_path = "$work/signer.key", checkpoint_every = $1, attest_interval_ms = 100,
              shards = ${2:-1}, checkpoint_interval_ms = ${3:-60000} },
EOF2
}

# run LOG DEMO SECONDS|wait [SIGNAL]: the daemon; "wait" stops it once it logged its first
# carry, with SIGTERM (a clean stop: a checkpoint of the head) or SIGNAL
run() {
    "$host" run "$src/examples/daemon.lua" --config fast.lua --var var --demo "$2" >"$1" 2>&1 &
    pid=$!
    if [ "$3" = wait ]; then
        wait_line "$1" 'audit attest: the exporter ledger carries' 60 "$1: a carried checkpoint"
    else
        sleep "$3"
    fi
    kill -"${4:-TERM}" "$pid"
    wait "$pid"
    rc=$?
    [ "$rc" = 0 ] || [ "${4:-TERM}" = KILL ] || fail "$1: the daemon exited $rc"
}

carried() { # the number of audit.checkpoint events in the ledger
    "$host" ledger --db var/ledger.db verify >"$1" 2>&1 || fail "ledger verify ($1)"
    sed -n 's/.*, \([0-9][0-9]*\) audit checkpoints carried.*/\1/p' "$1"
}

# 1. traffic: checkpoints every 5 records, carried as they come
config 5
run run1.log 30 8
"$host" ledger --db var/ledger.db recover >recover.txt 2>&1 || fail "ledger recover"
"$host" audit verify --vkey verifier.pub var/audit >audit1.txt 2>&1 || fail "audit verify"
"$host" ledger --db var/ledger.db verify --audit var/audit --audit-vkey verifier.pub \
    >cross1.txt 2>&1 || fail "ledger verify --audit"
a1=$(sed -n 's/.*, \([0-9][0-9]*\) audit checkpoints carried.*/\1/p' cross1.txt)
[ -n "$a1" ] && [ "$a1" -ge 1 ] || fail "no checkpoint carried in run 1"
grep -q 'audit records ([1-9][0-9]* of this ledger' cross1.txt ||
    fail "no ledger record of the trail names a transfer of this ledger"

# 2. restarts without traffic and without a new checkpoint: idempotent
config 100000 1 0
run run2.log 0 wait KILL
# (run 2 exports what run 1 left in the WAL: a commit the kill cut short is finished here)
"$host" ledger --db var/ledger.db recover >recover2.txt 2>&1 || fail "ledger recover after the kill"
a2=$(carried verify2.txt)
[ "$a2" -eq "$a1" ] || [ "$a2" -eq $((a1 + 1)) ] || fail "run 2: $a1 -> $a2 carried"
run run3.log 0 wait
grep -q 'carries checkpoint .*(already there)' run3.log || fail "run 3 appended a checkpoint"
a3=$(carried verify3.txt)
[ "$a3" -eq "$a2" ] || fail "run 3: $a2 -> $a3 carried (not idempotent)"
"$host" ledger --db var/ledger.db verify --audit var/audit --audit-vkey verifier.pub \
    >cross3.txt 2>&1 || fail "ledger verify --audit after the restarts"

# 3. the trail rewritten under the same key: a fork the cross-check names
mv var/audit audit.orig || fail "mv"
config 5
run run4.log 30 4
"$host" audit verify --vkey verifier.pub var/audit >audit4.txt 2>&1 ||
    fail "the rewritten log should verify on its own"
if "$host" ledger --db var/ledger.db verify --audit var/audit --audit-vkey verifier.pub \
    >cross4.txt 2>&1; then fail "the cross-check missed the rewritten audit log"; fi
grep -q '(audit.checkpoint).*carried checkpoint' cross4.txt ||
    fail "the cross-check does not name the carried checkpoint"
if "$host" ledger --db var/ledger.db verify --audit audit.orig --audit-vkey verifier.pub \
    >cross5.txt 2>&1; then fail "the old log's cross-check missed the new log's roots"; fi
n4=$(grep -c '(audit.checkpoint)' cross4.txt)
c4=$(grep -c 'audit attest: the exporter ledger: .*rewritten' run4.log)

# 4. two chains: var/audit (daemon) and var/audit/daemon.1, each with its own key
mv var var.unsharded || fail "mv var"
"$host" audit keygen ron-audit/ron-accounting/daemon.1 signer.key.1 verifier.pub.1 >/dev/null ||
    fail "keygen daemon.1"
config 5 2
run run6.log 30 8
grep -q 'audit attest: the exporter ledger carries checkpoint ron-audit/ron-accounting/daemon.1 ' \
    run6.log || fail "run 6: chain 2's checkpoints not carried"
"$host" ledger --db var/ledger.db recover >recover6.txt 2>&1 || fail "ledger recover (6)"
"$host" audit verify --vkey verifier.pub var/audit >audit6.txt 2>&1 || fail "audit verify (6)"
"$host" audit verify --vkey verifier.pub.1 var/audit/daemon.1 >audit6b.txt 2>&1 ||
    fail "audit verify of chain 2"
"$host" ledger --db var/ledger.db verify --audit var/audit --audit-vkey verifier.pub \
    >cross6.txt 2>&1 || fail "ledger verify --audit of two chains"
mv var/audit/daemon.1 chain2.orig || fail "mv chain 2"
config 5 2
run run7.log 30 4
if "$host" ledger --db var/ledger.db verify --audit var/audit --audit-vkey verifier.pub \
    >cross7.txt 2>&1; then fail "the cross-check missed the rewritten second chain"; fi
grep -q 'carried checkpoint ron-audit/ron-accounting/daemon.1 ' cross7.txt ||
    fail "the cross-check does not name chain 2's carried checkpoint"
echo "ok: $a1 checkpoints carried in run 1 (both verifies pass), restarts idempotent ($a2, $a3)," \
     "rewritten log: $n4 problems named by the cross-check, $c4 conflicts seen by the daemon;" \
     "two chains: both carried and cross-checked, a rewritten second chain named"
