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
 * Output: the sizes, leaf and roots, then "proof[i] <hex>" lines (RFC 9162 order) and
 * "OK: ..." (exit 0) or "FAILED: ..." (exit 1); 2 on usage. */
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
    printf("%s ", label);
    for (int i = 0; i < 32; i++)
        printf("%02x", h[i]);
    putchar('\n');
}

static int read_text(const char *path, char *buf, size_t cap, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    size_t n = fread(buf, 1, cap - 1, f);
    int big = !feof(f);
    fclose(f);
    if (big) return -1;
    buf[n] = 0;
    *len = n;
    return 0;
}

static int parse_u64(const char *s, uint64_t *out) {
    char *end = NULL;
    if (!s || !*s || *s == '-') return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end) return -1;
    *out = v;
    return 0;
}

/* The signed (size, root) of --checkpoint NOTE under --vkey PUB: 0, or exit code. */
static int signed_root(const char *vkey_path, const char *note_path, uint64_t *size,
                       uint8_t *root) {
    char vkey[RAU_KEY_TEXT_MAX + 2], note[RAU_NOTE_MAX + 1];
    size_t vlen = 0, nlen = 0;
    if (!vkey_path || read_text(vkey_path, vkey, sizeof vkey, &vlen) != 0) {
        fprintf(stderr, "%s: --checkpoint needs a readable --vkey\n",
                vkey_path ? vkey_path : "proof");
        return RA_HOST_EXIT_USAGE;
    }
    while (vlen && (vkey[vlen - 1] == '\n' || vkey[vlen - 1] == '\r'))
        vkey[--vlen] = 0;
    if (read_text(note_path, note, sizeof note, &nlen) != 0) {
        fprintf(stderr, "%s: cannot read the checkpoint\n", note_path);
        return RA_HOST_EXIT_USAGE;
    }
    int rc = rau_checkpoint_verify(note, nlen, vkey, vlen, size, root);
    if (rc) {
        printf("FAILED: %s: %s (%s)\n", note_path, rau_err_name(rc), rau_strerror(rc));
        return RA_HOST_EXIT_FAILED;
    }
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
    fprintf(stderr,
            "usage: " RA_HOST_NAME
            " audit proof inclusion [--vkey PUB --checkpoint NOTE] DIR SEQ [SIZE]\n"
            "       " RA_HOST_NAME
            " audit proof consistency [--vkey PUB --checkpoint NOTE] DIR [SIZE1] [SIZE2]\n");
    return RA_HOST_EXIT_USAGE;
}

int ra_host_audit_proof(int argc, char **argv) {
    if (argc < 1) return usage();
    int inclusion = !strcmp(argv[0], "inclusion");
    if (!inclusion && strcmp(argv[0], "consistency")) return usage();
    const char *vkey_path = NULL, *note_path = NULL, *pos[3] = {NULL, NULL, NULL};
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--vkey") && i + 1 < argc)
            vkey_path = argv[++i];
        else if (!strcmp(argv[i], "--checkpoint") && i + 1 < argc)
            note_path = argv[++i];
        else if (argv[i][0] != '-' && npos < 3)
            pos[npos++] = argv[i];
        else
            return usage();
    }
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
        int rc = signed_root(vkey_path, note_path, &note_size, note_root);
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
