#!/bin/sh
# The daemon's ledger receiver and its trust model (issue 14 item 5; label host):
#
#   receiver-auth.sh HOST SOURCE_DIR WORK_DIR
#
# 1. receiver = { backend = "file" } (no producers): a configuration error, one line naming
#    receiver.producers, exit 2, for --check and for a start alike.
# 2. the old unscoped receiver.token_hash: exit 2, the line points at producers.
# 3. receiver = { allow_unauthenticated = true }: starts, and says so at WARN before it
#    serves; SIGTERM: exit 0.
. "$2/tests/host/lib.sh" && host_test receiver-auth.sh "$@" || exit 1
pid=""
fail() {
    echo "receiver-auth.sh: FAILED: $*" >&2
    for f in "$work"/*.log; do [ -f "$f" ] && { echo "--- $f" >&2; tail -20 "$f" >&2; }; done
    [ -n "$pid" ] && kill "$pid" 2>/dev/null
    exit 1
}
daemon() { "$host" run "$src/examples/daemon.lua" "$@"; }

cat >noauth.lua <<'EOF2'
return { listen = "127.0.0.1:0", status_interval_s = 0, receiver = { backend = "file" } }
EOF2
for mode in --check ""; do
    # shellcheck disable=SC2086 # $mode: no flag, or one
    daemon $mode --config noauth.lua --var var >noauth.log 2>&1
    rc=$?
    [ $rc -eq 2 ] || fail "receiver without producers ($mode): exit $rc, expected 2"
    grep -q "configuration: receiver.producers is required" noauth.log ||
        fail "receiver without producers ($mode): no clear line"
done

cat >old.lua <<'EOF2'
return { listen = "127.0.0.1:0", status_interval_s = 0,
         receiver = { token_hash = string.rep("a", 64) } }
EOF2
daemon --check --config old.lua --var var >old.log 2>&1
rc=$?
[ $rc -eq 2 ] || fail "receiver.token_hash: exit $rc, expected 2"
grep -q "token_hash is replaced by receiver.producers" old.log || fail "token_hash: no pointer"

cat >open.lua <<'EOF2'
return { listen = "127.0.0.1:0", status_interval_s = 0,
         receiver = { allow_unauthenticated = true } }
EOF2
"$host" run "$src/examples/daemon.lua" --config open.lua --var var >open.log 2>&1 &
pid=$! # the host itself, not a subshell
i=0
until grep -q "INFO receiver: PUT http://127.0.0.1:" open.log; do
    i=$((i + 1)); [ $i -gt 200 ] && fail "the open receiver did not start"
    kill -0 "$pid" 2>/dev/null || fail "the open receiver exited"
    sleep 0.1
done
grep -q "WARN receiver: NO AUTHENTICATION (allow_unauthenticated = true)" open.log ||
    fail "no WARN line for a receiver without authentication"
grep -q "(NO AUTHENTICATION: allow_unauthenticated = true)" open.log ||
    fail "the receiver's start line does not say it is unauthenticated"
port=$(sed -n 's|.*INFO receiver: PUT http://127.0.0.1:\([0-9]*\)/.*|\1|p' open.log)
i=0 # the loop runs (and the signal handlers with it) once /healthz answers
until curl -sf -m 2 "http://127.0.0.1:$port/healthz" >/dev/null 2>&1; do
    i=$((i + 1)); [ $i -gt 100 ] && fail "/healthz never answered"
    sleep 0.1
done
kill -TERM "$pid"
wait "$pid"; rc=$?
pid=""
[ $rc -eq 0 ] || fail "SIGTERM: exit $rc"
echo "receiver-auth.sh: ok"
