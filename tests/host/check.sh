#!/bin/sh
# `--check` refuses exactly what start refuses (issue 14 item 11; label host):
#
#   check.sh HOST SOURCE_DIR WORK_DIR
#
# Before: these passed `--check` (exit 0) and then failed at start (exit 1). Now both exit 2
# with the same one line: the daemon's schema runs the core's own checks
# (ra_config_check, the function ra_meter_open uses) and refuses a listen address that
# is a name.
set -u
host=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work" || exit 1
cd "$work" || exit 1
fail() { echo "check.sh: FAILED: $*" >&2; exit 1; }

try() { # try 'LUA CONFIG' 'EXPECTED MESSAGE'
    echo "return { $1 }" >cfg.lua
    "$host" run "$src/examples/daemon.lua" --check --config cfg.lua --var var >check.out 2>check.err
    rc=$?
    [ "$rc" = 2 ] || fail "--check with { $1 }: exit $rc, expected 2: $(cat check.err)"
    grep -qF "$2" check.err || fail "--check with { $1 }: $(cat check.err)"
    [ "$(wc -l <check.err)" -eq 1 ] || fail "--check with { $1 }: not one line: $(cat check.err)"
    timeout -s KILL 20 "$host" run "$src/examples/daemon.lua" --config cfg.lua --var var \
        >start.out 2>start.err
    rc=$?
    [ "$rc" = 2 ] || fail "start with { $1 }: exit $rc, expected 2: $(cat start.err)"
    cmp -s check.err start.err || fail "start with { $1 } said another thing: $(cat start.err)"
    [ ! -e var/plane ] || fail "start with { $1 } created the plane"
}
try "capacity_rows = 2^31" "capacity_rows 2147483648 is outside 1..67108864"
try "shards = 3" "shards 3 is not a power of two"
try "pending_slices_cap = 2^30" "pending_slices_cap 1073741824 is outside"
try 'dimensions = { "egress", "egress" }' "dimension 'egress' is listed twice"
try 'listen = "localhost:9464"' '"localhost" is not an IP address'
echo 'return { window_len_s = 60, listen = "[::1]:0" }' >cfg.lua
"$host" run "$src/examples/daemon.lua" --check --config cfg.lua --var var >check.out 2>&1 ||
    fail "a good configuration: $(cat check.out)"
echo "check.sh: OK"
