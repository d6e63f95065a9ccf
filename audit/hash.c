/* The two hash functions of the audit trail. BLAKE3 (the C library the meter's core/b3.c
 * uses) for self_hash and the dedupe key; SHA-256 (libcrypto) only for the RFC 6962 tree,
 * so off-the-shelf transparency-log verifiers can check our checkpoints (AUD-I-8). */
#include "internal.h"

#include <openssl/evp.h>
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
    /* EVP_Digest* allocate; a static context would not be thread safe. The tree hashes
     * once per record and per checkpoint level: not the hot path. */
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    RAU_ASSERT(c != NULL);
    unsigned int n = 0;
    RAU_ASSERT(EVP_DigestInit_ex(c, EVP_sha256(), NULL) == 1);
    if (alen) RAU_ASSERT(EVP_DigestUpdate(c, a, alen) == 1);
    if (blen) RAU_ASSERT(EVP_DigestUpdate(c, b, blen) == 1);
    RAU_ASSERT(EVP_DigestFinal_ex(c, out32, &n) == 1 && n == 32);
    EVP_MD_CTX_free(c);
}
