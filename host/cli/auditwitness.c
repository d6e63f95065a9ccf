/* `ron-accounting audit witness ...`: a witness of audit logs (c2sp.org/tlog-cosignature,
 * cosignature/v1; docs/AUDIT.md "A witness", AUD-I-40). It keeps, per origin, the newest
 * checkpoint it cosigned, and cosigns a new one only when the log's key signed it and a
 * consistency proof shows the log's new tree extends the one it cosigned before:
 *
 *   audit witness cosign --key SKEY --state DIR --log-vkey PUB
 *                        (NOTE [--proof FILE] | --log LOGDIR [NOTE]
 *                         | --url URL [--token-file F] [--stream S])
 *
 * NOTE: a checkpoint file (with --proof: the consistency proof from the cosigned size, as
 * `audit proof consistency` prints it); --log: the log directory's newest checkpoint, the
 * proof computed from its files; --url: a daemon's newest checkpoint and its proof from the
 * proof routes. The proof is checked against the two signed roots wherever it came from. A
 * checkpoint of fewer records than the one cosigned before (a log rolled back to an older
 * copy), another root for as many, or a tree that does not extend it (a fork) is refused:
 * "REFUSED: ...", exit 1, the state unchanged. Otherwise the cosigned note (the log's note
 * and one line of the witness) is written to DIR/<origin>.note (origin with '/' as '%2F';
 * temporary file, fsync, rename) and to stdout, exit 0. The witness key comes from
 * `audit keygen --witness NAME SKEY VKEY`; `audit verify --witness-vkey VKEY --checkpoint
 * DIR/<origin>.note LOGDIR` checks a log against what the witness saw. */
#include "auditnet.h"
#include "host.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct wit_s {
    const char *key, *state, *vkey, *proof, *log, *url, *token_file, *stream, *note;
} wit_t;

static int usage(void) {
    fprintf(stderr,
            "usage: " RA_HOST_NAME " audit witness cosign --key SKEY --state DIR --log-vkey PUB\n"
            "           (NOTE [--proof FILE] | --log LOGDIR [NOTE]\n"
            "           | --url URL [--token-file F] [--stream S])\n");
    return RA_HOST_EXIT_USAGE;
}

/* The newest cp-<size>.note of a log directory, into path. */
static int newest_note(const char *dir, char *path, size_t cap) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    unsigned long long best = 0;
    int found = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        unsigned long long n;
        char tail[8];
        if (sscanf(e->d_name, "cp-%20llu.%7s", &n, tail) == 2 && !strcmp(tail, "note") &&
            (!found || n > best))
            best = n, found = 1;
    }
    closedir(d);
    if (!found) return -1;
    snprintf(path, cap, "%s/cp-%020llu.note", dir, best);
    return 0;
}

/* The candidate note's text (malloc'd): NOTE, the log's newest, or the daemon's. */
static int candidate(const wit_t *w, char **note, size_t *len) {
    if (w->url) {
        char route[160];
        snprintf(route, sizeof route, "/v1/audit/checkpoint?stream=%s", w->stream);
        return ra_host_audit_fetch(w->url, route, w->token_file, note, len);
    }
    char path[4200];
    const char *p = w->note;
    if (!p && newest_note(w->log, path, sizeof path) == 0) p = path;
    if (!p) {
        printf("FAILED: %s: no checkpoint\n", w->log);
        return RA_HOST_EXIT_FAILED;
    }
    if (ra_host_slurp(p, RAU_NOTE_READ_MAX, note, len)) {
        fprintf(stderr, "%s: cannot read the checkpoint\n", p);
        return RA_HOST_EXIT_USAGE;
    }
    return 0;
}

/* The consistency proof from (s1, r1) to (s2, r2): 0 when it verifies, else an exit code
 * (1: it does not, a fork). */
static int consistent(const wit_t *w, uint64_t s1, const uint8_t *r1, uint64_t s2,
                      const uint8_t *r2) {
    static ra_host_proof_t p;
    char err[600] = "";
    int ok = 0;
    if (w->log) {
        static rau_dir_proof_t dp;
        int rc = rau_dir_consistency(w->log, s1, s2, &dp, err, sizeof err);
        if (rc) {
            printf("FAILED: %s: %s (%s)\n", w->log, rau_err_name(rc), err);
            return RA_HOST_EXIT_FAILED;
        }
        p.count = dp.count;
        memcpy(p.proof, dp.proof, 32 * (size_t)dp.count);
        ok = 1;
    } else {
        char *text = NULL;
        size_t len = 0;
        int rc = 0;
        if (w->url) {
            char route[200];
            snprintf(route, sizeof route,
                     "/v1/audit/consistency?stream=%s&from=%" PRIu64 "&to=%" PRIu64, w->stream, s1,
                     s2);
            rc = ra_host_audit_fetch(w->url, route, w->token_file, &text, &len);
        } else if (!w->proof || ra_host_slurp(w->proof, 1u << 20, &text, &len)) {
            fprintf(stderr, "a checkpoint past the one cosigned needs its consistency proof "
                            "(--proof FILE, --log DIR or --url URL)\n");
            rc = RA_HOST_EXIT_USAGE;
        }
        if (rc) return rc;
        ok = ra_host_proof_parse(text, &p, err, sizeof err) == 0 && !p.inclusion && p.size1 == s1 &&
             p.size2 == s2;
        free(text);
        if (!ok) {
            printf("FAILED: not the consistency proof from %" PRIu64 " to %" PRIu64
                   " records%s%s\n",
                   s1, s2, err[0] ? ": " : "", err);
            return RA_HOST_EXIT_FAILED;
        }
    }
    if (rau_merkle_verify_consistency(s1, s2, r1, r2, p.proof, p.count) != 0) {
        printf("REFUSED: fork: the log's tree of %" PRIu64 " records does not extend the tree "
               "of %" PRIu64 " records this witness cosigned\n",
               s2, s1);
        return RA_HOST_EXIT_FAILED;
    }
    return 0;
}

/* Writes the new state whole: temporary file, fsync, rename, fsync of the directory. */
static int save(const char *dir, const char *path, const char *text, size_t n) {
    char tmp[4500];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int ok = fd >= 0 && write(fd, text, n) == (ssize_t)n && fsync(fd) == 0;
    if (fd >= 0 && close(fd) != 0) ok = 0;
    if (ok && rename(tmp, path) != 0) ok = 0;
    int dfd = ok ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (dfd >= 0) {
        if (fsync(dfd) != 0) ok = 0;
        close(dfd);
    }
    if (!ok) unlink(tmp);
    return ok ? 0 : -1;
}

/* The state file of an origin: '/' (and '%') written as %2F (%25). */
static void state_path(const char *dir, const char *origin, size_t olen, char *out, size_t cap) {
    size_t o = (size_t)snprintf(out, cap, "%s/", dir);
    for (size_t i = 0; i < olen && o + 4 < cap; i++)
        o += (size_t)snprintf(out + o, cap - o,
                              origin[i] == '/'   ? "%%2F"
                              : origin[i] == '%' ? "%%25"
                                                 : "%c",
                              origin[i]);
    snprintf(out + o, cap - o, ".note");
}

/* Compares the candidate with what was cosigned before: 0 to cosign, or an exit code. */
static int against_state(const wit_t *w, const char *path, uint64_t size, const uint8_t *root) {
    char *old = NULL;
    size_t olen = 0;
    if (access(path, F_OK) != 0) {
        fprintf(stderr, "note: the first checkpoint of this log this witness sees\n");
        return 0;
    }
    uint64_t s0 = 0;
    uint8_t r0[32];
    if (ra_host_slurp(path, RAU_NOTE_READ_MAX, &old, &olen)) {
        printf("FAILED: %s: cannot read the witness's state\n", path);
        return RA_HOST_EXIT_FAILED;
    }
    int rc = ra_host_signed_note(w->vkey, path, old, olen, &s0, r0);
    free(old);
    if (rc) return rc;
    if (size < s0) {
        printf("REFUSED: rollback: the checkpoint covers %" PRIu64 " records, this witness "
               "cosigned %" PRIu64 " records of this log (%s)\n",
               size, s0, path);
        return RA_HOST_EXIT_FAILED;
    }
    if (size == s0) {
        if (memcmp(root, r0, 32) == 0) return 0; /* the same tree: cosigned again, now */
        printf("REFUSED: fork: another root for the %" PRIu64 " records this witness cosigned "
               "(%s)\n",
               size, path);
        return RA_HOST_EXIT_FAILED;
    }
    return consistent(w, s0, r0, size, root);
}

static int cosign(const wit_t *w) {
    rau_signer_t *s = NULL;
    int rc = rau_signer_load(w->key, &s);
    if (rc || !rau_signer_is_cosigner(s)) {
        fprintf(stderr, "%s: %s\n", w->key,
                rc ? rau_strerror(rc) : "not a witness key (audit keygen --witness)");
        rau_signer_free(s);
        return RA_HOST_EXIT_USAGE;
    }
    char *note = NULL, *out = NULL, path[4400] = "";
    size_t len = 0, olen = 0;
    uint64_t size = 0;
    uint8_t root[32];
    rc = candidate(w, &note, &len);
    if (!rc) rc = ra_host_signed_note(w->vkey, "the log's checkpoint", note, len, &size, root);
    if (!rc) {
        state_path(w->state, note, strcspn(note, "\n"), path, sizeof path);
        rc = against_state(w, path, size, root);
    }
    if (!rc && !(out = malloc(len + 512))) rc = RA_HOST_EXIT_FAILED;
    if (!rc && (rc = rau_cosign(s, note, len, (uint64_t)time(NULL), out, len + 512, &olen))) {
        printf("FAILED: cosign: %s\n", rau_strerror(rc));
        rc = RA_HOST_EXIT_FAILED;
    }
    if (!rc && save(w->state, path, out, olen)) {
        printf("FAILED: %s: cannot write\n", path);
        rc = RA_HOST_EXIT_FAILED;
    }
    if (!rc) fwrite(out, 1, olen, stdout);
    free(note);
    free(out);
    rau_signer_free(s);
    return rc;
}

int ra_host_audit_witness(int argc, char **argv) {
    if (argc < 1 || strcmp(argv[0], "cosign")) return usage();
    wit_t w = {0};
    w.stream = "daemon";
    for (int i = 1; i < argc; i++) {
        const char **slot = !strcmp(argv[i], "--key")          ? &w.key
                            : !strcmp(argv[i], "--state")      ? &w.state
                            : !strcmp(argv[i], "--log-vkey")   ? &w.vkey
                            : !strcmp(argv[i], "--proof")      ? &w.proof
                            : !strcmp(argv[i], "--log")        ? &w.log
                            : !strcmp(argv[i], "--url")        ? &w.url
                            : !strcmp(argv[i], "--token-file") ? &w.token_file
                            : !strcmp(argv[i], "--stream")     ? &w.stream
                                                               : NULL;
        if (slot && i + 1 < argc)
            *slot = argv[++i];
        else if (!slot && argv[i][0] != '-' && !w.note)
            w.note = argv[i];
        else
            return usage();
    }
    if (!w.key || !w.state || !w.vkey || (!w.note && !w.log && !w.url) || (w.url && w.note) ||
        (w.url && w.log) || (w.proof && (w.log || w.url)))
        return usage();
    return cosign(&w);
}
