#!/bin/sh
# install-tree: `cmake --install` into a scratch prefix, then use only what was installed:
# the host (running a script that requires the installed ron.accounting), the header, the
# pkg-config file, the static and the shared library.
#
#   install-tree.sh CMAKE BUILD_DIR SOURCE_DIR CC PKG_CONFIG BINDIR LIBDIR INCLUDEDIR DATADIR
# (the *DIR arguments are CMake's CMAKE_INSTALL_* values, relative to the prefix)
set -u
[ $# -eq 9 ] || { echo "install-tree.sh: expected 9 arguments, got $#" >&2; exit 2; }
cmake=$1 build=$2 src=$3 cc=$4 pkgconfig=$5 bindir=$6 libdir=$7 incdir=$8 datadir=$9

scratch=$(mktemp -d "${TMPDIR:-/tmp}/ra-install.XXXXXX") || exit 1
trap 'rm -rf "$scratch"' EXIT
prefix=$(cd "$scratch" && pwd -P)/prefix
fail() { echo "install-tree.sh: $*" >&2; exit 1; }
step() { echo "--- $*"; }

step "cmake --install $build --prefix $prefix"
"$cmake" --install "$build" --prefix "$prefix" >"$scratch/install.log" 2>&1 || {
    cat "$scratch/install.log" >&2
    fail "cmake --install failed"
}

step "installed files"
for f in "$bindir/ron-accounting" "$incdir/ron/accounting.h" "$libdir/libronacct.a" \
         "$libdir/libronacct.so" "$libdir/pkgconfig/ronacct.pc" \
         "$datadir/lua/5.1/ron/accounting.lua"; do
    [ -e "$prefix/$f" ] || fail "missing $prefix/$f"
    echo "ok  $f"
done
[ -x "$prefix/$bindir/ron-accounting" ] || fail "the host is not executable"
if command -v readelf >/dev/null 2>&1; then
    # The host carries the core inside it (static, symbols exported for ffi.C).
    readelf -d "$prefix/$bindir/ron-accounting" | grep -q 'NEEDED.*libronacct' &&
        fail "the installed host needs libronacct.so: it should link the core statically"
fi

step "the installed host runs a script against the installed ron.accounting"
# Away from the source tree, with a clean Lua environment.
cp "$src/tests/host/install-smoke.lua" "$scratch/" || exit 1
(cd "$scratch" && env -u LUA_PATH -u LUA_CPATH \
    "$prefix/$bindir/ron-accounting" run install-smoke.lua "$prefix") ||
    fail "the installed host failed to run install-smoke.lua"
"$prefix/$bindir/ron-accounting" version || fail "the installed host's version failed"

step "pkg-config"
export PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig"
cflags=$("$pkgconfig" --cflags ronacct) || fail "pkg-config --cflags ronacct failed"
libs=$("$pkgconfig" --libs ronacct) || fail "pkg-config --libs ronacct failed"
echo "cflags: $cflags"
echo "libs:   $libs"
# The first -I / -L directory must be the installed one (compared physically, so a
# relocatable ${pcfiledir}/../.. prefix passes as well as an absolute one).
physical() { (cd "$1" 2>/dev/null && pwd -P); }
first_dir() { # first_dir FLAG WORDS...
    flag=$1
    shift
    for w in "$@"; do
        case "$w" in "$flag"*) echo "${w#"$flag"}"; return ;; esac
    done
}
# shellcheck disable=SC2086  # split the flags into words
inc=$(first_dir -I $cflags)
# shellcheck disable=SC2086
lib=$(first_dir -L $libs)
pc_prefix=$(grep '^prefix=' "$PKG_CONFIG_PATH/ronacct.pc")
[ -n "$inc" ] && [ "$(physical "$inc")" = "$(physical "$prefix/$incdir")" ] ||
    fail "pkg-config --cflags ronacct gives '$cflags', not -I$prefix/$incdir" \
         "(the installed ronacct.pc says $pc_prefix)"
[ -n "$lib" ] && [ "$(physical "$lib")" = "$(physical "$prefix/$libdir")" ] ||
    fail "pkg-config --libs ronacct gives '$libs', not -L$prefix/$libdir"

step "a C program against the installed header and shared library"
# shellcheck disable=SC2086  # word splitting of the flags is intended
"$cc" -std=c11 -Wall -Wextra -Werror $cflags -o "$scratch/smoke-shared" \
    "$src/tests/host/install-smoke.c" $libs || fail "cannot build against the installed tree"
LD_LIBRARY_PATH="$prefix/$libdir" "$scratch/smoke-shared" || fail "smoke-shared failed"

step "the same program against the installed static library"
# shellcheck disable=SC2086
# shellcheck disable=SC2046 # pkg-config's flags, one word each
"$cc" -std=c11 -Wall -Wextra -Werror $cflags -o "$scratch/smoke-static" \
    "$src/tests/host/install-smoke.c" "$prefix/$libdir/libronacct.a" \
    $("$pkgconfig" --static --libs-only-other --libs-only-l ronacct | sed 's/-lronacct//') ||
    fail "cannot build against the installed static library"
readelf -d "$scratch/smoke-static" 2>/dev/null | grep -q 'NEEDED.*libronacct' &&
    fail "smoke-static still needs libronacct.so"
"$scratch/smoke-static" || fail "smoke-static failed"

echo "install-tree.sh: ok"
