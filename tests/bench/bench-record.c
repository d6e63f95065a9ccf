/* bench-record: the cost of ra_meter_record() from C (PRODUCT.md §7, first row).
 *
 * Keys are tenant x subject x dimension: 100 tenants x S subjects x 2 dimensions (bytes,
 * requests). Every configuration gets a fresh meter sized to its keys (capacity_rows = keys;
 * the plane allocates 2x entries and 4x slots internally). Each thread replays its own
 * pre-generated sequence of operations {tenant*, subject*, dim, inc, key index}, so the
 * timed loop only reads the next operation and calls the recorder. Before timing, one pass
 * over every key claims the entries, and one untimed pass over each sequence warms caches.
 *
 * Baselines, measured in the same run on the same sequences (interleaved with the core
 * repetitions so drift hits all alike):
 *   plain_inc     counts[key] += inc over a dense uint64_t array (one array per thread);
 *   atomic64_add  relaxed atomic fetch_add into a 64-byte-strided array shared by the
 *                 threads: "lookup + relaxed atomic add", the physical limit of §7.
 * Ratios are cost ratios: core ns/op / baseline ns/op (1.0 = as fast as the baseline).
 *
 * Latency: (a) batches of 64 records timed with rdtsc (lfence-fenced), divided by 64: the
 * percentiles of per-batch means; (b) single records, each timed with an lfence;rdtsc ...
 * rdtscp;lfence pair, minus the median cost of an empty pair (so tails include the 1-in-1024
 * records the core times itself for its latency histogram).
 *
 * After the runs the meter is rolled over and the sum of every sealed row must equal the
 * sum of every increment recorded (the benchmark fails otherwise): a benchmark of a wrong
 * counter proves nothing.
 *
 * Usage: bench-record [--quick] [--keys 10000,100000,1000000] [--dist uniform,zipf]
 *                     [--threads 1,2] [--clock fixed|system|both] [--ops N] [--reps N]
 *                     [--seed N] [--out FILE]
 */
#include "bench-common.h"

#include <ron/accounting.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>

#define N_TENANTS 100u
#define N_DIMS 2u
#define BATCH 64u
#define MAX_THREADS 2
#define SINGLE_MAX (1u << 20) /* records timed one by one per thread */
#define WINDOW_LEN_S 300u
/* A fixed instant in the middle of a window: 2023-11-14T22:17:30Z. Window index
 * 1700000250 / 300 = 5666667, starting at 1700000100 s; no boundary is near. */
#define FIXED_NOW_MS 1700000250000ll

typedef struct op {
    const ra_tenant_t *t;
    const ra_subject_t *s;
    uint32_t key;
    uint16_t dim;
    uint16_t inc;
} op_t;

typedef struct keyset {
    uint32_t n_keys, n_subjects;
    ra_tenant_t tenants[N_TENANTS];
    ra_subject_t *subjects;
    int dims[N_DIMS];
} keyset_t;

typedef struct cfg {
    uint32_t keys;
    int zipf;
    int threads;
    int sys_clock;
} cfg_t;

static uint64_t g_seed = 0x5eed2026ull;
static size_t g_ops = 1u << 22; /* operations per thread per pass */
static int g_reps = 5;
static int g_quick = 0;
static const char *g_dist_names[2] = {"uniform", "zipf"};

#define BENCH_NAME "bench-record"
#define die(what, rc) bench_die(BENCH_NAME, (what), (rc))
#define xmalloc(n) bench_xmalloc(BENCH_NAME, (n))

/* Key k: dim = k % 2, subject = (k / 2) % S, tenant = k / (2 S). */
static void key_parts(const keyset_t *ks, uint32_t k, uint32_t *ti, uint32_t *si, uint32_t *di) {
    *di = k % N_DIMS;
    *si = (k / N_DIMS) % ks->n_subjects;
    *ti = k / (N_DIMS * ks->n_subjects);
}

static void keyset_init(keyset_t *ks, ra_meter_t *m, uint32_t n_keys) {
    ks->n_subjects = n_keys / (N_TENANTS * N_DIMS);
    ks->n_keys = N_TENANTS * N_DIMS * ks->n_subjects;
    for (uint32_t t = 0; t < N_TENANTS; t++) {
        char uuid[40];
        snprintf(uuid, sizeof uuid, "%08x-0000-4000-8000-%012x", 0x10000000u + t, t);
        int rc = ra_tenant_parse(uuid, 36, &ks->tenants[t]);
        if (rc) die("ra_tenant_parse", rc);
    }
    ks->subjects = xmalloc(sizeof(ra_subject_t) * ks->n_subjects);
    for (uint32_t s = 0; s < ks->n_subjects; s++) {
        char id[32];
        int n = snprintf(id, sizeof id, "user-%u", s);
        int rc = ra_meter_subject(m, id, (size_t)n, &ks->subjects[s]);
        if (rc) die("ra_meter_subject", rc);
    }
    ks->dims[0] = ra_meter_dimension(m, "bytes", 5);
    ks->dims[1] = ra_meter_dimension(m, "requests", 8);
}

/* Zipf(s = 1.0) over ranks 1..n: cumulative distribution, and a random permutation that
 * maps ranks to keys so hot keys are scattered over the plane and over the baselines. */
typedef struct zipf {
    double *cdf;
    uint32_t *perm;
    uint32_t n;
    double top_share;
} zipf_t;

static void zipf_init(zipf_t *z, uint32_t n, uint64_t seed) {
    z->n = n;
    z->cdf = xmalloc(sizeof(double) * n);
    z->perm = xmalloc(sizeof(uint32_t) * n);
    double h = 0;
    for (uint32_t k = 0; k < n; k++) {
        h += 1.0 / (double)(k + 1);
        z->cdf[k] = h;
    }
    for (uint32_t k = 0; k < n; k++)
        z->cdf[k] /= h;
    z->top_share = 1.0 / h;
    uint64_t st = seed ^ 0xA5A5A5A5A5A5A5A5ull;
    for (uint32_t k = 0; k < n; k++)
        z->perm[k] = k;
    for (uint32_t k = n - 1; k > 0; k--) {
        uint32_t j = bench_below(bench_splitmix64(&st), k + 1);
        uint32_t t = z->perm[k];
        z->perm[k] = z->perm[j];
        z->perm[j] = t;
    }
}

static uint32_t zipf_draw(const zipf_t *z, uint64_t r) {
    double u = (double)(r >> 11) * (1.0 / 9007199254740992.0);
    uint32_t lo = 0, hi = z->n - 1;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (z->cdf[mid] < u)
            lo = mid + 1;
        else
            hi = mid;
    }
    return z->perm[lo];
}

static void zipf_free(zipf_t *z) {
    free(z->cdf);
    free(z->perm);
}

/* The sequence of thread `tid`: seed + tid. The LuaJIT benchmark reproduces the uniform
 * one exactly (same splitmix64, same reduction). */
static void gen_seq(op_t *seq, size_t len, const keyset_t *ks, const zipf_t *z, uint64_t seed) {
    uint64_t st = seed;
    for (size_t i = 0; i < len; i++) {
        uint64_t r = bench_splitmix64(&st);
        uint32_t k = z ? zipf_draw(z, r) : bench_below(r, ks->n_keys);
        uint32_t ti, si, di;
        key_parts(ks, k, &ti, &si, &di);
        seq[i].t = &ks->tenants[ti];
        seq[i].s = &ks->subjects[si];
        seq[i].key = k;
        seq[i].dim = (uint16_t)ks->dims[di];
        seq[i].inc = (uint16_t)(1 + (r & 63));
    }
}

static uint64_t seq_sum(const op_t *seq, size_t n) {
    uint64_t s = 0;
    for (size_t i = 0; i < n; i++)
        s += seq[i].inc;
    return s;
}

/* ---- the measured loops ---------------------------------------------------------------*/
typedef struct line {
    _Alignas(64) _Atomic uint64_t v;
    char pad[56];
} line_t;
_Static_assert(sizeof(line_t) == 64, "64-byte stride");

enum kind { K_CORE, K_KEY, K_PLAIN, K_ATOMIC, K_LAT_BATCH, K_LAT_SINGLE, K_TSC_EMPTY };

typedef struct job {
    enum kind kind;
    int tid, cpu, sys_clock;
    ra_meter_t *m;
    const op_t *seq;
    size_t len;
    uint64_t *counts; /* K_PLAIN: this thread's dense array */
    line_t *lines;    /* K_ATOMIC: shared strided array */
    ra_key_t *keys;   /* K_KEY: this thread's key handles, one per key */
    double *lat;      /* latency samples (ns) out */
    size_t n_lat;
    uint64_t elapsed_ns, errors, recorded; /* recorded: sum of incs accepted by the core */
    pthread_barrier_t *bar;
} job_t;

static __attribute__((noinline)) uint64_t loop_core_at(ra_meter_t *m, const op_t *seq, size_t len) {
    uint64_t errs = 0;
    for (size_t i = 0; i < len; i++)
        errs +=
            ra_meter_record_at(m, FIXED_NOW_MS, seq[i].t, seq[i].s, seq[i].dim, seq[i].inc) != 0;
    return errs;
}

static __attribute__((noinline)) uint64_t loop_core_sys(ra_meter_t *m, const op_t *seq,
                                                        size_t len) {
    uint64_t errs = 0;
    for (size_t i = 0; i < len; i++)
        errs += ra_meter_record(m, seq[i].t, seq[i].s, seq[i].dim, seq[i].inc) != 0;
    return errs;
}

/* Through key handles (ra_meter_record_key): no key hash, probe or compare per record. */
static __attribute__((noinline)) uint64_t loop_key(ra_meter_t *m, ra_key_t *keys, int sys_clock,
                                                   const op_t *seq, size_t len) {
    uint64_t errs = 0;
    if (sys_clock)
        for (size_t i = 0; i < len; i++)
            errs += ra_meter_record_key(m, &keys[seq[i].key], seq[i].inc) != 0;
    else
        for (size_t i = 0; i < len; i++)
            errs += ra_meter_record_key_at(m, FIXED_NOW_MS, &keys[seq[i].key], seq[i].inc) != 0;
    return errs;
}

static __attribute__((noinline)) void loop_plain(uint64_t *counts, const op_t *seq, size_t len) {
    for (size_t i = 0; i < len; i++)
        counts[seq[i].key] += seq[i].inc;
}

static __attribute__((noinline)) void loop_atomic(line_t *lines, const op_t *seq, size_t len) {
    for (size_t i = 0; i < len; i++)
        atomic_fetch_add_explicit(&lines[seq[i].key].v, seq[i].inc, memory_order_relaxed);
}

static inline int rec(const job_t *j, const op_t *o) {
    return j->sys_clock ? ra_meter_record(j->m, o->t, o->s, o->dim, o->inc)
                        : ra_meter_record_at(j->m, FIXED_NOW_MS, o->t, o->s, o->dim, o->inc);
}

static void *job_run(void *arg) {
    job_t *j = arg;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(j->cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    pthread_barrier_wait(j->bar);
    j->errors = 0;
    j->recorded = 0;
    uint64_t t0 = bench_now_ns();
    switch (j->kind) {
    case K_CORE:
        j->errors =
            j->sys_clock ? loop_core_sys(j->m, j->seq, j->len) : loop_core_at(j->m, j->seq, j->len);
        break;
    case K_KEY:
        j->errors = loop_key(j->m, j->keys, j->sys_clock, j->seq, j->len);
        break;
    case K_PLAIN:
        loop_plain(j->counts, j->seq, j->len);
        break;
    case K_ATOMIC:
        loop_atomic(j->lines, j->seq, j->len);
        break;
    case K_LAT_BATCH: {
        size_t nb = j->len / BATCH;
        for (size_t b = 0; b < nb; b++) {
            const op_t *o = j->seq + b * BATCH;
            uint64_t a = bench_tsc_begin();
            for (unsigned i = 0; i < BATCH; i++)
                j->errors += rec(j, &o[i]) != 0;
            uint64_t e = bench_tsc_end();
            j->lat[b] = (double)(e - a) * bench_ns_per_tick / BATCH;
        }
        j->n_lat = nb;
        j->len = nb * BATCH;
        break;
    }
    case K_LAT_SINGLE: {
        size_t n = j->len < SINGLE_MAX ? j->len : SINGLE_MAX;
        for (size_t i = 0; i < n; i++) {
            uint64_t a = bench_tsc_begin();
            j->errors += rec(j, &j->seq[i]) != 0;
            uint64_t e = bench_tsc_end();
            j->lat[i] = (double)(e - a);
        }
        j->n_lat = n;
        j->len = n;
        break;
    }
    case K_TSC_EMPTY: {
        size_t n = 100000;
        for (size_t i = 0; i < n; i++) {
            uint64_t a = bench_tsc_begin();
            uint64_t e = bench_tsc_end();
            j->lat[i] = (double)(e - a);
        }
        j->n_lat = n;
        break;
    }
    }
    j->elapsed_ns = bench_now_ns() - t0;
    return NULL;
}

/* Runs one job per thread (thread i pinned to cpu i % ncpu) and waits for them. */
static void run_jobs(job_t *jobs, int n) {
    pthread_t th[MAX_THREADS];
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, (unsigned)n);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    for (int i = 0; i < n; i++) {
        jobs[i].bar = &bar;
        jobs[i].cpu = (int)(i % (ncpu > 0 ? ncpu : 1));
        if (pthread_create(&th[i], NULL, job_run, &jobs[i]) != 0) {
            fprintf(stderr, "bench-record: pthread_create failed\n");
            exit(1);
        }
    }
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&bar);
}

/* One measurement: aggregate ns per op = threads x wall / ops (CPU-ns per record),
 * aggregate ops/s = ops / wall; per-thread ops/s into per (may be NULL). */
typedef struct meas {
    double ns_per_op, ops_per_s, per_thread[MAX_THREADS];
} meas_t;

static meas_t measure(job_t *jobs, int n) {
    run_jobs(jobs, n);
    meas_t r = {0};
    uint64_t wall = 0, ops = 0;
    for (int i = 0; i < n; i++) {
        if (jobs[i].elapsed_ns > wall) wall = jobs[i].elapsed_ns;
        ops += jobs[i].len;
        r.per_thread[i] = (double)jobs[i].len * 1e9 / (double)jobs[i].elapsed_ns;
    }
    r.ns_per_op = (double)wall * n / (double)ops;
    r.ops_per_s = (double)ops * 1e9 / (double)wall;
    return r;
}

static void fmt_rate(char *buf, size_t n, double ops_per_s) {
    snprintf(buf, n, "%.2fM/s", ops_per_s / 1e6);
}

/* Percentiles of the samples of every job (sorted together). */
static void lat_percentiles(job_t *jobs, int n, double scale, double minus, double *p50,
                            double *p99, double *p999, double *pmax) {
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += jobs[i].n_lat;
    double *all = xmalloc(sizeof(double) * (total ? total : 1));
    size_t k = 0;
    for (int i = 0; i < n; i++)
        for (size_t s = 0; s < jobs[i].n_lat; s++) {
            double v = jobs[i].lat[s] * scale - minus;
            all[k++] = v < 0 ? 0 : v;
        }
    qsort(all, total, sizeof *all, bench_cmp_double);
    *p50 = bench_quantile_sorted(all, total, 0.50);
    *p99 = bench_quantile_sorted(all, total, 0.99);
    *p999 = bench_quantile_sorted(all, total, 0.999);
    *pmax = total ? all[total - 1] : 0;
    free(all);
}

/* ---- one configuration ----------------------------------------------------------------*/
static int run_config(const cfg_t *c) {
    ra_meter_t *m = bench_meter_open("bench-record", WINDOW_LEN_S, c->keys, "bench");
    if (!m) return 1;
    int rc;
    keyset_t ks;
    keyset_init(&ks, m, c->keys);
    int T = c->threads;

    zipf_t z, *zp = NULL;
    if (c->zipf) {
        zipf_init(&z, ks.n_keys, g_seed);
        zp = &z;
    }
    op_t *seq[MAX_THREADS];
    uint64_t seq_total[MAX_THREADS];
    for (int t = 0; t < T; t++) {
        seq[t] = xmalloc(sizeof(op_t) * g_ops);
        gen_seq(seq[t], g_ops, &ks, zp, g_seed + (uint64_t)t);
        seq_total[t] = seq_sum(seq[t], g_ops);
    }

    /* Claim every key (inc 1) so the timed passes only add to existing entries. */
    uint64_t expected = 0;
    for (uint32_t k = 0; k < ks.n_keys; k++) {
        uint32_t ti, si, di;
        key_parts(&ks, k, &ti, &si, &di);
        rc = c->sys_clock ? ra_meter_record(m, &ks.tenants[ti], &ks.subjects[si], ks.dims[di], 1)
                          : ra_meter_record_at(m, FIXED_NOW_MS, &ks.tenants[ti], &ks.subjects[si],
                                               ks.dims[di], 1);
        if (rc) die("claim pass", rc);
        expected++;
    }

    uint64_t *counts[MAX_THREADS];
    for (int t = 0; t < T; t++) {
        counts[t] = xmalloc(sizeof(uint64_t) * ks.n_keys);
        memset(counts[t], 0, sizeof(uint64_t) * ks.n_keys);
    }
    line_t *lines = xmalloc(sizeof(line_t) * ks.n_keys);
    memset(lines, 0, sizeof(line_t) * ks.n_keys);
    ra_key_t *keys[MAX_THREADS];
    for (int t = 0; t < T; t++) {
        keys[t] = xmalloc(sizeof(ra_key_t) * ks.n_keys);
        for (uint32_t k = 0; k < ks.n_keys; k++) {
            uint32_t ti, si, di;
            key_parts(&ks, k, &ti, &si, &di);
            rc = ra_key_init(&keys[t][k], m, &ks.tenants[ti], &ks.subjects[si], ks.dims[di]);
            if (rc) die("ra_key_init", rc);
        }
    }

    job_t jobs[MAX_THREADS];
    uint64_t errors = 0;
#define SETUP(kind_)                                                                               \
    for (int t = 0; t < T; t++) {                                                                  \
        memset(&jobs[t], 0, sizeof jobs[t]);                                                       \
        jobs[t].kind = (kind_);                                                                    \
        jobs[t].tid = t;                                                                           \
        jobs[t].m = m;                                                                             \
        jobs[t].sys_clock = c->sys_clock;                                                          \
        jobs[t].seq = seq[t];                                                                      \
        jobs[t].len = g_ops;                                                                       \
        jobs[t].counts = counts[t];                                                                \
        jobs[t].lines = lines;                                                                     \
        jobs[t].keys = keys[t];                                                                    \
    }
#define ACCOUNT()                                                                                  \
    for (int t = 0; t < T; t++) {                                                                  \
        errors += jobs[t].errors;                                                                  \
        expected += jobs[t].len == g_ops ? seq_total[t] : seq_sum(seq[t], jobs[t].len);            \
    }

    /* Warm-up: one untimed pass of everything. */
    SETUP(K_CORE);
    measure(jobs, T);
    ACCOUNT();
    SETUP(K_KEY);
    measure(jobs, T);
    ACCOUNT();
    SETUP(K_PLAIN);
    measure(jobs, T);
    SETUP(K_ATOMIC);
    measure(jobs, T);

    double key_ns[64], core_ns[64], plain_ns[64], atomic_ns[64], core_rate[64];
    double per_thread[MAX_THREADS][64];
    int reps = g_reps > 64 ? 64 : g_reps;
    for (int r = 0; r < reps; r++) {
        SETUP(K_CORE);
        meas_t mc = measure(jobs, T);
        ACCOUNT();
        core_ns[r] = mc.ns_per_op;
        core_rate[r] = mc.ops_per_s;
        for (int t = 0; t < T; t++)
            per_thread[t][r] = mc.per_thread[t];
        SETUP(K_KEY);
        key_ns[r] = measure(jobs, T).ns_per_op;
        ACCOUNT();
        SETUP(K_PLAIN);
        plain_ns[r] = measure(jobs, T).ns_per_op;
        SETUP(K_ATOMIC);
        atomic_ns[r] = measure(jobs, T).ns_per_op;
    }
    double core_min = bench_min(core_ns, (size_t)reps);
    double core_med = bench_median(core_ns, (size_t)reps);
    double rate_med = bench_median(core_rate, (size_t)reps);
    double plain_med = bench_median(plain_ns, (size_t)reps);
    double atomic_med = bench_median(atomic_ns, (size_t)reps);
    double key_med = bench_median(key_ns, (size_t)reps);
    double pt_med[MAX_THREADS];
    for (int t = 0; t < T; t++)
        pt_med[t] = bench_median(per_thread[t], (size_t)reps);

    /* Latency: batches of 64, then single records. */
    double bp50, bp99, bp999, bmax, sp50, sp99, sp999, smax;
    SETUP(K_LAT_BATCH);
    for (int t = 0; t < T; t++)
        jobs[t].lat = xmalloc(sizeof(double) * (g_ops / BATCH + 1));
    run_jobs(jobs, T);
    ACCOUNT();
    lat_percentiles(jobs, T, 1.0, 0.0, &bp50, &bp99, &bp999, &bmax);
    for (int t = 0; t < T; t++)
        free(jobs[t].lat);

    SETUP(K_TSC_EMPTY);
    jobs[0].lat = xmalloc(sizeof(double) * 100000);
    run_jobs(jobs, 1);
    double overhead_ticks = bench_median(jobs[0].lat, jobs[0].n_lat);
    free(jobs[0].lat);
    double overhead_ns = overhead_ticks * bench_ns_per_tick;

    SETUP(K_LAT_SINGLE);
    for (int t = 0; t < T; t++)
        jobs[t].lat = xmalloc(sizeof(double) * SINGLE_MAX);
    run_jobs(jobs, T);
    ACCOUNT();
    lat_percentiles(jobs, T, bench_ns_per_tick, overhead_ns, &sp50, &sp99, &sp999, &smax);
    for (int t = 0; t < T; t++)
        free(jobs[t].lat);

    /* Conservation check: seal everything and compare. */
    int64_t seal_at;
    if (c->sys_clock) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        seal_at = ((int64_t)ts.tv_sec / WINDOW_LEN_S + 1) * WINDOW_LEN_S * 1000;
    } else {
        seal_at = (FIXED_NOW_MS / 1000 / WINDOW_LEN_S + 1) * WINDOW_LEN_S * 1000;
    }
    size_t n_sealed = 0;
    rc = ra_meter_rollover(m, seal_at, NULL, 0, &n_sealed);
    if (rc) die("ra_meter_rollover", rc);
    uint64_t sealed_sum = 0, sealed_rows = 0;
    size_t pend = ra_meter_pending_count(m);
    for (size_t i = 0; i < pend; i++) {
        ra_slice_t *s;
        if (ra_meter_pending_get(m, i, &s) != 0) continue;
        sealed_sum += bench_slice_sum(s);
        sealed_rows += ra_slice_row_count(s);
        ra_slice_unref(s);
    }
    bool ok = errors == 0 && sealed_sum == expected;

    /* ---- report ---- */
    char name[128];
    snprintf(name, sizeof name, "record/c/k%u/%s/t%d/%s", ks.n_keys, g_dist_names[c->zipf], T,
             c->sys_clock ? "system_clock" : "fixed_time");
    char rate[32];
    fmt_rate(rate, sizeof rate, rate_med);
    printf("\n== %s: %u keys (%u tenants x %u subjects x %u dims), %s%s, %d thread%s, %s\n", name,
           ks.n_keys, N_TENANTS, ks.n_subjects, N_DIMS, g_dist_names[c->zipf],
           c->zipf ? " s=1.0" : "", T, T > 1 ? "s" : "",
           c->sys_clock ? "ra_meter_record (system clock)" : "ra_meter_record_at (fixed time)");
    if (c->zipf)
        printf("   zipf: hottest key gets %.2f%% of the records; seed %#llx\n", 100.0 * z.top_share,
               (unsigned long long)g_seed);
    else
        printf("   seed %#llx (thread i uses seed + i)\n", (unsigned long long)g_seed);
    printf("   %zu ops/thread/pass, %d reps (median; min %.1f ns/op)\n", g_ops, reps, core_min);
    printf("   core        %7.1f ns/op  %10s aggregate", core_med, rate);
    if (T > 1) {
        printf("  (per thread:");
        for (int t = 0; t < T; t++)
            printf(" %.2fM/s", pt_med[t] / 1e6);
        printf(")");
    }
    printf("\n");
    printf("   plain_inc   %7.1f ns/op  core/plain  = %.2fx%s\n", plain_med, core_med / plain_med,
           T > 1 ? "  (private array per thread)" : "");
    printf("   atomic64    %7.1f ns/op  core/atomic = %.2fx%s\n", atomic_med, core_med / atomic_med,
           T > 1 ? "  (shared 64-byte-strided array)" : "");
    printf("   key handle  %7.1f ns/op  key/atomic  = %.2fx  (ra_meter_record_key%s, a handle "
           "per key and thread)\n",
           key_med, key_med / atomic_med, c->sys_clock ? "" : "_at");
    printf("   latency, batches of %u (rdtsc per batch / %u): p50 %.1f ns  p99 %.1f ns  "
           "p99.9 %.1f ns  max %.1f ns\n",
           BATCH, BATCH, bp50, bp99, bp999, bmax);
    printf("   latency, single records (rdtsc pair, minus %.1f ns empty-pair median): p50 %.1f "
           "ns  p99 %.1f ns  p99.9 %.1f ns  max %.0f ns\n",
           overhead_ns, sp50, sp99, sp999, smax);
    printf("   conservation: %s (recorded %llu, sealed %llu in %llu rows / %zu slices, %llu "
           "errors)\n",
           ok ? "ok" : "FAILED", (unsigned long long)expected, (unsigned long long)sealed_sum,
           (unsigned long long)sealed_rows, pend, (unsigned long long)errors);

    bench_json_t j = {.len = 0};
    bench_json_add(&j, "{\"bench\":\"record\",\"name\":\"%s\",\"lang\":\"c\",", name);
    bench_json_add(&j,
                   "\"params\":{\"keys\":%u,\"tenants\":%u,\"subjects\":%u,\"dims\":%u,"
                   "\"dist\":\"%s\",\"zipf_s\":%s,\"threads\":%d,\"clock\":\"%s\","
                   "\"ops_per_thread\":%zu,\"reps\":%d,\"seed\":%llu},",
                   ks.n_keys, N_TENANTS, ks.n_subjects, N_DIMS, g_dist_names[c->zipf],
                   c->zipf ? "1.0" : "null", T, c->sys_clock ? "system" : "fixed", g_ops, reps,
                   (unsigned long long)g_seed);
    bench_json_add(&j, "\"ns_per_op\":%.3f,\"ns_per_op_min\":%.3f,\"ops_per_s\":%.0f,", core_med,
                   core_min, rate_med);
    bench_json_add(&j, "\"per_thread_ops_per_s\":[");
    for (int t = 0; t < T; t++)
        bench_json_add(&j, "%s%.0f", t ? "," : "", pt_med[t]);
    bench_json_add(&j, "],");
    bench_json_add(&j,
                   "\"baselines\":{\"plain_inc\":{\"ns_per_op\":%.3f},\"atomic64_add\":{"
                   "\"ns_per_op\":%.3f}},\"ratios\":{\"plain_inc\":%.3f,\"atomic64_add\":%.3f},",
                   plain_med, atomic_med, core_med / plain_med, core_med / atomic_med);
    bench_json_add(&j, "\"key_handle\":{\"ns_per_op\":%.3f,\"ratios\":{\"atomic64_add\":%.3f}},",
                   key_med, key_med / atomic_med);
    bench_json_add(&j,
                   "\"latency\":{\"batch\":{\"method\":\"rdtsc per batch of %u / %u\","
                   "\"p50_ns\":%.1f,\"p99_ns\":%.1f,\"p999_ns\":%.1f,\"max_ns\":%.1f},"
                   "\"single\":{\"method\":\"rdtsc pair per record minus empty-pair median\","
                   "\"overhead_ns\":%.1f,\"p50_ns\":%.1f,\"p99_ns\":%.1f,\"p999_ns\":%.1f,"
                   "\"max_ns\":%.1f}},",
                   BATCH, BATCH, bp50, bp99, bp999, bmax, overhead_ns, sp50, sp99, sp999, smax);
    bench_json_add(&j, "\"conservation_ok\":%s}", ok ? "true" : "false");
    bench_json_emit(&j);

    for (int t = 0; t < T; t++) {
        free(seq[t]);
        free(counts[t]);
        free(keys[t]);
    }
    free(lines);
    free(ks.subjects);
    if (zp) zipf_free(zp);
    ra_meter_close(m);
    return ok ? 0 : 1;
}

/* ---- arguments ------------------------------------------------------------------------*/
static int parse_list(const char *s, uint32_t *out, int max) {
    int n = 0;
    while (*s && n < max) {
        char *end;
        unsigned long v = strtoul(s, &end, 10);
        if (end == s) return -1;
        if (*end == 'k' || *end == 'K') v *= 1000, end++;
        if (*end == 'm' || *end == 'M') v *= 1000000, end++;
        out[n++] = (uint32_t)v;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return -1;
    }
    return n;
}

static void usage(void) {
    fprintf(stderr, "usage: bench-record [--quick] [--keys 10k,100k,1m] [--dist uniform,zipf]\n"
                    "                    [--threads 1,2] [--clock fixed|system|both] [--ops N]\n"
                    "                    [--reps N] [--seed N] [--out FILE]\n");
    exit(2);
}

int main(int argc, char **argv) {
    uint32_t keys[8] = {10000, 100000, 1000000}, threads[4] = {1, 2};
    int n_keys = 3, n_threads = 2, dists = 3; /* bit 0 uniform, bit 1 zipf */
    int clock_mode = 3;                       /* bit 0 fixed, bit 1 system (100k uniform) */
    bool keys_set = false;
    for (int i = 1; i < argc; i++) {
        if (bench_common_opt(argc, argv, &i, &g_quick)) continue;
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--keys") && v) {
            n_keys = parse_list(v, keys, 8);
            if (n_keys <= 0) usage();
            for (int k = 0; k < n_keys; k++)
                if (keys[k] < N_TENANTS * N_DIMS) { /* at least one subject per tenant and dim */
                    fprintf(stderr,
                            "bench-record: --keys: at least %u keys (%u tenants x %u "
                            "dims), got %llu\n",
                            N_TENANTS * N_DIMS, N_TENANTS, N_DIMS, (unsigned long long)keys[k]);
                    return 2;
                }
            keys_set = true;
            i++;
        } else if (!strcmp(a, "--threads") && v) {
            n_threads = parse_list(v, threads, 4);
            if (n_threads <= 0) usage();
            for (int t = 0; t < n_threads; t++)
                if (threads[t] < 1 || threads[t] > MAX_THREADS) usage();
            i++;
        } else if (!strcmp(a, "--dist") && v) {
            dists = (strstr(v, "uniform") ? 1 : 0) | (strstr(v, "zipf") ? 2 : 0);
            if (!dists) usage();
            i++;
        } else if (!strcmp(a, "--clock") && v) {
            clock_mode = !strcmp(v, "fixed")    ? 1
                         : !strcmp(v, "system") ? 2
                         : !strcmp(v, "both")   ? 3
                                                : 0;
            if (!clock_mode) usage();
            i++;
        } else if (!strcmp(a, "--ops") && v) {
            g_ops = strtoull(v, NULL, 10);
            i++;
        } else if (!strcmp(a, "--reps") && v) {
            g_reps = atoi(v);
            i++;
        } else if (!strcmp(a, "--seed") && v) {
            g_seed = strtoull(v, NULL, 0);
            i++;
        } else {
            usage();
        }
    }
    if (g_quick) {
        if (!keys_set) {
            keys[0] = 2000;
            n_keys = 1;
        }
        if (g_ops == (1u << 22)) g_ops = 1u << 14;
        g_reps = 2;
    }
    if (g_ops < BATCH) g_ops = BATCH;
    if (g_reps < 1) g_reps = 1;

    bench_tsc_calibrate();
    bench_machine_line("bench-record");
    printf("# ratios are cost ratios (core ns/op / baseline ns/op); with 2 threads ns/op is\n"
           "# CPU-ns per record (threads x wall / records) and records/s is the aggregate.\n");
    int fails = 0;
    if (clock_mode & 1) {
        for (int ki = 0; ki < n_keys; ki++)
            for (int d = 0; d < 2; d++) {
                if (!(dists & (1 << d))) continue;
                for (int ti = 0; ti < n_threads; ti++) {
                    cfg_t c = {.keys = keys[ki], .zipf = d, .threads = (int)threads[ti]};
                    fails += run_config(&c);
                }
            }
    }
    if (clock_mode & 2) {
        /* The system clock path once: 100k keys uniform, one thread (or --keys[0]). */
        cfg_t c = {.keys = keys_set || g_quick ? keys[0] : 100000,
                   .zipf = 0,
                   .threads = 1,
                   .sys_clock = 1};
        fails += run_config(&c);
    }
    if (bench_out_file) fclose(bench_out_file);
    if (fails) {
        fprintf(stderr, "bench-record: %d configuration(s) failed their check\n", fails);
        return 1;
    }
    return 0;
}
