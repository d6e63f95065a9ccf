/* Internals of libronledger shared by its source files; not installed. */
#ifndef RL_INTERNAL_H
#define RL_INTERNAL_H

#include "ron/ledger.h"

#include <stdint.h>
#include <string.h>

#if defined(__GNUC__)
#define RL__INTERNAL __attribute__((visibility("hidden")))
#else
#define RL__INTERNAL
#endif

/* Where an encoder writes: a bounded buffer, or a SHA-256 context fed as bytes come (the
 * transfer id needs no buffer, LED-11). len counts every byte offered, so a too-small
 * buffer still yields the size needed. */
typedef struct rl__sink_s {
    uint8_t *buf;
    size_t cap;
    size_t len;
    void *sha; /* SHA256_CTX *, or NULL */
} rl__sink_t;

RL__INTERNAL void rl__put(rl__sink_t *s, const void *p, size_t n);
RL__INTERNAL void rl__put_u8(rl__sink_t *s, uint8_t v);
RL__INTERNAL void rl__put_u16(rl__sink_t *s, uint16_t v);
RL__INTERNAL void rl__put_u32(rl__sink_t *s, uint32_t v);
RL__INTERNAL void rl__put_u64(rl__sink_t *s, uint64_t v);

/* A bounded reader over the bytes being decoded; every get fails once past the end. */
typedef struct rl__reader_s {
    const uint8_t *p;
    size_t len;
    size_t off;
} rl__reader_t;

RL__INTERNAL int rl__get(rl__reader_t *r, void *out, size_t n);
RL__INTERNAL int rl__get_u8(rl__reader_t *r, uint8_t *v);
RL__INTERNAL int rl__get_u16(rl__reader_t *r, uint16_t *v);
RL__INTERNAL int rl__get_u32(rl__reader_t *r, uint32_t *v);
RL__INTERNAL int rl__get_u64(rl__reader_t *r, uint64_t *v);

/* Returns a call's nonzero code at once. */
#define RL__TRY(expr)                                                                              \
    do {                                                                                           \
        int rc_ = (expr);                                                                          \
        if (rc_ != 0) return rc_;                                                                  \
    } while (0)

/* Valid amount for a posting or an output: non-zero, not INT64_MIN (LED-4). */
static inline int rl__amount_ok(int64_t v) {
    return v != 0 && v != INT64_MIN;
}

/* Encodes a transfer into a sink (codec.c); rl_transfer_encode and rl_transfer_id share it
 * so the id is always of exactly the canonical bytes. */
RL__INTERNAL int rl__transfer_check(const rl_transfer_t *t);
RL__INTERNAL void rl__transfer_put(rl__sink_t *s, const rl_transfer_t *t);

#endif
