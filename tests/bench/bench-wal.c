/* bench-wal: the write-ahead log (issue 3, PRODUCT.md §7, P-9), on real files in a
 * temporary directory under --dir (default: the working directory; the bench target runs
 * in <build>/bench, so the build directory's file system).
 *
 * 1. Group commit: ra__wal_append() of N slices per boundary, N = 1k, 10k, 100k: one
 *    segment, written as .tmp, fdatasync'ed, renamed, directory fsync'ed. Figures: slices/s
 *    and MB/s (frame bytes), and the fsyncs per boundary, read from the WAL's own counter
 *    (it must be a constant, whatever N). Slices: one per stream, one row each (about
 *    130 encoded bytes, 186 with the frame), the shape of a busy node's boundary.
 *    Baselines measured interleaved, over the same number of bytes in the same directory:
 *      write_fdatasync     open, write the bytes, one fdatasync, close;
 *      durable_rename      the same, then rename and fsync the directory: the minimum
 *                          protocol that makes a new file durable, i.e. what the WAL does
 *                          minus encoding the frames.
 *    Between repetitions (untimed) every frame is ACKed and the segment compacted away.
 * 2. Recovery: a WAL of 1M pending slices (1000 segments of 1000 slices: 1000 streams x
 *    1000 windows, chained, as 1000 rollovers would leave them), then ra_meter_open() —
 *    list, read, check every frame (header checksum, BLAKE3 of the payload, seq order),
 *    decode every slice, rebuild the pending ring and the stream heads. Warm page cache,
 *    and cold (posix_fadvise DONTNEED on every segment first: the pages are clean after
 *    fsync, so the kernel drops them; no root needed). Baseline: reading the same files
 *    and one BLAKE3 over each (warm, and cold the same way).
 *
 * No timing is asserted. Checks: every append is durable and counted, recovery finds
 * exactly the slices written, in order.
 *
 * Usage: bench-wal [--quick] [--dir DIR] [--out FILE] [--only append|recovery]
 */
#include "bench-common.h"

#include "internal.h"
#include "io.h"
#include "wal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#define BENCH_NAME "bench-wal"
#define die(what, rc) bench_die(BENCH_NAME, (what), (rc))
#define xmalloc(n) bench_xmalloc(BENCH_NAME, (n))

#define WINDOW_LEN_S 300u
#define W0 5666667ll /* window index of 2023-11-14T22:15:00Z */

static int g_quick = 0;
static char g_base[4096] = ".";

static double ms_since(uint64_t t0) {
    return (double)(bench_now_ns() - t0) / 1e6;
}

static void fatal(const char *what) {
    fprintf(stderr, BENCH_NAME ": %s: %s\n", what, strerror(errno));
    exit(1);
}

/* ---- slices ------------------------------------------------------------------------- */

static void stream_tenant(uint32_t k, uint8_t out[16]) {
    memset(out, 0, 16);
    out[0] = 0x20;
    out[6] = 0x40; /* version 4 */
    out[8] = 0x80; /* variant */
    for (int i = 0; i < 4; i++)
        out[12 + i] = (uint8_t)(k >> (24 - 8 * i));
}

/* One row, one stream (tenant k, dimension bytes), window w, seq, prev. */
static ra_slice_t *make_slice(uint32_t k, int64_t w, uint64_t seq, const uint8_t prev[32]) {
    uint8_t tenant[16], subject[16], buf[256];
    stream_tenant(k, tenant);
    memset(subject, 0, 16);
    subject[0] = (uint8_t)k;
    subject[15] = (uint8_t)(k >> 8);
    ra__slice_hdr_in_t h = {.tenant = tenant,
                            .dimension = "bytes",
                            .window_start_s = w * WINDOW_LEN_S,
                            .window_len_s = WINDOW_LEN_S,
                            .seq = seq,
                            .prev_b3 = prev,
                            .amnesia = 0,
                            .host = "bench-host",
                            .version = RA_VERSION_STRING,
                            .row_count = 1};
    size_t n = ra__encode_header(&h, buf);
    ra__encode_row(buf + n, subject, 1000 + seq);
    n += RA_ENC_ROW;
    ra_slice_t *s = NULL;
    int rc = ra_slice_decode(buf, n, &s);
    if (rc != 0) die("ra_slice_decode", rc);
    return s;
}

static size_t frame_bytes(ra_slice_t *const *s, size_t n) {
    size_t total = RA_WAL_SEG_HDR;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        ra_slice_bytes(s[i], &len);
        total += RA_WAL_FRAME_HDR + len + RA_WAL_FRAME_TRAILER;
    }
    return total;
}

/* ---- files ------------------------------------------------------------------------- */

/* A new temporary directory; the caller frees the name. */
static char *make_tmpdir(void) {
    char *dir = xmalloc(4200);
    snprintf(dir, 4200, "%s/bench-wal.XXXXXX", g_base);
    if (!mkdtemp(dir)) fatal(dir);
    return dir;
}

static const char *fs_name(const char *path) {
    struct statfs st;
    if (statfs(path, &st) != 0) return "unknown";
    switch ((unsigned long)st.f_type) {
    case 0xEF53:
        return "ext2/3/4";
    case 0x58465342:
        return "xfs";
    case 0x9123683E:
        return "btrfs";
    case 0x01021994:
        return "tmpfs";
    case 0x794c7630:
        return "overlayfs";
    case 0x2FC12FC1:
        return "zfs";
    case 0x6969:
        return "nfs";
    default:
        return "other";
    }
}

static void fsync_dir_or_die(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0) fatal("fsync(dir)");
    close(fd);
}

/* Baselines: the same number of bytes, durably, without the WAL. */
static double write_fdatasync(const char *dir, const uint8_t *buf, size_t n, bool rename_too) {
    char tmp[4300], fin[4300];
    snprintf(tmp, sizeof tmp, "%s/baseline.tmp", dir);
    snprintf(fin, sizeof fin, "%s/baseline.dat", dir);
    uint64_t t0 = bench_now_ns();
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) fatal(tmp);
    for (size_t off = 0; off < n;) {
        ssize_t w = write(fd, buf + off, n - off);
        if (w <= 0) fatal("write");
        off += (size_t)w;
    }
    if (fdatasync(fd) != 0) fatal("fdatasync");
    close(fd);
    if (rename_too) {
        if (rename(tmp, fin) != 0) fatal("rename");
        fsync_dir_or_die(dir);
    }
    double ms = ms_since(t0);
    unlink(rename_too ? fin : tmp);
    return ms;
}

/* ---- 1. group commit ------------------------------------------------------------------ */

/* A WAL in dir without caps, for writing; a message on stderr when it does not open. */
static int wal_open(ra__wal_t *w, const char *dir) {
    char err[256];
    int rc = ra__wal_open(w, ra__io_posix(), dir, UINT64_MAX, UINT32_MAX, 0, false, NULL, err,
                          sizeof err);
    if (rc != 0) fprintf(stderr, BENCH_NAME ": ra__wal_open: %s\n", err);
    return rc;
}

static int bench_append(size_t n, int reps) {
    char *dir = make_tmpdir();
    ra__wal_t w;
    int rc = wal_open(&w, dir);
    if (rc != 0) return 1;
    ra_slice_t **s = xmalloc(sizeof *s * n);
    uint8_t(*prev)[32] = xmalloc(32 * n);
    memset(prev, 0, 32 * n);
    double *t_app = xmalloc(sizeof(double) * (size_t)reps);
    double *t_wf = xmalloc(sizeof(double) * (size_t)reps);
    double *t_dr = xmalloc(sizeof(double) * (size_t)reps);
    uint64_t fsyncs_min = UINT64_MAX, fsyncs_max = 0;
    size_t bytes = 0;
    uint8_t *raw = NULL;
    bool ok = true;
    for (int r = 0; r < reps; r++) {
        for (size_t i = 0; i < n; i++) { /* untimed: the slices of this boundary */
            s[i] = make_slice((uint32_t)i, W0 + r, (uint64_t)r + 1, prev[i]);
            memcpy(prev[i], ra_slice_b3(s[i]), 32);
        }
        bytes = frame_bytes(s, n);
        if (!raw) {
            raw = xmalloc(bytes);
            for (size_t i = 0; i < bytes; i++)
                raw[i] = (uint8_t)(i * 131u + 7u);
        }
        _Atomic uint64_t intent = 0;
        uint64_t first = 0, f0 = w.stats.fsyncs;
        uint64_t t0 = bench_now_ns();
        rc = ra__wal_append(&w, s, n, (W0 + r + 1) * WINDOW_LEN_S * 1000, &intent, &first);
        t_app[r] = ms_since(t0);
        if (rc != 0) die("ra__wal_append", rc);
        uint64_t fs = w.stats.fsyncs - f0;
        if (fs < fsyncs_min) fsyncs_min = fs;
        if (fs > fsyncs_max) fsyncs_max = fs;
        if (w.nsegs != 1 || w.entries != n || w.bytes != bytes) ok = false;
        /* baselines, interleaved */
        t_wf[r] = write_fdatasync(dir, raw, bytes, false);
        t_dr[r] = write_fdatasync(dir, raw, bytes, true);
        /* untimed: ACK every frame, compact the segment away */
        for (size_t i = 0; i < n; i++) {
            ra__wal_acked(&w, first + i);
            ra_slice_unref(s[i]);
        }
        size_t removed = 0;
        if ((rc = ra__wal_compact(&w, NULL, NULL, &removed)) != 0) die("ra__wal_compact", rc);
        if (removed != 1) ok = false;
    }
    double a_med = bench_median(t_app, (size_t)reps), a_min = bench_min(t_app, (size_t)reps);
    double wf = bench_median(t_wf, (size_t)reps), dr = bench_median(t_dr, (size_t)reps);
    double sps = (double)n / (a_med / 1e3), mbs = (double)bytes / 1e6 / (a_med / 1e3);
    char label[32];
    snprintf(label, sizeof label, "%zuk", n / 1000);
    if (n < 1000) snprintf(label, sizeof label, "%zu", n);
    printf("\n== wal/append-%s: %zu slices per boundary, %zu bytes per segment (%.0f B/frame), "
           "%d reps\n",
           label, n, bytes, (double)(bytes - RA_WAL_SEG_HDR) / (double)n, reps);
    printf("   ra__wal_append   median %9.3f ms  min %9.3f ms   %10.0f slices/s  %8.1f MB/s\n",
           a_med, a_min, sps, mbs);
    printf("   fsyncs per boundary: %" PRIu64 "%s (file + directory), whatever the slice count\n",
           fsyncs_min, fsyncs_min == fsyncs_max ? "" : " (VARIES!)");
    printf("   write_fdatasync  median %9.3f ms   append/write_fdatasync = %.2fx\n", wf,
           a_med / wf);
    printf("   durable_rename   median %9.3f ms   append/durable_rename  = %.2fx\n", dr,
           a_med / dr);
    printf("   check: %s\n", ok && fsyncs_min == fsyncs_max ? "ok" : "FAILED");

    bench_json_t j = {.len = 0};
    bench_json_add(&j, "{\"bench\":\"wal\",\"name\":\"wal/append-%s\",\"lang\":\"c\",", label);
    bench_json_add(&j,
                   "\"params\":{\"slices_per_boundary\":%zu,\"segment_bytes\":%zu,\"reps\":%d,"
                   "\"fs\":\"%s\"},",
                   n, bytes, reps, fs_name(dir));
    bench_json_add(&j,
                   "\"ms\":%.4f,\"ms_min\":%.4f,\"slices_per_s\":%.0f,\"mb_per_s\":%.2f,"
                   "\"fsyncs_per_boundary\":%" PRIu64 ",\"ns_per_op\":%.1f,\"ops_per_s\":%.0f,"
                   "\"op\":\"slice\",",
                   a_med, a_min, sps, mbs, fsyncs_min, a_med * 1e6 / (double)n, sps);
    bench_json_add(&j,
                   "\"baselines\":{\"write_fdatasync\":{\"ms\":%.4f},\"durable_rename\":{\"ms\":"
                   "%.4f}},\"ratios\":{\"write_fdatasync\":%.3f,\"durable_rename\":%.3f},"
                   "\"check_ok\":%s}",
                   wf, dr, a_med / wf, a_med / dr,
                   ok && fsyncs_min == fsyncs_max ? "true" : "false");
    bench_json_emit(&j);

    ra__wal_close(&w);
    ra_fix_rm_rf(dir);
    free(dir);
    free(s);
    free(prev);
    free(raw);
    free(t_app);
    free(t_wf);
    free(t_dr);
    return ok && fsyncs_min == fsyncs_max ? 0 : 1;
}

/* ---- 2. recovery ---------------------------------------------------------------------- */

typedef struct segfile {
    char path[4300];
    size_t len;
} segfile_t;

static size_t list_segments(const char *dir, segfile_t **out) {
    DIR *d = opendir(dir);
    if (!d) fatal(dir);
    size_t n = 0, cap = 1024;
    segfile_t *v = xmalloc(sizeof *v * cap);
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l != 20 || strcmp(e->d_name + 16, ".seg") != 0) continue;
        if (n == cap) {
            segfile_t *q = realloc(v, sizeof *v * cap * 2);
            if (!q) fatal("realloc");
            v = q;
            cap *= 2;
        }
        snprintf(v[n].path, sizeof v[n].path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(v[n].path, &st) != 0) fatal(v[n].path);
        v[n].len = (size_t)st.st_size;
        n++;
    }
    closedir(d);
    *out = v;
    return n;
}

static void drop_cache(const segfile_t *v, size_t n) {
    for (size_t i = 0; i < n; i++) {
        int fd = open(v[i].path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) fatal(v[i].path);
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        close(fd);
    }
}

/* Baselines: read every segment and BLAKE3 it whole (per_frame = false), or BLAKE3 each
 * frame's payload (per_frame = true: the least work that checks every trailer). */
static double read_and_hash(const segfile_t *v, size_t n, uint8_t *buf, uint8_t *acc,
                            bool per_frame) {
    uint64_t t0 = bench_now_ns();
    for (size_t i = 0; i < n; i++) {
        int fd = open(v[i].path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) fatal(v[i].path);
        size_t got = 0;
        while (got < v[i].len) {
            ssize_t r = read(fd, buf + got, v[i].len - got);
            if (r <= 0) fatal("read");
            got += (size_t)r;
        }
        close(fd);
        uint8_t d[32];
        if (!per_frame) {
            ra_b3(buf, got, d);
            *acc ^= d[0];
            continue;
        }
        for (size_t off = RA_WAL_SEG_HDR; off + RA_WAL_FRAME_HDR <= got;) {
            uint32_t len = ra__get_u32(buf + off + 4);
            if (off + RA_WAL_FRAME_HDR + len + RA_WAL_FRAME_TRAILER > got) break;
            ra_b3(buf + off + RA_WAL_FRAME_HDR, len, d);
            *acc ^= d[0];
            off += RA_WAL_FRAME_HDR + len + RA_WAL_FRAME_TRAILER;
        }
    }
    return ms_since(t0);
}

static double timed_open(const char *dir, size_t want, bool *ok) {
    ra_config_t cfg;
    ra_config_init(&cfg);
    cfg.window_len_s = WINDOW_LEN_S;
    cfg.shards = 4;
    cfg.capacity_rows = 4096; /* head table: 8192 entries, 1000 streams */
    cfg.pending_slices_cap = 1u << 20;
    cfg.amnesia = 0;
    cfg.wal_dir = dir;
    cfg.wal_max_bytes = 4ull << 30;
    cfg.wal_max_age_s = 0;
    cfg.host = "bench-host";
    ra_meter_t *m = NULL;
    char err[512];
    uint64_t t0 = bench_now_ns();
    int rc = ra_meter_open(&cfg, &m, err, sizeof err);
    double ms = ms_since(t0);
    if (rc != 0) {
        fprintf(stderr, BENCH_NAME ": ra_meter_open: %s\n", err);
        exit(1);
    }
    if (ra_meter_pending_count(m) != want) *ok = false;
    /* spot checks: the first and the last pending slice */
    ra_slice_t *s = NULL;
    if (want && ra_meter_pending_get(m, 0, &s) == 0) {
        ra_slice_id_t id;
        ra_slice_get_id(s, &id);
        if (id.seq != 1) *ok = false;
        ra_slice_unref(s);
    }
    ra_meter_close(m); /* untimed */
    return ms;
}

static int bench_recovery(uint32_t segs, uint32_t per_seg) {
    char *dir = make_tmpdir();
    size_t total = (size_t)segs * per_seg;
    printf("\n== wal/recovery: building %zu pending slices (%u segments of %u, %u streams x %u "
           "windows, chained) in %s (%s)...\n",
           total, segs, per_seg, per_seg, segs, dir, fs_name(dir));
    fflush(stdout);
    uint64_t tb = bench_now_ns();
    ra__wal_t w;
    int rc = wal_open(&w, dir);
    if (rc != 0) return 1;
    ra_slice_t **s = xmalloc(sizeof *s * per_seg);
    uint8_t(*prev)[32] = xmalloc(32 * (size_t)per_seg);
    memset(prev, 0, 32 * (size_t)per_seg);
    for (uint32_t g = 0; g < segs; g++) {
        for (uint32_t i = 0; i < per_seg; i++) {
            s[i] = make_slice(i, W0 + g, (uint64_t)g + 1, prev[i]);
            memcpy(prev[i], ra_slice_b3(s[i]), 32);
        }
        _Atomic uint64_t intent = 0;
        uint64_t first;
        if ((rc = ra__wal_append(&w, s, per_seg, (W0 + g + 1) * WINDOW_LEN_S * 1000, &intent,
                                 &first)) != 0)
            die("ra__wal_append", rc);
        for (uint32_t i = 0; i < per_seg; i++)
            ra_slice_unref(s[i]);
    }
    uint64_t wal_bytes = w.bytes;
    ra__wal_close(&w);
    free(s);
    free(prev);
    printf("   built in %.1f s: %" PRIu64 " bytes of segments\n", ms_since(tb) / 1e3, wal_bytes);

    segfile_t *files;
    size_t nf = list_segments(dir, &files);
    size_t maxlen = 0;
    for (size_t i = 0; i < nf; i++)
        if (files[i].len > maxlen) maxlen = files[i].len;
    uint8_t *buf = xmalloc(maxlen ? maxlen : 1), acc = 0;

    int warm_reps = g_quick ? 2 : 3, cold_reps = g_quick ? 1 : 2;
    double *ow = xmalloc(sizeof(double) * (size_t)warm_reps);
    double *bw = xmalloc(sizeof(double) * (size_t)warm_reps);
    double *oc = xmalloc(sizeof(double) * (size_t)cold_reps);
    double *bc = xmalloc(sizeof(double) * (size_t)cold_reps);
    bool ok = nf == segs;
    /* The fixed cost of an open (plane, a 1M-entry pending ring), with an empty WAL. */
    char *empty = make_tmpdir();
    double *oe = xmalloc(sizeof(double) * (size_t)warm_reps);
    bool ok_empty = true;
    for (int r = 0; r < warm_reps; r++)
        oe[r] = timed_open(empty, 0, &ok_empty);
    double o_e = bench_median(oe, (size_t)warm_reps);
    free(oe);
    ra_fix_rm_rf(empty);
    free(empty);
    double *bf = xmalloc(sizeof(double) * (size_t)warm_reps);
    read_and_hash(files, nf, buf, &acc, false); /* warm the cache */
    for (int r = 0; r < warm_reps; r++) {
        ow[r] = timed_open(dir, total, &ok);
        bw[r] = read_and_hash(files, nf, buf, &acc, false);
        bf[r] = read_and_hash(files, nf, buf, &acc, true);
    }
    for (int r = 0; r < cold_reps; r++) {
        drop_cache(files, nf);
        oc[r] = timed_open(dir, total, &ok);
        drop_cache(files, nf);
        bc[r] = read_and_hash(files, nf, buf, &acc, false);
    }
    double b_f = bench_median(bf, (size_t)warm_reps);
    free(bf);
    __asm__ volatile("" : : "r"(acc));
    double o_w = bench_median(ow, (size_t)warm_reps), b_w = bench_median(bw, (size_t)warm_reps);
    double o_c = bench_median(oc, (size_t)cold_reps), b_c = bench_median(bc, (size_t)cold_reps);
    double sps = (double)total / (o_w / 1e3);
    printf(
        "   ra_meter_open (recovery), warm cache  median %9.1f ms   %10.0f slices/s  %7.1f MB/s\n",
        o_w, sps, (double)wal_bytes / 1e6 / (o_w / 1e3));
    printf("   ra_meter_open (recovery), cold cache  median %9.1f ms\n", o_c);
    printf("   ra_meter_open, empty WAL (fixed cost)  median %9.1f ms\n", o_e);
    printf("   read + BLAKE3 per file,   warm cache  median %9.1f ms   open/baseline = %.2fx\n",
           b_w, o_w / b_w);
    printf("   read + BLAKE3 per file,   cold cache  median %9.1f ms   open/baseline = %.2fx\n",
           b_c, o_c / b_c);
    printf("   read + BLAKE3 per frame,  warm cache  median %9.1f ms   open/baseline = %.2fx\n",
           b_f, o_w / b_f);
    printf("   check: %s (every open replayed %zu slices into pending, seq 1 first)\n",
           ok ? "ok" : "FAILED", total);

    bench_json_t j = {.len = 0};
    bench_json_add(&j, "{\"bench\":\"wal\",\"name\":\"wal/recovery-%zu\",\"lang\":\"c\",", total);
    bench_json_add(&j,
                   "\"params\":{\"pending_slices\":%zu,\"segments\":%u,\"slices_per_segment\":%u,"
                   "\"wal_bytes\":%" PRIu64 ",\"warm_reps\":%d,\"cold_reps\":%d,\"fs\":\"%s\"},",
                   total, segs, per_seg, wal_bytes, warm_reps, cold_reps, fs_name(dir));
    bench_json_add(&j,
                   "\"ms\":%.3f,\"ms_cold\":%.3f,\"slices_per_s\":%.0f,\"ns_per_op\":%.1f,"
                   "\"ops_per_s\":%.0f,\"op\":\"slice\",",
                   o_w, o_c, sps, o_w * 1e6 / (double)total, sps);
    bench_json_add(&j,
                   "\"baselines\":{\"read_b3\":{\"ms\":%.3f},\"read_b3_cold\":{\"ms\":%.3f},"
                   "\"read_b3_per_frame\":{\"ms\":%.3f},\"open_empty\":{\"ms\":%.3f}},"
                   "\"ratios\":{\"read_b3\":%.3f,\"read_b3_cold\":%.3f,\"read_b3_per_frame\":%.3f},"
                   "\"check_ok\":%s}",
                   b_w, b_c, b_f, o_e, o_w / b_w, o_c / b_c, o_w / b_f, ok ? "true" : "false");
    bench_json_emit(&j);

    free(buf);
    free(files);
    free(ow);
    free(bw);
    free(oc);
    free(bc);
    ra_fix_rm_rf(dir);
    free(dir);
    return ok ? 0 : 1;
}

int main(int argc, char **argv) {
    const char *only = NULL, *dir = NULL;
    const bench_opt_t opts[] = {{"--dir", &dir}, {"--only", &only}};
    if (!bench_parse_args(argc, argv, &g_quick, opts, 2,
                          "bench-wal [--quick] [--dir DIR] [--out FILE] [--only append|recovery]"))
        return 2;
    if (dir) snprintf(g_base, sizeof g_base, "%s", dir);
    bench_tsc_calibrate();
    bench_machine_line(BENCH_NAME);
    printf("# files in %s (%s); ratios are cost ratios (WAL ms / baseline ms)\n", g_base,
           fs_name(g_base));
    int fails = 0;
    if (!only || !strcmp(only, "append")) {
        static const struct {
            size_t n;
            int reps;
        } full[] = {{1000, 30}, {10000, 10}, {100000, 5}}, quick[] = {{100, 3}, {1000, 3}};
        size_t k = g_quick ? 2 : 3;
        for (size_t i = 0; i < k; i++)
            fails += bench_append(g_quick ? quick[i].n : full[i].n,
                                  g_quick ? quick[i].reps : full[i].reps);
    }
    if (!only || !strcmp(only, "recovery"))
        fails += g_quick ? bench_recovery(10, 100) : bench_recovery(1000, 1000);
    if (bench_out_file) fclose(bench_out_file);
    return fails ? 1 : 0;
}
