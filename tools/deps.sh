#!/bin/sh
# The one place that installs what ron-accounting needs (Debian package names from
# PRODUCT.md §3). Used by `make`, `make test`, `make run` and `.ci/run`. A quick no-op when
# everything is present; installs the missing packages (as root, or through sudo) otherwise.
#
# chromium (headless: the status page's browser test), lintian and systemd (systemd-analyze)
# test `make package`; luarocks the rockspec (ctest package-rock). luarocks pulls
# liblua5.1-0-dev, whose headers sit next to luv.h: cmake/host.cmake puts LuaJIT's include
# directory first so that its lauxlib.h (luaL_traceback) wins.
#
# Note: Debian's nginx Lua module needs OpenResty's LuaJIT fork (luajit2,
# libluajit2-5.1-dev); the stock luajit packages conflict with it. Use the fork only.
set -eu

PACKAGES="
build-essential cmake pkg-config clang libclang-rt-14-dev
luajit2 libluajit2-5.1-dev
libuv1-dev lua-luv lua-luv-dev lua-cjson lua-busted
librust-blake3-dev b3sum
nginx libnginx-mod-http-lua lua-resty-core nginx-dev wrk
libh2o-dev libssl-dev openssl prometheus curl
libpq-dev postgresql
libsqlite3-dev sqlite3
libcurl4-openssl-dev
libutf8proc-dev libsodium-dev
lua-check shellcheck clang-format cppcheck git
golang-go golang-golang-x-mod-dev
chromium lintian systemd luarocks
"

missing=""
for p in $PACKAGES; do
    # dpkg-query is fast; only consult apt when something is absent.
    st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    case "$st" in
        *"install ok installed"*) ;;
        *) missing="$missing $p" ;;
    esac
done

[ -z "$missing" ] && exit 0

echo "deps: installing:$missing" >&2
SUDO=""
if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 || {
        echo "deps: need root (or sudo) to install:$missing" >&2
        exit 1
    }
    SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
echo "deps: done" >&2
