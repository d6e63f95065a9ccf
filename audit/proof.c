/* RFC 6962 / RFC 9162 proofs straight from a log directory (AUD-I-41): the daemon's proof
 * routes answer from the files its writer appends to, in the libuv threadpool.
 *
 * Memory does not grow with the log: the records are read once, in order, through the
 * verifier's fixed window, and never kept. The proof's hashes are the roots of disjoint
 * ranges of leaves (RFC 9162 §2.1.3.1 PATH and §2.1.4.1 SUBPROOF name them); those ranges
 * are listed first, sorted by their first leaf, and each root is computed by a compact range
 * (O(log n) hashes) while the leaves stream past, as are the roots of the whole trees. A
 * frame that does not check, a segment header that is not the next one, or a record whose
 * seq is not the next, before the tree's last record, refuses the proof (RAU_ECORRUPT with
 * the position): only `audit verify` reads a damaged log. The records past the tree's size
 * are not read (the writer may be appending there). */
#include "internal.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct rng_s {
    uint64_t lo, hi; /* leaves [lo, hi) */
    uint32_t slot;   /* the proof hash it makes */
} rng_t;

typedef struct rngs_s {
    rng_t r[RAU_MERKLE_PROOF_MAX];
    uint32_t n;
} rngs_t;

static uint64_t split(uint64_t n) {
    uint64_t k = 1;
    while (k << 1 < n)
        k <<= 1;
    return k;
}

static void add(rngs_t *rs, uint64_t lo, uint64_t hi) {
    RAU_ASSERT(rs->n < RAU_MERKLE_PROOF_MAX);
    rs->r[rs->n] = (rng_t){lo, hi, rs->n};
    rs->n++;
}

/* PATH(m, D[lo:hi]) of RFC 9162: the path of the deeper levels first, then the sibling. */
static void path(rngs_t *rs, uint64_t m, uint64_t lo, uint64_t hi) {
    uint64_t n = hi - lo;
    if (n <= 1) return;
    uint64_t k = split(n);
    if (m < k) {
        path(rs, m, lo, lo + k);
        add(rs, lo + k, hi);
    } else {
        path(rs, m - k, lo + k, hi);
        add(rs, lo, lo + k);
    }
}

/* SUBPROOF(m, D[lo:hi], b) of RFC 9162. */
static void subproof(rngs_t *rs, uint64_t m, uint64_t lo, uint64_t hi, int b) {
    uint64_t n = hi - lo;
    if (m == n) {
        if (!b) add(rs, lo, hi);
        return;
    }
    uint64_t k = split(n);
    if (m <= k) {
        subproof(rs, m, lo, lo + k, b);
        add(rs, lo + k, hi);
    } else {
        subproof(rs, m - k, lo + k, hi, 0);
        add(rs, lo, lo + k);
    }
}

static int by_lo(const void *a, const void *b) {
    const rng_t *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* What one pass over the leaves computes. */
typedef struct scan_s {
    rngs_t rs;            /* sorted by lo */
    uint64_t size1, size; /* roots of the first size1 (0: none asked) and size leaves */
    uint64_t want;        /* 1-based seq of the record to copy (0: none) */
    rau_dir_proof_t *out;
} scan_t;

/* Takes leaf i (0-based) into every root it belongs to. */
static void take_leaf(scan_t *s, uint64_t i, const uint8_t *rec, size_t n, rau__mrange_t *all,
                      rau__mrange_t *acc, uint32_t *ri) {
    uint8_t leaf[32];
    rau_merkle_leaf_hash(rec, n, leaf);
    rau__mrange_push(all, leaf);
    if (i + 1 == s->size1) rau__mrange_root(all, s->out->root1);
    if (i + 1 == s->want) {
        memcpy(s->out->leaf, leaf, 32);
        memcpy(s->out->record, rec, n);
        s->out->record_len = (uint32_t)n;
    }
    if (*ri < s->rs.n && i >= s->rs.r[*ri].lo) {
        if (i == s->rs.r[*ri].lo) memset(acc, 0, sizeof *acc);
        rau__mrange_push(acc, leaf);
        if (i + 1 == s->rs.r[*ri].hi) {
            rau__mrange_root(acc, s->out->proof + 32 * s->rs.r[*ri].slot);
            (*ri)++;
        }
    }
}

/* Reads the first s->size records of dir, in order, into the roots. */
static int scan(const char *dir, scan_t *s, char *err, size_t errlen) {
    rau__seglist_t sl;
    int rc = rau__seglist(dir, &sl);
    if (rc) {
        rau__errf(err, errlen, "%s: cannot list the log", dir);
        return rc;
    }
    rau__mrange_t *all = calloc(2, sizeof *all);
    rau__win_t w = {-1, 0, malloc(RAU__WIN), 0, 0};
    if (!all || !w.b) rc = RAU_ENOMEM;
    uint64_t i = 0;
    uint32_t ri = 0;
    char path_[4200];
    for (size_t si = 0; si < sl.n && i < s->size && !rc; si++) {
        snprintf(path_, sizeof path_, "%s/%s", dir, sl.names[si]);
        w.fd = open(path_, O_RDONLY | O_CLOEXEC);
        w.eof = 0, w.have = 0, w.base = 0;
        size_t off = 0;
        if (w.fd < 0 || rau__win_refill(&w, &off)) {
            rau__errf(err, errlen, "%s: cannot read", path_);
            rc = RAU_EIO;
        } else if (w.have < RAU__SEG_HDR || memcmp(w.b, RAU__SEG_MAGIC, 8) != 0 ||
                   rau__rd64(w.b + 8) != i + 1 || sl.first_seq[si] != i + 1) {
            rau__errf(err, errlen, "%s+0: not the segment of record %llu", path_,
                      (unsigned long long)(i + 1));
            rc = RAU_ECORRUPT;
        }
        off = RAU__SEG_HDR;
        while (!rc && i < s->size) {
            if (!w.eof && w.have - off < RAU_RECORD_MAX + RAU__FRAME_OVERHEAD &&
                rau__win_refill(&w, &off)) {
                rau__errf(err, errlen, "%s: cannot read", path_);
                rc = RAU_EIO;
                break;
            }
            if (off >= w.have) break; /* the next segment */
            const uint8_t *pl;
            size_t plen, flen;
            if (rau__frame_parse(w.b + off, w.have - off, &pl, &plen, &flen) != 1 ||
                plen < RAU__OFF_BODY || rau__rd64(pl + RAU__OFF_SEQ) != i + 1) {
                rau__errf(err, errlen, "%s+%llu: record %llu does not read back", path_,
                          (unsigned long long)(w.base + off), (unsigned long long)(i + 1));
                rc = RAU_ECORRUPT;
                break;
            }
            take_leaf(s, i, pl, plen, &all[0], &all[1], &ri);
            i++;
            off += flen;
        }
        if (w.fd >= 0) close(w.fd);
        w.fd = -1;
    }
    if (!rc && i < s->size) {
        rau__errf(err, errlen, "%s: the log has %llu records, not %llu", dir, (unsigned long long)i,
                  (unsigned long long)s->size);
        rc = RAU_ENOTFOUND;
    }
    if (!rc) rau__mrange_root(&all[0], s->out->root2);
    if (!rc && s->size1 == 0) rau_merkle_root(NULL, 0, s->out->root1); /* the empty tree */
    rau__seglist_free(&sl);
    free(w.b);
    free(all);
    return rc;
}

static int run(const char *dir, scan_t *s, char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    s->out->count = s->rs.n;
    qsort(s->rs.r, s->rs.n, sizeof s->rs.r[0], by_lo);
    return scan(dir, s, err, errlen);
}

int rau_dir_inclusion(const char *dir, uint64_t seq, uint64_t size, rau_dir_proof_t *out, char *err,
                      size_t errlen) {
    if (!dir || !out) return RAU_EINVAL;
    memset(out, 0, sizeof *out);
    if (seq < 1 || seq > size) {
        rau__errf(err, errlen, "record %llu is not in a tree of %llu records",
                  (unsigned long long)seq, (unsigned long long)size);
        return RAU_EINVAL;
    }
    scan_t s = {.size = size, .want = seq, .out = out};
    out->seq = seq, out->size2 = size;
    path(&s.rs, seq - 1, 0, size);
    return run(dir, &s, err, errlen);
}

int rau_dir_consistency(const char *dir, uint64_t size1, uint64_t size2, rau_dir_proof_t *out,
                        char *err, size_t errlen) {
    if (!dir || !out) return RAU_EINVAL;
    memset(out, 0, sizeof *out);
    if (size1 > size2) {
        rau__errf(err, errlen, "no consistency proof from %llu to %llu records",
                  (unsigned long long)size1, (unsigned long long)size2);
        return RAU_EINVAL;
    }
    scan_t s = {.size = size2, .size1 = size1, .out = out};
    out->size1 = size1, out->size2 = size2;
    if (size1 > 0 && size1 < size2) subproof(&s.rs, size1, 0, size2, 1);
    return run(dir, &s, err, errlen);
}
