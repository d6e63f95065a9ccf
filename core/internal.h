/*
 * Internal declarations shared by the files of core/. Not installed; tests may include it.
 *
 * The counter plane (plane.c, counters.c, seal.c) is the heart of the design; its protocol
 * is described in docs/ARCHITECTURE.md ("The counter plane"). In short:
 *
 *   - A plane is a fixed array of 64-byte entries, split into power-of-two shards, living
 *     in private anonymous memory or in a file many processes map (cfg.shm_path).
 *   - An entry holds one (tenant, subject, dimension) key and one counter *pair*
 *     {count, stamp}, updated only with a 16-byte compare-and-swap. The stamp carries the
 *     window index the count belongs to and the entry's generation.
 *   - Writers stamp records with the window of their own clock, so attribution does not
 *     depend on when the sealer runs. A writer adds to an entry stamped with its window;
 *     restamps an entry that the sealer has drained (count 0); otherwise it takes another
 *     entry for the same key (duplicates are merged at seal).
 *   - The sealer drains a count with one CAS that swaps it to zero: every add lands either
 *     before that CAS (sealed now) or after it (sealed later). That is conservation (I-2,
 *     PRODUCT.md §6) without the sealer ever waiting for a writer, and without a writer
 *     ever waiting for anything, even a writer that died mid-record.
 */
#ifndef RA_INTERNAL_H
#define RA_INTERNAL_H

#include "ron/accounting.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#if defined(__GNUC__)
#define RA_LIKELY(x) __builtin_expect(!!(x), 1)
#define RA_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define RA_INTERNAL __attribute__((visibility("hidden")))
#define RA_NOINLINE __attribute__((noinline))
#else
#define RA_NOINLINE
#define RA_LIKELY(x) (x)
#define RA_UNLIKELY(x) (x)
#define RA_INTERNAL
#endif

#define RA_CACHELINE 64

/* Assertions that stay on in release builds: programmer errors, never operating errors. */
#define RA_ASSERT(cond)                                                                            \
    do {                                                                                           \
        if (RA_UNLIKELY(!(cond))) ra__assert_fail(#cond, __FILE__, __LINE__);                      \
    } while (0)
RA_INTERNAL _Noreturn void ra__assert_fail(const char *expr, const char *file, int line);

/* ---- limits ----------------------------------------------------------------------------*/
#define RA_FRAME_MAX (1u << 20) /* encoded slice limit: 1 MiB (I-11) */
#define RA_PROBE_MAX 128u       /* open-addressing probe bound per record */
#define RA_SHARDS_MAX 4096u
#define RA_CAPACITY_MAX (1u << 26) /* 64 M rows: 8 GiB of plane, the sanity ceiling */
#define RA_PENDING_MAX (1u << 24)

/* ---- the 16-byte atomic pair --------------------------------------------------------- */
typedef unsigned __int128 ra__u128;

static inline ra__u128 ra__pair_make(uint64_t count, uint64_t stamp) {
    return ((ra__u128)stamp << 64) | count;
}
static inline uint64_t ra__pair_count(ra__u128 p) {
    return (uint64_t)p;
}
static inline uint64_t ra__pair_stamp(ra__u128 p) {
    return (uint64_t)(p >> 64);
}
/* Compare-and-swap of the whole pair; on failure *expected gets the current value. Inline
 * cmpxchg16b on x86-64 (-mcx16), ldaxp/stlxp or casp on arm64: lock-free across processes.
 * (The __sync builtin, not C11 atomics: GCC routes a 16-byte _Atomic through libatomic,
 * which may take a lock, and a lock in a shared plane is a deadlock waiting for a kill.) */
static inline bool ra__pair_cas(ra__u128 *p, ra__u128 *expected, ra__u128 desired) {
    ra__u128 seen = __sync_val_compare_and_swap(p, *expected, desired);
    if (seen == *expected) return true;
    *expected = seen;
    return false;
}
/* An atomic read of the pair (a CAS that writes back what it finds). The sealer uses it:
 * a torn read could pair one window's count with another's stamp. */
static inline ra__u128 ra__pair_load(ra__u128 *p) {
    return __sync_val_compare_and_swap(p, (ra__u128)0, (ra__u128)0);
}
/* The halves of a pair, each read atomically (relaxed unless said): every reader of a half
 * races with the CAS of a writer by design, and says so to the compiler and to
 * ThreadSanitizer instead of hiding behind volatile. Word 0 is the count, word 1 the
 * stamp (little-endian __int128). */
static inline uint64_t ra__pair_word(const ra__u128 *p, int i, int order) {
    return __atomic_load_n((const uint64_t *)p + i, order);
}
/* A consistent read without a locked instruction in the common case: stamp, count, stamp
 * again (acquire loads keep them in that order); only if the stamp moved in between, the
 * atomic read. (A stamp that changed and changed back within those nanoseconds would need
 * a restamp to an older window and a drain in between; drain() re-validates the stamp.) */
static inline ra__u128 ra__pair_read(ra__u128 *p) {
    uint64_t s1 = ra__pair_word(p, 1, __ATOMIC_ACQUIRE);
    uint64_t c = ra__pair_word(p, 0, __ATOMIC_ACQUIRE);
    uint64_t s2 = ra__pair_word(p, 1, __ATOMIC_ACQUIRE);
    if (RA_LIKELY(s1 == s2)) return ((ra__u128)s1 << 64) | c;
    return ra__pair_load(p);
}
/* A possibly torn read is fine where it only seeds a CAS loop, which validates it. */
static inline ra__u128 ra__pair_peek(const ra__u128 *p) {
    uint64_t lo = ra__pair_word(p, 0, __ATOMIC_RELAXED);
    uint64_t hi = ra__pair_word(p, 1, __ATOMIC_RELAXED);
    return ((ra__u128)hi << 64) | lo;
}

/* stamp = window index (high 32) | generation (low 32). TOMB marks a pair the sealer has
 * retired: no writer may use it again under that generation. Generations use 31 bits; bit
 * 31 of a stamp marks a pair FROZEN by a sealer that is writing its count to the WAL:
 * writers' generation checks fail on it, so nobody adds to it, and the count stays in the
 * plane until the segment is durable (then released) or known lost (then unfrozen). */
#define RA_GEN_MASK 0x7FFFFFFFu
#define RA_STAMP_FROZEN 0x80000000u
#define RA_WIN_TOMB 0xFFFFFFFFu
#define RA_SEALED_NONE INT64_MIN /* sealed_through before the first rollover */
#define RA_INTENT_FREEZING UINT64_MAX
/* An internal result, never returned by the API: a write that may or may not have reached
 * the disk (a segment's directory entry neither made durable nor undone). */
#define RA__EINDOUBT (-1000)
/* Why a plane is degraded. Kept in the plane, so a new sealer can clear a reason the old
 * one set. */
#define RA_DEGRADED_HOST 1u /* ra_meter_set_degraded (readiness, the runtime) */
#define RA_DEGRADED_WAL 2u  /* the sealer's WAL is full */
static inline uint64_t ra__stamp(uint32_t win, uint32_t gen) {
    return ((uint64_t)win << 32) | gen;
}
static inline uint32_t ra__stamp_win(uint64_t s) {
    return (uint32_t)(s >> 32);
}
static inline uint32_t ra__stamp_gen(uint64_t s) {
    return (uint32_t)s;
}

/* ident = generation (high 32) | dimension (16) | state (16). */
enum { RA_SLOT_EMPTY = 0, RA_SLOT_CLAIMED = 1, RA_SLOT_LIVE = 2, RA_SLOT_DEAD = 3 };
static inline uint64_t ra__ident(uint32_t gen, uint32_t dim, uint32_t state) {
    return ((uint64_t)gen << 32) | ((uint64_t)(dim & 0xFFFFu) << 16) | (state & 0xFFFFu);
}
static inline uint32_t ra__ident_gen(uint64_t i) {
    return (uint32_t)(i >> 32);
}
static inline uint32_t ra__ident_dim(uint64_t i) {
    return (uint32_t)(i >> 16) & 0xFFFFu;
}
static inline uint32_t ra__ident_state(uint64_t i) {
    return (uint32_t)i & 0xFFFFu;
}

/* One entry, one cache line: writers on different keys never share a line (PRODUCT §7). */
typedef struct ra__slot {
    _Alignas(16) ra__u128 pair; /* {count, stamp}: 16-byte CAS and atomic word loads only */
    uint8_t tenant[16];         /* written while CLAIMED, immutable while LIVE */
    uint8_t subject[16];
    _Atomic uint64_t ident;     /* generation | dimension | state */
    _Atomic uint32_t claim_win; /* window of the claim: stale-claim reclamation */
    uint32_t pad_;
} ra__slot_t;
_Static_assert(sizeof(ra__slot_t) == 64, "slot is one cache line");
_Static_assert(_Alignof(ra__slot_t) >= 16, "pair needs 16-byte alignment");

/* ---- metrics (values live in the plane, so every process of a shm plane adds to them) -*/
enum {
    RA_REJ_CAPACITY = 0, /* a new key found no room (I-7) */
    RA_REJ_INVALID,      /* bad input on the record path */
    RA_REJ_DEGRADED,     /* refused while degraded (I-8) */
    RA_REJ_PENDING_FULL, /* a window could not be sealed: pending ring full */
    RA_REJ_HEADS_FULL,   /* a new stream found no room in the stream-head table */
    RA_REJ_CONFIG,       /* a runtime config change was refused (G-21) */
    RA_REJ_WAL_FULL,     /* a rollover refused: the WAL is at a cap */
    RA_REJ_COUNT
};
#define RA_LAT_BUCKETS 12      /* record latency histogram, sampled */
#define RA_LAT_SAMPLE_SHIFT 10 /* one record in 1024 is timed */

typedef struct ra__plane_metrics {
    _Atomic uint64_t rejected[RA_REJ_COUNT];
    _Atomic uint64_t overflow[RA_DIM_MAX];
    _Atomic uint64_t lat_bucket[RA_LAT_BUCKETS]; /* non-cumulative; +Inf is the last */
    _Atomic uint64_t lat_count;
    _Atomic uint64_t lat_sum_ns;
    _Atomic uint64_t late_rows; /* rows sealed into a later window than their stamp */
    _Atomic uint64_t sealed_slices;
    _Atomic uint64_t sealed_windows;
    _Atomic uint64_t sealed_rows;
    _Atomic uint64_t reclaimed;
    _Atomic uint64_t stale_claims; /* gauge, set by each scan */
} ra__plane_metrics_t;

/* ---- stream heads: the chain state per (tenant, dimension), written by the sealer only */
typedef struct ra__head {
    uint8_t tenant[16];
    uint16_t dim;
    uint16_t used;
    uint32_t pad_;
    uint64_t seq;
    int64_t last_window_start_s;
    uint8_t b3[32];
} ra__head_t;
_Static_assert(sizeof(ra__head_t) == 72, "head layout");

/* ---- refusals: the record path's rejects as events, for the audit trail (I-14) -------
 * A ring in the plane that every writer process appends to and the daemon drains (the one
 * place with an audit trail; nginx workers have none). Lossy by design, never blocking:
 * a writer overwrites the oldest entry, and the reader counts what it missed exactly, so
 * the trail records the loss (AUD-I-35). Payload words are relaxed atomics: two writers a
 * lap apart may write one entry at once, and the reader validates with seq (a seqlock). */
#define RA_REFUSALS 1024u /* power of two */
typedef struct ra__refusal {
    _Atomic uint64_t seq;  /* n + 1 of the append that filled it; 0 while being written */
    _Atomic uint64_t w[7]; /* at_ms; tenant (2); subject (2); pid:32 | dim:16 | reason:8 */
} ra__refusal_t;
_Static_assert(sizeof(ra__refusal_t) == 64, "refusal is one cache line");

/* ---- the plane header: the first bytes of the mapping (and of a shm file) ------------ */
#define RA_PLANE_MAGIC "RONACCT\0"
#define RA_PLANE_LAYOUT 3u

typedef struct ra__plane_hdr {
    char magic[8];
    uint32_t layout;   /* RA_PLANE_LAYOUT */
    uint32_t hdr_size; /* sizeof(ra__plane_hdr_t): catches a foreign build */
    uint64_t total_size;
    uint32_t window_len_s;
    uint32_t shards;
    uint32_t slots_per_shard; /* power of two */
    uint32_t capacity_rows;
    uint32_t entries_cap; /* live entries allowed: 2 x capacity_rows */
    uint32_t heads_cap;   /* power of two */
    uint32_t n_dims;
    uint32_t amnesia;
    char dims[RA_DIM_MAX][RA_DIM_NAME_MAX + 1];
    uint8_t subject_key[32];
    uint64_t slots_off; /* byte offsets from the start of the mapping */
    uint64_t bitmap_off;
    uint64_t heads_off;
    uint64_t created_ms;

    _Alignas(RA_CACHELINE) _Atomic uint32_t degraded; /* reasons: RA_DEGRADED_* bits */
    _Atomic int64_t sealed_through; /* monotone boundary counter: last sealed window index */
    _Atomic uint32_t heads_used;
    _Atomic uint64_t seal_intent; /* 0, or a seal with frozen pairs in progress: the WAL
                                     segment id once known, RA_INTENT_FREEZING before */

    _Alignas(RA_CACHELINE) _Atomic int64_t live_entries;

    _Alignas(RA_CACHELINE) ra__plane_metrics_t metrics;

    _Alignas(RA_CACHELINE) _Atomic uint64_t refusals_next; /* appends so far */
    _Atomic uint64_t refusals_read; /* the plane's reader: the next append to read */
    uint64_t refusals_off;          /* RA_REFUSALS entries */
} ra__plane_hdr_t;
/* docs/FORMAT.md §3 documents these offsets. */
_Static_assert(offsetof(ra__plane_hdr_t, window_len_s) == 24, "plane header layout");
_Static_assert(offsetof(ra__plane_hdr_t, dims) == 56, "plane header layout");

/* ---- the meter: one process's handle on a plane --------------------------------------*/
#include "pending.h"
#include "seal.h"

/* The WAL as the backlog (journal.c owns it): the pending ring holds the oldest un-ACKed
 * slices; every later one is durable in the WAL and waits there ("spilled"), read back into
 * the ring, in WAL order, as ACKs make room. So a downstream outage is bounded by the WAL's
 * caps, not by pending_slices_cap, and memory by the ring (I-7, I-10). */
typedef struct ra__backlog {
    uint64_t spill_seq; /* the oldest WAL frame seq that may be spilled; 0: none is */
    uint64_t spilled;   /* frames on disk only (un-ACKed, not in the ring) */
    uint64_t spilled_total, refilled_total, refill_errors;
} ra__backlog_t;

struct ra_meter_s {
    ra__plane_hdr_t *hdr; /* == mapping base */
    ra__slot_t *slots;
    _Atomic uint64_t *bitmap; /* one bit per slot: entry in use (claimed or live) */
    ra__head_t *heads;
    ra__refusal_t *refusals;
    uint64_t refusals_stall; /* an entry this handle found half-written last time, + 1 */
    size_t map_size;
    int shm_fd; /* -1: private plane */
    int is_creator;
    int is_sealer; /* holds the plane's sealer lock */
    uint32_t shard_bits;
    uint32_t slot_mask;      /* slots_per_shard - 1 */
    uint32_t slots_all_mask; /* shards * slots_per_shard - 1 (both powers of two) */
    uint32_t window_len_s;
    uint32_t n_dims;
    _Atomic uint64_t cached_win; /* window index cache for the system clock path */
    uint64_t stripe_mix;         /* ra_meter_set_stripe: XORed into the key hash (0: none) */

    ra_clock_fn clock;
    void *clock_ud;
    ra_log_fn log;
    void *log_ud;
    char host[RA_HOST_MAX + 1];
    char dim_names[RA_DIM_MAX][RA_DIM_NAME_MAX + 1];

    /* sealer side, process-private, under the seal lock (meter.c takes it, nobody else) */
    pthread_mutex_t *seal_mu; /* &seal_mu_: const meters lock it too */
    pthread_mutex_t seal_mu_;
    ra__pending_t pending;
    ra__backlog_t backlog;
    uint64_t sealed_rewinds; /* sealed_through set back: it was ahead of the clock (seal.c) */
    ra__seal_scratch_t seal;
    struct ra__wal *wal; /* the sealer's write-ahead log, or NULL (amnesia) */
    const struct ra__io *io;
};

/* ---- functions shared between files ------------------------------------------------- */
/* log.c */
RA_INTERNAL void ra__log(const ra_meter_t *m, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
RA_INTERNAL void ra__errbuf(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* b3.c */
RA_INTERNAL void ra__b3_keyed(const uint8_t key[32], const void *buf, size_t len, uint8_t *out,
                              size_t out_len);
RA_INTERNAL void ra__b3_default_subject_key(uint8_t key[32]);

/* plane.c */
RA_INTERNAL int ra__plane_open(ra_meter_t *m, const ra_config_t *cfg, const char *const *dims,
                               uint32_t n_dims, char *err, size_t errlen);
RA_INTERNAL void ra__plane_close(ra_meter_t *m);
RA_INTERNAL int ra__plane_sealer_lock(ra_meter_t *m);

/* counters.c */
RA_INTERNAL void ra__count_reject(ra_meter_t *m, int reason);
RA_INTERNAL const uint64_t *ra__latency_bounds_ns(void);

/* refusals.c: a record-path reject as an event (t, s may be NULL; dim < 0: none) */
RA_INTERNAL const char *ra__reject_reason(int reason);
RA_INTERNAL void ra__note_refusal(ra_meter_t *m, int reason, const ra_tenant_t *t,
                                  const ra_subject_t *s, int dim);

/* A registered dimension's id, or RA_ENOTFOUND (the leaves' lookup; ra_meter_dimension is
 * its public face). */
static inline int ra__dimension_of(const ra_meter_t *m, const char *name, size_t len) {
    for (uint32_t i = 0; i < m->n_dims; i++)
        if (strlen(m->dim_names[i]) == len && memcmp(m->dim_names[i], name, len) == 0)
            return (int)i;
    return RA_ENOTFOUND;
}

/* meter.c: open with an injected I/O layer (tests: power cuts, I/O errors) */
struct ra__io;
RA_INTERNAL int ra__meter_open_io(const ra_config_t *cfg, const struct ra__io *io, ra_meter_t **out,
                                  char *err, size_t errlen);

static inline uint64_t ra__load64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* The counter plane's key hash (inline: it is on the record path). Subjects are usually
 * BLAKE3 output already; tenants and raw subjects may not be, so every word is mixed
 * (a multiply-xorshift in the style of murmur3's finaliser). */
static inline uint64_t ra__key_hash(const uint8_t tenant[16], const uint8_t subject[16],
                                    uint32_t dim) {
    uint64_t h = ra__load64(tenant) * 0x9E3779B97F4A7C15ull;
    h ^= ra__load64(tenant + 8) * 0xC2B2AE3D27D4EB4Full;
    h ^= ra__load64(subject) * 0x165667B19E3779F9ull;
    h ^= (ra__load64(subject + 8) + dim) * 0xD6E8FEB86659FD93ull;
    h ^= h >> 32;
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 29;
    return h;
}

/* little-endian helpers: the encoding is pinned independent of the host (P-5, G-8) */
static inline void ra__put_u16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline void ra__put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline void ra__put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t ra__get_u16(const uint8_t *p) {
    return (uint16_t)(p[0] | (p[1] << 8));
}
static inline uint32_t ra__get_u32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}
static inline uint64_t ra__get_u64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* Each concern's own declarations (one header per file of core/, or per pair). */
#include "codec.h"
#include "heads.h"
#include "journal.h"
#include "window.h"

#endif /* RA_INTERNAL_H */
