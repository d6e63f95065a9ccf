/* BLAKE3 glue. Slices are hashed one-shot over their whole encoding: large updates let
 * BLAKE3's SIMD kernels work on many chunks at once (per-row updates are ~4x slower). */
#include "internal.h"

#include "blake3.h"

void ra_b3(const void *buf, size_t len, uint8_t *out) {
    blake3_hasher h;
    blake3_hasher_init(&h);
    blake3_hasher_update(&h, buf, len);
    blake3_hasher_finalize(&h, out, RA_B3_LEN);
}

void ra__b3_keyed(const uint8_t key[32], const void *buf, size_t len, uint8_t *out,
                  size_t out_len) {
    blake3_hasher h;
    blake3_hasher_init_keyed(&h, key);
    blake3_hasher_update(&h, buf, len);
    blake3_hasher_finalize(&h, out, out_len);
}

/* Without an operator key, subjects are hashed under a key derived from a fixed context:
 * raw identifiers still never reach a slice, but anyone can recompute the mapping.
 * Operators who need unlinkability set ra_config_t.subject_key. */
void ra__b3_default_subject_key(uint8_t key[32]) {
    blake3_hasher h;
    blake3_hasher_init_derive_key(&h, "ron-accounting 2026 subject key v1");
    blake3_hasher_finalize(&h, key, 32);
}

void ra_hex(const uint8_t *bytes, size_t n, char *out) {
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[bytes[i] >> 4];
        out[2 * i + 1] = digits[bytes[i] & 15];
    }
    out[2 * n] = '\0';
}
