/* Encoding v1: golden vectors (G-8), the strict decoder, and the frame limit.
 *
 * The golden vectors are built here from fixed inputs with the encoder, and compared with
 * the bytes and digests written in docs/FORMAT.md, with the decoder's view of those bytes,
 * and with b3sum. `test-codec --print` prints the vectors in FORMAT.md's layout. */
#include "internal.h"
#include "ra_test.h"

typedef struct {
    const char *name;
    const char *tenant;      /* as text: build parses it into hdr.tenant */
    ra__slice_hdr_in_t hdr;  /* the encoder's input; build sets tenant and prev_b3 (NULL) */
    int prev_is_v1;          /* prev_b3 = digest of vector 1, else all zero */
    uint8_t subject_fill[3]; /* subject i = 16 bytes of subject_fill[i], or 0..15 if 0xEE */
    uint64_t inc[3];
} vector_t;

/* hdr: tenant, dimension, window_start_s, window_len_s, seq, prev_b3, amnesia, host, version,
 * row_count. */
static const vector_t vectors[] = {
    {"v1-first-slice",
     "123e4567-e89b-12d3-a456-426614174000",
     {NULL, "bytes", 1699999200, 300, 1, NULL, 0, "gw-1", "0.1.0", 2},
     0,
     {0xEE, 0xFF},
     {1500, UINT64_MAX}},
    {"v1-chained-amnesia",
     "123e4567-e89b-12d3-a456-426614174000",
     {NULL, "requests", 1699999500, 300, 2, NULL, 1, "", "0.1.0", 1},
     1,
     {0x01},
     {1}},
};
#define NVEC (sizeof vectors / sizeof vectors[0])

static size_t build(const vector_t *v, const uint8_t *prev, uint8_t *out) {
    ra_tenant_t t;
    if (ra_tenant_parse(v->tenant, strlen(v->tenant), &t) != 0) abort();
    ra__slice_hdr_in_t in = v->hdr;
    in.tenant = t.b;
    in.prev_b3 = prev;
    size_t off = ra__encode_header(&in, out);
    for (uint32_t i = 0; i < v->hdr.row_count; i++) {
        uint8_t s[16];
        for (int k = 0; k < 16; k++)
            s[k] = v->subject_fill[i] == 0xEE ? (uint8_t)k : v->subject_fill[i];
        ra__encode_row(out + off, s, v->inc[i]);
        off += RA_ENC_ROW;
    }
    if (off != ra__encode_size(&in)) abort();
    return off;
}

/* Builds every vector; digests[i] gets vector i's BLAKE3. */
static size_t build_all(uint8_t bufs[][512], uint8_t digests[][32]) {
    static const uint8_t zero[32];
    size_t lens[NVEC];
    for (size_t i = 0; i < NVEC; i++) {
        lens[i] = build(&vectors[i], vectors[i].prev_is_v1 ? digests[0] : zero, bufs[i]);
        ra_b3(bufs[i], lens[i], digests[i]);
    }
    return lens[0] | (lens[1] << 16);
}

static void print_vectors(void) {
    static uint8_t bufs[NVEC][512], dig[NVEC][32];
    size_t packed = build_all(bufs, dig);
    for (size_t i = 0; i < NVEC; i++) {
        size_t len = i == 0 ? (packed & 0xFFFF) : (packed >> 16);
        printf("```golden-vector %s\n", vectors[i].name);
        for (size_t k = 0; k < len; k++)
            printf("%02x%s", bufs[i][k], (k % 16 == 15 || k + 1 == len) ? "\n" : " ");
        char hex[65];
        ra_hex(dig[i], 32, hex);
        printf("b3 %s\n```\n\n", hex);
    }
}

/* Reads the golden vector called `name` from docs/FORMAT.md; -1 without its b3 line too. */
static int doc_vector(const char *name, uint8_t *out, size_t cap, size_t *len, char *b3hex) {
    b3hex[0] = '\0';
    if (ra_fix_doc_block(RA_SOURCE_DIR "/docs/FORMAT.md", "golden-vector", name, out, cap, len,
                         b3hex) != 0)
        return -1;
    return b3hex[0] ? 0 : -1;
}

RA_TEST(G_8_golden_vectors_match_format_md) {
    static uint8_t bufs[NVEC][512], dig[NVEC][32];
    size_t packed = build_all(bufs, dig);
    for (size_t i = 0; i < NVEC; i++) {
        size_t len = i == 0 ? (packed & 0xFFFF) : (packed >> 16);
        uint8_t doc[512];
        size_t dlen = 0;
        char doc_b3[65] = {0}, mine[65], oracle[65];
        if (doc_vector(vectors[i].name, doc, sizeof doc, &dlen, doc_b3) != 0) {
            RA_FAILF("docs/FORMAT.md has no readable golden vector %s", vectors[i].name);
            continue;
        }
        CHECK_EQ_U64(dlen, len);
        CHECK(dlen == len && memcmp(doc, bufs[i], len) == 0);
        ra_hex(dig[i], 32, mine);
        CHECK_STR(doc_b3, mine);
        REQUIRE(ra_t_b3sum_bytes(doc, dlen, oracle) == 0);
        CHECK_STR(oracle, mine);
        /* The decoder reads the documented bytes back into the inputs. */
        ra_slice_t *s = NULL;
        CHECK_RC(ra_slice_decode(doc, dlen, &s), 0);
        if (!s) continue;
        ra_slice_id_t id;
        ra_slice_get_id(s, &id);
        CHECK_EQ_I64(id.window_start_s, vectors[i].hdr.window_start_s);
        CHECK_EQ_U64(id.window_len_s, vectors[i].hdr.window_len_s);
        CHECK_EQ_U64(id.seq, vectors[i].hdr.seq);
        CHECK_STR(ra_slice_dimension(s), vectors[i].hdr.dimension);
        CHECK_STR(ra_slice_host(s), vectors[i].hdr.host);
        CHECK_STR(ra__slice_version(s), vectors[i].hdr.version);
        CHECK(ra_slice_amnesia(s) == vectors[i].hdr.amnesia);
        ra_tenant_t t;
        char ts[37];
        ra_slice_get_tenant(s, &t);
        ra_tenant_format(&t, ts);
        CHECK_STR(ts, vectors[i].tenant);
        CHECK_EQ_U64(ra_slice_row_count(s), vectors[i].hdr.row_count);
        for (uint32_t r = 0; r < vectors[i].hdr.row_count; r++) {
            uint64_t inc;
            ra_slice_row(s, r, NULL, &inc);
            CHECK_EQ_U64(inc, vectors[i].inc[r]);
        }
        CHECK_MEM(ra_slice_b3(s), dig[i], 32);
        if (vectors[i].prev_is_v1) CHECK_MEM(ra_slice_prev_b3(s), dig[0], 32);
        ra_slice_unref(s);
    }
}

/* Each mutation of a valid encoding that v1 forbids is a SchemaViolation. */
RA_TEST(decoder_rejects_every_deviation) {
    static uint8_t bufs[NVEC][512], dig[NVEC][32];
    size_t len = build_all(bufs, dig) & 0xFFFF;
    const uint8_t *good = bufs[0];
    uint8_t b[600];
    ra_slice_t *s = NULL;
    /* offsets in vector 1: dim at 76 ("bytes", 5) host at 82 ("gw-1", 4), version at 87
     * ("0.1.0", 5), row count at 93, rows at 97. */
    struct {
        const char *what;
        size_t off;
        uint8_t val;
    } muts[] = {
        {"magic", 0, 'X'},
        {"version 2", 4, 2},
        {"unknown flag", 5, 0x02},
        {"reserved", 6, 1},
        {"reserved", 7, 1},
        {"window_len 59", 32, 59},
        {"window_start unaligned", 24, 0x01},
        {"dimension empty", 76, 0},
        {"dimension uppercase", 77, 'B'},
        {"dimension digit first", 77, '1'},
        {"host with space", 84, ' '},
        {"version empty", 87, 0},
        {"row count 0", 93, 0},
        {"row count 3", 93, 3},
    };
    for (size_t i = 0; i < sizeof muts / sizeof muts[0]; i++) {
        memcpy(b, good, len);
        b[muts[i].off] = muts[i].val;
        int rc = ra_slice_decode(b, len, &s);
        if (rc != RA_ESCHEMA) RA_FAILF("mutation '%s': got %s", muts[i].what, ra_err_name(rc));
        ra_slice_unref(s);
        s = NULL;
    }
    /* rows out of order, window_len 3601, seq 0, inc 0, duplicate rows, trailing byte */
    memcpy(b, good, len);
    b[97 + 24] = 0;
    b[97 + 25] = 0;
    CHECK_RC(ra_slice_decode(b, len, &s), RA_ESCHEMA);
    memcpy(b, good, len);
    ra__put_u32(b + 32, 3601);
    CHECK_RC(ra_slice_decode(b, len, &s), RA_ESCHEMA);
    memcpy(b, good, len);
    ra__put_u64(b + 36, 0);
    CHECK_RC(ra_slice_decode(b, len, &s), RA_ESCHEMA);
    memcpy(b, good, len);
    ra__put_u64(b + 97 + 16, 0);
    CHECK_RC(ra_slice_decode(b, len, &s), RA_ESCHEMA);
    memcpy(b, good, len);
    memcpy(b + 97 + 24, b + 97, 16);
    CHECK_RC(ra_slice_decode(b, len, &s), RA_ESCHEMA);
    memcpy(b, good, len);
    b[len] = 0;
    CHECK_RC(ra_slice_decode(b, len + 1, &s), RA_ESCHEMA);
    /* Every truncation is refused, never read past. */
    for (size_t cut = 0; cut < len; cut++) {
        int rc = ra_slice_decode(good, cut, &s);
        if (rc == 0) {
            RA_FAILF("truncation to %zu bytes accepted", cut);
            ra_slice_unref(s);
        }
    }
    CHECK_RC(ra_slice_decode(NULL, 0, &s), RA_ESCHEMA);
    CHECK_RC(ra_slice_decode(good, len, NULL), RA_EINVAL);
    CHECK_RC(ra_slice_decode(good, len, &s), 0);
    ra_slice_unref(s);
}

RA_TEST(decoder_refuses_oversize_before_allocating) {
    size_t big = (1u << 20) + 1;
    uint8_t *b = calloc(1, big);
    REQUIRE(b);
    ra_slice_t *s = NULL;
    CHECK_RC(ra_slice_decode(b, big, &s), RA_EOVERSIZE);
    CHECK(s == NULL);
    free(b);
}

/* Random single-byte and random-length mutations never crash the decoder (a quick,
 * seeded sweep; the libFuzzer harness goes further). */
RA_TEST(decoder_survives_random_mutations) {
    const uint64_t seed = 0x5eedc0de;
    printf("# mutation seed %#llx\n", (unsigned long long)seed);
    static uint8_t bufs[NVEC][512], dig[NVEC][32];
    size_t len = build_all(bufs, dig) & 0xFFFF;
    uint64_t rng = seed;
    uint8_t b[600];
    unsigned accepted = 0;
    for (int i = 0; i < 200000; i++) {
        memcpy(b, bufs[0], len);
        int flips = (int)(ra_t_rand(&rng) % 4) + 1;
        for (int k = 0; k < flips; k++)
            b[ra_t_rand(&rng) % len] = (uint8_t)ra_t_rand(&rng);
        size_t l = ra_t_rand(&rng) % 8 == 0 ? (size_t)(ra_t_rand(&rng) % (len + 1)) : len;
        ra_slice_t *s = NULL;
        if (ra_slice_decode(b, l, &s) == 0) {
            accepted++;
            uint8_t d[32];
            ra_b3(b, l, d);
            CHECK_MEM(ra_slice_b3(s), d, 32);
            ra_slice_unref(s);
        }
    }
    printf("# %u of 200000 mutants were still valid v1 (e.g. changed counts)\n", accepted);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--print") == 0) {
        print_vectors();
        return 0;
    }
    printf("# test-codec\n");
    RA_RUN(G_8_golden_vectors_match_format_md,
           "G-8 cross-arch parity: golden vectors in docs/FORMAT.md, b3sum");
    RA_RUN(decoder_rejects_every_deviation, "decoder rejects every deviation from v1");
    RA_RUN(decoder_refuses_oversize_before_allocating, "decoder refuses > 1 MiB (OversizeFrame)");
    RA_RUN(decoder_survives_random_mutations, "decoder survives seeded random mutations");
    RA_DONE();
}
