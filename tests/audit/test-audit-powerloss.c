/* The audit log under power loss and I/O faults, through the one simulator of the I/O seam
 * (tests/sim-fs.c, the meter's WAL tests use it too): not process death (test-audit-log's kill -9
 * loop) but a machine that stops at a random call, whose unsynced writes are lost, torn at any byte
 * or kept sector by sector out of order, whose fdatasync fails with EIO and forgets the
 * dirty pages (fsyncgate), whose disk fills (ENOSPC) and whose writes come back short.
 *
 * What must hold (AUD-I-12, AUD-I-14, AUD-I-16, AUD-I-36): every record a sync
 * acknowledged survives; nothing that was not appended appears (the head's self_hash is the
 * one the writer computed for that seq, and the hash chain covers everything before it);
 * the chain verifies after reopen (recovery's own checks and `audit verify` over a copy of
 * the files); a torn tail is cut once and reported; damage in the synced part refuses the
 * open with its position and leaves the bytes where they are. Seeds are fixed and printed;
 * RAU_POWERLOSS_SEED=n runs one seed, RAU_POWERLOSS_ROUNDS=n changes the rounds. */
#include "rau_test.h"

#include "../sim-fs.c"
#include "head.h"
#include "internal.h"

#include <sys/stat.h>
#include <unistd.h>

static const char *DIR_ = "/sim/audit";
static int g_mode = -1; /* the last power cut's mode, for the messages */

typedef struct model_s {
    uint8_t (*hash)[32]; /* by seq: the self_hash the writer computed last for it */
    uint64_t cap, acked, counter;
} model_t;

static void model_put(model_t *m, uint64_t seq, const uint8_t *h) {
    if (seq >= m->cap) {
        uint64_t cap = m->cap ? m->cap * 2 : 1024;
        while (cap <= seq)
            cap *= 2;
        m->hash = realloc(m->hash, cap * 32);
        if (!m->hash) abort();
        m->cap = cap;
    }
    memcpy(m->hash[seq], h, 32);
}

/* A machine whose names created since the last directory fsync may survive a cut. */
static simfs_t *sim_new(uint64_t seed) {
    simfs_t *fs = simfs_new(seed);
    simfs_set_lucky_names(fs, true);
    return fs;
}

static rau_log_t *open_sim(simfs_t *fs, uint64_t rotate, uint32_t batch, int *rc, char *err) {
    rau_t_keygen("rejects", rau_t_tmpdir());
    rau_log_config_t cfg;
    rau_t_log_config(&cfg, "rejects", DIR_, rau_t_key()->path);
    cfg.rotate_bytes = rotate;
    cfg.batch_bytes = batch;
    cfg.checkpoint_every = 7;
    cfg.dedupe_window = 64;
    rau_log_t *l = NULL;
    *rc = rau__log_open_io(&cfg, simfs_io(fs), &l, err, 512);
    return l;
}

static int append_one(rau_log_t *l, model_t *m, rau_appended_t *a);

/* n appends; 1 when every one returned 0 (a is the last one's). */
static int append_n(rau_log_t *l, model_t *m, int n, rau_appended_t *a) {
    for (int i = 0; i < n; i++)
        if (append_one(l, m, a) != 0) return 0;
    return 1;
}

/* The log on fs with 1 MiB segments and no batching; NULL (said why) when it refuses. */
static rau_log_t *reopen(simfs_t *fs) {
    char err[512];
    int rc;
    rau_log_t *l = open_sim(fs, 1 << 20, 0, &rc, err);
    if (!l) fprintf(stderr, "# open: %s: %s\n", rau_err_name(rc), err);
    return l;
}

static int append_one(rau_log_t *l, model_t *m, rau_appended_t *a) {
    char v[32];
    uint64_t n = ++m->counter;
    snprintf(v, sizeof v, "t-%llu", (unsigned long long)(n % 97));
    rau_attr_t at[2] = {{"tenant", 6, RAU_ATTR_STR, v, strlen(v), 0},
                        {"n", 1, RAU_ATTR_INT, NULL, 0, (int64_t)n}};
    rau_event_t ev = {"reject", 6, 1700000000000LL + (int64_t)n, at, 2};
    int rc = rau_log_append(l, &ev, a);
    if (rc == 0 && !a->duplicate) model_put(m, a->seq, a->self_hash);
    return rc;
}

/* What recovery found is what was written: the head is at or past the last acknowledged
 * record and its self_hash is the writer's for that seq (the chain links every earlier
 * record to it, and recovery checked every link it read). */
static int check_state(rau_log_t *l, const model_t *m, const char *what, uint64_t seed) {
    rau_log_stats_t st;
    rau_log_stats(l, &st);
    int ok = st.head_seq >= m->acked && st.durable_seq == st.head_seq &&
             (st.head_seq == 0 ||
              (st.head_seq < m->cap && memcmp(st.head_hash, m->hash[st.head_seq], 32) == 0));
    if (!ok)
        fprintf(stderr, "# seed %llu %s (last cut: %s): head %llu, acknowledged %llu, hash %s\n",
                (unsigned long long)seed, what,
                g_mode < 0 ? "none" : simfs_crash_mode_name((simfs_crash_mode_t)g_mode),
                (unsigned long long)st.head_seq, (unsigned long long)m->acked,
                st.head_seq < m->cap && memcmp(st.head_hash, m->hash[st.head_seq], 32) == 0
                    ? "ok"
                    : "NOT the writer's");
    return ok;
}

/* Copies the simulator's files out and runs `audit verify` over them (signatures too). */
static int cb_copy(void *ud, const char *name);
typedef struct copy_s {
    simfs_t *fs;
    const char *to;
} copy_t;
static int cb_copy(void *ud, const char *name) {
    copy_t *c = ud;
    char src[600], dst[1200];
    snprintf(src, sizeof src, "%s/%s", DIR_, name);
    snprintf(dst, sizeof dst, "%s/%s", c->to, name);
    size_t len = 0;
    const uint8_t *b = simfs_data(c->fs, src, &len);
    FILE *f = fopen(dst, "wb");
    if (!f || (len && fwrite(b, 1, len, f) != len)) abort();
    fclose(f);
    return 0;
}
static void report(void *ud, const char *where, const char *what) {
    (void)ud;
    fprintf(stderr, "#   verify: %s: %s\n", where, what);
}
/* `audit verify` of a copy of fs's log on the real file system: its problem count (each one
 * passed to rep), or a negative code. */
static int verify_copy_to(simfs_t *fs, rau_report_fn rep, void *ud, uint64_t *records) {
    static int n;
    char to[700];
    snprintf(to, sizeof to, "%s/copy-%d", rau_t_tmpdir(), n++);
    if (mkdir(to, 0700) != 0) return -100;
    copy_t c = {fs, to};
    fs->io.list(fs, DIR_, cb_copy, &c);
    return rau_verify_dir(to, rau_t_key()->vkey, rep, ud, records);
}

static int verify_copy(simfs_t *fs, uint64_t *records) {
    return verify_copy_to(fs, report, NULL, records);
}

static uint64_t env_u64(const char *k, uint64_t d) {
    const char *v = getenv(k);
    return v && *v ? strtoull(v, NULL, 10) : d;
}

/* The machine stops at a random call (in the middle of a write, a sync, a rotation, a
 * checkpoint's rename) then loses power in a random mode; the log is reopened on what the
 * disk held, checked, reopened once more (the cut is made once), and written on. */
static int powerloss_rounds(uint64_t seed, uint64_t rounds, uint64_t *torn_rounds) {
    simfs_t *fs = sim_new(seed);
    model_t m = {0};
    char err[512];
    int ok = 1;
    uint64_t rotates[] = {1024, 4096, 65536};
    uint32_t batches[] = {0, 4200, 16384};
    for (uint64_t r = 0; r < rounds && ok; r++) {
        int rc;
        uint64_t rot = rotates[simfs_rand(fs) % 3];
        uint32_t bat = batches[simfs_rand(fs) % 3];
        rau_log_t *l = open_sim(fs, rot, bat, &rc, err);
        if (!l) {
            fprintf(stderr, "# seed %llu round %llu: open: %s: %s\n", (unsigned long long)seed,
                    (unsigned long long)r, rau_err_name(rc), err);
            ok = 0;
            break;
        }
        rau_log_stats_t st;
        rau_log_stats(l, &st);
        if (st.torn_bytes) (*torn_rounds)++;
        ok = check_state(l, &m, "after the power cut", seed);
        /* everything recovered is durable now: acknowledged from here on */
        if (ok) m.acked = st.head_seq;
        rau_log_close(l);
        /* the cut was made once: a second open finds nothing to cut and the same head */
        l = open_sim(fs, rot, bat, &rc, err);
        if (!l) {
            fprintf(stderr, "# seed %llu: second open: %s\n", (unsigned long long)seed, err);
            ok = 0;
            break;
        }
        rau_log_stats_t st2;
        rau_log_stats(l, &st2);
        if (st2.torn_bytes != 0 || st2.head_seq != st.head_seq) {
            fprintf(stderr, "# seed %llu: second open cut %llu bytes, head %llu -> %llu\n",
                    (unsigned long long)seed, (unsigned long long)st2.torn_bytes,
                    (unsigned long long)st.head_seq, (unsigned long long)st2.head_seq);
            ok = 0;
        }
        if (r % 8 == 7 && ok) {
            uint64_t recs = 0;
            int problems = verify_copy(fs, &recs);
            if (problems != 0 || recs != st.head_seq) {
                fprintf(stderr, "# seed %llu round %llu: verify: %d problems, %llu records\n",
                        (unsigned long long)seed, (unsigned long long)r, problems,
                        (unsigned long long)recs);
                ok = 0;
            }
        }
        /* the workload, until the power goes off */
        simfs_crash_at(fs, 1 + simfs_rand(fs) % 120);
        for (int it = 0; it < 10000 && ok; it++) {
            int n = 1 + (int)(simfs_rand(fs) % 24);
            rau_appended_t a = {0};
            int arc = 0;
            for (int i = 0; i < n && arc == 0; i++)
                arc = append_one(l, &m, &a);
            if (arc) break;
            if (rau_log_sync(l) != 0) break;
            rau_log_stats(l, &st);
            m.acked = st.durable_seq; /* the sync returned 0: acknowledged as durable */
        }
        rau_log_close(l);
        g_mode = (int)(simfs_rand(fs) % SIMFS_CRASH_NMODES);
        simfs_crash(fs, (simfs_crash_mode_t)g_mode);
    }
    free(m.hash);
    simfs_free(fs);
    return ok;
}

RA_TEST(power_loss_at_random_calls_keeps_every_acknowledged_record) {
    uint64_t one = env_u64("RAU_POWERLOSS_SEED", 0), rounds = env_u64("RAU_POWERLOSS_ROUNDS", 60);
    uint64_t seeds[] = {1, 2, 3, 5, 8, 13, 21, 34};
    uint64_t torn = 0;
    for (size_t i = 0; i < (one ? 1 : sizeof seeds / sizeof *seeds); i++) {
        uint64_t seed = one ? one : seeds[i];
        fprintf(stderr, "# seed %llu, %llu rounds\n", (unsigned long long)seed,
                (unsigned long long)rounds);
        CHECK(powerloss_rounds(seed, rounds, &torn));
    }
    /* the test reaches what it is about: torn tails were found and cut */
    fprintf(stderr, "# %llu opens cut a torn tail\n", (unsigned long long)torn);
    CHECK(torn > 0);
}

/* The fault cases' fixture: a log on a simulated disk (seed printed) and its model. */
typedef struct {
    uint64_t seed;
    simfs_t *fs;
    model_t m;
    rau_log_t *l;
    rau_appended_t a;
} ffix_t;

/* Opens the log; `synced` records appended and synced (acknowledged). */
static bool ffix_open(ffix_t *f, uint64_t seed, int synced) {
    fprintf(stderr, "# seed %llu\n", (unsigned long long)seed);
    memset(f, 0, sizeof *f);
    f->seed = seed;
    f->fs = sim_new(seed);
    f->l = reopen(f->fs);
    if (!f->l) return false;
    if (!synced) return true;
    if (!append_n(f->l, &f->m, synced, &f->a) || rau_log_sync(f->l) != 0) return false;
    f->m.acked = f->a.seq;
    return true;
}

/* The log closed, the power cut in `mode` (none: -1), the log opened again. */
static bool ffix_reopen(ffix_t *f, int mode) {
    rau_log_close(f->l);
    if (mode >= 0) simfs_crash(f->fs, (simfs_crash_mode_t)mode);
    f->l = reopen(f->fs);
    return f->l != NULL;
}

/* n more records appended and synced (acknowledged). */
static bool ffix_ack(ffix_t *f, int n) {
    if (!append_n(f->l, &f->m, n, &f->a) || rau_log_sync(f->l) != 0) return false;
    f->m.acked = f->a.seq;
    return true;
}

static void ffix_end(ffix_t *f) {
    rau_log_close(f->l);
    free(f->m.hash);
    simfs_free(f->fs);
}

/* fsyncgate: a failed fdatasync is not retried, the log refuses every later append (no
 * record is chained to one that may not be on disk), durable_seq stays where the last
 * good sync left it; a reopen rewrites the bytes it finds past what is known durable, so
 * records appended after the reopen cannot end up behind a hole. */
RA_TEST(fsync_eio_fails_the_log_and_a_reopen_rewrites_the_tail) {
    ffix_t f;
    REQUIRE(ffix_open(&f, 42, 50));
    CHECK_EQ_U64(f.m.acked, 50);
    REQUIRE(append_n(f.l, &f.m, 20, &f.a));
    simfs_fail(f.fs, SIMFS_FSYNC, 1, -EIO, 1);
    CHECK_RC(rau_log_sync(f.l), RAU_EIO);
    CHECK_EQ_U64(simfs_injected(f.fs), 1);
    rau_log_stats_t st;
    rau_log_stats(f.l, &st);
    CHECK_EQ_U64(st.durable_seq, 50);
    CHECK_RC(append_one(f.l, &f.m, &f.a), RAU_ECLOSED);
    CHECK_RC(rau_log_sync(f.l), RAU_ECLOSED);
    /* the process goes on (no power cut): the cache still holds records 51..70 */
    REQUIRE(ffix_reopen(&f, -1));
    rau_log_stats(f.l, &st);
    CHECK_EQ_U64(st.head_seq, 70);
    REQUIRE(ffix_ack(&f, 10));
    CHECK_EQ_U64(f.m.acked, 80);
    REQUIRE(ffix_reopen(&f, SIMFS_CRASH_DROP));
    CHECK(check_state(f.l, &f.m, "fsyncgate", f.seed));
    rau_log_stats(f.l, &st);
    CHECK_EQ_U64(st.head_seq, 80);
    ffix_end(&f);
}

/* A full disk: the write that does not fit fails the sync (RAU_EIO) and the log; the part
 * that fit is a torn tail, cut and reported at the next open; nothing acknowledged is lost;
 * with room again the chain goes on. */
RA_TEST(enospc_fails_the_sync_and_the_torn_part_is_cut) {
    ffix_t f;
    REQUIRE(ffix_open(&f, 7, 30));
    simfs_set_capacity(f.fs, simfs_usage(f.fs) + 1000); /* about 10 records more */
    REQUIRE(append_n(f.l, &f.m, 40, &f.a));
    CHECK_RC(rau_log_sync(f.l), RAU_EIO);
    CHECK_RC(append_one(f.l, &f.m, &f.a), RAU_ECLOSED);
    rau_log_close(f.l);
    simfs_set_capacity(f.fs, 0);
    f.l = reopen(f.fs);
    REQUIRE(f.l);
    rau_log_stats_t st;
    rau_log_stats(f.l, &st);
    CHECK(st.torn_bytes > 0);
    CHECK(st.head_seq >= 30 && st.head_seq < 70);
    CHECK(check_state(f.l, &f.m, "enospc", f.seed));
    f.m.acked = st.head_seq;
    REQUIRE(ffix_ack(&f, 5));
    REQUIRE(ffix_reopen(&f, SIMFS_CRASH_TORN));
    CHECK(check_state(f.l, &f.m, "enospc after the cut", f.seed));
    ffix_end(&f);
}

/* Short writes are continued (the batch is whole on disk); a short write followed by a
 * failing one fails the log, and its half frame is a torn tail cut at the next open. */
RA_TEST(short_writes_are_continued_or_cut) {
    ffix_t f;
    REQUIRE(ffix_open(&f, 9, 0));
    for (int round = 0; round < 5; round++) {
        REQUIRE(append_n(f.l, &f.m, 10, &f.a));
        simfs_short_write(f.fs, 1, 1 + simfs_rand(f.fs) % 300);
        CHECK_RC(rau_log_sync(f.l), 0);
        f.m.acked = f.a.seq;
    }
    CHECK_EQ_U64(simfs_injected(f.fs), 5);
    /* a short write, then a failing one; with a power cut, then without one (the half frame
     * is in the cache): cut at the open either way */
    for (int cut = 1; cut >= 0; cut--) {
        REQUIRE(append_n(f.l, &f.m, 10, &f.a));
        simfs_short_write(f.fs, 1, 100);
        simfs_fail(f.fs, SIMFS_WRITE, 2, -EIO, 1);
        CHECK_RC(rau_log_sync(f.l), RAU_EIO);
        REQUIRE(ffix_reopen(&f, cut ? SIMFS_CRASH_REORDER : -1));
        rau_log_stats_t st;
        rau_log_stats(f.l, &st);
        if (!cut) CHECK_EQ_U64(st.torn_bytes, 100);
        CHECK(check_state(f.l, &f.m, cut ? "short write" : "short write, no cut", f.seed));
        if (cut) {
            rau_log_close(f.l);
            simfs_clear_faults(f.fs);
            f.l = reopen(f.fs);
            REQUIRE(f.l);
        }
    }
    ffix_end(&f);
}

static int cb_first_seg(void *ud, const char *name) {
    char *out = ud;
    if (strncmp(name, "seg-", 4) == 0 && (!out[0] || strcmp(name, out) < 0))
        snprintf(out, 64, "%s", name);
    return 0;
}

static int cb_last_seg(void *ud, const char *name) {
    char *out = ud;
    if (strncmp(name, "seg-", 4) == 0 && strcmp(name, out) > 0) snprintf(out, 64, "%s", name);
    return 0;
}

typedef struct where_s {
    char first[300];
    int n;
} where_t;
static void report_where(void *ud, const char *where, const char *what) {
    where_t *w = ud;
    if (!w->n++) snprintf(w->first, sizeof w->first, "%s: %s", where, what);
}

/* A log of 100 records over several segments, every 10 synced. */
static simfs_t *build_log(uint64_t seed, model_t *m) {
    simfs_t *fs = sim_new(seed);
    char err[512];
    int rc;
    rau_log_t *l = open_sim(fs, 4096, 0, &rc, err);
    if (!l) abort();
    rau_appended_t a;
    for (int i = 0; i < 100; i++) {
        if (append_one(l, m, &a)) abort();
        if (i % 10 == 9 && rau_log_sync(l)) abort();
    }
    m->acked = 100;
    rau_log_close(l);
    return fs;
}

/* A built log (build_log, seed printed), its model and its head file's path. */
typedef struct {
    model_t m;
    simfs_t *fs;
    char hp[700];
} built_t;

static void built_open(built_t *b, uint64_t seed) {
    fprintf(stderr, "# seed %llu\n", (unsigned long long)seed);
    memset(b, 0, sizeof *b);
    b->fs = build_log(seed, &b->m);
    snprintf(b->hp, sizeof b->hp, "%s/head.rau", DIR_);
}

static void built_free(built_t *b) {
    simfs_free(b->fs);
    free(b->m.hash);
}

/* The head file's two 4 KiB slots (false unless it is whole); *newest: the offset of the
 * slot of the higher generation. */
static bool head_slots(const built_t *b, uint8_t cur[8192], size_t *newest) {
    size_t hlen;
    const uint8_t *d = simfs_data(b->fs, b->hp, &hlen);
    if (!d || hlen != 8192) return false;
    memcpy(cur, d, 8192);
    uint64_t g0 = 0, g1 = 0;
    for (int i = 0; i < 8; i++)
        g0 = g0 << 8 | cur[8 + i], g1 = g1 << 8 | cur[4096 + 8 + i];
    *newest = g1 > g0 ? 4096 : 0;
    return true;
}

/* Flips a bit at off of file path and checks that the open refuses with its position and
 * leaves the bytes as they were (quarantined in place). */
static void flip_and_expect_refusal(simfs_t *fs, const char *path, size_t off, const char *name) {
    size_t len;
    REQUIRE(simfs_data(fs, path, &len) && off < len);
    REQUIRE(simfs_flip(fs, path, off, (int)(off % 8)) == 0);
    uint8_t *before = malloc(len);
    memcpy(before, simfs_data(fs, path, &len), len);
    char err[512];
    int rc;
    rau_log_t *l = open_sim(fs, 4096, 0, &rc, err);
    CHECK(l == NULL);
    CHECK_RC(rc, RAU_ECORRUPT);
    fprintf(stderr, "# refused: %s\n", err);
    CHECK(strstr(err, name) != NULL && strstr(err, "+") != NULL);
    size_t len2;
    const uint8_t *after = simfs_data(fs, path, &len2);
    CHECK(after && len2 == len && memcmp(after, before, len) == 0);
    free(before);
    if (l) rau_log_close(l);
}

/* Damage in the synced part is not a torn tail: the open refuses it with the file and the
 * offset (AUD-I-16) and cuts nothing: the damaged bytes stay where they are, as evidence
 * for `audit verify` and the operator (quarantined in place). The last synced record
 * included: the head file says it was acknowledged, so it is not cut as a torn tail. Older
 * records, which an open with a head file does not read (AUD-I-37), are `audit verify`'s:
 * it reports them, and an open without the head file refuses them. */
RA_TEST(corruption_in_the_synced_part_is_refused_and_left_in_place) {
    uint64_t seed = 11;
    char last[64] = {0}, first[64] = {0}, path[700];
    /* the last record of the last segment */
    built_t b;
    built_open(&b, seed);
    b.fs->io.list(b.fs, DIR_, cb_last_seg, last);
    snprintf(path, sizeof path, "%s/%s", DIR_, last);
    size_t len;
    REQUIRE(simfs_data(b.fs, path, &len) && len > 100);
    flip_and_expect_refusal(b.fs, path, len - 20, last);
    built_free(&b);
    /* a record in the middle of the last segment */
    built_open(&b, seed);
    REQUIRE(simfs_data(b.fs, path, &len) && len > 300);
    flip_and_expect_refusal(b.fs, path, 24 + (size_t)(simfs_rand(b.fs) % (len - 300)), last);
    built_free(&b);
    /* the first segment: not read by an open with the head file; verify and the full scan
     * report it */
    built_open(&b, seed);
    b.fs->io.list(b.fs, DIR_, cb_first_seg, first);
    snprintf(path, sizeof path, "%s/%s", DIR_, first);
    REQUIRE(simfs_data(b.fs, path, &len) && len > 600);
    REQUIRE(simfs_flip(b.fs, path, 300, 3) == 0);
    where_t w = {{0}, 0};
    uint64_t recs;
    CHECK(verify_copy_to(b.fs, report_where, &w, &recs) > 0);
    fprintf(stderr, "# verify: %s\n", w.first);
    CHECK(strstr(w.first, first) != NULL);
    simfs_remove(b.fs, b.hp);
    flip_and_expect_refusal(b.fs, path, 301, first); /* a second flip: still refused */
    built_free(&b);
}

/* ---- the head file (AUD-I-37) ---- */

static int append_again(rau_log_t *l, uint64_t n, rau_appended_t *a) {
    char v[32];
    snprintf(v, sizeof v, "t-%llu", (unsigned long long)(n % 97));
    rau_attr_t at[2] = {{"tenant", 6, RAU_ATTR_STR, v, strlen(v), 0},
                        {"n", 1, RAU_ATTR_INT, NULL, 0, (int64_t)n}};
    rau_event_t ev = {"reject", 6, 1700000000000LL + (int64_t)n, at, 2};
    return rau_log_append(l, &ev, a);
}

typedef struct state_s {
    rau_log_stats_t st;
    rau__open_info_t info;
    uint64_t cp_size;
    uint8_t cp_root[32], dup_hash[32];
    uint64_t dup_seq;
    int dup;
} state_t;

/* Opens, takes the state (head, latest checkpoint, a re-emit of an event inside the dedupe
 * window answered from the index), makes a checkpoint of the head (its root: the Merkle
 * frontier), closes. */
static int take_state(simfs_t *fs, state_t *s) {
    char err[512];
    int rc;
    memset(s, 0, sizeof *s);
    rau_log_t *l = open_sim(fs, 4096, 0, &rc, err);
    if (!l) {
        fprintf(stderr, "# open: %s\n", err);
        return 0;
    }
    rau__log_open_info(l, &s->info);
    rau_log_stats(l, &s->st);
    rau_appended_t a;
    if (append_again(l, s->st.head_seq - 10, &a)) return 0;
    s->dup = a.duplicate;
    s->dup_seq = a.seq;
    memcpy(s->dup_hash, a.self_hash, 32);
    if (rau_log_checkpoint(l) ||
        rau_log_latest_checkpoint(l, &s->cp_size, s->cp_root, NULL, 0, NULL))
        return 0;
    rau_log_close(l);
    return 1;
}

static int same_state(const state_t *a, const state_t *b) {
    return a->st.head_seq == b->st.head_seq && !memcmp(a->st.head_hash, b->st.head_hash, 32) &&
           a->cp_size == b->cp_size && !memcmp(a->cp_root, b->cp_root, 32) && a->dup && b->dup &&
           a->dup_seq == b->dup_seq && !memcmp(a->dup_hash, b->dup_hash, 32);
}

RA_TEST(open_with_and_without_the_head_file_gives_the_same_state) {
    built_t b;
    built_open(&b, 17);
    state_t with, without;
    REQUIRE(take_state(b.fs, &with));
    CHECK(with.info.head_used == 1);
    /* only what the head does not cover is decoded; the dedupe window (64) is hashed */
    CHECK_EQ_U64(with.info.decoded, 0);
    CHECK_EQ_U64(with.info.hashed, 64);
    CHECK_EQ_U64(with.st.head_seq, 100);
    CHECK(with.dup && with.dup_seq == 90);
    simfs_remove(b.fs, b.hp);
    REQUIRE(take_state(b.fs, &without));
    CHECK(without.info.head_used == 0);
    fprintf(stderr, "# without: %s\n", without.info.why);
    CHECK_EQ_U64(without.info.decoded, 100);
    CHECK(same_state(&with, &without));
    uint64_t recs;
    CHECK(verify_copy(b.fs, &recs) == 0 && recs == 100);
    built_free(&b);
}

/* A stale head file (an older one, still true of the files) is used and the rest decoded;
 * a damaged newest slot leaves the other; a head whose last hash is not the record at its
 * offset, one of another chain, or one with no whole slot is not trusted: the full scan,
 * with the same state. */
RA_TEST(a_stale_or_corrupt_head_file_falls_back) {
    built_t b;
    built_open(&b, 19);
    simfs_t *fs = b.fs;
    uint8_t old[8192], cur[8192];
    size_t newest;
    REQUIRE(head_slots(&b, old, &newest));
    /* 30 more records, then the old head back */
    char err[512];
    int rc;
    rau_log_t *l = open_sim(fs, 4096, 0, &rc, err);
    REQUIRE(l);
    rau_appended_t a;
    for (int i = 0; i < 30; i++) {
        REQUIRE(append_one(l, &b.m, &a) == 0);
        if (i % 10 == 9) REQUIRE(rau_log_sync(l) == 0);
    }
    rau_log_close(l);
    state_t ref, st;
    REQUIRE(take_state(fs, &ref));
    CHECK(ref.info.head_used && ref.st.head_seq == 130);
    REQUIRE(head_slots(&b, cur, &newest));

    simfs_set_data(fs, b.hp, old, sizeof old);
    REQUIRE(take_state(fs, &st));
    CHECK(st.info.head_used == 1);
    CHECK(st.info.decoded >= 30); /* the records past the stale head, with full checks */
    CHECK(same_state(&ref, &st));

    /* the newest slot damaged: the other one (one sync older) is used */
    uint8_t bad[8192];
    memcpy(bad, cur, sizeof bad);
    bad[newest + 30] ^= 1;
    simfs_set_data(fs, b.hp, bad, sizeof bad);
    REQUIRE(take_state(fs, &st));
    if (!st.info.head_used) fprintf(stderr, "# newest slot damaged: %s\n", st.info.why);
    CHECK(st.info.head_used == 1);
    CHECK(same_state(&ref, &st));

    /* both slots damaged, a wrong last hash, another chain's head: full scan */
    const char *what[] = {"both slots", "last hash", "truncated"};
    for (int k = 0; k < 3; k++) {
        memcpy(bad, cur, sizeof bad);
        size_t blen = sizeof bad;
        if (k == 0) {
            bad[30] ^= 1;
            bad[4096 + 30] ^= 1;
        } else if (k == 1) {
            /* a whole slot (checksummed again) that names another record: rebuilt by the
             * library's encoder from a decoded slot */
            rau__head_t h;
            REQUIRE(rau__head_decode(bad + newest, &h) == 0);
            h.last_hash[0] ^= 1;
            h.gen += 10;
            rau__head_encode(&h, bad + newest);
        } else {
            blen = 100;
        }
        simfs_set_data(fs, b.hp, bad, blen);
        REQUIRE(take_state(fs, &st));
        fprintf(stderr, "# %s: head used %d (%s)\n", what[k], st.info.head_used, st.info.why);
        CHECK(st.info.head_used == 0);
        CHECK_EQ_U64(st.info.decoded, 130);
        CHECK(same_state(&ref, &st));
    }
    uint64_t recs;
    CHECK(verify_copy(fs, &recs) == 0 && recs == 130);
    built_free(&b);
}

/* `audit verify` checks the head file: an open takes the Merkle frontier from it without
 * reading the records, so a forged one (checksummed again) would make later checkpoints
 * sign a wrong root; verify names it, as it does a head of another chain. */
RA_TEST(verify_checks_the_head_file) {
    built_t b;
    built_open(&b, 23);
    uint64_t recs;
    CHECK(verify_copy(b.fs, &recs) == 0 && recs == 100);
    uint8_t cur[8192], bad[8192];
    size_t newest;
    REQUIRE(head_slots(&b, cur, &newest));
    for (int k = 0; k < 2; k++) {
        rau__head_t h;
        memcpy(bad, cur, sizeof bad);
        REQUIRE(rau__head_decode(bad + newest, &h) == 0);
        if (k == 0)
            h.mr.nodes[6][0] ^= 1; /* 100 = 64 + 32 + 4: the root of the first 64 */
        else
            memcpy(h.stream, "other", 6);
        h.gen += 10;
        rau__head_encode(&h, bad + newest);
        simfs_set_data(b.fs, b.hp, bad, sizeof bad);
        where_t w = {{0}, 0};
        CHECK(verify_copy_to(b.fs, report_where, &w, &recs) == 1);
        fprintf(stderr, "# verify: %s\n", w.first);
        CHECK(strstr(w.first, "head.rau") != NULL);
        CHECK(strstr(w.first, k == 0 ? "Merkle frontier" : "another chain") != NULL);
    }
    built_free(&b);
}

int main(void) {
    RA_RUN(power_loss_at_random_calls_keeps_every_acknowledged_record,
           "AUD-I-36 power loss at random calls (drop, torn, sectors reordered)");
    RA_RUN(fsync_eio_fails_the_log_and_a_reopen_rewrites_the_tail,
           "AUD-I-14 fdatasync EIO fails the log; reopen rewrites the unsynced tail");
    RA_RUN(enospc_fails_the_sync_and_the_torn_part_is_cut, "AUD-I-14 ENOSPC");
    RA_RUN(short_writes_are_continued_or_cut, "AUD-I-12 short writes");
    RA_RUN(corruption_in_the_synced_part_is_refused_and_left_in_place,
           "AUD-I-16 damage in the synced part is refused and kept");
    RA_RUN(open_with_and_without_the_head_file_gives_the_same_state,
           "AUD-I-37 open with and without the head file: the same state");
    RA_RUN(a_stale_or_corrupt_head_file_falls_back,
           "AUD-I-37 a stale head is used, a corrupt one falls back to the full scan");
    RA_RUN(verify_checks_the_head_file, "AUD-I-15 AUD-I-37 verify checks the head file");
    RA_DONE();
}
