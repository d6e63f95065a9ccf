/* libFuzzer harness for WAL recovery (ra__wal_open's scan, docs/FORMAT.md §4), over an
 * in-memory file system, the tests' one simulator (tests/sim-fs.c): no disk churn, no state
 * between runs.
 *
 * Input: byte 0 = flags, then the files of one WAL directory, each starting with its magic:
 *   "RONWSEG1..."  a segment, named <its header id, 16 hex>.seg (the next free id when two
 *                  claim the same one, so a name/id mismatch is reachable too);
 *   "RONWHDS1..."  the heads checkpoint (the last one wins);
 *   bytes before the first magic become a segment named 0000000000000000.seg;
 * at most 24 files (what follows the 24th is ignored).
 * Flags: bit 0 fixes up checksums first (the segment header's, every frame's header and
 * trailer while frames chain, the heads file's trailer), so the fuzzer reaches the frame
 * order, decoder and chain logic; bit 1 names the last segment *.tmp (a leftover write).
 *
 * Each input goes through:
 *   1. a read-only scan (what verify and inspect do);
 *   2. a read-write open (the meter's open: torn tails cut and kept as .broken, empty
 *      segments renamed *.empty.broken, .tmp removed), then an append of one slice;
 *   3. a read-write open again (a repair may make another segment the newest);
 *   4. a read-only scan;
 *   5. a read-write open, an ACK of every other slice, and a compaction (fully ACKed
 *      segments removed, mostly ACKed ones rewritten);
 *   6. a read-only scan.
 * Invariants: never a crash, a hang or an error return; every slice handed to the visitor
 * decodes again from its own bytes with the same b3; frame seqs handed out strictly
 * increase; every problem names a file of the directory and an offset within it; scans
 * 1, 2 (before the append), 3 and 4 hand out the same slices, and 3 and 4 also the
 * appended one, last, under a higher frame seq; scan 4 finds no torn bytes; scan 6 finds
 * every slice of scan 5 that was not ACKed, with its b3; compaction
 * fails, if at all, only with WalCorrupt (a damaged segment it leaves alone); a read-only
 * scan changes no byte of the directory. */
#include "ron/accounting.h"

#include "internal.h"
#include "io.h"
#include "wal.h"

#include "../sim-fs.c"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken invariant: say which, then crash (libFuzzer keeps the input). */
#define FAIL(...)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, "fuzz-wal-recovery: invariant broken at line %d: ", __LINE__);             \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fprintf(stderr, "\n");                                                                     \
        abort();                                                                                   \
    } while (0)

#define DIR "/wal"
#define MAX_FILES 64
#define MAX_INPUT_FILES 24 /* the rest is room for .broken copies, a .tmp, a new segment */

/* Calls that change the directory: a read-only scan must make none. */
static uint64_t changes(const simfs_t *fs) {
    static const simfs_op_t ops[] = {SIMFS_CREATE, SIMFS_OPEN_WRITE, SIMFS_WRITE,    SIMFS_PWRITE,
                                     SIMFS_RENAME, SIMFS_UNLINK,     SIMFS_TRUNCATE, SIMFS_MKDIR};
    uint64_t n = 0;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        n += simfs_count(fs, ops[i]);
    return n;
}

/* ---- building the directory from the input ----------------------------------------- */

static uint32_t hsum(const uint8_t *p, size_t n) {
    uint8_t d[32];
    ra_b3(p, n, d);
    return ra__get_u32(d);
}

static void fix_segment(uint8_t *b, size_t len) {
    if (len >= RA_WAL_SEG_HDR) ra__put_u32(b + 28, hsum(b, 28));
    size_t off = RA_WAL_SEG_HDR;
    while (off + RA_WAL_FRAME_HDR + RA_WAL_FRAME_TRAILER <= len &&
           memcmp(b + off, RA_WAL_FRAME_MAGIC, 4) == 0) {
        uint8_t *f = b + off;
        ra__put_u32(f + 20, hsum(f, 20));
        uint32_t n = ra__get_u32(f + 4);
        if (n > RA_FRAME_MAX || (uint64_t)n > len - off - RA_WAL_FRAME_HDR - RA_WAL_FRAME_TRAILER)
            break;
        ra_b3(f + RA_WAL_FRAME_HDR, n, f + RA_WAL_FRAME_HDR + n);
        off += RA_WAL_FRAME_HDR + n + RA_WAL_FRAME_TRAILER;
    }
}

static void fix_heads(uint8_t *b, size_t len) {
    if (len >= 24 + 32) ra_b3(b, len - 32, b + len - 32);
}

static const uint8_t *next_magic(const uint8_t *p, const uint8_t *end) {
    for (; p + 8 <= end; p++)
        if (p[0] == 'R' && p[1] == 'O' && p[2] == 'N' && p[3] == 'W' &&
            (memcmp(p, RA_WAL_SEG_MAGIC, 8) == 0 || memcmp(p, RA_WAL_HEADS_MAGIC, 8) == 0))
            return p;
    return end;
}

/* A file of the directory, durable, its checksums fixed up first when asked. */
static void put(simfs_t *fs, const char *name, const uint8_t *p, size_t n,
                void (*fix)(uint8_t *, size_t)) {
    uint8_t *b = malloc(n ? n : 1);
    if (!b) FAIL("out of memory");
    if (n) memcpy(b, p, n);
    if (fix) fix(b, n);
    char path[96];
    snprintf(path, sizeof path, DIR "/%s", name);
    simfs_set_data(fs, path, b, n);
    free(b);
}

static bool exists(simfs_t *fs, const char *name) {
    char path[96];
    size_t len;
    snprintf(path, sizeof path, DIR "/%s", name);
    return simfs_data(fs, path, &len) != NULL;
}

static simfs_t *build(const uint8_t *data, size_t size) {
    simfs_t *fs = simfs_new(1);
    simfs_io(fs)->mkdir(simfs_io(fs)->ud, DIR, RA__IO_PRIVATE);
    uint8_t flags = data[0];
    const uint8_t *p = data + 1, *end = data + size;
    /* bit 1: the last segment is a leftover write, *.tmp: held back until it is known */
    char last[40] = "";
    const uint8_t *last_p = NULL;
    size_t last_n = 0;
    const uint8_t *m = next_magic(p, end);
    if (m > p) { /* bytes before any magic */
        snprintf(last, sizeof last, "0000000000000000.seg");
        last_p = p;
        last_n = (size_t)(m - p);
    }
    int nfiles = last_p != NULL;
    for (p = m; p < end && nfiles < MAX_INPUT_FILES; nfiles++) {
        const uint8_t *q = next_magic(p + 8, end);
        size_t n = (size_t)(q - p);
        if (memcmp(p, RA_WAL_HEADS_MAGIC, 8) == 0) {
            put(fs, "heads", p, n, (flags & 1) ? fix_heads : NULL);
        } else {
            if (last_p) put(fs, last, last_p, last_n, (flags & 1) ? fix_segment : NULL);
            uint64_t id = n >= 16 ? ra__get_u64(p + 8) : 0;
            for (int tries = 0; tries < MAX_FILES; tries++, id++) {
                snprintf(last, sizeof last, "%016llx.seg", (unsigned long long)id);
                if (!exists(fs, last)) break;
            }
            last_p = p;
            last_n = n;
        }
        p = q;
    }
    if (last_p) {
        if (flags & 2) strcat(last, ".tmp");
        put(fs, last, last_p, last_n, (flags & 1) ? fix_segment : NULL);
    }
    simfs_reset_counts(fs);
    return fs;
}

/* ---- the visitor -------------------------------------------------------------------- */

typedef struct got {
    simfs_t *fs;
    uint64_t *seq;
    uint8_t (*b3)[32];
    size_t n, cap;
} got_t;

static int v_head(void *ud, const uint8_t tenant[16], const char *dimension, uint64_t seq,
                  int64_t last_ws, const uint8_t b3[32]) {
    (void)ud;
    (void)tenant;
    (void)seq;
    (void)last_ws;
    (void)b3;
    /* Memory safety only: the core does not check a checkpointed dimension name against
     * the naming rules (reported with the WAL issue; the checkpoint's BLAKE3 trailer keeps
     * random damage out, a crafted or mis-written file is not), so "" or bytes outside
     * [a-z0-9_] may come through. */
    if (strlen(dimension) > RA_DIM_NAME_MAX) FAIL("head with a dimension name over 32 bytes");
    return 0;
}

static int v_slice(void *ud, ra_slice_t *s, uint64_t frame_seq) {
    got_t *g = ud;
    if (g->n && frame_seq <= g->seq[g->n - 1])
        FAIL("frame seq %llu after %llu", (unsigned long long)frame_seq,
             (unsigned long long)g->seq[g->n - 1]); /* strictly increasing */
    size_t len;
    const uint8_t *bytes = ra_slice_bytes(s, &len);
    ra_slice_t *again = NULL;
    if (ra_slice_decode(bytes, len, &again) != 0) FAIL("a visited slice does not decode again");
    uint8_t d[32];
    ra_b3(bytes, len, d);
    if (memcmp(d, ra_slice_b3(s), 32) != 0 || memcmp(d, ra_slice_b3(again), 32) != 0)
        FAIL("a visited slice's b3 is not BLAKE3 of its bytes");
    ra_slice_unref(again);
    if (g->n == g->cap) {
        size_t c = g->cap ? g->cap * 2 : 16;
        uint64_t *q = realloc(g->seq, c * sizeof *q);
        uint8_t(*r)[32] = realloc(g->b3, c * sizeof *r);
        if (!q || !r) FAIL("out of memory");
        g->seq = q;
        g->b3 = r;
        g->cap = c;
    }
    g->seq[g->n] = frame_seq;
    memcpy(g->b3[g->n], d, 32);
    g->n++;
    ra_slice_unref(s);
    return 0;
}

static void v_problem(void *ud, const char *what, const char *file, uint64_t off,
                      const char *detail) {
    got_t *g = ud;
    if (!what || !*what || !detail) FAIL("problem without a description");
    uint64_t size;
    if (simfs_io(g->fs)->size(g->fs, file, &size) != 0)
        FAIL("problem in %s, not a file of the directory", file); /* a file of the directory */
    if (off > size) FAIL("problem offset %llu beyond %s", (unsigned long long)off, file);
}

static void debug(const char *step, simfs_t *fs, const got_t *g);

/* Opens the WAL on fs into *w (read-only or repairing), g getting what it found; step names
 * it for FUZZ_WAL_DEBUG. */
static void scan(simfs_t *fs, bool read_only, got_t *g, ra__wal_t *w, const char *step) {
    memset(g, 0, sizeof *g);
    g->fs = fs;
    ra__wal_visitor_t v = {g, v_head, v_slice, v_problem};
    char err[256] = "";
    uint64_t writes = changes(fs);
    if (ra__wal_open(w, simfs_io(fs), DIR, UINT64_MAX, UINT32_MAX, 0, read_only, &v, err,
                     sizeof err) != 0)
        FAIL("ra__wal_open failed: %s", err);
    if (read_only && changes(fs) != writes) FAIL("a read-only scan changed the directory");
    debug(step, fs, g);
}

/* FUZZ_WAL_DEBUG=1 fuzz-wal-recovery CRASH_FILE: what each step saw (=2: with the bytes). */
static int debug_file(void *ud, const char *name) {
    simfs_t *fs = ud;
    char path[96];
    size_t len = 0;
    snprintf(path, sizeof path, DIR "/%s", name);
    const uint8_t *b = simfs_data(fs, path, &len);
    fprintf(stderr, " %s(%zu)", name, len);
    if (getenv("FUZZ_WAL_DEBUG")[0] == '2' && b) /* FUZZ_WAL_DEBUG=2: the bytes too */
        for (size_t k = 0; k < len; k++)
            fprintf(stderr, "%s%02x", k % 32 ? " " : "\n     ", b[k]);
    return 0;
}

static void debug(const char *step, simfs_t *fs, const got_t *g) {
    static int on = -1;
    if (on < 0) on = getenv("FUZZ_WAL_DEBUG") != NULL;
    if (!on) return;
    fprintf(stderr, "-- %s: files:", step);
    simfs_names(fs, DIR, debug_file, fs);
    fprintf(stderr, "\n   slices (frame seq):");
    for (size_t i = 0; g && i < g->n; i++)
        fprintf(stderr, " %llu", (unsigned long long)g->seq[i]);
    fprintf(stderr, "\n");
}

static void same(const got_t *a, const got_t *b, size_t n) {
    if (a->n < n || b->n < n) FAIL("%zu / %zu slices, expected %zu", a->n, b->n, n);
    for (size_t i = 0; i < n; i++)
        if (a->seq[i] != b->seq[i] || memcmp(a->b3[i], b->b3[i], 32) != 0)
            FAIL("slice %zu differs: frame seq %llu vs %llu", i, (unsigned long long)a->seq[i],
                 (unsigned long long)b->seq[i]);
}

static void free_got(got_t *g) {
    free(g->seq);
    free(g->b3);
}

/* The slice appended after recovery: §2's golden vector v1-first-slice. */
static const uint8_t v1[] = {
    0x52, 0x4f, 0x4e, 0x53, 0x01, 0x00, 0x00, 0x00, 0x12, 0x3e, 0x45, 0x67, 0xe8, 0x9b, 0x12,
    0xd3, 0xa4, 0x56, 0x42, 0x66, 0x14, 0x17, 0x40, 0x00, 0xe0, 0xed, 0x53, 0x65, 0x00, 0x00,
    0x00, 0x00, 0x2c, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x05, 0x62, 0x79, 0x74, 0x65, 0x73, 0x04, 0x67, 0x77, 0x2d, 0x31, 0x05, 0x30, 0x2e,
    0x31, 0x2e, 0x30, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07,
    0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0xdc, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

/* A segment named at or above *ud (then *ud becomes 0 and the walk stops). */
static int seg_at_or_above(void *ud, const char *name) {
    uint64_t *next = ud;
    if (strlen(name) != 20 || strcmp(name + 16, ".seg") != 0) return 0;
    if (strtoull(name, NULL, 16) < *next) return 0;
    *next = 0;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > (4u << 20)) return 0;
    simfs_t *fs = build(data, size);
    ra__wal_t w;
    got_t g1, g2, g3, g4;

    debug("input", fs, NULL);
    scan(fs, true, &g1, &w, "1 read-only");
    ra__wal_close(&w);

    scan(fs, false, &g2, &w, "2 repairing");
    same(&g1, &g2, g1.n);
    if (g2.n != g1.n)
        FAIL("the repairing open found %zu slices, the read-only scan %zu", g2.n, g1.n);
    uint64_t next = w.next_seq;
    ra_slice_t *s = NULL;
    if (ra_slice_decode(v1, sizeof v1, &s) != 0) FAIL("v1 does not decode");
    uint8_t v1_b3[32];
    memcpy(v1_b3, ra_slice_b3(s), 32);
    _Atomic uint64_t intent = 0;
    uint64_t first = 0;
    /* next_seq lies above every segment name and frame seq, unless one of them is at the
     * top of the u64 range (a segment named ffffffffffffffff.seg, a frame seq 2^64 - 1:
     * crafted files only, 2^64 frames are never written), where the + 1 wraps: then no id
     * is left for another segment, and what the core does is not this check's business
     * (reported with the WAL issue). */
    /* Ids stay at or below 2^62 (FORMAT.md §4): a WAL whose names or checkpoint reach the
     * top of that range (crafted files only) has no id left, and the append refuses. */
    bool room = next != 0 && next + 2 <= ((uint64_t)1 << 62) && !(g1.n && g1.seq[g1.n - 1] >= next);
    uint64_t probe = next;
    if (room) simfs_names(fs, DIR, seg_at_or_above, &probe);
    room = room && probe != 0;
    int rc = room ? ra__wal_append(&w, &s, 1, 1699999500000LL, &intent, &first) : -1;
    if (room && (rc != 0 || first < next || (g1.n && first <= g1.seq[g1.n - 1])))
        FAIL("append after recovery: rc %d, first %llu, next %llu", rc, (unsigned long long)first,
             (unsigned long long)next);
    ra_slice_unref(s);
    ra__wal_close(&w);

    debug("2 after the append", fs, NULL);
    scan(fs, false, &g3, &w, "3 repairing");
    ra__wal_close(&w);
    scan(fs, true, &g4, &w, "4 read-only");
    uint64_t torn = w.stats.torn_bytes;
    ra__wal_close(&w);
    size_t want = g1.n + (room ? 1 : 0);
    if (g3.n != want || g4.n != want)
        FAIL("after the append: %zu and %zu slices, expected %zu", g3.n, g4.n, want);
    same(&g1, &g3, g1.n);
    same(&g3, &g4, want);
    if (room && (g4.seq[want - 1] != first || memcmp(g4.b3[want - 1], v1_b3, 32) != 0))
        FAIL("the appended slice is not last");
    if (torn != 0) FAIL("%llu torn bytes after two repairing opens", (unsigned long long)torn);

    /* 5. ACK every other slice and compact (segments removed, mostly-ACKed ones rewritten);
     * 6. a read-only scan still finds every un-ACKed slice, and nothing new. */
    got_t g5, g6;
    scan(fs, false, &g5, &w, "5 repairing");
    same(&g4, &g5, want);
    if (g5.n != want) FAIL("reopen before compaction: %zu slices, expected %zu", g5.n, want);
    for (size_t i = 0; i < g5.n; i += 2)
        ra__wal_acked(&w, g5.seq[i]);
    size_t removed = 0;
    rc = ra__wal_compact(&w, NULL, NULL, &removed);
    /* WalCorrupt: a damaged segment does not hold what memory says, and is left alone */
    if (rc != 0 && rc != RA_EWALCORRUPT) FAIL("compaction: %d %s", rc, ra_err_name(rc));
    ra__wal_close(&w);
    scan(fs, true, &g6, &w, "6 read-only after compaction");
    ra__wal_close(&w);
    /* Every un-ACKed slice survives, with its b3 (g6 is in seq order: a merge walk). ACKed
     * ones may stay (ACKed, not compacted: resent, the downstream answers dup), and a frame
     * that was skipped as misplaced behind a segment that compaction removed may surface
     * (crafted or restored files only; reported with the WAL issue), so g6 is not required
     * to be a subset of g5. */
    size_t i6 = 0;
    for (size_t j = 1; j < g5.n; j += 2) {
        while (i6 < g6.n && g6.seq[i6] < g5.seq[j])
            i6++;
        if (i6 == g6.n || g6.seq[i6] != g5.seq[j] || memcmp(g6.b3[i6], g5.b3[j], 32) != 0)
            FAIL("un-ACKed frame seq %llu is gone after compaction", (unsigned long long)g5.seq[j]);
    }
    free_got(&g5);
    free_got(&g6);

    free_got(&g1);
    free_got(&g2);
    free_got(&g3);
    free_got(&g4);
    simfs_free(fs);
    return 0;
}
