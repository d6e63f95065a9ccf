# What an operator installs and looks at (issue 27 items 5-7; label ops, part of `make test`):
#   prometheus-rules   examples/prometheus/: promtool check + test rules, every alert fired
#                      and not fired by a series, every family it names documented
find_program(RA_PROMTOOL promtool)
if(RA_PROMTOOL)
  add_test(NAME prometheus-rules
           COMMAND sh ${CMAKE_SOURCE_DIR}/tests/host/prometheus-rules.sh ${CMAKE_SOURCE_DIR})
else()
  add_test(NAME prometheus-rules COMMAND sh -c
    "echo 'promtool not found: install prometheus (tools/deps.sh)' >&2; exit 1")
endif()
set_tests_properties(prometheus-rules PROPERTIES LABELS ops TIMEOUT 60)
#   host-status-page   GET / in headless Chromium on a daemon with every block: no console
#                      message, every number equals /metrics, a screenshot kept in
#                      <build>/host-status-page/status-page.png
#   host-metrics-conventions  the same daemon's /metrics: `promtool check metrics` silent, every
#                      family with its system's prefix, counters ending in _total
#   package-deb        `cpack -G DEB`: contents, lintian without errors, dpkg -x and the
#                      packaged executable with the packaged configuration (--check, start,
#                      stop), systemd-analyze verify on the unit
if(RA_BUILD_HOST AND RA_BUILD_AUDIT AND RA_BUILD_LEDGER)
  add_test(NAME host-status-page
           COMMAND sh ${CMAKE_SOURCE_DIR}/tests/host/status-page.sh
                   $<TARGET_FILE:ron-accounting> ${CMAKE_SOURCE_DIR}
                   ${CMAKE_BINARY_DIR}/host-status-page page)
  add_test(NAME host-metrics-conventions
           COMMAND sh ${CMAKE_SOURCE_DIR}/tests/host/status-page.sh
                   $<TARGET_FILE:ron-accounting> ${CMAKE_SOURCE_DIR}
                   ${CMAKE_BINARY_DIR}/host-metrics-conventions metrics)
  set_tests_properties(host-status-page host-metrics-conventions PROPERTIES
    LABELS "host;ops" TIMEOUT 180 ENVIRONMENT
    "RON_LEDGER_LIB=$<TARGET_FILE:ronledger>;RON_AUDIT_LIB=$<TARGET_FILE:ronaudit>")
endif()
if(RA_BUILD_HOST)
  add_test(NAME package-deb
           COMMAND sh ${CMAKE_SOURCE_DIR}/tests/host/package.sh ${CMAKE_BINARY_DIR}
                   ${CMAKE_BINARY_DIR}/package-deb)
  set_tests_properties(package-deb PROPERTIES LABELS ops TIMEOUT 400)
endif()
#   package-rock       packaging/ron-accounting-<version>-1.rockspec: `luarocks make` into a
#                      scratch tree, every module of lua/ installed, the main modules loaded
#                      by LuaJIT from that tree alone, the libraries through the finder
if(RA_BUILD_LEDGER AND RA_BUILD_AUDIT)
  add_test(NAME package-rock
           COMMAND sh ${CMAKE_SOURCE_DIR}/tests/host/rock.sh ${CMAKE_SOURCE_DIR}
                   ${CMAKE_BINARY_DIR} ${CMAKE_BINARY_DIR}/package-rock ${PROJECT_VERSION})
  set_tests_properties(package-rock PROPERTIES LABELS ops TIMEOUT 300)
endif()
