# shellcheck shell=sh
# Shared by the host tests that run a daemon (sourced; POSIX sh). Needs host (ron-accounting),
# src (the source tree) and a fail function.
#
#   start_daemon LOG CONF VAR   examples/daemon.lua --config CONF --var VAR in the background,
#                               output in LOG; waits for its "listening on" line (10 s) and
#                               sets pid, port and base (http://127.0.0.1:PORT)
#   fast_product_conf FILE      writes FILE: the whole product (systems = "all", the embedded
#                               defaults' composition) on the fast clock from now

# shellcheck disable=SC2034,SC2154 # (host, src: the caller's; pid, port, base: for it)
start_daemon() {
    "$host" run "$src/examples/daemon.lua" --config "$2" --var "$3" >"$1" 2>&1 &
    pid=$!
    n=100 port=""
    while [ $n -gt 0 ] && [ -z "$port" ]; do
        sleep 0.1
        port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\) .*|\1|p' "$1")
        n=$((n - 1))
    done
    [ -n "$port" ] || fail "the daemon did not start listening"
    base="http://127.0.0.1:$port"
}

# shellcheck disable=SC2154 # (src: the caller's)
fast_product_conf() {
    cat >"$1" <<EOF
local c = dofile("$src/tests/host/fast_clock.lua")($(date +%s))
c.systems = "all" -- the embedded defaults' composition, on the fast clock
return c
EOF
}
