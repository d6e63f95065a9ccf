/* gen-wal-seeds: the WAL's golden example (docs/FORMAT.md §4) and the seed corpora of the
 * WAL fuzz harnesses, made by the core's own writer (ra__wal_append, ra__wal_compact) and
 * by a real meter, never by hand.
 *
 *   gen-wal-seeds golden          print the golden blocks for docs/FORMAT.md §4
 *   gen-wal-seeds check           compare them with docs/FORMAT.md (ctest wal-golden-format)
 *   gen-wal-seeds corpus OUTDIR   write OUTDIR/wal-frame/ and OUTDIR/wal-recovery/ seeds
 *                                 (tests/fuzz/corpus/ holds the committed output)
 *
 * Golden inputs (reproducible): the slice is §2's golden vector v1-first-slice, read from
 * docs/FORMAT.md; an empty WAL directory; one ra__wal_append of that slice at now_ms =
 * 1699999500000 (2023-11-14T22:05:00Z, the end of the slice's window) gives segment
 * 0000000000000001.seg (frame seq 1); ACKing frame 1 and compacting with the stream's head
 * (seq 1, last window 1699999200, b3 of v1) gives the heads file (next frame seq 2) and
 * removes the segment.
 *
 * Input formats of the harnesses (also documented in their sources):
 *   wal-frame     byte 0 = mode (bit 0: fix the header checksum and the trailer first),
 *                 then the frame bytes;
 *   wal-recovery  byte 0 = flags (bit 0: fix checksums; bit 1: the last segment is a .tmp),
 *                 then files, each starting with its magic: RONWSEG1 (a segment, named by
 *                 its header id) or RONWHDS1 (the heads checkpoint). */
#include "ron/accounting.h"

#include "../fixtures.h"
#include "internal.h"
#include "io.h"
#include "wal.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef RA_SOURCE_DIR
#error "RA_SOURCE_DIR must name the source tree"
#endif

#define GOLDEN_NOW_MS 1699999500000LL

static void die(const char *what) {
    fprintf(stderr, "gen-wal-seeds: %s\n", what);
    exit(1);
}

/* The ```<tag> <name> block of docs/FORMAT.md as bytes. */
static int doc_block(const char *tag, const char *name, uint8_t *out, size_t cap, size_t *len) {
    return ra_fix_doc_block(RA_SOURCE_DIR "/docs/FORMAT.md", tag, name, out, cap, len, NULL);
}

static ra_slice_t *doc_slice(const char *name) {
    uint8_t buf[1024];
    size_t len;
    ra_slice_t *s = NULL;
    if (doc_block("golden-vector", name, buf, sizeof buf, &len) != 0 ||
        ra_slice_decode(buf, len, &s) != 0)
        die("cannot read a golden vector from docs/FORMAT.md");
    return s;
}

static char *tmpdir(void) {
    const char *base = getenv("TMPDIR");
    static char dir[512];
    snprintf(dir, sizeof dir, "%s/ra-gen-wal-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(dir)) die("mkdtemp");
    return dir;
}

static uint8_t *slurp(const char *path, size_t *len) {
    uint8_t *b = NULL;
    if (ra__io_read_file(ra__io_posix(), path, 1u << 30, &b, len) != 0) die(path);
    return b;
}

/* The file at path appended to *all (*n bytes so far). */
static void append_file(uint8_t **all, size_t *n, const char *path) {
    size_t l;
    uint8_t *b = slurp(path, &l);
    uint8_t *grown = realloc(*all, *n + l);
    if (!grown) die("realloc");
    memcpy(grown + *n, b, l);
    *n += l;
    *all = grown;
    free(b);
}

typedef struct {
    const uint8_t *tenant;
    const char *dim;
    uint64_t seq;
    int64_t ws;
    const uint8_t *b3;
} one_head_t;

static int emit_one(void *ud,
                    int (*emit)(void *, const uint8_t[16], const char *, uint64_t, int64_t,
                                const uint8_t[32]),
                    void *eud) {
    const one_head_t *h = ud;
    return emit(eud, h->tenant, h->dim, h->seq, h->ws, h->b3);
}

/* The golden segment and heads file. */
static void golden(uint8_t **seg, size_t *seg_len, uint8_t **heads, size_t *heads_len) {
    ra_slice_t *v1 = doc_slice("v1-first-slice");
    char *dir = tmpdir();
    ra__wal_t w;
    char err[256];
    if (ra__wal_open(&w, ra__io_posix(), dir, UINT64_MAX, UINT32_MAX, 0, false, NULL, err,
                     sizeof err) != 0)
        die(err);
    _Atomic uint64_t intent = 0;
    uint64_t first = 0;
    if (ra__wal_append(&w, &v1, 1, GOLDEN_NOW_MS, &intent, &first) != 0 || first != 1)
        die("ra__wal_append");
    char p[700];
    snprintf(p, sizeof p, "%s/0000000000000001.seg", dir);
    *seg = slurp(p, seg_len);
    ra__wal_acked(&w, 1);
    ra_slice_id_t id;
    ra_tenant_t t;
    ra_slice_get_id(v1, &id);
    ra_slice_get_tenant(v1, &t);
    one_head_t h = {t.b, ra_slice_dimension(v1), id.seq, id.window_start_s, ra_slice_b3(v1)};
    size_t removed = 0;
    if (ra__wal_compact(&w, emit_one, &h, &removed) != 0 || removed != 1) die("ra__wal_compact");
    snprintf(p, sizeof p, "%s/heads", dir);
    *heads = slurp(p, heads_len);
    ra__wal_close(&w);
    ra_slice_unref(v1);
    ra_fix_rm_rf(dir);
}

static void print_block(const char *name, const uint8_t *b, size_t n) {
    printf("```golden-wal %s\n", name);
    for (size_t k = 0; k < n; k++)
        printf("%02x%s", b[k], (k % 16 == 15 || k + 1 == n) ? "\n" : " ");
    printf("```\n\n");
}

static int check(void) {
    uint8_t *seg, *heads;
    size_t seg_len, heads_len;
    golden(&seg, &seg_len, &heads, &heads_len);
    int bad = 0;
    const struct {
        const char *name;
        const uint8_t *b;
        size_t n;
    } want[] = {{"segment", seg, seg_len}, {"heads", heads, heads_len}};
    for (size_t i = 0; i < 2; i++) {
        uint8_t doc[4096];
        size_t n;
        if (doc_block("golden-wal", want[i].name, doc, sizeof doc, &n) != 0) {
            printf("not ok - docs/FORMAT.md has no readable ```golden-wal %s block\n",
                   want[i].name);
            bad = 1;
        } else if (n != want[i].n || memcmp(doc, want[i].b, n) != 0) {
            printf("not ok - docs/FORMAT.md's golden-wal %s differs from what the writer "
                   "produces (%zu bytes vs %zu); the writer's bytes:\n",
                   want[i].name, n, want[i].n);
            print_block(want[i].name, want[i].b, want[i].n);
            bad = 1;
        } else {
            printf("ok - golden-wal %s (%zu bytes) matches the writer\n", want[i].name, n);
        }
    }
    free(seg);
    free(heads);
    return bad;
}

/* ---- corpus -------------------------------------------------------------------------- */

static void put(const char *dir, const char *sub, const char *name, const void *a, size_t an,
                const void *b, size_t bn) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, sub);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/%s/%s", dir, sub, name);
    FILE *f = fopen(p, "wb");
    if (!f || (an && fwrite(a, 1, an, f) != an) || (bn && fwrite(b, 1, bn, f) != bn) ||
        fclose(f) != 0)
        die(p);
}

static int64_t g_now_ms;
static int64_t clock_fn(void *ud) {
    (void)ud;
    return g_now_ms;
}

/* A real meter's WAL: heads + segments, concatenated in the wal-recovery input format. */
static uint8_t *meter_wal(size_t *len, int windows, int ack_first) {
    char *dir = tmpdir();
    ra_config_t cfg;
    ra_config_init(&cfg);
    cfg.window_len_s = 60;
    cfg.shards = 1;
    cfg.capacity_rows = 64;
    cfg.pending_slices_cap = 64;
    cfg.amnesia = 0;
    cfg.wal_dir = dir;
    cfg.host = "fz";
    cfg.clock = clock_fn;
    ra_meter_t *m = NULL;
    char err[256];
    if (ra_meter_open(&cfg, &m, err, sizeof err) != 0) die(err);
    ra_tenant_t t[2];
    ra_tenant_parse("123e4567-e89b-12d3-a456-426614174000", 36, &t[0]);
    ra_tenant_parse("6f1c3c1e-2b7a-4d5e-9a43-0c8e5b1f7a21", 36, &t[1]);
    int64_t t0 = 1699999200000LL;
    for (int w = 0; w < windows; w++) {
        for (int k = 0; k < 2; k++)
            for (unsigned s = 0; s < 2; s++) {
                ra_subject_t sub;
                memset(sub.b, (int)(s + 1), 16);
                ra_meter_record_at(m, t0 + w * 60000 + 1000, &t[k], &sub, k,
                                   10 * (uint64_t)w + s + 1);
            }
        ra_slice_t *out[8];
        size_t n = 0;
        if (ra_meter_rollover(m, t0 + (w + 1) * 60000, out, 8, &n) != 0) die("rollover");
        for (size_t i = 0; i < n && i < 8; i++) {
            if (w == 0 && ack_first) ra_meter_ack(m, out[i]);
            ra_slice_unref(out[i]);
        }
        if (w == 0 && ack_first) ra_meter_compact(m);
    }
    ra_meter_close(m);
    /* heads first, then the segments in name order */
    uint8_t *all = malloc(1);
    size_t n = 0;
    char p[1024];
    snprintf(p, sizeof p, "%s/heads", dir);
    if (access(p, F_OK) == 0) append_file(&all, &n, p);
    struct dirent **names;
    int k = scandir(dir, &names, NULL, alphasort);
    for (int i = 0; i < k; i++) {
        const char *nm = names[i]->d_name;
        size_t nl = strlen(nm);
        if (nl == 20 && strcmp(nm + 16, ".seg") == 0) {
            snprintf(p, sizeof p, "%s/%s", dir, nm);
            append_file(&all, &n, p);
        }
        free(names[i]);
    }
    free(names);
    ra_fix_rm_rf(dir);
    *len = n;
    return all;
}

static int corpus(const char *out) {
    mkdir(out, 0755);
    uint8_t *seg, *heads;
    size_t seg_len, heads_len;
    golden(&seg, &seg_len, &heads, &heads_len);
    const uint8_t *frame = seg + RA_WAL_SEG_HDR;
    size_t frame_len = seg_len - RA_WAL_SEG_HDR;
    uint8_t m0 = 0, m1 = 1, m2 = 2;

    /* wal-frame: byte 0 = mode, then one frame */
    put(out, "wal-frame", "golden-frame", &m0, 1, frame, frame_len);
    put(out, "wal-frame", "golden-frame-fixup", &m1, 1, frame, frame_len);
    put(out, "wal-frame", "golden-frame-truncated", &m0, 1, frame, frame_len - 7);
    uint8_t big[RA_WAL_FRAME_HDR + RA_WAL_FRAME_TRAILER];
    memcpy(big, frame, RA_WAL_FRAME_HDR);
    ra__put_u32(big + 4, 0xFFFFFFFFu); /* length 0xFFFFFFFF, header checksum fixed up */
    memset(big + RA_WAL_FRAME_HDR, 0, RA_WAL_FRAME_TRAILER);
    put(out, "wal-frame", "length-ffffffff-fixup", &m1, 1, big, sizeof big);
    ra_slice_t *v2 = doc_slice("v1-chained-amnesia");
    {
        size_t l;
        const uint8_t *b = ra_slice_bytes(v2, &l);
        uint8_t f[RA_WAL_FRAME_HDR + 256 + RA_WAL_FRAME_TRAILER];
        memcpy(f, RA_WAL_FRAME_MAGIC, 4);
        ra__put_u32(f + 4, (uint32_t)l);
        ra__put_u64(f + 8, 2);
        f[16] = RA_WAL_FRAME_SLICE;
        f[17] = f[18] = f[19] = 0;
        memset(f + 20, 0, 4);
        memcpy(f + RA_WAL_FRAME_HDR, b, l);
        memset(f + RA_WAL_FRAME_HDR + l, 0, 32);
        put(out, "wal-frame", "v2-frame-fixup", &m1, 1, f, RA_WAL_FRAME_HDR + l + 32);
    }
    ra_slice_unref(v2);

    /* wal-recovery: byte 0 = flags, then files */
    put(out, "wal-recovery", "golden-segment", &m0, 1, seg, seg_len);
    put(out, "wal-recovery", "golden-heads-only", &m0, 1, heads, heads_len);
    {
        uint8_t *both = malloc(heads_len + seg_len);
        memcpy(both, heads, heads_len);
        memcpy(both + heads_len, seg, seg_len);
        put(out, "wal-recovery", "golden-heads-and-segment", &m0, 1, both, heads_len + seg_len);
        free(both);
    }
    put(out, "wal-recovery", "golden-segment-torn", &m0, 1, seg, seg_len - 40);
    size_t l;
    uint8_t *w = meter_wal(&l, 3, 1);
    put(out, "wal-recovery", "meter-3-windows-acked-first", &m0, 1, w, l);
    put(out, "wal-recovery", "meter-3-windows-fixup", &m1, 1, w, l);
    free(w);
    w = meter_wal(&l, 2, 0);
    put(out, "wal-recovery", "meter-2-windows-tmp", &m2, 1, w, l);
    free(w);
    free(seg);
    free(heads);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "golden") == 0) {
        uint8_t *seg, *heads;
        size_t seg_len, heads_len;
        golden(&seg, &seg_len, &heads, &heads_len);
        print_block("segment", seg, seg_len);
        print_block("heads", heads, heads_len);
        free(seg);
        free(heads);
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "check") == 0) return check();
    if (argc == 3 && strcmp(argv[1], "corpus") == 0) return corpus(argv[2]);
    fprintf(stderr, "usage: gen-wal-seeds golden | check | corpus OUTDIR\n");
    return 2;
}
