#!/bin/sh
# Applies the metric renames listed in docs/reference/metrics.md ("Renames": rows
# `| ~~\`old\`~~ | \`new\` | ... |`) to the tree: the C sources' strings, the Lua families and
# exposition strings, the docs, the shell tests, the alert rules. Idempotent (an old name
# that is gone is a no-op), so it can be run again after a merge brought code that still
# renders an old name.
#
#   tools/rename-metrics.sh [--check]    (from the repository's root)
#
# --check changes nothing: it lists where an old name is still used and exits 1 if any is.
# Where a name is replaced:
#   *.c *.h *.md *.sh *.yml *.cmake  every occurrence not inside a longer identifier (not
#                                    after a letter, digit, "_", "." or "->"; after a C
#                                    string's "\n" it is)
#   *.lua                            a family's `name = "old"`, and inside a string where it
#                                    starts a sample or a HELP/TYPE line: after a quote,
#                                    "\n" or "# HELP "/"# TYPE ", before "{", " " or "\n" (a
#                                    Lua field or stats key of the same name, such as
#                                    task.metrics().tasks_live, is no metric)
# A histogram's _bucket, _sum and _count samples follow their family's name.
# Units that change (ms -> seconds) need their values converted by hand: the script renames.
set -eu
check=0
[ "${1:-}" = --check ] && check=1
table=docs/reference/metrics.md
[ -f "$table" ] || { echo "rename-metrics: run from the repository's root" >&2; exit 2; }

# shellcheck disable=SC2016 # (backquotes of the Markdown, not an expansion)
pairs=$(sed -n 's/^| ~~`\([a-z_:][a-z0-9_:]*\)`~~ | `\([a-z_:][a-z0-9_:]*\)` |.*/\1 \2/p' "$table")
[ -n "$pairs" ] || { echo "rename-metrics: no renames in $table" >&2; exit 2; }

files() { # the files a rename touches (tracked by git), this script and the table's rows aside
    git ls-files -- 'core/*.[ch]' 'nginx/*.[ch]' 'host/*.[ch]' 'lua/*.lua' 'spec/*.lua' \
        'tests/*.sh' 'tests/*.lua' 'docs/*.md' 'README.md' 'examples/*' 'cmake/*.cmake' |
        grep -v '^tools/rename-metrics.sh$'
}

# regexes of one old name for a file: \1 before it, \2 after it
res() {
    case "$1" in
        *.lua) printf '%s\n' "(name = \")$2(\")" \
                   "([\"']|\\\\n|# HELP |# TYPE )$2([{ ]|\\\\n|_bucket|_sum|_count)" ;;
        *) printf '%s\n' "(^|[^A-Za-z0-9_.>]|\\\\n)$2(_bucket|_sum|_count|[^A-Za-z0-9_]|\$)" ;;
    esac
}

out=${TMPDIR:-/tmp}/rename-metrics.$$
all=$(files)
echo "$pairs" | while read -r old new; do
    # shellcheck disable=SC2086 # (the paths hold no blanks: git ls-files of this tree)
    for f in $(grep -lE "(^|[^A-Za-z0-9_]|\\\\n)$old(_bucket|_sum|_count|[^A-Za-z0-9_]|\$)" $all || true); do
        res "$f" "$old" | while IFS= read -r re; do
            grep -qE "$re" "$f" || continue
            if [ "$check" = 1 ]; then
                grep -nE "$re" "$f" | grep -v '^[0-9]*:| ~~`' | sed "s#^#$f:#" || true
            else # (the Renames rows themselves keep the old name)
                sed -E -i "/^\\| ~~\`/!{:a; s/$re/\\1$new\\2/; ta}" "$f"
            fi
        done
    done
done >"$out"
found=0
[ -s "$out" ] && { cat "$out"; found=1; }
rm -f "$out"
[ "$check" = 1 ] && [ "$found" = 1 ] && exit 1
exit 0
