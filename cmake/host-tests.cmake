# Tests of the ron-accounting executable (host/cli, host/lua) and of the installed tree, label
# `host`:  cd build && ctest -L host --output-on-failure
# Included from the top-level CMakeLists.txt after enable_testing().
#
# Most go through tests/host/expect.sh, which checks the exit status as well as the output
# (PASS_REGULAR_EXPRESSION alone would accept any exit status).


set(_ra_host $<TARGET_FILE:ron-accounting>)
set(_ra_host_dir ${CMAKE_SOURCE_DIR}/tests/host)
set(_ra_expect sh ${_ra_host_dir}/expect.sh)

function(ra_host_test name)
  add_test(NAME ${name} COMMAND ${ARGN})
  set_tests_properties(${name} PROPERTIES LABELS host TIMEOUT 60)
endfunction()

# ---- command line ---------------------------------------------------------------------
ra_host_test(host-version ${_ra_host} version)
# ron-accounting X.Y.Z (libronacct X.Y.Z, LuaJIT 2.1..., BLAKE3 kernels: ...), one line.
set(_ra_version_re "^ron-accounting ${PROJECT_VERSION} \\(libronacct [0-9]+\\.[0-9]+\\.[0-9]+, ")
string(APPEND _ra_version_re "LuaJIT 2\\.1[^,]*, BLAKE3 kernels: [^\n]+\\)\n$")
set_tests_properties(host-version PROPERTIES PASS_REGULAR_EXPRESSION "${_ra_version_re}")

ra_host_test(host-help ${_ra_expect} -o "^usage: ron-accounting <command>" -o "run SCRIPT.lua" -E
  0 ${_ra_host} help)
ra_host_test(host-help-flag ${_ra_expect} -o "^usage: ron-accounting" -E 0 ${_ra_host} --help)
ra_host_test(host-no-args ${_ra_expect} -O -e "^usage: ron-accounting" 2 ${_ra_host})
ra_host_test(host-unknown-command ${_ra_expect} -O -e "unknown command 'frobnicate'"
  2 ${_ra_host} frobnicate)
ra_host_test(host-run-no-script ${_ra_expect} -O -e "run needs a script" 2 ${_ra_host} run)

# ---- run ------------------------------------------------------------------------------
ra_host_test(host-run-args ${_ra_expect} -o "^host-run-args: ok" -E
  0 ${_ra_host} run ${_ra_host_dir}/args.lua ${CMAKE_SOURCE_DIR}/lua "two words" --not-an-option)
set_tests_properties(host-run-args PROPERTIES ENVIRONMENT
  "LUA_PATH=/ra-lua-path-probe/?.lua\;\;;RA_EXPECT_EXE=${_ra_host}")

ra_host_test(host-run-error-exit ${_ra_expect} -o "^before the error$"
  -e "error\\.lua:[0-9]+: intentional failure from error\\.lua" -e "stack traceback:"
  1 ${_ra_host} run ${_ra_host_dir}/error.lua)
ra_host_test(host-run-os-exit ${_ra_expect} 7 ${_ra_host} run ${_ra_host_dir}/exit.lua 7)
ra_host_test(host-missing-script ${_ra_expect} -O
  -e "^ron-accounting: cannot open [^ ]*no-such-script\\.lua: No such file or directory$"
  2 ${_ra_host} run ${CMAKE_BINARY_DIR}/no-such-script.lua)

# ---- the event loop and tasks (libuv + luv, ron.base.task) ---------------------
# The loop runs after the main chunk until nothing is left; SIGTERM/SIGINT drain the tasks.
ra_host_test(host-tasks-ok ${_ra_expect} -o "^host-tasks-ok: main chunk done, live 2$"
  -o "^host-tasks-ok: sum 6$" -E 0 ${_ra_host} run ${_ra_host_dir}/tasks-ok.lua)
ra_host_test(host-tasks-error ${_ra_expect}
  -o "^joiner saw: nil Failed: .*seen by the joiner$"
  -e "^task: doomed-1 failed: .*intentional failure in a task$" -e "stack traceback:"
  -e "^task: 1 task\\(s\\) failed and were never joined: doomed-1$"
  1 ${_ra_host} run ${_ra_host_dir}/tasks-error.lua)
ra_host_test(host-tasks-leak ${_ra_expect} -O
  -e "^task: 1 task\\(s\\) still live when the loop ran out of work: forgotten_reader$"
  1 ${_ra_host} run ${_ra_host_dir}/tasks-leak.lua)
ra_host_test(host-luv-callback-error ${_ra_expect} -O
  -e "luv-error\\.lua:[0-9]+: intentional failure in a luv callback" -e "stack traceback:"
  1 ${_ra_host} run ${_ra_host_dir}/luv-error.lua)
# signal.sh waits for "ready", signals, and checks status, time (< 2 s) and the drain line.
ra_host_test(host-tasks-sigterm sh ${_ra_host_dir}/signal.sh ${_ra_host}
  ${_ra_host_dir}/tasks-sleep.lua term)
ra_host_test(host-tasks-sigterm-abort sh ${_ra_host_dir}/signal.sh ${_ra_host}
  ${_ra_host_dir}/tasks-sleep.lua term stubborn)
ra_host_test(host-tasks-sigint-twice sh ${_ra_host_dir}/signal.sh ${_ra_host}
  ${_ra_host_dir}/tasks-sleep.lua int-twice stubborn)

# ---- the WAL tools: verify and wal inspect -----------------------------------------------
# tests/host/wal.sh builds a WAL with tests/host/wal-make.lua (a real meter through the Lua
# binding: records, rollovers, ACKs that compact), then checks one case.
foreach(_case verify-ok verify-flip verify-torn verify-gap verify-file inspect golden)
  ra_host_test(host-wal-${_case} sh ${_ra_host_dir}/wal.sh ${_case} ${_ra_host}
    ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/host-wal)
endforeach()
ra_host_test(host-wal-verify-missing ${_ra_expect} -O
  -e "^ron-accounting verify: [^ ]*no-such-wal: No such file or directory$"
  2 ${_ra_host} verify ${CMAKE_BINARY_DIR}/no-such-wal)
ra_host_test(host-wal-verify-usage ${_ra_expect} -O -e "verify: needs a PATH" 2 ${_ra_host} verify)
ra_host_test(host-verify-totals-not-ledger ${_ra_expect} -O -e "--totals is for a file ledger"
  2 ${_ra_host} verify --totals ${CMAKE_SOURCE_DIR}/tests)
ra_host_test(host-wal-inspect-usage ${_ra_expect} -O -e "usage: ron-accounting wal inspect"
  2 ${_ra_host} wal inspect --frobnicate ${CMAKE_BINARY_DIR})
ra_host_test(host-wal-no-subcommand ${_ra_expect} -O -e "wal: needs a subcommand" 2 ${_ra_host} wal)
ra_host_test(host-help-wal ${_ra_expect} -o "verify \\[--quiet\\] PATH" -o "wal inspect"
  -o "ACKed but not compacted" -E 0 ${_ra_host} help)

# ---- verify of a file ledger (ron.accounting.export.exporters.file, docs/EXPORT.md) -------------
# tests/host/ledger.sh builds a ledger with tests/host/ledger-make.lua (a real meter and the
# file exporter), then checks one case: ok, flip, torn, chain, file.
foreach(_case ok flip torn chain file)
  ra_host_test(host-ledger-verify-${_case} sh ${_ra_host_dir}/ledger.sh ${_case} ${_ra_host}
    ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/host-ledger)
endforeach()

# ---- usage rated into ron-ledger (docs/LEDGER-RATING.md) -----------------------------------
# ledger-rate.sh: `ledger init` and a top-up, then records -> seal -> WAL -> the export
# runtime -> ron.ledger.exporter over SQLite (offloaded) on the host's loop; balances equal the
# usage rated by hand; `ledger verify` OK; a flipped byte of a stored transfer: exit 1 naming
# the transfer. The same on a real PostgreSQL the script starts (-pg: ron.ledger.exporter over the
# async pool, the CLI verbs on a postgresql:// URI). The CLI's refusals: no verb, an unknown
# verb, a ledger that does not exist, a server that does not answer.
if(RA_BUILD_LEDGER)
  ra_host_test(host-ledger-rate-e2e sh ${_ra_host_dir}/ledger-rate.sh ${_ra_host}
    ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/host-ledger-rate)
  ra_host_test(host-ledger-rate-e2e-pg sh ${_ra_host_dir}/ledger-rate.sh ${_ra_host}
    ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/host-ledger-rate-pg postgres)
  ra_host_test(host-ledger-cli-pg-down ${_ra_expect} -O -e "Connection refused" 2
    ${_ra_host} ledger --db postgresql://ron@127.0.0.1:1/none verify)
  ra_host_test(host-ledger-cli-usage ${_ra_expect} -O -e "^usage: ron-accounting ledger" 2
    ${_ra_host} ledger)
  ra_host_test(host-ledger-cli-unknown ${_ra_expect} -O -e "unknown verb frob" 2
    ${_ra_host} ledger --db ${CMAKE_BINARY_DIR}/host-ledger-none.db frob)
  ra_host_test(host-ledger-cli-no-ledger ${_ra_expect} -O -e "no such ledger" 2
    ${_ra_host} ledger --db ${CMAKE_BINARY_DIR}/host-ledger-none.db verify)
  set_tests_properties(host-ledger-rate-e2e host-ledger-rate-e2e-pg host-ledger-cli-usage
    host-ledger-cli-unknown host-ledger-cli-no-ledger host-ledger-cli-pg-down PROPERTIES ENVIRONMENT "RON_LEDGER_LIB=$<TARGET_FILE:ronledger>")
endif()

# ---- the HTTP surface (ron.node.http on ron.base.net.http_server) ----------------------
# http.sh: a real meter + runtime + file ledger behind http.serve; curl scrapes /metrics
# (promtool check metrics must pass), /healthz, /readyz 200 then 503 after a stop, 404/405,
# 127.0.0.1 only, and a clean exit with the server and an idle connection left open.
ra_host_test(host-http sh ${_ra_host_dir}/http.sh ${_ra_host} ${CMAKE_SOURCE_DIR}
  ${CMAKE_BINARY_DIR}/host-http)

# ---- the main job and the installed tree ----------------------------------------------
# quickstart.sh requires exit status 0, "b3sum confirms N/N digests" with N > 0, N slice
# files on disk, and every file's digest among the printed ones.
ra_host_test(host-quickstart sh ${_ra_host_dir}/quickstart.sh ${_ra_host}
  ${CMAKE_SOURCE_DIR}/examples/quickstart.lua)
# The daemon (`make run`) end to end on a fast injected clock (and G-21 at the daemon: a
# changed window length on the live plane is refused): examples/record.lua feeds
# the plane, three daemon runs (SIGTERM, kill -9, SIGTERM), exact ledger totals, exit 0,
# configuration errors one line and exit 2.
ra_host_test(host-daemon sh ${_ra_host_dir}/daemon.sh ${_ra_host} ${CMAKE_SOURCE_DIR}
  ${CMAKE_BINARY_DIR}/host-daemon)
set_tests_properties(host-daemon PROPERTIES TIMEOUT 180)
# `make run` as a newcomer sees it (issue 27): the whole product on the embedded defaults,
# at most 15 lines before ready, the 0600 secrets never logged; with --demo slices rated,
# a balance down, a wallet dry (its line and wallet_dry_total); `verify DIR` over the
# chain, OK and then FAILED after a flipped byte in the audit log.
if(RA_BUILD_LEDGER AND RA_BUILD_AUDIT)
  ra_host_test(host-run sh ${_ra_host_dir}/run.sh ${_ra_host} ${CMAKE_SOURCE_DIR}
    ${CMAKE_BINARY_DIR}/host-run)
  set_tests_properties(host-run PROPERTIES TIMEOUT 240)
  # A graceful stop under load (SIGTERM, --demo 20000 on the fast clock, 5 rounds at fixed
  # moments) drains the rater's and the wallet's commits: `verify DIR` right after it
  # names no pending saga, and the log says each ledger drained (tests/host/stop-drain.sh).
  ra_host_test(host-stop-drain sh ${_ra_host_dir}/stop-drain.sh ${_ra_host} ${CMAKE_SOURCE_DIR}
    ${CMAKE_BINARY_DIR}/host-stop-drain 5)
  set_tests_properties(host-stop-drain PROPERTIES TIMEOUT 360)
endif()
# G-6.1 end to end: POST /v1/records on the daemon (0.0.0.0, fast clock) with curl: good,
# refused (401/403/400/415/413) and idempotent batches, /metrics 403 to a non-loopback
# peer, a full plane's 429 + Retry-After + "applied"; ledger totals equal what was accepted.
ra_host_test(host-ingest-g6.1 sh ${_ra_host_dir}/ingest.sh ${_ra_host} ${CMAKE_SOURCE_DIR}
  ${CMAKE_BINARY_DIR}/host-ingest)
set_tests_properties(host-ingest-g6.1 PROPERTIES TIMEOUT 180)
# Issue 16 phase 2 end to end: a daemon with `audit` configured; refused ingest requests,
# a refused operator action, start and stop are audit records; `audit verify --list
# --vkey` passes and lists them with {tenant, dimension, reason}; a restart continues the
# chain; --check refuses amnesia with a dir.
if(RA_BUILD_AUDIT)
  ra_host_test(host-audit sh ${_ra_host_dir}/audit.sh ${_ra_host} ${CMAKE_SOURCE_DIR}
    ${CMAKE_BINARY_DIR}/host-audit)
  set_tests_properties(host-audit PROPERTIES TIMEOUT 120)
  # Issue 16's target as a test: every refused POST /v1/records (seeded plan of 401, 403,
  # 400, 415, 429) is exactly one reject record over two chains, per reason equal to the
  # metric; with a queue of one, reject records + the gap records' dropped == refusals.
  ra_host_test(host-ingest-audit sh ${_ra_host_dir}/ingest-audit.sh ${_ra_host}
    ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/host-ingest-audit)
  set_tests_properties(host-ingest-audit PROPERTIES TIMEOUT 180)
  # Usage, money and audit attest to each other: the ledger exporter and the audit trail in
  # one daemon; every committed transfer is exactly one "ledger" record (event seqs 1..n).
  if(RA_BUILD_LEDGER)
    ra_host_test(host-audit-ledger sh ${_ra_host_dir}/audit-ledger.sh ${_ra_host}
      ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/host-audit-ledger)
    set_tests_properties(host-audit-ledger PROPERTIES TIMEOUT 120)
    # Audit checkpoints carried in the ledger's event feed (AUD-I-30, AUD-I-31, LED-60,
    # LED-61): both verifies pass, re-attesting after restarts appends nothing, a rewritten trail is a
    # fork that `ledger verify --audit` names.
    ra_host_test(host-audit-attest sh ${_ra_host_dir}/audit-attest.sh ${_ra_host}
      ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/host-audit-attest)
    set_tests_properties(host-audit-attest PROPERTIES TIMEOUT 180)
    # The ledger's feed in the trail, exactly once (AUD-I-32): a kill -9 and a cursor
    # rewound to 0; every event seq is one record.
    ra_host_test(host-audit-feed sh ${_ra_host_dir}/audit-feed.sh ${_ra_host}
      ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/host-audit-feed)
    set_tests_properties(host-audit-feed PROPERTIES TIMEOUT 180)
  endif()
  # A full audit disk fails loudly and recovers by itself (AUD-I-42): a tmpfs of 512 KiB
  # (root: mount; else skipped, exit 77), the ERROR line with ENOSPC and the file system,
  # /readyz's reason (503 with audit.required), metering unaffected, ONE gap record with the
  # exact count of what was shed.
  ra_host_test(host-audit-enospc sh ${_ra_host_dir}/audit-enospc.sh ${_ra_host}
    ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/host-audit-enospc)
  set_tests_properties(host-audit-enospc PROPERTIES TIMEOUT 180 SKIP_RETURN_CODE 77
    RUN_SERIAL TRUE)
  # A read-only trail directory: --check refuses what start refuses, naming path and errno.
  ra_host_test(host-audit-readonly sh ${_ra_host_dir}/audit-readonly.sh ${_ra_host}
    ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/host-audit-readonly)
  # The proof routes (AUD-I-41): the CLI as the client, an independent RFC 9162 verifier,
  # tenants' tokens, a witness over the routes.
  if(RA_LUAJIT)
    ra_host_test(host-audit-proofs sh ${_ra_host_dir}/audit-proofs.sh ${_ra_host} ${RA_LUAJIT}
      ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/host-audit-proofs)
    set_tests_properties(host-audit-proofs PROPERTIES TIMEOUT 120)
  endif()
  # Refusals before any handler belong to the route asked (a 1.1 MB POST to the wallet's
  # /v1/issue is not an ingest oversize reject).
  if(RA_BUILD_LEDGER)
    ra_host_test(host-early-refusals sh ${_ra_host_dir}/early-refusals.sh ${_ra_host}
      ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/host-early-refusals)
    set_tests_properties(host-early-refusals PROPERTIES TIMEOUT 90)
  endif()
endif()
# The receiver's trust model at the daemon (issue 14 item 5): no producers is exit 2 unless
# allow_unauthenticated = true, which is logged at WARN at start; the unscoped token_hash
# is refused with a pointer to producers.
ra_host_test(host-receiver-auth sh ${_ra_host_dir}/receiver-auth.sh ${_ra_host}
  ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/host-receiver-auth)
# G-10 end to end over HTTP into a real PostgreSQL (tests/pg/pg-harness.sh): records ->
# daemon A (fast clock, WAL) -> exporters.http -> daemon B (receiver = { backend =
# exporters.postgres }); B frozen and A killed -9 mid-export, replays answered dup;
# verify --totals = what was recorded, no holes or duplicate rows, both daemons' metrics.
# Exit 77 (skipped) when PostgreSQL is not installed.
ra_host_test(host-g10-http-postgres sh ${_ra_host_dir}/g10.sh ${_ra_host} ${CMAKE_SOURCE_DIR}
  ${CMAKE_BINARY_DIR}/host-g10)
set_tests_properties(host-g10-http-postgres PROPERTIES TIMEOUT 120 LABELS "host;postgres"
  SKIP_RETURN_CODE 77)

ra_host_test(install-tree sh ${_ra_host_dir}/install-tree.sh ${CMAKE_COMMAND} ${CMAKE_BINARY_DIR}
  ${CMAKE_SOURCE_DIR} ${CMAKE_C_COMPILER} ${PKG_CONFIG_EXECUTABLE} ${CMAKE_INSTALL_BINDIR}
  ${CMAKE_INSTALL_LIBDIR} ${CMAKE_INSTALL_INCLUDEDIR} ${CMAKE_INSTALL_DATADIR})
set_tests_properties(install-tree PROPERTIES TIMEOUT 180)

# ---- a day-long downstream outage (issue 14 item 14) ---------------------------------
# 10k streams seal hourly windows for a simulated day while the ledger answers
# retry_network; 8192 slices fit the pending ring, the other 231808 wait in the WAL. RSS must
# stay flat from the middle to the end of the outage; then the ledger comes back and every
# slice is exported in order, totals exact (verify --totals). About 25 s.
ra_host_test(host-backlog-day-outage ${_ra_expect}
  -o "^backlog-day: 10000 streams x 24 hours = 240000 slices sealed"
  -o "^backlog-day: ledger up: 240000 slices exported" -o "^backlog-day: verify OK: 10000 streams"
  0 ${_ra_host} run ${_ra_host_dir}/backlog-day.lua ${CMAKE_BINARY_DIR}/backlog-day 10000 24)
set_tests_properties(host-backlog-day-outage PROPERTIES TIMEOUT 600)

# A stream stuck on a gap (the ledger restored from an older copy) and the operator's
# remedy, `streams accept-loss`, through a real daemon's admin route (issue 14 item 1).
ra_host_test(host-streams-stuck-accept-loss sh ${_ra_host_dir}/streams.sh ${_ra_host}
  ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/host-streams)
set_tests_properties(host-streams-stuck-accept-loss PROPERTIES TIMEOUT 120)

# verify refuses what is not a WAL or a ledger: empty directory, /proc, a daemon's state
# directory (exit 2); a FIFO or a symbolic link in a file ledger (reported, never read).
ra_host_test(host-verify-refuses-non-wal-paths sh ${_ra_host_dir}/verify-refuses.sh ${_ra_host}
  ${CMAKE_BINARY_DIR}/host-verify-refuses)

# --check refuses what start refuses, with the same line and exit 2 (issue 14 item 11).
ra_host_test(host-check-refuses-what-start-refuses sh ${_ra_host_dir}/check.sh ${_ra_host}
  ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/host-check)

# A plain C test of host sources (no h2o, no Lua: label c, like the core's tests), as built
# and, with RA_SANITIZE_TESTS, under ASan+UBSan (<name>-asan).
function(ra_host_c_test name)
  add_executable(${name} ${ARGN})
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/host ${CMAKE_SOURCE_DIR}/tests)
  target_compile_options(${name} PRIVATE ${RA_WARN})
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES LABELS c TIMEOUT 60)
  if(RA_SANITIZE_TESTS)
    add_executable(${name}-asan ${ARGN})
    target_include_directories(${name}-asan PRIVATE ${CMAKE_SOURCE_DIR}/host ${CMAKE_SOURCE_DIR}/tests)
    target_compile_options(${name}-asan PRIVATE ${RA_WARN} ${RA_SAN_FLAGS})
    target_link_options(${name}-asan PRIVATE ${RA_SAN_FLAGS})
    add_test(NAME ${name}-asan COMMAND ${name}-asan)
    set_tests_properties(${name}-asan PROPERTIES LABELS "c;asan" TIMEOUT 60
      ENVIRONMENT "ASAN_OPTIONS=detect_leaks=1:abort_on_error=1;UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1")
  endif()
endfunction()

# The HTTP server's first look at a request head (host/lua/http_head.c): H2O's refusals
# found first with where and why, the 431 limits, heads in pieces (issue 24 §3); what the
# host answers on the wire is spec/ron/wallet/http_spec.lua's.
ra_host_c_test(test-http-head ${CMAKE_SOURCE_DIR}/tests/host/test-http-head.c
  ${CMAKE_SOURCE_DIR}/host/lua/http_head.c)

# The wallet's request decoder (host/lua/wallet_dto.c over json_scan.c);
# tests/fuzz/fuzz-wallet-dto.c fuzzes the same files.
ra_host_c_test(test-wallet-dto ${CMAKE_SOURCE_DIR}/tests/wallet/test-wallet-dto.c
  ${CMAKE_SOURCE_DIR}/host/lua/wallet_dto.c ${CMAKE_SOURCE_DIR}/host/lua/json_scan.c
  ${CMAKE_SOURCE_DIR}/host/lua/dto.c)
