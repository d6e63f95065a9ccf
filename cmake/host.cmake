# The ron-accounting executable (host/cli: the command line, one file per verb) and the Lua
# C modules it preloads for its scripts (host/lua: HTTP server, PostgreSQL, HTTP client).
# Included from CMakeLists.txt when RA_BUILD_HOST is ON (the default); without it only the
# library and its C tests are built, and none of H2O, libpq, libcurl, LuaJIT or libuv is
# needed.
pkg_check_modules(LUAJIT REQUIRED IMPORTED_TARGET luajit)
# One libuv loop, shared by the host and luv (the Lua binding of libuv, bound to that loop
# with luv_set_loop). Only the host links them: libronacct itself never depends on libuv.
pkg_check_modules(LIBUV REQUIRED IMPORTED_TARGET libuv)
# Debian's lua5.1-luv.pc requires a `lua5.1` .pc that LuaJIT does not provide, so luv is
# found by hand: luv.h under <include>/lua5.1/luv/, liblua5.1-luv (ABI of Lua 5.1 = LuaJIT,
# the way Debian's Neovim uses it).
find_path(RA_LUV_INCLUDE_DIR luv/luv.h PATH_SUFFIXES lua5.1)
find_library(RA_LUV_LIBRARY NAMES lua5.1-luv)
if(NOT RA_LUV_INCLUDE_DIR OR NOT RA_LUV_LIBRARY)
  message(FATAL_ERROR "luv not found: install the Debian package lua-luv-dev (tools/deps.sh)")
endif()
# The HTTP surface (host/lua/httpd.c): H2O's library, libuv flavour, on the host's loop.
# Its headers include OpenSSL's (libssl-dev) and must see H2O_USE_LIBUV=1.
pkg_check_modules(LIBH2O IMPORTED_TARGET libh2o)
if(NOT LIBH2O_FOUND)
  message(FATAL_ERROR "libh2o not found (pkg-config libh2o): install the Debian package "
                      "libh2o-dev, and libssl-dev for its headers (tools/deps.sh)")
endif()
# The WAL commands (verify, wal inspect) read a WAL through the core's own recovery scan
# (core/wal.h, internal), so the host also sees core/.
add_executable(ron-accounting host/cli/main.c host/cli/run.c host/cli/walcmd.c
  host/cli/ledgercmd.c host/cli/verdict.c host/cli/chain.c
  host/lua/modules.c host/lua/glue.c host/lua/httpd.c host/lua/http_head.c)
target_include_directories(ron-accounting PRIVATE ${CMAKE_SOURCE_DIR}/core ${CMAKE_SOURCE_DIR}/host)
# SYSTEM: h2o's headers are not -Wextra clean; our code is.
target_include_directories(ron-accounting SYSTEM PRIVATE ${LIBH2O_INCLUDE_DIRS})
set_source_files_properties(host/lua/httpd.c PROPERTIES COMPILE_DEFINITIONS H2O_USE_LIBUV=1)
# The POST /v1/records decoder (host/lua/ingest_dto.h): plain C, no h2o, no Lua; the
# daemon's ron.node.ingest calls it through ffi.C (the host exports its symbols).
target_sources(ron-accounting PRIVATE host/lua/ingest_dto.c host/lua/json_scan.c
                                      host/lua/wallet_dto.c)
# LuaJIT's headers before luv's directory: that is <include>/lua5.1, where Debian's
# liblua5.1-0-dev (pulled in by luarocks) puts Lua 5.1's lua.h and lauxlib.h, which lack
# LuaJIT's luaL_traceback.
target_include_directories(ron-accounting SYSTEM PRIVATE ${LUAJIT_INCLUDE_DIRS}
                                                         ${RA_LUV_INCLUDE_DIR})
target_compile_definitions(ron-accounting PRIVATE _GNU_SOURCE
  RA_SOURCE_LUA_DIR="${CMAKE_SOURCE_DIR}/lua"
  RA_INSTALL_LUA_REL="${CMAKE_INSTALL_DATADIR}/lua/5.1"
  RA_INSTALL_BIN_REL="${CMAKE_INSTALL_BINDIR}"
  RA_HOST_VERSION="${PROJECT_VERSION}"
  RA_BLAKE3_KERNELS="${RA_BLAKE3_KERNELS}")
target_compile_options(ron-accounting PRIVATE ${RA_WARN})
# The host links the core statically and exports its symbols, so the Lua binding finds
# them through ffi.C without searching for a shared library.
target_link_libraries(ron-accounting PRIVATE PkgConfig::LUAJIT ${RA_LUV_LIBRARY} PkgConfig::LIBUV
  PkgConfig::LIBH2O m dl
  -Wl,--whole-archive ronacct_static -Wl,--no-whole-archive)
# PostgreSQL (host/lua/pq.c: libpq's async API on the host's loop; host/cli/pgverify.c:
# `verify postgres://...`). Debian: libpq-dev (tools/deps.sh).
pkg_check_modules(LIBPQ IMPORTED_TARGET libpq)
if(NOT LIBPQ_FOUND)
  message(FATAL_ERROR "libpq not found (pkg-config libpq): install the Debian package "
                      "libpq-dev (tools/deps.sh)")
endif()
target_sources(ron-accounting PRIVATE host/lua/pq.c host/cli/pgverify.c)
target_link_libraries(ron-accounting PRIVATE PkgConfig::LIBPQ)
# The HTTP exporter's client (host/lua/curl.c: libcurl's multi-socket API on the host's
# loop). Debian: libcurl4-openssl-dev (tools/deps.sh).
pkg_check_modules(LIBCURL IMPORTED_TARGET libcurl)
if(NOT LIBCURL_FOUND)
  message(FATAL_ERROR "libcurl not found (pkg-config libcurl): install the Debian package "
                      "libcurl4-openssl-dev (tools/deps.sh)")
endif()
target_sources(ron-accounting PRIVATE host/lua/curl.c host/cli/streams.c)
target_link_libraries(ron-accounting PRIVATE PkgConfig::LIBCURL)
# The audit verbs (host/cli/auditcmd.c) over libronaudit.
if(RA_BUILD_AUDIT)
  target_sources(ron-accounting PRIVATE host/cli/auditcmd.c host/cli/auditproof.c)
  target_compile_definitions(ron-accounting PRIVATE RA_WITH_AUDIT=1)
  target_link_libraries(ron-accounting PRIVATE ronaudit_static)
endif()
# The ledger's operator verbs (host/cli/ledgerops.c runs lua/ron/ledger/cli.lua).
if(RA_BUILD_LEDGER)
  target_sources(ron-accounting PRIVATE host/cli/ledgerops.c)
  target_compile_definitions(ron-accounting PRIVATE RA_WITH_LEDGER=1)
endif()
set_target_properties(ron-accounting PROPERTIES ENABLE_EXPORTS ON)
target_link_options(ron-accounting PRIVATE -rdynamic)

