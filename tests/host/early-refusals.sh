#!/bin/sh
# Requests the HTTP server refuses before any handler are the route's that was asked
# (docs/ops/http.md "Early refusals", AUD-I-21; label host): a daemon with ingest, the wallet
# and the audit trail on one listener (max_body 1 MiB).
#
#   early-refusals.sh HOST SOURCE_DIR WORK_DIR
#
# A 1.1 MB POST to the wallet's /v1/issue is 413 (the wallet's problem+json, refused from its
# Content-Length before the body) and is NOT an ingest oversize reject (before:
# accounting_ingest_rejected_total{reason="oversize"} counted it, and the trail recorded it as
# an ingest reject): sent twice, accounting_http_early_refusals_total{route="wallet",
# status="413"} 2 and a reject record each {source="http", route="wallet", path="/v1/issue",
# status=413}; the same
# body to /v1/records is ingest's oversize reject (its counter and one record of source
# ingest); to a path no route serves, route "-".
. "$2/tests/host/lib.sh" && host_test early-refusals.sh "$@" || exit 1
T1=6f1c3c1e-2b7a-4d5e-9a43-0c8e5b1f7a21
HOP=$(printf %s op-token.1 | b3sum --no-names) && H1=$(printf %s ing-token.1 | b3sum --no-names) ||
    fail "b3sum"
cat >conf.lua <<EOC
return { listen = "127.0.0.1:0", status_interval_s = 0, drain_deadline_ms = 2000,
    ingest = { tokens = { ["$H1"] = "$T1" } },
    wallet = { tokens = { ["$HOP"] = "operator" }, assets = { USD = 2 } },
    audit = { feed_interval_ms = 0 } }
EOC
daemon_start d.log conf.lua "$work/var"
head -c 1153433 /dev/zero | tr '\0' ' ' >big.json
big() { curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $2" \
    -H 'Content-Type: application/json' --data-binary @big.json "$base$1"; }
[ "$(big /v1/issue op-token.1)" = 413 ] || fail "1.1 MB to /v1/issue"
# refused from the head (the first look, before the body): the wallet's problem+json answer
# all the same (issue 24 §3; the attribution sees the refusal before the route shapes it)
curl -s -D issue.h -o issue.body -H 'Authorization: Bearer op-token.1' \
    -H 'Content-Type: application/json' --data-binary @big.json "$base/v1/issue" ||
    fail "curl /v1/issue"
grep -qi '^content-type: application/problem+json' issue.h ||
    fail "the wallet's 413 is not problem+json: $(cat issue.h issue.body)"
grep -q '"oversize"' issue.body || fail "the wallet's 413: $(cat issue.body)"
[ "$(big /v1/records ing-token.1)" = 413 ] || fail "1.1 MB to /v1/records"
[ "$(big /nowhere x)" = 413 ] || fail "1.1 MB to /nowhere"
curl -s "$base/metrics" >m.txt
grep -q '^accounting_ingest_rejected_total{reason="oversize"} 1$' m.txt ||
    fail "ingest oversize: $(grep oversize m.txt)"
grep -q '^accounting_http_early_refusals_total{route="wallet",status="413"} 2$' m.txt ||
    fail "wallet's early refusal: $(grep early_refusals m.txt)"
grep -q '^accounting_http_early_refusals_total{route="-",status="413"} 1$' m.txt ||
    fail "no route's early refusal: $(grep early_refusals m.txt)"
grep -q 'early_refusals_total{route="ingest"' m.txt && fail "ingest's 413 counted twice"
kill -TERM "$pid"
wait "$pid" || fail "daemon exit $?"
"$host" audit verify --list var/audit >list.txt 2>&1 || fail "verify: $(tail list.txt)"
[ "$(grep -c 'reject .*method="POST".*path="/v1/issue".*reason="oversize".*route="wallet".*source="http".*status=413' list.txt)" = 2 ] ||
    fail "the wallet's refusal in the trail: $(grep reject list.txt)"
[ "$(grep -c 'reject .*reason="oversize".*source="ingest".*status=413' list.txt)" = 1 ] ||
    fail "ingest's oversize reject: $(grep reject list.txt)"
[ "$(grep -c 'reject .*path="/nowhere".*route="-"' list.txt)" = 1 ] || fail "/nowhere"
echo "early-refusals.sh: ok"
