/* The dedupe index (AUD-I-6, audit/dedupe.c) against a model: after every add, each of the
 * last `cap` keys is found with its seq and hash, and every older key is gone. Keys share
 * their first bytes on purpose (few distinct homes, same tags), so probe chains are long,
 * tags collide and the backward-shift deletion of the oldest entry moves entries across
 * the table's wrap. Seeded; the seed is printed. */
#include "rau_test.h"

#include "internal.h"

static uint64_t rng_state;
static uint64_t rng(void) { /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1DULL;
}

/* Key i: its first 4 bytes (home and tag) from a small set, the rest from i. */
static void key_of(uint64_t i, const uint32_t *heads, uint32_t n_heads, uint8_t *k) {
    memset(k, 0, 32);
    uint32_t h = heads[i % n_heads];
    memcpy(k, &h, 4);
    for (int b = 0; b < 8; b++)
        k[8 + b] = (uint8_t)(i >> (8 * b));
    k[31] = 0x5a;
}

static void run_model(uint32_t cap, uint32_t n_heads, uint64_t n_adds) {
    rau__dedupe_t d;
    REQUIRE(rau__dedupe_init(&d, cap) == 0);
    uint32_t heads[16];
    for (uint32_t h = 0; h < n_heads; h++) /* the last slots too: probes wrap around */
        heads[h] = (uint32_t)(rng() & 0xffff) | (h & 1 ? d.mask : 0);
    uint8_t k[32], hash[32];
    int bad = 0;
    for (uint64_t i = 1; i <= n_adds && !bad; i++) {
        key_of(i, heads, n_heads, k);
        CHECK(rau__dedupe_find(&d, k) == NULL);
        memset(hash, (int)(i & 0xff), 32);
        rau__dedupe_add(&d, k, i, hash);
        uint64_t from = i > cap ? i - cap + 1 : 1;
        for (uint64_t j = from; j <= i; j++) { /* the window: all found, right entries */
            key_of(j, heads, n_heads, k);
            const rau__dent_t *e = rau__dedupe_find(&d, k);
            if (!e || e->seq != j || e->hash[0] != (uint8_t)(j & 0xff)) {
                RA_FAILF("cap %u: key %llu missing or wrong after add %llu", cap,
                         (unsigned long long)j, (unsigned long long)i);
                bad = 1;
                break;
            }
        }
        for (uint64_t j = from > 3 ? from - 3 : 1; j < from; j++) { /* evicted: gone */
            key_of(j, heads, n_heads, k);
            if (rau__dedupe_find(&d, k) != NULL) {
                RA_FAILF("cap %u: key %llu still there after add %llu", cap, (unsigned long long)j,
                         (unsigned long long)i);
                bad = 1;
            }
        }
    }
    rau__dedupe_free(&d);
}

RA_TEST(window_against_a_model) {
    rng_state = 0x6465647570ULL;
    printf("# seed 0x%llx\n", (unsigned long long)rng_state);
    static const uint32_t caps[] = {1, 2, 3, 7, 64, 1000};
    for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
        run_model(caps[c], 1, caps[c] * 4 + 10);  /* one home: one long chain */
        run_model(caps[c], 3, caps[c] * 4 + 10);  /* a few homes, wrapping */
        run_model(caps[c], 16, caps[c] * 4 + 10); /* spread */
    }
}

int main(void) {
    RA_RUN(window_against_a_model,
           "AUD-I-6 the dedupe index keeps exactly the last cap keys (collisions, wrap)");
    RA_DONE();
}
