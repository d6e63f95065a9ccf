# What the host tests (tests/host/*.sh) share; sourced first thing by each of them:
#
#   . "$2/tests/host/lib.sh" && host_test NAME "$@" || exit 1
#
# host_test NAME HOST SOURCE_DIR WORK_DIR [...]: sets host, src and work, makes work a fresh
#     directory and the current one (set -u from here on).
# fail MESSAGE: "NAME: FAILED: MESSAGE" on stderr with the tail of every log in work
#     (*.log, and the glob patterns of HOST_TEST_LOGS relative to work); exits 1.
# wait_for SECONDS CMD...: polls CMD every 0.2 s; false when it never succeeded.
# listening LOG [SECONDS]: waits for a daemon's "listening on" line in LOG (default 20 s),
#     then sets port and url (http://127.0.0.1:PORT); false when it never came.
# shellcheck shell=sh
# shellcheck disable=SC2034 # host, src, port, url: set for the script that sources this

host_test() {
    set -u
    host_test_name=$1 host=$2 src=$3 work=$4
    rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
}

fail() {
    echo "$host_test_name: FAILED: $*" >&2
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
    wait_for "${2:-20}" grep -q "listening on http://127.0.0.1:" "$1" || return 1
    port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\) .*|\1|p' "$1" | head -1)
    url="http://127.0.0.1:$port"
}
