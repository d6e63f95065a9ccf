#!/bin/sh
# The self-test of the structural lint checks (ctest lint-selftest): each checker passes a
# small clean tree and fails each broken variant with the finding it names.
#
#   sh tests/lint/lint-selftest.sh LUAJIT       (from the repository root)
#
#   tools/check-function-length.lua   a function over 150 lines not listed; a listed one
#                                     that grew; an entry no longer needed
#   tools/check-layers.lua            host/lua including host/cli's header; host/cli
#                                     including core/internal.h (the two leaks of issue 26)
set -eu
# shellcheck source=tests/selftest-lib.sh
. "$(dirname "$0")/../selftest-lib.sh"
root=$(pwd)
length=$root/tools/check-function-length.lua layers=$root/tools/check-layers.lua

# A C function of n lines (signature and closing brace included).
c_fn() {
    printf 'int %s(void) {\n' "$1"
    i=2
    while [ "$i" -lt "$2" ]; do printf '    x();\n'; i=$((i + 1)); done
    printf '}\n'
}

mk() {
    rm -rf "$tmp/t"
    mkdir -p "$tmp/t/core" "$tmp/t/host/cli" "$tmp/t/host/lua" "$tmp/t/include/ron" "$tmp/t/tools"
    (cd "$tmp/t" && git init -q .)
    c_fn short 20 > "$tmp/t/core/a.c"
    c_fn long 160 >> "$tmp/t/core/a.c"
    printf 'core/a.c long 160\n' > "$tmp/t/tools/function-length-allow.txt"
    printf '/* internal */\n' > "$tmp/t/core/internal.h"
    printf '/* reader */\n' > "$tmp/t/core/wal_reader.h"
    printf '#define RA_HOST_NAME "x"\n' > "$tmp/t/host/host_name.h"
    printf '#include "host_name.h"\n' > "$tmp/t/host/cli/host.h"
    printf '#include "host_name.h"\n' > "$tmp/t/host/lua/glue.c"
    printf '#include "host.h"\n#include "wal_reader.h"\n' > "$tmp/t/host/cli/walscan.c"
}

mk
checker=$length
expect 0 "" "function length: the clean tree passes"
checker=$layers
expect 0 "" "layers: the clean tree passes"

mk
c_fn other 151 >> "$tmp/t/core/a.c"
checker=$length
expect 1 "core/a.c:181 other: 151 lines" "function length: over 150, not listed"

mk
printf 'core/a.c long 159\n' > "$tmp/t/tools/function-length-allow.txt"
expect 1 "grew from 159 to 160 lines" "function length: a listed function grew"

mk
c_fn long 100 > "$tmp/t/core/a.c"
expect 1 "core/a.c long is no longer over 150" "function length: an entry no longer needed"

mk
printf '#include "cli/host.h"\n' > "$tmp/t/host/lua/glue.c"
checker=$layers
expect 1 "host/lua/glue.c:1 includes cli/host.h" "layers: host/lua includes host/cli"

mk
printf '#include "internal.h"\n' >> "$tmp/t/host/cli/walscan.c"
expect 1 "host/cli/walscan.c:3 includes internal.h (core/internal.h)" \
    "layers: host/cli includes the core's internals"

finish
