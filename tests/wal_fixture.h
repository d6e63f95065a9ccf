/* The fixture of the WAL's tests (test-wal*.c): a simulated file system (tests/sim-fs.c,
 * an in-memory file system that knows what an fsync made durable and can cut the power), a
 * WAL configuration and a meter on it (walfix_t: walfix_start, walfix_meter, walfix_end),
 * keys and per-key totals to check conservation with, the captured log, and readers of
 * pending slices, chains, segments and metrics. Header-only (every test executable is
 * built from its one .c file): functions are static inline, so each test takes what it
 * uses. Every seed is fixed and printed by the tests. */
#ifndef RA_TEST_WAL_FIXTURE_H
#define RA_TEST_WAL_FIXTURE_H

#include "internal.h"
#include "io.h"
#include "ra_test.h"
#include "wal.h"

#include "sim-fs.c"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>

#define WIN_MS 60000LL
#define WAL_DIR "/wal"

/* ---- helpers --------------------------------------------------------------------------- */

static inline double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline int quick(void) {
    /* RA_TEST_QUICK=1 cuts the iteration counts (the sanitizer build runs them in full: a few
     * seconds) */
    const char *q = getenv("RA_TEST_QUICK");
    return q && *q && strcmp(q, "0") != 0;
}

/* The meter's log, captured (recovery reports what it skipped here). */
static __attribute__((unused)) char g_log[1 << 16];
static __attribute__((unused)) size_t g_log_len;
static __attribute__((unused)) int g_log_echo;

static inline void log_capture(void *ud, int level, const char *msg) {
    (void)ud;
    size_t n = strlen(msg);
    if (g_log_len + n + 2 >= sizeof g_log) g_log_len = 0; /* keep the newest */
    memcpy(g_log + g_log_len, msg, n);
    g_log[g_log_len + n] = '\n';
    g_log_len += n + 1;
    g_log[g_log_len] = '\0';
    if (g_log_echo) fprintf(stderr, "log[%d]: %s\n", level, msg);
}

static inline void log_reset(void) {
    g_log_len = 0;
    g_log[0] = '\0';
}

static inline void wal_config(ra_config_t *cfg, const char *dir) {
    ra_t_config(cfg);
    cfg->amnesia = 0;
    cfg->wal_dir = dir;
    cfg->capacity_rows = 512;
    cfg->pending_slices_cap = 2048;
    cfg->log = log_capture;
}

static inline ra_meter_t *open_io(const ra_config_t *cfg, simfs_t *fs, int *rc_out) {
    ra_meter_t *m = NULL;
    char err[512];
    int rc = ra__meter_open_io(cfg, simfs_io(fs), &m, err, sizeof err);
    if (rc_out) *rc_out = rc;
    if (rc != 0 && !rc_out) fprintf(stderr, "ra__meter_open_io: %s: %s\n", ra_err_name(rc), err);
    return rc == 0 ? m : NULL;
}

/* Every pending slice, in pending order (new references). */
static inline size_t pending_all(ra_meter_t *m, ra_slice_t **out, size_t cap) {
    size_t n = 0;
    if (ra_meter_pending_list(m, 0, out, cap, &n) != 0) return 0;
    return n;
}

static inline void unref_all(ra_slice_t **s, size_t n) {
    for (size_t i = 0; i < n; i++)
        ra_slice_unref(s[i]);
}

static inline void ack_all(ra_meter_t *m) {
    static ra_slice_t *p[8192];
    size_t n = pending_all(m, p, 8192);
    for (size_t i = 0; i < n; i++) {
        if (ra_meter_ack(m, p[i]) != 0) RA_FAILF("ack of a pending slice failed");
        ra_slice_unref(p[i]);
    }
}

static inline uint64_t seq_of(const ra_slice_t *s) {
    ra_slice_id_t id;
    ra_slice_get_id(s, &id);
    return id.seq;
}

static inline bool same_stream(const ra_slice_t *a, const ra_slice_t *b) {
    ra_tenant_t x, y;
    ra_slice_get_tenant(a, &x);
    ra_slice_get_tenant(b, &y);
    return memcmp(x.b, y.b, 16) == 0 && strcmp(ra_slice_dimension(a), ra_slice_dimension(b)) == 0;
}

static inline bool same_bytes(const ra_slice_t *a, const ra_slice_t *b) {
    size_t la, lb;
    const uint8_t *pa = ra_slice_bytes(a, &la), *pb = ra_slice_bytes(b, &lb);
    return la == lb && memcmp(pa, pb, la) == 0 && memcmp(ra_slice_b3(a), ra_slice_b3(b), 32) == 0;
}

/* Chains in pending order: per stream seq + 1 and prev_b3 = the previous b3; no slice
 * twice. Returns the number of breaks. */
static inline int chain_breaks(ra_slice_t *const *s, size_t n) {
    int breaks = 0;
    for (size_t i = 0; i < n; i++) {
        for (size_t j = i + 1; j < n; j++) {
            if (!same_stream(s[i], s[j])) continue;
            if (seq_of(s[j]) == seq_of(s[i])) breaks++; /* twice */
        }
        for (size_t j = i + 1; j < n; j++) { /* the next slice of the same stream */
            if (!same_stream(s[i], s[j])) continue;
            if (seq_of(s[j]) != seq_of(s[i]) + 1 ||
                memcmp(ra_slice_prev_b3(s[j]), ra_slice_b3(s[i]), 32) != 0)
                breaks++;
            break;
        }
    }
    return breaks;
}

/* Per-key totals: T tenants x S subjects x 3 dimensions. */
enum { TT = 4, SS = 8, DD = 3, KEYS = TT * SS * DD };
typedef struct {
    uint64_t v[KEYS];
} totals_t;

static __attribute__((unused)) ra_tenant_t g_tenants[TT];
static __attribute__((unused)) ra_subject_t g_subjects[SS];

static inline void keys_init(void) {
    for (unsigned i = 0; i < TT; i++)
        g_tenants[i] = ra_t_tenant(100 + i);
    for (unsigned i = 0; i < SS; i++)
        g_subjects[i] = ra_t_subject(200 + i);
}

/* Records n random events into window w and adds them to tot. */
static inline int record_window(ra_meter_t *m, int64_t w, int n, uint64_t *seed, totals_t *tot) {
    for (int i = 0; i < n; i++) {
        unsigned t = (unsigned)(ra_t_rand(seed) % TT), s = (unsigned)(ra_t_rand(seed) % SS);
        int d = (int)(ra_t_rand(seed) % DD);
        uint64_t inc = ra_t_rand(seed) % 1000 + 1;
        int64_t at = RA_T_EPOCH_MS + w * WIN_MS + (int64_t)(ra_t_rand(seed) % (WIN_MS - 1));
        int rc = ra_meter_record_at(m, at, &g_tenants[t], &g_subjects[s], d, inc);
        if (rc != 0) return rc;
        if (tot) tot->v[(t * SS + s) * DD + (unsigned)d] += inc;
    }
    return 0;
}

/* Adds a slice's rows to tot; false for a row of an unknown key. */
static inline bool add_slice(totals_t *tot, const ra_slice_t *sl) {
    ra_tenant_t t;
    ra_slice_get_tenant(sl, &t);
    unsigned ti = TT, di = DD;
    for (unsigned i = 0; i < TT; i++)
        if (memcmp(t.b, g_tenants[i].b, 16) == 0) ti = i;
    static const char *const dn[DD] = {"bytes", "requests", "cpu_units"};
    for (unsigned i = 0; i < DD; i++)
        if (strcmp(ra_slice_dimension(sl), dn[i]) == 0) di = i;
    if (ti == TT || di == DD) return false;
    for (size_t r = 0; r < ra_slice_row_count(sl); r++) {
        ra_subject_t s;
        uint64_t inc;
        ra_slice_row(sl, r, &s, &inc);
        unsigned si = SS;
        for (unsigned i = 0; i < SS; i++)
            if (memcmp(s.b, g_subjects[i].b, 16) == 0) si = i;
        if (si == SS) return false;
        tot->v[(ti * SS + si) * DD + di] += inc;
    }
    return true;
}

static inline int totals_diff(const totals_t *a, const totals_t *b) {
    int d = 0;
    for (int i = 0; i < KEYS; i++)
        d += a->v[i] != b->v[i];
    return d;
}

static inline uint64_t totals_sum(const totals_t *a) {
    uint64_t s = 0;
    for (int i = 0; i < KEYS; i++)
        s += a->v[i];
    return s;
}

/* Sums every pending slice into tot; returns how many there were. */
static inline size_t sum_pending(ra_meter_t *m, totals_t *tot) {
    static ra_slice_t *p[8192];
    size_t n = pending_all(m, p, 8192);
    for (size_t i = 0; i < n; i++)
        if (!add_slice(tot, p[i])) RA_FAILF("a pending slice holds an unknown key");
    unref_all(p, n);
    return n;
}

static inline double metric(const ra_meter_t *m, const char *series) {
    return ra_t_metric(m, series);
}

static inline size_t seg_files(simfs_t *fs) {
    return simfs_count_files(fs, WAL_DIR, ".seg");
}

static inline size_t tmp_files(simfs_t *fs) {
    return simfs_count_files(fs, WAL_DIR, ".tmp");
}

/* No pair of the plane is left frozen, and no seal is in progress. */
static inline int frozen_pairs(const ra_meter_t *m) {
    size_t nslots = (size_t)m->hdr->shards * m->hdr->slots_per_shard;
    int n = 0;
    for (size_t i = 0; i < nslots; i++) {
        ra__u128 p = ra__pair_load(&m->slots[i].pair);
        if (ra__pair_stamp(p) & RA_STAMP_FROZEN) n++;
    }
    return n;
}

enum { FRAMES_MAX = 128, SEGS_MAX = 8 };
typedef struct {
    char path[128];
    size_t len, n;
    size_t off[FRAMES_MAX], end[FRAMES_MAX];
    uint8_t b3[FRAMES_MAX][32];
} seg_info_t;

typedef struct {
    simfs_t *fs;
    seg_info_t seg[SEGS_MAX];
    size_t nseg;
} wal_fix_t;

static inline int collect_seg(void *ud, const char *name) {
    wal_fix_t *f = ud;
    size_t l = strlen(name);
    if (l == 20 && strcmp(name + 16, ".seg") == 0 && f->nseg < SEGS_MAX)
        snprintf(f->seg[f->nseg++].path, sizeof f->seg[0].path, "%s/%s", WAL_DIR, name);
    return 0;
}

/* Reads the segments of fs (oldest first) and the position and b3 of every frame. */
static inline void fix_scan(wal_fix_t *f) {
    f->nseg = 0;
    simfs_names(f->fs, WAL_DIR, collect_seg, f);
    for (size_t i = 0; i < f->nseg; i++) {
        seg_info_t *s = &f->seg[i];
        const uint8_t *buf = simfs_data(f->fs, s->path, &s->len);
        s->n = 0;
        for (size_t off = RA_WAL_SEG_HDR; off < s->len && s->n < FRAMES_MAX;) {
            uint64_t seq;
            const uint8_t *pl;
            size_t plen, size = ra__wal_frame_parse(buf + off, s->len - off, &seq, &pl, &plen);
            if (!size) break;
            s->off[s->n] = off;
            s->end[s->n] = off + size;
            memcpy(s->b3[s->n], buf + off + size - 32, 32);
            s->n++;
            off += size;
        }
    }
}

/* Records into window w for `tenants` tenants x `dims` dimensions, `subjects` subjects. */
static inline void record_grid(ra_meter_t *m, int64_t w, unsigned tenants, unsigned dims,
                               unsigned subjects, unsigned base, uint64_t *seed) {
    for (unsigned t = 0; t < tenants; t++)
        for (unsigned d = 0; d < dims; d++)
            for (unsigned s = 0; s < subjects; s++) {
                ra_tenant_t tt = ra_t_tenant(base + t);
                ra_subject_t ss = ra_t_subject(s);
                if (ra_meter_record_at(m, RA_T_EPOCH_MS + w * WIN_MS + 7, &tt, &ss, (int)d,
                                       ra_t_rand(seed) % 5000 + 1) != 0)
                    RA_FAILF("record failed");
            }
}

static inline void set_bytes(simfs_t *fs, const char *path, const uint8_t *buf, size_t len) {
    if (simfs_set_data(fs, path, buf, len) != 0) abort();
}

static inline uint8_t *copy_of(simfs_t *fs, const char *path, size_t *len, size_t extra) {
    const uint8_t *d = simfs_data(fs, path, len);
    if (!d) abort();
    uint8_t *b = malloc(*len + extra + 1);
    if (!b) abort();
    memcpy(b, d, *len);
    return b;
}

/* ---- the fixture: a WAL on sim-fs, a meter on it
 * -------------------------------------------------------------------------- */

typedef struct {
    simfs_t *fs;
    ra_meter_t *m;
    ra_config_t cfg;
    totals_t rec, sealed;
    uint64_t seed;
} walfix_t;

/* The fixture of the I/O tests, in three steps so a test can change the configuration in
 * between: a simulated file system and a WAL configuration (walfix_start), the meter on it
 * (walfix_meter), then both gone (walfix_end). */
static inline void walfix_start(walfix_t *f, uint64_t seed) {
    keys_init();
    memset(f, 0, sizeof *f);
    f->seed = seed;
    f->fs = simfs_new(seed);
    wal_config(&f->cfg, WAL_DIR);
}

static inline bool walfix_meter(walfix_t *f) {
    f->m = open_io(&f->cfg, f->fs, NULL);
    return f->m != NULL;
}

static inline void walfix_end(walfix_t *f) {
    ra_meter_close(f->m);
    simfs_free(f->fs);
}

/* The meter closed and opened again on the same files (a restart, or the next sealer);
 * rc_out as open_io's. False when it does not open. */
static inline bool walfix_reopen(walfix_t *f, int *rc_out) {
    ra_meter_close(f->m);
    f->m = open_io(&f->cfg, f->fs, rc_out);
    return f->m != NULL;
}

/* Records window w of a record_grid (tenants from 300) and seals it at the start of window
 * w + 1: the rollover's code, the slices reported sealed in out[0..*n) (new references; out
 * may be NULL). */
static inline int walfix_seal_grid(walfix_t *f, int64_t w, unsigned tenants, unsigned dims,
                                   unsigned subjects, ra_slice_t **out, size_t cap, size_t *n) {
    record_grid(f->m, w, tenants, dims, subjects, 300, &f->seed);
    *n = 0;
    return ra_meter_rollover(f->m, RA_T_EPOCH_MS + (w + 1) * WIN_MS, out, cap, n);
}

/* The common case: the meter open (on a shared plane with shm), `records` random events
 * recorded into window 0 (0: none). */
static inline bool walfix_open(walfix_t *f, uint64_t seed, const char *shm, int records) {
    walfix_start(f, seed);
    f->cfg.shm_path = shm;
    if (!walfix_meter(f)) return false;
    return record_window(f->m, 0, records, &f->seed, &f->rec) == 0;
}

static inline void walfix_add(walfix_t *f, ra_slice_t **out, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (!add_slice(&f->sealed, out[i])) RA_FAILF("sealed slice with an unknown key");
        ra_slice_unref(out[i]);
    }
}

/* A rollover at the start of window w that must succeed; what it sealed is added to the
 * fixture's totals. Returns how many slices it sealed. */
static inline size_t walfix_seal(walfix_t *f, int64_t w) {
    ra_slice_t *out[256];
    size_t n = 0;
    CHECK_RC(ra_meter_rollover(f->m, RA_T_EPOCH_MS + w * WIN_MS, out, 256, &n), 0);
    walfix_add(f, out, n);
    return n;
}

/* Seals whatever is left, compares every total with what was recorded, ends the fixture. */
static inline void walfix_finish(walfix_t *f, int64_t w) {
    walfix_seal(f, w);
    CHECK_EQ_U64(frozen_pairs(f->m), 0);
    CHECK_EQ_U64(totals_diff(&f->rec, &f->sealed), 0);
    CHECK_EQ_U64(totals_sum(&f->rec), totals_sum(&f->sealed));
    walfix_end(f);
}

/* After a refused rollover: no segment, no .tmp file, no frozen pair (nothing written). */
static inline void walfix_nothing_written(walfix_t *f) {
    CHECK_EQ_U64(seg_files(f->fs), 0);
    CHECK_EQ_U64(tmp_files(f->fs), 0);
    CHECK_EQ_U64(frozen_pairs(f->m), 0);
}

/* A rollover that must fail with `want`, report nothing and leave the counts in the plane. */
static inline void walfix_refused(walfix_t *f, int64_t w, int want) {
    ra_slice_t *out[256] = {NULL};
    size_t n = 77;
    CHECK_RC(ra_meter_rollover(f->m, RA_T_EPOCH_MS + w * WIN_MS, out, 256, &n), want);
    CHECK_EQ_U64(n, 0);
    CHECK(out[0] == NULL);
    CHECK_EQ_U64(ra_meter_pending_count(f->m), 0);
}

/* Seals window w (at the start of window w + 1) and adds every sealed row to the one grand
 * total f->sealed.v[0]: the rollover's code, how many slices in *n_out. */
static inline int cap_seal(walfix_t *f, int64_t w, size_t *n_out) {
    ra_slice_t *out[512];
    size_t n = 0;
    int rc = ra_meter_rollover(f->m, RA_T_EPOCH_MS + (w + 1) * WIN_MS, out, 512, &n);
    for (size_t i = 0; i < n; i++) {
        for (size_t r = 0; r < ra_slice_row_count(out[i]); r++) {
            uint64_t inc;
            ra_slice_row(out[i], r, NULL, &inc);
            f->sealed.v[0] += inc;
        }
        ra_slice_unref(out[i]);
    }
    *n_out = n;
    return rc;
}

/* Records window w of a grid of `streams` tenants (one dimension) into f, then seals it. */
static inline int cap_round(walfix_t *f, int64_t w, unsigned streams, unsigned subjects,
                            size_t *n_out) {
    for (unsigned t = 0; t < streams; t++)
        for (unsigned s = 0; s < subjects; s++) {
            ra_subject_t sub = ra_t_subject(s);
            ra_tenant_t ten = ra_t_tenant(900 + t);
            int rc = ra_meter_record_at(f->m, RA_T_EPOCH_MS + w * WIN_MS + 3, &ten, &sub,
                                        RA_DIM_REQUESTS, 1 + s % 7);
            if (rc != 0) return rc;
            f->rec.v[0] += 1 + s % 7; /* one grand total is enough here */
        }
    return cap_seal(f, w, n_out);
}

/* A meter whose WAL holds at most max_entries slices (a pending ring of 64), on a shared
 * plane with shm (NULL: private). */
static inline bool walfix_open_capped(walfix_t *f, uint64_t seed, uint32_t max_entries,
                                      const char *shm) {
    walfix_start(f, seed);
    f->cfg.shm_path = shm;
    f->cfg.pending_slices_cap = 64;
    f->cfg.wal_max_entries = max_entries;
    return walfix_meter(f);
}

#endif /* RA_TEST_WAL_FIXTURE_H */
