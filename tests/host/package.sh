#!/bin/sh
# The Debian package (issue 27 item 7; ctest package-deb): `cpack -G DEB` from this build,
# then
#  1. its contents: the executable, the three libraries, their headers, the pkg-config file,
#     the Lua package, the nginx module, /etc/ron-accounting/ron-accounting.conf.lua (a
#     conffile), the systemd unit;
#  2. `lintian` reports no error (E:) — warnings are printed, not fatal;
#  3. `dpkg -x` into a scratch root; the packaged executable runs the packaged daemon.lua
#     with the packaged configuration: --check exits 0, then a start (it listens, /readyz
#     200, the status page answers) and a SIGTERM stop with exit 0;
#  4. `systemd-analyze verify` on the packaged unit (where the machine has it), with the
#     unit's paths pointed into the scratch root.
#
#   package.sh BUILD_DIR WORK_DIR
set -u
build=$1 work=$2
rm -rf "$work" && mkdir -p "$work" || exit 1
pid=""
fail() {
    echo "package.sh: FAILED: $*" >&2
    for f in "$work"/cpack.log "$work"/lintian.txt "$work"/daemon.log "$work"/verify.txt; do
        [ -f "$f" ] && { echo "--- $f" >&2; tail -30 "$f" >&2; }
    done
    [ -n "$pid" ] && kill "$pid" 2>/dev/null
    exit 1
}

(cd "$build" && cpack -G DEB -B "$work/cpack" -D CPACK_OUTPUT_FILE_PREFIX="$work/out") \
    >"$work/cpack.log" 2>&1 || fail "cpack"
deb=$(ls "$work"/out/ron-accounting_*.deb 2>/dev/null | head -1)
[ -n "$deb" ] || fail "no .deb in $work/out"
echo "package.sh: $deb"

# 1. contents
dpkg-deb -c "$deb" | awk '{print $6}' | sed 's#^\./#/#' >"$work/files.txt"
for f in /usr/bin/ron-accounting /usr/lib/libronacct.so /usr/lib/libronledger.so \
    /usr/lib/libronaudit.so /usr/include/ron/accounting.h /usr/include/ron/ledger.h \
    /usr/include/ron/audit.h /usr/lib/pkgconfig/ronacct.pc \
    /usr/share/lua/5.1/ron/accounting.lua /usr/share/lua/5.1/ron/node/status.lua \
    /usr/lib/nginx/modules/ngx_http_ron_accounting_module.so \
    /etc/ron-accounting/ron-accounting.conf.lua /lib/systemd/system/ron-accounting.service \
    /usr/share/ron-accounting/daemon.lua /usr/share/doc/ron-accounting/copyright; do
    grep -qx "$f" "$work/files.txt" || fail "the package lacks $f"
done
dpkg-deb -I "$deb" conffiles | grep -qx /etc/ron-accounting/ron-accounting.conf.lua ||
    fail "the configuration is not a conffile"

# 2. lintian: no error
if command -v lintian >/dev/null; then
    lintian --tag-display-limit 0 "$deb" >"$work/lintian.txt" 2>&1
    grep '^E:' "$work/lintian.txt" && fail "lintian reports errors"
    grep -c '^W:' "$work/lintian.txt" | sed 's/^/package.sh: lintian warnings: /'
else
    fail "lintian not found (tools/deps.sh)"
fi

# 3. the packaged executable, configuration and daemon script, from a scratch root
root=$work/root
dpkg -x "$deb" "$root" || fail "dpkg -x"
exe=$root/usr/bin/ron-accounting
conf=$root/etc/ron-accounting/ron-accounting.conf.lua
# the packaged configuration with a free port instead of 9464 (the machine may use it)
sed 's/listen = "127.0.0.1:9464"/listen = "127.0.0.1:0"/' "$conf" >"$work/conf.lua"
grep -q '127.0.0.1:0' "$work/conf.lua" || fail "the packaged configuration has no listen"
"$exe" run "$root/usr/share/ron-accounting/daemon.lua" --config "$conf" \
    --var "$work/state" --check >"$work/check.txt" 2>&1 || fail "--check: $(cat "$work/check.txt")"
"$exe" run "$root/usr/share/ron-accounting/daemon.lua" --config "$work/conf.lua" \
    --var "$work/state" >"$work/daemon.log" 2>&1 &
pid=$!
i=0
until grep -q 'listening on http://127.0.0.1:[0-9]' "$work/daemon.log"; do
    i=$((i + 1)); [ $i -le 300 ] || fail "the packaged daemon did not listen"
    kill -0 "$pid" 2>/dev/null || fail "the packaged daemon ended early"
    sleep 0.1
done
port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/daemon.log")
i=0
until curl -sf -m 5 -o /dev/null "http://127.0.0.1:$port/readyz"; do
    i=$((i + 1)); [ $i -le 300 ] || fail "the packaged daemon was not ready in 30 s"
    sleep 0.1
done
curl -sf -m 5 "http://127.0.0.1:$port/" | grep -q '<h1>ron-accounting</h1>' ||
    fail "no status page"
kill -TERM "$pid"
wait "$pid" || { pid=""; fail "the packaged daemon exited $? at SIGTERM"; }
pid=""

# 4. the unit
unit=$root/lib/systemd/system/ron-accounting.service
grep -q '^Type=notify$' "$unit" && grep -q '^StateDirectory=ron-accounting$' "$unit" ||
    fail "the unit lacks Type=notify or StateDirectory="
if command -v systemd-analyze >/dev/null; then
    # its executables inside the scratch root (verify checks they exist)
    sed "s#/usr/bin/ron-accounting#$exe#g" "$unit" >"$work/ron-accounting.service"
    SYSTEMD_LOG_LEVEL=warning systemd-analyze verify --man=no "$work/ron-accounting.service" \
        >"$work/verify.txt" 2>&1
    # (a machine without systemd as PID 1 may add notes about itself; the unit's own
    # problems name the unit file)
    grep 'ron-accounting.service' "$work/verify.txt" && fail "systemd-analyze verify"
else
    echo "package.sh: systemd-analyze not found: the unit is not verified"
fi
echo "package.sh: ok ($(wc -l <"$work/files.txt") paths)"
