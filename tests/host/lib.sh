# What the host tests (tests/host/*.sh) share; sourced first thing by each of them:
#
#   . "$2/tests/host/lib.sh" && host_test NAME "$@" || exit 1
#
# host_test NAME HOST SOURCE_DIR WORK_DIR [...]: sets host, src and work, makes work a fresh
#     directory and the current one (set -u from here on).
# host_case NAME CASE HOST SOURCE_DIR WORK_DIR: host_test for a script of cases: sets
#     case_, host, src, work and dir (WORK_DIR/CASE, a fresh directory; the current one
#     stays); failures say "NAME CASE".
# fail MESSAGE: "NAME: FAILED: MESSAGE" on stderr with the tail of every log in work
#     (*.log, and the glob patterns of HOST_TEST_LOGS relative to work); exits 1.
# wait_for SECONDS CMD...: polls CMD every 0.2 s; false when it never succeeded.
# listening LOG [SECONDS]: waits for a daemon's "listening on" line in LOG (default 20 s; on
#     127.0.0.1 or 0.0.0.0), then sets port and url (http://127.0.0.1:PORT); false when it
#     never came.
# wait_line LOG PATTERN SECONDS WHAT: waits for a line matching PATTERN (grep -E) in LOG
#     while the daemon $pid lives; fails "WHAT never came" or "the daemon ended early".
# expect_exit STATUS OUT CMD...: runs CMD (stdout and stderr into OUT, then shown); fails
#     unless it exits STATUS.
# run_lua OUT SCRIPT ARGS...: HOST run SCRIPT (stdout in OUT, stderr in OUT.err); fails,
#     showing both, when it does not exit 0.
# refused_alike CONF: --check with CONF and a start with it both exit 2 with the same one
#     line (check.err; start.err), as a refused configuration must.
# fast_conf FILE: writes FILE, a daemon configuration on tests/host/fast_clock.lua from the
#     moment r0 (the caller's; now when unset) with the Lua fields read on stdin over it.
# usage_batch N LINES SUBJECTS IMUL BMUL MOD: batch.txt, LINES deterministic records of
#     batch N over the tenants T1 T2 T3 ("tenant subject dimension value"), appended to
#     expected.txt too: odd lines 1 request, even lines (i*IMUL + N*BMUL) % MOD + 1 bytes.
# snapshot DIR: each file's name and BLAKE3 under DIR, sorted (what verify must not change).
# run_verify STATUS PATH: HOST verify PATH (dir/verify.out, shown; dir/verify.err); fails
#     unless it exits STATUS.
# verify_keeps STATUS PATH TREE: run_verify STATUS PATH, and TREE is as it was before.
# daemon_start LOG CONF VAR: examples/daemon.lua --config CONF --var VAR in the background,
#     output in LOG; waits for its "listening on" line (10 s) and sets pid, port and base
#     (http://127.0.0.1:PORT).
# fast_product_conf FILE: writes FILE, the whole product (systems = "all", the embedded
#     defaults' composition) on the fast clock from now.
# A failure kills the daemon $pid when one is running.
# shellcheck shell=sh
# shellcheck disable=SC2034,SC2154 # host, src, port, url, case_, dir: for the script; pid,
# T1..T3: its

host_test() {
    set -u
    host_test_name=$1 host=$2 src=$3 work=$4
    rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
}

host_case() {
    set -u
    host_test_name="$1 $2" case_=$2 host=$3 src=$4 work=$5 dir=$5/$2
    rm -rf "$dir" && mkdir -p "$dir" || exit 1
}

fail() {
    echo "$host_test_name: FAILED: $*" >&2
    [ -n "${pid:-}" ] && kill -9 "$pid" 2>/dev/null
    for f in "$work"/*.log ${HOST_TEST_LOGS:-}; do
        case $f in /*) ;; *) f="$work/$f" ;; esac
        [ -f "$f" ] && { echo "--- $f" >&2; tail -30 "$f" >&2; }
    done
    exit 1
}

wait_for() {
    n=$(($1 * 5)); shift
    while [ "$n" -gt 0 ]; do "$@" && return 0; sleep 0.2; n=$((n - 1)); done
    return 1
}

listening() {
    wait_for "${2:-20}" grep -Eq "listening on http://(127.0.0.1|0.0.0.0):" "$1" || return 1
    port=$(sed -En 's#.*listening on http://(127.0.0.1|0.0.0.0):([0-9]*) .*#\2#p' "$1" | head -1)
    url="http://127.0.0.1:$port"
}

wait_line() {
    n=$(($3 * 10))
    until grep -Eq "$2" "$1"; do
        n=$((n - 1)); [ "$n" -gt 0 ] || fail "$4 never came"
        kill -0 "$pid" 2>/dev/null || fail "the daemon ended early (waiting for $4)"
        sleep 0.1
    done
}

expect_exit() {
    want=$1 out=$2; shift 2
    "$@" >"$out" 2>&1
    rc=$?
    cat "$out"
    [ "$rc" -eq "$want" ] || fail "$* exited $rc, expected $want"
}

run_lua() {
    out=$1; shift
    "$host" run "$@" >"$out" 2>"$out.err" || { cat "$out" "$out.err" >&2; fail "$1"; }
}

refused_alike() {
    "$host" run "$src/examples/daemon.lua" --check --config "$1" --var var >check.out 2>check.err
    rc=$?
    [ "$rc" = 2 ] || fail "--check with $1: exit $rc, expected 2: $(cat check.err)"
    [ "$(wc -l <check.err)" -eq 1 ] || fail "--check with $1: not one line: $(cat check.err)"
    timeout -s KILL 20 "$host" run "$src/examples/daemon.lua" --config "$1" --var var \
        >start.out 2>start.err
    rc=$?
    [ "$rc" = 2 ] || fail "start with $1: exit $rc, expected 2: $(cat start.err)"
    cmp -s check.err start.err || fail "start with $1 said another thing: $(cat start.err)"
}

fast_conf() {
    { echo "local c = dofile(\"$src/tests/host/fast_clock.lua\")(${r0:-$(date +%s)})"
      echo "for k, v in pairs({"; cat; echo "}) do c[k] = v end"
      echo "return c"; } >"$1"
}

usage_batch() {
    awk -v b="$1" -v n="$2" -v subj="$3" -v im="$4" -v bm="$5" -v mod="$6" \
        -v t1="$T1" -v t2="$T2" -v t3="$T3" 'BEGIN {
        split(t1 " " t2 " " t3, T, " ")
        for (i = 1; i <= n; i++) {
            t = T[(i + b) % 3 + 1]
            if (i % 2) print t, "user-" (i % subj), "requests", 1
            else       print t, "user-" (i % subj), "bytes", (i * im + b * bm) % mod + 1
        }
    }' >batch.txt
    cat batch.txt >>expected.txt
}

snapshot() {
    (cd "$1" && find . -type f | sort | while read -r f; do
        printf '%s ' "$f"; b3sum --no-names "$f"; done)
}

run_verify() {
    "$host" verify "$2" >"$dir/verify.out" 2>"$dir/verify.err"
    got=$?
    cat "$dir/verify.out"
    [ "$got" -eq "$1" ] || { cat "$dir/verify.err" >&2; fail "verify exit $got, expected $1"; }
}

verify_keeps() {
    before=$(snapshot "$3")
    run_verify "$1" "$2"
    [ "$before" = "$(snapshot "$3")" ] || fail "verify changed $3"
}

daemon_start() {
    "$host" run "$src/examples/daemon.lua" --config "$2" --var "$3" >"$1" 2>&1 &
    pid=$!
    listening "$1" 10 || fail "the daemon did not start listening"
    base=$url
}

fast_product_conf() {
    (r0=$(date +%s) && echo 'systems = "all", -- the embedded defaults, on the fast clock' |
        fast_conf "$1")
}
