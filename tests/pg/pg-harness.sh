#!/bin/sh
# A throwaway PostgreSQL for tests and benchmarks: a cluster in a temporary directory,
# listening on 127.0.0.1 at a free port (and on a unix socket in that directory), torn
# down at the end. Reused by specs (spec/ron/accounting/export/exporters/postgres_spec.lua through
# tests/pg/harness.lua), benchmarks (tests/bench/bench-postgres.lua) and end-to-end tests.
#
#   pg-harness.sh start [--owner PID] [--fsync on|off] [--max-conns N]
#                       [--wal-init-zero on|off] [DIR]
#        initdb + start; prints ONE line on stdout: the directory, a tab, the conninfo
#        ("host=127.0.0.1 port=P dbname=postgres user=ron"). DIR: created with mktemp -d
#        when omitted (it must not exist or be empty). --owner PID: a detached watcher
#        tears the cluster down (stop) once PID is gone, so a test process that dies
#        never leaves a server behind. --fsync off (the default: tests; not durable) or on
#        (benchmarks). --max-conns N: max_connections (default 60; bench-wallet's
#        64-connection baseline asks for more). --wal-init-zero off: new WAL segments are
#        not zero-filled (PostgreSQL's default: on). A fresh cluster creates every segment
#        it writes, and the commit that crosses into one waits for its 16 MB of zeroes and
#        their sync (50-76 ms on this disk, every ~2 s under bench-wallet); a server that
#        has checkpointed recycles old segments instead (wal_recycle), so benchmarks that
#        time single commits turn it off to measure a warmed server (docs/WALLET.md §8).
#   pg-harness.sh conninfo DIR | url DIR     the conninfo / a postgresql:// URI
#   pg-harness.sh stop-server DIR            pg_ctl stop -m fast, data kept (an outage)
#   pg-harness.sh start-server DIR           started again, same port, same data
#   pg-harness.sh stop DIR                   stop (fast, then immediate) and remove DIR;
#                                            idempotent
#   pg-harness.sh psql DIR [ARGS...]         psql on the cluster (-X -q -v ON_ERROR_STOP=1)
#   pg-harness.sh freeze DIR                 SIGSTOP the postmaster, then its children (the
#                                            backends, the WAL writer, ...): a stalled server,
#                                            connections open, nothing answered
#   pg-harness.sh thaw DIR                   SIGCONT them (children first)
#
# initdb and postgres refuse to run as root: as root, they run as the user `postgres`
# (created by Debian's postgresql package) through runuser, and DIR is handed to it.
# Binaries: $PG_BINDIR, else `pg_config --bindir`, else /usr/lib/postgresql/*/bin.
# Exit status: 0, 1 on failure (the reason on stderr), 3 when PostgreSQL is not installed.
set -eu

die() { echo "pg-harness: $*" >&2; exit 1; }

find_bindir() {
    if [ -n "${PG_BINDIR:-}" ] && [ -x "$PG_BINDIR/pg_ctl" ]; then echo "$PG_BINDIR"; return; fi
    if command -v pg_config >/dev/null 2>&1; then
        d=$(pg_config --bindir 2>/dev/null || true)
        if [ -n "$d" ] && [ -x "$d/pg_ctl" ] && [ -x "$d/initdb" ]; then echo "$d"; return; fi
    fi
    for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -r); do
        if [ -x "$d/pg_ctl" ] && [ -x "$d/initdb" ]; then echo "$d"; return; fi
    done
    echo ""
}

BIN=$(find_bindir)
if [ -z "$BIN" ]; then
    echo "pg-harness: PostgreSQL server binaries not found (install the Debian package" \
         "postgresql: tools/deps.sh)" >&2
    exit 3
fi

# as_pg CMD...: runs CMD as the cluster's owner.
if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || die "running as root and there is no 'postgres' user"
    as_pg() { runuser -u postgres -- "$@"; }
    OWNER_USER=postgres
else
    as_pg() { "$@"; }
    OWNER_USER=$(id -un)
fi

conninfo_of() { echo "host=127.0.0.1 port=$(cat "$1/port") dbname=postgres user=ron"; }

# start_server DIR PORT: 0 when up; 1 when the port was taken; dies otherwise.
start_server() {
    dir=$1 port=$2
    maxc=$(cat "$dir/max_conns" 2>/dev/null || echo 60)
    : > "$dir/log.start"
    chown "$OWNER_USER" "$dir/log.start" 2>/dev/null || true
    if as_pg "$BIN/pg_ctl" -D "$dir/data" -l "$dir/log.start" -w -t 30 -s \
        -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=$(cat "$dir/fsync") \
            -c full_page_writes=$(cat "$dir/fsync") -c shared_buffers=32MB \
            -c max_connections=$maxc -c log_min_messages=warning \
            -c wal_init_zero=$(cat "$dir/wal_init_zero" 2>/dev/null || echo on)" start >/dev/null 2>&1; then
        cat "$dir/log.start" >> "$dir/log" 2>/dev/null || true
        return 0
    fi
    cat "$dir/log.start" >> "$dir/log" 2>/dev/null || true
    if grep -q -e "could not bind" -e "Address already in use" -e "could not create lock file" \
        "$dir/log.start" 2>/dev/null; then
        return 1
    fi
    sed 's/^/pg-harness: server log: /' "$dir/log.start" >&2 || true
    die "the server did not start (log: $dir/log)"
}

# thaw DIR: SIGCONT the server's processes (children first; quiet when there is none).
thaw() {
    pm=$(sed -n 1p "$1/data/postmaster.pid" 2>/dev/null || true)
    case "$pm" in ''|*[!0-9]*) return 0 ;; esac
    for c in $(ps -o pid= --ppid "$pm" 2>/dev/null); do kill -CONT "$c" 2>/dev/null || true; done
    kill -CONT "$pm" 2>/dev/null || true
}

stop_server() {
    dir=$1
    [ -f "$dir/data/postmaster.pid" ] || return 0
    thaw "$dir" # a frozen server (freeze) would not stop
    as_pg "$BIN/pg_ctl" -D "$dir/data" -m fast -w -t 20 -s stop >/dev/null 2>&1 ||
        as_pg "$BIN/pg_ctl" -D "$dir/data" -m immediate -w -t 10 -s stop >/dev/null 2>&1 || true
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
start)
    owner="" fsync=off dir="" maxconns=60 walzero=on
    while [ $# -gt 0 ]; do
        case "$1" in
        --owner) owner=$2; shift 2 ;;
        --fsync) fsync=$2; shift 2 ;;
        --max-conns) maxconns=$2; shift 2 ;;
        --wal-init-zero) walzero=$2; shift 2 ;;
        -*) die "start: unknown option $1" ;;
        *) dir=$1; shift ;;
        esac
    done
    case "$fsync" in on|off) ;; *) die "--fsync on|off" ;; esac
    case "$walzero" in on|off) ;; *) die "--wal-init-zero on|off" ;; esac
    if [ -z "$dir" ]; then
        dir=$(mktemp -d "${TMPDIR:-/tmp}/ron-pg.XXXXXX")
    else
        mkdir -p "$dir"
    fi
    dir=$(cd "$dir" && pwd)
    echo "$fsync" > "$dir/fsync"
    case "$maxconns" in ''|*[!0-9]*) die "--max-conns N" ;; esac
    echo "$maxconns" > "$dir/max_conns"
    echo "$walzero" > "$dir/wal_init_zero"
    : > "$dir/log"
    chown "$OWNER_USER" "$dir" "$dir/log"
    chmod 700 "$dir"
    as_pg "$BIN/initdb" -D "$dir/data" -U ron --auth=trust -E UTF8 --no-locale --no-sync \
        >> "$dir/log" 2>&1 || { sed 's/^/pg-harness: initdb: /' "$dir/log" >&2; die "initdb failed"; }
    # A free port: try pseudo-random ones; the server itself is the arbiter (bind).
    seed=$(( ($$ * 7919 + $(date +%s) * 13 + $(date +%N 2>/dev/null | sed 's/^0*//;s/^$/0/') ) % 20000 ))
    up=0
    for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
        port=$(( 20000 + (seed + i * 997) % 20000 ))
        echo "$port" > "$dir/port"
        if start_server "$dir" "$port"; then up=1; break; fi
    done
    [ "$up" = 1 ] || die "no free port found (log: $dir/log)"
    if [ -n "$owner" ]; then
        # Detached from our stdout (the caller reads it to EOF) and from signals to us.
        self=$0
        ( trap '' INT TERM HUP
          while kill -0 "$owner" 2>/dev/null && [ -d "$dir/data" ]; do sleep 1; done
          [ -d "$dir" ] && sh "$self" stop "$dir" ) </dev/null >/dev/null 2>&1 &
    fi
    printf '%s\t%s\n' "$dir" "$(conninfo_of "$dir")"
    ;;
conninfo)
    [ -f "${1:-}/port" ] || die "conninfo: no cluster in '${1:-}'"
    conninfo_of "$1"
    ;;
url)
    [ -f "${1:-}/port" ] || die "url: no cluster in '${1:-}'"
    echo "postgresql://ron@127.0.0.1:$(cat "$1/port")/postgres"
    ;;
stop-server)
    [ -d "${1:-}/data" ] || die "stop-server: no cluster in '${1:-}'"
    stop_server "$1"
    ;;
start-server)
    [ -d "${1:-}/data" ] || die "start-server: no cluster in '${1:-}'"
    # The same port: retried a few times (a port only just released).
    for i in 1 2 3 4 5 6 7 8 9 10; do
        if start_server "$1" "$(cat "$1/port")"; then exit 0; fi
        sleep 0.2
    done
    die "start-server: port $(cat "$1/port") stays busy"
    ;;
stop)
    dir=${1:-}
    [ -n "$dir" ] || die "stop: needs DIR"
    [ -d "$dir" ] || exit 0
    [ -f "$dir/port" ] || [ -d "$dir/data" ] || die "stop: '$dir' is not a harness cluster"
    stop_server "$dir"
    rm -rf "$dir"
    ;;
freeze|thaw)
    # Only this cluster's processes: the pid in its postmaster.pid and that pid's children.
    # The postmaster is stopped first so it forks no child we would miss.
    dir=${1:-}
    [ -f "$dir/data/postmaster.pid" ] || die "$cmd: no running server in '$dir'"
    pm=$(sed -n 1p "$dir/data/postmaster.pid")
    case "$pm" in ''|*[!0-9]*) die "$cmd: bad postmaster.pid" ;; esac
    if [ "$cmd" = freeze ]; then
        kill -STOP "$pm" || die "freeze: kill -STOP $pm"
        for c in $(ps -o pid= --ppid "$pm"); do kill -STOP "$c" 2>/dev/null || true; done
    else
        thaw "$dir"
    fi
    ;;
psql)
    dir=${1:-}
    [ -f "$dir/port" ] || die "psql: no cluster in '$dir'"
    shift
    exec "$BIN/psql" -X -q -v ON_ERROR_STOP=1 "$(conninfo_of "$dir")" "$@"
    ;;
*)
    echo "usage: pg-harness.sh start [--owner PID] [--fsync on|off] [--max-conns N] [--wal-init-zero on|off] [DIR] | conninfo DIR |" \
         "url DIR | stop-server DIR | start-server DIR | stop DIR | freeze DIR | thaw DIR |" \
         "psql DIR [ARGS...]" >&2
    exit 2
    ;;
esac
