/* The ron-accounting executable: declarations shared by the files of core/host/.
 *
 *   main.c  command line: dispatch, usage, `version`
 *   run.c   `run SCRIPT.lua [ARGS...]`: a LuaJIT state with ron.accounting on its path
 *   walcmd.c `verify PATH` and `wal inspect PATH [--json]`: read-only WAL tools on top of
 *           the core's recovery scan (core/wal.h)
 *   ledgercmd.c `verify PATH` of a file ledger (docs/EXPORT.md): records, digests, chains
 *   httpd.c  require "ron.accounting.httpd": an HTTP/1.1 server (libh2o) on the run's loop
 *
 * The host links libronacct statically and exports its symbols (-rdynamic), so the Lua
 * binding reaches the core through ffi.C without loading a shared library. */
#ifndef RA_HOST_H
#define RA_HOST_H

/* Exit codes, the conventions of the luajit CLI and of sysexits-minded tools:
 * 0 success, 1 the script failed, 2 the command line or the script file is wrong. */
enum { RA_HOST_EXIT_OK = 0, RA_HOST_EXIT_FAILED = 1, RA_HOST_EXIT_USAGE = 2 };

#define RA_HOST_NAME "ron-accounting"

/* Runs argv[0] (a Lua script) with argv[1..argc-1] as its arguments; exe is the path the
 * host was started as (arg[-1] for the script). Returns the process exit code. A script
 * that calls os.exit() ends the process from inside. */
int ra_host_run(const char *exe, int argc, char **argv);

/* `verify [--quiet] PATH` and `wal <subcommand> ...` (argv without the command words).
 * Return the process exit code. */
int ra_host_verify(int argc, char **argv);
int ra_host_wal(int argc, char **argv);

/* True when path is a file-ledger directory (it holds the LEDGER marker) or a
 * <dimension>.ledger stream file; ra_host_ledger_verify then checks it, read-only, and
 * returns the exit code (docs/EXPORT.md, "The file ledger"). */
#include <stdbool.h>
bool ra_host_is_ledger(const char *path);
/* totals: print, per stream, the sum of its rows over all its slices (`verify --totals`). */
int ra_host_ledger_verify(const char *path, bool totals);

/* httpd.c: the HTTP server module on the host's loop (docs/OPERATIONS.md, "HTTP surface").
 * ra_host_httpd_preload puts it in package.preload["ron.accounting.httpd"] (after luv is
 * set up: it uses luv's loop and main state). ra_host_httpd_close_all closes every server
 * still open and runs the loop until they are freed; the host calls it before it closes
 * the loop (luv's uv.walk asserts on handles that are not luv's). */
typedef struct lua_State lua_State;
typedef struct uv_loop_s uv_loop_t;
void ra_host_httpd_preload(lua_State *L);
void ra_host_httpd_close_all(uv_loop_t *loop);

#endif /* RA_HOST_H */
