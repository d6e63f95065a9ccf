/* The ron-accounting executable: declarations shared by the files of core/host/.
 *
 *   main.c  command line: dispatch, usage, `version`
 *   run.c   `run SCRIPT.lua [ARGS...]`: a LuaJIT state with ron.accounting on its path
 *   walcmd.c `verify PATH` and `wal inspect PATH [--json]`: read-only WAL tools on top of
 *           the core's recovery scan (core/wal.h)
 *   ledgercmd.c `verify PATH` of a file ledger (docs/EXPORT.md): records, digests, chains
 *   verdict.c the problem list and closing line shared by the ledger verifies
 *   httpd.c  require "ron.accounting.httpd": an HTTP/1.1 server (libh2o) on the run's loop
 *   pq.c     require "ron.accounting.pq": PostgreSQL connections (libpq async) on the loop
 *   pgverify.c `verify postgres://...`: digests and chains of a PostgreSQL ledger
 *   curl.c   require "ron.accounting.curl": HTTP requests (libcurl multi-socket) on the loop
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

/* verdict.c: the problem list of a ledger verify (ledgercmd.c, pgverify.c). */
#include <stdint.h>
#define RA_HOST_MAX_PRINTED 1000
typedef struct ra_host_verdict {
    uint64_t problems, breaks, printed;
} ra_host_verdict_t;
/* Counts a problem (is_break: a chain break) and prints it while fewer than
 * RA_HOST_MAX_PRINTED were printed. */
void ra_host_report(ra_host_verdict_t *vd, bool is_break, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* "... and N more problems" when some were not printed. */
void ra_host_report_overflow(const ra_host_verdict_t *vd);
/* "OK" or "FAILED: ..." on stdout; the exit code. */
int ra_host_verdict_end(const ra_host_verdict_t *vd);
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

/* pq.c: PostgreSQL connections (libpq's async API) on the host's loop, docs/EXPORT.md
 * "PostgreSQL ledger". ra_host_pq_preload puts the module in
 * package.preload["ron.accounting.pq"] (after luv is set up); ra_host_pq_close_all closes
 * every connection still open (no callbacks) and runs the loop until their handles are
 * freed; the host calls it before it closes the loop, like ra_host_httpd_close_all. */
void ra_host_pq_preload(lua_State *L);
void ra_host_pq_close_all(uv_loop_t *loop);
/* pgverify.c: `verify postgres://...` (or a conninfo with dbname=): true when target names
 * a PostgreSQL ledger; ra_host_pg_verify takes verify's argv and returns the exit code. */
bool ra_host_is_pg_target(const char *target);
int ra_host_pg_verify(int argc, char **argv);

/* curl.c: an HTTP client (libcurl's multi-socket API) on the host's loop, docs/EXPORT.md
 * "HTTP exporter and ledger receiver". ra_host_curl_preload puts the module in
 * package.preload["ron.accounting.curl"] (after luv is set up); ra_host_curl_close_all
 * drops the transfers still in flight (no callbacks), closes the cached connections and
 * runs the loop until their handles are freed; the host calls it before it closes the loop. */
void ra_host_curl_preload(lua_State *L);
void ra_host_curl_close_all(uv_loop_t *loop);

#endif /* RA_HOST_H */
