#!/bin/sh
# host-quickstart: `make run`'s job, in a scratch directory (it writes ./var/quickstart).
#   quickstart.sh HOST QUICKSTART_LUA
set -u
host=$1 script=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/ra-quickstart.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1

"$host" run "$script" >out.txt 2>err.txt
rc=$?
cat out.txt
cat err.txt >&2
[ "$rc" -eq 0 ] || { echo "quickstart.sh: the quickstart exited with $rc" >&2; exit 1; }

# "b3sum confirms N/N digests", N > 0, and N files on disk.
line=$(grep -E '^b3sum confirms [0-9]+/[0-9]+ digests$' out.txt) || {
    echo "quickstart.sh: no 'b3sum confirms N/N digests' line" >&2
    exit 1
}
ok=$(echo "$line" | sed -E 's/^b3sum confirms ([0-9]+)\/([0-9]+).*/\1/')
all=$(echo "$line" | sed -E 's/^b3sum confirms ([0-9]+)\/([0-9]+).*/\2/')
files=$(find var/quickstart -name '*.slice' | wc -l)
if [ "$ok" -ne "$all" ] || [ "$all" -eq 0 ] || [ "$files" -ne "$all" ]; then
    echo "quickstart.sh: confirmed $ok of $all digests, $files slice files" >&2
    exit 1
fi
# Independently of the script: every file's digest is the one the quickstart printed.
for f in var/quickstart/*.slice; do
    d=$(b3sum --no-names "$f") || exit 1
    grep -q "b3 $d " out.txt || { echo "quickstart.sh: $f ($d) was not printed" >&2; exit 1; }
done
echo "quickstart.sh: ok ($all slices)"
