/* `ron-accounting ledger ...`: the ledger's operator verbs (docs/reference/cli.md,
 * docs/LEDGER-RATING.md §8): init, accounts, balance, transfer, reverse, history, verify.
 *
 * The verbs are Lua (lua/ron/ledger/cli.lua, over the engine and the store); this file
 * only runs lua/ron/ledger/cli_run.lua from the host's Lua directory with the verb's
 * arguments, through the same ra_host_run as `run` (one LuaJIT state, the host's loop).
 * Exit codes are the script's: 0 ok, 1 failed or problems found, 2 a bad command line. */
#include "host.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

int ra_host_ledger(const char *exe, int argc, char **argv) {
    char dir[PATH_MAX], script[PATH_MAX + 32];
    ra_host_lua_dir(dir, sizeof dir);
    snprintf(script, sizeof script, "%s/ron/ledger/cli_run.lua", dir);
    char **args = calloc((size_t)argc + 2, sizeof *args);
    if (!args) {
        fprintf(stderr, RA_HOST_NAME " ledger: out of memory\n");
        return RA_HOST_EXIT_FAILED;
    }
    args[0] = script;
    for (int i = 0; i < argc; i++)
        args[i + 1] = argv[i];
    int rc = ra_host_run(exe, argc + 1, args);
    free(args);
    return rc;
}
