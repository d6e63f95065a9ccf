/* bench-seal: the cost of sealing a window (PRODUCT.md §7, "seal 10k rows": scan + sort +
 * drain + encode + BLAKE3 + enqueue), timed around ra_meter_rollover() only.
 *
 * One meter per configuration, sized to its rows. Repetition r records every key once into
 * window W0 + r (ra_meter_record_at, untimed), then times ra_meter_rollover(end of that
 * window). Repetition 0 is the meter's first rollover (cold: the sealer's scratch is
 * allocated and faulted in, stream heads are created) and is reported on its own; the
 * steady-state figure is the min/median of the others. Between repetitions every pending
 * slice is ACKed (untimed), so the ring never fills.
 *
 * Baselines in the same run, over the bytes that rollover produced (the concatenation of
 * every slice's canonical encoding, sum of ra_slice_bytes lengths):
 *   b3_oneshot    one ra_b3() over all of them (the §7 "one-shot BLAKE3" floor);
 *   b3_per_slice  one ra_b3() per slice (each slice needs its own digest: the real floor
 *                 of the hashing when slices are small);
 *   memcpy        copying that many bytes (the floor of writing the encoding).
 * Ratios are cost ratios: seal ms / baseline ms.
 *
 * Checks: every repetition must seal exactly the configured rows with the recorded sum.
 *
 * Usage: bench-seal [--quick] [--reps N] [--only NAME] [--out FILE]
 */
#include "bench-common.h"

#include <ron/accounting.h>

#include <stdbool.h>

#define WINDOW_LEN_S 300u
#define W0 5666667ll /* window index of 2023-11-14T22:15:00Z */

typedef struct scfg {
    const char *name;
    uint32_t tenants, subjects;
    int reps;
} scfg_t;

static int g_reps = 0; /* 0: per configuration */
static int g_quick = 0;

#define BENCH_NAME "bench-seal"
#define die(what, rc) bench_die(BENCH_NAME, (what), (rc))
#define xmalloc(n) bench_xmalloc(BENCH_NAME, (n))

static double ms_since(uint64_t t0) {
    return (double)(bench_now_ns() - t0) / 1e6;
}

static int run(const scfg_t *c) {
    uint32_t rows = c->tenants * c->subjects;
    int reps = g_reps ? g_reps : c->reps;
    if (reps < 2) reps = 2;

    ra_meter_t *m = bench_meter_open("bench-seal", WINDOW_LEN_S, rows, "bench-host");
    if (!m) return 1;
    int rc;
    ra_tenant_t *tenants = xmalloc(sizeof(ra_tenant_t) * c->tenants);
    ra_subject_t *subjects = xmalloc(sizeof(ra_subject_t) * c->subjects);
    for (uint32_t t = 0; t < c->tenants; t++) {
        char uuid[40];
        snprintf(uuid, sizeof uuid, "%08x-0000-4000-8000-%012x", 0x20000000u + t, t);
        if ((rc = ra_tenant_parse(uuid, 36, &tenants[t])) != 0) die("ra_tenant_parse", rc);
    }
    for (uint32_t s = 0; s < c->subjects; s++) {
        char id[32];
        int n = snprintf(id, sizeof id, "user-%u", s);
        if ((rc = ra_meter_subject(m, id, (size_t)n, &subjects[s])) != 0)
            die("ra_meter_subject", rc);
    }
    int dim = ra_meter_dimension(m, "bytes", 5);

    double *seal_ms = xmalloc(sizeof(double) * (size_t)reps);
    double cold_ms = 0;
    size_t slices = 0, enc_bytes = 0;
    uint8_t *concat = NULL, *copy = NULL;
    size_t *slice_len = NULL;
    bool ok = true;

    for (int r = 0; r < reps; r++) {
        int64_t win = W0 + r;
        int64_t at = win * WINDOW_LEN_S * 1000 + 150000;
        uint64_t want = 0;
        for (uint32_t t = 0; t < c->tenants; t++)
            for (uint32_t s = 0; s < c->subjects; s++) {
                uint64_t inc = 1 + ((t * 31u + s) & 1023u);
                if ((rc = ra_meter_record_at(m, at, &tenants[t], &subjects[s], dim, inc)) != 0)
                    die("ra_meter_record_at", rc);
                want += inc;
            }
        size_t n_sealed = 0;
        uint64_t t0 = bench_now_ns();
        rc = ra_meter_rollover(m, (win + 1) * WINDOW_LEN_S * 1000, NULL, 0, &n_sealed);
        double ms = ms_since(t0);
        if (rc) die("ra_meter_rollover", rc);
        if (r == 0)
            cold_ms = ms;
        else
            seal_ms[r - 1] = ms;

        /* Inspect (untimed): rows, sum, bytes; keep the bytes of the first round. */
        size_t pend = ra_meter_pending_count(m);
        uint64_t got = 0, got_rows = 0, bytes = 0;
        if (!concat) {
            slice_len = xmalloc(sizeof(size_t) * (pend ? pend : 1));
            size_t total = 0;
            for (size_t i = 0; i < pend; i++) {
                ra_slice_t *s;
                if (ra_meter_pending_get(m, i, &s) == 0) {
                    size_t len;
                    ra_slice_bytes(s, &len);
                    total += len;
                    ra_slice_unref(s);
                }
            }
            concat = xmalloc(total);
            copy = xmalloc(total);
        }
        for (size_t i = 0; i < pend; i++) {
            ra_slice_t *s;
            if ((rc = ra_meter_pending_get(m, i, &s)) != 0) die("ra_meter_pending_get", rc);
            size_t nr = ra_slice_row_count(s), len;
            const uint8_t *b = ra_slice_bytes(s, &len);
            if (r == 0) {
                memcpy(concat + bytes, b, len);
                slice_len[i] = len;
            }
            bytes += len;
            got += bench_slice_sum(s);
            got_rows += nr;
            ra_slice_unref(s);
        }
        if (r == 0) {
            slices = pend;
            enc_bytes = bytes;
        }
        if (got != want || got_rows != rows || pend != n_sealed || pend != slices) {
            fprintf(stderr,
                    "bench-seal: %s rep %d: sealed %llu rows sum %llu in %zu slices; "
                    "expected %u rows sum %llu in %zu slices\n",
                    c->name, r, (unsigned long long)got_rows, (unsigned long long)got, pend, rows,
                    (unsigned long long)want, slices);
            ok = false;
        }
        /* ACK everything so the next round starts with an empty ring. */
        while (ra_meter_pending_count(m) > 0) {
            ra_slice_t *s;
            if ((rc = ra_meter_pending_get(m, 0, &s)) != 0) die("ra_meter_pending_get", rc);
            if ((rc = ra_meter_ack(m, s)) != 0) die("ra_meter_ack", rc);
            ra_slice_unref(s);
        }
    }

    /* Baselines over the bytes of the first round. */
    int breps = reps < 5 ? 5 : reps;
    double *b_one = xmalloc(sizeof(double) * (size_t)breps);
    double *b_per = xmalloc(sizeof(double) * (size_t)breps);
    double *b_cpy = xmalloc(sizeof(double) * (size_t)breps);
    uint8_t dig[32], acc = 0;
    for (int r = 0; r < breps; r++) {
        uint64_t t0 = bench_now_ns();
        ra_b3(concat, enc_bytes, dig);
        b_one[r] = ms_since(t0);
        acc ^= dig[0];
        t0 = bench_now_ns();
        size_t off = 0;
        for (size_t i = 0; i < slices; i++) {
            ra_b3(concat + off, slice_len[i], dig);
            acc ^= dig[0];
            off += slice_len[i];
        }
        b_per[r] = ms_since(t0);
        t0 = bench_now_ns();
        memcpy(copy, concat, enc_bytes);
        __asm__ volatile("" : : "r"(copy) : "memory");
        b_cpy[r] = ms_since(t0);
        acc ^= copy[enc_bytes / 2];
    }
    int n = reps - 1;
    double s_min = bench_min(seal_ms, (size_t)n), s_med = bench_median(seal_ms, (size_t)n);
    double one = bench_median(b_one, (size_t)breps), per = bench_median(b_per, (size_t)breps);
    double cpy = bench_median(b_cpy, (size_t)breps);
    double rows_s = (double)rows / (s_med / 1e3);

    printf("\n== seal/%s: %u rows (%u tenants x %u subjects, 1 dim) -> %zu slices, %zu encoded "
           "bytes (%.1f rows/slice)\n",
           c->name, rows, c->tenants, c->subjects, slices, enc_bytes,
           (double)rows / (double)(slices ? slices : 1));
    printf("   rollover    median %8.3f ms  min %8.3f ms  (%d steady reps)  %.2fM rows/s;  "
           "first rollover (cold) %.3f ms\n",
           s_med, s_min, n, rows_s / 1e6, cold_ms);
    printf("   b3_oneshot  %8.3f ms  seal/b3_oneshot   = %.1fx\n", one, s_med / one);
    printf("   b3_per_slice %7.3f ms  seal/b3_per_slice = %.1fx\n", per, s_med / per);
    printf("   memcpy      %8.3f ms  seal/memcpy       = %.1fx\n", cpy, s_med / cpy);
    __asm__ volatile("" : : "r"(acc));
    printf("   check: %s (every rep sealed %u rows with the recorded sum)\n", ok ? "ok" : "FAILED",
           rows);

    bench_json_t j = {.len = 0};
    bench_json_add(&j, "{\"bench\":\"seal\",\"name\":\"seal/%s\",\"lang\":\"c\",", c->name);
    bench_json_add(&j,
                   "\"params\":{\"rows\":%u,\"tenants\":%u,\"subjects\":%u,\"dims\":1,"
                   "\"slices\":%zu,\"encoded_bytes\":%zu,\"reps\":%d},",
                   rows, c->tenants, c->subjects, slices, enc_bytes, n);
    bench_json_add(&j,
                   "\"ms\":%.4f,\"ms_min\":%.4f,\"ms_cold\":%.4f,\"rows_per_s\":%.0f,"
                   "\"ns_per_op\":%.3f,\"ops_per_s\":%.0f,\"op\":\"row\",",
                   s_med, s_min, cold_ms, rows_s, s_med * 1e6 / rows, rows_s);
    bench_json_add(&j,
                   "\"baselines\":{\"b3_oneshot\":{\"ms\":%.4f},\"b3_per_slice\":{\"ms\":%.4f},"
                   "\"memcpy\":{\"ms\":%.4f}},\"ratios\":{\"b3_oneshot\":%.3f,"
                   "\"b3_per_slice\":%.3f,\"memcpy\":%.3f},\"check_ok\":%s}",
                   one, per, cpy, s_med / one, s_med / per, s_med / cpy, ok ? "true" : "false");
    bench_json_emit(&j);

    free(b_one);
    free(b_per);
    free(b_cpy);
    free(seal_ms);
    free(concat);
    free(copy);
    free(slice_len);
    free(tenants);
    free(subjects);
    ra_meter_close(m);
    return ok ? 0 : 1;
}

int main(int argc, char **argv) {
    const char *only = NULL, *reps = NULL;
    const bench_opt_t opts[] = {{"--reps", &reps}, {"--only", &only}};
    if (!bench_parse_args(argc, argv, &g_quick, opts, 2,
                          "bench-seal [--quick] [--reps N] [--only NAME] [--out FILE]"))
        return 2;
    if (reps) g_reps = atoi(reps);
    /* 10k: the §7 row (1000 streams of 10 rows: per-slice overhead dominates) and the same
     * rows in 10 big slices; 1M: 1000 slices of 1000 rows (24 kB each); 1M-split: streams
     * of 100k rows, which the sealer splits into slices under the 1 MiB frame limit
     * (43,6xx rows each). */
    static const scfg_t full[] = {
        {"10k", 1000, 10, 41},
        {"10k-narrow", 10, 1000, 41},
        {"1M", 1000, 1000, 6},
        {"1M-split", 10, 100000, 6},
    };
    static const scfg_t quick[] = {
        {"10k", 1000, 10, 3},
        {"50k-split", 1, 50000, 2},
    };
    const scfg_t *set = g_quick ? quick : full;
    size_t n = g_quick ? sizeof quick / sizeof *quick : sizeof full / sizeof *full;
    bench_tsc_calibrate();
    bench_machine_line("bench-seal");
    printf("# ratios are cost ratios (seal ms / baseline ms); seal = ra_meter_rollover() only\n");
    int fails = 0, ran = 0;
    for (size_t i = 0; i < n; i++) {
        if (only && strcmp(only, set[i].name) != 0) continue;
        fails += run(&set[i]);
        ran++;
    }
    if (bench_out_file) fclose(bench_out_file);
    if (!ran) {
        fprintf(stderr, "bench-seal: no configuration named %s\n", only ? only : "?");
        return 2;
    }
    return fails ? 1 : 0;
}
