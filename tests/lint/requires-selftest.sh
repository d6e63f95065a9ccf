#!/bin/sh
# The self-test of tools/check-requires.lua (ctest lint-requires-selftest): the checker passes
# a copy of lua/, and fails each broken variant with the finding it names.
#
#   sh tests/lint/requires-selftest.sh LUAJIT CHECKER      (from the repository root)
set -eu
# shellcheck source=tests/selftest-lib.sh
. "$(dirname "$0")/../selftest-lib.sh"

mk() { tree lua; }


mk
expect 0 "" "the tree as committed passes"

mk
printf 'local node = require "ron.node"\n' >> "$tmp/t/lua/ron/accounting/runtime/rt.lua"
expect 1 "ron.accounting.runtime.rt (package accounting) requires ron.node (package node)" \
    "the meter requiring the node fails"

mk
printf 'local w = require("ron.wallet.service")\n' >> "$tmp/t/lua/ron/ledger/rate.lua"
expect 1 "ron.ledger.rate (package ledger) requires ron.wallet.service (package wallet)" \
    "the ledger requiring the wallet fails"

mk
printf 'local ok, rt = pcall(require, "ron.accounting.runtime")\n' >> "$tmp/t/lua/ron/ledger/rate.lua"
expect 1 "(the ledger uses the meter's export contract only)" \
    "the ledger using the meter past its export contract fails"

mk
printf 'local function f()\n    if true then\n        return require "ron.base.lru"\n    end\nend\n' \
    >> "$tmp/t/lua/ron/accounting/runtime/rt.lua"
expect 1 "require \"ron.base.lru\" inside a function" "a require inside a function fails"

mk
printf 'for i = 1, 2 do\n    local x = require "ron.base.lru"\nend\nlocal s = [[ end end ]] -- end\n' \
    >> "$tmp/t/lua/ron/accounting/runtime/rt.lua"
expect 0 "" "a require in a top-level block, after strings and comments saying end, passes"

finish
