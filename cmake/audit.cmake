# libronaudit (seed 002, issue 16): the audit trail's C core (audit/, include/ron/audit.h).
# Included from CMakeLists.txt when RA_BUILD_AUDIT is ON (the default). Needs, beyond the
# BLAKE3 sources the core uses (the same ra_blake3 objects): libutf8proc (NFC) and
# libsodium (Ed25519); tools/deps.sh installs them.
pkg_check_modules(RAU_DEPS IMPORTED_TARGET libutf8proc libsodium)
if(NOT RAU_DEPS_FOUND)
  message(FATAL_ERROR "libutf8proc or libsodium not found (pkg-config): install the Debian "
                      "packages libutf8proc-dev libsodium-dev (tools/deps.sh)")
endif()
# OpenSSL's libcrypto: SHA-256 with its SHA-NI / AVX2 kernels for the Merkle tree (audit/hash.c;
# the ledger links it too). Threads: the log's published stats (audit/log.c).
find_package(OpenSSL REQUIRED COMPONENTS Crypto)

# core/io.c: the one I/O seam (core/io.h), shared with the core; audit/io.h is the only
# header of the core audit/ includes (tools/check-layers.lua).
set(RAU_SRC audit/error.c audit/hash.c audit/record.c audit/merkle.c audit/note.c
            audit/dedupe.c audit/sink.c audit/io.c audit/iotrack.c audit/head.c audit/log.c
            audit/verify.c audit/proof.c core/io.c)

function(rau_library name kind)
  add_library(${name} ${kind} ${RAU_SRC} $<TARGET_OBJECTS:ra_blake3>)
  target_include_directories(${name} PUBLIC ${CMAKE_SOURCE_DIR}/include
                                      PRIVATE ${CMAKE_SOURCE_DIR}/audit ${RA_BLAKE3_DIR})
  target_compile_definitions(${name} PRIVATE _GNU_SOURCE)
  target_compile_options(${name} PRIVATE ${RA_WARN} -fvisibility=hidden)
  target_link_libraries(${name} PUBLIC PkgConfig::RAU_DEPS OpenSSL::Crypto Threads::Threads)
endfunction()

rau_library(ronaudit SHARED)
set_target_properties(ronaudit PROPERTIES VERSION ${PROJECT_VERSION}
                                          SOVERSION ${PROJECT_VERSION_MAJOR})
rau_library(ronaudit_static STATIC)
set_target_properties(ronaudit_static PROPERTIES OUTPUT_NAME ronaudit)
# Internals visible, for tests/audit/.
rau_library(ronaudit_test STATIC)
target_compile_options(ronaudit_test PRIVATE -fvisibility=default)
if(RA_SANITIZE_TESTS)
  rau_library(ronaudit_san STATIC)
  target_compile_options(ronaudit_san PRIVATE ${RA_SAN_FLAGS} -fvisibility=default)
  target_link_options(ronaudit_san PUBLIC ${RA_SAN_FLAGS})
endif()

install(TARGETS ronaudit ronaudit_static
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES include/ron/audit.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ron)
