/* The ron-accounting executable's command line (host/cli/): declarations shared by its
 * files. One file per verb; main.c dispatches through its table of commands.
 *
 *   main.c      the command table: dispatch, usage, `version`
 *   run.c       `run SCRIPT.lua [ARGS...]`: a LuaJIT state with ron.accounting on its path,
 *               one libuv loop shared with luv and the Lua C modules of host/lua/
 *   walcmd.c    `verify PATH` and `wal inspect PATH [--json]`: read-only WAL tools on top of
 *               the core's recovery scan (core/wal_reader.h); walscan.c, walchain.c and
 *               walprint.c are its scan, chain checks and listing (walscan.h)
 *   ledgercmd.c `verify PATH` of a file ledger (docs/EXPORT.md): records, digests, chains
 *   pgverify.c  `verify postgres://...`: digests and chains of a PostgreSQL ledger
 *   chain.c     the one chain-link check every verify uses (seq = head + 1, prev_b3 = the
 *               head's b3, seq 1 from zero)
 *   auditcmd.c  `audit verify DIR` and `audit keygen` (libronaudit, docs/AUDIT.md)
 *   auditproof.c `audit proof inclusion|consistency` (RFC 6962 proofs from a log)
 *   verdict.c   the problem list and closing line shared by the verifies
 *
 * The Lua C modules the run's scripts require (httpd, pq, curl) live in host/lua/
 * (host/lua/modules.h). The host links libronacct statically and exports its symbols
 * (-rdynamic), so the Lua binding reaches the core through ffi.C without loading a
 * shared library. */
#ifndef RA_HOST_H
#define RA_HOST_H

/* Exit codes, the conventions of the luajit CLI and of sysexits-minded tools:
 * 0 success, 1 the script failed, 2 the command line or the script file is wrong. */
enum { RA_HOST_EXIT_OK = 0, RA_HOST_EXIT_FAILED = 1, RA_HOST_EXIT_USAGE = 2 };

#include "host_name.h" /* RA_HOST_NAME */

/* Runs argv[0] (a Lua script) with argv[1..argc-1] as its arguments; exe is the path the
 * host was started as (arg[-1] for the script). Returns the process exit code. A script
 * that calls os.exit() ends the process from inside. */
int ra_host_run(const char *exe, int argc, char **argv);

/* A verb written in Lua: runs <the host's Lua directory>/rel (e.g. "ron/node/verify_run.lua")
 * with argv[0..argc-1] as its arguments, through ra_host_run; verb names it in errors. */
int ra_host_run_lua(const char *exe, const char *verb, const char *rel, int argc, char **argv);

/* The directory of the ron Lua packages this host uses: the installed one next to the
 * executable, else the source tree's (run.c). out holds cap bytes. */
#include <stddef.h>
void ra_host_lua_dir(char *out, size_t cap);

/* ledgerops.c (RA_BUILD_LEDGER): `ledger --db PATH VERB ...`, the ledger's operator verbs,
 * in Lua (lua/ron/ledger/cli.lua) run by ra_host_run. */
int ra_host_ledger(const char *exe, int argc, char **argv);

/* Every verb has this signature, so main.c's command table can name it: exe is the path
 * the host was started as, argv the arguments after the verb; returns the exit code.
 * walcmd.c: `verify [--quiet] PATH` and `wal <subcommand> ...`. */
int ra_host_verify(const char *exe, int argc, char **argv);
int ra_host_wal(const char *exe, int argc, char **argv);
/* auditcmd.c (RA_BUILD_AUDIT): `audit verify [--vkey FILE] DIR`, `audit keygen ...`. */
int ra_host_audit(const char *exe, int argc, char **argv);
/* auditproof.c: `audit proof inclusion|consistency ...` (RFC 6962 proofs from a log, or
 * from a daemon's proof routes with --url). */
int ra_host_audit_proof(int argc, char **argv);
/* auditwitness.c: `audit witness keygen|cosign ...` (c2sp.org/tlog-cosignature). */
int ra_host_audit_witness(int argc, char **argv);
/* auditnet.c: the audit verbs' side of the daemon's proof routes: reads a token file,
 * fetches a route's text (a note, a proof) with the token; 0, or an exit code. */
int ra_host_audit_fetch(const char *url, const char *route, const char *token_file, char **text,
                        size_t *len);

/* True when path is a file-ledger directory (it holds the LEDGER marker) or a
 * <dimension>.ledger stream file; ra_host_ledger_verify then checks it, read-only, and
 * returns the exit code (docs/EXPORT.md, "The file ledger"). */
#include <stdbool.h>
bool ra_host_is_ledger(const char *path);

/* chainverify.c: `verify DIR` of a daemon's state directory (issue 27): true when path is
 * one (wal/ next to plane, ledger.db or audit/); ra_host_chain_verify walks the chain. */
bool ra_host_is_state_dir(const char *path);
int ra_host_chain_verify(const char *exe, int argc, char **argv);

/* verdict.c: the problem list of a ledger verify (ledgercmd.c, pgverify.c). */
#include "ron/accounting.h" /* ra_slice_t */

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
/* verify's operand arg: an unknown option or a second target (what: "target", "PATH") is a
 * usage error, said in one line with usage (verify's synopsis) and returned as
 * RA_HOST_EXIT_USAGE; else it becomes *target and 0 is returned. */
int ra_host_verify_operand(const char *arg, const char **target, const char *what,
                           const char *usage);
/* totals: print, per stream, the sum of its rows over all its slices (`verify --totals`).
 * ra_host_add_rows adds the slice's row increments to *sum (*overflow set once it wraps). */
void ra_host_add_rows(const ra_slice_t *s, uint64_t *sum, bool *overflow);
/* streams.c: `streams stuck|accept-loss ...` through the daemon's admin routes. */
int ra_host_streams(const char *exe, int argc, char **argv);
/* httpc.c: one request to a running daemon (libcurl's easy API): a GET, or a POST of the
 * JSON body; bearer: an Authorization token or NULL. 0 when an answer came (*status, the
 * body in *answer: malloc'd, NUL-terminated, at most 1 MiB), -1 with the reason in err. */
int ra_host_http(const char *url, const char *body, const char *bearer, char **answer, size_t *len,
                 long *status, char *err, size_t errlen);
int ra_host_ledger_verify(const char *path, bool totals);

/* pgverify.c: `verify postgres://...` (or a conninfo with dbname=): true when target names
 * a PostgreSQL ledger; ra_host_pg_verify takes verify's argv and returns the exit code. */
bool ra_host_is_pg_target(const char *target);
int ra_host_pg_verify(int argc, char **argv);

#endif /* RA_HOST_H */
