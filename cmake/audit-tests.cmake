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

# The audit log's crash soak (`make soak-audit`): test-audit-log with 1000 kill -9s.
set(RAU_SOAK_KILLS 1000 CACHE STRING "Kills in the audit log's crash soak (make soak-audit)")
add_custom_target(soak-audit
  COMMAND ${CMAKE_COMMAND} -E env RAU_KILL9_ITERS=${RAU_SOAK_KILLS}
          RA_TEST_TMP=${CMAKE_BINARY_DIR}/tmp $<TARGET_FILE:test-audit-log>
  DEPENDS test-audit-log USES_TERMINAL VERBATIM)

# `ron-accounting audit verify` end to end: a signed log verifies (exit 0, "OK"); a flipped
# byte in the segment and a wrong verifier key each exit 1 naming the position.
add_executable(audit-mklog tests/audit/audit-mklog.c)
target_link_libraries(audit-mklog PRIVATE ronaudit_static)
target_compile_options(audit-mklog PRIVATE ${RA_WARN})
if(RA_BUILD_HOST)
  add_test(NAME audit-cli-verify
    COMMAND sh -c "set -u
      bin=\"$1\"; mk=\"$2\"; d=\"$3\"; rm -rf \"$d\"; mkdir -p \"$d\"
      \"$bin\" audit keygen ron-audit/gw-1/rejects \"$d/skey\" \"$d/vkey\" >/dev/null || exit 1
      \"$bin\" audit keygen other \"$d/skey2\" \"$d/vkey2\" >/dev/null || exit 1
      \"$mk\" \"$d/log\" \"$d/skey\" 50 || exit 1
      out=$(\"$bin\" audit verify --vkey \"$d/vkey\" \"$d/log\") || { echo \"$out\"; exit 1; }
      echo \"$out\" | grep -q '^OK: 50 records' || { echo \"$out\"; exit 1; }
      out=$(\"$bin\" audit verify --vkey \"$d/vkey2\" \"$d/log\") && { echo 'wrong key accepted'; exit 1; }
      echo \"$out\" | grep -q 'cp-00000000000000000050.note: checkpoint: BadSignature' || { echo \"$out\"; exit 1; }
      seg=\"$d/log/seg-00000000000000000001.rau\"
      printf 'Z' | dd of=\"$seg\" bs=1 seek=200 conv=notrunc 2>/dev/null
      out=$(\"$bin\" audit verify --vkey \"$d/vkey\" \"$d/log\") && { echo 'flip accepted'; exit 1; }
      echo \"$out\" | grep -q 'seg-00000000000000000001.rau+' || { echo \"$out\"; exit 1; }
      echo \"$out\"; exit 0"
    sh $<TARGET_FILE:ron-accounting> $<TARGET_FILE:audit-mklog> ${CMAKE_BINARY_DIR}/tmp/audit-cli)
  set_tests_properties(audit-cli-verify PROPERTIES LABELS "c;audit" TIMEOUT 60)
  # `audit proof inclusion|consistency`: every proof of a 13-record log checked by an
  # independent RFC 9162 checker (tests/audit/rfc9162.lua), a witness's checkpoint, a fork.
  if(RA_LUAJIT)
    add_test(NAME audit-cli-proof
      COMMAND sh ${CMAKE_SOURCE_DIR}/tests/audit/proof.sh $<TARGET_FILE:ron-accounting>
              $<TARGET_FILE:audit-mklog> ${RA_LUAJIT} ${CMAKE_SOURCE_DIR}
              ${CMAKE_BINARY_DIR}/tmp/audit-proof)
    set_tests_properties(audit-cli-proof PROPERTIES LABELS "c;audit" TIMEOUT 120)
  endif()
  # What verify proves, and with what (docs/AUDIT.md): 11 tampers x 5 modes (plain, --vkey,
  # --checkpoint kept elsewhere, ledger verify --audit, a witness's cosignature); the witness
  # refuses a rollback and a fork.
  if(RA_BUILD_LEDGER)
    add_test(NAME audit-tamper
      COMMAND sh ${CMAKE_SOURCE_DIR}/tests/audit/tamper.sh $<TARGET_FILE:ron-accounting>
              $<TARGET_FILE:audit-mklog> ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/tmp/audit-tamper)
    set_tests_properties(audit-tamper PROPERTIES LABELS "c;audit" TIMEOUT 180)
  endif()
  # The formats against their reference implementations: Go's sumdb/note and sumdb/tlog
  # (golang-go, golang-golang-x-mod-dev: tools/deps.sh) and a cosignature/v1 written in Go.
  add_test(NAME audit-interop
    COMMAND sh ${CMAKE_SOURCE_DIR}/tests/audit/interop.sh $<TARGET_FILE:ron-accounting>
            $<TARGET_FILE:audit-mklog> ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/tmp/audit-interop)
  set_tests_properties(audit-interop PROPERTIES LABELS "c;audit" TIMEOUT 300)
endif()
