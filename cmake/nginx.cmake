# The nginx gateway (issue 6; docs/ops/nginx.md): the native module
# and the tests that start a real nginx. Included from CMakeLists.txt after enable_testing().
#
#   nginx-module (target, in ALL when nginx-dev is installed)
#       nginx/ built as a dynamic module of Debian's nginx by tools/nginx-module.sh,
#       with nginx-dev's build tree and Debian's configure flags, libronacct.a linked in:
#       <build>/nginx/ngx_http_ron_accounting_module.so. Without nginx-dev, configure says
#       so and the module and its tests are left out.
#   nginx-lua-* / nginx-native-* (ctest, labels host and nginx)
#       tests/nginx/e2e.sh and hotpath.sh: real nginx (master, 2 workers, loopback port,
#       scratch prefix under <build>/nginx-tests), the sidecar on a fast injected clock,
#       curl and bounded wrk load; exact ledger totals against nginx's access log.
#   bench-nginx (target; not a test): tests/bench/nginx/bench-nginx.sh, see
#       tests/bench/README.md.

set(RA_NGINX_SRC /usr/share/nginx/src CACHE PATH "nginx-dev's build tree (Debian)")
find_program(RA_NGINX nginx PATHS /usr/sbin NO_DEFAULT_PATH)
if(NOT RA_NGINX)
  find_program(RA_NGINX nginx)
endif()
find_program(RA_CURL curl)
find_program(RA_WRK wrk)
set(RA_NGINX_LUA_MODULE /usr/lib/nginx/modules/ngx_http_lua_module.so)

# ---- the native module -------------------------------------------------------------------
set(RA_NGINX_MODULE "")
if(EXISTS ${RA_NGINX_SRC}/configure AND EXISTS ${RA_NGINX_SRC}/conf_flags)
  set(RA_NGINX_MODULE ${CMAKE_BINARY_DIR}/nginx/ngx_http_ron_accounting_module.so)
  file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/nginx)
  add_custom_command(OUTPUT ${RA_NGINX_MODULE}
    COMMAND sh ${CMAKE_SOURCE_DIR}/tools/nginx-module.sh ${RA_NGINX_SRC}
      ${CMAKE_BINARY_DIR}/nginx/build ${CMAKE_SOURCE_DIR}/nginx
      ${CMAKE_SOURCE_DIR}/include $<TARGET_FILE:ronacct_static> ${RA_NGINX_MODULE}
    DEPENDS ${CMAKE_SOURCE_DIR}/nginx/ngx_http_ron_accounting_module.c
      ${CMAKE_SOURCE_DIR}/nginx/config ${CMAKE_SOURCE_DIR}/tools/nginx-module.sh
      ${CMAKE_SOURCE_DIR}/include/ron/accounting.h ronacct_static
      $<TARGET_FILE:ronacct_static>
    COMMENT "Building the native nginx module (nginx, against nginx-dev)"
    VERBATIM)
  add_custom_target(nginx-module ALL DEPENDS ${RA_NGINX_MODULE})
  install(FILES ${RA_NGINX_MODULE} DESTINATION ${CMAKE_INSTALL_LIBDIR}/nginx/modules)
  message(STATUS "nginx module: nginx against ${RA_NGINX_SRC}")
else()
  message(NOTICE
    "nginx-dev not found (${RA_NGINX_SRC}/configure): the native nginx module "
    "(nginx) and its tests are not built. Install the Debian package nginx-dev "
    "(tools/deps.sh) to have them.")
endif()

# ---- tests with a real nginx -------------------------------------------------------------
set(_ra_ngx_work ${CMAKE_BINARY_DIR}/nginx-tests)
function(ra_nginx_test name timeout)
  add_test(NAME ${name} COMMAND ${ARGN})
  set_tests_properties(${name} PROPERTIES LABELS "host;nginx" TIMEOUT ${timeout})
endfunction()

if(RA_NGINX AND EXISTS ${RA_NGINX_LUA_MODULE} AND RA_CURL AND RA_WRK)
  set(_ra_e2e sh ${CMAKE_SOURCE_DIR}/tests/nginx/e2e.sh)
  set(_ra_e2e_args ${RA_NGINX} $<TARGET_FILE:ron-accounting> ${CMAKE_SOURCE_DIR})
  set(_ra_lib $<TARGET_FILE:ronacct>)
  # name suffix -> e2e.sh case
  set(_ra_cases
    "ledger-totals-equal-access-log=totals"
    "totals-exact-across-sidecar-restarts-and-reloads=restarts"
    "bad-input-counted-request-unaffected=bad-input"
    "api-key-tenants-exact-unknown-keys-counted=api-keys"
    "refuses-unsafe-plane=refusals")
  set(_ra_kinds lua)
  if(RA_NGINX_MODULE)
    list(APPEND _ra_kinds native)
  endif()
  foreach(_kind ${_ra_kinds})
    foreach(_pair ${_ra_cases})
      string(REPLACE "=" ";" _pair "${_pair}")
      list(GET _pair 0 _suffix)
      list(GET _pair 1 _case)
      ra_nginx_test(nginx-${_kind}-${_suffix} 180 ${_ra_e2e} ${_kind} ${_case} ${_ra_e2e_args}
        ${_ra_ngx_work}/${_kind}-${_case} ${_ra_lib} ${RA_NGINX_MODULE})
    endforeach()
  endforeach()
  ra_nginx_test(nginx-lua-log-phase-jit-compiled-garbage-free 120
    sh ${CMAKE_SOURCE_DIR}/tests/nginx/hotpath.sh ${RA_NGINX} $<TARGET_FILE:ron-accounting>
    ${CMAKE_SOURCE_DIR} ${_ra_ngx_work}/lua-hotpath ${_ra_lib})
else()
  # Never a silently skipped suite (like the lua test): say what is missing.
  add_test(NAME nginx-gateway-prerequisites COMMAND sh -c
    "echo 'nginx, libnginx-mod-http-lua, curl or wrk not found: install nginx libnginx-mod-http-lua lua-resty-core curl wrk (tools/deps.sh)' >&2; exit 1")
  set_tests_properties(nginx-gateway-prerequisites PROPERTIES LABELS "host;nginx")
endif()

# ---- benchmarks (not tests): cmake --build <build> --target bench-nginx ------------------
# tests/bench/nginx/bench-nginx.sh; BENCH lines in <build>/bench/nginx-results.jsonl.
add_library(ra_bench_atomic MODULE EXCLUDE_FROM_ALL ${CMAKE_SOURCE_DIR}/tests/bench/nginx/bench-atomic.c)
target_compile_options(ra_bench_atomic PRIVATE ${RA_WARN} -O2)
set_target_properties(ra_bench_atomic PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
if(RA_NGINX AND EXISTS ${RA_NGINX_LUA_MODULE} AND RA_WRK)
  set(_ra_bench_nginx_args
    --nginx ${RA_NGINX} --lib $<TARGET_FILE:ronacct> --src ${CMAKE_SOURCE_DIR}
    --atomic-lib $<TARGET_FILE:ra_bench_atomic>)
  if(RA_NGINX_MODULE)
    list(APPEND _ra_bench_nginx_args --module ${RA_NGINX_MODULE})
  endif()
  add_custom_target(bench-nginx
    COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/bench
    COMMAND ${CMAKE_COMMAND} -E rm -f ${CMAKE_BINARY_DIR}/bench/nginx-results.jsonl
    COMMAND sh ${CMAKE_SOURCE_DIR}/tests/bench/nginx/bench-nginx.sh ${_ra_bench_nginx_args}
      --work ${CMAKE_BINARY_DIR}/bench/nginx --out ${CMAKE_BINARY_DIR}/bench/nginx-results.jsonl
    # issue 16 on the nginx path: workers' refusals -> the plane's ring -> the sidecar's
    # trail, audit off vs on (tests/bench/nginx/bench-nginx-refusals.sh)
    COMMAND sh ${CMAKE_SOURCE_DIR}/tests/bench/nginx/bench-nginx-refusals.sh ${RA_NGINX}
      $<TARGET_FILE:ron-accounting> ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/bench/nginx-refusals
      $<TARGET_FILE:ronacct> --out ${CMAKE_BINARY_DIR}/bench/nginx-results.jsonl
    USES_TERMINAL
    VERBATIM)
  add_dependencies(bench-nginx ra_bench_atomic ronacct ron-accounting)
  if(RA_NGINX_MODULE)
    add_dependencies(bench-nginx nginx-module)
  endif()
endif()
