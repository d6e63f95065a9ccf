/* bench-audit: audit records made durable per second (issue 16), through libronaudit's log
 * with group commit (rau_log_append x batch, then one rau_log_sync = one write + one
 * fdatasync), against a plain baseline measured in the same run on the same file system:
 * the same canonical record bytes, framed, one write + one fdatasync each. Also the
 * in-memory ceiling (amnesia: encode, hash, dedupe, Merkle leaf; no I/O) and the append
 * latency percentiles. The packed batch path (rau_log_append_packed: what the host's sink
 * worker runs on the threadpool) is measured the same way, with the caller's encoding
 * (the emit side) timed apart from the append + sync (the pool side). Last, verify speed:
 * rau_verify_dir over the largest log written.
 *
 *   bench-audit [--quick] [--dir DIR] [--out results.jsonl]
 *
 * Prints human-readable lines and one `BENCH {json}` line per result (tests/bench/README.md). */
#include "bench-common.h"
#include "ron/audit.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void bench_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void bench_line(const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    printf("BENCH %s\n", buf);
    if (bench_out_file) fprintf(bench_out_file, "%s\n", buf);
}

static void die(const char *what, int rc) {
    fprintf(stderr, "bench-audit: %s: %s (%s)\n", what, rau_strerror(rc), rau_err_name(rc));
    exit(1);
}

/* A reject as the meter would report it: tenant, dimension, reason, a counter. */
static void event(uint64_t i, rau_event_t *ev, rau_attr_t *a, char *tenant) {
    snprintf(tenant, 40, "%08x-0000-4000-8000-%012x", (unsigned)(i % 1000), (unsigned)i);
    a[0] = (rau_attr_t){"tenant", 6, RAU_ATTR_STR, tenant, 36, 0};
    a[1] = (rau_attr_t){"dimension", 9, RAU_ATTR_STR, "requests", 8, 0};
    a[2] = (rau_attr_t){"reason", 6, RAU_ATTR_STR, "capacity", 8, 0};
    a[3] = (rau_attr_t){"n", 1, RAU_ATTR_INT, NULL, 0, (int64_t)i};
    *ev = (rau_event_t){"reject", 6, 1700000000000LL + (int64_t)i, a, 4};
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The benchmark's log: writer "bench", stream "rejects", in dir unless amnesia. */
static rau_log_t *open_log(const char *dir, int amnesia, size_t batch_bytes) {
    rau_log_config_t cfg;
    rau_log_config_init(&cfg);
    cfg.writer_id = "bench";
    cfg.stream = "rejects";
    cfg.amnesia = amnesia;
    cfg.dir = amnesia ? NULL : dir;
    cfg.batch_bytes = batch_bytes;
    rau_log_t *l = NULL;
    char err[512];
    int rc = rau_log_open(&cfg, &l, err, sizeof err);
    if (rc) die(err, rc);
    return l;
}

static double run_log(const char *dir, int amnesia, uint64_t n, uint32_t batch, double *p50,
                      double *p99) {
    rau_log_t *l = open_log(dir, amnesia, 4u << 20);
    int rc;
    uint64_t *lat = malloc(n * sizeof *lat);
    rau_attr_t a[4];
    char tenant[40];
    rau_event_t ev;
    rau_appended_t out;
    uint64_t t0 = bench_now_ns();
    for (uint64_t i = 0; i < n; i++) {
        event(i, &ev, a, tenant);
        uint64_t s = bench_now_ns();
        if ((rc = rau_log_append(l, &ev, &out))) die("append", rc);
        lat[i] = bench_now_ns() - s;
        if ((i + 1) % batch == 0 && (rc = rau_log_sync(l))) die("sync", rc);
    }
    if ((rc = rau_log_sync(l))) die("sync", rc);
    double secs = (double)(bench_now_ns() - t0) / 1e9;
    rau_log_close(l);
    qsort(lat, n, sizeof *lat, cmp_u64);
    *p50 = (double)lat[n / 2];
    *p99 = (double)lat[n * 99 / 100];
    free(lat);
    return (double)n / secs;
}

/* The packed path: the caller encodes each event once into a packed batch (len u32 BE |
 * canonical bytes with seq 1 and no prev: what ron.audit's emit() does), the writer takes a
 * whole batch with rau_log_append_packed, then syncs. *emit_ns: encoding per record (the
 * caller's side, the loop thread in the daemon); *pool_ns: append + sync per record (the
 * threadpool's side). Returns records/s over both. */
static double run_packed(const char *dir, int amnesia, uint64_t n, uint32_t batch, double *emit_ns,
                         double *pool_ns) {
    rau_log_t *l = open_log(dir, amnesia, 64u << 20);
    int rc;
    size_t cap = (size_t)batch * (RAU_RECORD_MAX + 4);
    if (cap > (size_t)48 << 20) cap = (size_t)48 << 20;
    uint8_t *buf = malloc(cap);
    if (!buf) die("malloc", RAU_ENOMEM);
    rau_attr_t a[4];
    char tenant[40];
    rau_event_t ev;
    uint64_t t_emit = 0, t_pool = 0, t0 = bench_now_ns();
    for (uint64_t i = 0; i < n;) {
        uint64_t s = bench_now_ns();
        size_t len = 0;
        uint32_t k = 0;
        for (; k < batch && i < n && cap - len >= RAU_RECORD_MAX + 4; k++, i++) {
            event(i, &ev, a, tenant);
            size_t rl = 0;
            if ((rc = rau_record_encode("bench", "rejects", 1, NULL, &ev, buf + len + 4,
                                        RAU_RECORD_MAX, &rl)))
                die("encode", rc);
            buf[len] = (uint8_t)(rl >> 24), buf[len + 1] = (uint8_t)(rl >> 16);
            buf[len + 2] = (uint8_t)(rl >> 8), buf[len + 3] = (uint8_t)rl;
            len += 4 + rl;
        }
        uint64_t m = bench_now_ns();
        rau_batch_result_t br;
        if ((rc = rau_log_append_packed(l, buf, len, &br))) die("append_packed", rc);
        if (br.appended != k) die("append_packed: count", RAU_EINVAL);
        if ((rc = rau_log_sync(l))) die("sync", rc);
        uint64_t e = bench_now_ns();
        t_emit += m - s;
        t_pool += e - m;
    }
    double secs = (double)(bench_now_ns() - t0) / 1e9;
    rau_log_close(l);
    free(buf);
    *emit_ns = (double)t_emit / (double)n;
    *pool_ns = (double)t_pool / (double)n;
    return (double)n / secs;
}

static void count_problem(void *ud, const char *where, const char *what) {
    (void)where;
    (void)what;
    ++*(int *)ud;
}

/* Baseline: the same bytes, one write + fdatasync per record, no chain state. */
static double run_plain(const char *dir, uint64_t n) {
    char path[700];
    snprintf(path, sizeof path, "%s/plain.log", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
    if (fd < 0) die(path, RAU_EIO);
    rau_attr_t a[4];
    char tenant[40];
    rau_event_t ev;
    uint8_t buf[RAU_RECORD_MAX + 4], prev[32] = {0};
    uint64_t t0 = bench_now_ns();
    for (uint64_t i = 0; i < n; i++) {
        event(i, &ev, a, tenant);
        size_t len = 0;
        int rc =
            rau_record_encode("bench", "rejects", i + 1, prev, &ev, buf + 4, RAU_RECORD_MAX, &len);
        if (rc) die("encode", rc);
        rau_record_hash(buf + 4, len, prev);
        buf[0] = (uint8_t)(len >> 24), buf[1] = (uint8_t)(len >> 16);
        buf[2] = (uint8_t)(len >> 8), buf[3] = (uint8_t)len;
        if (write(fd, buf, len + 4) != (ssize_t)(len + 4) || fdatasync(fd) != 0)
            die("write", RAU_EIO);
    }
    double secs = (double)(bench_now_ns() - t0) / 1e9;
    close(fd);
    unlink(path);
    return (double)n / secs;
}

int main(int argc, char **argv) {
    int quick = 0;
    const char *base = NULL;
    const bench_opt_t opts[] = {{"--dir", &base}};
    if (!bench_parse_args(argc, argv, &quick, opts, 1,
                          "bench-audit [--quick] [--dir DIR] [--out FILE]"))
        return 2;
    char dir[600];
    ra_fix_mkdtemp(dir, sizeof dir, base, "bench-audit-");
    uint64_t n_mem = quick ? 20000 : 1000000, n_group = quick ? 20000 : 500000;
    uint64_t n_plain = quick ? 50 : 1000;
    double p50, p99, r;

    r = run_log(NULL, 1, n_mem, 1u << 30, &p50, &p99);
    printf("amnesia (no I/O)        %10.0f records/s   append p50 %.0f ns p99 %.0f ns\n", r, p50,
           p99);
    bench_line("{\"bench\":\"audit\",\"mode\":\"amnesia\",\"records\":%llu,\"records_per_s\":%.0f,"
               "\"append_p50_ns\":%.0f,\"append_p99_ns\":%.0f}",
               (unsigned long long)n_mem, r, p50, p99);
    double plain = run_plain(dir, n_plain);
    printf("plain append+fdatasync  %10.0f records/s   (baseline, %llu records)\n", plain,
           (unsigned long long)n_plain);
    bench_line("{\"bench\":\"audit\",\"mode\":\"plain_fdatasync\",\"records\":%llu,"
               "\"records_per_s\":%.0f}",
               (unsigned long long)n_plain, plain);
    static const uint32_t batches[] = {1, 64, 1024, 8192};
    for (size_t b = 0; b < sizeof batches / sizeof batches[0]; b++) {
        char sub[700];
        snprintf(sub, sizeof sub, "%s/log-%u", dir, batches[b]);
        uint64_t n = batches[b] == 1 ? n_plain : n_group;
        r = run_log(sub, 0, n, batches[b], &p50, &p99);
        printf("group commit batch %5u %10.0f records/s   x%.1f baseline, append p99 %.0f ns\n",
               batches[b], r, r / plain, p99);
        bench_line("{\"bench\":\"audit\",\"mode\":\"group_commit\",\"batch\":%u,\"records\":%llu,"
                   "\"records_per_s\":%.0f,\"vs_plain\":%.2f,\"append_p50_ns\":%.0f,"
                   "\"append_p99_ns\":%.0f}",
                   batches[b], (unsigned long long)n, r, r / plain, p50, p99);
        char cmd[800];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", sub);
        if (system(cmd) != 0) return 1;
    }
    double emit_ns, pool_ns;
    r = run_packed(NULL, 1, n_mem, 8192, &emit_ns, &pool_ns);
    printf("packed, amnesia         %10.0f records/s   caller encode %.0f ns + append %.0f ns "
           "per record\n",
           r, emit_ns, pool_ns);
    bench_line("{\"bench\":\"audit\",\"mode\":\"packed_amnesia\",\"records\":%llu,"
               "\"records_per_s\":%.0f,\"encode_ns\":%.0f,\"append_ns\":%.0f}",
               (unsigned long long)n_mem, r, emit_ns, pool_ns);
    static const uint32_t pbatches[] = {1024, 8192};
    char vdir[700] = "";
    uint64_t vn = 0;
    for (size_t b = 0; b < sizeof pbatches / sizeof pbatches[0]; b++) {
        char sub[700];
        snprintf(sub, sizeof sub, "%s/packed-%u", dir, pbatches[b]);
        r = run_packed(sub, 0, n_group, pbatches[b], &emit_ns, &pool_ns);
        printf("packed batch %5u       %10.0f records/s   x%.1f baseline; caller encode %.0f ns, "
               "append + sync %.0f ns per record (pool side alone: %.0f records/s)\n",
               pbatches[b], r, r / plain, emit_ns, pool_ns, 1e9 / pool_ns);
        bench_line("{\"bench\":\"audit\",\"mode\":\"packed_group_commit\",\"batch\":%u,"
                   "\"records\":%llu,\"records_per_s\":%.0f,\"vs_plain\":%.2f,\"encode_ns\":%.0f,"
                   "\"append_sync_ns\":%.0f,\"pool_records_per_s\":%.0f}",
                   pbatches[b], (unsigned long long)n_group, r, r / plain, emit_ns, pool_ns,
                   1e9 / pool_ns);
        if (vdir[0]) {
            char cmd[800];
            snprintf(cmd, sizeof cmd, "rm -rf '%s'", vdir);
            if (system(cmd) != 0) return 1;
        }
        snprintf(vdir, sizeof vdir, "%s", sub);
        vn = n_group;
    }
    /* Open (recovery) of that log: with its head file (AUD-I-37: the dedupe window hashed,
     * nothing decoded) and, the baseline in the same run, without it (the full scan that
     * decodes every record, as before the head file). */
    for (int with_head = 1; with_head >= 0; with_head--) {
        rau_log_config_t cfg;
        rau_log_config_init(&cfg);
        cfg.writer_id = "bench";
        cfg.stream = "rejects";
        cfg.dir = vdir;
        if (!with_head) {
            char hp[800];
            snprintf(hp, sizeof hp, "%s/head.rau", vdir);
            if (unlink(hp) != 0) die("no head file", RAU_EIO);
        }
        rau_log_t *l = NULL;
        char err[512];
        uint64_t t0 = bench_now_ns();
        int rc = rau_log_open(&cfg, &l, err, sizeof err);
        double os_ = (double)(bench_now_ns() - t0) / 1e9;
        if (rc) die(err, rc);
        rau_log_stats_t st;
        rau_log_stats(l, &st);
        rau_log_close(l);
        if (st.head_seq != vn) die("open: head", RAU_ECORRUPT);
        static double with_s;
        if (with_head) {
            with_s = os_;
            printf("open with head file     %10.3f s   (%llu records)\n", os_,
                   (unsigned long long)vn);
        } else {
            printf("open, full scan         %10.3f s   (%llu records, %.0f records/s): the head "
                   "file's open is x%.0f faster\n",
                   os_, (unsigned long long)vn, (double)vn / os_, os_ / with_s);
        }
        bench_line("{\"bench\":\"audit\",\"mode\":\"%s\",\"records\":%llu,"
                   "\"records_per_s\":%.0f,\"seconds\":%.3f}",
                   with_head ? "open_head" : "open", (unsigned long long)vn, (double)vn / os_, os_);
    }
    /* Verify speed: every frame, canonical re-encoding, hash, link, dedupe key and the
     * Merkle root of the last log written (no checkpoints: no signatures). */
    int problems = 0;
    uint64_t got = 0, t0 = bench_now_ns();
    int vrc = rau_verify_dir(vdir, NULL, count_problem, &problems, &got);
    double vs = (double)(bench_now_ns() - t0) / 1e9;
    if (vrc != 0 || problems || got != vn) {
        fprintf(stderr, "bench-audit: verify: rc %d, %d problems, %llu records\n", vrc, problems,
                (unsigned long long)got);
        return 1;
    }
    printf("verify                  %10.0f records/s   (%llu records, %.2f s)\n", (double)got / vs,
           (unsigned long long)got, vs);
    bench_line("{\"bench\":\"audit\",\"mode\":\"verify\",\"records\":%llu,"
               "\"records_per_s\":%.0f}",
               (unsigned long long)got, (double)got / vs);
    {
        char cmd[800];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", vdir);
        if (system(cmd) != 0) return 1;
    }
    rmdir(dir);
    if (bench_out_file) fclose(bench_out_file);
    return 0;
}
