-- Finds libronaudit and returns its FFI namespace (with the cdef loaded), through the
-- repository's one library finder (ron.base.lib: $RON_AUDIT_LIB alone when
-- set, else the source tree's build/ or the install prefix's lib directories, else the
-- dynamic linker; the library must export every function of ron.audit.cdef at the
-- header's major.minor).
return (require("ron.base.lib").finder {
    name = "ron.audit", lib = "ronaudit", env = "RON_AUDIT_LIB",
    cdef = require("ron.audit.cdef"), version = "rau_version",
}).namespace()
