/* RFC 6962 Merkle trees (AUD-I-8) against the transparency-dev/merkle test vectors
 * (proof/verify_test.go: the eight leaves, the roots of every prefix, inclusion and
 * consistency proofs), their corruption probes (wrong index, wrong size, wrong leaf or root,
 * garbage before and after, a flipped bit in each proof hash, a dropped or inserted hash),
 * and proofs generated for every (index, size) and (size1, size2) up to 40 leaves. */
#include "rau_test.h"

#include "internal.h"

static const char *LEAVES[8] = {"",
                                "00",
                                "10",
                                "2021",
                                "3031",
                                "40414243",
                                "5051525354555657",
                                "606162636465666768696a6b6c6d6e6f"};
static const char *ROOTS[8] = {"6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
                               "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
                               "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
                               "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
                               "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
                               "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
                               "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
                               "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"};
#define EMPTY "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define SOME "abacaba000000000000000000000000000000000000000000060061e00123456"

typedef struct vec_s {
    uint64_t a, b; /* inclusion: leaf (1-based), size; consistency: size1, size2 */
    size_t n;
    const char *p[3];
} vec_t;

static const vec_t INCL[] = {
    {1,
     8,
     3,
     {"96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
      "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
      "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"}},
    {6,
     8,
     3,
     {"bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
      "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
      "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"}},
    {3, 3, 1, {"fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"}},
    {2,
     5,
     3,
     {"6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
      "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
      "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"}},
    {1, 1, 0, {NULL}},
};
static const vec_t CONS[] = {
    {1,
     8,
     3,
     {"96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
      "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
      "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"}},
    {6,
     8,
     3,
     {"0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
      "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
      "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"}},
    {2,
     5,
     2,
     {"5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
      "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"}},
    {6,
     7,
     3,
     {"0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
      "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
      "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"}},
    {1, 1, 0, {NULL}},
};

static uint8_t lh[8][32], roots[8][32], some[32], empty[32];

static void setup(void) {
    for (int i = 0; i < 8; i++) {
        uint8_t d[32];
        size_t n = rau_t_unhex(LEAVES[i], d, sizeof d);
        rau_merkle_leaf_hash(d, n, lh[i]);
        rau_t_unhex(ROOTS[i], roots[i], 32);
    }
    rau_t_unhex(SOME, some, 32);
    rau_t_unhex(EMPTY, empty, 32);
}

static size_t load(const vec_t *v, uint8_t *p) {
    for (size_t i = 0; i < v->n; i++)
        rau_t_unhex(v->p[i], p + 32 * i, 32);
    return v->n;
}

RA_TEST(roots_of_every_prefix) {
    setup();
    for (int n = 1; n <= 8; n++) {
        uint8_t r[32];
        rau_merkle_root(&lh[0][0], (uint64_t)n, r);
        CHECK(memcmp(r, roots[n - 1], 32) == 0);
        rau__mrange_t mr = {0};
        for (int i = 0; i < n; i++)
            rau__mrange_push(&mr, lh[i]);
        rau__mrange_root(&mr, r);
        CHECK(memcmp(r, roots[n - 1], 32) == 0);
    }
    uint8_t r[32], e[32];
    rau_merkle_root(&lh[0][0], 0, r);
    rau_t_unhex(EMPTY, e, 32);
    CHECK(memcmp(r, e, 32) == 0);
}

/* rau_merkle_inclusion_proof and rau_merkle_consistency_proof. */
typedef int (*prove_fn)(const uint8_t *leaf_hashes, uint64_t a, uint64_t b, uint8_t *proof,
                        size_t cap, size_t *count_out);

/* For every vector of vecs: the library proves exactly the vector's proof (prove over the
 * test leaves with v->a - a_base, v->b), then probes check what verifies it and what not. */
static void each_vector(const vec_t *vecs, size_t count, prove_fn prove, uint64_t a_base,
                        void (*probes)(const vec_t *v, const uint8_t *p, size_t n)) {
    setup();
    for (size_t t = 0; t < count; t++) {
        const vec_t *v = &vecs[t];
        uint8_t p[8 * 32], g[RAU_MERKLE_PROOF_MAX * 32];
        size_t n = load(v, p), gn = 0;
        CHECK_RC(prove(&lh[0][0], v->a - a_base, v->b, g, RAU_MERKLE_PROOF_MAX, &gn), 0);
        CHECK(gn == n && memcmp(g, p, 32 * n) == 0);
        probes(v, p, n);
    }
}

/* A kind's verifier with the vector's leaf and roots bound: (a, b) is (index, size) for
 * inclusion, (size1, size2) for consistency. */
typedef int (*verify_fn)(const vec_t *v, uint64_t a, uint64_t b, const uint8_t *p, size_t n);

static int verify_incl(const vec_t *v, uint64_t idx, uint64_t size, const uint8_t *p, size_t n) {
    return rau_merkle_verify_inclusion(idx, size, lh[v->a - 1], p, n, roots[v->b - 1]);
}

static int verify_cons(const vec_t *v, uint64_t s1, uint64_t s2, const uint8_t *p, size_t n) {
    return rau_merkle_verify_consistency(s1, s2, roots[v->a - 1], roots[v->b - 1], p, n);
}

/* The probes both kinds share: the proof of (a, b) fails with a off by one either way or
 * its bit 1 flipped, and with b doubled or halved. */
static void position_probes(verify_fn verify, const vec_t *v, uint64_t a, uint64_t b,
                            const uint8_t *p, size_t n) {
    CHECK(verify(v, a - 1, b, p, n) != 0);
    CHECK(verify(v, a + 1, b, p, n) != 0);
    CHECK(verify(v, a ^ 2, b, p, n) != 0);
    CHECK(verify(v, a, b * 2, p, n) != 0);
    CHECK(verify(v, a, b / 2, p, n) != 0);
}

static void inclusion_probes(const vec_t *v, const uint8_t *p, size_t n) {
    uint8_t w[8 * 32];
    uint64_t idx = v->a - 1, size = v->b;
    const uint8_t *root = roots[size - 1], *leaf = lh[idx];
    CHECK_RC(rau_merkle_verify_inclusion(idx, size, leaf, p, n, root), 0);
    /* probes: every one must fail */
    position_probes(verify_incl, v, idx, size, p, n);
    CHECK(rau_merkle_verify_inclusion(idx, size, some, p, n, root) != 0);
    CHECK(rau_merkle_verify_inclusion(idx, size, leaf, p, n, empty) != 0);
    CHECK(rau_merkle_verify_inclusion(idx, size, leaf, p, n, some) != 0);
    memcpy(w, p, 32 * n);
    memcpy(w + 32 * n, root, 32);
    CHECK(rau_merkle_verify_inclusion(idx, size, leaf, w, n + 1, root) != 0);
    memcpy(w, root, 32);
    memcpy(w + 32, p, 32 * n);
    CHECK(rau_merkle_verify_inclusion(idx, size, leaf, w, n + 1, root) != 0);
    for (size_t i = 0; i < n; i++) {
        memcpy(w, p, 32 * n);
        w[32 * i] ^= 8;
        CHECK(rau_merkle_verify_inclusion(idx, size, leaf, w, n, root) != 0);
    }
    if (n > 0) CHECK(rau_merkle_verify_inclusion(idx, size, leaf, p, n - 1, root) != 0);
    if (n > 1) {
        memcpy(w, p, 32);
        memcpy(w + 32, some, 32);
        memcpy(w + 64, p + 32, 32 * (n - 1));
        CHECK(rau_merkle_verify_inclusion(idx, size, leaf, w, n + 1, root) != 0);
    }
}

RA_TEST(inclusion_vectors_and_probes) {
    each_vector(INCL, sizeof INCL / sizeof INCL[0], rau_merkle_inclusion_proof, 1,
                inclusion_probes);
    /* index >= size */
    CHECK(rau_merkle_verify_inclusion(0, 0, some, NULL, 0, empty) != 0);
    CHECK(rau_merkle_verify_inclusion(2, 1, some, NULL, 0, some) != 0);
}

static void consistency_probes(const vec_t *v, const uint8_t *p, size_t n) {
    uint8_t w[8 * 32];
    uint64_t s1 = v->a, s2 = v->b;
    const uint8_t *r1 = roots[s1 - 1], *r2 = roots[s2 - 1];
    CHECK_RC(rau_merkle_verify_consistency(s1, s2, r1, r2, p, n), 0);
    if (n == 0) return;
    position_probes(verify_cons, v, s1, s2, p, n);
    CHECK(rau_merkle_verify_consistency(s1, s2, some, r2, p, n) != 0);
    CHECK(rau_merkle_verify_consistency(s1, s2, r1, some, p, n) != 0);
    CHECK(rau_merkle_verify_consistency(s1, s2, r2, r1, p, n) != 0);
    CHECK(rau_merkle_verify_consistency(s1, s2, r1, r2, p, 0) != 0);
    const uint8_t *extra[3] = {r1, r2, some};
    for (int e = 0; e < 3; e++) {
        memcpy(w, p, 32 * n);
        memcpy(w + 32 * n, extra[e], 32);
        CHECK(rau_merkle_verify_consistency(s1, s2, r1, r2, w, n + 1) != 0);
        memcpy(w, extra[e], 32);
        memcpy(w + 32, p, 32 * n);
        CHECK(rau_merkle_verify_consistency(s1, s2, r1, r2, w, n + 1) != 0);
    }
    memcpy(w, p, 32);
    memcpy(w + 32, p, 32 * n);
    CHECK(rau_merkle_verify_consistency(s1, s2, r1, r2, w, n + 1) != 0);
    CHECK(rau_merkle_verify_consistency(s1, s2, r1, r2, p, n - 1) != 0);
    for (size_t i = 0; i < n; i++) {
        memcpy(w, p, 32 * n);
        w[32 * i] ^= 16;
        CHECK(rau_merkle_verify_consistency(s1, s2, r1, r2, w, n) != 0);
    }
}

RA_TEST(consistency_vectors_and_probes) {
    each_vector(CONS, sizeof CONS / sizeof CONS[0], rau_merkle_consistency_proof, 0,
                consistency_probes);
    /* the fixed cases of TestVerifyConsistency */
    uint8_t a[32], b[32];
    memset(a, 1, 32);
    memset(b, 2, 32);
    CHECK(rau_merkle_verify_consistency(0, 0, a, b, NULL, 0) != 0);
    CHECK(rau_merkle_verify_consistency(1, 1, a, b, NULL, 0) != 0);
    CHECK_RC(rau_merkle_verify_consistency(0, 0, a, a, NULL, 0), 0);
    CHECK_RC(rau_merkle_verify_consistency(0, 1, a, b, NULL, 0), 0);
    CHECK_RC(rau_merkle_verify_consistency(1, 1, b, b, NULL, 0), 0);
    CHECK(rau_merkle_verify_consistency(1, 0, a, b, NULL, 0) != 0);
    CHECK(rau_merkle_verify_consistency(2, 1, a, b, NULL, 0) != 0);
    CHECK(rau_merkle_verify_consistency(1, 2, a, b, NULL, 0) != 0);
    CHECK(rau_merkle_verify_consistency(0, 0, empty, b, NULL, 0) != 0);
    CHECK(rau_merkle_verify_consistency(0, 0, empty, empty, empty, 1) != 0);
    CHECK(rau_merkle_verify_consistency(0, 1, empty, empty, empty, 1) != 0);
    CHECK(rau_merkle_verify_consistency(1, 1, empty, empty, empty, 1) != 0);
}

RA_TEST(generated_proofs_verify_up_to_40) {
    enum { N = 40 };
    static uint8_t l[N][32], r[N + 1][32];
    for (int i = 0; i < N; i++) {
        uint8_t d = (uint8_t)i;
        rau_merkle_leaf_hash(&d, 1, l[i]);
    }
    rau__mrange_t mr = {0};
    for (int n = 0; n <= N; n++) {
        uint8_t x[32];
        rau_merkle_root(&l[0][0], (uint64_t)n, r[n]);
        rau__mrange_root(&mr, x);
        CHECK(memcmp(x, r[n], 32) == 0);
        if (n < N) rau__mrange_push(&mr, l[n]);
    }
    uint8_t p[RAU_MERKLE_PROOF_MAX * 32];
    size_t pn;
    for (uint64_t size = 1; size <= N; size++)
        for (uint64_t i = 0; i < size; i++) {
            REQUIRE(rau_merkle_inclusion_proof(&l[0][0], i, size, p, RAU_MERKLE_PROOF_MAX, &pn) ==
                    0);
            if (rau_merkle_verify_inclusion(i, size, l[i], p, pn, r[size]) != 0)
                RA_FAILF("inclusion %llu in %llu", (unsigned long long)i, (unsigned long long)size);
        }
    for (uint64_t s2 = 0; s2 <= N; s2++)
        for (uint64_t s1 = 0; s1 <= s2; s1++) {
            REQUIRE(rau_merkle_consistency_proof(&l[0][0], s1, s2, p, RAU_MERKLE_PROOF_MAX, &pn) ==
                    0);
            if (rau_merkle_verify_consistency(s1, s2, r[s1], r[s2], p, pn) != 0)
                RA_FAILF("consistency %llu -> %llu", (unsigned long long)s1,
                         (unsigned long long)s2);
            /* a fork: the same proof against another tree of size s2 */
            if (s1 > 0 && s1 < s2 &&
                rau_merkle_verify_consistency(s1, s2, r[s1], r[s2 - 1], p, pn) == 0)
                RA_FAILF("fork accepted %llu -> %llu", (unsigned long long)s1,
                         (unsigned long long)s2);
        }
    CHECK_RC(rau_merkle_inclusion_proof(&l[0][0], 5, 40, p, 2, &pn), RAU_EBUFSIZE);
}

int main(void) {
    RA_RUN(roots_of_every_prefix, "AUD-I-8 RFC 6962 roots of the test leaves, compact range");
    RA_RUN(inclusion_vectors_and_probes, "AUD-I-8 inclusion proofs: vectors and corruptions");
    RA_RUN(consistency_vectors_and_probes, "AUD-I-8 consistency proofs: vectors and corruptions");
    RA_RUN(generated_proofs_verify_up_to_40, "AUD-I-8 every proof up to 40 leaves verifies");
    RA_DONE();
}
