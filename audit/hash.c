/* The two hash functions of the audit trail. BLAKE3 (the C library the meter's core/b3.c
 * uses) for self_hash and the dedupe key; SHA-256 only for the RFC 6962 tree, so
 * off-the-shelf transparency-log verifiers can check our checkpoints (AUD-I-8). SHA-256 is
 * libsodium's (already needed for Ed25519): a stack state, no allocation per hash, where
 * OpenSSL 3's EVP API allocates a context and fetches the digest each time (measured with
 * bench-audit: ~124k -> ~160k records/s without I/O). */
#include "internal.h"

#include <sodium.h>
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
 * keeps it from ever equalling a self_hash. */
void rau__b3_dedupe(const uint8_t *canon, size_t len, uint8_t *out32) {
    blake3_hasher h;
    blake3_hasher_init_derive_key(&h, "ron-audit 2026 dedupe key v1");
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
    crypto_hash_sha256_state st;
    crypto_hash_sha256_init(&st);
    if (alen) crypto_hash_sha256_update(&st, a, alen);
    if (blen) crypto_hash_sha256_update(&st, b, blen);
    crypto_hash_sha256_final(&st, out32);
}
