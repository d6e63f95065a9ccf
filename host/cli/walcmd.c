/* `verify PATH` and `wal inspect PATH [--json]`: read-only tools over a WAL directory (or
 * one segment file), docs/FORMAT.md §4 and docs/ops/wal.md. This file is the two verbs:
 * their arguments, what PATH is, verify's report and inspect's summary; the scan and the
 * chain checks are walscan.c's and walchain.c's (walscan.h lists them).
 *
 * On top of the core's checks (header checksums, lengths, payload BLAKE3 = trailer, strictly
 * increasing frame seq, the strict slice decoder), verify checks the hash chains per
 * (tenant, dimension) stream (walchain.c). Neither command can modify the WAL: the core's
 * scan runs behind an I/O layer that refuses every change (core/wal_reader.h). */
#include "host.h"
#include "walscan.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* File or directory mode for sc->target. Returns 0, or an exit status after printing one
 * line. */
static int prepare(ra_host_wscan_t *sc) {
    struct stat st;
    if (stat(sc->target, &st) != 0) {
        fprintf(stderr, RA_HOST_NAME " %s: %s: %s\n", sc->cmd, sc->target, strerror(errno));
        return RA_HOST_EXIT_USAGE;
    }
    if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
        fprintf(stderr, RA_HOST_NAME " %s: %s: not a directory or a regular file\n", sc->cmd,
                sc->target);
        return RA_HOST_EXIT_USAGE;
    }
    if (strlen(sc->target) >= PATH_MAX - 64) {
        fprintf(stderr, RA_HOST_NAME " %s: %s: path too long\n", sc->cmd, sc->target);
        return RA_HOST_EXIT_USAGE;
    }
    sc->file_mode = S_ISREG(st.st_mode);
    return 0;
}

static bool has_entry(const char *dir, const char *name) {
    char p[PATH_MAX + 8];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return lstat(p, &st) == 0;
}

/* A WAL directory has what a meter leaves in it (FORMAT.md §4.1): its LOCK (made at the
 * first open), its heads checkpoint, or a segment. An empty directory, /proc or a daemon's
 * state directory is not one, and verify must not call it OK (issue 14 item 12). */
static bool looks_like_wal(const char *dir) {
    if (has_entry(dir, "LOCK") || has_entry(dir, "heads")) return true;
    DIR *d = opendir(dir);
    if (!d) return false;
    bool seg = false;
    struct dirent *e;
    while (!seg && (e = readdir(d))) {
        size_t n = strlen(e->d_name);
        seg = n >= 20 && strncmp(e->d_name + 16, ".seg", 4) == 0 &&
              strspn(e->d_name, "0123456789abcdef") == 16;
    }
    closedir(d);
    return seg;
}

/* A running meter holds LOCK (flock): the scan may then see segments come and go. */
static bool wal_in_use(const ra_host_wscan_t *sc) {
    if (sc->file_mode) return false;
    char p[PATH_MAX + 8];
    snprintf(p, sizeof p, "%s/LOCK", sc->target);
    int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return false;
    bool busy = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    close(fd); /* releases the shared lock if we got it */
    return busy;
}

/* ---- verify -------------------------------------------------------------------------- */

/* verify's arguments into sc (and *totals): 0, or the usage exit status after one line. */
static int verify_args(ra_host_wscan_t *sc, bool *totals, int argc, char **argv) {
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "-q") == 0 || strcmp(argv[i], "--quiet") == 0) {
            sc->progress = false;
        } else if (strcmp(argv[i], "--totals") == 0) {
            *totals = true;
        } else {
            int rc =
                ra_host_verify_operand(argv[i], &sc->target, "PATH", "[--quiet] [--totals] PATH");
            if (rc != 0) return rc;
        }
    }
    if (!sc->target) {
        fprintf(stderr, RA_HOST_NAME " verify: needs a PATH: " RA_HOST_NAME
                                     " verify [--quiet] WAL-DIR|SEGMENT-FILE\n");
        return RA_HOST_EXIT_USAGE;
    }
    return 0;
}

/* The summary lines of a finished verify (before the problems and breaks). */
static void verify_summary(const ra_host_wscan_t *sc, bool busy) {
    printf("verify %s (%s)\n", sc->target, sc->file_mode ? "one segment file" : "WAL directory");
    if (busy)
        printf("  note: a running meter holds this WAL's LOCK: segments may be written or "
               "removed during the scan\n");
    printf("  segments        %zu (%" PRIu64 " bytes)\n", sc->nsegs, sc->bytes);
    printf("  frames          %" PRIu64 " valid\n", sc->frames);
    printf("  pending slices  %" PRIu64 " (every frame on disk; ACKed ones go with their "
           "segment)\n",
           sc->frames);
    printf("  digests         %" PRIu64 " verified (each payload's BLAKE3 = its frame trailer "
           "= the slice b3)\n",
           sc->frames);
    if (sc->file_mode)
        printf("  chain links     %" PRIu64 " checked within this file, %" PRIu64
               " breaks (%zu streams)\n",
               sc->links_checked, sc->breaks, sc->nstreams);
    else
        printf("  chain links     %" PRIu64 " checked, %" PRIu64 " breaks (%zu streams, %" PRIu64
               " heads in the checkpoint%s)\n",
               sc->links_checked, sc->breaks, sc->nstreams, sc->heads,
               sc->found.has_heads ? "" : ": no heads file");
    printf("  corrupt frames  %" PRIu64 "\n", sc->found.corrupt_frames);
    printf("  torn bytes      %" PRIu64 "\n", sc->found.torn_bytes);
    const ra__walscan_result_t *f = &sc->found;
    if (!sc->file_mode && (f->tmp || f->broken || f->empty_broken || f->other))
        printf("  other files     %" PRIu64 " .tmp (unfinished writes, never reported sealed; "
               "the next open removes them), %" PRIu64 " .broken, %" PRIu64
               " .empty.broken (bytes kept by an earlier recovery), %" PRIu64 " unknown\n",
               f->tmp, f->broken, f->empty_broken, f->other);
}

/* The problems and chain breaks, then OK or FAILED: the exit status. */
static int verify_verdict(const ra_host_wscan_t *sc) {
    uint64_t torn = sc->found.torn_bytes, corrupt = sc->found.corrupt_frames;
    for (size_t i = 0; i < sc->nproblem_lines; i++)
        printf("%s\n", sc->problem_lines[i]);
    if (sc->problems > sc->nproblem_lines)
        printf("... and %" PRIu64 " more problems\n", sc->problems - sc->nproblem_lines);
    for (size_t i = 0; i < sc->nbreak_lines; i++)
        printf("%s\n", sc->break_lines[i]);
    if (sc->breaks > sc->nbreak_lines)
        printf("... and %" PRIu64 " more chain breaks\n", sc->breaks - sc->nbreak_lines);
    bool bad = sc->problems || sc->breaks || torn || corrupt || sc->oom;
    if (sc->oom) printf("out of memory: the report is incomplete\n");
    if (bad)
        printf("FAILED: %" PRIu64 " problems (%" PRIu64 " corrupt frames, %" PRIu64
               " torn bytes), %" PRIu64 " chain breaks\n",
               sc->problems, corrupt, torn, sc->breaks);
    else
        printf("OK\n");
    fflush(stdout);
    return bad ? RA_HOST_EXIT_FAILED : RA_HOST_EXIT_OK;
}

int ra_host_verify(const char *exe, int argc, char **argv) {
    /* A PostgreSQL ledger (postgres://..., postgresql://..., dbname=...): pgverify.c. */
    for (int i = 0; i < argc; i++)
        if (argv[i][0] != '-' && ra_host_is_pg_target(argv[i]))
            return ra_host_pg_verify(argc, argv);
    ra_host_wscan_t sc;
    memset(&sc, 0, sizeof sc);
    sc.cmd = "verify";
    sc.progress = true;
    bool totals = false;
    int ec = verify_args(&sc, &totals, argc, argv);
    if (ec) return ec;
    /* A daemon's state directory (`make run`'s var/): the whole chain, chainverify.c. */
    if (ra_host_is_state_dir(sc.target)) return ra_host_chain_verify(exe, argc, argv);
    /* A file ledger (its LEDGER marker, or one <dimension>.ledger file): ledgercmd.c. */
    if (ra_host_is_ledger(sc.target)) return ra_host_ledger_verify(sc.target, totals);
    if (totals) {
        fprintf(stderr, RA_HOST_NAME " verify: --totals is for a file ledger; '%s' is not one\n",
                sc.target);
        return RA_HOST_EXIT_USAGE;
    }
    if ((ec = prepare(&sc)) != 0) return ec;
    if (!sc.file_mode && !looks_like_wal(sc.target)) {
        fprintf(stderr,
                RA_HOST_NAME " verify: %s is neither a WAL directory (no LOCK, heads or "
                             "<16 hex>.seg) nor a file ledger (no LEDGER marker)%s\n",
                sc.target,
                has_entry(sc.target, "wal") || has_entry(sc.target, "ledger")
                    ? "; a daemon's state directory? verify its wal/ or ledger/"
                    : "");
        return RA_HOST_EXIT_USAGE;
    }
    bool busy = wal_in_use(&sc);
    char err[512];
    int rc = ra_host_wscan_run(&sc, err, sizeof err);
    if (rc != 0) {
        /* The scan stopped (an unreadable file: the meter would refuse to open too). */
        for (size_t i = 0; i < sc.nproblem_lines; i++)
            printf("%s\n", sc.problem_lines[i]);
        printf("FAILED: %s\n", err[0] ? err : ra_strerror(rc));
        fflush(stdout);
        fprintf(stderr, RA_HOST_NAME " verify: %s: %s\n", sc.target,
                err[0] ? err : ra_strerror(rc));
        ra_host_wscan_free(&sc);
        return rc == RA_ENOTFOUND ? RA_HOST_EXIT_USAGE : RA_HOST_EXIT_FAILED;
    }
    verify_summary(&sc, busy);
    ec = verify_verdict(&sc);
    ra_host_wscan_free(&sc);
    return ec;
}

/* ---- wal inspect ---------------------------------------------------------------------- */

static void wal_usage(FILE *out) {
    fputs("usage: " RA_HOST_NAME " wal inspect [--json] WAL-DIR|SEGMENT-FILE\n"
          "       " RA_HOST_NAME " wal verify [--quiet] WAL-DIR|SEGMENT-FILE  (= verify)\n",
          out);
}

int ra_host_wal(const char *exe, int argc, char **argv) {
    if (argc < 1) {
        fprintf(stderr, RA_HOST_NAME " wal: needs a subcommand\n");
        wal_usage(stderr);
        return RA_HOST_EXIT_USAGE;
    }
    if (strcmp(argv[0], "verify") == 0) return ra_host_verify(exe, argc - 1, argv + 1);
    if (strcmp(argv[0], "help") == 0 || strcmp(argv[0], "--help") == 0) {
        wal_usage(stdout);
        return RA_HOST_EXIT_OK;
    }
    if (strcmp(argv[0], "inspect") != 0) {
        fprintf(stderr, RA_HOST_NAME " wal: unknown subcommand '%s'\n", argv[0]);
        wal_usage(stderr);
        return RA_HOST_EXIT_USAGE;
    }
    ra_host_wscan_t sc;
    memset(&sc, 0, sizeof sc);
    sc.cmd = "wal inspect";
    sc.inspect = true;
    sc.progress = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            sc.json = true;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, RA_HOST_NAME " wal inspect: unknown option '%s'\n", argv[i]);
            wal_usage(stderr);
            return RA_HOST_EXIT_USAGE;
        } else if (sc.target) {
            fprintf(stderr, RA_HOST_NAME " wal inspect: one PATH only (got '%s' and '%s')\n",
                    sc.target, argv[i]);
            return RA_HOST_EXIT_USAGE;
        } else {
            sc.target = argv[i];
        }
    }
    if (!sc.target) {
        fprintf(stderr, RA_HOST_NAME " wal inspect: needs a PATH\n");
        wal_usage(stderr);
        return RA_HOST_EXIT_USAGE;
    }
    int ec = prepare(&sc);
    if (ec) return ec;
    char err[512];
    int rc = ra_host_wscan_run(&sc, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, RA_HOST_NAME " wal inspect: %s: %s\n", sc.target,
                err[0] ? err : ra_strerror(rc));
        ra_host_wscan_free(&sc);
        return rc == RA_ENOTFOUND ? RA_HOST_EXIT_USAGE : RA_HOST_EXIT_FAILED;
    }
    uint64_t torn = sc.found.torn_bytes, corrupt = sc.found.corrupt_frames;
    if (sc.json)
        printf("{\"type\":\"summary\",\"segments\":%zu,\"bytes\":%" PRIu64 ",\"frames\":%" PRIu64
               ",\"heads\":%" PRIu64 ",\"problems\":%" PRIu64 ",\"corrupt_frames\":%" PRIu64
               ",\"torn_bytes\":%" PRIu64 ",\"tmp_files\":%" PRIu64 ",\"broken_files\":%" PRIu64
               "}\n",
               sc.nsegs, sc.bytes, sc.frames, sc.heads, sc.problems, corrupt, torn, sc.found.tmp,
               sc.found.broken + sc.found.empty_broken);
    else
        printf("summary segments=%zu bytes=%" PRIu64 " frames=%" PRIu64 " heads=%" PRIu64
               " problems=%" PRIu64 " corrupt_frames=%" PRIu64 " torn_bytes=%" PRIu64
               " tmp_files=%" PRIu64 " broken_files=%" PRIu64 "\n",
               sc.nsegs, sc.bytes, sc.frames, sc.heads, sc.problems, corrupt, torn, sc.found.tmp,
               sc.found.broken + sc.found.empty_broken);
    fflush(stdout);
    bool bad = sc.problems || torn || corrupt || sc.oom;
    ra_host_wscan_free(&sc);
    return bad ? RA_HOST_EXIT_FAILED : RA_HOST_EXIT_OK;
}
