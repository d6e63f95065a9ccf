#!/bin/sh
# The daemon end to end (examples/daemon.lua, ron.node; label host):
#
#   daemon.sh HOST SOURCE_DIR WORK_DIR
#
# A real daemon process on a fast injected clock (one 60-second window per real second,
# rollover every 200 ms: the config file below) seals the plane WORK_DIR/var/plane into
# its WAL and exports into the file ledger WORK_DIR/var/ledger. Records come from
# examples/record.lua, a second process writing into the same plane. Phases:
#   1. daemon up, records; SIGTERM: exit 0 (graceful drain), "stopped" logged
#   2. records while the daemon is down (the plane keeps counting); daemon restarted,
#      more records; kill -9 of the daemon (un-compacted WAL: replayed, ledger says dup)
#   3. daemon restarted; wait until the ledger's totals equal what was recorded; SIGTERM:
#      exit 0; `verify` exits 0 and every (tenant, dimension) total is exact.
# Plus configuration errors: one line, exit 2; and G-21: a start with another window
# length on the live plane is refused (exit 1, one line), nothing changes.
. "$2/tests/host/lib.sh" && host_test daemon.sh "$@" || exit 1

r0=$(date +%s)
cat >fast.lua <<EOF
return dofile("$src/tests/host/fast_clock.lua")($r0)
EOF
# start_daemon LOG: the host itself in the background (pid = its pid, not a subshell's)
start_daemon() {
    "$host" run "$src/examples/daemon.lua" --config fast.lua --var var >"$1" 2>&1 &
    pid=$!
}
record() { "$host" run "$src/examples/record.lua" --config fast.lua --var var -; }

T1=6f1c3c1e-2b7a-4d5e-9a43-0c8e5b1f7a21
T2=b2d4e6f8-1a3c-4e5f-8b7d-9c0e2f4a6b8d
T3=3e9a1b5c-7d2f-4a6e-b1c8-5f0d3e7a9b24
: >expected.txt
batch() { # batch N: 120 lines over 3 tenants, 2 dimensions, 4 subjects; deterministic values
    usage_batch "$1" 120 4 37 101 5000
    record <batch.txt >>record.log 2>&1 || fail "record.lua batch $1"
}
alive() { kill -0 "$1" 2>/dev/null; }

# ---- configuration errors: one clear line, exit 2 ---------------------------------------
"$host" run "$src/examples/daemon.lua" --window 5 >cfg.out 2>cfg.err
[ $? -eq 2 ] || fail "--window 5: expected exit 2"
[ "$(wc -l <cfg.err)" -eq 1 ] && grep -q "window_len_s must be an integer in 60..3600" cfg.err ||
    fail "--window 5: expected one line naming window_len_s: $(cat cfg.err)"
echo 'return { windw_len_s = 60 }' >typo.lua
"$host" run "$src/examples/daemon.lua" --config typo.lua >cfg.out 2>cfg.err
[ $? -eq 2 ] && grep -q "unknown key 'windw_len_s'" cfg.err || fail "typo in config: $(cat cfg.err)"
"$host" run "$src/examples/daemon.lua" --check --config fast.lua >check.out 2>&1 ||
    fail "--check"
grep -q "window_len_s=60" check.out && grep -q "profile=macronode" check.out ||
    fail "--check does not print the effective configuration: $(cat check.out)"

# ---- phase 1 ---------------------------------------------------------------------------
start_daemon d1.log
wait_for 20 test -f var/plane || fail "the daemon did not create var/plane"
grep -q "INFO configuration: .*window_len_s=60" d1.log ||
    fail "the configuration (what differs from the defaults) not logged at INFO (P-6)"
batch 1
batch 2
sleep 1
kill -TERM $pid
wait $pid
rc=$?
[ $rc -eq 0 ] || fail "daemon exit $rc after SIGTERM, expected 0"
grep -q "INFO stopped: .* 0 aborted" d1.log || fail "no clean 'stopped' line after SIGTERM"

# ---- phase 2 ---------------------------------------------------------------------------
batch 3 # nobody seals now: the plane keeps the counts
start_daemon d2.log
wait_for 20 grep -q "INFO plane" d2.log || fail "second start"
batch 4
sleep 1.5
kill -KILL $pid
wait $pid 2>/dev/null
batch 5

# ---- phase 3 ---------------------------------------------------------------------------
start_daemon d3.log
awk '{ s[$1 " " $3] += $4 } END { for (k in s) print k, s[k] }' expected.txt | sort >want.txt
totals() {
    "$host" verify --totals var/ledger 2>/dev/null | awk '$1 == "total" { print $2, $3, $4 }' |
        sort >got.txt
    cmp -s want.txt got.txt
}
wait_for 60 totals || { diff want.txt got.txt >&2; fail "ledger totals never matched"; }
alive $pid || fail "the daemon died"
# the HTTP surface of the running daemon (loopback, a free port)
port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\) .*|\1|p' d3.log)
[ -n "$port" ] || fail "no 'listening on' line"
[ "$(curl -s "http://127.0.0.1:$port/readyz")" = ready ] || fail "/readyz is not 'ready'"
curl -s "http://127.0.0.1:$port/metrics" >metrics.txt || fail "GET /metrics"
grep -q '^accounting_exports_total{status="ok"} [1-9]' metrics.txt ||
    fail "/metrics has no exports: $(grep exports metrics.txt)"
# a second daemon on the same port: refused at start, one line, exit 1, no task started
"$host" run "$src/examples/daemon.lua" --var vz --listen "127.0.0.1:$port" >busy.out 2>busy.err
rc=$?
[ $rc -eq 1 ] && grep -q "cannot start: http: .*EADDRINUSE" busy.err ||
    fail "a start on a busy port: exit $rc, $(tail -1 busy.err)"
kill -TERM $pid
wait $pid
rc=$?
[ $rc -eq 0 ] || fail "daemon exit $rc after the final SIGTERM, expected 0"
"$host" verify var/ledger >verify.out 2>&1 || { cat verify.out >&2; fail "verify var/ledger"; }
grep -q "^OK$" verify.out || fail "verify did not say OK"
"$host" verify --quiet var/wal >wal.out 2>&1 || { cat wal.out >&2; fail "verify var/wal"; }
totals || fail "totals changed after shutdown"
# G-21 at the daemon: the window length of a live plane cannot change; a start with
# another one is refused with one line naming both, and nothing is touched
"$host" run "$src/examples/daemon.lua" --var var --window 120 --listen off >g21.out 2>g21.err
rc=$?
[ $rc -eq 1 ] || fail "G-21: a start with --window 120 on a 60 s plane: exit $rc, expected 1"
grep -q "cannot start: meter: Incompatible: .*window_len_s=60.* asks for 120" g21.err ||
    fail "G-21: no clear refusal: $(cat g21.err)"
totals || fail "G-21: the refused start changed the ledger"

# An operator's exporter module (examples/exporters/audit_log.lua) plugged in by the
# configuration file: every slice the ledger stored is one audit line, and nothing else
cat >audit.lua <<EOF
local base = dofile("fast.lua")
base.exporter = { module = "exporters.audit_log", dir = "va/ledger", log = "va/audit.jsonl" }
base.demo_rate = 600
return base
EOF
"$host" run "$src/examples/daemon.lua" --config audit.lua --var va >audit.log 2>&1 &
pid=$!
wait_for 20 test -s va/audit.jsonl || fail "the audit exporter wrote nothing"
sleep 1
kill -TERM $pid
wait $pid
rc=$?
[ $rc -eq 0 ] || fail "audit-exporter daemon exit $rc, expected 0"
"$host" verify va/ledger >va.out 2>&1 || { cat va.out >&2; fail "verify va/ledger"; }
stored=$(awk '$1 == "records" { print $2 }' va.out)
lines=$(grep -c '^{"tenant":"[0-9a-f-]*","dimension":"[a-z_]*","seq":[0-9]*,.*"b3":"[0-9a-f]\{64\}"}$' \
        va/audit.jsonl)
[ "$stored" -gt 0 ] && [ "$lines" -eq "$stored" ] ||
    fail "audit lines $lines, ledger records $stored"

# A micronode (amnesia: no WAL) whose plane is gone after a restart (a reboot wiped /run)
# has no stream heads left: it continues the ledger's chains from their heads (the
# ledger's list_heads, ra_meter_seed_head) instead of a second seq 1 the ledger would
# refuse as a fork; the totals of both runs land, the chains verify.
micro() { "$host" run "$src/examples/daemon.lua" --config fast.lua --var vm --profile micronode \
          --listen off >"$1" 2>&1 & pid=$!; }
mrecord() { "$host" run "$src/examples/record.lua" --config fast.lua --var vm --profile micronode -; }
mtotals() {
    "$host" verify --totals vm/ledger 2>/dev/null | awk '$1 == "total" { print $2, $3, $4 }' |
        sort >mgot.txt
    cmp -s mwant.txt mgot.txt
}
printf '%s\n' "$T1 u1 requests 3" "$T2 u2 bytes 700" >m1.txt
awk '{ s[$1 " " $3] += $4 } END { for (k in s) print k, s[k] }' m1.txt | sort >mwant.txt
micro m1.log
wait_for 20 test -f vm/plane || fail "micronode: no plane"
mrecord <m1.txt >>record.log 2>&1 || fail "micronode record 1"
wait_for 30 mtotals || fail "micronode: first run's totals never landed"
kill -TERM $pid; wait $pid || fail "micronode: exit after SIGTERM"
rm -f vm/plane
printf '%s\n' "$T1 u1 requests 4" "$T2 u9 bytes 50" >m2.txt
cat m1.txt m2.txt | awk '{ s[$1 " " $3] += $4 } END { for (k in s) print k, s[k] }' | sort >mwant.txt
micro m2.log
wait_for 20 grep -q "stream heads from the ledger: 2 listed, 2 continued" m2.log ||
    fail "micronode: heads not seeded from the ledger: $(grep 'stream heads' m2.log)"
mrecord <m2.txt >>record.log 2>&1 || fail "micronode record 2"
wait_for 30 mtotals || { diff mwant.txt mgot.txt >&2; fail "micronode: the restarted node's slices did not continue the chains"; }
kill -TERM $pid; wait $pid || fail "micronode: exit after the second SIGTERM"
"$host" verify vm/ledger >vm.out 2>&1 || { cat vm.out >&2; fail "verify vm/ledger"; }
grep -q "conflict" m2.log && fail "micronode: a conflict was logged after the restart"

echo "daemon.sh: OK: $(wc -l <expected.txt) records in 5 batches over 3 daemon runs" \
     "(SIGTERM, kill -9, SIGTERM); ledger totals exact:"
cat got.txt
