/* ron-accounting: the host executable. It embeds LuaJIT and runs an operator's Lua script
 * with the ron.accounting package on its path (PRODUCT.md §5, CLI).
 *
 * Commands (one table below; `help` prints it):
 *   run SCRIPT.lua [ARGS...]   run.c
 *   version                    versions of the host, the core, LuaJIT and BLAKE3's kernels
 *   help                       usage on stdout
 * `verify PATH` (chain and digest check of a WAL directory or file ledger) comes with the
 * WAL; it is deliberately absent until then rather than a stub. */
#include "host.h"

#include "ron/accounting.h"

#include <luajit.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#ifndef RA_HOST_VERSION
#define RA_HOST_VERSION RA_VERSION_STRING
#endif
#ifndef RA_BLAKE3_KERNELS
#define RA_BLAKE3_KERNELS "unknown"
#endif

static void usage(FILE *out) {
    fputs("usage: " RA_HOST_NAME " <command> [arguments]\n"
          "\n"
          "commands:\n"
          "  run SCRIPT.lua [ARGS...]  run a Lua script with the ron.accounting package on\n"
          "                            its path; the script sees ARGS in arg[1..n] and in ...\n"
          "  version                   print the versions of the host, libronacct, LuaJIT and\n"
          "                            the BLAKE3 kernels built in\n"
          "  help                      print this help\n"
          "\n"
          "Exit status: 0 on success, 1 when the script raises an error, 2 for a bad command\n"
          "line or a script that cannot be read; a script may end with os.exit(n).\n"
          "package.path: the ron.accounting package, the script's directory, then LUA_PATH\n"
          "(or LuaJIT's default path); LUA_CPATH works as with luajit.\n",
          out);
}

static int cmd_version(void) {
    /* The core's version comes from the linked library, not from the header we were
     * compiled against: they are the same binary here, but the habit costs nothing. */
    printf(RA_HOST_NAME " %s (libronacct %s, %s, BLAKE3 kernels: %s)\n", RA_HOST_VERSION,
           ra_version(), LUAJIT_VERSION, RA_BLAKE3_KERNELS);
    return RA_HOST_EXIT_OK;
}

static int cmd_run(const char *exe, int argc, char **argv) {
    if (argc < 1) {
        fprintf(stderr,
                RA_HOST_NAME ": run needs a script: " RA_HOST_NAME " run SCRIPT.lua [ARGS...]\n");
        return RA_HOST_EXIT_USAGE;
    }
    return ra_host_run(exe, argc, argv);
}

int main(int argc, char **argv) {
    const char *exe = argc > 0 && argv[0] ? argv[0] : RA_HOST_NAME;
    if (argc < 2) {
        usage(stderr);
        return RA_HOST_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "run") == 0) return cmd_run(exe, argc - 2, argv + 2);
    bool is_version = strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0;
    bool is_help = strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0;
    if ((is_version || is_help) && argc > 2) {
        fprintf(stderr, RA_HOST_NAME ": %s takes no arguments (got '%s')\n", cmd, argv[2]);
        return RA_HOST_EXIT_USAGE;
    }
    if (is_version) return cmd_version();
    if (is_help) {
        usage(stdout);
        return RA_HOST_EXIT_OK;
    }
    fprintf(stderr, RA_HOST_NAME ": unknown command '%s' (try '" RA_HOST_NAME " help')\n", cmd);
    return RA_HOST_EXIT_USAGE;
}
