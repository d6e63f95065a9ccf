-- Finds libronledger and returns its loader ({ candidates, load, namespace }), the
-- repository's one library finder (ron.base.lib: $RON_LEDGER_LIB alone when
-- set, else the source tree's build/ or the install prefix's lib directories, else the
-- dynamic linker; the library must export every function of ron.ledger.cdef at the
-- header's major.minor).
return require("ron.base.lib").finder {
    name = "ron.ledger", lib = "ronledger", env = "RON_LEDGER_LIB",
    cdef = require("ron.ledger.cdef"), version = "rl_version",
}
