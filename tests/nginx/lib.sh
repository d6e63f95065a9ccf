# shellcheck shell=sh
# Helpers of the real-nginx tests (sourced by tests/nginx/*.sh; POSIX sh).
#
# A test gets a work directory of its own and starts, for real:
#   * nginx from one of the example configurations (examples/nginx/nginx.conf, the Lua
#     path, or nginx-native.conf, the native module) with its paths rewritten into the
#     work directory and its port onto a free loopback port: master process on, 2
#     workers (user www-data when run as root), daemonized with a pid file, stopped at
#     the end (and on any failure);
#   * the sidecar (examples/nginx/sidecar.lua) on a fast injected clock: one 60-second
#     window per real second, a rollover every 200 ms, the same clock in nginx (the Lua
#     path reads it from gateway.lua, the native module from ron_accounting_test_clock).
#
# Needs: NGX (nginx), HOST (ron-accounting), SRC (source tree), WORK, MODULE (the native
# module, for the native path), LIB (libronacct.so, for the Lua path).

T1=6f1c3c1e-2b7a-4d5e-9a43-0c8e5b1f7a21
T2=b2d4e6f8-1a3c-4e5f-8b7d-9c0e2f4a6b8d
T3=3e9a1b5c-7d2f-4a6e-b1c8-5f0d3e7a9b24
T1_UPPER=6F1C3C1E-2B7A-4D5E-9A43-0C8E5B1F7A21 # the same tenant, spelled in capitals

NGX_PID=""
SIDECAR_PID=""
LOAD_PIDS=""
EXPECT_WORKERS=2 # a test may change these before start_nginx:
CONF_SED=""      # sed expressions applied to the generated nginx.conf
CONF_SED2=""
TENANT_MAP_SED="" # sed expression applied to the access log before served_totals

log() { echo "$NAME: $*" >&2; }

fail() {
    echo "$NAME: FAILED: $*" >&2
    for f in "$WORK"/logs/ron-error.log "$WORK"/sidecar*.log; do
        [ -f "$f" ] && { echo "--- $f" >&2; tail -25 "$f" >&2; }
    done
    exit 1
}

cleanup() {
    for p in $LOAD_PIDS; do kill "$p" 2>/dev/null; done
    if [ -n "$NGX_PID" ] && kill -0 "$NGX_PID" 2>/dev/null; then
        kill -QUIT "$NGX_PID" 2>/dev/null
        i=0
        while kill -0 "$NGX_PID" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
        kill -KILL "$NGX_PID" 2>/dev/null
    fi
    if [ -n "$SIDECAR_PID" ] && kill -0 "$SIDECAR_PID" 2>/dev/null; then
        kill -KILL "$SIDECAR_PID" 2>/dev/null
    fi
}

wait_for() { # wait_for SECONDS CMD...: polls CMD every 0.2 s
    n=$(($1 * 5)); shift
    while [ "$n" -gt 0 ]; do "$@" && return 0; sleep 0.2; n=$((n - 1)); done
    return 1
}

alive() { kill -0 "$1" 2>/dev/null; }

# setup PATH_KIND: the work directory, the files nginx serves, the shared settings file.
setup() {
    KIND=$1
    rm -rf "$WORK" && mkdir -p "$WORK" || exit 1
    cd "$WORK" || exit 1
    mkdir -p run logs html var
    chmod 700 run # the plane's directory: root only (the sidecar refuses a writable one)
    chmod 755 html
    printf 'index\n' >html/index.html
    head -c 1000 /dev/zero | tr '\0' a >html/f1k.bin
    head -c 10000 /dev/zero | tr '\0' b >html/f10k.bin
    head -c 100000 /dev/zero | tr '\0' c >html/f100k.bin
    chmod 644 html/*
    R0=$(date +%s)
    # The sidecar reads every key; nginx (Lua path) reads the plane's and the clock.
    cat >gateway.lua <<EOF
local ffi = require "ffi"
pcall(ffi.cdef, [[
typedef struct { long tv_sec; long tv_usec; } ra_test_timeval_t;
int gettimeofday(ra_test_timeval_t *tv, void *tz);
]])
local tv = ffi.new("ra_test_timeval_t")
local C = ffi.C
local R0, SPEED = $R0, 60
return {
    plane = "$WORK/run/plane", var_dir = "$WORK/var", window_len_s = 60,
    capacity_rows = 10000, -- a 6 MiB plane: the tests use a few dozen keys
    listen = false, status_interval_s = 0, tick_ms = 200, drain_deadline_ms = 3000,
    clock = function()
        C.gettimeofday(tv, nil)
        return 1735689600 + (tonumber(tv.tv_sec) + tonumber(tv.tv_usec) / 1e6 - R0) * SPEED
    end,
}
EOF
}

# start_sidecar LOG
start_sidecar() {
    "$HOST" run "$SRC/examples/nginx/sidecar.lua" --config "$WORK/gateway.lua" >"$1" 2>&1 &
    SIDECAR_PID=$!
    wait_for 20 grep -q "INFO plane" "$1" || fail "the sidecar did not start ($1)"
}

stop_sidecar() { # SIGTERM: a graceful drain, exit 0
    kill -TERM "$SIDECAR_PID"
    wait "$SIDECAR_PID"
    rc=$?
    [ $rc -eq 0 ] || fail "sidecar exit $rc after SIGTERM, expected 0"
    SIDECAR_PID=""
}

# The example configuration, rewritten into the work directory.
make_conf() { # make_conf PORT > nginx.conf
    if [ "$KIND" = lua ]; then
        sed -e "s|/etc/ron-accounting/gateway.lua|$WORK/gateway.lua|" \
            -e "s|/usr/local/share/lua/5.1/|$SRC/lua/|" \
            "$SRC/examples/nginx/nginx.conf"
    else
        sed -e "s|/usr/lib/nginx/modules/ngx_http_ron_accounting_module.so|$MODULE|" \
            -e "s|window_len_s=300;|window_len_s=60 capacity_rows=10000;\n    ron_accounting_test_clock 1735689600 $R0 60;|" \
            "$SRC/examples/nginx/nginx-native.conf"
    fi | sed -e "s|/run/ron-accounting|$WORK/run|g" -e "s|/var/log/nginx|$WORK/logs|g" \
             -e "s|/var/www/html|$WORK/html|" -e "s|127.0.0.1:8080|127.0.0.1:$1|" \
             -e "$USER_SED" |
        # a test's own locations (extra.conf), in the metered server
        awk -v extra="$WORK/extra.conf" '/location = \/hello \{/ && !done {
            while ((getline l < extra) > 0) print l; done = 1 } { print }' |
        # and its own edits
        sed -e "$CONF_SED" -e "$CONF_SED2"
}

# try_start_nginx PORT: the configuration for PORT, nginx started (output in
# nginx-start.log); its exit status. The Lua path finds libronacct through
# RON_ACCOUNTING_LIB, read by init() in the master.
try_start_nginx() {
    make_conf "$1" >nginx.conf
    # a unix socket left by an nginx that stopped (or refused to start) would make the
    # next start fail with "Address already in use"
    rm -f "$WORK"/run/*.sock
    RON_ACCOUNTING_LIB="$LIB" "$NGX" -p "$WORK" -c "$WORK/nginx.conf" >nginx-start.log 2>&1
}

# start_nginx: a free loopback port (a few tries), nginx started for real, serving.
start_nginx() {
    # As root, workers run as www-data (the example's `user`); otherwise nginx keeps the
    # current user and the directive must go.
    if [ "$(id -u)" = 0 ]; then USER_SED="s|^user www-data;|user www-data;|"; else
        USER_SED="s|^user www-data;.*||"; fi
    tries=0
    while :; do
        tries=$((tries + 1))
        PORT=$((20000 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 30000))
        if try_start_nginx "$PORT"; then break; fi
        grep -q "Address already in use" nginx-start.log logs/ron-error.log 2>/dev/null &&
            [ $tries -lt 8 ] && continue
        cat nginx-start.log >&2
        fail "nginx did not start"
    done
    wait_for 10 test -s run/nginx.pid || fail "no nginx pid file"
    NGX_PID=$(cat run/nginx.pid)
    BASE="http://127.0.0.1:$PORT"
    # `nginx -t` passing proves little (issue 6): it must answer, from 2 workers.
    body=$(curl -s --max-time 5 -H "${PROBE_HEADER:-X-Tenant-Id: $T1}" "$BASE/hello") || fail "nginx does not answer on $BASE"
    [ "$body" = hello ] || fail "nginx answered '$body' on /hello"
    workers=$(ps -o pid= --ppid "$NGX_PID" | wc -l)
    [ "$workers" -eq "$EXPECT_WORKERS" ] ||
        fail "expected $EXPECT_WORKERS nginx workers, found $workers"
    log "nginx $NGX_PID serves on $BASE with $workers workers ($KIND path)"
}

workers() { ps -o pid= --ppid "$NGX_PID" | tr -d ' ' | sort; }

# reload_nginx: `nginx -s reload`, and new workers really took over (the master re-read
# the configuration and, for the Lua path, ran init() again).
reload_nginx() {
    workers >workers.before
    RON_ACCOUNTING_LIB="$LIB" "$NGX" -p "$WORK" -c "$WORK/nginx.conf" -s reload \
        >>nginx-signal.log 2>&1 || { cat nginx-signal.log >&2; fail "nginx -s reload"; }
    wait_for 10 sh -c "ps -o pid= --ppid $NGX_PID | tr -d ' ' | sort | comm -13 workers.before - | grep -q ." ||
        fail "no new workers after nginx -s reload"
}

stop_nginx() { # graceful: every worker finishes its requests (and their log phase)
    kill -QUIT "$NGX_PID"
    wait_for 30 sh -c "! kill -0 $NGX_PID 2>/dev/null" || fail "nginx did not quit"
    NGX_PID=""
}

metrics() { curl -s --max-time 5 --unix-socket "$WORK/run/nginx-metrics.sock" http://gw/metrics; }

# metric NAME_AND_LABELS: its value in the gateway's metrics
metric() {
    metrics | awk -v k="$1" 'index($0, k " ") == 1 { print $2; found = 1 } END { if (!found) print "missing" }'
}

# curl_mix N: N requests over the tenants, paths and methods, one curl each.
curl_mix() {
    i=0
    while [ $i -lt "$1" ]; do
        i=$((i + 1))
        case $((i % 4)) in
            0) t=$T1 ;; 1) t=$T2 ;; 2) t=$T3 ;; 3) t=$T1_UPPER ;;
        esac
        case $((i % 6)) in
            0) p=/hello ;; 1) p=/f1k.bin ;; 2) p=/f10k.bin ;; 3) p=/f100k.bin ;;
            4) p=/no-such-file ;; 5) p=/ ;;
        esac
        if [ $((i % 5)) -eq 0 ]; then m="-I"; else m=""; fi
        curl -s -o /dev/null $m --max-time 5 -H "X-Tenant-Id: $t" \
            -H "X-Subject-Id: user-$((i % 7))" "$BASE$p" || fail "curl $p"
    done
}

# wrk_load SECONDS: a bounded wrk run (2 threads, 8 connections) over the same mix.
wrk_load() {
    wrk -t2 -c8 -d"$1"s -s "$SRC/tests/nginx/wrk-mix.lua" "$BASE" >"wrk-$$-$1.log" 2>&1
}

# What nginx served, from its own access log: per (tenant, dimension), the sum of
# $bytes_sent and the number of requests of every line whose tenant is a UUID.
served_totals() {
    # a test that logs an API key rather than the tenant maps it first (TENANT_MAP_SED)
    sed -e "$TENANT_MAP_SED" "$WORK/logs/ron-access.log" | awk '{
        t = ""; b = ""
        for (i = 1; i <= NF; i++) if ($i ~ /^tenant="/) { t = $i; b = $(i - 1) }
        sub(/^tenant="/, "", t); sub(/"$/, "", t); t = tolower(t)
        h = t; n = gsub(/[0-9a-f]/, "", h)
        if (length(t) == 36 && n == 32 && h == "----" && substr(t, 9, 1) == "-" &&
            substr(t, 14, 1) == "-" && substr(t, 19, 1) == "-" && substr(t, 24, 1) == "-") {
            bytes[t] += b; req[t]++
        }
    } END { for (t in req) { printf "%s bytes %.0f\n%s requests %.0f\n", t, bytes[t], t, req[t] } }' \
        | sort
}

ledger_totals() {
    "$HOST" verify --totals "$WORK/var/ledger" 2>/dev/null |
        awk '$1 == "total" { print $2, $3, $4 }' | sort
}

totals_match() {
    ledger_totals >got.txt
    cmp -s want.txt got.txt
}

# finish: stop nginx gracefully, then wait until the ledger holds exactly what nginx
# served; stop the sidecar (exit 0) and verify the ledger's digests and chains.
finish() {
    stop_nginx
    served_totals >want.txt
    [ -s want.txt ] || fail "the access log shows no metered request"
    wait_for 60 totals_match || { diff want.txt got.txt >&2; fail "ledger totals != access log"; }
    alive "$SIDECAR_PID" || fail "the sidecar died"
    stop_sidecar
    "$HOST" verify "$WORK/var/ledger" >verify.out 2>&1 || { cat verify.out >&2; fail "verify"; }
    grep -q "^OK$" verify.out || fail "verify did not say OK"
    totals_match || fail "totals changed after the sidecar stopped"
    lines=$(wc -l <"$WORK/logs/ron-access.log")
    log "OK: ledger totals equal nginx's access log ($lines lines):"
    sed "s/^/  /" want.txt >&2
    # passed: drop the bulky files (a failed run keeps everything for a look)
    rm -f "$WORK/run/plane" "$WORK/logs/ron-access.log"
}
