#!/bin/sh
# luajit-symbols.sh: a copy of the installed LuaJIT (Debian's luajit2) built from its own
# source with symbols, so that `perf` names where the loop's CPU goes inside LuaJIT (the
# collector, string interning, tables, the interpreter) instead of bare addresses
# (tests/bench/README.md "Inside LuaJIT"). Benchmarks only: nothing the tests or the daemon
# use. Fetches the source package of the installed version from deb.debian.org (its
# checksums checked against the .dsc), builds it as debian/rules does (`make amalg`) with
# -g and frame pointers, and prints the LD_LIBRARY_PATH that loads it:
#
#   sh tests/bench/luajit-symbols.sh [--count-strings] [DIR]   (default build/luajit-symbols)
#   LD_LIBRARY_PATH=DIR perf record -F 2000 -g -- build/ron-accounting run BENCH.lua ...
#   perf report --no-children --tid TID --sort dso,sym --stdio -g none | luajit tests/bench/perf_lj.lua
#
# --count-strings also applies tests/bench/luajit-count-strings.patch: lj_str_new counts, per
# thread, its calls and the strings it made (ljstat_str), which bench-ledger-rating-pg.lua
# --stages then prints per stage ("strings interned per slice by stage").
set -eu
here=$(cd "$(dirname "$0")" && pwd)
count=0
if [ "${1:-}" = "--count-strings" ]; then
    count=1
    shift
fi
dir=${1:-build/luajit-symbols}
ver=$(dpkg-query -W -f '${Version}' libluajit2-5.1-2 2>/dev/null || true)
if [ -z "$ver" ]; then
    echo "luajit-symbols.sh: libluajit2-5.1-2 is not installed (tools/deps.sh installs it)" >&2
    exit 2
fi
up=${ver%-*} # 2.1-20230119-1 -> 2.1-20230119
pool=http://deb.debian.org/debian/pool/main/l/luajit2
mkdir -p "$dir/src"
cd "$dir/src"
for f in "luajit2_$ver.dsc" "luajit2_$up.orig.tar.xz" "luajit2_$ver.debian.tar.xz"; do
    [ -s "$f" ] || curl -fsS -o "$f" "$pool/$f"
done
# the .dsc's Checksums-Sha256 lines: "<sha256> <size> <file>"
awk '/^Checksums-Sha256:/ { on = 1; next } /^[^ ]/ { on = 0 } on && NF == 3 { print $1 "  " $3 }' \
    "luajit2_$ver.dsc" | sha256sum -c --quiet -
rm -rf "luajit2-$up"
tar xf "luajit2_$up.orig.tar.xz"
tar xf "luajit2_$ver.debian.tar.xz" -C "luajit2-$up"
cd "luajit2-$up"
if [ -f debian/patches/series ]; then
    while read -r p; do
        [ -n "$p" ] && patch -s -p1 < "debian/patches/$p"
    done < debian/patches/series
fi
if [ "$count" = 1 ]; then patch -s -p1 < "$here/luajit-count-strings.patch"; fi
make -s -j"$(nproc)" amalg PREFIX=/usr MULTILIB=lib/x86_64-linux-gnu \
    CFLAGS="-g -O2 -fno-omit-frame-pointer" Q= E=@: > ../build.log 2>&1 \
    || { tail -20 ../build.log >&2; exit 1; }
cp src/libluajit.so ../../libluajit-5.1.so.2
cd ../..
echo "LD_LIBRARY_PATH=$(pwd)"
