#!/bin/sh
# shellcheck disable=SC2016,SC2129 # backticks are markdown here; one row per printf reads best
# The self-test of tools/check-requirements.lua (ctest docs-requirements-selftest): the checker
# passes a small consistent tree and fails each broken variant with the finding it names.
# The ids are assembled at run time ("$I"7) so this file itself cites none.
#
#   sh tests/docs/requirements-selftest.sh LUAJIT CHECKER
set -eu
# shellcheck source=tests/selftest-lib.sh
. "$(dirname "$0")/../selftest-lib.sh"
I="I-"
G="G-"
S="§"

# A consistent tree: one page defines two ids and a section; code cites them.
mk() {
    rm -rf "$tmp/t"
    mkdir -p "$tmp/t/docs" "$tmp/t/src" "$tmp/t/tests"
    printf '# Page\n\n## 3. A section\n\n| id | statement | code | tests |\n|---|---|---|---|\n' \
        > "$tmp/t/docs/REQ.md"
    printf '| %s7 | bounded | `src/a.c` | `tests/t.c:case_one` |\n' "$I" >> "$tmp/t/docs/REQ.md"
    printf '| %s6.1 | strict DTO | `src/a.c` | — |\n' "$G" >> "$tmp/t/docs/REQ.md"
    printf '| PRODUCT %s5 | contracts | `src/` | — |\n' "$S" >> "$tmp/t/docs/REQ.md"
    printf '/* %s7, %s6.1. PRODUCT.md %s5; REQ.md %s3 */\n' "$I" "$G" "$S" "$S" > "$tmp/t/src/a.c"
    printf 'int t;\n' > "$tmp/t/tests/t.c"
}


mk
expect 0 "" "a consistent tree passes"

mk
printf '/* %s99 */\n' "$I" > "$tmp/t/src/b.c"
expect 1 "cites ${I}99, which no docs" "an undefined id fails"

mk
printf -- '-- AUD-%s3\n' "$I" > "$tmp/t/src/c.lua"
expect 1 "cites AUD-${I}3, which no docs" "another system's undefined id fails"

mk
printf '| AUD-%s3 | audit | `src/a.c` | — |\n' "$I" >> "$tmp/t/docs/REQ.md"
printf -- '-- AUD-%s3 is not %s3\n' "$I" "$I" > "$tmp/t/src/c.lua"
expect 1 "cites ${I}3, which no docs" "a compound id does not define its tail"

mk
rm "$tmp/t/tests/t.c"
expect 1 "cites tests/t.c, which does not exist" "a row naming a missing file fails"

mk
printf '| %s7 | again | — | — |\n' "$I" >> "$tmp/t/docs/REQ.md"
expect 1 "is defined twice" "a duplicate definition fails"

mk
printf '/* seed 001 %s5 */\n' "$S" > "$tmp/t/src/d.c"
expect 1 "cites seed 001 ${S}5" "an undefined source section fails"

mk
printf '/* REQ.md %s4 */\n' "$S" > "$tmp/t/src/d.c"
expect 1 "no heading numbered 4" "a dangling page section fails"

mk
printf 'see [a](../src/a.c), [b](REQ.md#3-a-section), [c](#3-a-section), [d](https://x.y/z)\n' \
    >> "$tmp/t/docs/REQ.md"
expect 0 "" "links to files and headings that exist pass"

mk
printf 'see [gone](gone.md)\n' >> "$tmp/t/docs/REQ.md"
expect 1 "links to docs/gone.md, which does not exist" "a link to a missing file fails"

mk
printf 'see [x](REQ.md#no-such-part)\n' >> "$tmp/t/docs/REQ.md"
expect 1 "which has no such heading" "a link to a missing heading fails"

finish
