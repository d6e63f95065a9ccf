/* Canonical records (docs/AUDIT-FORMAT.md): the golden vectors in the doc, byte for byte
 * (AUD-I-2), NFC vs NFD (AUD-I-3), limits (AUD-I-4), the decoder's refusals (AUD-I-7) and the
 * dedupe key (AUD-I-6). An independent little encoder below follows the doc's tables, so the
 * library is checked against a second reading of the format, and it can also write the
 * non-canonical variants the decoder must refuse.
 *
 *   test-audit-record --print-golden   prints the vectors for docs/AUDIT-FORMAT.md */
#include "rau_test.h"

static const char *WRITER = "gw-1", *STREAM = "rejects";
#define TS 1700000000000LL

#define S(k, v)                                                                                    \
    { k, sizeof(k) - 1, RAU_ATTR_STR, v, sizeof(v) - 1, 0 }
#define I(k, v)                                                                                    \
    { k, sizeof(k) - 1, RAU_ATTR_INT, NULL, 0, v }
#define B(k, v)                                                                                    \
    { k, sizeof(k) - 1, RAU_ATTR_BOOL, NULL, 0, v }

static const rau_attr_t attrs_reject[] = {
    S("tenant", "acme"),     S("reason", "capacity"), I("count", 3),
    S("dimension", "bytes"), B("retry", 1),           I("delta", -5),
};
/* The same attribute, NFC (U+00E9) and NFD (e U+0301), in key and value. */
static const rau_attr_t attrs_nfc[] = {S("r\xc3\xa9gion", "caf\xc3\xa9")};
static const rau_attr_t attrs_nfd[] = {S("re\xcc\x81gion", "cafe\xcc\x81")};
/* Bytewise key order: "B" < "a" < "ab" < "b" < "é" (0xc3 0xa9). */
static const rau_attr_t attrs_order[] = {
    I("b", 1), I("a", 2), I("\xc3\xa9", 3), I("ab", 4), I("B", 5),
};

typedef struct golden_s {
    const char *name;
    uint64_t seq;
    int prev_from; /* -1: zero prev; else the self_hash of vector i */
    rau_event_t ev;
} golden_t;

static const golden_t GOLDEN[] = {
    {"minimal", 1, -1, {"reject", 6, TS, NULL, 0}},
    {"reject", 2, 0, {"reject", 6, TS + 1, attrs_reject, 6}},
    {"nfc", 3, 1, {"export.fail", 11, TS + 2, attrs_nfc, 1}},
    {"keyorder", 4, 2, {"operator", 8, TS + 3, attrs_order, 5}},
};
#define NGOLDEN (sizeof GOLDEN / sizeof GOLDEN[0])

static uint8_t g_bytes[NGOLDEN][RAU_RECORD_MAX];
static size_t g_len[NGOLDEN];
static uint8_t g_hash[NGOLDEN][32], g_dedupe[NGOLDEN][32];

static int build_golden(void) {
    for (size_t i = 0; i < NGOLDEN; i++) {
        const uint8_t *prev = GOLDEN[i].prev_from < 0 ? NULL : g_hash[GOLDEN[i].prev_from];
        int rc = rau_record_encode(WRITER, STREAM, GOLDEN[i].seq, prev, &GOLDEN[i].ev, g_bytes[i],
                                   sizeof g_bytes[i], &g_len[i]);
        if (rc) return rc;
        rau_record_hash(g_bytes[i], g_len[i], g_hash[i]);
        rau_record_dedupe_key(g_bytes[i], g_len[i], g_dedupe[i]);
    }
    return 0;
}

/* ---- the independent encoder (AUDIT-FORMAT.md §1) ---- */
typedef struct ind_s {
    uint8_t b[8192];
    size_t n;
} ind_t;
static void i_put(ind_t *o, const void *p, size_t n) {
    memcpy(o->b + o->n, p, n);
    o->n += n;
}
static void i_u8(ind_t *o, unsigned v) {
    o->b[o->n++] = (uint8_t)v;
}
static void i_u64(ind_t *o, uint64_t v) {
    for (int s = 56; s >= 0; s -= 8)
        i_u8(o, (unsigned)(v >> s) & 255);
}
static void i_str8(ind_t *o, const char *s) {
    i_u8(o, (unsigned)strlen(s));
    i_put(o, s, strlen(s));
}
static void i_head(ind_t *o, uint64_t seq, const uint8_t *prev, int64_t ts, const char *kind,
                   unsigned nattrs) {
    static const uint8_t zero[32];
    o->n = 0;
    i_put(o, "rau\x01", 4);
    i_u64(o, seq);
    i_put(o, prev ? prev : zero, 32);
    i_u64(o, (uint64_t)ts);
    i_str8(o, WRITER);
    i_str8(o, STREAM);
    i_str8(o, kind);
    i_u8(o, nattrs);
}
static void i_attr_str(ind_t *o, const char *k, const char *v) {
    i_str8(o, k);
    i_u8(o, RAU_ATTR_STR);
    i_u8(o, (unsigned)(strlen(v) >> 8));
    i_u8(o, (unsigned)strlen(v) & 255);
    i_put(o, v, strlen(v));
}
static void i_attr_int(ind_t *o, const char *k, int64_t v) {
    i_str8(o, k);
    i_u8(o, RAU_ATTR_INT);
    i_u64(o, (uint64_t)v);
}

/* Finds "golden <name> <field> <hex>" in docs/AUDIT-FORMAT.md. */
static int doc_vector(const char *name, const char *field, uint8_t *out, size_t cap, size_t *n) {
    FILE *f = fopen(RA_SOURCE_DIR "/docs/AUDIT-FORMAT.md", "r");
    if (!f) return -1;
    static char line[16384];
    char want[128];
    snprintf(want, sizeof want, "golden %s %s ", name, field);
    int found = -1;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, want, strlen(want)) == 0) {
            *n = rau_t_unhex(line + strlen(want), out, cap);
            found = 0;
            break;
        }
    }
    fclose(f);
    return found;
}

RA_TEST(golden_vectors_match_the_doc) {
    REQUIRE(build_golden() == 0);
    for (size_t i = 0; i < NGOLDEN; i++) {
        uint8_t want[RAU_RECORD_MAX];
        size_t n = 0;
        if (doc_vector(GOLDEN[i].name, "bytes", want, sizeof want, &n) != 0) {
            RA_FAILF("golden %s bytes: not in docs/AUDIT-FORMAT.md", GOLDEN[i].name);
            continue;
        }
        if (n != g_len[i] || memcmp(want, g_bytes[i], n) != 0)
            RA_FAILF("golden %s: encoder output differs from the doc", GOLDEN[i].name);
        CHECK(doc_vector(GOLDEN[i].name, "self_hash", want, 32, &n) == 0 && n == 32 &&
              memcmp(want, g_hash[i], 32) == 0);
        CHECK(doc_vector(GOLDEN[i].name, "dedupe", want, 32, &n) == 0 && n == 32 &&
              memcmp(want, g_dedupe[i], 32) == 0);
    }
}

RA_TEST(self_hash_is_b3sum_of_the_bytes) {
    REQUIRE(build_golden() == 0);
    for (size_t i = 0; i < NGOLDEN; i++) {
        char path[600], cmd[1400], got[80] = "", want[65];
        snprintf(path, sizeof path, "%s/b3-%zu", rau_t_tmpdir(), i);
        FILE *f = fopen(path, "wb");
        REQUIRE(f && fwrite(g_bytes[i], 1, g_len[i], f) == g_len[i]);
        fclose(f);
        snprintf(cmd, sizeof cmd, "%s --no-names '%s'", RA_B3SUM, path);
        FILE *p = popen(cmd, "r");
        REQUIRE(p);
        CHECK(fscanf(p, "%64s", got) == 1);
        pclose(p);
        rau_t_hex(g_hash[i], 32, want);
        CHECK_STR(got, want);
        unlink(path);
    }
}

RA_TEST(independent_encoder_agrees) {
    REQUIRE(build_golden() == 0);
    ind_t o;
    i_head(&o, 1, NULL, TS, "reject", 0);
    CHECK(o.n == g_len[0] && memcmp(o.b, g_bytes[0], o.n) == 0);
    /* reject: keys sorted count, delta, dimension, reason, retry, tenant */
    i_head(&o, 2, g_hash[0], TS + 1, "reject", 6);
    i_attr_int(&o, "count", 3);
    i_attr_int(&o, "delta", -5);
    i_attr_str(&o, "dimension", "bytes");
    i_attr_str(&o, "reason", "capacity");
    i_str8(&o, "retry");
    i_u8(&o, RAU_ATTR_BOOL);
    i_u8(&o, 1);
    i_attr_str(&o, "tenant", "acme");
    CHECK(o.n == g_len[1] && memcmp(o.b, g_bytes[1], o.n) == 0);
    i_head(&o, 4, g_hash[2], TS + 3, "operator", 5);
    i_attr_int(&o, "B", 5);
    i_attr_int(&o, "a", 2);
    i_attr_int(&o, "ab", 4);
    i_attr_int(&o, "b", 1);
    i_attr_int(&o, "\xc3\xa9", 3);
    CHECK(o.n == g_len[3] && memcmp(o.b, g_bytes[3], o.n) == 0);
}

RA_TEST(nfd_input_gives_the_nfc_bytes) {
    REQUIRE(build_golden() == 0);
    rau_event_t ev = GOLDEN[2].ev;
    ev.attrs = attrs_nfd;
    uint8_t b[RAU_RECORD_MAX];
    size_t n = 0;
    CHECK_RC(rau_record_encode(WRITER, STREAM, 3, g_hash[1], &ev, b, sizeof b, &n), 0);
    CHECK(n == g_len[2] && memcmp(b, g_bytes[2], n) == 0);
    /* The NFD bytes themselves are not canonical. */
    ind_t o;
    i_head(&o, 3, g_hash[1], TS + 2, "export.fail", 1);
    i_attr_str(&o, "re\xcc\x81gion", "cafe\xcc\x81");
    rau_record_t *r = NULL;
    CHECK_RC(rau_record_decode(o.b, o.n, &r), RAU_ENONCANON);
    CHECK(r == NULL);
    /* Same key twice once normalized: a duplicate. */
    rau_attr_t both[2] = {attrs_nfc[0], attrs_nfd[0]};
    ev.attrs = both;
    ev.attr_count = 2;
    CHECK_RC(rau_record_encode(WRITER, STREAM, 3, NULL, &ev, b, sizeof b, &n), RAU_ESCHEMA);
}

RA_TEST(decode_round_trip_and_accessors) {
    REQUIRE(build_golden() == 0);
    rau_record_t *r = NULL;
    REQUIRE(rau_record_decode(g_bytes[1], g_len[1], &r) == 0);
    CHECK_EQ_U64(rau_record_seq(r), 2);
    CHECK(memcmp(rau_record_prev(r), g_hash[0], 32) == 0);
    CHECK(memcmp(rau_record_self_hash(r), g_hash[1], 32) == 0);
    CHECK(memcmp(rau_record_dedupe(r), g_dedupe[1], 32) == 0);
    CHECK_STR(rau_record_writer_id(r), WRITER);
    CHECK_STR(rau_record_stream(r), STREAM);
    CHECK_STR(rau_record_kind(r), "reject");
    CHECK_EQ_U64(rau_record_ts_ms(r), TS + 1);
    CHECK_EQ_U64(rau_record_attr_count(r), 6);
    rau_attr_t a;
    CHECK_RC(rau_record_attr(r, 1, &a), 0);
    CHECK(a.key_len == 5 && memcmp(a.key, "delta", 5) == 0 && a.type == RAU_ATTR_INT &&
          a.num == -5);
    CHECK_RC(rau_record_attr(r, 6, &a), RAU_ENOTFOUND);
    size_t n;
    CHECK(memcmp(rau_record_bytes(r, &n), g_bytes[1], g_len[1]) == 0 && n == g_len[1]);
    rau_record_free(r);
}

RA_TEST(decoder_refuses_non_canonical_bytes) {
    REQUIRE(build_golden() == 0);
    rau_record_t *r = NULL;
    uint8_t b[RAU_RECORD_MAX + 16];
    /* every strict prefix */
    for (size_t i = 0; i < g_len[1]; i++) {
        int rc = rau_record_decode(g_bytes[1], i, &r);
        if (rc == 0 || r) RA_FAILF("prefix of %zu bytes accepted", i);
    }
    memcpy(b, g_bytes[1], g_len[1]);
    b[g_len[1]] = 0;
    CHECK_RC(rau_record_decode(b, g_len[1] + 1, &r), RAU_ENONCANON); /* trailing byte */
    b[3] = 2;
    CHECK_RC(rau_record_decode(b, g_len[1], &r), RAU_EVERSION);
    /* keys out of order */
    ind_t o;
    i_head(&o, 1, NULL, TS, "reject", 2);
    i_attr_int(&o, "b", 1);
    i_attr_int(&o, "a", 2);
    CHECK_RC(rau_record_decode(o.b, o.n, &r), RAU_ENONCANON);
    /* bool 2 */
    i_head(&o, 1, NULL, TS, "reject", 1);
    i_str8(&o, "x");
    i_u8(&o, RAU_ATTR_BOOL);
    i_u8(&o, 2);
    CHECK_RC(rau_record_decode(o.b, o.n, &r), RAU_ENONCANON);
    /* an unknown type (a float would need one) */
    i_head(&o, 1, NULL, TS, "reject", 1);
    i_str8(&o, "x");
    i_u8(&o, 4);
    i_u64(&o, 0x3ff0000000000000ull);
    CHECK_RC(rau_record_decode(o.b, o.n, &r), RAU_ENONCANON);
    /* seq 0 */
    i_head(&o, 0, NULL, TS, "reject", 0);
    CHECK_RC(rau_record_decode(o.b, o.n, &r), RAU_ENONCANON);
    /* invalid UTF-8 in a value */
    i_head(&o, 1, NULL, TS, "reject", 1);
    i_attr_str(&o, "x", "\xff");
    CHECK(rau_record_decode(o.b, o.n, &r) != 0);
    /* every single bit flip: refused, or a different record (never the same hash) */
    uint64_t accepted = 0;
    for (size_t i = 0; i < g_len[1] * 8; i++) {
        memcpy(b, g_bytes[1], g_len[1]);
        b[i / 8] ^= (uint8_t)(1u << (i % 8));
        if (rau_record_decode(b, g_len[1], &r) == 0) {
            accepted++;
            CHECK(memcmp(rau_record_self_hash(r), g_hash[1], 32) != 0);
            rau_record_free(r);
        }
    }
    printf("# bit flips decoded as other valid records: %" PRIu64 " of %zu\n", accepted,
           g_len[1] * 8);
}

/* AUD-I-3: nfc() scans 8 bytes at a time for the ASCII fast path: a NUL or a non-ASCII
 * byte at any position of a string (in the words and in the tail) still takes the slow
 * path: NUL refused, an NFD sequence composed (the same bytes as its NFC input). */
RA_TEST(nul_and_non_ascii_at_every_position) {
    uint8_t b[RAU_RECORD_MAX], want[RAU_RECORD_MAX];
    size_t n = 0, wn = 0;
    for (size_t len = 1; len <= 40; len++) {
        for (size_t at = 0; at < len; at++) {
            char s[64];
            memset(s, 'a', len);
            s[at] = '\0';
            rau_attr_t a = {"k", 1, RAU_ATTR_STR, s, len, 0};
            rau_event_t ev = {"reject", 6, TS, &a, 1};
            CHECK_RC(rau_record_encode(WRITER, STREAM, 1, NULL, &ev, b, sizeof b, &n), RAU_ESCHEMA);
            /* "e" + U+0301 at `at` (NFD) encodes as U+00E9 (NFC) */
            char d[64], c[64];
            memset(d, 'a', len);
            memcpy(d + at, "e\xcc\x81", 3);
            memset(d + at + 3, 'a', len - at);
            memset(c, 'a', len);
            memcpy(c + at, "\xc3\xa9", 2);
            memset(c + at + 2, 'a', len - at);
            rau_attr_t ad = {"k", 1, RAU_ATTR_STR, d, len + 3, 0};
            rau_attr_t ac = {"k", 1, RAU_ATTR_STR, c, len + 2, 0};
            ev.attrs = &ad;
            CHECK_RC(rau_record_encode(WRITER, STREAM, 1, NULL, &ev, b, sizeof b, &n), 0);
            ev.attrs = &ac;
            CHECK_RC(rau_record_encode(WRITER, STREAM, 1, NULL, &ev, want, sizeof want, &wn), 0);
            CHECK(n == wn && memcmp(b, want, n) == 0);
        }
    }
}

RA_TEST(limits_and_schema) {
    uint8_t b[RAU_RECORD_MAX];
    size_t n;
    rau_event_t ev = {"reject", 6, TS, NULL, 0};
    static char big[2048];
    memset(big, 'x', sizeof big);
    rau_attr_t a[RAU_ATTR_COUNT_MAX + 1];
    char keys[RAU_ATTR_COUNT_MAX + 1][8];
    /* one value over the attribute budget */
    a[0] = (rau_attr_t){"k", 1, RAU_ATTR_STR, big, 1100, 0};
    ev.attrs = a;
    ev.attr_count = 1;
    CHECK_RC(rau_record_encode(WRITER, STREAM, 1, NULL, &ev, b, sizeof b, &n), RAU_ESIZE);
    /* the budget exactly: 1 + 1 + 1 + 2 + 1019 = 1024 */
    a[0].str_len = 1019;
    CHECK_RC(rau_record_encode(WRITER, STREAM, 1, NULL, &ev, b, sizeof b, &n), 0);
    a[0].str_len = 1020;
    CHECK_RC(rau_record_encode(WRITER, STREAM, 1, NULL, &ev, b, sizeof b, &n), RAU_ESIZE);
    /* 33 attributes */
    for (int i = 0; i <= RAU_ATTR_COUNT_MAX; i++) {
        snprintf(keys[i], sizeof keys[i], "k%02d", i);
        a[i] = (rau_attr_t){keys[i], 3, RAU_ATTR_INT, NULL, 0, i};
    }
    ev.attr_count = RAU_ATTR_COUNT_MAX + 1;
    CHECK_RC(rau_record_encode(WRITER, STREAM, 1, NULL, &ev, b, sizeof b, &n), RAU_ESIZE);
    ev.attr_count = RAU_ATTR_COUNT_MAX;
    CHECK_RC(rau_record_encode(WRITER, STREAM, 1, NULL, &ev, b, sizeof b, &n), 0);
    /* key too long, empty, control character */
    a[0] = (rau_attr_t){big, RAU_ATTR_KEY_MAX + 1, RAU_ATTR_INT, NULL, 0, 0};
    ev.attr_count = 1;
    CHECK_RC(rau_record_encode(WRITER, STREAM, 1, NULL, &ev, b, sizeof b, &n), RAU_ESIZE);
    a[0].key_len = 0;
    CHECK_RC(rau_record_encode(WRITER, STREAM, 1, NULL, &ev, b, sizeof b, &n), RAU_ESCHEMA);
    a[0] = (rau_attr_t){"a\tb", 3, RAU_ATTR_INT, NULL, 0, 0};
    CHECK_RC(rau_record_encode(WRITER, STREAM, 1, NULL, &ev, b, sizeof b, &n), RAU_ESCHEMA);
    /* invalid UTF-8, an unassigned code point (U+0378), NUL */
    a[0] = (rau_attr_t){"k", 1, RAU_ATTR_STR, "\xc3", 1, 0};
    CHECK_RC(rau_record_encode(WRITER, STREAM, 1, NULL, &ev, b, sizeof b, &n), RAU_ESCHEMA);
    a[0].str = "\xcd\xb8";
    a[0].str_len = 2;
    CHECK_RC(rau_record_encode(WRITER, STREAM, 1, NULL, &ev, b, sizeof b, &n), RAU_ESCHEMA);
    a[0].str = "a\0b";
    a[0].str_len = 3;
    CHECK_RC(rau_record_encode(WRITER, STREAM, 1, NULL, &ev, b, sizeof b, &n), RAU_ESCHEMA);
    /* types */
    a[0] = (rau_attr_t){"k", 1, RAU_ATTR_BOOL, NULL, 0, 2};
    CHECK_RC(rau_record_encode(WRITER, STREAM, 1, NULL, &ev, b, sizeof b, &n), RAU_EINVAL);
    a[0].type = 9;
    CHECK_RC(rau_record_encode(WRITER, STREAM, 1, NULL, &ev, b, sizeof b, &n), RAU_EINVAL);
    ev.attr_count = 0;
    /* ids and kind */
    CHECK_RC(rau_record_encode("gw 1", STREAM, 1, NULL, &ev, b, sizeof b, &n), RAU_ESCHEMA);
    CHECK_RC(rau_record_encode("", STREAM, 1, NULL, &ev, b, sizeof b, &n), RAU_ESCHEMA);
    big[RAU_ID_MAX + 1] = 0;
    CHECK_RC(rau_record_encode(big, STREAM, 1, NULL, &ev, b, sizeof b, &n), RAU_ESIZE);
    big[RAU_ID_MAX + 1] = 'x';
    ev.kind = "Reject";
    CHECK_RC(rau_record_encode(WRITER, STREAM, 1, NULL, &ev, b, sizeof b, &n), RAU_ESCHEMA);
    ev.kind = "reject";
    CHECK_RC(rau_record_encode(WRITER, STREAM, 0, NULL, &ev, b, sizeof b, &n), RAU_EINVAL);
    ev.ts_ms = -1;
    CHECK_RC(rau_record_encode(WRITER, STREAM, 1, NULL, &ev, b, sizeof b, &n), RAU_EINVAL);
    ev.ts_ms = TS;
    /* a short buffer reports the size needed */
    CHECK_RC(rau_record_encode(WRITER, STREAM, 1, NULL, &ev, b, 10, &n), RAU_EBUFSIZE);
    REQUIRE(build_golden() == 0);
    CHECK_EQ_U64(n, g_len[0]);
    CHECK_STR(rau_err_name(RAU_ESIZE), "SizeExceeded");
    CHECK_STR(rau_err_name(1), "Unknown");
}

RA_TEST(dedupe_key_ignores_position) {
    REQUIRE(build_golden() == 0);
    uint8_t b[RAU_RECORD_MAX], k[32], h[32];
    size_t n;
    memset(h, 7, 32);
    REQUIRE(rau_record_encode(WRITER, STREAM, 99, h, &GOLDEN[1].ev, b, sizeof b, &n) == 0);
    CHECK_RC(rau_record_dedupe_key(b, n, k), 0);
    CHECK(memcmp(k, g_dedupe[1], 32) == 0);
    rau_record_hash(b, n, h);
    CHECK(memcmp(h, g_hash[1], 32) != 0);
    rau_event_t ev = GOLDEN[1].ev;
    ev.ts_ms++;
    REQUIRE(rau_record_encode(WRITER, STREAM, 2, g_hash[0], &ev, b, sizeof b, &n) == 0);
    rau_record_dedupe_key(b, n, k);
    CHECK(memcmp(k, g_dedupe[1], 32) != 0);
    REQUIRE(rau_record_encode(WRITER, "other", 2, g_hash[0], &GOLDEN[1].ev, b, sizeof b, &n) == 0);
    rau_record_dedupe_key(b, n, k);
    CHECK(memcmp(k, g_dedupe[1], 32) != 0);
}

RA_TEST(random_events_round_trip) {
    uint64_t seed = 0x5eed0016;
    printf("# seed %#" PRIx64 "\n", seed);
    static const char *vals[] = {
        "",  "x",        "caf\xc3\xa9", "cafe\xcc\x81", "\xe2\x82\xac 5", "\xf0\x9f\x98\x80",
        "Ä", "A\xcc\x88"};
    for (int iter = 0; iter < 2000; iter++) {
        rau_attr_t a[8];
        char keys[8][8];
        size_t na = ra_fix_splitmix64(&seed) % 9;
        for (size_t i = 0; i < na; i++) {
            snprintf(keys[i], sizeof keys[i], "k%u", (unsigned)(ra_fix_splitmix64(&seed) % 1000));
            a[i] = (rau_attr_t){
                keys[i], strlen(keys[i]), 1 + (int)(ra_fix_splitmix64(&seed) % 3), NULL, 0, 0};
            if (a[i].type == RAU_ATTR_STR) {
                a[i].str = vals[ra_fix_splitmix64(&seed) % 8];
                a[i].str_len = strlen(a[i].str);
            } else if (a[i].type == RAU_ATTR_INT) {
                a[i].num = (int64_t)ra_fix_splitmix64(&seed);
            } else {
                a[i].num = (int64_t)(ra_fix_splitmix64(&seed) & 1);
            }
        }
        rau_event_t ev = {"shed", 4, (int64_t)(ra_fix_splitmix64(&seed) >> 1), a, na};
        uint8_t b[RAU_RECORD_MAX], b2[RAU_RECORD_MAX];
        size_t n, n2;
        int rc = rau_record_encode(WRITER, STREAM, 1 + iter, NULL, &ev, b, sizeof b, &n);
        if (rc == RAU_ESCHEMA) continue; /* a duplicate key drawn */
        REQUIRE(rc == 0);
        rau_record_t *r = NULL;
        REQUIRE(rau_record_decode(b, n, &r) == 0);
        rau_attr_t d[RAU_ATTR_COUNT_MAX];
        for (size_t i = 0; i < rau_record_attr_count(r); i++)
            rau_record_attr(r, i, &d[i]);
        rau_event_t ev2 = {rau_record_kind(r), 4, rau_record_ts_ms(r), d, rau_record_attr_count(r)};
        REQUIRE(rau_record_encode(WRITER, STREAM, rau_record_seq(r), rau_record_prev(r), &ev2, b2,
                                  sizeof b2, &n2) == 0);
        CHECK(n == n2 && memcmp(b, b2, n) == 0);
        rau_record_free(r);
    }
}

static void print_golden(void) {
    if (build_golden() != 0) exit(1);
    for (size_t i = 0; i < NGOLDEN; i++) {
        char hex[2 * RAU_RECORD_MAX + 1];
        rau_t_hex(g_bytes[i], g_len[i], hex);
        printf("golden %s bytes %s\n", GOLDEN[i].name, hex);
        rau_t_hex(g_hash[i], 32, hex);
        printf("golden %s self_hash %s\n", GOLDEN[i].name, hex);
        rau_t_hex(g_dedupe[i], 32, hex);
        printf("golden %s dedupe %s\n", GOLDEN[i].name, hex);
    }
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--print-golden") == 0) {
        print_golden();
        return 0;
    }
    RA_RUN(golden_vectors_match_the_doc, "AUD-I-2 golden vectors of docs/AUDIT-FORMAT.md");
    RA_RUN(self_hash_is_b3sum_of_the_bytes, "AUD-I-1 self_hash = b3sum of the canonical bytes");
    RA_RUN(independent_encoder_agrees, "AUD-I-2 an independent encoder gives the same bytes");
    RA_RUN(nfd_input_gives_the_nfc_bytes, "AUD-I-3 NFD input encodes to the NFC bytes");
    RA_RUN(decode_round_trip_and_accessors, "decode round trip and accessors");
    RA_RUN(decoder_refuses_non_canonical_bytes, "AUD-I-7 decoder refuses non-canonical bytes");
    RA_RUN(nul_and_non_ascii_at_every_position, "AUD-I-3 NUL and NFD at every position");
    RA_RUN(limits_and_schema, "AUD-I-4 limits: SizeExceeded; AUD-I-5 schema");
    RA_RUN(dedupe_key_ignores_position, "AUD-I-6 dedupe key without seq and prev");
    RA_RUN(random_events_round_trip, "random events: encode, decode, encode again");
    RA_DONE();
}
