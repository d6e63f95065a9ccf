# ron-wallet (docs/WALLET.md, issue 17): Lua over the ledger engine and the host's request
# decoder (host/lua/wallet_dto.c, its C test and fuzz harness are in host-tests.cmake).
#   lua-wallet-host  spec/ron/wallet/ inside the host: the DTO layer over ra_wdto_decode, the
#                    breaker, and the service through the daemon's HTTP server on an
#                    offloaded SQLite ledger (idempotency and nonces across a reopen, nonce
#                    atomicity, backpressure counters, a stalled ledger, staleness).
# (cmake/ledger.cmake; ~30-60 s quiet, 117 s seen at load 17 against 120)
rl_host_spec(lua-wallet-host spec/ron/wallet lua 600)
# host-wallet-kill9: a real daemon with `wallet` on SQLite, SIGKILLed with 40 transfers in
# flight; after the restart every request sent again answers byte-identical bytes (WLT-4),
# balances are exact, a used nonce is remembered (WLT-5). tests/host/wallet.sh.
rl_host_test(host-wallet-kill9 120 sh ${CMAKE_SOURCE_DIR}/tests/host/wallet.sh
  $<TARGET_FILE:ron-accounting> ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/host-wallet)
# lua-wallet-pg-stall-host: ledger stall chaos (WLT-8) on real stores: the PostgreSQL
# server's processes SIGSTOPped (tests/pg/pg-harness.sh freeze; pending without PostgreSQL),
# and SQLite write-locked by a sqlite3 shell: readyz flips, POST 503 with Retry-After, GET
# balance 200 from the cache with a growing staleness, then SIGCONT / unlock: every request
# sent again commits exactly once. spec/ron/wallet/stall_host.lua.
rl_host_spec(lua-wallet-pg-stall-host spec/ron/wallet/stall_host.lua lua 180)
# host-wallet-e2e: gateway records -> seal -> WAL -> export -> ron.ledger.exporter (rate card)
# -> ron-wallet (SQLite): balances down window by window, statements citing the slices, dry
# wallets published; `ledger verify --wal` across the chain; a flipped byte caught.
# host-wallet-e2e-pg: the same on a real PostgreSQL the script starts.
# tests/host/wallet-e2e.sh (+ wallet-e2e.lua).
rl_host_script_pair(host-wallet-e2e wallet-e2e.sh 120)
# host-usage-windows(-pg): money = usage over 12 windows across a UTC midnight (issue 24 §5):
# tiers, a free allowance running out mid-period, every charge recomputed by the test's own
# arithmetic, wallet balances after every window, `ledger verify --wal`.
# tests/host/usage-windows.sh (+ usage-windows.lua).
rl_host_script_pair(host-usage-windows usage-windows.sh 180)
# host-wallet-fleet: the fleet shape (issue 29 items 1, 3, 4; issue 24 §4): two daemons with
# `wallet` blocks (nodes wallet-1, wallet-2) and the rater on one real PostgreSQL the test
# starts; node 2 SIGKILLed holding a payer and kept dead 20 s while node 1's untouched payers
# keep their rate and p99 (against a no-kill baseline of the same run) and the held ones
# resume within the lease's bound; every request settled once and identical on both nodes;
# races and replays across the nodes; `ledger verify` exact. tests/host/fleet.lua (quick);
# `make soak-fleet` runs it with more keys, 3 kills of 40 s (docs/ops/make-targets.md).
rl_host_test(host-wallet-fleet 300 $<TARGET_FILE:ron-accounting> run
  ${CMAKE_SOURCE_DIR}/tests/host/fleet.lua ${CMAKE_BINARY_DIR}/host-wallet-fleet
  $<TARGET_FILE:ron-accounting> quick)
if(TEST host-wallet-fleet)
  set_tests_properties(host-wallet-fleet PROPERTIES LABELS "host;postgres")
  add_custom_target(soak-fleet
    COMMAND ${CMAKE_COMMAND} -E env RON_LEDGER_LIB=$<TARGET_FILE:ronledger>
            $<TARGET_FILE:ron-accounting> run ${CMAKE_SOURCE_DIR}/tests/host/fleet.lua
            ${CMAKE_BINARY_DIR}/soak-fleet $<TARGET_FILE:ron-accounting> soak
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR} DEPENDS ron-accounting ronledger USES_TERMINAL)
endif()
