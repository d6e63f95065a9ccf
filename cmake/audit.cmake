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

# ronaudit_test: internals visible, for tests/audit/ (cmake/library.cmake).
ra_library_set(ronaudit VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}
  HEADER include/ron/audit.h TEST_BUILD
  SOURCES ${RAU_SRC} $<TARGET_OBJECTS:ra_blake3>
  INCLUDE ${CMAKE_SOURCE_DIR}/audit ${RA_BLAKE3_DIR}
  LINK PkgConfig::RAU_DEPS OpenSSL::Crypto Threads::Threads)
