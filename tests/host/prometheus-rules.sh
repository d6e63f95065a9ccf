#!/bin/sh
# The alert rules of examples/prometheus/ (issue 27 item 5; ctest prometheus-rules):
#  1. `promtool check rules` accepts the rules file;
#  2. `promtool test rules` passes its unit tests;
#  3. every alert of the rules file has, in the tests, an evaluation where it fires
#     (exp_alerts listing it) and one where it does not (`exp_alerts: []`);
#  4. every metric family the expressions name is listed in docs/reference/metrics.md (a
#     rename that forgot the rules fails here).
#
#   prometheus-rules.sh SOURCE_DIR
set -u
src=$1
dir=$src/examples/prometheus
rules=$dir/ron-accounting.rules.yml tests=$dir/ron-accounting.rules.test.yml
fail() { echo "prometheus-rules.sh: FAILED: $*" >&2; exit 1; }

promtool check rules "$rules" >/dev/null || fail "promtool check rules"
(cd "$dir" && promtool test rules "$(basename "$tests")") || fail "promtool test rules"

alerts=$(sed -n 's/^ *- alert: *\([A-Za-z0-9_]*\).*/\1/p' "$rules")
[ -n "$alerts" ] || fail "no alert in $rules"
# name:fired / name:quiet for each evaluation of the tests
evals=$(awk '/^ *alertname:/ { name = $2 }
             /^ *exp_alerts: *\[\] *$/ { print name ":quiet"; next }
             /^ *exp_alerts: *$/ { print name ":fired" }' "$tests")
for a in $alerts; do
    echo "$evals" | grep -qx "$a:fired" || fail "$a: no test where it fires"
    echo "$evals" | grep -qx "$a:quiet" || fail "$a: no test where it stays quiet"
done

# the families the expressions name (a histogram's _bucket/_sum/_count are its family's)
names=$(sed -n '/expr:/,/labels:/p' "$rules" |
    grep -oE '\b(accounting|audit|wallet|ledger|ron)_[a-z0-9_]+' | sort -u)
for n in $names; do
    base=$(echo "$n" | sed 's/_\(bucket\|sum\|count\)$//')
    grep -q "^| \`${n}[{\`]" "$src/docs/reference/metrics.md" ||
        grep -q "^| \`${base}[{\`]" "$src/docs/reference/metrics.md" ||
        fail "$n: named by a rule, not a family of docs/reference/metrics.md"
done
echo "prometheus-rules.sh: ok ($(echo "$alerts" | wc -l) alerts, $(echo "$names" | wc -l) families)"
