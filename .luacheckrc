-- luacheck configuration (ctest lint-luacheck; `luacheck .` from the repository root).
std = "luajit"
max_line_length = 100
codes = true
exclude_files = {
    "build/**",
    "lua/ron/accounting/binding/cdef.lua", -- generated from the C header (tools/gen-cdef.sh)
    "lua/ron/audit/cdef.lua", -- generated from include/ron/audit.h (tools/gen-cdef.sh audit)
    "lua/ron/ledger/cdef.lua", -- generated from include/ron/ledger.h (tools/gen-cdef.sh ledger)
    "lua/ron/accounting/binding/ingest_cdef.lua", -- from host/lua/ingest_dto.h (gen-cdef.sh)
    "lua/ron/wallet/dto_cdef.lua", -- from host/lua/wallet_dto.h (tools/gen-cdef.sh)
}
-- Unused arguments are part of fixed signatures (exporter/policy methods, callbacks).
unused_args = false

-- Specs and test scripts hold tables of cases and long expected messages: no line limit.
-- They also keep values they do not read (several results captured for one assertion)
-- and shadow helpers per case: 311 and 431 off there.
files["spec/**"] = { std = "+busted", max_line_length = false, ignore = { "311", "431" } }
files["tests/**"] = { max_line_length = false }
-- OpenResty's globals where the code runs inside nginx.
files["lua/ron/accounting/nginx.lua"] = { globals = { "ngx" } }
files["tests/nginx/**"] = { globals = { "ngx" } }
files["tests/bench/nginx/**"] = { globals = { "ngx" }, read_globals = { "RA_BENCH" } }
-- wrk's scripting API (global hooks and the wrk table).
files["tests/**/wrk-*.lua"] = { globals = { "wrk", "request", "init", "response", "done",
                                           "setup", "delay", "counts" },
                                read_globals = { "tid" } }
