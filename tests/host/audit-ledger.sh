#!/bin/sh
# Usage, money and audit attest to each other (PRODUCT.md §9, issue 16 phase 2): a real
# daemon (examples/daemon.lua) on a fast injected clock with demo traffic, the ledger
# exporter (usage rated into SQLite) and the audit trail. After SIGTERM (exit 0):
# `audit verify --list` passes and every slice the daemon exported ok has a "ledger"
# record (each transfer once, its event seq within the ledger's 1..n); `ledger
# verify` passes after `recover`.
#
#   audit-ledger.sh HOST SOURCE_DIR WORK_DIR
. "$2/tests/host/lib.sh" && host_test audit-ledger.sh "$@" || exit 1
HOST_TEST_LOGS="*.txt"

r0=$(date +%s)
cat >fast.lua <<EOF2
local cfg = dofile("$src/tests/host/fast_ledger.lua")($r0, "$src")
cfg.audit = { checkpoint_every = 0 }
return cfg
EOF2

"$host" run "$src/examples/daemon.lua" --config fast.lua --var var --demo 30 >daemon.log 2>&1 &
pid=$!
sleep 8
kill -TERM "$pid"
wait "$pid" || fail "the daemon exited $?"

"$host" audit verify --list var/audit >list.txt 2>&1 || fail "audit verify"
# A SIGTERM may cut a commit short (the offloaded store's call is canceled at shutdown):
# `recover` finishes it, outside the daemon and so without a trail (f of them at most).
"$host" ledger --db var/ledger.db recover >recover.txt 2>&1 || fail "ledger recover"
f=$(sed -n 's/^[0-9]* pending sagas, \([0-9]*\) finished.*/\1/p' recover.txt)
[ -n "$f" ] || fail "no recover summary"
"$host" ledger --db var/ledger.db verify >verify.txt 2>&1 || fail "ledger verify"
n=$(sed -n 's/^\([0-9][0-9]*\) transfers .*/\1/p' verify.txt)
[ -n "$n" ] && [ "$n" -gt 0 ] || fail "no transfers rated"
grep ' ledger ' list.txt | sed -n 's/.* transfer="\([0-9a-f]*\)".*/\1/p' | sort >audited.txt
a=$(wc -l <audited.txt)
# The hook runs when the daemon sees its commit complete: at least one record per slice
# exported ok (a commit done before the shutdown canceled its put's last flush has one too).
# A commit whose last store call was still in the threadpool when the shutdown canceled
# the wait is in the ledger (a dup on the next start) but has no record: the feed-driven
# trail (one ledger.event record per event seq, AUD-I-32, host-audit-feed) covers it.
ok=$(sed -n 's/.*status: backlog=[0-9]* exported ok=\([0-9]*\) .*/\1/p' daemon.log | tail -1)
[ -n "$ok" ] || fail "no status line with the exported count"
[ "$a" -ge "$ok" ] && [ "$a" -le "$n" ] && [ "$a" -ge 1 ] ||
    fail "$n transfers ($f finished by recover), $ok exported ok, $a ledger records"
[ "$(sort -u audited.txt | wc -l)" -eq "$a" ] || fail "a transfer audited twice"
# each record names its transfer's event: distinct seqs of the ledger's gapless feed 1..m
# (m events: the transfers' and the account versions' and rejections', LED-68)
m=$(sed -n 's/.* \([0-9][0-9]*\) events.*/\1/p' verify.txt)
[ -n "$m" ] && [ "$m" -ge "$n" ] || fail "no event count in verify's summary"
grep ' ledger ' list.txt | sed -n 's/.* event_seq=\([0-9]*\) .*/\1/p' | sort -n >seqs.txt
[ "$(sort -u seqs.txt | wc -l)" -eq "$a" ] || fail "an event seq audited twice"
[ "$(head -1 seqs.txt)" -ge 1 ] && [ "$(tail -1 seqs.txt)" -le "$m" ] ||
    fail "event seqs outside 1..$m"
echo "ok: $n transfers rated ($f finished by recover), $ok exported ok, $a ledger records in a trail that verifies"
