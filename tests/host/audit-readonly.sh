#!/bin/sh
# A read-only trail directory (AUD-I-42; label host): `--check` refuses what the start
# refuses, and both name the path and the system's reason (before: `--check` exited 0 and
# the start said "cannot start: audit: IoError: " with nothing after the colon); an open of
# the log there says which call failed on which file and why.
#
#   audit-readonly.sh HOST SOURCE_DIR WORK_DIR
#
# As root the directory is on a tmpfs remounted read-only (EROFS: root writes through file
# modes); otherwise it is a directory of mode 0555 (EACCES).
set -u
host=$1 src=$2 work=$3
[ -d "$work/ro" ] && umount "$work/ro" 2>/dev/null
rm -rf "$work" && mkdir -p "$work/ro" || exit 1
cd "$work" || exit 1
fail() { echo "audit-readonly.sh: FAILED: $*" >&2; exit 1; }
if [ "$(id -u)" = 0 ]; then
    mount -t tmpfs -o size=64k tmpfs ro || fail "mount"
    trap 'umount "$work/ro" 2>/dev/null' EXIT
    mkdir ro/audit && mount -o remount,ro ro || fail "remount ro"
    reason="EROFS"
else
    mkdir ro/audit && chmod 0555 ro/audit || exit 1
    reason="EACCES"
fi
cat >conf.lua <<EOF2
return { listen = false, status_interval_s = 0, audit = { dir = "$work/ro/audit" } }
EOF2
"$host" run "$src/examples/daemon.lua" --check --config conf.lua --var var >check.out 2>check.err
rc=$?
[ "$rc" = 2 ] || fail "--check: exit $rc, expected 2: $(cat check.err)"
grep -q "configuration: audit trail $work/ro/audit: $work/ro/audit is not writable: .* ($reason)$" check.err ||
    fail "--check said: $(cat check.err)"
[ "$(wc -l <check.err)" -eq 1 ] || fail "--check: not one line: $(cat check.err)"
timeout -s KILL 20 "$host" run "$src/examples/daemon.lua" --config conf.lua --var var \
    >start.out 2>start.err
rc=$?
[ "$rc" = 2 ] || fail "start: exit $rc, expected 2: $(cat start.err)"
cmp -s check.err start.err || fail "start said another thing: $(cat start.err)"
# the open itself names the call, the file and the reason
cat >open.lua <<'EOF2'
local audit = require "ron.audit"
local lg, err = audit.open { writer_id = "w", stream = "s", dir = arg[1] }
print(lg and "opened" or err)
EOF2
"$host" run open.lua "$work/ro/audit" >open.out 2>&1
grep -q "^IoError: .*$work/ro/audit/seg-00000000000000000001.rau: .*($reason)$" open.out ||
    fail "open: $(cat open.out)"
echo "audit-readonly.sh: ok ($(cat check.err); open: $(cat open.out))"
