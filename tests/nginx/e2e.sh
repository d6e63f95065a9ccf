#!/bin/sh
# End to end through a real nginx (issue 6), for the Lua path and the native module:
#
#   e2e.sh lua|native CASE NGINX HOST SOURCE_DIR WORK_DIR LIBRONACCT MODULE
#
# CASE
#   totals      a known mix of requests (curl: several tenants, paths, methods, statuses;
#               then a bounded wrk run): after rollover and export by the sidecar, the
#               ledger's totals per tenant and dimension (bytes = $bytes_sent, requests)
#               equal exactly what nginx's own access log says it served.
#   restarts    the same under load while the sidecar is stopped (SIGTERM) and restarted,
#               killed (-9) and restarted, and nginx is reloaded (`nginx -s reload`)
#               twice: totals still exact. Both paths run it with their workers
#               striped (init { stripes = true }, ron_accounting_plane ... stripes=on).
#   api-keys    the tenant resolved from an API key (a map in Lua; an nginx `map` block
#               for the native module): totals exact per tenant, unknown keys counted.
#   refusals    nginx refuses to start on a group- or world-writable plane, or another
#               user's, and says why; the sidecar refuses a world-writable plane
#               directory; then both start on the restored plane and count exactly.
#   bad-input   requests without a tenant, with a malformed tenant: each counted (the
#               gateway's error counters and the plane's accounting_rejected_total
#               {reason="invalid"}), each answered exactly like a good request; the good
#               requests' totals stay exact; with the sidecar's audit trail on, each of the
#               workers' refusals is one `reject` record (source "plane", the worker's
#               pid), and `audit verify` passes (AUD-I-35).
set -u
KIND=$1 CASE=$2 NGX=$3 HOST=$4 SRC=$5 WORK=$6 LIB=$7 MODULE=${8:-}
NAME="nginx-$KIND-$CASE"
. "$SRC/tests/nginx/lib.sh"
trap cleanup EXIT
trap 'exit 1' INT TERM

setup "$KIND"
if [ "$CASE" = api-keys ]; then
    # The tenant comes from an API key: a map in Lua (the Lua path's `map` source) or an
    # nginx `map` block (the native path); the access log shows the key.
    if [ "$KIND" = lua ]; then
        CONF_SED="s|tenant = { header = \"X-Tenant-Id\" },|tenant = { header = \"X-Api-Key\", map = { [\"key-one\"] = \"$T1\", [\"key-two\"] = \"$T2\" } },|"
    else
        CONF_SED="s|ron_accounting_record \$http_x_tenant_id|ron_accounting_record \$ron_tenant|; s|^    map \$http_x_subject_id \$ron_subject {|    map \$http_x_api_key \$ron_tenant {\n        key-one $T1;\n        key-two $T2;\n        default \"\";\n    }\n&|"
    fi
    CONF_SED2="s|tenant=\"\$http_x_tenant_id\"|tenant=\"\$http_x_api_key\"|"
    TENANT_MAP_SED="s|tenant=\"key-one\"|tenant=\"$T1\"|; s|tenant=\"key-two\"|tenant=\"$T2\"|"
    PROBE_HEADER="X-Api-Key: key-one" # start_nginx's first request
fi
if [ "$CASE" = restarts ]; then
    # Workers striped (Lua: init { stripes = true }; native: ron_accounting_plane ...
    # stripes=on): each worker adds to entries of its own, through reloads (new workers)
    # and sidecar restarts; totals must stay exact.
    if [ "$KIND" = lua ]; then
        CONF_SED="s|errors_dict = \"ron_accounting_errors\",|&\n            stripes = true,|"
    else
        CONF_SED="s|capacity_rows=10000;|capacity_rows=10000 stripes=on;|"
    fi
fi
if [ "$CASE" = bad-input ]; then # the sidecar keeps an audit trail (var/audit)
    sed -i 's|^    listen = false,|    audit = {}, listen = false,|' gateway.lua
fi
start_sidecar sidecar1.log
start_nginx

case $CASE in
totals)
    curl_mix 60
    wrk_load 3 || fail "wrk"
    finish
    ;;
restarts)
    wrk_load 9 &
    LOAD_PIDS=$!
    curl_mix 30
    sleep 0.5
    log "sidecar: SIGTERM and restart under load"
    stop_sidecar
    sleep 0.5 # the plane keeps counting meanwhile
    start_sidecar sidecar2.log
    log "nginx -s reload under load"
    reload_nginx
    sleep 1.5
    log "sidecar: kill -9 and restart under load"
    kill -KILL "$SIDECAR_PID"
    wait "$SIDECAR_PID" 2>/dev/null
    sleep 0.5
    start_sidecar sidecar3.log
    curl_mix 30
    log "nginx -s reload under load, again"
    reload_nginx
    wait "$LOAD_PIDS" || fail "wrk"
    LOAD_PIDS=""
    finish
    ;;
bad-input)
    curl_mix 24
    good=$(curl -s --max-time 5 -D good.h -H "X-Tenant-Id: $T2" "$BASE/f1k.bin" | cksum)
    good_status=$(head -1 good.h)
    i=0
    while [ $i -lt 7 ]; do # no tenant header at all
        i=$((i + 1))
        got=$(curl -s --max-time 5 -D bad.h "$BASE/f1k.bin" | cksum)
        [ "$got" = "$good" ] && [ "$(head -1 bad.h)" = "$good_status" ] ||
            fail "a request without a tenant was answered differently"
    done
    for t in nope 6f1c3c1e-2b7a-4d5e-9a43-0c8e5b1f7a2 6f1c3c1e-2b7a-4d5e-9a43-0c8e5b1f7a21x \
             6f1c3c1e+2b7a-4d5e-9a43-0c8e5b1f7a21 g f1c3c1e-2b7a-4d5e-9a43-0c8e5b1f7a21z; do
        got=$(curl -s --max-time 5 -D bad.h -H "X-Tenant-Id: $t" "$BASE/f1k.bin" | cksum)
        [ "$got" = "$good" ] && [ "$(head -1 bad.h)" = "$good_status" ] ||
            fail "a request with tenant '$t' was answered differently"
    done
    curl_mix 12
    # Counted: per reason (node-wide) and, as bad input, in the plane. (The log phase runs
    # after the answer: a worker may still be in it when curl returns, so poll briefly.)
    counted() {
        nt=$(metric 'ron_accounting_nginx_errors_total{reason="no_tenant"}')
        bt=$(metric 'ron_accounting_nginx_errors_total{reason="bad_tenant"}')
        inv=$(metric 'accounting_rejected_total{reason="invalid"}')
        [ "$nt" = 7 ] && [ "$bt" = 6 ] && [ "$inv" = 13 ]
    }
    wait_for 5 counted
    [ "$nt" = 7 ] || fail "no_tenant counted $nt, expected 7"
    [ "$bt" = 6 ] || fail "bad_tenant counted $bt, expected 6"
    [ "$inv" = 13 ] || fail "the plane's rejected{invalid} is $inv, expected 13"
    grep -q "ron-accounting: request without a tenant" logs/ron-error.log ||
        fail "no WARN for a request without a tenant"
    [ "$(grep -c 'ron-accounting: request without a tenant' logs/ron-error.log)" -le 2 ] ||
        fail "the WARN for missing tenants is not rate-limited"
    # One label set for both paths (native module and ron.accounting.nginx), in one order.
    reasons=$(metrics | sed -n 's/^ron_accounting_nginx_errors_total{reason="\([a-z_]*\)".*/\1/p' |
              tr '\n' ' ')
    [ "$reasons" = "no_tenant bad_tenant unknown_key no_subject bad_value record_failed not_ready " ] ||
        fail "the error counter's reasons differ from the one label set: $reasons"
    log "bad input counted: no_tenant=$nt bad_tenant=$bt plane invalid=$inv; answers identical"
    # Each refusal of a worker is a record in the sidecar's audit trail, exactly once.
    plane_rejects() {
        "$HOST" audit verify --list var/audit >audit.txt 2>&1
        pr=$(grep -c '^record [0-9]* reject .*reason="invalid" source="plane"' audit.txt)
        [ "$pr" = 13 ]
    }
    wait_for 5 plane_rejects || { tail -5 audit.txt >&2; fail "$pr plane reject records, expected 13"; }
    ngx_pids=$(grep -o '^record [0-9]* reject .* pid=[0-9]* .*source="plane"' audit.txt |
               grep -o 'pid=[0-9]*' | sort -u | tr '\n' ' ')
    case " $ngx_pids " in *" pid=$SIDECAR_PID "*) fail "a plane record of the sidecar's own pid" ;; esac
    log "audit: 13 plane reject records (workers: $ngx_pids)"
    finish
    "$HOST" audit verify var/audit >audit-verify.txt 2>&1 ||
        { cat audit-verify.txt >&2; fail "audit verify"; }
    ;;
api-keys)
    i=0
    while [ $i -lt 40 ]; do
        i=$((i + 1))
        case $((i % 8)) in
            0) k=nope ;; 1|3|5) k=key-one ;; *) k=key-two ;;
        esac
        case $((i % 3)) in 0) p=/hello ;; 1) p=/f1k.bin ;; 2) p=/f10k.bin ;; esac
        curl -s -o /dev/null --max-time 5 -H "X-Api-Key: $k" -H "X-Subject-Id: u$((i % 4))" \
            "$BASE$p" || fail "curl"
    done
    if [ "$KIND" = lua ]; then reason=unknown_key; else reason=no_tenant; fi
    unknown() { [ "$(metric "ron_accounting_nginx_errors_total{reason=\"$reason\"}")" = 5 ] &&
                [ "$(metric 'accounting_rejected_total{reason="invalid"}')" = 5 ]; }
    wait_for 5 unknown || fail "5 unknown API keys: $reason counted" \
        "$(metric "ron_accounting_nginx_errors_total{reason=\"$reason\"}")"
    log "unknown API keys counted: $reason=5"
    finish
    ;;
refusals)
    # The plane file stays 0600 and its owner's: nginx refuses to start on a plane that
    # group or others may write, or that belongs to another (non-root) user, and says
    # why; the sidecar refuses a plane directory that others may write.
    stop_nginx
    stop_sidecar
    refused() { # refused WHAT PATTERN: nginx does not start, and says PATTERN
        if try_start_nginx "$PORT"; then
            NGX_PID=$(cat run/nginx.pid 2>/dev/null)
            fail "nginx started on $1"
        fi
        grep -q "$2" nginx-start.log logs/ron-error.log ||
            { cat nginx-start.log >&2; fail "nginx refused $1 without saying '$2'"; }
        log "nginx refuses $1: $(grep -h -o "$2[^,]*" nginx-start.log logs/ron-error.log | head -1)"
    }
    chmod 660 run/plane
    refused "a group-writable plane" "is writable by group or others (mode 0660)"
    chmod 606 run/plane
    refused "a world-writable plane" "is writable by group or others (mode 0606)"
    chmod 600 run/plane
    if [ "$(id -u)" = 0 ]; then
        chown www-data run/plane
        refused "a plane of another user" "belongs to uid $(id -u www-data)"
        chown 0 run/plane
    fi
    try_start_nginx "$PORT" || { cat nginx-start.log >&2; fail "nginx on a 0600 plane"; }
    NGX_PID=$(cat run/nginx.pid)
    chmod 777 run
    "$HOST" run "$SRC/examples/nginx/sidecar.lua" --config "$WORK/gateway.lua" >side.out 2>&1
    rc=$?
    [ $rc -eq 1 ] && grep -q "run is writable by group or others (mode 0777)" side.out ||
        { cat side.out >&2; fail "the sidecar accepted a world-writable plane directory ($rc)"; }
    log "the sidecar refuses a world-writable plane directory"
    chmod 700 run
    start_sidecar sidecar2.log
    curl_mix 12
    finish
    ;;
*)
    fail "unknown case $CASE"
    ;;
esac
