/* Shared helpers for the benchmarks under tests/bench (not a test: run with `make bench`).
 *
 * Timing: CLOCK_MONOTONIC for throughput; the TSC (rdtsc, calibrated against
 * CLOCK_MONOTONIC at start-up) for latency samples. Key sequences come from splitmix64 so
 * the C and LuaJIT benchmarks generate exactly the same sequence from the same seed. */
#ifndef RA_BENCH_COMMON_H
#define RA_BENCH_COMMON_H

#include "../fixtures.h"
#include "ron/accounting.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define BENCH_HAVE_TSC 1
#else
#define BENCH_HAVE_TSC 0
#endif

/* A failed library call ends the benchmark with its taxonomy name. */
static inline void bench_die(const char *prog, const char *what, int rc) {
    fprintf(stderr, "%s: %s: %s (%s)\n", prog, what, ra_strerror(rc), ra_err_name(rc));
    exit(1);
}

/* Cache-line aligned allocation, fatal on failure. */
static inline void *bench_xmalloc(const char *prog, size_t n) {
    void *p = NULL;
    if (posix_memalign(&p, 64, n ? n : 64) != 0) {
        fprintf(stderr, "%s: out of memory (%zu bytes)\n", prog, n);
        exit(1);
    }
    return p;
}

static inline uint64_t bench_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* splitmix64 (tests/fixtures.h): key sequences bench-record.lua reproduces exactly. */
static inline uint64_t bench_splitmix64(uint64_t *state) {
    return ra_fix_splitmix64(state);
}

/* Uniform in [0, n): multiply-shift on the high 32 bits (n < 2^32). */
static inline uint32_t bench_below(uint64_t r, uint32_t n) {
    return (uint32_t)(((r >> 32) * (uint64_t)n) >> 32);
}

/* ---- TSC ------------------------------------------------------------------------------*/
static double bench_ns_per_tick = 0.0;

#if BENCH_HAVE_TSC
static inline uint64_t bench_tsc_begin(void) {
    _mm_lfence();
    uint64_t t = __rdtsc();
    _mm_lfence();
    return t;
}

static inline uint64_t bench_tsc_end(void) {
    unsigned aux;
    uint64_t t = __rdtscp(&aux);
    _mm_lfence();
    return t;
}
#else
/* Without a TSC a tick is a nanosecond (bench_tsc_calibrate sets 1.0). */
static inline uint64_t bench_tsc_begin(void) {
    return bench_now_ns();
}
#define bench_tsc_end bench_tsc_begin
#endif

static inline void bench_tsc_calibrate(void) {
#if BENCH_HAVE_TSC
    uint64_t n0 = bench_now_ns(), t0 = __rdtsc();
    while (bench_now_ns() - n0 < 50000000ull) {
    }
    uint64_t n1 = bench_now_ns(), t1 = __rdtsc();
    bench_ns_per_tick = (double)(n1 - n0) / (double)(t1 - t0);
#else
    bench_ns_per_tick = 1.0;
#endif
}

/* ---- statistics -----------------------------------------------------------------------*/
static inline int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Sorts v in place and returns the p-quantile (nearest rank). */
static inline double bench_quantile_sorted(const double *v, size_t n, double p) {
    if (n == 0) return 0.0;
    size_t i = (size_t)(p * (double)(n - 1) + 0.5);
    if (i >= n) i = n - 1;
    return v[i];
}

static inline double bench_median(double *v, size_t n) {
    qsort(v, n, sizeof *v, bench_cmp_double);
    return bench_quantile_sorted(v, n, 0.5);
}

static inline double bench_min(const double *v, size_t n) {
    double m = v[0];
    for (size_t i = 1; i < n; i++)
        if (v[i] < m) m = v[i];
    return m;
}

/* ---- output ---------------------------------------------------------------------------*/
/* A growing string for one JSON line. */
typedef struct bench_json {
    char buf[4096];
    size_t len;
} bench_json_t;

__attribute__((format(printf, 2, 3))) static inline void bench_json_add(bench_json_t *j,
                                                                        const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(j->buf + j->len, sizeof j->buf - j->len, fmt, ap);
    va_end(ap);
    if (n > 0) {
        j->len += (size_t)n;
        if (j->len >= sizeof j->buf) j->len = sizeof j->buf - 1;
    }
}

/* An amnesia meter with `rows` rows and window_len_s windows, for a benchmark; NULL after a
 * message on stderr when it does not open. */
static inline ra_meter_t *bench_meter_open(const char *prog, uint32_t window_len_s, uint32_t rows,
                                           const char *host) {
    ra_config_t cfg;
    ra_config_init(&cfg);
    cfg.window_len_s = window_len_s;
    cfg.capacity_rows = rows;
    cfg.amnesia = 1;
    cfg.host = host;
    ra_meter_t *m = NULL;
    char err[256];
    if (ra_meter_open(&cfg, &m, err, sizeof err) != 0)
        fprintf(stderr, "%s: ra_meter_open: %s\n", prog, err);
    return m;
}

static FILE *bench_out_file = NULL; /* --out FILE: BENCH lines are appended there too */

/* The options every benchmark takes: --quick (sets *quick) and --out FILE (bench_out_file;
 * a file that cannot be opened ends the run, exit 2). True when argv[*i] was one of them
 * (*i then at its last word). */
static inline bool bench_common_opt(int argc, char **argv, int *i, int *quick) {
    if (!strcmp(argv[*i], "--quick")) {
        *quick = 1;
        return true;
    }
    if (strcmp(argv[*i], "--out") != 0 || *i + 1 >= argc) return false;
    bench_out_file = fopen(argv[++*i], "a");
    if (!bench_out_file) {
        perror(argv[*i]);
        exit(2);
    }
    return true;
}

/* An option taking a value: --name VALUE sets *value. */
typedef struct bench_opt {
    const char *name;
    const char **value;
} bench_opt_t;

/* A benchmark's command line: the common options (bench_common_opt) and opts[0..n). False
 * after usage on stderr for any other word or an option without its value. */
static inline bool bench_parse_args(int argc, char **argv, int *quick, const bench_opt_t *opts,
                                    size_t n, const char *usage) {
    for (int i = 1; i < argc; i++) {
        if (bench_common_opt(argc, argv, &i, quick)) continue;
        size_t k = 0;
        while (k < n && (strcmp(argv[i], opts[k].name) != 0 || i + 1 >= argc))
            k++;
        if (k == n) {
            fprintf(stderr, "usage: %s\n", usage);
            return false;
        }
        *opts[k].value = argv[++i];
    }
    return true;
}

/* The sum of a slice's row increments. */
static inline uint64_t bench_slice_sum(const ra_slice_t *s) {
    uint64_t sum = 0, inc;
    for (size_t r = 0, n = ra_slice_row_count(s); r < n; r++) {
        ra_slice_row(s, r, NULL, &inc);
        sum += inc;
    }
    return sum;
}

static inline void bench_json_emit(const bench_json_t *j) {
    printf("BENCH %s\n", j->buf);
    if (bench_out_file) {
        fprintf(bench_out_file, "BENCH %s\n", j->buf);
        fflush(bench_out_file);
    }
    fflush(stdout);
}

static inline void bench_machine_line(const char *bench) {
    char model[256] = "unknown";
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "model name", 10) == 0) {
                char *c = strchr(line, ':');
                if (c) {
                    c++;
                    while (*c == ' ')
                        c++;
                    size_t n = strcspn(c, "\n");
                    if (n >= sizeof model) n = sizeof model - 1;
                    memcpy(model, c, n);
                    model[n] = '\0';
                }
                break;
            }
        }
        fclose(f);
    }
    char load[64] = "?";
    f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fgets(load, sizeof load, f)) load[strcspn(load, "\n")] = '\0';
        fclose(f);
    }
    printf("# %s: cpu \"%s\", %ld online cpus, TSC %.4f ns/tick, loadavg %s\n"
           "# (a busy machine makes every figure slower; the ratios to baselines measured\n"
           "#  interleaved in the same run are the robust part)\n",
           bench, model, sysconf(_SC_NPROCESSORS_ONLN), bench_ns_per_tick, load);
}

#endif /* RA_BENCH_COMMON_H */
