/* The WAL's recovery from damaged files (G-18): torn writes, bit flips, a huge length, a
 * zeroed hole, misplaced frames, a damaged segment header or heads checkpoint. Each case
 * damages a WAL the fixture built (tests/wal_fixture.h) and reopens it. */
#include "wal_fixture.h"

/* ---- G-18: torn writes, bit flips, a huge length, a zeroed hole, misplaced frames ---------- */

/* Failures a case reports (the first 12 printed; the others counted). */
static int g18_failures;

/* A WAL of one segment per window: window w holds tenants[w] x dims frames (subjects each;
 * tenants from 300), sealed at the start of window w + 1. */
static void fix_build_windows(wal_fix_t *f, uint64_t seed, int segs, const unsigned *tenants,
                              unsigned dims, unsigned subjects) {
    memset(f, 0, sizeof *f);
    walfix_t w;
    walfix_start(&w, seed);
    if (!walfix_meter(&w)) abort();
    for (int i = 0; i < segs; i++) {
        size_t n = 0;
        if (walfix_seal_grid(&w, i, tenants[i], dims, subjects, NULL, 0, &n) != 0 ||
            n != tenants[i] * dims)
            abort();
    }
    ra_meter_close(w.m);
    f->fs = w.fs;
    fix_scan(f);
}

/* The fixture most G-18 cases damage: 3 segments of 2 tenants x 2 dimensions (6 subjects),
 * seed printed, the case's failure count reset. */
static bool g18_fixture(wal_fix_t *f, uint64_t seed, const char *what) {
    printf("# G-18 %s: seed %#llx\n", what, (unsigned long long)seed);
    static const unsigned two[3] = {2, 2, 2};
    fix_build_windows(f, seed, 3, two, 2, 6);
    g18_failures = 0;
    return f->nseg == 3;
}

typedef struct {
    double corrupt, torn;
    size_t pending;
    bool exact; /* pending == the expected frames, in order */
    int breaks;
} outcome_t;

/* Reopens on fs and compares pending with every frame of fix not marked lost. */
static outcome_t reopen_expect(simfs_t *fs, const wal_fix_t *fix, bool lost[SEGS_MAX][FRAMES_MAX]) {
    outcome_t o = {-1, -1, 0, false, 0};
    ra_config_t cfg;
    wal_config(&cfg, WAL_DIR);
    log_reset();
    ra_meter_t *m = open_io(&cfg, fs, NULL);
    if (!m) return o;
    o.corrupt = metric(m, "accounting_wal_corrupt_total");
    o.torn = metric(m, "accounting_wal_torn_bytes_total");
    static ra_slice_t *p[1024];
    size_t np = pending_all(m, p, 1024);
    o.pending = np;
    o.breaks = 0;
    size_t k = 0;
    bool exact = true;
    for (size_t s = 0; s < fix->nseg; s++)
        for (size_t i = 0; i < fix->seg[s].n; i++) {
            if (lost && lost[s][i]) continue;
            if (k >= np || memcmp(ra_slice_b3(p[k]), fix->seg[s].b3[i], 32) != 0) exact = false;
            k++;
        }
    o.exact = exact && k == np;
    /* no slice twice */
    for (size_t i = 0; i < np; i++)
        for (size_t j = i + 1; j < np; j++)
            if (memcmp(ra_slice_b3(p[i]), ra_slice_b3(p[j]), 32) == 0) o.breaks++;
    unref_all(p, np);
    ra_meter_close(m);
    return o;
}

#define G18_CHECK(cond, ...)                                                                       \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            if (g18_failures++ < 12)                                                               \
                RA_FAILF(__VA_ARGS__);                                                             \
            else                                                                                   \
                ra_t_failed_checks++;                                                              \
        }                                                                                          \
    } while (0)

/* One damaged copy of a fixture's WAL: a clone of its file system and the bytes of the file
 * at path, which the case changes before damage_reopen writes them back (len of them). */
typedef struct {
    simfs_t *fs;
    const char *path;
    uint8_t *b;
    size_t len;
} damage_t;

static uint8_t *damage_begin(damage_t *d, const wal_fix_t *fix, uint64_t seed, const char *path,
                             size_t extra) {
    d->fs = simfs_clone(fix->fs, seed);
    d->path = path;
    d->b = copy_of(d->fs, path, &d->len, extra);
    return d->b;
}

static outcome_t damage_reopen(damage_t *d, size_t len, const wal_fix_t *fix,
                               bool lost[SEGS_MAX][FRAMES_MAX]) {
    set_bytes(d->fs, d->path, d->b, len);
    return reopen_expect(d->fs, fix, lost);
}

static void damage_end(damage_t *d) {
    free(d->b);
    simfs_free(d->fs);
}

/* What a cut of segment si at byte k loses: lost[si][i] for the frames ending after k (every
 * other entry false); the end of the last whole frame before k; whether k falls inside a
 * frame or the segment header. */
typedef struct {
    size_t nlost, good_end;
    bool mid_frame;
} cut_t;

static cut_t cut_at(const wal_fix_t *fix, size_t si, size_t k, bool lost[SEGS_MAX][FRAMES_MAX]) {
    const seg_info_t *s = &fix->seg[si];
    cut_t c = {0, k < RA_WAL_SEG_HDR ? 0 : RA_WAL_SEG_HDR, k < RA_WAL_SEG_HDR};
    memset(lost, 0, sizeof(bool[SEGS_MAX][FRAMES_MAX]));
    for (size_t i = 0; i < s->n; i++) {
        lost[si][i] = s->end[i] > k;
        c.nlost += lost[si][i];
        if (s->end[i] <= k) c.good_end = s->end[i];
        if (s->off[i] < k && k < s->end[i]) c.mid_frame = true;
    }
    return c;
}

/* One cut of truncate_every_offset, judged: the checks of its kind of segment; true when the
 * cut lost whole frames without a count or a log line (what must never happen). */
typedef bool (*cut_judge_fn)(const wal_fix_t *fix, const seg_info_t *s, size_t k, cut_t c,
                             outcome_t o, damage_t *d, bool lost[SEGS_MAX][FRAMES_MAX]);

/* The newest segment cut at k: a torn tail (counted, kept in .broken), never corruption; a
 * second open finds nothing more to repair. Frames lost at a frame boundary leave no torn
 * bytes: the loss must still be seen (the segment header says how many frames it holds). */
static bool judge_newest_cut(const wal_fix_t *fix, const seg_info_t *s, size_t k, cut_t c,
                             outcome_t o, damage_t *d, bool lost[SEGS_MAX][FRAMES_MAX]) {
    size_t want_torn = k - c.good_end;
    G18_CHECK(o.exact, "cut at %zu: pending is not every frame before the cut", k);
    G18_CHECK(o.breaks == 0, "cut at %zu: a slice twice", k);
    G18_CHECK(o.corrupt == 0, "cut at %zu: corrupt %g, want 0 (a torn tail)", k, o.corrupt);
    G18_CHECK(o.torn == (double)want_torn, "cut at %zu: torn bytes %g, want %zu", k, o.torn,
              want_torn);
    if (want_torn > 0) {
        char broken[160];
        snprintf(broken, sizeof broken, "%s.broken", s->path);
        size_t bl = 0;
        const uint8_t *bb = simfs_data(d->fs, broken, &bl);
        G18_CHECK(bb && bl == want_torn && memcmp(bb, d->b + c.good_end, bl) == 0,
                  "cut at %zu: the torn tail is not kept in %s", k, broken);
    }
    bool silent = c.nlost && want_torn == 0 && o.corrupt == 0 && o.torn == 0 &&
                  !strstr(g_log, "wal recovery:");
    outcome_t o2 = reopen_expect(d->fs, fix, lost);
    G18_CHECK(o2.exact && o2.corrupt == 0 && o2.torn == 0,
              "cut at %zu: the second recovery is not clean (corrupt %g torn %g)", k, o2.corrupt,
              o2.torn);
    return silent;
}

/* An older segment cut at k: corruption (never a torn tail), the later segments recovered. */
static bool judge_older_cut(const wal_fix_t *fix, const seg_info_t *s, size_t k, cut_t c,
                            outcome_t o, damage_t *d, bool lost[SEGS_MAX][FRAMES_MAX]) {
    (void)fix, (void)s, (void)d, (void)lost;
    G18_CHECK(o.exact, "older cut at %zu: pending is not every surviving frame", k);
    G18_CHECK(o.torn == 0, "older cut at %zu: counted as torn (%g)", k, o.torn);
    if (c.mid_frame) {
        G18_CHECK(o.corrupt >= 1, "older cut at %zu: not counted as corrupt", k);
        return false;
    }
    return c.nlost && o.corrupt == 0;
}

/* Segment si of the fixture truncated at every offset (every third with RA_TEST_QUICK),
 * each cut reopened and judged; no cut may lose whole frames silently. */
static void truncate_every_offset(uint64_t seed, size_t si, const char *what, cut_judge_fn judge) {
    wal_fix_t fix;
    REQUIRE(g18_fixture(&fix, seed, what));
    const seg_info_t *s = &fix.seg[si];
    REQUIRE(s->n == 4);
    size_t step = quick() ? 3 : 1, runs = 0, silent = 0;
    for (size_t k = 0; k < s->len; k += step, runs++) {
        damage_t d;
        damage_begin(&d, &fix, seed + k, s->path, 0);
        bool lost[SEGS_MAX][FRAMES_MAX];
        cut_t c = cut_at(&fix, si, k, lost);
        outcome_t o = damage_reopen(&d, k, &fix, lost);
        silent += judge(&fix, s, k, c, o, &d, lost);
        damage_end(&d);
    }
    printf("# G-18: %zu truncations of the %zu-byte segment %zu (4 frames); %zu cuts at a frame "
           "boundary lost whole frames without any count or log\n",
           runs, s->len, si, silent);
    CHECK_EQ_U64(silent, 0);
    simfs_free(fix.fs);
}

RA_TEST(G_18_truncate_newest_segment_at_every_offset) {
    truncate_every_offset(0x18000001, 2, "truncation of the newest segment", judge_newest_cut);
}

RA_TEST(G_18_truncate_older_segment_is_corruption) {
    truncate_every_offset(0x18000002, 1, "truncation of an older segment", judge_older_cut);
}

RA_TEST(G_18_bit_flip_in_every_frame) {
    uint64_t seed = 0x18000003;
    wal_fix_t fix;
    REQUIRE(g18_fixture(&fix, seed, "bit flips"));
    size_t runs = 0, unnamed = 0, step = quick() ? 5 : 1;
    for (size_t si = 0; si < fix.nseg; si++) {
        const seg_info_t *s = &fix.seg[si];
        for (size_t fi = 0; fi < s->n; fi++) {
            for (size_t off = s->off[fi]; off < s->end[fi]; off += step) {
                damage_t d;
                uint8_t *b = damage_begin(&d, &fix, seed + off, s->path, 0);
                size_t rel = off - s->off[fi];
                b[off] ^= (uint8_t)(1u << (rel % 8));
                /* the slice id of the damaged frame, as the log should name it */
                ra_slice_t *orig = NULL;
                ra_slice_decode(b + s->off[fi] + RA_WAL_FRAME_HDR,
                                s->end[fi] - s->off[fi] - RA_WAL_FRAME_HDR - RA_WAL_FRAME_TRAILER,
                                &orig);
                bool lost[SEGS_MAX][FRAMES_MAX] = {{false}};
                lost[si][fi] = true;
                bool tail = si + 1 == fix.nseg && fi + 1 == s->n;
                outcome_t o = damage_reopen(&d, d.len, &fix, lost);
                G18_CHECK(o.exact, "flip seg %zu frame %zu byte %zu: not exactly that frame lost",
                          si, fi, rel);
                if (tail)
                    G18_CHECK(o.torn == (double)(s->end[fi] - s->off[fi]) && o.corrupt == 0,
                              "flip in the newest tail frame byte %zu: torn %g corrupt %g", rel,
                              o.torn, o.corrupt);
                else
                    G18_CHECK(o.corrupt == 1 && o.torn == 0,
                              "flip seg %zu frame %zu byte %zu: corrupt %g torn %g", si, fi, rel,
                              o.corrupt, o.torn);
                /* Where the header's length and the payload are intact (seq, type, header
                 * checksum, payload checksum), the report names the slice. */
                bool readable = (rel >= 8 && rel < RA_WAL_FRAME_HDR) ||
                                off >= s->end[fi] - RA_WAL_FRAME_TRAILER;
                if (readable && orig) {
                    ra_slice_id_t id;
                    ra_slice_get_id(orig, &id);
                    char want[64];
                    snprintf(want, sizeof want, "seq %llu", (unsigned long long)id.seq);
                    ra_tenant_t t;
                    char ts[37];
                    ra_slice_get_tenant(orig, &t);
                    ra_tenant_format(&t, ts);
                    if (!strstr(g_log, want) || !strstr(g_log, ts)) unnamed++;
                }
                ra_slice_unref(orig);
                damage_end(&d);
                runs++;
            }
        }
    }
    printf("# G-18: %zu single-bit flips (every byte of every frame of 3 segments)\n", runs);
    CHECK_EQ_U64(unnamed, 0);
    simfs_free(fix.fs);
}

/* The 4-byte header checksum as the WAL computes it (first bytes of BLAKE3). */
static void fix_hdr_sum(uint8_t *frame) {
    uint8_t d[32];
    ra_b3(frame, 20, d);
    memcpy(frame + 20, d, 4);
}

RA_TEST(G_18_length_field_huge) {
    uint64_t seed = 0x18000004;
    wal_fix_t fix;
    REQUIRE(g18_fixture(&fix, seed, "length 0xFFFFFFFF"));
    const uint32_t lens[] = {0xFFFFFFFFu, RA_FRAME_MAX + 1, 0};
    for (int target = 0; target < 2; target++) {
        size_t si = target == 0 ? 1 : 2, fi = target == 0 ? 1 : fix.seg[2].n - 1;
        const seg_info_t *s = &fix.seg[si];
        for (int li = 0; li < 4; li++) {
            for (int resum = 0; resum < 2; resum++) {
                damage_t d;
                uint8_t *fr = damage_begin(&d, &fix, seed, s->path, 0) + s->off[fi];
                size_t len = d.len;
                /* li 3: the bytes left after the header, plus one (past the end) */
                uint32_t v = li < 3 ? lens[li]
                                    : (uint32_t)(len - s->off[fi] - RA_WAL_FRAME_HDR -
                                                 RA_WAL_FRAME_TRAILER + 1);
                ra__put_u32(fr + 4, v);
                if (resum) fix_hdr_sum(fr);
                bool lost[SEGS_MAX][FRAMES_MAX] = {{false}};
                lost[si][fi] = true;
                outcome_t o = damage_reopen(&d, len, &fix, lost);
                G18_CHECK(o.exact, "length %#x (header sum %s) in seg %zu frame %zu: not skipped",
                          v, resum ? "fixed" : "stale", si, fi);
                G18_CHECK(o.corrupt + (o.torn > 0) == 1, "length %#x: corrupt %g torn %g", v,
                          o.corrupt, o.torn);
                damage_end(&d);
            }
        }
    }
    simfs_free(fix.fs);
}

RA_TEST(G_18_zeroed_4k_hole_resyncs) {
    uint64_t seed = 0x18000005;
    printf("# G-18 zeroed 4 KiB hole: seed %#llx\n", (unsigned long long)seed);
    g18_failures = 0;
    for (int newest = 0; newest < 2; newest++) {
        /* 40 frames in the big segment; a small segment after it unless it is the newest */
        wal_fix_t fix;
        static const unsigned tenants[2] = {40, 2};
        fix_build_windows(&fix, seed, newest ? 1 : 2, tenants, 1, 4);
        const seg_info_t *s = &fix.seg[0];
        REQUIRE(s->n == 40 && s->len > 4096 + 2000);
        size_t hole = 1500;
        damage_t d;
        memset(damage_begin(&d, &fix, seed, s->path, 0) + hole, 0, 4096);
        bool lost[SEGS_MAX][FRAMES_MAX] = {{false}};
        size_t nlost = 0, after = 0;
        for (size_t i = 0; i < s->n; i++) {
            lost[0][i] = s->end[i] > hole && s->off[i] < hole + 4096;
            nlost += lost[0][i];
            after += s->off[i] >= hole + 4096;
        }
        outcome_t o = damage_reopen(&d, d.len, &fix, lost);
        printf("# G-18 hole at %zu..%zu of a %zu-byte %s segment: %zu frames lost, %zu after "
               "the hole, %zu recovered, corrupt %g\n",
               hole, hole + 4096, s->len, newest ? "newest" : "older", nlost, after, o.pending,
               o.corrupt);
        CHECK(after > 0);
        CHECK(o.exact);
        CHECK(o.corrupt >= 1);
        CHECK(o.torn == 0);
        CHECK(strstr(g_log, "corrupt frame") != NULL);
        damage_end(&d);
        simfs_free(fix.fs);
    }
}

/* (a) a copy of frame 0 of the middle segment inserted after its frame 2 */
static outcome_t misplace_copy_inside(const wal_fix_t *fix, uint64_t seed) {
    const seg_info_t *s = &fix->seg[1];
    damage_t d;
    size_t fl = s->end[0] - s->off[0];
    uint8_t *b = damage_begin(&d, fix, seed, s->path, fl);
    memmove(b + s->end[2] + fl, b + s->end[2], d.len - s->end[2]);
    memcpy(b + s->end[2], b + s->off[0], fl);
    outcome_t o = damage_reopen(&d, d.len + fl, fix, NULL);
    damage_end(&d);
    return o;
}

/* (b) a frame of the oldest segment appended to the newest: stale, not a torn tail */
static outcome_t misplace_stale_tail(const wal_fix_t *fix, uint64_t seed) {
    const seg_info_t *s = &fix->seg[2], *old = &fix->seg[0];
    damage_t d;
    size_t ol, fl = old->end[1] - old->off[1];
    uint8_t *b = damage_begin(&d, fix, seed, s->path, fl);
    uint8_t *ob = copy_of(d.fs, old->path, &ol, 0);
    memcpy(b + d.len, ob + old->off[1], fl);
    free(ob);
    outcome_t o = damage_reopen(&d, d.len + fl, fix, NULL);
    damage_end(&d);
    return o;
}

/* (c) a whole old segment replayed under a newer name (a restored backup) */
static outcome_t misplace_old_segment(const wal_fix_t *fix, uint64_t seed) {
    damage_t d;
    damage_begin(&d, fix, seed, fix->seg[0].path, 0);
    char path[128];
    snprintf(path, sizeof path, "%s/%016llx.seg", WAL_DIR, 0x100ull);
    d.path = path; /* the same bytes under a newer name */
    outcome_t o = damage_reopen(&d, d.len, fix, NULL);
    damage_end(&d);
    return o;
}

/* Each misplacement: every frame still pending exactly once, and counted as corrupt
 * (exactly once unless `more`); no torn bytes where `no_torn`; the log line where given. */
static const struct {
    const char *what;
    outcome_t (*damage)(const wal_fix_t *fix, uint64_t seed);
    bool more, no_torn;
    const char *log;
} MISPLACED[] = {
    {"a frame copied inside a segment", misplace_copy_inside, false, false, "misplaced frame"},
    {"an old frame after the newest tail", misplace_stale_tail, false, true, NULL},
    {"an old segment under a newer name", misplace_old_segment, true, false, NULL},
};

RA_TEST(G_18_misplaced_and_stale_frames_skipped) {
    uint64_t seed = 0x18000006;
    wal_fix_t fix;
    REQUIRE(g18_fixture(&fix, seed, "misplaced frames"));
    for (size_t i = 0; i < sizeof MISPLACED / sizeof MISPLACED[0]; i++) {
        outcome_t o = MISPLACED[i].damage(&fix, seed);
        const char *what = MISPLACED[i].what;
        G18_CHECK(o.exact && o.breaks == 0, "%s: pending not exact (%d twice)", what, o.breaks);
        G18_CHECK(MISPLACED[i].more ? o.corrupt >= 1 : o.corrupt == 1, "%s: corrupt %g", what,
                  o.corrupt);
        G18_CHECK(!MISPLACED[i].no_torn || o.torn == 0, "%s: torn %g", what, o.torn);
        G18_CHECK(!MISPLACED[i].log || strstr(g_log, MISPLACED[i].log), "%s: no '%s' in the log",
                  what, MISPLACED[i].log);
    }
    simfs_free(fix.fs);
}

/* A damaged segment header loses no frame; and it must not make the WAL refuse to seal. */
RA_TEST(G_18_segment_header_flip) {
    uint64_t seed = 0x18000007;
    wal_fix_t fix;
    REQUIRE(g18_fixture(&fix, seed, "segment header flips"));
    size_t refused = 0;
    /* byte == RA_WAL_SEG_HDR: the control, nothing flipped */
    for (size_t byte = 0; byte <= RA_WAL_SEG_HDR; byte++) {
        bool control = byte == RA_WAL_SEG_HDR;
        damage_t d;
        uint8_t *b = damage_begin(&d, &fix, seed, fix.seg[0].path, 0);
        if (!control) b[byte] ^= 0x10;
        outcome_t o = damage_reopen(&d, d.len, &fix, NULL);
        G18_CHECK(o.exact, "header byte %zu flipped: frames lost", byte);
        G18_CHECK(o.corrupt == (control ? 0 : 1), "header byte %zu flipped: corrupt %g", byte,
                  o.corrupt);
        /* The meter still seals: a damaged header is not "the oldest slice is too old". */
        ra_config_t cfg;
        wal_config(&cfg, WAL_DIR);
        ra_t_now_ms = RA_T_EPOCH_MS + 10 * WIN_MS;
        ra_meter_t *m = open_io(&cfg, d.fs, NULL);
        if (m) {
            record_grid(m, 9, 1, 1, 2, 300, &seed);
            size_t n = 0;
            int rc = ra_meter_rollover(m, RA_T_EPOCH_MS + 10 * WIN_MS, NULL, 0, &n);
            if (rc != 0) {
                if (control)
                    RA_FAILF("control: the rollover fails without any damage: %s", ra_err_name(rc));
                if (refused++ == 0)
                    RA_FAILF("header byte %zu flipped: the next rollover is refused: %s (%s)", byte,
                             ra_err_name(rc),
                             strstr(g_log, "full") ? "the WAL calls itself full" : "");
            }
            ra_meter_close(m);
        }
        ra_t_now_ms = 0;
        damage_end(&d);
    }
    printf("# G-18: 32 header flips; %zu made the next rollover fail\n", refused);
    simfs_free(fix.fs);
}

RA_TEST(G_18_heads_checkpoint_corrupt_is_reported) {
    uint64_t seed = 0x18000008;
    simfs_t *fs = simfs_new(seed);
    ra_config_t cfg;
    wal_config(&cfg, WAL_DIR);
    ra_meter_t *m = open_io(&cfg, fs, NULL);
    REQUIRE(m);
    record_grid(m, 0, 2, 2, 3, 300, &seed);
    size_t n;
    CHECK_RC(ra_meter_rollover(m, RA_T_EPOCH_MS + WIN_MS, NULL, 0, &n), 0);
    ack_all(m);
    CHECK_RC(ra_meter_compact(m), 0);
    ra_meter_close(m);
    size_t len;
    uint8_t *b = copy_of(fs, WAL_DIR "/heads", &len, 0);
    b[len / 2] ^= 1;
    set_bytes(fs, WAL_DIR "/heads", b, len);
    free(b);
    log_reset();
    m = open_io(&cfg, fs, NULL);
    REQUIRE(m);
    CHECK(metric(m, "accounting_wal_corrupt_total") == 1);
    CHECK(strstr(g_log, "corrupt heads checkpoint") != NULL);
    ra_meter_close(m);
    simfs_free(fs);
}

int main(void) {
    printf("# test-wal-damage\n");
    double t0 = now_s();
    RA_RUN(G_18_truncate_newest_segment_at_every_offset,
           "G-18 torn write: newest segment truncated at every offset");
    RA_RUN(G_18_truncate_older_segment_is_corruption,
           "G-18 older segment truncated at every offset: corruption, later segments recovered");
    RA_RUN(G_18_bit_flip_in_every_frame, "G-18 bit flip in every byte of every frame");
    RA_RUN(G_18_length_field_huge, "G-18 length field 0xFFFFFFFF and other impossible lengths");
    RA_RUN(G_18_zeroed_4k_hole_resyncs, "G-18 zeroed 4 KiB hole: frames after it recovered");
    RA_RUN(G_18_misplaced_and_stale_frames_skipped, "G-18 misplaced and stale frames skipped");
    RA_RUN(G_18_segment_header_flip, "G-18 segment header damage loses nothing, sealing goes on");
    RA_RUN(G_18_heads_checkpoint_corrupt_is_reported, "G-18 corrupt heads checkpoint reported");
    printf("# test-wal-damage: %.2f s\n", now_s() - t0);
    RA_DONE();
}
