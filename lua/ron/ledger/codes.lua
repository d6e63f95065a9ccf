-- ron.ledger.codes: the codes of the ledger's enums (include/ron/ledger.h: rl_policy_t,
-- rl_account_status_t, rl_posting_status_t), name -> code and code -> name. The one copy
-- for the FFI wrappers (ron.ledger checks it against the library at load), the SQL stores'
-- columns and the memory store's scan; plain Lua, so the SQLite pool's VMs load it without
-- the library.
return {
    POLICY = { no_overdraft = 0, capped = 1, uncapped = 2 },
    POLICY_NAME = { [0] = "no_overdraft", "capped", "uncapped" },
    ASTATUS = { open = 0, frozen = 1, closed = 2 },
    ASTATUS_NAME = { [0] = "open", "frozen", "closed" },
    PSTATUS = { active = 0, pending_inactive = 1, inactive = 2 },
    PSTATUS_NAME = { [0] = "active", "pending_inactive", "inactive" },
}
