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
[ -d "$3/ro" ] && umount "$3/ro" 2>/dev/null # (a mount left by an interrupted run)
. "$2/tests/host/lib.sh" && host_test audit-readonly.sh "$@" || exit 1
mkdir ro || exit 1
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
refused_alike conf.lua
grep -q "configuration: audit trail $work/ro/audit: $work/ro/audit is not writable: .* ($reason)$" check.err ||
    fail "--check said: $(cat check.err)"
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
