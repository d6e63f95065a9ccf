/* Stream heads: the chain state of every (tenant, dimension) stream (I-6, I-17): its last
 * seq, that slice's b3 and window. A fixed open-addressing table in the plane (heads_cap,
 * a power of two, filled to 3/4 at most), written by the plane's one sealer only, under
 * the meter's seal lock (the callers in meter.c, seal.c and journal.c hold it). */
#include "internal.h"

static uint64_t head_hash(const uint8_t tenant[16], uint32_t dim) {
    static const uint8_t zero[16];
    return ra__key_hash(tenant, zero, dim + 0x5eed);
}

/* The head of a stream, created empty (seq 0, prev all zero) when absent. NULL when the
 * table is at its bound (3/4 of heads_cap keeps probes short). */
ra__head_t *ra__head_get(ra_meter_t *m, const uint8_t tenant[16], uint32_t dim, bool create) {
    uint32_t cap = m->hdr->heads_cap, mask = cap - 1;
    uint32_t i = (uint32_t)head_hash(tenant, dim) & mask;
    for (uint32_t n = 0; n < cap; n++, i = (i + 1) & mask) {
        ra__head_t *h = &m->heads[i];
        if (!h->used) {
            if (!create) return NULL;
            uint32_t used = atomic_load_explicit(&m->hdr->heads_used, memory_order_relaxed);
            if ((uint64_t)used + 1 > (uint64_t)cap * 3 / 4) return NULL;
            memset(h, 0, sizeof *h);
            memcpy(h->tenant, tenant, 16);
            h->dim = (uint16_t)dim;
            h->used = 1;
            atomic_store_explicit(&m->hdr->heads_used, used + 1, memory_order_relaxed);
            return h;
        }
        if (h->dim == dim && memcmp(h->tenant, tenant, 16) == 0) return h;
    }
    return NULL;
}

/* A head from the ledger, for a stream this meter has no chain of (seq 0): taken; for one
 * it has: RA_EINCOMPAT unless equal (this meter continues a chain of its own). */
int ra__heads_seed(ra_meter_t *m, const uint8_t tenant[16], uint32_t dim, uint64_t seq,
                   const uint8_t b3[32], int64_t window_start_s) {
    ra__head_t *h = ra__head_get(m, tenant, dim, true);
    if (!h) return RA_ECAPACITY;
    if (h->seq == 0) {
        h->seq = seq;
        h->last_window_start_s = window_start_s;
        memcpy(h->b3, b3, 32);
        return 0;
    }
    if (h->seq != seq || memcmp(h->b3, b3, 32) != 0) return RA_EINCOMPAT;
    return 0;
}

/* Recovery: a head read from the WAL (checkpoint or a replayed slice); the newest wins. */
int ra__heads_advance(ra_meter_t *m, const uint8_t tenant[16], uint32_t dim, uint64_t seq,
                      int64_t last_ws, const uint8_t b3[32]) {
    ra__head_t *h = ra__head_get(m, tenant, dim, true);
    if (!h) return RA_ECAPACITY;
    if (seq > h->seq) {
        h->seq = seq;
        h->last_window_start_s = last_ws;
        memcpy(h->b3, b3, 32);
    }
    return 0;
}

/* Forgets every head: the WAL is the authority on chains (journal.c, at open). */
void ra__heads_reset(ra_meter_t *m) {
    memset(m->heads, 0, (size_t)m->hdr->heads_cap * sizeof *m->heads);
    atomic_store(&m->hdr->heads_used, 0);
}

/* Every head with a chain, for the WAL's heads checkpoint (ra__wal_heads_fn). */
int ra__heads_each(void *ud,
                   int (*emit)(void *, const uint8_t[16], const char *, uint64_t, int64_t,
                               const uint8_t[32]),
                   void *eud) {
    ra_meter_t *m = ud;
    for (uint32_t i = 0; i < m->hdr->heads_cap; i++) {
        const ra__head_t *h = &m->heads[i];
        if (!h->used || h->seq == 0) continue;
        int rc = emit(eud, h->tenant, m->dim_names[h->dim], h->seq, h->last_window_start_s, h->b3);
        if (rc != 0) return rc;
    }
    return 0;
}
