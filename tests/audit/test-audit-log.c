/* The log and its durable sink (AUD-I-1, -6, -12, -13, -15, -16): chain, dedupe across a
 * reopen, group commit, rotation, torn tails cut at open, corruption refused with its
 * position, amnesia refusing a directory, checkpoints, and the verifier catching a
 * truncation at every byte and a bit flip in every record of a small log. */
#include "rau_test.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *base_dir(void);
static char g_dir[700];
/* The logic under test is ours, not the disk's: hundreds of fdatasyncs on tmpfs take
 * milliseconds instead of a minute (falls back to RA_TEST_TMP without /dev/shm). */
static const char *base_dir(void) {
    static char dir[512];
    if (!dir[0]) {
        const char *shm = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : NULL;
        ra_fix_mkdtemp(dir, sizeof dir, shm, "rau-log-test-");
    }
    return dir;
}

static const char *fresh_dir(const char *name) {
    snprintf(g_dir, sizeof g_dir, "%s/%s", base_dir(), name);
    return g_dir;
}

/* The test log in dir; err (512 bytes, or NULL) gets why it did not open. */
static rau_log_t *open_log(const char *dir, uint64_t rotate, uint32_t every, char *err) {
    char own[512];
    if (err == NULL) err = own;
    rau_t_keygen("rejects", base_dir());
    rau_log_config_t cfg;
    rau_t_log_config(&cfg, "rejects", dir, rau_t_key()->path);
    cfg.rotate_bytes = rotate;
    cfg.checkpoint_every = every;
    rau_log_t *l = NULL;
    int rc = rau_log_open(&cfg, &l, err, 512);
    if (rc && getenv("RAU_TEST_VERBOSE"))
        fprintf(stderr, "# open: %s: %s\n", rau_err_name(rc), err);
    return l;
}

/* Event i of the tests' logs: a reject of tenant "t-<i>" with n = i; v and a back it. */
static rau_event_t event_i(int i, char v[32], rau_attr_t a[2]) {
    snprintf(v, 32, "t-%d", i);
    a[0] = (rau_attr_t){"tenant", 6, RAU_ATTR_STR, v, strlen(v), 0};
    a[1] = (rau_attr_t){"n", 1, RAU_ATTR_INT, NULL, 0, i};
    return (rau_event_t){"reject", 6, 1700000000000LL + i, a, 2};
}

static int append_n(rau_log_t *l, int from, int n, rau_appended_t *last) {
    for (int i = from; i < from + n; i++) {
        char v[32];
        rau_attr_t a[2];
        rau_event_t ev = event_i(i, v, a);
        int rc = rau_log_append(l, &ev, last);
        if (rc) return rc;
    }
    return 0;
}

static int verify(const char *dir, uint64_t *records, rau_t_rep_t *rep) {
    memset(rep, 0, sizeof *rep);
    return rau_verify_dir(dir, rau_t_key()->vkey, rau_t_collect, rep, records);
}

RA_TEST(chain_dedupe_reopen) {
    char err[512];
    const char *dir = fresh_dir("chain");
    rau_log_t *l = open_log(dir, 0, 0, err);
    REQUIRE(l);
    rau_appended_t a1, a2, a3;
    CHECK_RC(append_n(l, 0, 10, &a1), 0);
    CHECK_EQ_U64(a1.seq, 10);
    /* AUD-I-6: the same event again: its original position, nothing appended */
    CHECK_RC(append_n(l, 4, 1, &a2), 0);
    CHECK(a2.duplicate == 1 && a2.seq == 5);
    rau_log_stats_t st;
    rau_log_stats(l, &st);
    CHECK_EQ_U64(st.head_seq, 10);
    CHECK_EQ_U64(st.duplicates, 1);
    CHECK_EQ_U64(st.durable_seq, 0);
    CHECK_RC(rau_log_sync(l), 0);
    rau_log_stats(l, &st);
    CHECK_EQ_U64(st.durable_seq, 10);
    CHECK_EQ_U64(st.syncs, 1); /* AUD-I-12: ten records, one fdatasync */
    CHECK_RC(rau_log_close(l), 0);
    /* reopen: the head and the dedupe index come back from the disk */
    l = open_log(dir, 0, 0, err);
    REQUIRE(l);
    rau_log_stats(l, &st);
    CHECK_EQ_U64(st.head_seq, 10);
    CHECK(memcmp(st.head_hash, a1.self_hash, 32) == 0);
    CHECK_RC(append_n(l, 2, 1, &a3), 0);
    CHECK(a3.duplicate == 1 && a3.seq == 3);
    CHECK_RC(append_n(l, 10, 1, &a3), 0);
    CHECK(a3.duplicate == 0 && a3.seq == 11);
    CHECK_RC(rau_log_checkpoint(l), 0);
    CHECK_RC(rau_log_close(l), 0);
    uint64_t recs = 0;
    rau_t_rep_t rep;
    CHECK_RC(verify(dir, &recs, &rep), 0);
    CHECK_EQ_U64(recs, 11);
    if (rep.n) fprintf(stderr, "# %s\n", rep.first);
}

RA_TEST(amnesia_refuses_a_dir) {
    rau_log_config_t cfg;
    rau_t_log_config(&cfg, "rejects", fresh_dir("amnesia"), NULL);
    cfg.amnesia = 1;
    rau_log_t *l = NULL;
    char err[256] = "";
    CHECK_RC(rau_log_open(&cfg, &l, err, sizeof err), RAU_EAMNESIA);
    CHECK(l == NULL && strstr(err, "amnesia") != NULL);
    struct stat st;
    CHECK(stat(cfg.dir, &st) != 0); /* refused before anything was created */
    cfg.dir = NULL;
    CHECK_RC(rau_log_open(&cfg, &l, err, sizeof err), 0);
    rau_appended_t a;
    CHECK_RC(append_n(l, 0, 3, &a), 0);
    CHECK_EQ_U64(a.seq, 3);
    CHECK_RC(append_n(l, 1, 1, &a), 0);
    CHECK(a.duplicate && a.seq == 2);
    CHECK_RC(rau_log_close(l), 0);
    cfg.amnesia = 0;
    CHECK_RC(rau_log_open(&cfg, &l, err, sizeof err), RAU_EINVAL);
}

static size_t list_segments(const char *dir, char names[][64], size_t cap) {
    DIR *d = opendir(dir);
    size_t n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (!strncmp(e->d_name, "seg-", 4) && n < cap) snprintf(names[n++], 64, "%.60s", e->d_name);
    if (d) closedir(d);
    return n;
}

RA_TEST(rotation_and_checkpoints) {
    const char *dir = fresh_dir("rotate");
    rau_log_t *l = open_log(dir, 2048, 16, NULL);
    REQUIRE(l);
    rau_appended_t a;
    for (int i = 0; i < 100; i += 10) {
        REQUIRE(append_n(l, i, 10, &a) == 0);
        REQUIRE(rau_log_sync(l) == 0);
    }
    rau_log_stats_t st;
    rau_log_stats(l, &st);
    CHECK(st.segments >= 5);
    CHECK(st.checkpoints >= 5);
    CHECK_RC(rau_log_close(l), 0);
    char names[64][64];
    size_t n = list_segments(dir, names, 64);
    CHECK(n >= 5);
    for (size_t i = 0; i < n; i++) {
        char p[800];
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        CHECK(stat(p, &sb) == 0 && sb.st_size <= 2048);
    }
    uint64_t recs;
    rau_t_rep_t rep;
    CHECK_RC(verify(dir, &recs, &rep), 0);
    CHECK_EQ_U64(recs, 100);
    if (rep.n) fprintf(stderr, "# %s\n", rep.first);
    /* reopen continues the chain in the last segment */
    l = open_log(dir, 2048, 16, NULL);
    REQUIRE(l);
    CHECK_RC(append_n(l, 100, 5, &a), 0);
    CHECK_EQ_U64(a.seq, 105);
    CHECK_RC(rau_log_close(l), 0);
    CHECK_RC(verify(dir, &recs, &rep), 0);
}

/* Packs event i as the host's emit() does: len u32 BE | canonical bytes with seq 1, no prev. */
static size_t pack_n(uint8_t *buf, int from, int n, const char *stream) {
    size_t off = 0;
    for (int i = from; i < from + n; i++) {
        char v[32];
        rau_attr_t a[2];
        rau_event_t ev = event_i(i, v, a);
        size_t len = 0;
        if (rau_record_encode("gw-1", stream, 1, NULL, &ev, buf + off + 4, RAU_RECORD_MAX, &len))
            return 0;
        buf[off] = (uint8_t)(len >> 24), buf[off + 1] = (uint8_t)(len >> 16);
        buf[off + 2] = (uint8_t)(len >> 8), buf[off + 3] = (uint8_t)len;
        off += 4 + len;
    }
    return off;
}

static int same_file(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int same = fa && fb;
    while (same) {
        int ca = fgetc(fa), cb = fgetc(fb);
        if (ca != cb) same = 0;
        if (ca == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return same;
}

/* rau_log_append_packed (the host's batch path) makes exactly the chain and the files that
 * rau_log_append makes for the same events: the same segments byte for byte (rotation
 * inside a batch included), the same dedupe answers, checkpoints and head. */
RA_TEST(packed_batches_make_the_same_log) {
    char err[512], da[700], db[700];
    snprintf(da, sizeof da, "%s", fresh_dir("one-by-one"));
    snprintf(db, sizeof db, "%s", fresh_dir("packed"));
    rau_log_t *la = open_log(da, 4096, 40, err), *lb = open_log(db, 4096, 40, err);
    REQUIRE(la && lb);
    uint8_t *buf = malloc(200 * (RAU_RECORD_MAX + 4));
    REQUIRE(buf);
    rau_appended_t a;
    for (int i = 0; i < 300; i += 100) {
        /* events i..i+99, then event 7 again (a re-emit: its first position) */
        REQUIRE(append_n(la, i, 100, &a) == 0);
        REQUIRE(append_n(la, 7, 1, &a) == 0);
        CHECK(a.duplicate == 1 && a.seq == 8);
        REQUIRE(rau_log_sync(la) == 0);
        size_t len = pack_n(buf, i, 100, "rejects");
        len += pack_n(buf + len, 7, 1, "rejects");
        rau_batch_result_t br;
        CHECK_RC(rau_log_append_packed(lb, buf, len, &br), 0);
        CHECK_EQ_U64(br.appended, 100);
        CHECK_EQ_U64(br.duplicates, 1);
        CHECK_EQ_U64(br.done, len);
        REQUIRE(rau_log_sync(lb) == 0);
    }
    rau_log_stats_t sa, sb;
    rau_log_stats(la, &sa);
    rau_log_stats(lb, &sb);
    CHECK_EQ_U64(sb.head_seq, 300);
    CHECK(memcmp(sa.head_hash, sb.head_hash, 32) == 0);
    CHECK_EQ_U64(sb.duplicates, sa.duplicates);
    CHECK_EQ_U64(sb.checkpoints, sa.checkpoints);
    CHECK_EQ_U64(sb.segments, sa.segments);
    /* a segment takes at least one batch: each batch after the first rotated inside the call */
    CHECK_EQ_U64(sb.segments, 3);
    uint64_t size_a = 0, size_b = 0;
    uint8_t root_a[32], root_b[32];
    CHECK_RC(rau_log_latest_checkpoint(la, &size_a, root_a, NULL, 0, NULL), 0);
    CHECK_RC(rau_log_latest_checkpoint(lb, &size_b, root_b, NULL, 0, NULL), 0);
    CHECK_EQ_U64(size_b, size_a);
    CHECK(memcmp(root_a, root_b, 32) == 0);

    /* a record of another stream stops the batch at it; the ones before are in the chain */
    size_t len = pack_n(buf, 300, 2, "rejects");
    size_t bad = len;
    len += pack_n(buf + len, 302, 1, "other");
    len += pack_n(buf + len, 303, 1, "rejects");
    rau_batch_result_t br;
    CHECK_RC(rau_log_append_packed(lb, buf, len, &br), RAU_ENONCANON);
    CHECK_EQ_U64(br.appended, 2);
    CHECK_EQ_U64(br.done, bad);
    /* a length past the end, and a cut length prefix */
    len = pack_n(buf, 304, 1, "rejects");
    CHECK_RC(rau_log_append_packed(lb, buf, len - 1, &br), RAU_ENONCANON);
    CHECK_EQ_U64(br.done, 0);
    CHECK_RC(rau_log_append_packed(lb, buf, 3, &br), RAU_ENONCANON);
    /* the same events one by one on the other log: still the same chain */
    REQUIRE(append_n(la, 300, 2, &a) == 0);
    CHECK_RC(rau_log_close(la), 0);
    CHECK_RC(rau_log_close(lb), 0);
    free(buf);

    char na[64][64], nb[64][64];
    size_t n = list_segments(da, na, 64);
    CHECK_EQ_U64(list_segments(db, nb, 64), n);
    for (size_t i = 0; i < n; i++) {
        char pa[800], pb[800];
        snprintf(pa, sizeof pa, "%s/%s", da, na[i]);
        snprintf(pb, sizeof pb, "%s/%s", db, na[i]);
        CHECK(same_file(pa, pb));
    }
    uint64_t recs = 0;
    rau_t_rep_t rep;
    CHECK_RC(verify(db, &recs, &rep), 0);
    CHECK_EQ_U64(recs, 302);
    if (rep.n) fprintf(stderr, "# %s\n", rep.first);
}

static int copy_file(const char *src, const char *dst, size_t keep) {
    uint8_t buf[65536];
    FILE *a = fopen(src, "rb"), *b = fopen(dst, "wb");
    if (!a || !b) return -1;
    size_t n = fread(buf, 1, sizeof buf, a);
    if (keep < n) n = keep;
    fwrite(buf, 1, n, b);
    fclose(a);
    fclose(b);
    return (int)n;
}

/* A small signed log: 8 records in one segment, checkpointed at the end. */
static size_t small_log(const char *dir, char *seg, size_t seglen) {
    char err[512];
    rau_log_t *l = open_log(dir, 0, 0, err);
    if (!l) return 0;
    rau_appended_t a;
    if (append_n(l, 0, 8, &a) || rau_log_checkpoint(l) || rau_log_close(l)) return 0;
    char names[4][64];
    if (list_segments(dir, names, 4) != 1) return 0;
    snprintf(seg, seglen, "%s/%s", dir, names[0]);
    struct stat sb;
    return stat(seg, &sb) == 0 ? (size_t)sb.st_size : 0;
}

RA_TEST(verify_catches_truncation_at_every_byte) {
    char seg[800], work[800], wseg[900];
    size_t len = small_log(fresh_dir("trunc-src"), seg, sizeof seg);
    REQUIRE(len > 0);
    snprintf(work, sizeof work, "%s/trunc-work", base_dir());
    mkdir(work, 0755);
    /* the checkpoint comes along; the segment is cut */
    char cp[900], wcp[900];
    snprintf(cp, sizeof cp, "%s/cp-%020d.note", g_dir, 8);
    snprintf(wcp, sizeof wcp, "%s/cp-%020d.note", work, 8);
    REQUIRE(copy_file(cp, wcp, 1 << 20) > 0);
    snprintf(wseg, sizeof wseg, "%s/%s", work, strrchr(seg, '/') + 1);
    uint64_t recs;
    rau_t_rep_t rep;
    REQUIRE(copy_file(seg, wseg, len) == (int)len);
    CHECK_RC(verify(work, &recs, &rep), 0);
    size_t missed = 0;
    for (size_t cut = 0; cut < len; cut++) {
        REQUIRE(copy_file(seg, wseg, cut) == (int)cut);
        if (verify(work, &recs, &rep) <= 0) {
            if (!missed) fprintf(stderr, "# truncation at %zu not reported\n", cut);
            missed++;
        }
    }
    printf("# %zu truncations of a %zu-byte segment, %zu missed\n", len, len, missed);
    CHECK(missed == 0);
    /* the writer's own recovery cuts a torn tail at open and goes on */
    REQUIRE(copy_file(seg, wseg, len - 5) == (int)len - 5);
    unlink(wcp);
    char err[512];
    rau_log_t *l = open_log(work, 0, 0, err);
    REQUIRE(l);
    rau_log_stats_t st;
    rau_log_stats(l, &st);
    CHECK_EQ_U64(st.head_seq, 7);
    CHECK(st.torn_bytes > 0);
    rau_appended_t a;
    CHECK_RC(append_n(l, 7, 1, &a), 0);
    CHECK_EQ_U64(a.seq, 8);
    /* AUD-I-39: its checkpoint was removed above; with the key, a log no checkpoint covers
     * does not verify, so the writer signs one */
    CHECK_RC(rau_log_sync(l), 0);
    CHECK(verify(work, &recs, &rep) == 1 && strstr(rep.first, "no checkpoint signed"));
    CHECK_RC(rau_log_checkpoint(l), 0);
    CHECK_RC(rau_log_close(l), 0);
    CHECK_RC(verify(work, &recs, &rep), 0);
}

RA_TEST(verify_catches_a_bit_flip_in_every_record) {
    char seg[800];
    size_t len = small_log(fresh_dir("flip"), seg, sizeof seg);
    REQUIRE(len > 0);
    uint8_t orig[8192];
    FILE *f = fopen(seg, "rb");
    REQUIRE(f && fread(orig, 1, len, f) == len);
    fclose(f);
    size_t missed = 0, tried = 0, refused_open = 0;
    /* every bit of every byte (header, frames, checksums) */
    for (size_t i = 0; i < len * 8; i++) {
        uint8_t b[8192];
        memcpy(b, orig, len);
        b[i / 8] ^= (uint8_t)(1u << (i % 8));
        f = fopen(seg, "wb");
        fwrite(b, 1, len, f);
        fclose(f);
        uint64_t recs;
        rau_t_rep_t rep;
        tried++;
        if (verify(g_dir, &recs, &rep) <= 0) {
            if (!missed) fprintf(stderr, "# flip of bit %zu not reported\n", i);
            missed++;
        }
        /* the writer refuses to open damage that is not a torn tail (AUD-I-16) */
        if (i % 97 == 0 && i / 8 < len - 40) {
            char err[512];
            rau_log_t *l = open_log(g_dir, 0, 0, err);
            if (!l)
                refused_open++;
            else {
                rau_log_stats_t st;
                rau_log_stats(l, &st);
                if (st.head_seq == 8) RA_FAILF("open accepted a flip at bit %zu", i);
                /* recovered as a torn tail: restore the file for the next flip */
                rau_log_close(l);
            }
            f = fopen(seg, "wb");
            fwrite(orig, 1, len, f);
            fclose(f);
        }
    }
    f = fopen(seg, "wb");
    fwrite(orig, 1, len, f);
    fclose(f);
    printf("# %zu bit flips, %zu missed, %zu open refusals sampled\n", tried, missed, refused_open);
    CHECK(missed == 0);
    CHECK(refused_open > 0);
}

/* AUD-I-15: verify reads a segment through a fixed 1 MiB window (memory does not grow with
 * the log): a 4 MiB segment whose frames straddle every window boundary verifies, and a
 * byte changed past the third MiB is reported at the offset of its frame. */
RA_TEST(verify_reads_a_large_segment_through_its_window) {
    const char *dir = fresh_dir("window");
    rau_log_t *l = open_log(dir, 0, 5000, NULL);
    REQUIRE(l);
    rau_appended_t last;
    for (int i = 0; i < 40; i++) {
        REQUIRE(append_n(l, i * 1000, 1000, &last) == 0);
        REQUIRE(rau_log_sync(l) == 0);
    }
    REQUIRE(rau_log_close(l) == 0);
    char seg[900];
    snprintf(seg, sizeof seg, "%s/seg-00000000000000000001.rau", dir);
    struct stat sb;
    REQUIRE(stat(seg, &sb) == 0);
    CHECK(sb.st_size > 3200000);
    uint64_t recs = 0;
    rau_t_rep_t rep;
    CHECK(verify(dir, &recs, &rep) == 0);
    CHECK(recs == 40000);
    if (rep.n) fprintf(stderr, "# %s\n", rep.first);
    const long at = 3100000;
    int fd = open(seg, O_RDWR);
    REQUIRE(fd >= 0);
    uint8_t b;
    REQUIRE(pread(fd, &b, 1, at) == 1);
    b ^= 0x20;
    REQUIRE(pwrite(fd, &b, 1, at) == 1);
    CHECK(verify(dir, &recs, &rep) > 0);
    const char *plus = strrchr(rep.first, '+');
    long pos = plus ? atol(plus + 1) : -1;
    printf("# first problem: %s\n", rep.first);
    CHECK(pos <= at && pos > at - (RAU_RECORD_MAX + 12));
    /* open reads it through its window too: the same damage is refused with its position */
    char oerr[512];
    CHECK(open_log(dir, 0, 5000, oerr) == NULL);
    plus = strrchr(oerr, '+');
    pos = plus ? atol(plus + 1) : -1;
    printf("# open: %s\n", oerr);
    CHECK(pos <= at && pos > at - (RAU_RECORD_MAX + 12));
    b ^= 0x20;
    REQUIRE(pwrite(fd, &b, 1, at) == 1);
    close(fd);
    CHECK(verify(dir, &recs, &rep) == 0);
    /* bytes the head file says an fdatasync acknowledged, cut off: damage, refused
     * (AUD-I-37) */
    REQUIRE(truncate(seg, (off_t)sb.st_size - 7) == 0);
    CHECK(open_log(dir, 0, 5000, oerr) == NULL);
    printf("# open: %s\n", oerr);
    CHECK(strstr(oerr, "acknowledged") != NULL);
    /* without it (the full scan's rule): a torn tail past the first window, cut */
    char head[900];
    snprintf(head, sizeof head, "%s/head.rau", dir);
    REQUIRE(unlink(head) == 0);
    l = open_log(dir, 0, 5000, NULL);
    REQUIRE(l);
    rau_log_stats_t st;
    rau_log_stats(l, &st);
    CHECK_EQ_U64(st.head_seq, 39999);
    CHECK(st.torn_bytes > 7 && st.torn_bytes < 200);
    CHECK_RC(rau_log_close(l), 0);
    /* (the checkpoint of 40000 records now says the log lost one: verify's only problem) */
    CHECK(verify(dir, &recs, &rep) == 1);
    CHECK(strstr(rep.first, "cp-00000000000000040000.note") != NULL);
    CHECK_EQ_U64(recs, 39999);
}

RA_TEST(verify_catches_a_tampered_but_rehashed_record) {
    char seg[800], err[512];
    size_t len = small_log(fresh_dir("tamper"), seg, sizeof seg);
    REQUIRE(len > 0);
    /* rewrite record 3 with another tenant and a valid frame checksum: the chain link of
     * record 4 and the checkpoint's root catch it */
    const char *dir = fresh_dir("tamper2");
    rau_log_config_t cfg;
    rau_t_log_config(&cfg, "rejects", dir, NULL);
    rau_log_t *l = NULL;
    REQUIRE(rau_log_open(&cfg, &l, err, sizeof err) == 0);
    rau_appended_t a;
    REQUIRE(append_n(l, 0, 2, &a) == 0);
    REQUIRE(append_n(l, 100, 1, &a) == 0); /* seq 3, a different event */
    REQUIRE(append_n(l, 3, 5, &a) == 0);
    REQUIRE(rau_log_close(l) == 0);
    char names[4][64], other[900];
    REQUIRE(list_segments(dir, names, 4) == 1);
    snprintf(other, sizeof other, "%s/%s", dir, names[0]);
    REQUIRE(copy_file(other, seg, 1 << 20) > 0);
    uint64_t recs;
    rau_t_rep_t rep;
    int n = verify(fresh_dir("tamper"), &recs, &rep);
    CHECK(n >= 1);
    printf("# tampered log: %d problems, first: %s\n", n, rep.first);
}

/* A restored old backup, grown again (Trillian's ops warning): the forked directory is
 * self-consistent and re-signed with the same key, so only a checkpoint kept elsewhere (a
 * witness's copy) shows the fork: its root is not the root of the log's first records. */
RA_TEST(a_restored_backup_fork_is_detected) {
    char err[512], witness[800], cmd[2000];
    const char *orig = fresh_dir("fork-orig");
    char orig_dir[700];
    snprintf(orig_dir, sizeof orig_dir, "%s", orig);
    rau_log_t *l = open_log(orig_dir, 0, 0, err);
    REQUIRE(l);
    rau_appended_t a;
    REQUIRE(append_n(l, 0, 5, &a) == 0 && rau_log_sync(l) == 0);
    /* the backup is taken here, at 5 records */
    snprintf(cmd, sizeof cmd, "cp -r '%s' '%s/fork-backup'", orig_dir, base_dir());
    REQUIRE(system(cmd) == 0);
    REQUIRE(append_n(l, 5, 3, &a) == 0 && rau_log_checkpoint(l) == 0);
    REQUIRE(rau_log_close(l) == 0);
    /* the witness keeps the checkpoint of 8 records */
    snprintf(witness, sizeof witness, "%s/witness-8.note", base_dir());
    snprintf(cmd, sizeof cmd, "cp '%s/cp-%020d.note' '%s'", orig_dir, 8, witness);
    REQUIRE(system(cmd) == 0);
    /* restore the backup and go on with other events */
    char fork_dir[700];
    snprintf(fork_dir, sizeof fork_dir, "%s/fork-backup", base_dir());
    l = open_log(fork_dir, 0, 0, err);
    REQUIRE(l);
    REQUIRE(append_n(l, 50, 6, &a) == 0 && rau_log_checkpoint(l) == 0);
    REQUIRE(rau_log_close(l) == 0);
    uint64_t recs;
    rau_t_rep_t rep;
    CHECK_RC(verify(fork_dir, &recs, &rep), 0); /* alone it looks fine */
    const char *extra[1] = {witness};
    memset(&rep, 0, sizeof rep);
    CHECK_RC(rau_verify_dir_checkpoints(fork_dir, rau_t_key()->vkey, extra, 1, rau_t_collect, &rep,
                                        &recs),
             1);
    CHECK(strstr(rep.first, "witness-8.note") && strstr(rep.first, "forked"));
    printf("# fork: %s\n", rep.first);
    /* the original passes with the witness's copy */
    memset(&rep, 0, sizeof rep);
    CHECK_RC(rau_verify_dir_checkpoints(orig_dir, rau_t_key()->vkey, extra, 1, rau_t_collect, &rep,
                                        &recs),
             0);
}

/* kill -9 at random moments while a child appends and syncs: every record the child
 * reported durable (rau_log_sync returned) is there after the reopen, and the log verifies.
 * Seeded; the seed is printed. 20 kills in `make test`; RAU_KILL9_ITERS sets more (`make
 * soak-audit`: 1000), RAU_KILL9_SEED another seed. */
RA_TEST(kill9_keeps_every_acknowledged_record) {
    const char *dir = fresh_dir("kill9");
    char d[700];
    snprintf(d, sizeof d, "%s", dir);
    uint64_t seed = 0x6b696c6c39ull;
    if (getenv("RAU_KILL9_SEED")) seed = strtoull(getenv("RAU_KILL9_SEED"), NULL, 0);
    int iters = getenv("RAU_KILL9_ITERS") ? atoi(getenv("RAU_KILL9_ITERS")) : 20;
    if (iters < 1) iters = 20;
    printf("# kill -9 seed %#llx, %d kills\n", (unsigned long long)seed, iters);
    uint64_t acked_max = 0;
    for (int iter = 0; iter < iters; iter++) {
        int fds[2];
        REQUIRE(pipe(fds) == 0);
        pid_t pid = fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            close(fds[0]);
            char err[512];
            rau_log_t *l = open_log(d, 65536, 500, err);
            if (!l) _exit(10);
            rau_log_stats_t st;
            rau_log_stats(l, &st);
            rau_appended_t a;
            for (int i = (int)st.head_seq;; i += 7) {
                if (append_n(l, i, 7, &a) || rau_log_sync(l)) _exit(11);
                uint64_t seq = a.seq;
                if (write(fds[1], &seq, sizeof seq) != sizeof seq) _exit(12);
                usleep(300); /* a few thousand records in all: reopens stay fast */
            }
        }
        close(fds[1]);
        /* the kill lands after the child's first acknowledgement, at a random moment */
        uint64_t first = 0;
        if (read(fds[0], &first, sizeof first) == sizeof first && first > acked_max)
            acked_max = first;
        usleep((useconds_t)(ra_fix_splitmix64(&seed) % 20000));
        kill(pid, SIGKILL);
        int st = 0;
        waitpid(pid, &st, 0);
        uint64_t seq;
        while (read(fds[0], &seq, sizeof seq) == sizeof seq)
            if (seq > acked_max) acked_max = seq;
        close(fds[0]);
        if (WIFEXITED(st)) RA_FAILF("child exited %d before the kill", WEXITSTATUS(st));
        char err[512];
        rau_log_t *l = open_log(d, 65536, 500, err);
        if (!l) {
            RA_FAILF("iteration %d: reopen failed: %s", iter, err);
            return;
        }
        rau_log_stats_t s;
        rau_log_stats(l, &s);
        if (s.head_seq < acked_max)
            RA_FAILF("iteration %d: head %llu < acknowledged %llu", iter,
                     (unsigned long long)s.head_seq, (unsigned long long)acked_max);
        rau_log_close(l);
    }
    uint64_t recs;
    rau_t_rep_t rep;
    CHECK_RC(verify(d, &recs, &rep), 0);
    if (rep.n) fprintf(stderr, "# %s\n", rep.first);
    printf("# %d kills: %llu records acknowledged, %llu in the log\n", iters,
           (unsigned long long)acked_max, (unsigned long long)recs);
    CHECK(recs >= acked_max);
}

/* AUD-I-14: a failed write fails the log. The fault: RLIMIT_FSIZE just above the segment's
 * size (the write gets EFBIG, SIGXFSZ ignored), in a child process so the limit and the
 * failed log stay there. */
RA_TEST(a_failed_write_fails_the_log) {
    const char *dir = fresh_dir("efbig");
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        char err[512];
        rau_log_t *l = open_log(dir, 0, 0, err);
        if (!l) _exit(10);
        rau_appended_t a;
        if (append_n(l, 0, 3, &a) || rau_log_sync(l)) _exit(11);
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {4096, 4096};
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(12);
        if (append_n(l, 3, 100, &a) == 0 && rau_log_sync(l) != RAU_EIO) _exit(13);
        /* the system's reason and the file, not only "input/output error" */
        char why[512];
        if (rau_log_failure(l, why, sizeof why) != EFBIG || !strstr(why, "write ") ||
            !strstr(why, "seg-00000000000000000001.rau: File too large (EFBIG)"))
            _exit(16);
        if (append_n(l, 200, 1, &a) != RAU_ECLOSED) _exit(14);
        if (rau_log_sync(l) != RAU_ECLOSED) _exit(15);
        rau_log_close(l);
        _exit(0);
    }
    int st = 0;
    REQUIRE(waitpid(pid, &st, 0) == pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        RA_FAILF("child: status %d (exit %d)", st, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    /* what reached the disk is a valid prefix: a torn tail at most */
    char err[512];
    rau_log_t *l = open_log(dir, 0, 0, err);
    REQUIRE(l);
    rau_log_stats_t s;
    rau_log_stats(l, &s);
    CHECK(s.head_seq >= 3 && s.head_seq < 103);
    printf("# after EFBIG: %llu records recovered, %llu torn bytes cut\n",
           (unsigned long long)s.head_seq, (unsigned long long)s.torn_bytes);
    CHECK_RC(rau_log_close(l), 0);
}

int main(void) {
    RA_RUN(chain_dedupe_reopen,
           "AUD-I-1 AUD-I-6 AUD-I-12 chain, dedupe across reopen, group commit");
    RA_RUN(amnesia_refuses_a_dir, "AUD-I-13 amnesia refuses a directory at open");
    RA_RUN(rotation_and_checkpoints, "AUD-I-12 rotation by bytes, checkpoints every N, reopen");
    RA_RUN(packed_batches_make_the_same_log,
           "AUD-I-12 a packed batch (the host's path) makes the same chain and files");
    RA_RUN(verify_catches_truncation_at_every_byte,
           "AUD-I-15 verify: truncation at every byte; AUD-I-12 torn tail cut at open");
    RA_RUN(verify_catches_a_bit_flip_in_every_record,
           "AUD-I-15 verify: a bit flip anywhere; AUD-I-16 open refuses damage");
    RA_RUN(verify_reads_a_large_segment_through_its_window,
           "AUD-I-15 AUD-I-12 verify and open read a 4 MiB segment through a 1 MiB window");
    RA_RUN(verify_catches_a_tampered_but_rehashed_record,
           "AUD-I-15 verify: a rewritten record with valid frames");
    RA_RUN(a_restored_backup_fork_is_detected,
           "AUD-I-15 a restored old backup (fork) is caught by a witness's checkpoint");
    RA_RUN(kill9_keeps_every_acknowledged_record,
           "AUD-I-12 kill -9 loop: every acknowledged record recovered, the log verifies");
    RA_RUN(a_failed_write_fails_the_log, "AUD-I-14 a failed write fails the log (EFBIG)");
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base_dir());
    if (system(cmd) != 0) return 1;
    RA_DONE();
}
