/* ron-accounting: the host executable. It embeds LuaJIT and runs an operator's Lua script
 * with the ron.accounting package on its path (PRODUCT.md §5, CLI).
 *
 * The commands are the rows of one table (`commands` below): a name, the function that
 * runs it (in the verb's own file of host/cli/, see host.h), and its help text, which
 * `help` prints. A new verb is a file plus a row. */
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

typedef struct command {
    const char *name;
    /* exe: the path the host was started as; argc/argv: the arguments after the verb. */
    int (*run)(const char *exe, int argc, char **argv);
    const char *help; /* lines of "  verb ARGS   what it does", each ending in \n */
} command_t;

static int cmd_run(const char *exe, int argc, char **argv);
static int cmd_version(const char *exe, int argc, char **argv);
static int cmd_help(const char *exe, int argc, char **argv);

static const command_t commands[] = {
    {"run", cmd_run,
     "  run SCRIPT.lua [ARGS...]  run a Lua script with the ron.accounting package on\n"
     "                            its path; the script sees ARGS in arg[1..n] and in ...\n"},
    {"verify", ra_host_verify,
     "  verify [--quiet] PATH     verify a write-ahead log without modifying it: every\n"
     "                            frame's checksums and BLAKE3 digest, the frame order,\n"
     "                            and the hash chain of every (tenant, dimension) stream\n"
     "                            against the heads checkpoint. PATH is a WAL directory\n"
     "                            or one segment file (<16 hex>.seg; chains are then\n"
     "                            checked within the file). Prints a summary, then every\n"
     "                            problem with its file and offset; \"OK\" and exit 0, or\n"
     "                            \"FAILED: ...\" and exit 1. Progress goes to stderr\n"
     "                            every 1000 segments or every second (--quiet: none)\n"
     "                            A file ledger (a directory with a LEDGER marker, or\n"
     "                            one <dimension>.ledger file, docs/EXPORT.md): every\n"
     "                            record's length, BLAKE3 and decoding, and each stream's\n"
     "                            chain (seq 1, 2, ... and prev_b3); problems name the\n"
     "                            file, the record and its offset; --totals adds one\n"
     "                            line per stream: the sum of its rows, its slices and\n"
     "                            the windows they cover\n"
     "                            A PostgreSQL ledger (postgres://..., postgresql://...\n"
     "                            or a conninfo with dbname=; --schema NAME, default\n"
     "                            ron_accounting): every slice's BLAKE3 and decoding,\n"
     "                            each stream's chain and head row (docs/EXPORT.md)\n"},
#ifdef RA_WITH_AUDIT
    {"audit", ra_host_audit,
     "  audit verify [--vkey FILE] [--checkpoint NOTE]... [--witness-vkey FILE] DIR\n"
     "                            verify an audit log directory (docs/AUDIT.md): every\n"
     "                            frame, canonical record, self_hash, chain link, dedupe\n"
     "                            key, checkpoint Merkle root and, with the verifier key,\n"
     "                            signature and origin; prints every problem with its\n"
     "                            file and offset and exits 1, or \"OK\" and exit 0;\n"
     "                            with --vkey a log no signed checkpoint covers fails;\n"
     "                            --checkpoint: a signed note kept elsewhere (a witness's)\n"
     "                            must match the log's first records (a restored backup\n"
     "                            that forked is caught); --witness-vkey: a checkpoint\n"
     "                            must carry that witness's cosignature\n"
     "  audit proof inclusion|consistency|checkpoint ...\n"
     "                            RFC 6962 proofs from a log directory, or from a daemon's\n"
     "                            proof routes (--url) checked against a signed checkpoint\n"
     "  audit witness cosign --key SKEY --state DIR --log-vkey PUB ...\n"
     "                            cosign a log's checkpoint (c2sp.org/tlog-cosignature)\n"
     "                            after its consistency proof; refuses a rollback or fork\n"
     "  audit keygen [--witness] NAME SKEY VKEY\n"
     "                            a new Ed25519 checkpoint key pair (signer file 0600);\n"
     "                            --witness: a cosignature/v1 key\n"},
#endif
#ifdef RA_WITH_LEDGER
    {"ledger", ra_host_ledger,
     "  ledger --db PATH [--book NAME] VERB ...\n"
     "                            the ledger's operator verbs over a SQLite ledger store\n"
     "                            (docs/LEDGER-RATING.md): init (the book and its system\n"
     "                            accounts), accounts [--tenant UUID], balance ACCOUNT\n"
     "                            [CODE/SCALE], transfer --from A --to B --asset CODE/SCALE\n"
     "                            --amount N --intent KEY, reverse TRANSFER_ID --intent KEY,\n"
     "                            history ACCOUNT [--limit N], verify [--file-ledger DIR]\n"
     "                            [--wal DIR]:\n"
     "                            every transfer id from its canonical bytes, every\n"
     "                            balance from postings and against the projection,\n"
     "                            conservation per asset, each usage slice consumed by\n"
     "                            exactly one transfer; problems named by position, exit 1;\n"
     "                            recover [--node NAME]: finish interrupted commits\n"},
#endif
    {"wal", ra_host_wal,
     "  wal inspect [--json] PATH\n"
     "                            list a WAL, one line each: its heads checkpoint, its\n"
     "                            segments (id, file, bytes, frames, creation time) and\n"
     "                            their frames (frame seq, tenant, dimension, window,\n"
     "                            slice seq, rows, b3, state), then a summary line.\n"
     "                            --json: one JSON object per line (JSON Lines) with a\n"
     "                            \"type\" of head, segment, frame, problem or summary.\n"
     "                            State: every frame on disk is \"pending\". ACKs live in\n"
     "                            the meter's memory; a segment is removed once all its\n"
     "                            slices are ACKed, so an ACKed frame whose segment is\n"
     "                            still here (ACKed but not compacted) is listed as\n"
     "                            pending: after a restart it is resent and the\n"
     "                            downstream answers dup. Exit 0, or 1 when the listing\n"
     "                            shows problems\n"},
    {"streams", ra_host_streams,
     "  streams [--url URL] stuck\n"
     "                            list the streams of the running daemon that cannot\n"
     "                            advance (gap, conflict): its admin route, loopback\n"
     "                            only; URL defaults to http://127.0.0.1:9464\n"
     "  streams [--url URL] accept-loss TENANT DIMENSION [--reason TEXT]\n"
     "                            give up, for good, the seqs a stream stuck on a gap\n"
     "                            waits for (a lost WAL segment): the downstream records\n"
     "                            them, the daemon logs the range, verify lists it; the\n"
     "                            stream goes on (docs/ops/failure-modes.md). The JSON\n"
     "                            answer on stdout; exit 0 on 2xx, else 1\n"},
    {"version", cmd_version,
     "  version                   print the versions of the host, libronacct, LuaJIT and\n"
     "                            the BLAKE3 kernels built in\n"},
    {"help", cmd_help, "  help                      print this help\n"},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *out) {
    fputs("usage: " RA_HOST_NAME " <command> [arguments]\n\ncommands:\n", out);
    for (size_t i = 0; i < N_COMMANDS; i++)
        fputs(commands[i].help, out);
    fputs("\n"
          "Exit status: 0 on success, 1 when the script raises an error or verify/inspect find\n"
          "a problem, 2 for a bad command line, a script that cannot be read or a PATH that\n"
          "does not exist; a script may end with os.exit(n).\n"
          "package.path: the ron.accounting package, the script's directory, then LUA_PATH\n"
          "(or LuaJIT's default path); LUA_CPATH works as with luajit.\n",
          out);
}

static int cmd_version(const char *exe, int argc, char **argv) {
    (void)exe, (void)argc, (void)argv;
    /* The core's version comes from the linked library, not from the header we were
     * compiled against: they are the same binary here, but the habit costs nothing. */
    printf(RA_HOST_NAME " %s (libronacct %s, %s, BLAKE3 kernels: %s)\n", RA_HOST_VERSION,
           ra_version(), LUAJIT_VERSION, RA_BLAKE3_KERNELS);
    return RA_HOST_EXIT_OK;
}

static int cmd_help(const char *exe, int argc, char **argv) {
    (void)exe, (void)argc, (void)argv;
    usage(stdout);
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

/* Aliases of the table's names, the spellings people type. */
static const char *canonical(const char *cmd) {
    if (strcmp(cmd, "--version") == 0) return "version";
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) return "help";
    return cmd;
}

int main(int argc, char **argv) {
    const char *exe = argc > 0 && argv[0] ? argv[0] : RA_HOST_NAME;
    if (argc < 2) {
        usage(stderr);
        return RA_HOST_EXIT_USAGE;
    }
    const char *cmd = canonical(argv[1]);
    for (size_t i = 0; i < N_COMMANDS; i++) {
        const command_t *c = &commands[i];
        if (strcmp(cmd, c->name) != 0) continue;
        bool no_args = c->run == cmd_version || c->run == cmd_help;
        if (no_args && argc > 2) {
            fprintf(stderr, RA_HOST_NAME ": %s takes no arguments (got '%s')\n", argv[1], argv[2]);
            return RA_HOST_EXIT_USAGE;
        }
        return c->run(exe, argc - 2, argv + 2);
    }
    fprintf(stderr, RA_HOST_NAME ": unknown command '%s' (try '" RA_HOST_NAME " help')\n", argv[1]);
    return RA_HOST_EXIT_USAGE;
}
