-- The Lua package for LuaRocks (issue 27 item 7; docs/ops/package.md "LuaRocks"), for
-- OpenResty and other LuaJIT users who install Lua code that way:
--   luarocks make packaging/ron-accounting-0.1.0-1.rockspec      (from the source tree)
-- The rock is the Lua code only (every module under lua/, found by LuaRocks' builtin
-- autodetection): the C libraries it binds through the FFI (libronacct, and libronledger
-- and libronaudit for the ledger and the audit trail) come from the system — the Debian
-- package (`make package`), `cmake --install`, or a path in RON_ACCOUNTING_LIB,
-- RON_LEDGER_LIB, RON_AUDIT_LIB — through the one library finder (ron.base.lib). It needs
-- LuaJIT (the FFI); the daemon's modules also need luv (Debian's lua-luv), which the
-- OpenResty path (ron.accounting, ron.accounting.nginx) does not. The version is the
-- project's (CMakeLists.txt; ctest package-rock checks that they agree).
rockspec_format = "3.0"
package = "ron-accounting"
version = "0.1.0-1"
source = {
    url = "git+https://example.invalid/ron-accounting.git",
    tag = "v0.1.0",
}
description = {
    summary = "Usage metering with a crash-safe WAL, a ledger, a wallet and an audit trail",
    detailed = [[
The Lua side of ron-accounting: the meter's binding (ron.accounting) and its nginx/OpenResty
path (ron.accounting.nginx), the ledger (ron.ledger), the wallet (ron.wallet), the audit
trail (ron.audit) and the daemon (ron.node). The C libraries come from the system.]],
    license = "none chosen yet (packaging/copyright)",
}
dependencies = {
    "lua ~> 5.1", -- LuaJIT: the FFI
}
build = {
    type = "builtin",
    -- no `modules`: every lua/**/*.lua, named by its path (lua/ron/ledger/init.lua is
    -- ron.ledger); no copied directories (the docs and tests stay in the source tree)
    copy_directories = {},
}
