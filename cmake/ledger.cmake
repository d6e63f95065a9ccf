# ron-ledger's pure core (docs/LEDGER.md): libronledger, its C tests, its fuzz harness and
# its lint. Included from the top-level CMakeLists.txt when RA_BUILD_LEDGER is ON. The core
# needs libc and OpenSSL's libcrypto (SHA-256) and nothing of the metering core.
#
#   libronledger (shared + static)   ledger/*.c, include/ron/ledger.h
#   tests/ledger/test-*.c            one executable each, run as built and under ASan+UBSan
#                                    (label c; ledger)
#   fuzz-ledger-decode-smoke         tests/fuzz/fuzz-ledger-decode.c, briefly (label fuzz)
#   lua-ledger-cdef-current          lua/ron/ledger/cdef.lua is what tools/gen-cdef.sh ledger
#                                    prints from include/ron/ledger.h (`make cdef-ledger`)
#   lua-ledger-store-host            the Store's conformance suite on PostgreSQL and on
#                                    offloaded SQLite, inside the host (labels lua, postgres)
#   bench-ledger-store               (`make bench`) tests/bench/bench-ledger-store.lua
find_package(OpenSSL REQUIRED COMPONENTS Crypto)

set(RL_CORE_SRC ledger/error.c ledger/amount.c ledger/codec.c ledger/select.c ledger/validate.c
  ledger/resolve.c ledger/batch.c)

# (cmake/library.cmake)
ra_library_set(ronledger VERSION 0.1.0 SOVERSION 0 HEADER include/ron/ledger.h
  SOURCES ${RL_CORE_SRC} INCLUDE ${CMAKE_SOURCE_DIR}/ledger LINK OpenSSL::Crypto)

# ---- C tests ----
find_program(RL_OPENSSL openssl)
if(NOT RL_OPENSSL)
  message(FATAL_ERROR "openssl not found: install the Debian package openssl (tools/deps.sh)")
endif()
file(GLOB _rl_tests RELATIVE ${CMAKE_SOURCE_DIR}/tests/ledger ${CMAKE_SOURCE_DIR}/tests/ledger/test-*.c)
foreach(src ${_rl_tests})
  get_filename_component(name ${src} NAME_WE)
  set(_variants ${name})
  if(RA_SANITIZE_TESTS)
    list(APPEND _variants ${name}-asan)
  endif()
  foreach(v ${_variants})
    add_executable(${v} ${CMAKE_SOURCE_DIR}/tests/ledger/${src})
    target_include_directories(${v} PRIVATE ${CMAKE_SOURCE_DIR}/tests/ledger)
    target_compile_definitions(${v} PRIVATE _GNU_SOURCE RL_OPENSSL="${RL_OPENSSL}"
                                            RA_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
    if(v MATCHES "-asan$")
      target_link_libraries(${v} PRIVATE ronledger_san)
      target_compile_options(${v} PRIVATE ${RA_WARN} ${RA_SAN_FLAGS})
      add_test(NAME ${v} COMMAND ${v})
      set_tests_properties(${v} PROPERTIES LABELS "c;asan;ledger" TIMEOUT 300
        ENVIRONMENT "RA_TEST_TMP=${CMAKE_BINARY_DIR}/tmp;ASAN_OPTIONS=detect_leaks=1:abort_on_error=1;UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1")
    else()
      target_link_libraries(${v} PRIVATE ronledger_static)
      target_compile_options(${v} PRIVATE ${RA_WARN})
      add_test(NAME ${v} COMMAND ${v})
      set_tests_properties(${v} PROPERTIES LABELS "c;ledger" TIMEOUT 300
        ENVIRONMENT "RA_TEST_TMP=${CMAKE_BINARY_DIR}/tmp")
    endif()
  endforeach()
endforeach()

# LED-11: the core allocates nothing and does no I/O. The static library's undefined
# symbols must not name an allocator or a file/socket call.
add_test(NAME ledger-pure-symbols
  COMMAND sh -c "nm -u \"$1\" | awk '{print $NF}' | grep -E '^(malloc|calloc|realloc|free|strdup|open|openat|fopen|read|write|pread|pwrite|socket|mmap|EVP_MD_CTX_new|OPENSSL_malloc|CRYPTO_malloc)(@.*)?$' && { echo 'libronledger calls the above (LED-11)'; exit 1; } || exit 0"
          sh $<TARGET_FILE:ronledger_static>)
set_tests_properties(ledger-pure-symbols PROPERTIES LABELS "c;ledger" TIMEOUT 60)

# ---- libFuzzer harness (clang, ASan + UBSan), in the style of tests/fuzz/fuzz.cmake ----
#   ledger-decode   rl_{asset,account,posting,transfer}_decode: typed errors or exact
#                   re-encoding; decoded transfers through rl_validate_and_plan
# `make test` runs it for RL_FUZZ_SMOKE_SECONDS over a copy of its seed corpus (the golden
# and negative vectors of docs/LEDGER-FORMAT.md); `make fuzz` (fuzz-long) runs it for
# RA_FUZZ_SECONDS. A crashing input lands in <build>/fuzz-work/ledger-decode-crash-*.
set(RL_FUZZ_SMOKE_SECONDS 10 CACHE STRING "Seconds of ledger decoder fuzzing in `make test`")
if(RA_CLANG)
  set(_rl_fuzz_src "")
  foreach(src ${RL_CORE_SRC})
    list(APPEND _rl_fuzz_src ${CMAKE_SOURCE_DIR}/${src})
  endforeach()
  set(_rl_fuzz_bin ${CMAKE_BINARY_DIR}/fuzz-ledger-decode)
  set(_rl_fuzz_c ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz-ledger-decode.c)
  add_custom_command(OUTPUT ${_rl_fuzz_bin}
    COMMAND ${RA_CLANG} -g -O1 -fsanitize=fuzzer,address,undefined
            -fno-sanitize-recover=undefined -fno-omit-frame-pointer
            -I${CMAKE_SOURCE_DIR}/include -I${CMAKE_SOURCE_DIR}/ledger
            ${_rl_fuzz_c} ${_rl_fuzz_src} -o ${_rl_fuzz_bin} -lcrypto
    DEPENDS ${_rl_fuzz_c} ${_rl_fuzz_src} ${CMAKE_SOURCE_DIR}/include/ron/ledger.h
            ${CMAKE_SOURCE_DIR}/ledger/internal.h
    COMMENT "Building libFuzzer harness fuzz-ledger-decode with clang" VERBATIM)
  add_custom_target(fuzzer-ledger ALL DEPENDS ${_rl_fuzz_bin})
  set(_rl_corpus ${CMAKE_SOURCE_DIR}/tests/fuzz/corpus/ledger-decode)
  set(_rl_work ${CMAKE_BINARY_DIR}/fuzz-work/ledger-decode)
  add_test(NAME fuzz-ledger-decode-smoke
    COMMAND sh -c "rm -rf '${_rl_work}' && mkdir -p '${_rl_work}' && cp '${_rl_corpus}'/* '${_rl_work}'/ && exec '${_rl_fuzz_bin}' -seed=1 -max_total_time=${RL_FUZZ_SMOKE_SECONDS} -print_final_stats=1 -artifact_prefix='${_rl_work}-' '${_rl_work}'")
  set_tests_properties(fuzz-ledger-decode-smoke PROPERTIES LABELS fuzz TIMEOUT 300)
  add_custom_target(fuzz-long-ledger
    COMMAND sh -c "mkdir -p '${_rl_work}' && cp -n '${_rl_corpus}'/* '${_rl_work}'/ ; exec '${_rl_fuzz_bin}' -max_total_time=${RA_FUZZ_SECONDS} -print_final_stats=1 -artifact_prefix='${_rl_work}-' '${_rl_work}'"
    DEPENDS fuzzer-ledger USES_TERMINAL)
  if(TARGET fuzz-long)
    add_dependencies(fuzz-long fuzz-long-ledger)
  endif()
endif()

# ---- Lua binding (lua/ron/ledger/, spec/ron/ledger/) ----
# rl_host_spec(NAME SPEC LABELS TIMEOUT [ENV...]): ra_host_spec (cmake/lua.cmake) pointed at
# the libronledger just built (RON_LEDGER_LIB), ENV added to its environment.
# rl_host_test(NAME TIMEOUT COMMAND...): likewise for ra_host_test
# (cmake/host-tests.cmake).
function(rl_host_spec name spec labels timeout)
  if(NOT COMMAND ra_host_spec)
    return()
  endif()
  ra_host_spec(${name} ${spec})
  if(TEST ${name})
    set_tests_properties(${name} PROPERTIES LABELS "${labels}" TIMEOUT ${timeout})
    set_property(TEST ${name} APPEND PROPERTY ENVIRONMENT
      "RON_LEDGER_LIB=$<TARGET_FILE:ronledger>" ${ARGN})
  endif()
endfunction()
function(rl_host_test name timeout)
  if(NOT COMMAND ra_host_test)
    return()
  endif()
  ra_host_test(${name} ${ARGN})
  set_tests_properties(${name} PROPERTIES TIMEOUT ${timeout}
    ENVIRONMENT "RON_LEDGER_LIB=$<TARGET_FILE:ronledger>")
endfunction()
# rl_host_script_pair(NAME SCRIPT TIMEOUT): tests/host/SCRIPT HOST SOURCE_DIR WORK_DIR as
# NAME (SQLite) and as NAME-pg (`postgres`: a real PostgreSQL the script starts).
function(rl_host_script_pair name script timeout)
  set(cmd sh ${CMAKE_SOURCE_DIR}/tests/host/${script} $<TARGET_FILE:ron-accounting>
          ${CMAKE_SOURCE_DIR})
  rl_host_test(${name} ${timeout} ${cmd} ${CMAKE_BINARY_DIR}/${name})
  rl_host_test(${name}-pg ${timeout} ${cmd} ${CMAKE_BINARY_DIR}/${name}-pg postgres)
endfunction()
# The busted run (ctest `lua`, cmake/lua.cmake) also runs spec/ron/ledger/: point it at the
# libronledger just built.
if(TEST lua)
  set_property(TEST lua APPEND PROPERTY ENVIRONMENT "RON_LEDGER_LIB=$<TARGET_FILE:ronledger>")
endif()
if(COMMAND ra_cdef_test) # cmake/lua.cmake
  ra_cdef_test(lua-ledger-cdef-current ledger lua/ron/ledger/cdef.lua "make cdef-ledger")
endif()

# The Store (lua/ron/ledger/store/, docs/LEDGER.md "Store"): the conformance suite
# (spec/ron/ledger/store_conformance.lua) runs under plain busted on SQLite (ctest `lua`,
# spec/ron/ledger/store_spec.lua) and here inside the host, in tasks, on PostgreSQL (a real
# server started by tests/pg/pg-harness.sh) and on SQLite offloaded to the threadpool.
rl_host_spec(lua-ledger-store-host spec/ron/ledger/store_host_spec.lua "lua;postgres" 300)
# The offloaded SQLite store's WAL checkpoints beside its writes (issue 25,
# lua/ron/ledger/store/sqlite_checkpoint.lua).
rl_host_spec(lua-ledger-sqlite-checkpoint-host spec/ron/ledger/sqlite_checkpoint_host_spec.lua lua 120)

# The engine (lua/ron/ledger/ledger.lua, docs/LEDGER.md "The commit path") on a real
# PostgreSQL inside the host: racing commits, a racing capped floor, replays, and a kill -9
# loop of a committing process (RON_LEDGER_KILLS, 20 here) with recover() and the
# simulator's invariants after each kill. `make soak-ledger` runs 500 kills; `make sim-ledger`
# runs the deterministic simulator (spec/ron/ledger/sim_spec.lua) over many more seeds.
rl_host_spec(lua-ledger-engine-pg-host spec/ron/ledger/ledger_pg_host_spec.lua "lua;postgres" 300)
# A hot account (issue 29 items 1 and 2, LED-67): 3000 transfers spending one payer's change
# from 6 committers on 2 nodes while a reader polls its balance (never up) and its spendable
# postings (never before their transfer), then `ledger verify` exact; on SQLite (offloaded)
# and on a real PostgreSQL (spec/ron/ledger/ledger_hot_host_spec.lua, RON_HOT_BACKEND).
rl_host_spec(ledger-hot-account-sqlite spec/ron/ledger/ledger_hot_host_spec.lua lua 900
  RON_HOT_BACKEND=sqlite)
rl_host_spec(ledger-hot-account-pg spec/ron/ledger/ledger_hot_host_spec.lua "lua;postgres" 900
  RON_HOT_BACKEND=postgres)
# `ledger verify` inside the host (docs/LEDGER.md "What verify proves"): 3,000 transfers from
# concurrent committers on one hot payer, on offloaded SQLite and on PostgreSQL, verified
# exact (issue 29 item 2); a sample of the mutation suite on PostgreSQL (issue 24 §2).
rl_host_spec(lua-ledger-verify-host spec/ron/ledger/verify_host_spec.lua "lua;postgres" 600)
# Node leases on a real PostgreSQL (LED-71): a takeover waits for a phase in flight and
# fences the old epoch; fence_node ends one node's statements.
rl_host_spec(lua-ledger-lease-pg-host spec/ron/ledger/lease_host_spec.lua "lua;postgres" 120)
if(TARGET ron-accounting AND RA_BUSTED)
  add_custom_target(soak-ledger
    COMMAND ${CMAKE_COMMAND} -E env RON_LEDGER_KILLS=500 RON_LEDGER_LIB=$<TARGET_FILE:ronledger>
            RA_BIN=$<TARGET_FILE:ron-accounting>
            "LUA_PATH=${CMAKE_SOURCE_DIR}/lua/?.lua\;${CMAKE_SOURCE_DIR}/lua/?/init.lua\;\;"
            $<TARGET_FILE:ron-accounting> run spec/run-busted.lua --output=plainTerminal
            spec/ron/ledger/ledger_pg_host_spec.lua
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR} DEPENDS ron-accounting ronledger USES_TERMINAL)
endif()
if(RA_LUAJIT AND RA_BUSTED)
  add_custom_target(sim-ledger
    COMMAND ${CMAKE_COMMAND} -E env RON_SIM_SEEDS=400 RON_SIM_OPS=300
            RON_LEDGER_LIB=$<TARGET_FILE:ronledger>
            ${_ra_busted_cmd} --output=plainTerminal spec/ron/ledger/sim_spec.lua
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR} DEPENDS ronledger USES_TERMINAL)
endif()

# ---- benchmark (tests/bench/bench-ledger.c): `make bench` runs it first, with the others'
# results file; ctest bench-ledger-smoke runs it with --quick (label bench-smoke). ----
add_executable(bench-ledger ${CMAKE_SOURCE_DIR}/tests/bench/bench-ledger.c)
target_link_libraries(bench-ledger PRIVATE ronledger_static)
target_compile_definitions(bench-ledger PRIVATE _GNU_SOURCE)
target_compile_options(bench-ledger PRIVATE ${RA_WARN})
set_target_properties(bench-ledger PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
add_custom_target(bench-ledger-run
  COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/bench
  COMMAND $<TARGET_FILE:bench-ledger> --out ${CMAKE_BINARY_DIR}/bench/ledger-results.jsonl
  DEPENDS bench-ledger USES_TERMINAL VERBATIM)
if(TARGET bench)
  add_dependencies(bench bench-ledger-run)
endif()
# The Store's benchmark (tests/bench/bench-ledger-store.lua, inside the host: PostgreSQL
# needs its loop): lifecycle rows/s against a plain INSERT loop, balance reads at 1k, 100k
# and 1M postings. Minutes; only in `make bench`.
# rl_bench_lua(NAME SCRIPT): `make bench` runs tests/bench/SCRIPT inside the host as
# NAME-run, its results appended to bench/ledger-results.jsonl.
function(rl_bench_lua name script)
  if(NOT TARGET ron-accounting)
    return()
  endif()
  add_custom_target(${name}-run
    COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/bench
    COMMAND $<TARGET_FILE:ron-accounting> run ${CMAKE_SOURCE_DIR}/tests/bench/${script}
      --dir ${CMAKE_BINARY_DIR}/bench --out ${CMAKE_BINARY_DIR}/bench/ledger-results.jsonl
    DEPENDS ron-accounting ronledger USES_TERMINAL VERBATIM)
  if(TARGET bench)
    add_dependencies(bench ${name}-run)
  endif()
endfunction()
rl_bench_lua(bench-ledger-store bench-ledger-store.lua)
# Rating throughput into the ledger (tests/bench/bench-ledger-rating-pg.lua, wip/perf, LED-50):
# slices/s through ron.ledger.exporter into PostgreSQL (fsync on) and SQLite, durability ack and
# statement, 1 and N streams, against plain INSERT baselines of the same rows in the same
# run. Minutes; only in `make bench`.
rl_bench_lua(bench-ledger-rating bench-ledger-rating-pg.lua)
add_test(NAME bench-ledger-smoke
  COMMAND sh -c "out=$(\"$1\" --quick) || { echo \"$out\"; exit 1; }; echo \"$out\"; echo \"$out\" | grep -q '^BENCH {\"bench\":\"ledger\"'"
          sh $<TARGET_FILE:bench-ledger>)
set_tests_properties(bench-ledger-smoke PROPERTIES LABELS bench-smoke TIMEOUT 120)
