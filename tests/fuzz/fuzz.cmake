# libFuzzer harnesses (clang, ASan + UBSan) for every decoder. The core is compiled again
# with clang here because the main build may use gcc. `make test` runs each harness
# briefly over its seed corpus (a copy, so the repository is never written to);
# `make fuzz` runs them long (RA_FUZZ_SECONDS).
find_program(RA_CLANG NAMES clang clang-14)
set(RA_FUZZ_SECONDS 600 CACHE STRING "Duration of each harness in `make fuzz`")
set(RA_FUZZ_SMOKE_SECONDS 20 CACHE STRING "Duration of each harness in `make test`")
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
    -I${CMAKE_SOURCE_DIR}/include -I${CMAKE_SOURCE_DIR}/core -I${RA_BLAKE3_DIR})

set(RA_FUZZERS slice-decode)
set(_fuzz_bins "")
foreach(f ${RA_FUZZERS})
  set(bin ${CMAKE_BINARY_DIR}/fuzz-${f})
  add_custom_command(OUTPUT ${bin}
    COMMAND ${RA_CLANG} ${_fuzz_flags} ${CMAKE_CURRENT_LIST_DIR}/fuzz-${f}.c ${_fuzz_core}
            ${_b3_src} -o ${bin} -lpthread
    DEPENDS ${CMAKE_CURRENT_LIST_DIR}/fuzz-${f}.c ${_fuzz_core} ${_b3_src}
            ${CMAKE_SOURCE_DIR}/include/ron/accounting.h ${CMAKE_SOURCE_DIR}/core/internal.h
    COMMENT "Building libFuzzer harness fuzz-${f} with clang" VERBATIM)
  list(APPEND _fuzz_bins ${bin})
  set(corpus ${CMAKE_CURRENT_LIST_DIR}/corpus/${f})
  set(work ${CMAKE_BINARY_DIR}/fuzz-work/${f})
  add_test(NAME fuzz-${f}-smoke
    COMMAND sh -c "rm -rf '${work}' && mkdir -p '${work}' && cp '${corpus}'/* '${work}'/ && exec '${bin}' -seed=1 -max_total_time=${RA_FUZZ_SMOKE_SECONDS} -print_final_stats=1 '${work}'")
  set_tests_properties(fuzz-${f}-smoke PROPERTIES LABELS fuzz TIMEOUT 300)
  list(APPEND _fuzz_long COMMAND sh -c "mkdir -p '${work}' && cp -n '${corpus}'/* '${work}'/ ; exec '${bin}' -max_total_time=${RA_FUZZ_SECONDS} -print_final_stats=1 '${work}'")
endforeach()
add_custom_target(fuzzers ALL DEPENDS ${_fuzz_bins})
add_custom_target(fuzz-long ${_fuzz_long} DEPENDS fuzzers USES_TERMINAL)
