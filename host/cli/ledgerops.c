/* `ron-accounting ledger ...`: the ledger's operator verbs (docs/reference/cli.md,
 * docs/LEDGER-RATING.md §8): init, accounts, balance, transfer, reverse, history, verify.
 *
 * The verbs are Lua (lua/ron/ledger/cli.lua, over the engine and the store); this file
 * only runs lua/ron/ledger/cli_run.lua from the host's Lua directory with the verb's
 * arguments, through the same ra_host_run as `run` (one LuaJIT state, the host's loop).
 * Exit codes are the script's: 0 ok, 1 failed or problems found, 2 a bad command line. */
#include "host.h"

int ra_host_ledger(const char *exe, int argc, char **argv) {
    return ra_host_run_lua(exe, "ledger", "ron/ledger/cli_run.lua", argc, argv);
}
