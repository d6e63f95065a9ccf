/* The two hash functions of the audit trail. BLAKE3 (the C library the meter's core/b3.c
 * uses) for self_hash and the dedupe key; SHA-256 only for the RFC 6962 tree, so
 * off-the-shelf transparency-log verifiers can check our checkpoints (AUD-I-8).
 *
 * SHA-256 is OpenSSL's low-level API: a stack context (no allocation per hash, which is
 * what made OpenSSL 3's EVP API slow here) and its SHA-NI / AVX2 kernels, picked at run
 * time. Two SHA-256 per record (the leaf, and one tree node on average) were the largest
 * cost of an append with libsodium's portable C (bench-audit amnesia: ~159k -> ~329k records/s).
 * The ledger uses the same API (ledger/codec.c). */
#define OPENSSL_SUPPRESS_DEPRECATED
#include "internal.h"

#include <openssl/sha.h>
#include <pthread.h>
#include <string.h>

#include "blake3.h"

void rau__b3(const void *buf, size_t len, uint8_t *out32) {
    blake3_hasher h;
    blake3_hasher_init(&h);
    blake3_hasher_update(&h, buf, len);
    blake3_hasher_finalize(&h, out32, 32);
}

void rau_record_hash(const uint8_t *canon, size_t len, uint8_t *out32) {
    rau__b3(canon, len, out32);
}

/* AUD-I-6: the dedupe key covers the version prefix and the body, never seq or prev, so an
 * event re-emitted after the head moved has the key it had the first time. Derive-key mode
 * keeps it from ever equalling a self_hash. Deriving the context key hashes the context
 * string: done once, and each key starts from a copy of that hasher state (the same output
 * as blake3_hasher_init_derive_key, one compression less per record). */
static blake3_hasher dedupe_base;
static pthread_once_t dedupe_once = PTHREAD_ONCE_INIT;

static void dedupe_base_init(void) {
    blake3_hasher_init_derive_key(&dedupe_base, "ron-audit 2026 dedupe key v1");
}

void rau__b3_dedupe(const uint8_t *canon, size_t len, uint8_t *out32) {
    blake3_hasher h;
    pthread_once(&dedupe_once, dedupe_base_init);
    memcpy(&h, &dedupe_base, sizeof h);
    blake3_hasher_update(&h, canon, RAU__MAGIC_LEN);
    blake3_hasher_update(&h, canon + RAU__OFF_BODY, len - RAU__OFF_BODY);
    blake3_hasher_finalize(&h, out32, 32);
}

int rau_record_dedupe_key(const uint8_t *canon, size_t len, uint8_t *out32) {
    if (!canon || !out32 || len <= RAU__OFF_BODY) return RAU_EINVAL;
    rau__b3_dedupe(canon, len, out32);
    return 0;
}

void rau__sha256_2(const void *a, size_t alen, const void *b, size_t blen, uint8_t *out32) {
    SHA256_CTX c;
    SHA256_Init(&c);
    if (alen) SHA256_Update(&c, a, alen);
    if (blen) SHA256_Update(&c, b, blen);
    SHA256_Final(out32, &c);
}
