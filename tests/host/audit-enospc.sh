#!/bin/sh
# A full audit disk fails loudly and recovers by itself (docs/AUDIT.md "When the trail fails",
# AUD-I-42; label host; needs root to mount a small tmpfs, else exit 77 = skipped):
#
#   audit-enospc.sh HOST SOURCE_DIR WORK_DIR
#
# The trail on a tmpfs of 512 KiB (the meter's WAL and plane elsewhere), a daemon with ingest
# and audit = { key_path, recover_min_ms = 50, recover_max_ms = 400 }. A filler file takes
# the rest of the file system; refused requests keep coming. Then:
#  - the trail fails and says so: ONE line at ERROR naming the trail's directory, the file
#    and the system's reason (ENOSPC, "No space left on device"), and the file system (its
#    mount point, tmpfs); audit_failed 1, audit_io_errors_total{errno="ENOSPC"},
#    audit_drop_total{reason="audit_failed"} in /metrics;
#  - /readyz stays 200 (audit.required = false) and carries the reason on a line after
#    "ready"; metering is not affected (a good batch is 200 and counted while it fails);
#  - the filler removed, the trail recovers by itself: audit_failed 0,
#    audit_recoveries_total 1, a WARN "recovered after N attempt(s)";
#  - after SIGTERM, `audit verify --list --vkey` passes and holds ONE gap record with reason
#    audit_failed whose `dropped` is exactly the number of event numbers `n` missing from the
#    trail, and whose from_ts_ms..to_ts_ms lies between the records around them.
# A second daemon with audit.required = true: while its trail fails, /readyz is 503 with the
# reason. Before: /readyz stayed 200 with nothing, the one log line was a WARN saying
# "input/output error", every later event was shed (audit_closed) with no gap and the trail
# never came back until a restart.
[ -d "$3/fs" ] && umount "$3/fs" 2>/dev/null # (a mount left by an interrupted run)
. "$2/tests/host/lib.sh" && host_test audit-enospc.sh "$@" || exit 1
mkdir fs || exit 1
if ! mount -t tmpfs -o size=512k tmpfs fs 2>mount.err; then
    echo "audit-enospc.sh: SKIPPED: cannot mount a tmpfs ($(cat mount.err)): needs root" >&2
    exit 77
fi
pid=""
cleanup() { [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; umount "$work/fs" 2>/dev/null; }
trap cleanup EXIT

T1=6f1c3c1e-2b7a-4d5e-9a43-0c8e5b1f7a21
TOK=enospc-token.1
H1=$(printf %s "$TOK" | b3sum --no-names) || fail "b3sum"
"$host" audit keygen ron-audit/ron-accounting/daemon signer.key verifier.pub >/dev/null ||
    fail "keygen"

config() { # config REQUIRED
    cat >conf.lua <<EOF
return { listen = "127.0.0.1:0", status_interval_s = 0, drain_deadline_ms = 3000,
    window_len_s = 60, capacity_rows = 10000, shards = 4,
    ingest = { tokens = { ["$H1"] = "$T1" }, log_every = 100000 },
    audit = { dir = "$work/fs/audit", key_path = "$work/signer.key", interval_ms = 5,
              recover_min_ms = 50, recover_max_ms = 400, required = $1 } }
EOF
}
stop_daemon() {
    kill -TERM "$pid"
    wait "$pid"
    rc=$?
    pid=""
    [ $rc -eq 0 ] || fail "daemon exit $rc after SIGTERM"
}
refuse() { curl -s -o /dev/null -H 'Content-Type: application/json' -d '{"records":[]}' "$base/v1/records"; }
good() {
    curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TOK" \
        -H 'Content-Type: application/json' \
        -d "{\"records\":[{\"tenant\":\"$T1\",\"subject\":\"u\",\"dimension\":\"bytes\",\"value\":$1}]}" \
        "$base/v1/records"
}
metric() { curl -s "$base/metrics" | sed -n "s/^$1 //p"; }
fill() { dd if=/dev/zero of=fs/filler bs=4k 2>/dev/null; sync; }
# refuses requests until the trail fails
until_failed() {
    n=600
    until [ "$(metric audit_failed)" = 1 ]; do
        refuse; refuse; refuse
        n=$((n - 1)); [ $n -gt 0 ] || fail "the trail did not fail on a full disk"
    done
}

config false
daemon_start d1.log conf.lua "$work/var"
for _ in 1 2 3 4 5; do refuse; done
fill
until_failed
for _ in $(seq 1 20); do refuse; done
# loud: one ERROR with the directory, the file, the reason and the file system
grep -q "ERROR audit: the audit trail $work/fs/audit failed: IoError: .*write $work/fs/audit/seg-[0-9]*\.rau: No space left on device (ENOSPC); file system mounted at $work/fs (tmpfs, " d1.log ||
    fail "no ERROR line naming the file, ENOSPC and the file system: $(grep -i 'audit' d1.log | tail -5)"
[ "$(grep -c 'ERROR audit: the audit trail' d1.log)" = 1 ] || fail "not ONE ERROR line"
grep -q 'input/output error' d1.log && fail "the log still says input/output error"
curl -s "$base/metrics" >m1.txt
grep -q '^audit_io_errors_total{errno="ENOSPC"} [1-9]' m1.txt || fail "no ENOSPC metric"
grep -q '^audit_drop_total{reason="audit_failed"} [1-9]' m1.txt || fail "no audit_failed drops"
# readiness: 200, with the reason (audit.required = false)
code=$(curl -s -o ready.txt -w '%{http_code}' "$base/readyz")
[ "$code" = 200 ] || fail "/readyz $code: $(cat ready.txt)"
grep -q '^audit trail failed: .*ENOSPC.*(audit.required = false: serving and metering without it)$' ready.txt ||
    fail "/readyz does not say the trail failed: $(cat ready.txt)"
# metering is not affected
r0=$(metric accounting_ingest_records_total)
[ "$(good 5)" = 200 ] || fail "a good batch while the trail fails"
[ "$(metric accounting_ingest_records_total)" = $((r0 + 1)) ] || fail "the good batch was not counted"
# space returns: the trail recovers by itself
rm -f fs/filler
n=300
until [ "$(metric audit_failed)" = 0 ] && [ "$(metric audit_recoveries_total)" = 1 ]; do
    n=$((n - 1)); [ $n -gt 0 ] || fail "the trail did not recover"; sleep 0.05
done
grep -q "WARN audit: the audit trail $work/fs/audit recovered after [0-9]* attempt(s) in [0-9]* ms: [1-9][0-9]* event(s) were shed meanwhile" d1.log ||
    fail "no recovery line"
for _ in 1 2 3; do refuse; done
stop_daemon

"$host" audit verify --list --vkey verifier.pub fs/audit >list.txt 2>&1 || fail "verify: $(tail list.txt)"
[ "$(grep -c '^record [0-9]* gap .*reason="audit_failed"' list.txt)" = 1 ] ||
    fail "not ONE gap record of audit_failed: $(grep ' gap ' list.txt)"
# the gap's count is exactly the event numbers missing from the trail, its range between
# the records around them
awk '
    / gap / && /reason="audit_failed"/ {
        match($0, /dropped=[0-9]+/); dropped = substr($0, RSTART + 8, RLENGTH - 8) + 0
        match($0, /from_ts_ms=[0-9]+/); from = substr($0, RSTART + 11, RLENGTH - 11) + 0
        match($0, /to_ts_ms=[0-9]+/); to = substr($0, RSTART + 9, RLENGTH - 9) + 0
    }
    /^record / && / n=[0-9]+/ {
        match($0, / n=[0-9]+/); k = substr($0, RSTART + 3, RLENGTH - 3) + 0
        match($0, /ts_ms=[0-9]+/); ts[k] = substr($0, RSTART + 6, RLENGTH - 6) + 0
        if (k > max) max = k
    }
    END {
        missing = 0; lo = 0; hi = 0
        for (k = 1; k <= max; k++) if (!(k in ts)) { missing++; if (!lo) lo = k; hi = k }
        printf "gap dropped=%d, %d event numbers missing (%d..%d)\n", dropped, missing, lo, hi
        if (dropped != missing || missing == 0) exit 1
        if (from < ts[lo - 1] || to > ts[hi + 1] || from > to) { print "range"; exit 2 }
    }' list.txt >gap.txt || fail "the gap: $(cat gap.txt)"
cat gap.txt
grep -q "the newest signed checkpoint covers .* of" list.txt || fail "no checkpoint coverage line"

# audit.required = true: a failing trail makes /readyz 503
config true
daemon_start d2.log conf.lua "$work/var"
fill
until_failed
code=$(curl -s -o ready2.txt -w '%{http_code}' "$base/readyz")
[ "$code" = 503 ] || fail "/readyz with audit.required = true: $code"
grep -q '^audit trail failed: .*ENOSPC' ready2.txt || fail "the 503 reason: $(cat ready2.txt)"
[ "$(good 7)" = 200 ] || fail "metering while not ready"
rm -f fs/filler
n=300
until [ "$(metric audit_failed)" = 0 ]; do
    n=$((n - 1)); [ $n -gt 0 ] || fail "run 2: the trail did not recover"; sleep 0.05
done
stop_daemon
"$host" audit verify --vkey verifier.pub fs/audit >v2.txt 2>&1 || fail "verify 2: $(tail v2.txt)"
echo "audit-enospc.sh: ok ($(cat gap.txt))"
