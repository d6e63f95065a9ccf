/* `ron-accounting audit proof ...`: RFC 6962 proofs from an audit log (docs/AUDIT.md,
 * "Proofs"), for an auditor who holds a signed checkpoint and wants to know that a record
 * is in it, or that today's log extends it (AUD-I-8):
 *
 *   audit proof inclusion [--vkey PUB --checkpoint NOTE] DIR SEQ [SIZE]
 *   audit proof consistency [--vkey PUB --checkpoint NOTE] DIR [SIZE1] [SIZE2]
 *
 * The log is read through the verifier first (rau_verify_dir_list: a log with any problem
 * gives no proof). The proof is computed from the records' leaf hashes and checked with the
 * library's verifier (rau_merkle_verify_*) against the root it claims: the log's own root
 * of that size, or, with --checkpoint, the root the note signs (its signature and origin
 * checked with --vkey). With a note, SIZE (inclusion) and SIZE1 (consistency) are the
 * note's. A log restored from an old backup and grown again has no consistency proof to a
 * checkpoint signed before the restore: exit 1 (a fork).
 *
 * The same from a running daemon's proof routes (AUD-I-41), as the client of the people the
 * records are about, who hold no copy of the log:
 *
 *   audit proof checkpoint --url URL [--token-file F] [--stream S] [--vkey PUB]
 *   audit proof inclusion --url URL [--token-file F] [--stream S] --vkey PUB
 *                         [--checkpoint NOTE] SEQ
 *   audit proof consistency --url URL [--token-file F] [--stream S] --vkey PUB
 *                           --checkpoint OLD-NOTE
 *
 * Nothing the daemon answers is trusted: the checkpoint (the newest, or NOTE) must verify
 * with PUB; the record it sends must hash to the leaf, decode and be SEQ; the proof must
 * lead to the signed root (inclusion), or from OLD-NOTE's signed root to the newest's
 * (consistency: another answer is a fork).
 *
 * Output: the sizes, leaf and roots, then "proof[i] <hex>" lines (RFC 9162 order) and
 * "OK: ..." (exit 0) or "FAILED: ..." (exit 1); 2 on usage. */
#include "auditnet.h"
#include "host.h"

#include "ron/audit.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct leaves_s {
    uint8_t *h;
    uint64_t n, cap;
    int nomem;
} leaves_t;

static void take_leaf(void *ud, const rau_record_t *r) {
    leaves_t *lv = ud;
    if (lv->nomem) return;
    if (lv->n == lv->cap) {
        uint64_t cap = lv->cap ? lv->cap * 2 : 1024;
        uint8_t *p = realloc(lv->h, cap * 32);
        if (!p) {
            lv->nomem = 1;
            return;
        }
        lv->h = p, lv->cap = cap;
    }
    size_t len = 0;
    const uint8_t *b = rau_record_bytes(r, &len);
    rau_merkle_leaf_hash(b, len, lv->h + lv->n * 32);
    lv->n++;
}

static void problem(void *ud, const char *where, const char *what) {
    (void)ud;
    printf("%s: %s\n", where, what);
}

static void hex(const char *label, const uint8_t *h) {
    ra_host_hex_line(label, h, 32);
}

static int parse_u64(const char *s, uint64_t *out) {
    char *end = NULL;
    if (!s || !*s || *s == '-') return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end) return -1;
    *out = v;
    return 0;
}

static int read_log(const char *dir, leaves_t *lv) {
    uint64_t records = 0;
    int n = rau_verify_dir_list(dir, NULL, NULL, 0, problem, take_leaf, lv, &records);
    if (n < 0) {
        printf("FAILED: %s: %s\n", dir, rau_strerror(n));
        return RA_HOST_EXIT_FAILED;
    }
    if (lv->nomem) {
        printf("FAILED: %s: out of memory\n", dir);
        return RA_HOST_EXIT_FAILED;
    }
    if (n > 0) {
        printf("FAILED: %s does not verify (%d problem%s): no proof from it\n", dir, n,
               n == 1 ? "" : "s");
        return RA_HOST_EXIT_FAILED;
    }
    return 0;
}

static void print_proof(const uint8_t *p, size_t count) {
    for (size_t i = 0; i < count; i++) {
        char label[32];
        snprintf(label, sizeof label, "proof[%zu]", i);
        hex(label, p + i * 32);
    }
}

static int usage(void) {
    fprintf(stderr, "usage: " RA_HOST_NAME
                    " audit proof inclusion [--vkey PUB --checkpoint NOTE] DIR SEQ [SIZE]\n"
                    "       " RA_HOST_NAME
                    " audit proof consistency [--vkey PUB --checkpoint NOTE] DIR [SIZE1] [SIZE2]\n"
                    "       " RA_HOST_NAME
                    " audit proof checkpoint|inclusion|consistency --url URL [--token-file F]\n"
                    "             [--stream S] [--vkey PUB] [--checkpoint NOTE] [SEQ]\n");
    return RA_HOST_EXIT_USAGE;
}

/* ---- from a daemon's proof routes (AUD-I-41) ---- */

typedef struct remote_s {
    const char *url, *token_file, *stream, *vkey_path, *note_path;
} remote_t;

/* GET route?stream=S&args: the answer's text (malloc'd) or an exit code. */
static int fetch(const remote_t *r, const char *route, const char *args, char **text) {
    char path[512];
    size_t len = 0;
    snprintf(path, sizeof path, "/v1/audit/%s?stream=%s%s%s", route, r->stream, args ? "&" : "",
             args ? args : "");
    return ra_host_audit_fetch(r->url, path, r->token_file, text, &len);
}

/* The checkpoint a client trusts: NOTE, or the daemon's newest, verified with --vkey. */
static int trusted(const remote_t *r, int newest, uint64_t *size, uint8_t *root, char **note) {
    if (!newest && r->note_path) return ra_host_signed_file(r->vkey_path, r->note_path, size, root);
    char *t = NULL;
    int rc = fetch(r, "checkpoint", NULL, &t);
    if (!rc && r->vkey_path)
        rc = ra_host_signed_note(r->vkey_path, "the daemon's checkpoint", t, strlen(t), size, root);
    if (!rc && note)
        *note = t;
    else
        free(t);
    return rc;
}

static int remote_inclusion(const remote_t *r, uint64_t seq) {
    uint64_t size = 0;
    uint8_t root[32], leaf[32];
    int rc = trusted(r, 0, &size, root, NULL);
    char args[96], *text = NULL, err[256];
    snprintf(args, sizeof args, "seq=%" PRIu64 "&size=%" PRIu64, seq, size);
    if (!rc) rc = fetch(r, "inclusion", args, &text);
    if (rc) return rc;
    static ra_host_proof_t p;
    rau_record_t *rec = NULL;
    int ok = ra_host_proof_parse(text, &p, err, sizeof err) == 0;
    free(text);
    if (!ok || !p.inclusion || !p.has_record || p.seq != seq || p.size2 != size) {
        printf("FAILED: the answer is not the inclusion proof asked for%s%s\n", ok ? "" : ": ",
               ok ? "" : err);
        return RA_HOST_EXIT_FAILED;
    }
    /* the record is the leaf, and is record seq */
    rau_merkle_leaf_hash(p.record, p.record_len, leaf);
    ok = memcmp(leaf, p.leaf, 32) == 0 && rau_record_decode(p.record, p.record_len, &rec) == 0 &&
         rau_record_seq(rec) == seq;
    printf("inclusion: seq %" PRIu64 " (leaf index %" PRIu64 ") in the tree of %" PRIu64
           " records\n",
           seq, seq - 1, size);
    if (rec) ra_host_audit_list_record(NULL, rec);
    rau_record_free(rec);
    hex("leaf", leaf);
    hex("root", root);
    print_proof(p.proof, p.count);
    if (!ok) {
        printf("FAILED: the record sent is not record %" PRIu64 " of that leaf\n", seq);
        return RA_HOST_EXIT_FAILED;
    }
    if (rau_merkle_verify_inclusion(seq - 1, size, leaf, p.proof, p.count, root) != 0) {
        printf("FAILED: the proof does not lead to the checkpoint's signed root\n");
        return RA_HOST_EXIT_FAILED;
    }
    printf("OK: record %" PRIu64 " is in the signed checkpoint of %" PRIu64 " records\n", seq,
           size);
    return RA_HOST_EXIT_OK;
}

static int remote_consistency(const remote_t *r) {
    uint64_t s1 = 0, s2 = 0;
    uint8_t r1[32], r2[32];
    if (!r->note_path) return usage();
    int rc = trusted(r, 0, &s1, r1, NULL);
    if (!rc) rc = trusted(r, 1, &s2, r2, NULL);
    char args[96], *text = NULL, err[256];
    snprintf(args, sizeof args, "from=%" PRIu64 "&to=%" PRIu64, s1, s2);
    if (!rc && s1 > s2) {
        printf("FAILED: the daemon's newest checkpoint covers %" PRIu64
               " records, fewer than the %" PRIu64 " of %s (a rollback)\n",
               s2, s1, r->note_path);
        return RA_HOST_EXIT_FAILED;
    }
    if (!rc) rc = fetch(r, "consistency", args, &text);
    if (rc) return rc;
    static ra_host_proof_t p;
    int ok = ra_host_proof_parse(text, &p, err, sizeof err) == 0;
    free(text);
    if (!ok || p.inclusion || p.size1 != s1 || p.size2 != s2) {
        printf("FAILED: the answer is not the consistency proof asked for%s%s\n", ok ? "" : ": ",
               ok ? "" : err);
        return RA_HOST_EXIT_FAILED;
    }
    printf("consistency: the tree of %" PRIu64 " records -> the tree of %" PRIu64 " records\n", s1,
           s2);
    hex("root1", r1);
    hex("root2", r2);
    print_proof(p.proof, p.count);
    if (rau_merkle_verify_consistency(s1, s2, r1, r2, p.proof, p.count) != 0) {
        printf("FAILED: the daemon's newest checkpoint is not an extension of %s (a fork)\n",
               r->note_path);
        return RA_HOST_EXIT_FAILED;
    }
    printf("OK: the signed checkpoint of %" PRIu64 " records extends the one of %" PRIu64 "\n", s2,
           s1);
    return RA_HOST_EXIT_OK;
}

static int remote(const char *verb, const remote_t *r, const char *seq_text) {
    if (!strcmp(verb, "checkpoint")) {
        char *note = NULL;
        uint64_t size = 0;
        uint8_t root[32];
        int rc = trusted(r, 1, &size, root, &note);
        if (!rc) fputs(note, stdout);
        free(note);
        return rc;
    }
    if (!r->vkey_path) return usage(); /* a proof against an unsigned root proves nothing */
    if (!strcmp(verb, "inclusion")) {
        uint64_t seq = 0;
        if (parse_u64(seq_text, &seq) || seq == 0) return usage();
        return remote_inclusion(r, seq);
    }
    return seq_text ? usage() : remote_consistency(r);
}

int ra_host_audit_proof(int argc, char **argv) {
    if (argc < 1) return usage();
    int inclusion = !strcmp(argv[0], "inclusion");
    const char *vkey_path = NULL, *note_path = NULL, *pos[3] = {NULL, NULL, NULL};
    remote_t r = {NULL, NULL, "daemon", NULL, NULL};
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--vkey") && i + 1 < argc)
            vkey_path = argv[++i];
        else if (!strcmp(argv[i], "--checkpoint") && i + 1 < argc)
            note_path = argv[++i];
        else if (!strcmp(argv[i], "--url") && i + 1 < argc)
            r.url = argv[++i];
        else if (!strcmp(argv[i], "--token-file") && i + 1 < argc)
            r.token_file = argv[++i];
        else if (!strcmp(argv[i], "--stream") && i + 1 < argc)
            r.stream = argv[++i];
        else if (argv[i][0] != '-' && npos < 3)
            pos[npos++] = argv[i];
        else
            return usage();
    }
    if (r.url) {
        r.vkey_path = vkey_path, r.note_path = note_path;
        if (npos > 1 || strspn(r.stream, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                         "0123456789._-") != strlen(r.stream))
            return usage();
        if (strcmp(argv[0], "checkpoint") && !inclusion && strcmp(argv[0], "consistency"))
            return usage();
        return remote(argv[0], &r, pos[0]);
    }
    if (!inclusion && strcmp(argv[0], "consistency")) return usage();
    const char *dir = pos[0];
    uint64_t a = 0, b = 0, note_size = 0;
    int has_a = 0, has_b = 0;
    if (!dir || (inclusion && npos < 2)) return usage();
    if (npos >= 2) {
        if (parse_u64(pos[1], &a)) return usage();
        has_a = 1;
    }
    if (npos >= 3) {
        if (parse_u64(pos[2], &b)) return usage();
        has_b = 1;
    }
    uint8_t note_root[32];
    if (note_path) {
        int rc = ra_host_signed_file(vkey_path, note_path, &note_size, note_root);
        if (rc) return rc;
    }
    leaves_t lv = {0};
    int rc = read_log(dir, &lv);
    if (rc) {
        free(lv.h);
        return rc;
    }
    uint8_t proof[RAU_MERKLE_PROOF_MAX * 32], root[32];
    size_t count = 0;
    int ok;
    if (inclusion) {
        uint64_t seq = a, size = note_path ? note_size : has_b ? b : lv.n;
        if (seq < 1 || seq > size || size > lv.n) {
            printf("FAILED: seq %" PRIu64 " is not in a tree of %" PRIu64
                   " records (the log has %" PRIu64 ")\n",
                   seq, size, lv.n);
            free(lv.h);
            return RA_HOST_EXIT_FAILED;
        }
        rau_merkle_root(lv.h, size, root);
        rc = rau_merkle_inclusion_proof(lv.h, seq - 1, size, proof, RAU_MERKLE_PROOF_MAX, &count);
        printf("inclusion: seq %" PRIu64 " (leaf index %" PRIu64 ") in the tree of %" PRIu64
               " records\n",
               seq, seq - 1, size);
        hex("leaf", lv.h + (seq - 1) * 32);
        hex("root", note_path ? note_root : root);
        if (!rc) print_proof(proof, count);
        ok = !rc && rau_merkle_verify_inclusion(seq - 1, size, lv.h + (seq - 1) * 32, proof, count,
                                                note_path ? note_root : root) == 0;
    } else {
        uint64_t s1 = note_path ? note_size : a;
        uint64_t s2 = note_path ? (has_a ? a : lv.n) : (has_b ? b : lv.n);
        if ((!note_path && !has_a) || s1 > s2 || s2 > lv.n) {
            if (!note_path && !has_a) {
                free(lv.h);
                return usage();
            }
            printf("FAILED: no consistency proof from %" PRIu64 " to %" PRIu64
                   " records (the log has %" PRIu64 ")\n",
                   s1, s2, lv.n);
            free(lv.h);
            return RA_HOST_EXIT_FAILED;
        }
        uint8_t root1[32];
        rau_merkle_root(lv.h, s1, root1);
        rau_merkle_root(lv.h, s2, root);
        rc = rau_merkle_consistency_proof(lv.h, s1, s2, proof, RAU_MERKLE_PROOF_MAX, &count);
        printf("consistency: the tree of %" PRIu64 " records -> the tree of %" PRIu64 " records\n",
               s1, s2);
        hex("root1", note_path ? note_root : root1);
        hex("root2", root);
        if (!rc) print_proof(proof, count);
        ok = !rc && rau_merkle_verify_consistency(s1, s2, note_path ? note_root : root1, root,
                                                  proof, count) == 0;
    }
    free(lv.h);
    if (!ok) {
        printf("FAILED: the proof does not verify against %s%s\n",
               note_path ? "the checkpoint's signed root" : "the log's root",
               note_path && !inclusion ? " (the log is not an extension of it: a fork)" : "");
        return RA_HOST_EXIT_FAILED;
    }
    printf("OK: verified against %s\n",
           note_path ? "the checkpoint's signed root" : "the log's own root");
    return RA_HOST_EXIT_OK;
}
