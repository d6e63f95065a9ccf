# Documentation checked against the tree (label docs; part of `make test`):
#   docs-requirements           every requirement id cited anywhere is defined as a table row
#                               of some docs/*.md, and every file such a row names exists
#                               (tools/check-requirements.lua; docs/REQUIREMENTS.md)
#   docs-requirements-selftest  the checker fails each kind of broken tree
#   docs-reference              docs/reference/{metrics,config,cli}.md list exactly the metric
#                               families, daemon keys and CLI verbs of the code
#                               (tools/check-reference.lua)
#   docs-reference-selftest     that checker fails each kind of disagreement
find_program(RA_DOCS_LUAJIT luajit)
if(RA_DOCS_LUAJIT)
  # ra_docs_check(NAME CHECKER SELFTEST): NAME runs tools/CHECKER over the tree and
  # NAME-selftest runs tests/docs/SELFTEST, which breaks copies of it.
  function(ra_docs_check name checker selftest)
    add_test(NAME ${name} COMMAND ${RA_DOCS_LUAJIT} tools/${checker} .
             WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
    add_test(NAME ${name}-selftest
             COMMAND sh tests/docs/${selftest} ${RA_DOCS_LUAJIT} tools/${checker}
             WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
    set_tests_properties(${name} ${name}-selftest PROPERTIES LABELS docs TIMEOUT 60)
  endfunction()
  ra_docs_check(docs-requirements check-requirements.lua requirements-selftest.sh)
  ra_docs_check(docs-reference check-reference.lua reference-selftest.sh)
else()
  add_test(NAME docs-requirements COMMAND sh -c
    "echo 'luajit not found: install luajit2 (tools/deps.sh)' >&2; exit 1")
  set_tests_properties(docs-requirements PROPERTIES LABELS docs)
endif()
