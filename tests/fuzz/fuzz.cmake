# libFuzzer harnesses (clang, ASan + UBSan) for every decoder. The core is compiled again
# with clang here because the main build may use gcc. `make test` runs each harness
# briefly over its seed corpus (a copy, so the repository is never written to);
# `make fuzz` runs them long (RA_FUZZ_SECONDS).
#
#   slice-decode   ra_slice_decode
#   wal-frame      ra__wal_frame_parse against an independent reading of FORMAT.md §4
#   wal-recovery   ra__wal_open over an in-memory directory built from the input:
#                  read-only, repairing, append, reopen
#   audit-record   rau_record_decode and rau_record_encode (audit/, RA_BUILD_AUDIT): typed
#                  errors or canonical bytes that encode back to the input
#   ingest-dto     ra_ingest_decode (host/lua/ingest_dto.c, the POST /v1/records DTO): typed
#                  errors inside the input, bounds, round trip through canonical JSON
#
# A crashing input is written next to the work directory: <build>/fuzz-work/<name>-crash-*.
# Inputs that once found a bug stay in the seed corpus (regress-*), so every run replays them.
#
# gen-wal-seeds (built with the main compiler, no clang needed) writes the WAL seed corpora
# from the core's own writer and a real meter, and prints FORMAT.md §4's golden example;
# the test wal-golden-format checks that the golden segment and heads file in
# docs/FORMAT.md are byte for byte what the writer produces. To refresh the corpora:
#   <build>/gen-wal-seeds corpus tests/fuzz/corpus
add_executable(gen-wal-seeds ${CMAKE_CURRENT_LIST_DIR}/gen-wal-seeds.c)
target_link_libraries(gen-wal-seeds PRIVATE ronacct_test)
target_include_directories(gen-wal-seeds PRIVATE ${CMAKE_SOURCE_DIR}/core)
target_compile_definitions(gen-wal-seeds PRIVATE _GNU_SOURCE RA_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
target_compile_options(gen-wal-seeds PRIVATE ${RA_WARN} ${RA_ARCH_FLAGS})
set_target_properties(gen-wal-seeds PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
add_test(NAME wal-golden-format COMMAND gen-wal-seeds check)
set_tests_properties(wal-golden-format PROPERTIES LABELS c TIMEOUT 60
  ENVIRONMENT "TMPDIR=${CMAKE_BINARY_DIR}")

find_program(RA_CLANG NAMES clang clang-14)
set(RA_FUZZ_SECONDS 600 CACHE STRING "Duration of each harness in `make fuzz`")
# `make test` fuzzes for RA_FUZZ_SMOKE_BUDGET seconds in all, shared by the harnesses.
set(RA_FUZZ_SMOKE_BUDGET 45 CACHE STRING "Total seconds of fuzzing in `make test`, shared by the harnesses")
if(NOT RA_CLANG)
  message(WARNING "clang not found: fuzz harnesses are not built (tools/deps.sh installs it)")
  return()
endif()

set(_fuzz_core "")
foreach(src ${RA_CORE_SRC})
  list(APPEND _fuzz_core ${CMAKE_SOURCE_DIR}/${src})
endforeach()
set(_fuzz_defs "")
foreach(d ${_b3_defs})
  list(APPEND _fuzz_defs -D${d})
endforeach()
set(_fuzz_flags -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
    -fno-omit-frame-pointer -D_GNU_SOURCE ${RA_ARCH_FLAGS} ${_fuzz_defs}
    -I${CMAKE_SOURCE_DIR}/include -I${CMAKE_SOURCE_DIR}/core -I${CMAKE_SOURCE_DIR}/host -I${RA_BLAKE3_DIR})

set(RA_FUZZERS slice-decode wal-frame wal-recovery ingest-dto wallet-dto http-head)
# Sources a harness needs beyond the core (_fuzz_extra_<name>), and libraries (_fuzz_libs_).
set(_fuzz_dto_common ${CMAKE_SOURCE_DIR}/host/lua/json_scan.c ${CMAKE_SOURCE_DIR}/host/lua/dto.c)
set(_fuzz_deps_ingest-dto ${CMAKE_CURRENT_LIST_DIR}/fuzz-dto.h) # (headers only: not compiled)
set(_fuzz_deps_wallet-dto ${CMAKE_CURRENT_LIST_DIR}/fuzz-dto.h)
set(_fuzz_extra_ingest-dto ${CMAKE_SOURCE_DIR}/host/lua/ingest_dto.c ${_fuzz_dto_common})
set(_fuzz_extra_wallet-dto ${CMAKE_SOURCE_DIR}/host/lua/wallet_dto.c ${_fuzz_dto_common})
set(_fuzz_extra_http-head ${CMAKE_SOURCE_DIR}/host/lua/http_head.c)
if(RA_BUILD_AUDIT)
  list(APPEND RA_FUZZERS audit-record)
  foreach(src ${RAU_SRC})
    if(NOT src IN_LIST RA_CORE_SRC) # core/io.c, the shared I/O seam: compiled once
      list(APPEND _fuzz_extra_audit-record ${CMAKE_SOURCE_DIR}/${src})
    endif()
  endforeach()
  set(_fuzz_cflags_audit-record -I${CMAKE_SOURCE_DIR}/audit)
  set(_fuzz_libs_audit-record ${RAU_DEPS_LDFLAGS} -lcrypto)
endif()
list(LENGTH RA_FUZZERS _n_fuzzers)
math(EXPR _fuzz_smoke_s "${RA_FUZZ_SMOKE_BUDGET} / ${_n_fuzzers}")
set(_fuzz_bins "")
foreach(f ${RA_FUZZERS})
  set(bin ${CMAKE_BINARY_DIR}/fuzz-${f})
  add_custom_command(OUTPUT ${bin}
    COMMAND ${RA_CLANG} ${_fuzz_flags} ${_fuzz_cflags_${f}} ${CMAKE_CURRENT_LIST_DIR}/fuzz-${f}.c ${_fuzz_core}
            ${_fuzz_extra_${f}} ${_b3_src} -o ${bin} -lpthread ${_fuzz_libs_${f}}
    DEPENDS ${CMAKE_CURRENT_LIST_DIR}/fuzz-${f}.c ${_fuzz_core} ${_fuzz_extra_${f}} ${_b3_src}
            ${_fuzz_deps_${f}} ${CMAKE_CURRENT_LIST_DIR}/fuzz-check.h
            ${CMAKE_SOURCE_DIR}/include/ron/accounting.h ${CMAKE_SOURCE_DIR}/core/internal.h
            ${CMAKE_SOURCE_DIR}/core/wal.h ${CMAKE_SOURCE_DIR}/core/io.h
    COMMENT "Building libFuzzer harness fuzz-${f} with clang" VERBATIM)
  list(APPEND _fuzz_bins ${bin})
  set(corpus ${CMAKE_CURRENT_LIST_DIR}/corpus/${f})
  set(work ${CMAKE_BINARY_DIR}/fuzz-work/${f})
  add_test(NAME fuzz-${f}-smoke
    COMMAND sh -c "rm -rf '${work}' && mkdir -p '${work}' && cp '${corpus}'/* '${work}'/ && exec '${bin}' -seed=1 -max_total_time=${_fuzz_smoke_s} -print_final_stats=1 -artifact_prefix='${work}-' '${work}'")
  set_tests_properties(fuzz-${f}-smoke PROPERTIES LABELS fuzz TIMEOUT 300)
  list(APPEND _fuzz_long COMMAND sh -c "mkdir -p '${work}' && cp -n '${corpus}'/* '${work}'/ ; exec '${bin}' -max_total_time=${RA_FUZZ_SECONDS} -print_final_stats=1 -artifact_prefix='${work}-' '${work}'")
endforeach()
add_custom_target(fuzzers ALL DEPENDS ${_fuzz_bins})
add_custom_target(fuzz-long ${_fuzz_long} DEPENDS fuzzers USES_TERMINAL)
