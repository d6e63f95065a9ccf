/* The record path: lock-free, allocation-free, never waits (P-1, I-7).
 *
 * Protocol (see internal.h and docs/ARCHITECTURE.md):
 *   1. hash the key to a shard and a home slot; probe at most RA_PROBE_MAX slots;
 *   2. on a LIVE entry with the same key, try_add(): one 16-byte CAS on {count, stamp};
 *   3. if no entry takes the record, claim an EMPTY or DEAD slot (CAS on ident), write the
 *      key while CLAIMED, publish LIVE, then add.
 * Every step that loses a race retries from the top, at most RA_RESTARTS_MAX times; then
 * the record is refused with RA_ECAPACITY (counted), never spun on forever. */
#include "internal.h"

#include <time.h>

#define RA_RESTARTS_MAX 16

enum { ADD_DONE = 0, ADD_NEXT = 1 };

void ra__count_reject(ra_meter_t *m, int reason) {
    atomic_fetch_add_explicit(&m->hdr->metrics.rejected[reason], 1, memory_order_relaxed);
}

/* A refused record: counted, and an event for the audit trail (I-14). Cold: never inlined
 * into the record path. */
static RA_NOINLINE void refuse(ra_meter_t *m, int reason, const ra_tenant_t *t,
                               const ra_subject_t *s, int dim) {
    ra__count_reject(m, reason);
    ra__note_refusal(m, reason, t, s, dim);
}

/* A slot's key words are read while a claimer may be writing them (the slot retired and
 * reused meanwhile): the reader validates with the ident afterwards, so a torn key is only
 * ever a retry. Relaxed atomic word accesses say so (to the compiler and ThreadSanitizer);
 * on x86-64 and arm64 they are the same plain loads and stores. The words are 8-aligned
 * (the slot is a cache line; tenant at 16, subject at 32). */
static inline uint64_t key_word(const uint8_t *p) {
    return __atomic_load_n((const uint64_t *)(const void *)p, __ATOMIC_RELAXED);
}
static inline void key_word_set(uint8_t *p, const uint8_t *from) {
    __atomic_store_n((uint64_t *)(void *)p, ra__load64(from), __ATOMIC_RELAXED);
}

static inline bool key_equal(const ra__slot_t *s, const ra_tenant_t *t, const ra_subject_t *u) {
    /* Four word compares: the slot's key is 16-byte aligned, the caller's may not be. */
    return key_word(s->tenant) == ra__load64(t->b) &&
           key_word(s->tenant + 8) == ra__load64(t->b + 8) &&
           key_word(s->subject) == ra__load64(u->b) &&
           key_word(s->subject + 8) == ra__load64(u->b + 8);
}

/* Adds inc to the entry's pair if the pair belongs to this generation and either carries
 * the record's window, or was drained by the sealer (count 0) and can move to it. A pair
 * still holding an unsealed count of another window is left alone: the caller looks for
 * (or makes) another entry, so windows are never merged. */
static inline int try_add(ra_meter_t *m, ra__slot_t *slot, uint32_t gen, uint32_t win, int dim,
                          uint64_t inc) {
    ra__u128 cur = ra__pair_peek(&slot->pair);
    for (;;) {
        uint64_t st = ra__pair_stamp(cur), c = ra__pair_count(cur);
        uint32_t w = ra__stamp_win(st);
        if (ra__stamp_gen(st) != gen || w == RA_WIN_TOMB) return ADD_NEXT;
        uint64_t nc;
        bool saturated = false;
        if (w == win) {
            nc = c + inc;
            if (RA_UNLIKELY(nc < c)) { /* I-16: saturate, count, carry on */
                nc = UINT64_MAX;
                saturated = true;
            }
        } else if (c == 0) {
            nc = inc;
            st = ra__stamp(win, gen);
        } else {
            return ADD_NEXT;
        }
        if (ra__pair_cas(&slot->pair, &cur, ra__pair_make(nc, st))) {
            if (RA_UNLIKELY(saturated))
                atomic_fetch_add_explicit(&m->hdr->metrics.overflow[dim], 1, memory_order_relaxed);
            return ADD_DONE;
        }
    }
}

/* Claims a free slot for the key. Returns 0 when the record was added, 1 to restart the
 * record (a race was lost), or a negative code. */
static int claim(ra_meter_t *m, ra__slot_t *slot, uint64_t seen, uint32_t slot_index, uint32_t win,
                 const ra_tenant_t *t, const ra_subject_t *s, int dim, uint64_t inc,
                 uint64_t *live_ident) {
    uint32_t gen = (ra__ident_gen(seen) + 1) & RA_GEN_MASK;
    if (gen == 0) gen = 1; /* generation 0 is the zero-filled never-used pair */
    uint64_t claimed = ra__ident(gen, (uint32_t)dim, RA_SLOT_CLAIMED);
    if (!atomic_compare_exchange_strong_explicit(&slot->ident, &seen, claimed, memory_order_acq_rel,
                                                 memory_order_acquire))
        return 1;
    int64_t live = atomic_fetch_add_explicit(&m->hdr->live_entries, 1, memory_order_relaxed);
    if (RA_UNLIKELY(live >= (int64_t)m->hdr->entries_cap)) { /* I-7: bounded, shed */
        atomic_fetch_sub_explicit(&m->hdr->live_entries, 1, memory_order_relaxed);
        atomic_store_explicit(&slot->ident, ra__ident(gen, 0, RA_SLOT_DEAD), memory_order_release);
        return RA_ECAPACITY;
    }
    /* Mark before publishing: the sealer only visits marked slots. */
    atomic_fetch_or_explicit(&m->bitmap[slot_index / 64], 1ull << (slot_index % 64),
                             memory_order_acq_rel);
    atomic_store_explicit(&slot->claim_win, win, memory_order_relaxed);
    key_word_set(slot->tenant, t->b);
    key_word_set(slot->tenant + 8, t->b + 8);
    key_word_set(slot->subject, s->b);
    key_word_set(slot->subject + 8, s->b + 8);
    /* The old pair carries the old generation: stale writers' CASes fail from here on. */
    ra__u128 cur = ra__pair_peek(&slot->pair);
    while (!ra__pair_cas(&slot->pair, &cur, ra__pair_make(0, ra__stamp(win, gen)))) {
    }
    uint64_t expect = claimed;
    *live_ident = ra__ident(gen, (uint32_t)dim, RA_SLOT_LIVE);
    if (!atomic_compare_exchange_strong_explicit(&slot->ident, &expect, *live_ident,
                                                 memory_order_acq_rel, memory_order_acquire))
        return 1; /* defensive: only this writer may move its claim on */
    return try_add(m, slot, gen, win, dim, inc) == ADD_DONE ? 0 : 1;
}

/* The whole protocol. On success, *at_slot and *at_ident say which entry took the record
 * (under the identity its key was read with: what a key handle may cache). */
static RA_NOINLINE int record_slow(ra_meter_t *m, uint32_t win, const ra_tenant_t *t,
                                   const ra_subject_t *s, int dim, uint64_t inc, uint64_t h,
                                   uint32_t *at_slot, uint64_t *at_ident) {
    uint32_t shard = m->shard_bits ? (uint32_t)(h >> (64 - m->shard_bits)) : 0;
    uint32_t per = m->slot_mask + 1;
    uint32_t base = shard * per;
    uint32_t home = (uint32_t)h & m->slot_mask;
    uint32_t probes = per < RA_PROBE_MAX ? per : RA_PROBE_MAX;

    for (int restart = 0; restart < RA_RESTARTS_MAX; restart++) {
        ra__slot_t *free_slot = NULL;
        uint64_t free_ident = 0;
        uint32_t free_index = 0;
        bool again = false;
        for (uint32_t i = 0; i < probes; i++) {
            uint32_t idx = base + ((home + i) & m->slot_mask);
            ra__slot_t *slot = &m->slots[idx];
            uint64_t id = atomic_load_explicit(&slot->ident, memory_order_acquire);
            uint32_t state = ra__ident_state(id);
            if (state == RA_SLOT_EMPTY || state == RA_SLOT_DEAD) {
                if (!free_slot) {
                    free_slot = slot;
                    free_ident = id;
                    free_index = idx;
                }
                if (state == RA_SLOT_EMPTY) break; /* never-used slots end every chain */
                continue;
            }
            if (state != RA_SLOT_LIVE || ra__ident_dim(id) != (uint32_t)dim ||
                !key_equal(slot, t, s))
                continue;
            /* The key bytes were read under `id`; if the entry was retired and reused
             * meanwhile, the ident has changed: look again. */
            if (atomic_load_explicit(&slot->ident, memory_order_acquire) != id) {
                again = true;
                break;
            }
            if (try_add(m, slot, ra__ident_gen(id), win, dim, inc) == ADD_DONE) {
                *at_slot = idx;
                *at_ident = id;
                return 0;
            }
        }
        if (again) continue;
        if (!free_slot) break;
        int rc = claim(m, free_slot, free_ident, free_index, win, t, s, dim, inc, at_ident);
        if (rc <= 0) {
            if (rc == RA_ECAPACITY) refuse(m, RA_REJ_CAPACITY, t, s, dim);
            *at_slot = free_index;
            return rc;
        }
    }
    /* No free slot within the probe bound, or too many lost races. */
    refuse(m, RA_REJ_CAPACITY, t, s, dim);
    return RA_ECAPACITY;
}

/* The one add of the fast paths: the pair carries the entry's generation (ident's) and
 * the record's window, and the count does not saturate. */
static inline bool fast_add(ra__slot_t *slot, uint64_t id, uint32_t win, uint64_t inc) {
    ra__u128 cur = ra__pair_peek(&slot->pair);
    uint64_t st = ra__pair_stamp(cur), c = ra__pair_count(cur);
    return RA_LIKELY(ra__stamp_gen(st) == ra__ident_gen(id) && ra__stamp_win(st) == win &&
                     c + inc >= c && ra__pair_cas(&slot->pair, &cur, ra__pair_make(c + inc, st)));
}

static inline uint64_t key_hash(const ra_meter_t *m, const ra_tenant_t *t, const ra_subject_t *s,
                                int dim) {
    return ra__key_hash(t->b, s->b, (uint32_t)dim) ^ m->stripe_mix;
}

/* The common case in straight-line code: the key's entry sits in its home slot, is LIVE,
 * and its pair carries this window and generation; one CAS adds. Anything else (a probe
 * chain, a claim, a window move, a lost race, saturation) goes to record_slow, which
 * starts over from the home slot. The stamp's generation check in the CAS makes this
 * exact without re-reading the ident: a retired or reused entry has a TOMB stamp or a newer
 * generation, so the CAS fails on it (the slot protocol of docs/ARCHITECTURE.md). */
static inline int record_in(ra_meter_t *m, uint32_t win, const ra_tenant_t *t,
                            const ra_subject_t *s, int dim, uint64_t inc) {
    uint64_t h = key_hash(m, t, s, dim);
    uint32_t shard = m->shard_bits ? (uint32_t)(h >> (64 - m->shard_bits)) : 0;
    ra__slot_t *slot = &m->slots[shard * (m->slot_mask + 1) + ((uint32_t)h & m->slot_mask)];
    uint64_t id = atomic_load_explicit(&slot->ident, memory_order_acquire);
    if (RA_LIKELY(ra__ident_state(id) == RA_SLOT_LIVE && ra__ident_dim(id) == (uint32_t)dim &&
                  key_equal(slot, t, s) && fast_add(slot, id, win, inc)))
        return 0;
    uint32_t at_slot;
    uint64_t at_ident;
    return record_slow(m, win, t, s, dim, inc, h, &at_slot, &at_ident);
}

/* A key handle's record: the whole protocol, then the entry that took the record is
 * cached. A record refused leaves the cache empty, so the next one starts over. */
static RA_NOINLINE int record_key_slow(ra_meter_t *m, uint32_t win, ra_key_t *k, uint64_t inc) {
    uint32_t at_slot = 0;
    uint64_t at_ident = 0;
    int rc = record_slow(m, win, &k->tenant, &k->subject, k->dim, inc,
                         key_hash(m, &k->tenant, &k->subject, k->dim), &at_slot, &at_ident);
    k->meter_ = rc == 0 ? m : NULL; /* NULL: the fast path is not even tried */
    k->mix_ = m->stripe_mix;
    k->slot_ = at_slot;
    k->ident_ = at_ident;
    return rc;
}

/* The fast path of a key handle. The cached identity stands for the key: an entry's key
 * bytes are written while it is CLAIMED and never change under a LIVE identity, and every
 * claim takes a new generation, so an entry whose identity still equals the cached one
 * still holds this key. The pair's generation check in the CAS then does what it does in
 * record_in (a retired entry has a TOMB stamp, a reused one a newer generation). The
 * meter and stripe checks keep a handle from using another plane's (or stripe's) entry:
 * such a record takes the slow path and re-caches. */
static inline bool key_add(ra_meter_t *m, ra_key_t *k, uint32_t win, uint64_t inc) {
    if (RA_UNLIKELY(k->meter_ != m || k->mix_ != m->stripe_mix)) return false;
    ra__slot_t *slot = &m->slots[k->slot_ & m->slots_all_mask];
    uint64_t id = atomic_load_explicit(&slot->ident, memory_order_acquire);
    return RA_LIKELY(id == k->ident_) && fast_add(slot, id, win, inc);
}

static inline int record_key_in(ra_meter_t *m, uint32_t win, ra_key_t *k, uint64_t inc) {
    return key_add(m, k, win, inc) ? 0 : record_key_slow(m, win, k, inc);
}

/* Sampling state for the latency histogram: one record in 1024 per thread is timed, so
 * the hot path pays a thread-local increment, not two clock reads. Thread-local, not
 * global: it carries no meter state. initial-exec: in the shared library the default
 * model would call __tls_get_addr on every record. */
static _Thread_local uint32_t ra__sample_tick __attribute__((tls_model("initial-exec")));

static const uint64_t lat_bounds_ns[RA_LAT_BUCKETS - 1] = {25,   50,   100,   250,    500,    1000,
                                                           2500, 5000, 10000, 100000, 1000000};

static void observe_latency(ra_meter_t *m, uint64_t ns) {
    int b = 0;
    while (b < RA_LAT_BUCKETS - 1 && ns > lat_bounds_ns[b])
        b++;
    ra__plane_metrics_t *mt = &m->hdr->metrics;
    atomic_fetch_add_explicit(&mt->lat_bucket[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&mt->lat_count, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&mt->lat_sum_ns, ns, memory_order_relaxed);
}

const uint64_t *ra__latency_bounds_ns(void) {
    return lat_bounds_ns;
}

/* Both kinds of record: by key (k == NULL) or through a key handle (k). Inlined into each
 * public entry point, where k is a constant, so each keeps one straight path. */
static inline __attribute__((always_inline)) int
record_checked(ra_meter_t *m, int has_time, int64_t now_ms, const ra_tenant_t *t,
               const ra_subject_t *s, int dim, ra_key_t *k, uint64_t inc) {
    if (RA_UNLIKELY(!t || !s || dim < 0 || (uint32_t)dim >= m->n_dims)) {
        refuse(m, RA_REJ_INVALID, t, s, dim >= 0 && (uint32_t)dim < m->n_dims ? dim : -1);
        return RA_EINVAL;
    }
    if (RA_UNLIKELY(atomic_load_explicit(&m->hdr->degraded, memory_order_relaxed))) {
        refuse(m, RA_REJ_DEGRADED, t, s, dim); /* I-8: writes fail first */
        return RA_EDEGRADED;
    }
    uint32_t win;
    int rc = has_time ? ra__window_of_ms_cached(m, now_ms, &win) : ra__window_now(m, &win);
    if (RA_UNLIKELY(rc != 0)) {
        refuse(m, RA_REJ_INVALID, t, s, dim);
        return rc;
    }
    if (RA_UNLIKELY(inc == 0)) return 0;
    if (RA_LIKELY((++ra__sample_tick & ((1u << RA_LAT_SAMPLE_SHIFT) - 1)) != 0))
        return k ? record_key_in(m, win, k, inc) : record_in(m, win, t, s, dim, inc);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    rc = k ? record_key_in(m, win, k, inc) : record_in(m, win, t, s, dim, inc);
    clock_gettime(CLOCK_MONOTONIC, &b);
    int64_t ns = (int64_t)(b.tv_sec - a.tv_sec) * 1000000000 + (b.tv_nsec - a.tv_nsec);
    observe_latency(m, ns < 0 ? 0 : (uint64_t)ns);
    return rc;
}

int ra_meter_record(ra_meter_t *m, const ra_tenant_t *t, const ra_subject_t *s, int dim,
                    uint64_t inc) {
    return record_checked(m, 0, 0, t, s, dim, NULL, inc);
}

int ra_meter_record_at(ra_meter_t *m, int64_t now_ms, const ra_tenant_t *t, const ra_subject_t *s,
                       int dim, uint64_t inc) {
    return record_checked(m, 1, now_ms, t, s, dim, NULL, inc);
}

int ra_key_init(ra_key_t *k, ra_meter_t *m, const ra_tenant_t *t, const ra_subject_t *s, int dim) {
    if (!m) return RA_EINVAL;
    if (!k || !t || !s || dim < 0 || (uint32_t)dim >= m->n_dims) {
        refuse(m, RA_REJ_INVALID, t, s, dim >= 0 && (uint32_t)dim < m->n_dims ? dim : -1);
        return RA_EINVAL;
    }
    memset(k, 0, sizeof *k);
    k->tenant = *t;
    k->subject = *s;
    k->dim = dim;
    return 0;
}

/* Every record that is not the fast case below: all checks, the latency sample, then
 * record_key_in (which tries the cached entry again: a record sampled, or one whose first
 * try lost a race, still takes it when it can). */
static RA_NOINLINE int record_key_checked(ra_meter_t *m, int has_time, int64_t now_ms, ra_key_t *k,
                                          uint64_t inc) {
    if (RA_UNLIKELY(!k)) {
        refuse(m, RA_REJ_INVALID, NULL, NULL, -1);
        return RA_EINVAL;
    }
    return record_checked(m, has_time, now_ms, &k->tenant, &k->subject, k->dim, k, inc);
}

/* The fast case of a key handle, before any other work: not degraded, a record that is
 * not latency-sampled, and the add to the cached entry succeeds. The handle's dimension
 * was checked when its entry was cached on this meter (dimensions never change on a
 * plane). Anything else goes through record_key_checked, which records exactly once: this
 * path either added or changed nothing. */
static inline bool record_key_fast(ra_meter_t *m, ra_key_t *k, uint32_t win, uint64_t inc) {
    uint32_t tick = ra__sample_tick + 1; /* a due sample is left to record_checked */
    if (RA_UNLIKELY(!k || inc == 0 ||
                    atomic_load_explicit(&m->hdr->degraded, memory_order_relaxed) ||
                    (tick & ((1u << RA_LAT_SAMPLE_SHIFT) - 1)) == 0))
        return false;
    ra__sample_tick = tick;
    return key_add(m, k, win, inc);
}

int ra_meter_record_key(ra_meter_t *m, ra_key_t *k, uint64_t inc) {
    uint32_t win;
    if (RA_LIKELY(ra__window_now(m, &win) == 0 && record_key_fast(m, k, win, inc))) return 0;
    return record_key_checked(m, 0, 0, k, inc);
}

int ra_meter_record_key_at(ra_meter_t *m, int64_t now_ms, ra_key_t *k, uint64_t inc) {
    uint32_t win;
    if (RA_LIKELY(ra__window_of_ms_cached(m, now_ms, &win) == 0 && record_key_fast(m, k, win, inc)))
        return 0;
    return record_key_checked(m, 1, now_ms, k, inc);
}

/* A stripe moves the key's home slot (and shard) by a fixed mix of the stripe number;
 * the entry's key bytes stay the key's own, so sealing groups and merges them like any
 * duplicate entries of a subject (seal.c, merge_dups). */
int ra_meter_set_stripe(ra_meter_t *m, uint32_t stripe) {
    if (!m || stripe >= RA_STRIPES_MAX) return RA_EINVAL;
    m->stripe_mix = stripe ? (uint64_t)stripe * 0x9E3779B97F4A7C15ull : 0;
    return 0;
}
