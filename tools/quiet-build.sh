#!/bin/sh
# quiet-build.sh BUILD JOBS: `cmake --build` for `make run` (issue 27 item 2): nothing when
# nothing needs building, the compiler's lines ("[ 42%] Building C object ...", "Linking
# ...") and any warning or error when something does; make's directory echo, the
# per-target "Built target" lines and CMake's "-- " status lines of a re-configure are
# dropped. The exit status is cmake's.
set -u
build=$1 jobs=$2
rc_file=$(mktemp) || exit 1
trap 'rm -f "$rc_file"' EXIT
{
    MAKEFLAGS="${MAKEFLAGS:-} --no-print-directory" cmake --build "$build" -j "$jobs" 2>&1
    echo $? >"$rc_file"
} | grep -v -e '^\[ *[0-9]*%\] Built target ' -e '^Consolidate compiler generated' \
        -e '^g\{0,1\}make\(\[[0-9]*\]\)\{0,1\}: \(Entering\|Leaving\) directory' \
        -e '^Scanning dependencies of target ' -e '^-- ' -e '^g\{0,1\}make\(\[[0-9]*\]\)\{0,1\}: Nothing to be done'
rc=$(cat "$rc_file")
exit "${rc:-1}"
