#!/bin/sh
# The daemon with every block enabled — meter, ingest, the ledger exporter (rating into
# SQLite), the wallet over the same book, the audit trail — on 127.0.0.1:0, fed a batch
# through ingest and a top-up through the wallet; then (MODE):
#   page     GET / in headless Chromium (Debian's chromium; issue 27 item 6): the page
#            loads with no console message at all (it has no script, so any is an error:
#            a CSP violation, a failed load), every number it shows (data-metric="sample")
#            equals that sample on /metrics fetched just before or just after, the page
#            has its sections and refreshes itself, the record's stream has its row
#            (sealed and exported seq, on the fast clock); the screenshot stays in
#            WORK_DIR/status-page.png (ctest host-status-page).
#   metrics  `promtool check metrics` on /metrics: no complaint at all (issue 27 item 4;
#            ctest host-metrics-conventions).
#
#   status-page.sh HOST SOURCE_DIR WORK_DIR page|metrics
set -u
host=$1 src=$2 work=$3 mode=$4
rm -rf "$work" && mkdir -p "$work" || exit 1
cd "$work" || exit 1
pid=""
fail() {
    echo "status-page.sh ($mode): FAILED: $*" >&2
    for f in daemon.log chromium.err promtool.out; do
        [ -f "$f" ] && { echo "--- $f" >&2; grep -v 'dbus\|bluez\|property.cc' "$f" |
                         tail -30 >&2; }
    done
    [ -n "$pid" ] && kill "$pid" 2>/dev/null
    exit 1
}

"$host" audit keygen ron-audit/ron-accounting/daemon signer.key verifier.pub >/dev/null ||
    fail "audit keygen"
tenant=6f1c3c1e-2b7a-4d5e-9a43-0c8e5b1f7a21
# the fast clock (a 60 s window per second): the ingested record's slice is sealed and
# rated within seconds, so the page has a stream row (sealed vs exported)
r0=$(date +%s)
cat >conf.lua <<EOF
local b3hex = require("ron.accounting").b3hex
local c = dofile("$src/tests/host/fast_clock.lua")($r0)
local cfg = {
    var_dir = "var",
    exporter = { module = "ron.ledger.exporter",
                 store = { backend = "sqlite", path = "var/ledger.db", offload = true },
                 card = "$src/examples/cards/acme.lua", book = "main", node = "gw-1" },
    wallet = { tokens = { [b3hex("op-token")] = "operator" }, assets = { USD = 2 },
               store = { backend = "sqlite", path = "var/ledger.db" }, book = "main",
               node = "wallet-1" },
    audit = { key_path = "$work/signer.key", checkpoint_every = 5 },
    ingest = { tokens = { [b3hex("ingest-token")] = "$tenant" } },
}
for k, v in pairs(cfg) do c[k] = v end
return c
EOF
"$host" run "$src/examples/daemon.lua" --config conf.lua >daemon.log 2>&1 &
pid=$!
i=0
until grep -q 'listening on http://127.0.0.1:[0-9]' daemon.log; do
    i=$((i + 1)); [ $i -le 600 ] || fail "the daemon did not listen"
    kill -0 "$pid" 2>/dev/null || fail "the daemon ended early"
    sleep 0.1
done
port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' daemon.log | head -1)
base=http://127.0.0.1:$port
i=0
until curl -sf -m 5 -o /dev/null "$base/readyz"; do
    i=$((i + 1)); [ $i -le 300 ] || fail "not ready in 30 s"
    sleep 0.1
done

# some traffic: records through ingest, money through the wallet
printf '{"records":[{"tenant":"%s","subject":"u-1","dimension":"requests","value":3}]}' \
    "$tenant" >batch.json
code=$(curl -s -o resp.json -w '%{http_code}' -H 'Authorization: Bearer ingest-token' \
    -H 'Content-Type: application/json' --data-binary @batch.json "$base/v1/records")
[ "$code" = 200 ] || fail "ingest: $code $(cat resp.json)"
code=$(curl -s -o resp.json -w '%{http_code}' -X POST -H 'Authorization: Bearer op-token' \
    -H 'Content-Type: application/json' -d "{\"account\":\"$tenant\"}" "$base/v1/accounts")
[ "$code" = 200 ] || fail "wallet account: $code $(cat resp.json)"
code=$(curl -s -o resp.json -w '%{http_code}' -X POST -H 'Authorization: Bearer op-token' \
    -H 'Content-Type: application/json' -H 'Idempotency-Key: top-up-1' \
    -d "{\"to\":\"$tenant\",\"asset\":\"USD\",\"amount\":5000,\"nonce\":1}" "$base/v1/issue")
case "$code" in 2*) ;; *) fail "wallet issue: $code $(cat resp.json)" ;; esac

# the record's stream sealed and exported (rated): its row on /metrics
row="accounting_stream_seq{tenant=\"$tenant\",dimension=\"requests\",state=\"exported\"} 1"
i=0
until curl -sf -m 5 "$base/metrics" | grep -qxF "$row"; do
    i=$((i + 1)); [ $i -le 300 ] || fail "no '$row' on /metrics in 30 s"
    sleep 0.1
done

if [ "$mode" = metrics ]; then
    curl -sf -m 10 -o metrics.txt "$base/metrics" || fail "GET /metrics"
    for fam in accounting_wal_entries accounting_ingest_records_total wallet_breaker_open \
        audit_records_total accounting_exports_total; do
        grep -q "^# TYPE $fam " metrics.txt || fail "/metrics lacks $fam (a block is off)"
    done
    promtool check metrics <metrics.txt >promtool.out 2>&1 || fail "promtool check metrics"
    [ -s promtool.out ] && fail "promtool check metrics complains"
    # what promtool does not check: a system's prefix on every family, _total on counters
    # (docs/reference/metrics.md, "Renames")
    awk '/^# TYPE / { print $3, $4 }' metrics.txt | while read -r name type; do
        case "$name" in
            accounting_* | audit_* | wallet_* | ron_*) ;;
            *) echo "$name: no system prefix (accounting_, audit_, wallet_, ron_)" ;;
        esac
        case "$type:$name" in
            counter:*_total) ;;
            counter:*) echo "$name: a counter without _total" ;;
        esac
    done >promtool.out
    [ -s promtool.out ] && fail "/metrics breaks the conventions"
    echo "status-page.sh: $(grep -c '^# TYPE ' metrics.txt) families follow the conventions"
else
    command -v chromium >/dev/null || fail "chromium not found (tools/deps.sh)"
    # A gauge may move both ways while the page loads (the audit queue's depth went 0, 2, 0
    # between /metrics before and after, 2026-11-30): a number the page shows that lies
    # outside what /metrics said around it is looked at again, in a new load, up to three
    # times; a page that shows a wrong number shows it every time.
    for attempt in 1 2 3; do
        curl -sf -m 10 -o before.txt "$base/metrics" || fail "GET /metrics"
        # one run: the DOM as loaded, the console on stderr, a screenshot
        timeout 120 chromium --headless --no-sandbox --disable-gpu --no-first-run \
            --user-data-dir="$work/profile" --enable-logging=stderr --v=0 \
            --window-size=1280,1400 --screenshot="$work/status-page.png" \
            --dump-dom "$base/" >dom.html 2>chromium.err || fail "chromium exited $?"
        curl -sf -m 10 -o after.txt "$base/metrics" || fail "GET /metrics"
        [ -s status-page.png ] || fail "no screenshot"
        grep -q ':CONSOLE' chromium.err && fail "console messages: $(grep ':CONSOLE' chromium.err)"
        for s in '<h2>Readiness</h2>' '<p id="ready" class="ok">ready</p>' '<h2>Streams</h2>' \
            '<h2>Backlog and WAL</h2>' '<h2>Rates</h2>' '<h2>Wallet</h2>' '<h2>Audit trail</h2>' \
            'newest checkpoint' 'http-equiv="refresh"' '<table id="streams">' \
            "<td>$tenant</td><td>requests</td>" '<td>exported</td>'; do
            grep -qF "$s" dom.html || fail "the page lacks $s"
        done
        # every number shown: "sample value" equal to a line of /metrics (before or after)
        grep -o 'data-metric="[^"]*">[^<]*<' dom.html |
            sed 's/^data-metric="\([^"]*\)">\([^<]*\)<$/\1 \2/; s/&quot;/"/g; s/&amp;/\&/g' \
            >shown.txt
        n=$(wc -l <shown.txt)
        [ "$n" -ge 20 ] || fail "only $n numbers on the page"
        # a sample that moved while the page loaded (an audit checkpoint attested into the
        # ledger moves wallet_ledger_seq) is right when it lies between before and after (a
        # gauge may go down)
        awk 'function key() { return substr($0, 1, length($0) - length($NF) - 1) }
             FILENAME == ARGV[1] { b[key()] = $NF; next }
             FILENAME == ARGV[2] { a[key()] = $NF; next }
             { k = key(); v = $NF }
             !(k in b) && !(k in a) {
                 print "the page shows \047" $0 "\047; /metrics has no " k; exit }
             v == b[k] || v == a[k] { next }
             (k in b) && (k in a) && (v - b[k]) * (v - a[k]) <= 0 { next }
             { print "the page shows \047" $0 "\047; /metrics: " b[k] " before, " a[k] \
                     " after"; exit }' \
            before.txt after.txt shown.txt >mismatch.txt
        [ -s mismatch.txt ] || break
        echo "status-page.sh: load $attempt: $(cat mismatch.txt)"
    done
    [ -s mismatch.txt ] && fail "$(cat mismatch.txt)"
    grep -qxF 'audit_records_total 0' shown.txt && fail "the audit head is 0"
    for state in sealed exported; do
        s="accounting_stream_seq{tenant=\"$tenant\",dimension=\"requests\",state=\"$state\"}"
        grep -qF "$s " shown.txt || fail "the page shows no $state seq for the record's stream"
    done
    echo "status-page.sh: $n numbers equal /metrics; screenshot $work/status-page.png"
fi
kill -TERM "$pid"
wait "$pid" || { pid=""; fail "the daemon exited $?"; }
echo "status-page.sh ($mode): ok"
