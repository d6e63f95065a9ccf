# The audit library's C tests (tests/audit/test-audit-*.c), run as built and (with
# RA_SANITIZE_TESTS) against the ASan+UBSan build, like tests/CMakeLists.txt does for the core.
function(rau_c_test tname src lib)
  add_executable(${tname} tests/audit/${src})
  target_link_libraries(${tname} PRIVATE ${lib})
  target_include_directories(${tname} PRIVATE ${CMAKE_SOURCE_DIR}/audit ${CMAKE_SOURCE_DIR}/tests
                                               ${CMAKE_SOURCE_DIR}/tests/audit)
  target_compile_definitions(${tname} PRIVATE _GNU_SOURCE RA_B3SUM="${RA_B3SUM}"
                                              RA_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
  target_compile_options(${tname} PRIVATE ${RA_WARN} ${ARGN})
  add_test(NAME ${tname} COMMAND ${tname})
  set_tests_properties(${tname} PROPERTIES TIMEOUT 300 LABELS "c;audit"
    ENVIRONMENT "RA_TEST_TMP=${CMAKE_BINARY_DIR}/tmp;ASAN_OPTIONS=detect_leaks=1:abort_on_error=1;UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1")
endfunction()

file(GLOB _rau_tests RELATIVE ${CMAKE_SOURCE_DIR}/tests/audit
     ${CMAKE_SOURCE_DIR}/tests/audit/test-audit-*.c)
foreach(src ${_rau_tests})
  get_filename_component(name ${src} NAME_WE)
  rau_c_test(${name} ${src} ronaudit_test)
  if(RA_SANITIZE_TESTS)
    rau_c_test(${name}-asan ${src} ronaudit_san ${RA_SAN_FLAGS})
  endif()
endforeach()
