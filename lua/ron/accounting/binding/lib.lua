-- ron.accounting.binding.lib: libronacct's FFI namespace (with the cdef loaded), found by the
-- repository's one library finder (ron.base.lib: ffi.C inside the host, $RON_ACCOUNTING_LIB
-- alone when set, else the source tree's build/ or the install prefix's lib directories,
-- else the dynamic linker).
local lib = require("ron.base.lib")

local _M = {}

local acct = lib.finder { name = "ron.accounting", lib = "ronacct", env = "RON_ACCOUNTING_LIB",
                          cdef = require("ron.accounting.binding.cdef"), version = "ra_version",
                          host = true }
_M.candidates, _M.load, _M.namespace = acct.candidates, acct.load, acct.namespace

return _M
