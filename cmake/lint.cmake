# Lint gates, run by `make test` (label lint) and on their own by `make lint`:
#   lint-luacheck      luacheck over lua/ spec/ examples/ tests/ (.luacheckrc)
#   lint-shellcheck    every tracked shell script and .ci/run (.shellcheckrc)
#   lint-clang-format  every tracked C file agrees with .clang-format
#   lint-cppcheck      cppcheck (warning, portability, performance) over core/ host/ nginx/ audit/
#                      ledger/
#   lint-requires      the Lua packages depend one way, requires at the top of their files
#                      (tools/check-requires.lua: the layering of docs/ARCHITECTURE.md), and its
#                      self-test lint-requires-selftest
#   lint-function-length  no function over 150 lines unless tools/function-length-allow.txt
#                      lists it (a list that only shrinks); those over 70 are printed
#                      (tools/check-function-length.lua, C and Lua)
#   lint-layers        the C walls: no upward include or call (tools/check-layers.lua over
#                      the sources and the static core library)
#   lint-selftest      both checks above fail each kind of broken tree (tests/lint/)
# Each tool comes from tools/deps.sh; a missing one fails its test with the package name
# instead of skipping it silently.
function(ra_lint name package)
  add_test(NAME ${name} COMMAND sh -c "${ARGN}" WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(${name} PROPERTIES LABELS lint TIMEOUT 300)
endfunction()

function(ra_need tool package out)
  find_program(_ra_${tool} ${tool})
  if(_ra_${tool})
    set(${out} ${_ra_${tool}} PARENT_SCOPE)
  else()
    set(${out} "echo '${tool} not found: install the Debian package ${package} (tools/deps.sh)' >&2; false #" PARENT_SCOPE)
  endif()
endfunction()

ra_need(luacheck lua-check RA_LUACHECK)
ra_need(shellcheck shellcheck RA_SHELLCHECK)
ra_need(clang-format clang-format RA_CLANG_FORMAT)
ra_need(cppcheck cppcheck RA_CPPCHECK)
ra_need(luajit luajit2 RA_LINT_LUAJIT)

ra_lint(lint-luacheck lua-check "${RA_LUACHECK} --no-color --formatter plain -q .")
ra_lint(lint-shellcheck shellcheck
  "git ls-files -z '*.sh' | xargs -0 ${RA_SHELLCHECK} -f gcc && ${RA_SHELLCHECK} -f gcc .ci/run")
ra_lint(lint-clang-format clang-format
  "git ls-files -z '*.c' '*.h' ':!:tests/fuzz/corpus' | xargs -0 ${RA_CLANG_FORMAT} --style=file --dry-run --Werror")
ra_lint(lint-cppcheck cppcheck
  "${RA_CPPCHECK} --quiet --error-exitcode=1 --std=c11 --enable=warning,portability,performance --inline-suppr --suppress=missingIncludeSystem -I include -I core -I host -I audit -I ledger -DRA_SOURCE_LUA_DIR='\"lua\"' -DRA_INSTALL_LUA_REL='\"share/lua/5.1\"' -DRA_INSTALL_BIN_REL='\"bin\"' core host nginx audit ledger")

ra_lint(lint-requires luajit2 "${RA_LINT_LUAJIT} tools/check-requires.lua .")
ra_lint(lint-requires-selftest luajit2
  "sh tests/lint/requires-selftest.sh ${RA_LINT_LUAJIT} tools/check-requires.lua")
ra_lint(lint-function-length luajit2 "${RA_LINT_LUAJIT} tools/check-function-length.lua .")
ra_lint(lint-layers luajit2
  "${RA_LINT_LUAJIT} tools/check-layers.lua . $<TARGET_FILE:ronacct_static>")
ra_lint(lint-selftest luajit2 "sh tests/lint/lint-selftest.sh ${RA_LINT_LUAJIT}")

add_custom_target(lint
  COMMAND ${CMAKE_CTEST_COMMAND} -L lint --output-on-failure
  WORKING_DIRECTORY ${CMAKE_BINARY_DIR} USES_TERMINAL VERBATIM)
