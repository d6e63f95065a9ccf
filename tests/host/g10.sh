#!/bin/sh
# G-10 end to end (seed 000: Record -> Seal -> Export to a ledger -> Verify digest,
# idempotence, ordering, metrics), over HTTP into PostgreSQL; label host, postgres:
#
#   g10.sh HOST SOURCE_DIR WORK_DIR
#
#   records (examples/record.lua) -> daemon A's plane -> A seals (fast injected clock: one
#   60-second window per real second, a tick every 200 ms) -> A's WAL -> A's runtime ->
#   exporters.http (libcurl on A's loop) -> PUT /v1/slices/... -> daemon B, the ledger
#   receiver (receiver = { backend = exporters.postgres }) -> a real PostgreSQL started by
#   tests/pg/pg-harness.sh (torn down at the end, also if this script dies).
#
# Phases:
#   1. B up (bearer token required), A up; two batches; wait until PostgreSQL holds them.
#   2. B frozen (SIGSTOP): A's PUTs time out (retry_timeout) and pile up in B's socket
#      backlog; a batch; A killed with kill -9 while its slices are un-ACKed in its WAL;
#      B resumed (SIGCONT): it stores the PUTs of the dead A (stale requests); a batch
#      while A is down (the plane keeps the counts).
#   3. A restarted: its WAL replays the un-ACKed slices, which B answers `dup`; a last batch;
#      wait until the totals match.
# Checks: `verify --totals postgres://...` exits 0 (every digest recomputed, every chain in
# order, heads = last slices) and its totals per (tenant, dimension) equal what was
# recorded; one row per (stream, seq), seqs 1..head without holes, no two rows alike;
# A's /metrics counts ok + dup exports and dup >= 1 (the replays); B's /metrics counts
# exactly one `ok` per row stored and dup >= 1; a replayed body (curl, from PostgreSQL's
# copy) is answered 200 dup, and b3sum of it is its b3; without the token: 401; both
# daemons exit 0 on SIGTERM. No wall-clock assertion: every wait is a bounded poll.
. "$2/tests/host/lib.sh" && host_test g10.sh "$@" || exit 1

pgdir="" apid="" bpid=""
cleanup() {
    [ -n "$apid" ] && kill -9 "$apid" 2>/dev/null
    [ -n "$bpid" ] && { kill -CONT "$bpid"; kill -9 "$bpid"; } 2>/dev/null
    [ -n "$pgdir" ] && sh "$src/tests/pg/pg-harness.sh" stop "$pgdir" >/dev/null 2>&1
}
trap cleanup EXIT
trap 'exit 1' INT TERM

fail() {
    echo "g10.sh: FAILED: $*" >&2
    for f in "$work"/*.log; do [ -f "$f" ] && { echo "--- $f" >&2; tail -25 "$f" >&2; }; done
    exit 1
}

# ---- PostgreSQL ------------------------------------------------------------------------
out=$(sh "$src/tests/pg/pg-harness.sh" start --owner $$ --fsync off 2>pg.log)
rc=$?
if [ $rc -eq 3 ]; then echo "g10.sh: SKIP: PostgreSQL is not installed" >&2; exit 77; fi
[ $rc -eq 0 ] || fail "pg-harness start (exit $rc): $(cat pg.log)"
pgdir=$(printf '%s' "$out" | cut -f1)
conninfo=$(printf '%s' "$out" | cut -f2)
url=$(sh "$src/tests/pg/pg-harness.sh" url "$pgdir")
psql_q() { sh "$src/tests/pg/pg-harness.sh" psql "$pgdir" -At -c "$1"; }

# ---- daemon B: the ledger receiver into PostgreSQL -------------------------------------
token=g10-secret-token
token_hash=$(printf '%s' "$token" | b3sum --no-names)
cat >b.lua <<EOF
return {
    listen = "127.0.0.1:0", status_interval_s = 0, window_len_s = 60,
    receiver = {
        backend = { module = "ron.accounting.export.exporters.postgres", schema = "g10",
                    conninfo = "$conninfo", connect_timeout_ms = 2000,
                    query_timeout_ms = 5000 },
        producers = { ["g10-gateway"] = { token_hash = "$token_hash", tenants = "*" } },
    },
}
EOF
"$host" run "$src/examples/daemon.lua" --config b.lua --var vb >b.log 2>&1 &
bpid=$!
wait_for 20 grep -q "INFO receiver: PUT http://127.0.0.1:" b.log || fail "B did not start"
bport=$(sed -n 's|.*INFO receiver: PUT http://127.0.0.1:\([0-9]*\)/.*|\1|p' b.log)
burl="http://127.0.0.1:$bport"

# ---- daemon A: a fast clock, exporting over HTTP to B ----------------------------------
r0=$(date +%s)
cat >a.lua <<EOF
local cfg = dofile("$src/tests/host/fast_clock.lua")($r0)
cfg.exporter = { module = "ron.accounting.export.exporters.http", url = "$burl/v1/slices",
                 token = "$token", connect_timeout_ms = 1000, timeout_ms = 1000 }
cfg.backoff = { base_ms = 20, cap_ms = 200 }
return cfg
EOF
start_a() {
    "$host" run "$src/examples/daemon.lua" --config a.lua --var va >"$1" 2>&1 &
    apid=$!
    wait_for 20 grep -q "INFO plane" "$1" || fail "A did not start ($1)"
}
record() { "$host" run "$src/examples/record.lua" --config a.lua --var va -; }

T1=6f1c3c1e-2b7a-4d5e-9a43-0c8e5b1f7a21
T2=b2d4e6f8-1a3c-4e5f-8b7d-9c0e2f4a6b8d
T3=3e9a1b5c-7d2f-4a6e-b1c8-5f0d3e7a9b24
: >expected.txt
batch() { # batch N: 90 lines over 3 tenants, 2 dimensions, 3 subjects; deterministic
    usage_batch "$1" 90 3 53 97 7000
    record <batch.txt >>record.log 2>&1 || fail "record.lua batch $1"
}
totals() { # the ledger's totals per stream = what was recorded
    awk '{ s[$1 " " $3] += $4 } END { for (k in s) print k, s[k] }' expected.txt | sort >want.txt
    "$host" verify --totals --schema g10 "$url" 2>/dev/null |
        awk '$1 == "total" { split($2, a, "/"); print a[1], a[2], $3 }' | sort >got.txt
    cmp -s want.txt got.txt
}
metric() { # metric URL SAMPLE -> its value (0 when absent)
    curl -s "$1/metrics" | awk -v s="$2" '$1 == s { print $2; f = 1 } END { if (!f) print 0 }'
}

# ---- phase 1 ---------------------------------------------------------------------------
start_a a1.log
# issue 14 item 13: with an HTTP exporter there is no local ledger to point the operator at
wait_for 20 grep -q "INFO exporter ron.accounting.export.exporters.http (slices are not kept" a1.log ||
    fail "A does not name its exporter"
! grep -q "INFO ledger " a1.log || fail "A names a local ledger it does not use"
batch 1
batch 2
wait_for 30 totals || { diff want.txt got.txt >&2; fail "phase 1: PostgreSQL never held the records"; }

# ---- phase 2: B frozen, A killed mid-export, B resumed ---------------------------------
a1url="http://127.0.0.1:$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\) .*|\1|p' a1.log)"
kill -STOP "$bpid"
batch 3
# A seals batch 3 within ~1.2 s; its PUTs then time out (1 s) and are retried: once one
# did, the bytes of a PUT sit in B's socket backlog
timed_out() { [ "$(metric "$a1url" 'accounting_exports_total{status="retry_timeout"}')" -ge 2 ]; }
wait_for 30 timed_out || fail "phase 2: A's PUTs to the frozen B never timed out"
kill -9 "$apid"
wait "$apid" 2>/dev/null
apid=""
kill -CONT "$bpid"
batch 4

# ---- phase 3: A restarted: replays answered dup ----------------------------------------
start_a a2.log
aport=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\) .*|\1|p' a2.log)
[ -n "$aport" ] || fail "no 'listening on' line from A"
aurl="http://127.0.0.1:$aport"
batch 5
wait_for 40 totals || { diff want.txt got.txt >&2; fail "the totals never matched"; }
kill -0 "$apid" 2>/dev/null || fail "A died"
kill -0 "$bpid" 2>/dev/null || fail "B died"

# ---- checks ----------------------------------------------------------------------------
"$host" verify --schema g10 "$url" >verify.out 2>&1 || { cat verify.out >&2; fail "verify"; }
grep -q "^OK$" verify.out || fail "verify did not say OK"
rows=$(psql_q "SELECT count(*) FROM g10.slices")
[ "$rows" -gt 0 ] || fail "no rows"
# one row per (stream, seq), seqs 1..head without holes, no two rows with the same bytes
holes=$(psql_q "SELECT count(*) FROM (SELECT tenant, dimension FROM g10.slices
                GROUP BY 1, 2 HAVING count(*) <> max(seq) OR min(seq) <> 1) x")
[ "$holes" = 0 ] || fail "$holes stream(s) with holes or duplicate seqs"
same=$(psql_q "SELECT count(*) - count(DISTINCT b3) FROM g10.slices")
[ "$same" = 0 ] || fail "$same duplicate slice(s) (same b3 twice)"
heads=$(psql_q "SELECT count(*) FROM g10.heads h WHERE h.seq <> (SELECT max(seq)
                FROM g10.slices s WHERE s.tenant = h.tenant AND s.dimension = h.dimension)")
[ "$heads" = 0 ] || fail "$heads head row(s) not at the last slice"

# metrics: A (this run) exported with ok and dup; B stored one ok per row, and saw dups
a_ok=$(metric "$aurl" 'accounting_exports_total{status="ok"}')
a_dup=$(metric "$aurl" 'accounting_exports_total{status="dup"}')
b_ok=$(metric "$burl" 'accounting_receiver_slices_total{status="ok"}')
b_dup=$(metric "$burl" 'accounting_receiver_slices_total{status="dup"}')
b_conflict=$(metric "$burl" 'accounting_receiver_slices_total{status="conflict"}')
[ "$a_ok" -gt 0 ] || fail "A's /metrics: no ok exports"
[ "$a_dup" -ge 1 ] || fail "A's /metrics: no dup export (the WAL replays after kill -9)"
[ "$b_ok" -eq "$rows" ] || fail "B stored $b_ok slices ok, PostgreSQL holds $rows rows"
[ "$b_dup" -ge "$a_dup" ] || fail "B answered $b_dup dups, A saw $a_dup"
[ "$b_conflict" -eq 0 ] || fail "B answered $b_conflict conflicts"
[ $((a_ok + a_dup)) -le "$rows" ] || fail "A's second run acked $a_ok + $a_dup > $rows rows"

# idempotence at the wire: PostgreSQL's copy of a slice, PUT again by hand -> 200 dup
line=$(psql_q "SELECT tenant, dimension, seq, window_start_s, encode(b3, 'hex'),
               encode(body, 'hex') FROM g10.slices ORDER BY tenant, dimension, seq LIMIT 1" |
       tr '|' ' ')
# shellcheck disable=SC2086 # the line, split into fields on purpose
set -- $line
[ $# -eq 6 ] || fail "no slice to replay: $line"
printf '%s' "$6" | xxd -r -p >replay.bin
[ "$(b3sum --no-names replay.bin)" = "$5" ] || fail "b3sum of the stored body is not its b3"
code=$(curl -s -o replay.out -D replay.hdr -w '%{http_code}' -X PUT --data-binary @replay.bin \
    -H "Content-Type: application/octet-stream" -H "X-Ron-B3: $5" \
    -H "Authorization: Bearer $token" "$burl/v1/slices/$1/$2/$3")
[ "$code" = 200 ] && grep -qi '^x-ron-status: dup' replay.hdr ||
    fail "a replayed slice: HTTP $code $(cat replay.out)"
code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT --data-binary @replay.bin \
    -H "Content-Type: application/octet-stream" -H "X-Ron-B3: $5" "$burl/v1/slices/$1/$2/$3")
[ "$code" = 401 ] || fail "a PUT without the token: HTTP $code, expected 401"
[ "$(psql_q "SELECT count(*) FROM g10.slices")" = "$rows" ] || fail "the replay added a row"

# ---- shutdown --------------------------------------------------------------------------
kill -TERM "$apid"; wait "$apid"; rc=$?; apid=""
[ $rc -eq 0 ] || fail "A exit $rc after SIGTERM"
kill -TERM "$bpid"; wait "$bpid"; rc=$?; bpid=""
[ $rc -eq 0 ] || fail "B exit $rc after SIGTERM"
totals || fail "the totals changed at shutdown"

echo "g10.sh: OK: $(wc -l <expected.txt) records in 5 batches, $rows slices in PostgreSQL" \
     "(verified), A's restart: $a_ok ok + $a_dup dup, B: $b_ok ok + $b_dup dup; totals:"
cat got.txt
