# Benchmarks (PRODUCT.md §7): tests/bench/bench-*.c against the public API of the static
# core, built like the library (-O2 -g under the default RelWithDebInfo).
#
#   cmake --build <build> --target bench      builds and runs every benchmark in sequence
#                                             (`make bench` does that on ./build)
#
# They are not part of ctest's default run as benchmarks: the only ctest entry is
# `G-11 performance smoke` (label bench-smoke; gate G-11: the benchmarks run and print their
# figures with a same-run baseline), which runs each one with --quick (a tiny workload, a
# few seconds in all) and checks that it exits 0 and prints its BENCH lines. It asserts
# nothing about time. Exclude it with `ctest -LE bench-smoke`.
#
# Every benchmark prints human-readable lines and one `BENCH {json}` line per result; the
# bench target also collects the BENCH lines in <build>/bench/results.jsonl.

set(RA_BENCH_DIR ${CMAKE_SOURCE_DIR}/tests/bench)
set(RA_BENCH_OUT ${CMAKE_BINARY_DIR}/bench)

foreach(name bench-record bench-seal bench-wal)
  add_executable(${name} ${RA_BENCH_DIR}/${name}.c)
  target_link_libraries(${name} PRIVATE ronacct_static Threads::Threads)
  target_include_directories(${name} PRIVATE ${RA_BENCH_DIR})
  target_compile_definitions(${name} PRIVATE _GNU_SOURCE)
  target_compile_options(${name} PRIVATE ${RA_WARN})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${RA_BENCH_OUT})
endforeach()
# bench-wal times the WAL's group commit and recovery directly (core/wal.h, internal).
target_include_directories(bench-wal PRIVATE ${CMAKE_SOURCE_DIR}/core)

# bench-audit (tests/bench/bench-audit.c): audit records made durable per second with group
# commit vs one fdatasync per record, same run (libronaudit, RA_BUILD_AUDIT).
if(RA_BUILD_AUDIT)
  add_executable(bench-audit ${RA_BENCH_DIR}/bench-audit.c)
  target_link_libraries(bench-audit PRIVATE ronaudit_static)
  target_compile_definitions(bench-audit PRIVATE _GNU_SOURCE)
  target_compile_options(bench-audit PRIVATE ${RA_WARN})
  set_target_properties(bench-audit PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${RA_BENCH_OUT})
endif()

find_program(RA_LUAJIT luajit)

set(_bench_results ${RA_BENCH_OUT}/results.jsonl)
set(_bench_cmds
  COMMAND ${CMAKE_COMMAND} -E rm -f ${_bench_results}
  COMMAND $<TARGET_FILE:bench-record> --out ${_bench_results}
  COMMAND $<TARGET_FILE:bench-seal> --out ${_bench_results}
  # real files in <build>/bench (the build directory's file system)
  COMMAND $<TARGET_FILE:bench-wal> --dir ${RA_BENCH_OUT} --out ${_bench_results})
if(RA_BUILD_AUDIT)
  list(APPEND _bench_cmds
    COMMAND $<TARGET_FILE:bench-audit> --dir ${RA_BENCH_OUT} --out ${_bench_results})
endif()
if(RA_LUAJIT)
  # LuaJIT through the FFI, compared with the C figures this same run just wrote.
  list(APPEND _bench_cmds
    COMMAND ${CMAKE_COMMAND} -E env
      "LUA_PATH=${CMAKE_SOURCE_DIR}/lua/?.lua\;${CMAKE_SOURCE_DIR}/lua/?/init.lua\;${RA_BENCH_DIR}/?.lua\;\;"
      ${RA_LUAJIT} ${RA_BENCH_DIR}/bench-record.lua
        --lib $<TARGET_FILE:ronacct> --c-results ${_bench_results}
        --c-bench $<TARGET_FILE:bench-record> --out ${_bench_results})
else()
  message(STATUS "luajit not found: the bench target skips bench-record.lua")
endif()

# Everything below up to the bench target runs inside the host (RA_BUILD_HOST).
if(RA_BUILD_HOST)
# PostgreSQL: bench-postgres.lua starts its own server (tests/pg/pg-harness.sh), so it runs
# only where the server binaries are installed (Debian: postgresql, tools/deps.sh).
file(GLOB _ra_pg_bindirs LIST_DIRECTORIES true "/usr/lib/postgresql/*/bin")
find_program(RA_PG_CTL pg_ctl PATHS ${_ra_pg_bindirs} NO_DEFAULT_PATH)
find_program(RA_PG_CTL pg_ctl)
if(RA_PG_CTL)
  list(APPEND _bench_cmds
    COMMAND $<TARGET_FILE:ron-accounting> run ${RA_BENCH_DIR}/bench-postgres.lua
      --out ${_bench_results})
else()
  message(STATUS "PostgreSQL server binaries not found: the bench target skips bench-postgres.lua")
endif()

# The export runtime's benchmarks run inside the host (luv on its loop, the threadpool):
# bench-export.lua (file ledger throughput, RSS) and bench-fairness.lua (G-22 latencies).
list(APPEND _bench_cmds
  COMMAND $<TARGET_FILE:ron-accounting> run ${RA_BENCH_DIR}/bench-export.lua
    --dir ${RA_BENCH_OUT} --bin $<TARGET_FILE:ron-accounting> --out ${_bench_results}
  COMMAND $<TARGET_FILE:ron-accounting> run ${RA_BENCH_DIR}/bench-fairness.lua
    --dir ${RA_BENCH_OUT} --out ${_bench_results})
# Slices/s over HTTP (exporters.http -> a receiver process -> the file ledger, fsync off and
# on), against the file ledger put directly in the same run.
list(APPEND _bench_cmds
  COMMAND $<TARGET_FILE:ron-accounting> run ${RA_BENCH_DIR}/bench-http-export.lua
    --dir ${RA_BENCH_OUT} --bin $<TARGET_FILE:ron-accounting> --out ${_bench_results})

# A day-long ledger outage on a fast clock (tests/host/backlog-day.lua, also a test): RSS at
# the end of the outage against its middle, and the drain rate once the ledger is back.
list(APPEND _bench_cmds
  COMMAND ${CMAKE_COMMAND} -E env RA_BENCH_RESULTS=${_bench_results}
    $<TARGET_FILE:ron-accounting> run ${CMAKE_SOURCE_DIR}/tests/host/backlog-day.lua
    ${RA_BENCH_OUT}/backlog-day 10000 24)

# Rating (docs/LEDGER-RATING.md §9): card:rate, usage.request, ron.ledger.exporter:put into the
# memory store and SQLite (NORMAL, FULL).
if(RA_BUILD_LEDGER)
  list(APPEND _bench_cmds
    COMMAND ${CMAKE_COMMAND} -E env RON_LEDGER_LIB=$<TARGET_FILE:ronledger>
      $<TARGET_FILE:ron-accounting> run ${RA_BENCH_DIR}/bench-rate.lua)
  # The batch path's own CPU per rated slice (docs/LEDGER.md "Where the time goes"):
  # put_many of 256 through commit_many into the memory store, against the rating alone.
  list(APPEND _bench_cmds
    COMMAND ${CMAKE_COMMAND} -E env RON_LEDGER_LIB=$<TARGET_FILE:ronledger>
      $<TARGET_FILE:ron-accounting> run ${RA_BENCH_DIR}/bench-ledger-batch-mem.lua
      --out ${_bench_results})
  # Issue 25's batch path: commit_many of 64 and 256 from 16 payers on offloaded SQLite and
  # PostgreSQL (when installed), CPU per transfer and store calls per batch against B2.
  list(APPEND _bench_cmds
    COMMAND ${CMAKE_COMMAND} -E env RON_LEDGER_LIB=$<TARGET_FILE:ronledger>
      $<TARGET_FILE:ron-accounting> run ${RA_BENCH_DIR}/bench-ledger-batch.lua
      --dir ${RA_BENCH_OUT} --out ${_bench_results})
  # Issue 25's rating target: 1024 streams rated into SQLite and PostgreSQL (when installed)
  # against the same rows INSERTed plainly, with this process's CPU per rated slice.
  list(APPEND _bench_cmds
    COMMAND ${CMAKE_COMMAND} -E env RON_LEDGER_LIB=$<TARGET_FILE:ronledger>
      $<TARGET_FILE:ron-accounting> run ${RA_BENCH_DIR}/bench-ledger-rating-pg.lua
      --no-single --batches 1024 --daemon 1024 --dir ${RA_BENCH_OUT} --out ${_bench_results})
  # SQLite's list statements under lengths that vary (I-7, docs/LEDGER.md "Prepared
  # statements, bounded"): rows/s and RSS, against one length throughout.
  list(APPEND _bench_cmds
    COMMAND ${CMAKE_COMMAND} -E env RON_LEDGER_LIB=$<TARGET_FILE:ronledger>
      $<TARGET_FILE:ron-accounting> run ${RA_BENCH_DIR}/bench-ledger-sqlite-lengths.lua
      --dir ${RA_BENCH_OUT} --out ${_bench_results})
  # What SQLite's commit pays for rows keyed by content ids (issue 25, docs/WALLET.md "Rows
  # keyed by content"): a wallet group's rows on the store's schema against postings and
  # events keyed by the transfer's number, and without the claim row.
  list(APPEND _bench_cmds
    COMMAND ${CMAKE_COMMAND} -E env RON_LEDGER_LIB=$<TARGET_FILE:ronledger>
      $<TARGET_FILE:ron-accounting> run ${RA_BENCH_DIR}/bench-sqlite-keys.lua
      --dir ${RA_BENCH_OUT} --out ${_bench_results})
  # `ledger verify` over a book of 100,000 transfers (I-7, docs/LEDGER.md "Verify's memory"):
  # seconds, peak RSS and the Lua heap per transfer, against reading every table whole.
  list(APPEND _bench_cmds
    COMMAND ${CMAKE_COMMAND} -E env RON_LEDGER_LIB=$<TARGET_FILE:ronledger>
      $<TARGET_FILE:ron-accounting> run ${RA_BENCH_DIR}/bench-ledger-verify.lua
      --out ${_bench_results})
endif()

# POST /v1/records under wrk (tests/bench/bench-ingest.sh): records/s and p99 through the
# daemon, baselines GET /healthz and the handler in-process; a tiny plane answering 429
# with flat memory. Daemon state under <build>/bench/ingest.
find_program(RA_WRK wrk)
if(RA_WRK)
  list(APPEND _bench_cmds
    COMMAND sh ${RA_BENCH_DIR}/bench-ingest.sh $<TARGET_FILE:ron-accounting> ${CMAKE_SOURCE_DIR}
      ${RA_BENCH_OUT}/ingest --out ${_bench_results})
  # Issue 16's target end to end: refusals/s at POST /v1/records with the audit trail off,
  # one chain, two chains (same run), p99, and the trail's count == the refusals counted.
  if(RA_BUILD_AUDIT)
    list(APPEND _bench_cmds
      COMMAND sh ${RA_BENCH_DIR}/bench-ingest-audit.sh $<TARGET_FILE:ron-accounting>
        ${CMAKE_SOURCE_DIR} ${RA_BENCH_OUT}/ingest-audit --out ${_bench_results})
  endif()
else()
  message(STATUS "wrk not found: the bench target skips bench-ingest.sh (Debian: wrk)")
endif()

# ron-wallet (tests/bench/bench-wallet.lua, docs/WALLET.md §8): transfers/s and p50/p99
# through HTTP under wrk on SQLite and PostgreSQL (when installed), against Ledger:commit
# on the same store in the same run; balance reads/s from the cache against GET /healthz.
if(RA_WRK AND RA_BUILD_LEDGER)
  list(APPEND _bench_cmds
    COMMAND ${CMAKE_COMMAND} -E env RON_LEDGER_LIB=$<TARGET_FILE:ronledger>
      $<TARGET_FILE:ron-accounting> run ${RA_BENCH_DIR}/bench-wallet.lua
      --dir ${RA_BENCH_OUT} --out ${_bench_results})
endif()
# The wallet's own loop work per transfer (issue 25): its service over a stub ledger, no
# HTTP, store or engine: CPU per request (handler, committer), garbage, trace aborts.
if(RA_BUILD_LEDGER)
  list(APPEND _bench_cmds
    COMMAND ${CMAKE_COMMAND} -E env RON_LEDGER_LIB=$<TARGET_FILE:ronledger>
      $<TARGET_FILE:ron-accounting> run ${RA_BENCH_DIR}/bench-wallet-loop.lua
      --out ${_bench_results})
endif()
endif()

add_custom_target(bench
  ${_bench_cmds}
  COMMAND ${CMAKE_COMMAND} -E echo "bench: BENCH lines collected in ${_bench_results}"
  WORKING_DIRECTORY ${RA_BENCH_OUT}
  USES_TERMINAL
  VERBATIM)
add_dependencies(bench bench-record bench-seal bench-wal ronacct)
if(RA_BUILD_AUDIT)
  add_dependencies(bench bench-audit)
endif()
if(RA_BUILD_HOST)
  add_dependencies(bench ron-accounting)
endif()

# Smoke run: every benchmark with --quick must work (exit 0 and print BENCH lines).
set(_smoke_args
  -DRECORD=$<TARGET_FILE:bench-record> -DSEAL=$<TARGET_FILE:bench-seal>
  -DWAL=$<TARGET_FILE:bench-wal>
  -DLIB=$<TARGET_FILE:ronacct> -DLUA_SCRIPT=${RA_BENCH_DIR}/bench-record.lua
  -DLUA_DIR=${CMAKE_SOURCE_DIR}/lua -DBENCH_DIR=${RA_BENCH_DIR} -DOUT=${RA_BENCH_OUT}/smoke)
if(RA_BUILD_AUDIT)
  list(APPEND _smoke_args -DAUDIT=$<TARGET_FILE:bench-audit>)
endif()
if(RA_LUAJIT)
  list(APPEND _smoke_args -DLUAJIT=${RA_LUAJIT})
endif()
if(RA_BUILD_HOST)
  list(APPEND _smoke_args -DHOST=$<TARGET_FILE:ron-accounting>)
  if(RA_BUILD_LEDGER)
    list(APPEND _smoke_args -DLEDGER=ON)
  endif()
endif()
add_test(NAME "G-11 performance smoke"
  COMMAND ${CMAKE_COMMAND} ${_smoke_args} -P ${RA_BENCH_DIR}/smoke.cmake)
set_tests_properties("G-11 performance smoke" PROPERTIES LABELS bench-smoke TIMEOUT 120)

if(RA_BUILD_HOST)
# bench-postgres.lua --quick against a server it starts: exit 0 and BENCH lines (no timing).
if(RA_PG_CTL)
  add_test(NAME bench-postgres-smoke
    COMMAND sh -c "out=$(\"$1\" run \"$2\" --quick) || { echo \"$out\"; exit 1; }; echo \"$out\"; echo \"$out\" | grep -q '^BENCH {\"bench\":\"postgres\"'"
            sh $<TARGET_FILE:ron-accounting> ${RA_BENCH_DIR}/bench-postgres.lua)
  set_tests_properties(bench-postgres-smoke PROPERTIES LABELS "bench-smoke;postgres" TIMEOUT 120
    ENVIRONMENT "RA_BIN=$<TARGET_FILE:ron-accounting>")
endif()

# bench-http-export.lua --quick: two processes over loopback HTTP; exit 0 and BENCH lines.
add_test(NAME bench-http-export-smoke
  COMMAND sh -c "out=$(\"$1\" run \"$2\" --quick --bin \"$1\") || { echo \"$out\"; exit 1; }; echo \"$out\"; echo \"$out\" | grep -q '^BENCH {\"bench\":\"http_export\"'"
          sh $<TARGET_FILE:ron-accounting> ${RA_BENCH_DIR}/bench-http-export.lua)
set_tests_properties(bench-http-export-smoke PROPERTIES LABELS bench-smoke TIMEOUT 120)
endif()
