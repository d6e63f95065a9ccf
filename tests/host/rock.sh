#!/bin/sh
# The rockspec (packaging/ron-accounting-*.rockspec; issue 27 item 7, docs/ops/package.md
# "LuaRocks"): `luarocks make --tree SCRATCH` from the source tree, then only the scratch
# tree's Lua code, with LuaJIT: every module of lua/ installed, the main modules load from
# the tree (not from the source), the FFI libraries found through the library finder
# (RON_*_LIB: the rock ships the Lua code only), a meter records and seals a slice.
#
#   rock.sh SOURCE_DIR BUILD_DIR WORK_DIR PROJECT_VERSION
set -u
src=$1 build=$2 work=$3 version=$4
fail() {
    echo "rock.sh: FAILED: $*" >&2
    [ -f "$work/luarocks.log" ] && tail -20 "$work/luarocks.log" >&2
    exit 1
}
command -v luarocks >/dev/null || fail "luarocks not found (tools/deps.sh)"
command -v luajit >/dev/null || fail "luajit not found (tools/deps.sh)"
rm -rf "$work" && mkdir -p "$work" || exit 1
work=$(cd "$work" && pwd -P)
set -- "$src"/packaging/ron-accounting-*.rockspec
[ $# -eq 1 ] && [ -f "$1" ] || fail "expected one packaging/ron-accounting-*.rockspec: $*"
spec=$1
case "$spec" in
    */ron-accounting-"$version"-[0-9]*.rockspec) ;;
    *) fail "$spec: its version is not the project's ($version)" ;;
esac
tree=$work/tree
# HOME: luarocks keeps its cache and config there; nothing of the user's is read or written
(cd "$src" && HOME=$work luarocks make --tree "$tree" "$spec") >"$work/luarocks.log" 2>&1 ||
    fail "luarocks make"
lua=$tree/share/lua/5.1
(cd "$src/lua" && find . -name '*.lua' | sort) >"$work/want.txt"
(cd "$lua" && find . -name '*.lua' | sort) >"$work/got.txt"
cmp -s "$work/want.txt" "$work/got.txt" ||
    fail "installed modules differ from lua/: $(diff "$work/want.txt" "$work/got.txt" | head)"
echo "rock.sh: $(wc -l <"$work/got.txt") modules installed in $tree"
cp "$src/tests/host/install-smoke.lua" "$work/" || exit 1
cat >"$work/load.lua" <<'LUA'
local tree = assert(arg[1])
for _, m in ipairs { "ron.accounting", "ron.accounting.nginx", "ron.ledger", "ron.audit",
                     "ron.wallet.service", "ron.ledger.exporter" } do
    local f = package.searchpath(m, package.path)
    assert(f and f:sub(1, #tree + 1) == tree .. "/", m .. " came from " .. tostring(f))
    require(m)
    print("load.lua: " .. m .. " from " .. f)
end
LUA
# Away from the source tree, the scratch tree's path only; the libraries from the build
# (as an installed system's would be found: the rock does not ship them)
cd "$work" || exit 1
unset LUA_CPATH
export LUA_PATH="$lua/?.lua;$lua/?/init.lua" RON_ACCOUNTING_LIB="$build/libronacct.so" \
    RON_LEDGER_LIB="$build/libronledger.so" RON_AUDIT_LIB="$build/libronaudit.so"
luajit load.lua "$lua" || fail "loading the modules from $tree"
luajit install-smoke.lua "$lua" || fail "a meter from $tree"
echo "rock.sh: ok"
