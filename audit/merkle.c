/* RFC 6962 / RFC 9162 Merkle tree hashing, inclusion and consistency proofs (AUD-I-8).
 * Generation follows RFC 9162 §2.1.3.1 / §2.1.4.1 (PATH and SUBPROOF) over an array of leaf
 * hashes; verification follows §2.1.3.2 / §2.1.4.2 word for word, including the checks the
 * immudb advisory shows are easy to forget (every proof hash consumed, sn ends at 0). */
#include "internal.h"

#include <stdbool.h>
#include <string.h>

/* RFC 9162 2.1.3.2 / 2.1.4.2: right-shift fn and sn alike until LSB(fn) is set or fn is 0. */
static void shift_to_odd(uint64_t *fn, uint64_t *sn) {
    while (!(*fn & 1) && *fn != 0) {
        *fn >>= 1;
        *sn >>= 1;
    }
}

static void node(const uint8_t *l, const uint8_t *r, uint8_t *out) {
    uint8_t b[65];
    b[0] = 1;
    memcpy(b + 1, l, 32);
    memcpy(b + 33, r, 32);
    rau__sha256_2(b, 65, NULL, 0, out);
}

void rau_merkle_leaf_hash(const uint8_t *data, size_t len, uint8_t *out32) {
    static const uint8_t zero = 0;
    rau__sha256_2(&zero, 1, data, len, out32);
}

/* Largest power of two smaller than n (n >= 2). */
static uint64_t split(uint64_t n) {
    uint64_t k = 1;
    while (k << 1 < n)
        k <<= 1;
    return k;
}

static void mth(const uint8_t *lh, uint64_t n, uint8_t *out) {
    if (n == 0) {
        rau__sha256_2(NULL, 0, NULL, 0, out);
        return;
    }
    if (n == 1) {
        memcpy(out, lh, 32);
        return;
    }
    uint64_t k = split(n);
    uint8_t l[32], r[32];
    mth(lh, k, l);
    mth(lh + 32 * k, n - k, r);
    node(l, r, out);
}

void rau_merkle_root(const uint8_t *leaf_hashes, uint64_t n, uint8_t *out32) {
    mth(leaf_hashes, n, out32);
}

typedef struct pout_s {
    uint8_t *p;
    size_t cap, n;
} pout_t;

static int emit(pout_t *o, const uint8_t *lh, uint64_t n) {
    if (o->n >= o->cap) return RAU_EBUFSIZE;
    mth(lh, n, o->p + 32 * o->n);
    o->n++;
    return 0;
}

static int path(pout_t *o, uint64_t m, const uint8_t *lh, uint64_t n) {
    if (n <= 1) return 0;
    uint64_t k = split(n);
    int rc;
    if (m < k) {
        if ((rc = path(o, m, lh, k))) return rc;
        return emit(o, lh + 32 * k, n - k);
    }
    if ((rc = path(o, m - k, lh + 32 * k, n - k))) return rc;
    return emit(o, lh, k);
}

int rau_merkle_inclusion_proof(const uint8_t *leaf_hashes, uint64_t index, uint64_t size,
                               uint8_t *proof, size_t cap, size_t *count_out) {
    if (!leaf_hashes || !count_out || index >= size || (!proof && cap)) return RAU_EINVAL;
    pout_t o = {proof, cap, 0};
    int rc = path(&o, index, leaf_hashes, size);
    *count_out = o.n;
    return rc;
}

static int subproof(pout_t *o, uint64_t m, const uint8_t *lh, uint64_t n, int b) {
    if (m == n) return b ? 0 : emit(o, lh, n);
    uint64_t k = split(n);
    int rc;
    if (m <= k) {
        if ((rc = subproof(o, m, lh, k, b))) return rc;
        return emit(o, lh + 32 * k, n - k);
    }
    if ((rc = subproof(o, m - k, lh + 32 * k, n - k, 0))) return rc;
    return emit(o, lh, k);
}

int rau_merkle_consistency_proof(const uint8_t *leaf_hashes, uint64_t size1, uint64_t size2,
                                 uint8_t *proof, size_t cap, size_t *count_out) {
    if (!leaf_hashes || !count_out || size1 > size2 || (!proof && cap)) return RAU_EINVAL;
    pout_t o = {proof, cap, 0};
    int rc = 0;
    if (size1 > 0 && size1 < size2) rc = subproof(&o, size1, leaf_hashes, size2, 1);
    *count_out = o.n;
    return rc;
}

/* One proof node c of RFC 9162's verification walk (2.1.3.2, 2.1.4.2): a left sibling
 * (LSB(fn) set, or fn == sn) extends fr (when not NULL: inclusion keeps one hash) and sr from
 * the left, and fn, sn skip the levels where fn is a left child; a right sibling extends sr
 * only. False when the proof is longer than the path (sn already 0). */
static bool proof_step(const uint8_t *c, uint8_t *fr, uint8_t *sr, uint64_t *fn, uint64_t *sn) {
    if (*sn == 0) return false;
    if ((*fn & 1) || *fn == *sn) {
        if (fr) node(c, fr, fr);
        node(c, sr, sr);
        shift_to_odd(fn, sn);
    } else {
        node(sr, c, sr);
    }
    *fn >>= 1;
    *sn >>= 1;
    return true;
}

int rau_merkle_verify_inclusion(uint64_t index, uint64_t size, const uint8_t *leaf_hash,
                                const uint8_t *proof, size_t count, const uint8_t *root) {
    if (!leaf_hash || !root || (!proof && count)) return RAU_EINVAL;
    if (index >= size) return RAU_EPROOF;
    uint64_t fn = index, sn = size - 1;
    uint8_t r[32];
    memcpy(r, leaf_hash, 32);
    for (size_t i = 0; i < count; i++)
        if (!proof_step(proof + 32 * i, NULL, r, &fn, &sn)) return RAU_EPROOF;
    return sn == 0 && memcmp(r, root, 32) == 0 ? 0 : RAU_EPROOF;
}

int rau_merkle_verify_consistency(uint64_t size1, uint64_t size2, const uint8_t *root1,
                                  const uint8_t *root2, const uint8_t *proof, size_t count) {
    if (!root1 || !root2 || (!proof && count)) return RAU_EINVAL;
    if (size1 > size2) return RAU_EPROOF;
    if (size1 == size2) return count == 0 && memcmp(root1, root2, 32) == 0 ? 0 : RAU_EPROOF;
    if (size1 == 0) return count == 0 ? 0 : RAU_EPROOF;
    if (count == 0) return RAU_EPROOF;
    /* Step 2: a power-of-two first tree is its own first proof node. */
    const uint8_t *first = proof;
    size_t i = 1;
    if ((size1 & (size1 - 1)) == 0) {
        first = root1;
        i = 0;
    }
    uint64_t fn = size1 - 1, sn = size2 - 1;
    while (fn & 1) {
        fn >>= 1;
        sn >>= 1;
    }
    uint8_t fr[32], sr[32];
    memcpy(fr, first, 32);
    memcpy(sr, first, 32);
    for (; i < count; i++)
        if (!proof_step(proof + 32 * i, fr, sr, &fn, &sn)) return RAU_EPROOF;
    return sn == 0 && memcmp(fr, root1, 32) == 0 && memcmp(sr, root2, 32) == 0 ? 0 : RAU_EPROOF;
}

/* The chain keeps one hash per set bit of its size, so a checkpoint's root costs O(log n)
 * however long the log (AUD-I-8). */
void rau__mrange_push(rau__mrange_t *r, const uint8_t *leaf_hash) {
    uint8_t cur[32];
    memcpy(cur, leaf_hash, 32);
    int k = 0;
    while ((r->n >> k) & 1) {
        node(r->nodes[k], cur, cur);
        k++;
    }
    memcpy(r->nodes[k], cur, 32);
    r->n++;
}

void rau__mrange_root(const rau__mrange_t *r, uint8_t *out32) {
    if (r->n == 0) {
        rau__sha256_2(NULL, 0, NULL, 0, out32);
        return;
    }
    int have = 0;
    uint8_t acc[32];
    for (int k = 0; k < 64; k++) {
        if (!((r->n >> k) & 1)) continue;
        if (have) {
            node(r->nodes[k], acc, acc);
        } else {
            memcpy(acc, r->nodes[k], 32);
            have = 1;
        }
    }
    memcpy(out32, acc, 32);
}
