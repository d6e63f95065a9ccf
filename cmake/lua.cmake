# Lua side: busted specs under LuaJIT, and the check that the committed cdef matches the
# header. Both carry the ctest label `lua` (`make test-lua` = ctest -L lua).
#
#   lua                 busted over spec/ with the source tree's lua/ first on the path and
#                       RON_ACCOUNTING_LIB pointing at the libronacct just built
#   lua-task-host       spec/ron/base/task_spec.lua run by busted inside
#                       ron-accounting (luv on the host's loop)
#   lua-chaos-host      spec/ron/accounting/export/exporters/chaos_spec.lua the same way (its
#                       latency faults sleep on the host's loop)
#   lua-runtime-host    spec/ron/accounting/runtime/runtime_spec.lua the same way (the export
#                       runtime; its pool work needs the host's exported ra_* symbols)
#   lua-postgres-host   spec/ron/accounting/export/exporters/postgres_spec.lua the same way, against
#                       a PostgreSQL it starts (G-3, G-10, G-16 against PostgreSQL; under
#                       plain busted only its no-database part runs, the rest is pending)
#   lua-http-host       spec/ron/node/http_spec.lua the same way (the HTTP server is
#                       a C module of the host)
#   lua-ingest-g6.1-host spec/ron/node/ingest_spec.lua the same way: G-6.1 for
#                       POST /v1/records (the DTO decoder and the server are the host's;
#                       under plain busted only the configuration checks run)
#   lua-httpexp-host    spec/ron/accounting/export/exporters/http_spec.lua the same way (the HTTP
#                       exporter's client is a C module of the host; the ledger receiver)
#   lua-cdef-current    fails when lua/ron/accounting/binding/cdef.lua is not what
#                       tools/gen-cdef.sh prints from include/ron/accounting.h (`make cdef`);
#                       lua-audit-cdef-current, lua-ingest-dto-cdef-current and
#                       lua-wallet-dto-cdef-current the same for audit.h and the host's
#                       request decoders (host/lua/ingest_dto.h, wallet_dto.h)

find_program(RA_LUAJIT luajit)
find_program(RA_BUSTED busted)

# A path with ';' must reach the test as one ENVIRONMENT entry: escape the separators.
set(_ra_lua_path "${CMAKE_SOURCE_DIR}/lua/?.lua;${CMAKE_SOURCE_DIR}/lua/?/init.lua;;")
string(REPLACE ";" "\\;" _ra_lua_path "${_ra_lua_path}")

if(RA_LUAJIT AND RA_BUSTED)
  # `busted --lua=luajit` starts busted under the default `lua`, then re-runs the busted
  # script as `luajit <script> --ignore-lua <args joined by spaces>`. When the script is a
  # Lua file (Debian's /usr/bin/busted is), run it under LuaJIT directly: the same
  # process in the end, without needing a second Lua with busted installed and without
  # the unquoted re-join of the arguments. A wrapper shell script (LuaRocks) gets --lua.
  file(STRINGS "${RA_BUSTED}" _ra_busted_shebang LIMIT_COUNT 1)
  if(_ra_busted_shebang MATCHES "^#!.*[/ ]lua[0-9.]*$")
    set(_ra_busted_cmd ${RA_LUAJIT} ${RA_BUSTED})
  else()
    set(_ra_busted_cmd ${RA_BUSTED} --lua=${RA_LUAJIT})
  endif()
  # plainTerminal ends with the summary line ("N successes / N failures / ..."); busted
  # exits non-zero on any failure or error.
  # The specs of the systems this build has: a build without the audit trail or the
  # ledger (RA_BUILD_AUDIT / RA_BUILD_LEDGER OFF) has no library for their bindings.
  set(_ra_spec_roots spec/ron/base spec/ron/accounting_spec.lua
      spec/ron/accounting_hotpath_spec.lua spec/ron/accounting spec/ron/node)
  if(RA_BUILD_AUDIT)
    list(APPEND _ra_spec_roots spec/ron/audit)
  endif()
  if(RA_BUILD_LEDGER)
    list(APPEND _ra_spec_roots spec/ron/ledger)
  endif()
  add_test(NAME lua
           COMMAND ${_ra_busted_cmd} --output=plainTerminal --pattern=_spec ${_ra_spec_roots}
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(lua PROPERTIES
    LABELS lua
    TIMEOUT 600
    ENVIRONMENT "LUA_PATH=${_ra_lua_path};RON_ACCOUNTING_LIB=$<TARGET_FILE:ronacct>;RA_BIN=$<TARGET_FILE:ron-accounting>")
  # ron.audit (lua/ron/audit/) loads libronaudit from here (spec/ron/audit/).
  if(RA_BUILD_AUDIT)
    set_property(TEST lua APPEND PROPERTY ENVIRONMENT "RON_AUDIT_LIB=$<TARGET_FILE:ronaudit>")
  endif()
else()
  # Not fatal for a C-only build, but never a silently skipped suite either.
  add_test(NAME lua COMMAND sh -c
    "echo 'luajit or busted not found: install luajit2 and lua-busted (tools/deps.sh)' >&2; exit 1")
  set_tests_properties(lua PROPERTIES LABELS lua)
endif()

# Specs that need the daemon's configuration: busted inside the host, with luv bound to
# the host's libuv loop (spec/run-busted.lua loads busted's runner there). Plain busted
# above runs them too, on luv's own loop. RA_BIN lets a spec run this build's binary
# (e.g. `ron-accounting verify` on the ledger it wrote).
function(ra_host_spec name spec)
  if(NOT RA_BUSTED)
    return()
  endif()
  add_test(NAME ${name}
           COMMAND $<TARGET_FILE:ron-accounting> run spec/run-busted.lua
                   --output=plainTerminal ${spec}
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(${name} PROPERTIES
    LABELS lua
    TIMEOUT 120
    ENVIRONMENT "LUA_PATH=${_ra_lua_path};RA_BIN=$<TARGET_FILE:ron-accounting>")
endfunction()

# task primitives; the chaos exporter (its latency faults sleep through task.sleep); the
# export runtime end to end (rollover, router, workers, offload to the threadpool);
# readiness (C-6, I-8, G-5) and the bus hooks (C-10).
ra_host_spec(lua-task-host spec/ron/base/task_spec.lua)
# the 0.1 module names, C modules included (they exist only inside the host)
ra_host_spec(lua-compat-host spec/ron/accounting/compat_spec.lua)
ra_host_spec(lua-chaos-host spec/ron/accounting/export/exporters/chaos_spec.lua)
ra_host_spec(lua-runtime-host spec/ron/accounting/runtime/runtime_spec.lua)
ra_host_spec(lua-readiness-host spec/ron/accounting/runtime/readiness_spec.lua)
# issue 14 items 1, 2, 4: failures classified and logged, stuck streams, the meter in readiness
ra_host_spec(lua-stalls-host spec/ron/accounting/runtime/stalls_spec.lua)
# issue 16 phase 2: the runtime's audit hooks (export outcomes, stuck streams, sheds, readiness)
ra_host_spec(lua-audit-hooks-host spec/ron/accounting/runtime/audit_hooks_spec.lua)
# issue 16 phase 2: the audit trail's host pattern (sink worker, deadlines, drain) on the loop
if(RA_BUILD_AUDIT)
  ra_host_spec(lua-audit-host spec/ron/audit/host_spec.lua)
endif()
# G-22 tenant hotspot fairness: the runtime's bounded dispatch under round_robin and wfq.
ra_host_spec(lua-g22-host spec/ron/accounting/export/fairness/g22_spec.lua)
# the runtime's batched ACKs (interval compaction), bounded dispatch, bounded state
ra_host_spec(lua-runtime-bounded-host spec/ron/accounting/runtime/bounded_spec.lua)
# the HTTP surface: ron.base.net.http_server (host/lua/httpd.c, h2o) and ron.node.http
ra_host_spec(lua-http-host spec/ron/node/http_spec.lua)
# issue 14 items 5-8: framing (duplicate Content-Length, chunked at the limit), half-closed
# peers, connection limits, timeouts and the loopback reserve under a flood
ra_host_spec(lua-http-hardening-host spec/ron/node/http_hardening_spec.lua)
# G-6.1 DTO hygiene of POST /v1/records: ron.node.ingest behind ron.node.http
ra_host_spec(lua-ingest-g6.1-host spec/ron/node/ingest_spec.lua)
ra_host_spec(lua-replay-horizon-host spec/ron/accounting/runtime/replay_horizon_spec.lua)
# The PostgreSQL ledger against a real server the spec starts (tests/pg/pg-harness.sh):
# the contract, G-16 with two processes, the runtime end to end and across an outage.
ra_host_spec(lua-postgres-host spec/ron/accounting/export/exporters/postgres_spec.lua)
set_tests_properties(lua-postgres-host PROPERTIES LABELS "lua;postgres")
# The HTTP exporter and the ledger receiver: ron.base.net.http_client_c (host/lua/curl.c, libcurl
# multi on the host's loop), exporters.http, receiver; the status mapping, the contract over
# HTTP (G-3, G-16), the receiver's rejects, the runtime end to end through HTTP.
ra_host_spec(lua-httpexp-host spec/ron/accounting/export/exporters/http_spec.lua)

# A generated cdef is what tools/gen-cdef.sh prints now (diff -u shows what changed; the
# fresh copy stays in the build tree for inspection): ra_cdef_test(NAME WHICH FILE MAKE).
function(ra_cdef_test name which file make)
  add_test(NAME ${name}
           COMMAND sh -c "sh tools/gen-cdef.sh ${which} > \"$1\" && diff -u ${file} \"$1\" || { echo '${file} is stale: run ${make}' >&2; exit 1; }"
                   sh ${CMAKE_BINARY_DIR}/${name}.fresh.lua
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(${name} PROPERTIES LABELS lua TIMEOUT 60
    ENVIRONMENT "CC=${CMAKE_C_COMPILER}")
endfunction()
ra_cdef_test(lua-cdef-current accounting lua/ron/accounting/binding/cdef.lua "make cdef")
if(RA_BUILD_AUDIT)
  ra_cdef_test(lua-audit-cdef-current audit lua/ron/audit/cdef.lua "make cdef")
endif()
# The host's request decoders (host/lua/ingest_dto.h, wallet_dto.h).
ra_cdef_test(lua-ingest-dto-cdef-current ingest-dto lua/ron/accounting/binding/ingest_cdef.lua
             "make cdef")
ra_cdef_test(lua-wallet-dto-cdef-current wallet-dto lua/ron/wallet/dto_cdef.lua "make cdef")
