# The one shape of the C libraries (libronacct, libronaudit, libronledger): each is built
# the same way from its own sources, private include folder, definitions and links.
#
#   ra_library_set(BASE VERSION v SOVERSION s HEADER include/ron/x.h
#                  SOURCES ... [INCLUDE dirs] [DEFINE defs] [OPTIONS flags] [LINK libs]
#                  [TEST_BUILD] [TSAN_BUILD])
#     BASE (shared, versioned) and BASE_static (OUTPUT_NAME BASE), both installed with
#     HEADER; BASE_test (TEST_BUILD: internals visible, for tests/), BASE_san (with
#     RA_SANITIZE_TESTS: ASan+UBSan, internals visible) and BASE_tsan (TSAN_BUILD with
#     RA_TSAN_TESTS). Public include folder include/, the house warnings (RA_WARN), symbols
#     hidden unless the build is one for tests.
function(ra_c_library name kind)
  cmake_parse_arguments(A "" "" "SOURCES;INCLUDE;DEFINE;OPTIONS;LINK" ${ARGN})
  add_library(${name} ${kind} ${A_SOURCES})
  target_include_directories(${name} PUBLIC ${CMAKE_SOURCE_DIR}/include PRIVATE ${A_INCLUDE})
  target_compile_definitions(${name} PRIVATE _GNU_SOURCE ${A_DEFINE})
  target_compile_options(${name} PRIVATE ${RA_WARN} ${A_OPTIONS} -fvisibility=hidden)
  target_link_libraries(${name} PUBLIC ${A_LINK})
endfunction()

# A build for tests: internals visible, under the sanitizer flags given (if any).
function(ra_c_library_for_tests name flags)
  ra_c_library(${name} STATIC ${ARGN})
  target_compile_options(${name} PRIVATE ${flags} -fvisibility=default)
  if(flags)
    target_link_options(${name} PUBLIC ${flags})
  endif()
endfunction()

function(ra_library_set base)
  cmake_parse_arguments(A "TEST_BUILD;TSAN_BUILD" "VERSION;SOVERSION;HEADER"
                        "SOURCES;INCLUDE;DEFINE;OPTIONS;LINK" ${ARGN})
  set(lib SOURCES ${A_SOURCES} INCLUDE ${A_INCLUDE} DEFINE ${A_DEFINE} OPTIONS ${A_OPTIONS}
          LINK ${A_LINK})
  ra_c_library(${base} SHARED ${lib})
  set_target_properties(${base} PROPERTIES VERSION ${A_VERSION} SOVERSION ${A_SOVERSION})
  ra_c_library(${base}_static STATIC ${lib})
  set_target_properties(${base}_static PROPERTIES OUTPUT_NAME ${base})
  if(A_TEST_BUILD)
    ra_c_library_for_tests(${base}_test "" ${lib})
  endif()
  if(RA_SANITIZE_TESTS)
    ra_c_library_for_tests(${base}_san "${RA_SAN_FLAGS}" ${lib})
  endif()
  if(A_TSAN_BUILD AND RA_TSAN_TESTS)
    ra_c_library_for_tests(${base}_tsan "${RA_TSAN_FLAGS}" ${lib})
  endif()
  install(TARGETS ${base} ${base}_static
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(FILES ${A_HEADER} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ron)
endfunction()
