/* `ron-accounting verify DIR` on a daemon's state directory (`make run`'s var/, issue 27):
 * the whole chain, WAL -> ledger slices -> transfers -> balances -> audit checkpoints, one
 * line per link and a verdict. The walk is Lua (lua/ron/node/verify.lua, over each system's
 * own verifier); this file recognises the directory and runs lua/ron/node/verify_run.lua
 * through ra_host_run, as ledgerops.c does for the ledger's verbs. */
#include "host.h"

#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>

static bool has(const char *dir, const char *name, bool want_dir) {
    char p[PATH_MAX];
    struct stat st;
    if (snprintf(p, sizeof p, "%s/%s", dir, name) >= (int)sizeof p) return false;
    if (lstat(p, &st) != 0) return false;
    return want_dir ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode);
}

/* A state directory: its WAL next to the plane, the SQLite ledger or the audit trail (a
 * bare wal/ + ledger/ pair stays "verify its wal/ or ledger/", verify-refuses.sh). */
bool ra_host_is_state_dir(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode) || !has(path, "wal", true)) return false;
    return has(path, "plane", false) || has(path, "ledger.db", false) || has(path, "audit", true);
}

int ra_host_chain_verify(const char *exe, int argc, char **argv) {
    return ra_host_run_lua(exe, "verify", "ron/node/verify_run.lua", argc, argv);
}
