# bench-smoke (ctest label bench-smoke): every benchmark runs with --quick, a tiny workload,
# and must exit 0 and print at least one `BENCH {json}` line. It asserts nothing about time.
# Invoked by cmake/bench.cmake as: cmake -DRECORD=... -DSEAL=... -DWAL=... -DLIB=... [-DLUAJIT=...]
#   [-DHOST=ron-accounting (runs bench-export.lua and bench-fairness.lua; with -DLEDGER=ON
#   bench-ledger-verify.lua too)]
#   -DLUA_SCRIPT=... -DLUA_DIR=... -DBENCH_DIR=... -DOUT=... -P smoke.cmake
file(MAKE_DIRECTORY ${OUT})
set(results ${OUT}/results.jsonl)
file(REMOVE ${results})

function(run_one label)
  execute_process(COMMAND ${ARGN}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${label}: exit ${rc}\n${out}\n${err}")
  endif()
  string(REGEX MATCHALL "(^|\n)BENCH {\"bench\":[^\n]*}" lines "${out}")
  list(LENGTH lines n)
  if(n EQUAL 0)
    message(FATAL_ERROR "${label}: no BENCH line\n${out}\n${err}")
  endif()
  message(STATUS "${label}: ok (${n} BENCH lines)")
endfunction()

run_one(bench-record ${RECORD} --quick --threads 1,2 --dist uniform,zipf --out ${results})
run_one(bench-seal ${SEAL} --quick --out ${results})
run_one(bench-wal ${WAL} --quick --dir ${OUT} --out ${results})
if(AUDIT)
  run_one(bench-audit ${AUDIT} --quick --dir ${OUT} --out ${results})
endif()
if(HOST)
  run_one(bench-export.lua ${HOST} run ${BENCH_DIR}/bench-export.lua --quick --dir ${OUT}
          --bin ${HOST} --out ${results})
  run_one(bench-fairness.lua ${HOST} run ${BENCH_DIR}/bench-fairness.lua --quick --dir ${OUT}
          --out ${results})
  if(LEDGER)
    run_one(bench-ledger-verify.lua ${HOST} run ${BENCH_DIR}/bench-ledger-verify.lua --quick
            --out ${results})
  endif()
endif()
if(LUAJIT)
  set(ENV{LUA_PATH} "${LUA_DIR}/?.lua;${LUA_DIR}/?/init.lua;${BENCH_DIR}/?.lua;;")
  run_one(bench-record.lua ${LUAJIT} ${LUA_SCRIPT} --quick --lib ${LIB}
          --c-results ${results} --c-bench ${RECORD})
endif()
