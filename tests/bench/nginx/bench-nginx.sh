#!/bin/sh
# Benchmarks of the nginx gateway (issue 6; PRODUCT.md §7; tests/bench/README.md):
#
#   bench-nginx.sh --nginx NGINX --lib LIBRONACCT --src SOURCE_DIR --work DIR
#                  [--module NATIVE_MODULE] [--atomic-lib LIB] [--out RESULTS.jsonl]
#                  [--quick] [--rounds N] [--seconds S]
#
# 1. Per request: nginx (one worker, access log off) serving a small response (`return
#    200 "hello\n"`, GET with X-Tenant-Id and X-Subject-Id) under a bounded wrk run on
#    loopback, in five configurations measured in the same run, interleaved over rounds
#    (CPU: the least disturbed round, and the median; requests/s: the median):
#      none      no metering (the Lua module not even loaded)
#      empty     an empty log_by_lua block
#      dict      today's pattern: log_by_lua with ngx.var reads and ngx.shared.DICT:incr of
#                tenant|subject|bytes and tenant|subject|requests
#      lua       our Lua path: ron.accounting.nginx's log()
#      native    our native module: two ron_accounting_record directives
#    Figures: CPU time of the worker per request (from /proc/<pid>/schedstat: ns on CPU)
#    and requests/s (wrk). Targets: lua adds <= 0.5 us beyond empty; native loses <= 2 %
#    of the requests/s of none.
# 2. In a loop the JIT compiles, inside nginx (tests/bench/nginx/inloop.lua), one worker
#    and two workers contending on the same keys: ns per operation of our FFI record, of
#    our whole log(), of dict:incr, of a bare FFI atomic add. Targets: record <= 2x the
#    atomic add; >= 3x faster than dict:incr with one worker, >= 5x with two.
# Every figure is printed and written as a BENCH {json} line (stdout and --out).
set -u

NGX="" LIB="" SRC="" WORK="" MODULE="" ATOMIC="" OUT="" QUICK=0 ROUNDS=5 SECONDS_RUN=2
while [ $# -gt 0 ]; do
    case $1 in
        --nginx) NGX=$2; shift ;;
        --lib) LIB=$2; shift ;;
        --src) SRC=$2; shift ;;
        --work) WORK=$2; shift ;;
        --module) MODULE=$2; shift ;;
        --atomic-lib) ATOMIC=$2; shift ;;
        --out) OUT=$2; shift ;;
        --rounds) ROUNDS=$2; shift ;;
        --seconds) SECONDS_RUN=$2; shift ;;
        --quick) QUICK=1 ;;
        *) echo "bench-nginx: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
[ -n "$NGX" ] && [ -n "$LIB" ] && [ -n "$SRC" ] && [ -n "$WORK" ] || {
    echo "usage: bench-nginx.sh --nginx NGINX --lib LIBRONACCT --src DIR --work DIR [...]" >&2
    exit 2
}
# absolute paths: nginx runs in WORK
LIB=$(readlink -f "$LIB") SRC=$(readlink -f "$SRC")
[ -n "$MODULE" ] && MODULE=$(readlink -f "$MODULE")
[ -n "$ATOMIC" ] && ATOMIC=$(readlink -f "$ATOMIC")
[ -n "$OUT" ] && OUT=$(readlink -f "$OUT")
command -v wrk >/dev/null || { echo "bench-nginx: wrk not found (tools/deps.sh)" >&2; exit 1; }
LOOP_N=2000000
DICT_N=1000000
WARM=1
if [ $QUICK = 1 ]; then
    ROUNDS=1 SECONDS_RUN=1 LOOP_N=100000 DICT_N=50000 WARM=1
fi

T1=6f1c3c1e-2b7a-4d5e-9a43-0c8e5b1f7a21
NGX_PID=""
cleanup() {
    if [ -n "$NGX_PID" ] && kill -0 "$NGX_PID" 2>/dev/null; then
        kill -QUIT "$NGX_PID" 2>/dev/null
        sleep 0.5
        kill -KILL "$NGX_PID" 2>/dev/null
    fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM

rm -rf "$WORK" && mkdir -p "$WORK/run" "$WORK/logs" || exit 1
chmod 700 "$WORK/run"
cd "$WORK" || exit 1

emit() { # emit JSON: one BENCH line on stdout and in --out
    echo "BENCH $1"
    [ -n "$OUT" ] && echo "BENCH $1" >>"$OUT"
}

echo "bench-nginx: $(nproc) CPUs, loadavg $(cut -d' ' -f1-3 /proc/loadavg)," \
     "$("$NGX" -v 2>&1 | sed 's/.*: //'), rounds $ROUNDS x ${SECONDS_RUN}s"

# ---- configurations ----------------------------------------------------------------------
# conf VARIANT WORKERS PORT: an nginx.conf on stdout
conf() {
    v=$1 workers=$2 port=$3
    cat <<EOF
worker_processes $workers;
pid $WORK/run/nginx.pid;
error_log $WORK/logs/error.log warn;
$( [ "$(id -u)" = 0 ] && echo "user www-data;" )
EOF
    case $v in
        none) ;;
        native) echo "load_module $MODULE;" ;;
        *) echo "load_module /usr/lib/nginx/modules/ndk_http_module.so;"
           echo "load_module /usr/lib/nginx/modules/ngx_http_lua_module.so;" ;;
    esac
    cat <<EOF
events { worker_connections 1024; }
http {
    access_log off;
    keepalive_requests 1000000;
EOF
    case $v in
        dict|loop)
            echo "    lua_shared_dict bench_acct 32m;" ;;
    esac
    case $v in
        lua|loop)
            cat <<EOF
    lua_package_path "$SRC/lua/?.lua;$SRC/tests/bench/nginx/?.lua;;";
    init_by_lua_block {
        require("ron.accounting.nginx").init {
            meter = { shm = "$WORK/run/plane", amnesia = false },
            tenant = { header = "X-Tenant-Id" },
            subject = { header = "X-Subject-Id", default = "anonymous" },
        }
        local ffi = require "ffi"
        RA_BENCH = { dict = "bench_acct" }
        local lib = os.getenv("RA_BENCH_ATOMIC_LIB")
        if lib and lib ~= "" then
            ffi.cdef [[
            void ra_bench_atomic_add(uint64_t *p, uint64_t v);
            void *mmap(void *addr, size_t length, int prot, int flags, int fd, long off);
            ]]
            RA_BENCH.lib = ffi.load(lib)
            -- PROT_READ|PROT_WRITE, MAP_SHARED|MAP_ANONYMOUS: inherited by the workers
            local p = ffi.C.mmap(nil, 1048576, 3, 0x21, -1, 0)
            RA_BENCH.region = ffi.cast("uint64_t *", p)
        end
    }
EOF
            ;;
        native)
            echo "    ron_accounting_plane $WORK/run/plane;" ;;
    esac
    cat <<EOF
    server {
        listen 127.0.0.1:$port;
        location = /hello {
            return 200 "hello\n";
EOF
    case $v in
        empty) echo "            log_by_lua_block { }" ;;
        dict) cat <<'EOF'
            log_by_lua_block {
                local d = ngx.shared.bench_acct
                local k = (ngx.var.http_x_tenant_id or "-") .. "|" .. (ngx.var.http_x_subject_id or "-")
                d:incr(k .. "|bytes", tonumber(ngx.var.bytes_sent), 0)
                d:incr(k .. "|requests", 1, 0)
            }
EOF
            ;;
        lua) echo '            log_by_lua_block { require("ron.accounting.nginx").log() }' ;;
        native) cat <<'EOF'
            ron_accounting_record $http_x_tenant_id $http_x_subject_id bytes $bytes_sent;
            ron_accounting_record $http_x_tenant_id $http_x_subject_id requests 1;
EOF
            ;;
    esac
    echo "        }"
    if [ "$v" = loop ]; then
        cat <<EOF
        location = /bench/loop {
            content_by_lua_file $SRC/tests/bench/nginx/inloop.lua;
        }
EOF
    fi
    echo "    }"
    echo "}"
}

# start VARIANT WORKERS: nginx on a free port; sets PORT, NGX_PID
start() {
    tries=0
    while :; do
        tries=$((tries + 1))
        PORT=$((20000 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 30000))
        # shellcheck disable=SC2086 # $1 is a word of ours (a variant name)
        conf "$1" "$2" "$PORT" >nginx-$1.conf
        rm -f run/nginx.pid
        if RA_BENCH_ATOMIC_LIB="$ATOMIC" RON_ACCOUNTING_LIB="$LIB" \
            "$NGX" -p "$WORK" -c "$WORK/nginx-$1.conf" >start.log 2>&1; then
            break
        fi
        if grep -q "Address already in use" start.log logs/error.log 2>/dev/null && [ $tries -lt 8 ]; then
            continue
        fi
        cat start.log >&2
        tail -5 logs/error.log >&2 2>/dev/null
        echo "bench-nginx: nginx ($1) did not start" >&2
        exit 1
    done
    i=0
    while [ ! -s run/nginx.pid ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
    NGX_PID=$(cat run/nginx.pid)
    sleep 0.2
    [ "$(curl -s --max-time 5 -H "X-Tenant-Id: $T1" "http://127.0.0.1:$PORT/hello")" = hello ] || {
        echo "bench-nginx: nginx ($1) does not serve" >&2; exit 1; }
}

stop() {
    kill -QUIT "$NGX_PID"
    i=0
    while kill -0 "$NGX_PID" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    NGX_PID=""
}

cpu_ns() { # total ns on CPU of nginx's workers
    t=0
    for w in $(ps -o pid= --ppid "$NGX_PID"); do
        t=$((t + $(cut -d' ' -f1 "/proc/$w/schedstat")))
    done
    echo $t
}

wrk_run() { # wrk_run SECONDS: prints "requests seconds"
    wrk -t1 -c8 -d"$1"s -H "X-Tenant-Id: $T1" -H "X-Subject-Id: user-42" \
        "http://127.0.0.1:$PORT/hello" >wrk.out 2>&1 || { cat wrk.out >&2; exit 1; }
    awk '/ requests in / { n = $1; d = $4; sub(/s,?$/, "", d)
         if (d ~ /m$/) { sub(/m$/, "", d); d = d * 60 } print n, d }' wrk.out
}

# ---- 1. per request -------------------------------------------------------------------
VARIANTS="none empty dict lua"
[ -n "$MODULE" ] && [ -f "$MODULE" ] && VARIANTS="$VARIANTS native"
: >request-rounds.txt
r=0
while [ $r -lt "$ROUNDS" ]; do
    r=$((r + 1))
    for v in $VARIANTS; do
        start "$v" 1
        wrk_run "$WARM" >/dev/null
        c0=$(cpu_ns)
        # shellcheck disable=SC2046 # the figures, split into fields on purpose
        set -- $(wrk_run "$SECONDS_RUN")
        c1=$(cpu_ns)
        stop
        echo "$v $r $1 $2 $((c1 - c0))" >>request-rounds.txt
        awk -v v="$v" -v r="$r" -v n="$1" -v d="$2" -v c="$((c1 - c0))" 'BEGIN {
            printf "  round %d %-7s %8.0f req/s  %6.2f us CPU/request (%d requests)\n",
                   r, v, n / d, c / n / 1000, n }'
    done
done

# Per variant: CPU per request, the minimum over the rounds (the machine is shared: other
# work only ever adds to it) and the median; requests/s, the median. Then the BENCH lines
# (ns_per_op = the minimum CPU per request) with ratios to `none` and to `empty`.
awk -v rounds="$ROUNDS" -v secs="$SECONDS_RUN" '
    { v = $1; k[v]++; cpu[v, k[v]] = $5 / $3; rps[v, k[v]] = $3 / $4 }
    function median(a, v, n,    i, j, t, x) {
        for (i = 1; i <= n; i++) x[i] = a[v, i]
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (x[j] < x[i]) { t = x[i]; x[i] = x[j]; x[j] = t }
        return n % 2 ? x[(n + 1) / 2] : (x[n / 2] + x[n / 2 + 1]) / 2
    }
    function minimum(a, v, n,    i, m) {
        m = a[v, 1]; for (i = 2; i <= n; i++) if (a[v, i] < m) m = a[v, i]; return m
    }
    END {
        split("none empty dict lua native", vs, " ")
        for (i = 1; i <= 5; i++) { v = vs[i]; if (!(v in k)) continue
            c[v] = minimum(cpu, v, k[v]); cm[v] = median(cpu, v, k[v]); q[v] = median(rps, v, k[v]) }
        printf "per request (%d rounds of %s s, one worker, wrk -t1 -c8; CPU: min (median) of the rounds, req/s: median):\n", rounds, secs
        for (i = 1; i <= 5; i++) { v = vs[i]; if (!(v in c)) continue
            printf "  %-7s %6.2f (%5.2f) us CPU/request  %+5.2f us vs none  %+5.2f us vs empty log_by_lua   %7.0f req/s  %+6.1f %% vs none\n",
                v, c[v] / 1000, cm[v] / 1000, (c[v] - c["none"]) / 1000,
                ("empty" in c) ? (c[v] - c["empty"]) / 1000 : 0, q[v], (q[v] / q["none"] - 1) * 100 }
        if (("lua" in c) && ("empty" in c))
            printf "  targets: lua adds %.2f us beyond the empty log_by_lua (<= 0.5)", (c["lua"] - c["empty"]) / 1000
        if ("native" in c)
            printf "; native costs %.1f %% of the CPU per request of none, %+.1f %% req/s (loss <= 2 %%)", (c["native"] / c["none"] - 1) * 100, (q["native"] / q["none"] - 1) * 100
        printf "\n"
        for (i = 1; i <= 5; i++) { v = vs[i]; if (!(v in c)) continue
            printf "BENCH {\"bench\":\"nginx\",\"name\":\"nginx/request/%s\",\"lang\":\"nginx\"," \
                   "\"params\":{\"workers\":1,\"wrk_threads\":1,\"connections\":8,\"seconds\":%s,\"rounds\":%d,\"response\":\"hello\\\\n\",\"access_log\":false}," \
                   "\"ns_per_op\":%.1f,\"cpu_ns_per_request\":%.1f,\"cpu_ns_per_request_median\":%.1f,\"ops_per_s\":%.0f," \
                   "\"baselines\":{\"none\":{\"cpu_ns_per_request\":%.1f,\"ops_per_s\":%.0f},\"empty_log_by_lua\":{\"cpu_ns_per_request\":%.1f,\"ops_per_s\":%.0f}}," \
                   "\"ratios\":{\"none\":%.3f,\"empty_log_by_lua\":%.3f}," \
                   "\"added_cpu_ns_vs_none\":%.1f,\"added_cpu_ns_vs_empty_log_by_lua\":%.1f,\"rps_change_vs_none_pct\":%.2f}\n",
                v, secs, rounds, c[v], c[v], cm[v], q[v], c["none"], q["none"], c["empty"], q["empty"],
                c[v] / c["none"], c[v] / c["empty"], c[v] - c["none"], c[v] - c["empty"],
                (q[v] / q["none"] - 1) * 100 }
    }' request-rounds.txt >request-summary.txt
grep -v "^BENCH " request-summary.txt
grep "^BENCH " request-summary.txt | while IFS= read -r line; do emit "${line#BENCH }"; done

# ---- 2. in a JIT-compiled loop inside nginx ------------------------------------------------
LOOP_VARIANTS="ffi stripe key key_stripe log dict"
[ -n "$ATOMIC" ] && [ -f "$ATOMIC" ] && LOOP_VARIANTS="$LOOP_VARIANTS atomic"
: >loop-results.txt
# loop_once VARIANT WORKERS ROUND: "ns_per_op concurrency" (ns: CPU time per operation,
# the mean over the workers). Two workers must have run at once for the figure to mean
# contention: concurrency = the overlap of their loops' wall-clock intervals times the
# smaller share of that interval each spent on a CPU (1.0: side by side all along; on a
# busy machine the kernel may time-slice them instead).
loop_once() {
    n=$LOOP_N
    [ "$1" = dict ] && n=$DICT_N
    url="http://127.0.0.1:$PORT/bench/loop?variant=$1&n=$n&keys=64&barrier=$2&round=$3"
    if [ "$2" = 1 ]; then
        curl -s --max-time 120 -H "X-Tenant-Id: $T1" -H "X-Subject-Id: user-42" "$url" >loop1.out
        # shellcheck disable=SC2046 # the figures, split into fields on purpose
        set -- $(cat loop1.out)
        [ $# -eq 6 ] || return 1
        echo "$2 1"
        return 0
    fi
    curl -s --max-time 120 -H "X-Tenant-Id: $T1" -H "X-Subject-Id: user-42" "$url" >loopA.out &
    a=$!
    curl -s --max-time 120 -H "X-Tenant-Id: $T1" -H "X-Subject-Id: user-42" "$url" >loopB.out &
    b=$!
    wait $a $b
    # shellcheck disable=SC2046 # the figures, split into fields on purpose
    set -- $(cat loopA.out) $(cat loopB.out)
    # two different workers, started together
    [ $# -eq 12 ] && [ "$1" != "$7" ] && [ "$3" = together ] && [ "$9" = together ] || return 1
    awk -v c1="$2" -v w1="$4" -v s1="$5" -v e1="$6" -v c2="$8" -v w2="${10}" -v s2="${11}" \
        -v e2="${12}" 'BEGIN {
        lo = s1 > s2 ? s1 : s2; hi = e1 < e2 ? e1 : e2; len = (e1 - s1 > e2 - s2) ? e1 - s1 : e2 - s2
        ov = (hi > lo && len > 0) ? (hi - lo) / len : 0
        r1 = c1 / w1; r2 = c2 / w2; r = r1 < r2 ? r1 : r2; if (r > 1) r = 1
        printf "%.3f %.2f\n", (c1 + c2) / 2, ov * r }'
}
for w in 1 2; do
    start loop "$w"
    r=0
    for v in $LOOP_VARIANTS; do
        # two workers: up to 10 attempts, kept: the first with concurrency >= 0.9, or the
        # most concurrent one
        best="" bestc=-1 try=0
        while [ $try -lt 10 ]; do
            try=$((try + 1))
            r=$((r + 1))
            got=$(loop_once "$v" "$w" "$r") || continue
            c=${got#* }
            if awk -v c="$c" -v b="$bestc" 'BEGIN { exit !(c > b) }'; then best=$got bestc=$c; fi
            awk -v c="$c" 'BEGIN { exit !(c >= 0.9) }' && break
        done
        [ -n "$best" ] || { echo "bench-nginx: could not run $v on $w workers at once" >&2; exit 1; }
        echo "$v $w $best" >>loop-results.txt
        echo "  loop $v, $w worker(s): ${best% *} ns/op (concurrency ${best#* })"
    done
    stop
done
awk -v n="$LOOP_N" -v dn="$DICT_N" '
    { ns[$1, $2] = $3; conc[$1, $2] = $4; have[$1] = 1 }
    END {
        print "in a JIT-compiled loop inside nginx (ns per operation; 64 keys, the same in every worker):"
        for (w = 1; w <= 2; w++) {
            printf "  %d worker%s: record %.1f  record striped per worker %.1f  log() %.1f  dict:incr %.1f  atomic add %s%s\n", w,
                (w > 1 ? "s contending" : ""), ns["ffi", w], ns["stripe", w], ns["log", w], ns["dict", w],
                ("atomic" in have) ? sprintf("%.1f", ns["atomic", w]) : "n/a",
                (w > 1 ? sprintf("  (concurrency: record %.2f, dict %.2f; 1 = side by side)",
                                 conc["ffi", w], conc["dict", w]) : "")
            printf "      record / atomic add = %s (target <= 2), dict:incr / record = %.2fx faster (target >= %d)\n",
                ("atomic" in have) ? sprintf("%.2f", ns["ffi", w] / ns["atomic", w]) : "n/a",
                ns["dict", w] / ns["ffi", w], (w == 1 ? 3 : 5)
            printf "      striped: record / atomic add = %s, dict:incr / record = %.2fx faster\n",
                ("atomic" in have) ? sprintf("%.2f", ns["stripe", w] / ns["atomic", w]) : "n/a",
                ns["dict", w] / ns["stripe", w]
            printf "      key handles: record_key %.1f, striped %.1f; record_key / atomic add = %s (target <= 2), striped %s; dict:incr / record_key = %.2fx faster, striped %.2fx\n",
                ns["key", w], ns["key_stripe", w],
                ("atomic" in have) ? sprintf("%.2f", ns["key", w] / ns["atomic", w]) : "n/a",
                ("atomic" in have) ? sprintf("%.2f", ns["key_stripe", w] / ns["atomic", w]) : "n/a",
                ns["dict", w] / ns["key", w], ns["dict", w] / ns["key_stripe", w]
            split("ffi stripe key key_stripe log dict atomic", vs, " ")
            for (i = 1; i <= 7; i++) { v = vs[i]; if (!(v in have)) continue
                base = ""
                if ("atomic" in have) base = sprintf("\"atomic_add\":{\"ns_per_op\":%.3f},", ns["atomic", w])
                rat = ""
                if ("atomic" in have) rat = sprintf("\"atomic_add\":%.3f,", ns[v, w] / ns["atomic", w])
                printf "BENCH {\"bench\":\"nginx\",\"name\":\"nginx/loop/%s/w%d\",\"lang\":\"lua\"," \
                       "\"params\":{\"workers\":%d,\"keys\":64,\"ops\":%d,\"concurrency\":%.2f,\"clock\":\"thread_cputime\"}," \
                       "\"ns_per_op\":%.3f,\"ops_per_s\":%.0f," \
                       "\"baselines\":{%s\"dict_incr\":{\"ns_per_op\":%.3f}}," \
                       "\"ratios\":{%s\"dict_incr\":%.3f}}\n",
                    v, w, w, (v == "dict" ? dn : n), conc[v, w], ns[v, w], 1e9 / ns[v, w],
                    base, ns["dict", w], rat, ns[v, w] / ns["dict", w]
            }
        }
    }' loop-results.txt >loop-summary.txt
grep -v "^BENCH " loop-summary.txt
grep "^BENCH " loop-summary.txt | while IFS= read -r line; do emit "${line#BENCH }"; done
echo "bench-nginx: done (work files in $WORK)"
