#!/bin/sh
# The self-test of tools/check-reference.lua (ctest docs-reference-selftest): the checker
# passes a copy of the real files, and fails each broken variant with the finding it names.
#
#   sh tests/docs/reference-selftest.sh LUAJIT CHECKER      (from the repository root)
# shellcheck disable=SC2016 # the backticks are markdown
set -eu
# shellcheck source=tests/selftest-lib.sh
. "$(dirname "$0")/../selftest-lib.sh"

mk() {
    # shellcheck disable=SC2046 # one word per path, none with spaces
    tree core/metrics.c host/cli/main.c docs/reference $(find lua nginx -type f)
}


mk
expect 0 "" "the tree as committed passes"

mk
sed -i 's/^local FAM = metrics.declare {$/local FAM = metrics.declare {\n    new_thing = { "counter accounting_new_thing_total", "x" },/' \
    "$tmp/t/lua/ron/accounting/families.lua"
expect 1 "accounting_new_thing_total (rendered by lua/ron/accounting/families.lua) is not documented" \
    "a family the runtime declares but the page lacks fails"

mk
sed -i 's/"1 when the runtime is ready (C-6)." }/"1 when the runtime is ready (C-6).", { "accounting_up" } }/' \
    "$tmp/t/lua/ron/accounting/families.lua"
expect 1 "accounting_up (rendered by lua/ron/accounting/families.lua) is not documented" \
    "the old name a renamed family still renders is checked too"

mk
printf -- '-- "# TYPE accounting_new_thing_total counter"\n' >> "$tmp/t/lua/ron/accounting/runtime/metrics.lua"
expect 1 "lua/ron/accounting/runtime/metrics.lua: renders a metric family by hand" \
    "a family rendered by hand, past the registry, fails"

mk
sed -i '/^| `accounting_wal_failed`/d' "$tmp/t/docs/reference/metrics.md"
expect 1 "accounting_wal_failed (rendered by core/metrics.c) is not documented" \
    "a core metric dropped from the page fails"

mk
grep '^| `ron_tasks_live`' "$tmp/t/docs/reference/metrics.md" > "$tmp/row"
cat "$tmp/row" >> "$tmp/t/docs/reference/metrics.md"
expect 1 "ron_tasks_live documented again" "a metric documented twice fails"

mk
printf '| `accounting_imaginary` | gauge | nothing |\n' >> "$tmp/t/docs/reference/metrics.md"
expect 1 "accounting_imaginary is documented but no code renders it" "a metric nobody renders fails"

mk
sed -i 's/^    demo_rate = 0,/    demo_rate = 0,\n    new_key = 1,/' "$tmp/t/lua/ron/node/schema.lua"
expect 1 "daemon key new_key (schema.lua DEFAULTS) is not documented" "a new daemon key fails"

mk
sed -i 's/^| `demo_rate` (`--demo`)/| `demo_rat` (`--demo`)/' "$tmp/t/docs/reference/config.md"
expect 1 "daemon key demo_rat is documented but not in schema.lua DEFAULTS" \
    "a documented key the daemon lacks fails"

mk
sed -i 's/^| `window_len_s` (`--window`) | 300 |/| `window_len_s` (`--window`) | 301 |/' "$tmp/t/docs/reference/config.md"
expect 1 "daemon key window_len_s: the page says default 301, schema.lua says 300" \
    "a documented default that disagrees fails"

mk
sed -i 's/^| `wal_max_bytes` | 512 MiB |/| `wal_max_bytes` | 256 MiB |/' "$tmp/t/docs/reference/config.md"
expect 1 "daemon key wal_max_bytes: the page says default 268435456, schema.lua says 536870912" \
    "a default in MiB that disagrees with a product in the code fails"

mk
sed -i 's/^    op_budget_ms = 10000,/    op_budget_ms = 9000,/' "$tmp/t/lua/ron/node/schema.lua"
expect 1 "daemon key op_budget_ms: the page says default 10000, schema.lua says 9000" \
    "a changed default in the code, one of a row's list, fails"

mk
sed -i 's/^    {"version", cmd_version,/    {"frobnicate", cmd_version, "x"},\n    {"version", cmd_version,/' "$tmp/t/host/cli/main.c"
expect 1 "verb frobnicate (host/cli/main.c) is not documented" "a new CLI verb fails"

mk
sed -i '/^| `wal inspect`/d' "$tmp/t/docs/reference/cli.md"
expect 1 "verb wal (host/cli/main.c) is not documented" "a verb dropped from the page fails"

finish
