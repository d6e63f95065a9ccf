/* The write-ahead log (C-5, I-9, I-10): G-6 (amnesia matrix), group commit (P-9), G-18
 * (torn writes, bit flips, a huge length, a zeroed hole, misplaced frames), power cuts at
 * random points with a negative control that must catch a missing directory fsync, I/O
 * errors (EIO on fsync, ENOSPC, short writes, EIO on rename and on the directory fsync),
 * caps (PersistenceFull, degraded, recovery after ACK + compaction) and a crash in the
 * middle of compaction.
 *
 * Most tests run the WAL on sim-fs (tests/sim-fs.c, compiled in below because every test
 * executable is built from its one .c file), an in-memory file system that knows what an
 * fsync made durable and can cut the power. Every seed is fixed and printed. */
#include "internal.h"
#include "io.h"
#include "ra_test.h"
#include "wal.h"

#include "sim-fs.c"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>

#define WIN_MS 60000LL
#define WAL_DIR "/wal"

/* ---- helpers --------------------------------------------------------------------------- */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int quick(void) {
    /* RA_TEST_QUICK=1 cuts the iteration counts (the sanitizer build runs them in full: a few
     * seconds) */
    const char *q = getenv("RA_TEST_QUICK");
    return q && *q && strcmp(q, "0") != 0;
}

/* The meter's log, captured (recovery reports what it skipped here). */
static char g_log[1 << 16];
static size_t g_log_len;
static int g_log_echo;

static void log_capture(void *ud, int level, const char *msg) {
    (void)ud;
    size_t n = strlen(msg);
    if (g_log_len + n + 2 >= sizeof g_log) g_log_len = 0; /* keep the newest */
    memcpy(g_log + g_log_len, msg, n);
    g_log[g_log_len + n] = '\n';
    g_log_len += n + 1;
    g_log[g_log_len] = '\0';
    if (g_log_echo) fprintf(stderr, "log[%d]: %s\n", level, msg);
}

static void log_reset(void) {
    g_log_len = 0;
    g_log[0] = '\0';
}

static void wal_config(ra_config_t *cfg, const char *dir) {
    ra_t_config(cfg);
    cfg->amnesia = 0;
    cfg->wal_dir = dir;
    cfg->capacity_rows = 512;
    cfg->pending_slices_cap = 2048;
    cfg->log = log_capture;
}

static ra_meter_t *open_io(const ra_config_t *cfg, simfs_t *fs, int *rc_out) {
    ra_meter_t *m = NULL;
    char err[512];
    int rc = ra__meter_open_io(cfg, simfs_io(fs), &m, err, sizeof err);
    if (rc_out) *rc_out = rc;
    if (rc != 0 && !rc_out) fprintf(stderr, "ra__meter_open_io: %s: %s\n", ra_err_name(rc), err);
    return rc == 0 ? m : NULL;
}

/* Every pending slice, in pending order (new references). */
static size_t pending_all(ra_meter_t *m, ra_slice_t **out, size_t cap) {
    size_t n = 0;
    if (ra_meter_pending_list(m, 0, out, cap, &n) != 0) return 0;
    return n;
}

static void unref_all(ra_slice_t **s, size_t n) {
    for (size_t i = 0; i < n; i++)
        ra_slice_unref(s[i]);
}

static void ack_all(ra_meter_t *m) {
    static ra_slice_t *p[8192];
    size_t n = pending_all(m, p, 8192);
    for (size_t i = 0; i < n; i++) {
        if (ra_meter_ack(m, p[i]) != 0) RA_FAILF("ack of a pending slice failed");
        ra_slice_unref(p[i]);
    }
}

static uint64_t seq_of(const ra_slice_t *s) {
    ra_slice_id_t id;
    ra_slice_get_id(s, &id);
    return id.seq;
}

static bool same_stream(const ra_slice_t *a, const ra_slice_t *b) {
    ra_tenant_t x, y;
    ra_slice_get_tenant(a, &x);
    ra_slice_get_tenant(b, &y);
    return memcmp(x.b, y.b, 16) == 0 && strcmp(ra_slice_dimension(a), ra_slice_dimension(b)) == 0;
}

static bool same_bytes(const ra_slice_t *a, const ra_slice_t *b) {
    size_t la, lb;
    const uint8_t *pa = ra_slice_bytes(a, &la), *pb = ra_slice_bytes(b, &lb);
    return la == lb && memcmp(pa, pb, la) == 0 && memcmp(ra_slice_b3(a), ra_slice_b3(b), 32) == 0;
}

/* Chains in pending order: per stream seq + 1 and prev_b3 = the previous b3; no slice
 * twice. Returns the number of breaks. */
static int chain_breaks(ra_slice_t *const *s, size_t n) {
    int breaks = 0;
    for (size_t i = 0; i < n; i++) {
        for (size_t j = i + 1; j < n; j++) {
            if (!same_stream(s[i], s[j])) continue;
            if (seq_of(s[j]) == seq_of(s[i])) breaks++; /* twice */
        }
        for (size_t j = i + 1; j < n; j++) { /* the next slice of the same stream */
            if (!same_stream(s[i], s[j])) continue;
            if (seq_of(s[j]) != seq_of(s[i]) + 1 ||
                memcmp(ra_slice_prev_b3(s[j]), ra_slice_b3(s[i]), 32) != 0)
                breaks++;
            break;
        }
    }
    return breaks;
}

/* Per-key totals: T tenants x S subjects x 3 dimensions. */
enum { TT = 4, SS = 8, DD = 3, KEYS = TT * SS * DD };
typedef struct {
    uint64_t v[KEYS];
} totals_t;

static ra_tenant_t g_tenants[TT];
static ra_subject_t g_subjects[SS];

static void keys_init(void) {
    for (unsigned i = 0; i < TT; i++)
        g_tenants[i] = ra_t_tenant(100 + i);
    for (unsigned i = 0; i < SS; i++)
        g_subjects[i] = ra_t_subject(200 + i);
}

/* Records n random events into window w and adds them to tot. */
static int record_window(ra_meter_t *m, int64_t w, int n, uint64_t *seed, totals_t *tot) {
    for (int i = 0; i < n; i++) {
        unsigned t = (unsigned)(ra_t_rand(seed) % TT), s = (unsigned)(ra_t_rand(seed) % SS);
        int d = (int)(ra_t_rand(seed) % DD);
        uint64_t inc = ra_t_rand(seed) % 1000 + 1;
        int64_t at = RA_T_EPOCH_MS + w * WIN_MS + (int64_t)(ra_t_rand(seed) % (WIN_MS - 1));
        int rc = ra_meter_record_at(m, at, &g_tenants[t], &g_subjects[s], d, inc);
        if (rc != 0) return rc;
        if (tot) tot->v[(t * SS + s) * DD + (unsigned)d] += inc;
    }
    return 0;
}

/* Adds a slice's rows to tot; false for a row of an unknown key. */
static bool add_slice(totals_t *tot, const ra_slice_t *sl) {
    ra_tenant_t t;
    ra_slice_get_tenant(sl, &t);
    unsigned ti = TT, di = DD;
    for (unsigned i = 0; i < TT; i++)
        if (memcmp(t.b, g_tenants[i].b, 16) == 0) ti = i;
    static const char *const dn[DD] = {"bytes", "requests", "cpu_units"};
    for (unsigned i = 0; i < DD; i++)
        if (strcmp(ra_slice_dimension(sl), dn[i]) == 0) di = i;
    if (ti == TT || di == DD) return false;
    for (size_t r = 0; r < ra_slice_row_count(sl); r++) {
        ra_subject_t s;
        uint64_t inc;
        ra_slice_row(sl, r, &s, &inc);
        unsigned si = SS;
        for (unsigned i = 0; i < SS; i++)
            if (memcmp(s.b, g_subjects[i].b, 16) == 0) si = i;
        if (si == SS) return false;
        tot->v[(ti * SS + si) * DD + di] += inc;
    }
    return true;
}

static int totals_diff(const totals_t *a, const totals_t *b) {
    int d = 0;
    for (int i = 0; i < KEYS; i++)
        d += a->v[i] != b->v[i];
    return d;
}

static uint64_t totals_sum(const totals_t *a) {
    uint64_t s = 0;
    for (int i = 0; i < KEYS; i++)
        s += a->v[i];
    return s;
}

/* Sums every pending slice into tot; returns how many there were. */
static size_t sum_pending(ra_meter_t *m, totals_t *tot) {
    static ra_slice_t *p[8192];
    size_t n = pending_all(m, p, 8192);
    for (size_t i = 0; i < n; i++)
        if (!add_slice(tot, p[i])) RA_FAILF("a pending slice holds an unknown key");
    unref_all(p, n);
    return n;
}

static double metric(const ra_meter_t *m, const char *series) {
    return ra_t_metric(m, series);
}

static size_t seg_files(simfs_t *fs) {
    return simfs_count_files(fs, WAL_DIR, ".seg");
}

static size_t tmp_files(simfs_t *fs) {
    return simfs_count_files(fs, WAL_DIR, ".tmp");
}

/* No pair of the plane is left frozen, and no seal is in progress. */
static int frozen_pairs(const ra_meter_t *m) {
    size_t nslots = (size_t)m->hdr->shards * m->hdr->slots_per_shard;
    int n = 0;
    for (size_t i = 0; i < nslots; i++) {
        ra__u128 p = ra__pair_load(&m->slots[i].pair);
        if (ra__pair_stamp(p) & RA_STAMP_FROZEN) n++;
    }
    return n;
}

/* ---- G-6: the amnesia matrix ----------------------------------------------------------- */

static int dir_entries(const char *path) {
    DIR *d = opendir(path);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

RA_TEST(G_6_amnesia_on_never_creates_a_file) {
    keys_init();
    uint64_t seed = 0x6a0001;
    printf("# G-6 amnesia on: seed %#llx\n", (unsigned long long)seed);
    ra_config_t cfg;
    ra_t_config(&cfg);
    cfg.log = log_capture;
    REQUIRE(cfg.amnesia == 1); /* the default */
    /* Through sim-fs: the meter never touches the I/O layer at all. */
    simfs_t *fs = simfs_new(seed);
    ra_meter_t *m = open_io(&cfg, fs, NULL);
    REQUIRE(m);
    totals_t tot = {{0}}, got = {{0}};
    CHECK_RC(record_window(m, 0, 200, &seed, &tot), 0);
    size_t n = 0;
    CHECK_RC(ra_meter_rollover(m, RA_T_EPOCH_MS + WIN_MS, NULL, 0, &n), 0);
    CHECK(n > 0);
    CHECK_EQ_U64(sum_pending(m, &got), n);
    CHECK_EQ_U64(totals_diff(&tot, &got), 0);
    ra_slice_t *sl = NULL;
    REQUIRE(ra_meter_pending_get(m, 0, &sl) == 0);
    CHECK_EQ_U64(ra_slice_amnesia(sl), 1); /* the slice meta says so */
    ra_slice_unref(sl);
    CHECK(metric(m, "accounting_amnesia") == 1);
    CHECK(metric(m, "accounting_wal_entries") == -1); /* no WAL series at all */
    CHECK_RC(ra_meter_compact(m), 0);
    CHECK_RC(record_window(m, 1, 50, &seed, NULL), 0);
    ra_meter_close(m);
    CHECK_EQ_U64(simfs_calls(fs), 0);
    CHECK_EQ_U64(simfs_count(fs, SIMFS_CREATE), 0);
    /* Restart: unflushed (un-ACKed) slices are lost by design. */
    m = open_io(&cfg, fs, NULL);
    REQUIRE(m);
    CHECK_EQ_U64(ra_meter_pending_count(m), 0);
    ra_meter_close(m);
    CHECK_EQ_U64(simfs_calls(fs), 0);
    simfs_free(fs);

    /* The real file system: run from an empty directory, which stays empty. */
    char dir[700], cwd[4096];
    snprintf(dir, sizeof dir, "%s/g6-amnesia", ra_t_tmpdir());
    REQUIRE(mkdir(dir, 0700) == 0);
    REQUIRE(getcwd(cwd, sizeof cwd) != NULL);
    REQUIRE(chdir(dir) == 0);
    m = ra_t_open(&cfg);
    if (m) {
        CHECK_RC(record_window(m, 0, 200, &seed, NULL), 0);
        CHECK_RC(ra_meter_rollover(m, RA_T_EPOCH_MS + WIN_MS, NULL, 0, &n), 0);
        CHECK_RC(ra_meter_compact(m), 0);
        ra_meter_close(m);
    }
    CHECK(chdir(cwd) == 0);
    CHECK_EQ_I64(dir_entries(dir), 0);
    /* amnesia with a wal_dir is refused, and the directory is not created. */
    char wdir[800];
    snprintf(wdir, sizeof wdir, "%s/never", dir);
    cfg.wal_dir = wdir;
    ra_meter_t *bad = NULL;
    char err[512];
    CHECK_RC(ra_meter_open(&cfg, &bad, err, sizeof err), RA_EINVAL);
    CHECK(strstr(err, "amnesia") != NULL);
    CHECK_EQ_I64(dir_entries(dir), 0);
}

/* amnesia = false: a restart (close, reopen on the same directory) restores every pending
 * slice byte for byte and every chain head; after ACK + compaction nothing is pending and
 * chains still continue. Run on sim-fs and on the real file system. */
static void restart_restores(simfs_t *fs, const char *dir, uint64_t seed) {
    keys_init();
    ra_config_t cfg;
    wal_config(&cfg, dir);
    ra_meter_t *m = open_io(&cfg, fs, NULL);
    REQUIRE(m);
    CHECK(metric(m, "accounting_amnesia") == 0);
    static ra_slice_t *sealed[512];
    size_t ns = 0;
    for (int w = 0; w < 3; w++) {
        CHECK_RC(record_window(m, w, 300, &seed, NULL), 0);
        size_t n = 0;
        CHECK_RC(ra_meter_rollover(m, RA_T_EPOCH_MS + (w + 1) * WIN_MS, sealed + ns, 512 - ns, &n),
                 0);
        ns += n;
    }
    REQUIRE(ns > 0);
    CHECK_EQ_U64(ra_slice_amnesia(sealed[0]), 0);
    /* A second sealer on the same directory is refused while the first holds it. */
    int rc2 = 0;
    ra_meter_t *other = open_io(&cfg, fs, &rc2);
    CHECK(other == NULL);
    CHECK_RC(rc2, RA_EBUSY);
    ra_meter_close(m);

    m = open_io(&cfg, fs, NULL);
    REQUIRE(m);
    static ra_slice_t *p[512];
    size_t np = pending_all(m, p, 512);
    CHECK_EQ_U64(np, ns);
    for (size_t i = 0; i < np && i < ns; i++)
        if (!same_bytes(p[i], sealed[i])) RA_FAILF("pending[%zu] differs after restart", i);
    CHECK_EQ_I64(chain_breaks(p, np), 0);
    CHECK(metric(m, "accounting_wal_replayed_slices_total") == (double)ns);
    CHECK(metric(m, "accounting_wal_corrupt_total") == 0);
    unref_all(p, np);

    /* Heads survive: the next slice of every stream continues its chain. */
    CHECK_RC(record_window(m, 5, 400, &seed, NULL), 0);
    size_t n = 0;
    static ra_slice_t *next[256];
    CHECK_RC(ra_meter_rollover(m, RA_T_EPOCH_MS + 6 * WIN_MS, next, 256, &n), 0);
    REQUIRE(n > 0);
    for (size_t i = 0; i < n; i++) {
        const ra_slice_t *last = NULL;
        for (size_t k = 0; k < ns; k++)
            if (same_stream(sealed[k], next[i])) last = sealed[k];
        if (!last) {
            CHECK_EQ_U64(seq_of(next[i]), 1);
            continue;
        }
        CHECK_EQ_U64(seq_of(next[i]), seq_of(last) + 1);
        CHECK_MEM(ra_slice_prev_b3(next[i]), ra_slice_b3(last), 32);
    }

    /* ACK everything, compact: the segments are gone, a reopen has nothing pending, and
     * chains continue from the heads checkpoint. */
    ack_all(m);
    CHECK_RC(ra_meter_compact(m), 0);
    CHECK(metric(m, "accounting_wal_segments") == 0);
    CHECK(metric(m, "accounting_wal_entries") == 0);
    CHECK(metric(m, "accounting_wal_size_bytes") == 0);
    /* The caps are rendered (the alert rules' "near its caps" is a ratio to them). */
    CHECK(metric(m, "accounting_wal_max_size_bytes") == (double)cfg.wal_max_bytes);
    CHECK(metric(m, "accounting_wal_max_entries") ==
          (double)(cfg.wal_max_entries ? cfg.wal_max_entries : 200000u));
    ra_meter_close(m);
    m = open_io(&cfg, fs, NULL);
    REQUIRE(m);
    CHECK_EQ_U64(ra_meter_pending_count(m), 0);
    CHECK(metric(m, "accounting_wal_segments") == 0);
    CHECK_RC(record_window(m, 7, 400, &seed, NULL), 0);
    static ra_slice_t *after[256];
    size_t na = 0;
    CHECK_RC(ra_meter_rollover(m, RA_T_EPOCH_MS + 8 * WIN_MS, after, 256, &na), 0);
    REQUIRE(na > 0);
    for (size_t i = 0; i < na; i++) {
        const ra_slice_t *last = NULL;
        for (size_t k = 0; k < n; k++)
            if (same_stream(next[k], after[i])) last = next[k];
        for (size_t k = 0; k < ns && !last; k++)
            if (same_stream(sealed[k], after[i])) last = sealed[k];
        if (!last) {
            CHECK_EQ_U64(seq_of(after[i]), 1);
            continue;
        }
        /* the newest known slice of that stream */
        for (size_t k = 0; k < n; k++)
            if (same_stream(next[k], after[i]) && seq_of(next[k]) > seq_of(last)) last = next[k];
        CHECK_EQ_U64(seq_of(after[i]), seq_of(last) + 1);
        CHECK_MEM(ra_slice_prev_b3(after[i]), ra_slice_b3(last), 32);
    }
    unref_all(after, na);
    unref_all(next, n);
    unref_all(sealed, ns);
    /* and everything ACKed and compacted leaves no segment behind */
    ack_all(m);
    CHECK_RC(ra_meter_compact(m), 0);
    ra_meter_close(m);
}

static int print_name(void *ud, const char *name) {
    (void)ud;
    fprintf(stderr, "  %s\n", name);
    return 0;
}

RA_TEST(G_6_amnesia_off_restart_restores_pending_simfs) {
    uint64_t seed = 0x6a0002;
    printf("# G-6 amnesia off (sim-fs): seed %#llx\n", (unsigned long long)seed);
    simfs_t *fs = simfs_new(seed);
    restart_restores(fs, WAL_DIR, seed);
    CHECK_EQ_U64(seg_files(fs), 0);
    CHECK_EQ_U64(tmp_files(fs), 0);
    CHECK_EQ_U64(simfs_count_files(fs, WAL_DIR, "heads"), 1);
    if (getenv("RA_TEST_VERBOSE")) {
        simfs_names(fs, WAL_DIR, print_name, NULL);
        fputs(g_log, stderr);
    }
    simfs_free(fs);
}

static int count_suffix(const char *dir, const char *suffix) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    size_t sl = strlen(suffix);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        n += l >= sl && strcmp(e->d_name + l - sl, suffix) == 0;
    }
    closedir(d);
    return n;
}

RA_TEST(G_6_amnesia_off_restart_restores_pending_real_fs) {
    uint64_t seed = 0x6a0003;
    printf("# G-6 amnesia off (real files): seed %#llx\n", (unsigned long long)seed);
    char dir[700];
    snprintf(dir, sizeof dir, "%s/g6-wal", ra_t_tmpdir());
    simfs_t *fs = simfs_new_posix();
    restart_restores(fs, dir, seed);
    struct stat st;
    REQUIRE(stat(dir, &st) == 0);
    CHECK_EQ_U64(st.st_mode & 0777, 0700);
    CHECK_EQ_I64(count_suffix(dir, ".seg"), 0);
    CHECK_EQ_I64(count_suffix(dir, ".tmp"), 0);
    CHECK_EQ_I64(count_suffix(dir, "heads"), 1);
    simfs_free(fs);
}

/* ---- bounded memory: a huge or hostile segment is never read whole --------------------- */

static long rss_kb(void) { /* resident set of this process now, from /proc/self/statm */
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, res = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &res) != 2) res = 0;
        fclose(f);
    }
    return res * (sysconf(_SC_PAGESIZE) / 1024);
}

/* Recovery of a 1 GiB segment (sparse: a hole of zeros) whose header is garbage, behind a
 * good segment: the child that opens the meter must stay within a few MiB of the memory it
 * started with (it used to read each segment whole: 1 GiB RSS, or exit under a memory
 * limit), replay the good segment, and set the garbage aside. */
RA_TEST(wal_recovery_bounded_memory_on_a_huge_segment) {
    char dir[700];
    snprintf(dir, sizeof dir, "%s/huge-seg-wal", ra_t_tmpdir());
    ra_config_t cfg;
    wal_config(&cfg, dir);
    ra_t_now_ms = RA_T_EPOCH_MS;
    ra_meter_t *m = ra_t_open(&cfg);
    REQUIRE(m);
    ra_tenant_t t = ra_t_tenant(7);
    ra_subject_t su = ra_t_subject(7);
    CHECK_RC(ra_meter_record_at(m, RA_T_EPOCH_MS + 5, &t, &su, RA_DIM_BYTES, 42), 0);
    size_t n = 0;
    CHECK_RC(ra_meter_rollover(m, RA_T_EPOCH_MS + WIN_MS, NULL, 0, &n), 0);
    CHECK_EQ_U64(n, 1);
    ra_meter_close(m);
    char huge[800];
    snprintf(huge, sizeof huge, "%s/%016llx.seg", dir, 0x100000ull); /* the newest id */
    int fd = open(huge, O_CREAT | O_WRONLY | O_TRUNC, 0600);
    REQUIRE(fd >= 0);
    CHECK_EQ_I64(write(fd, "garbage header, not RONWSEG1......", 34), 34);
    CHECK_EQ_I64(ftruncate(fd, (off_t)1 << 30), 0);
    close(fd);
    long before = rss_kb();
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ra_meter_t *c = NULL;
        int rc = ra_meter_open(&cfg, &c, NULL, 0);
        size_t pending = rc == 0 ? ra_meter_pending_count(c) : 0;
        if (c) ra_meter_close(c);
        _exit(rc == 0 && pending == 1 ? 0 : 1);
    }
    int st = 0;
    struct rusage ru;
    REQUIRE(wait4(pid, &st, 0, &ru) == pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    long grown = ru.ru_maxrss - before;
    printf("# a 1 GiB segment with a garbage header: recovery grew RSS by %ld KiB\n", grown);
    CHECK(grown < 32 * 1024);
    char aside[820];
    snprintf(aside, sizeof aside, "%s.empty.broken", huge);
    struct stat sb;
    CHECK(stat(aside, &sb) == 0); /* set aside, not deleted: the bytes stay for forensics */
    unlink(aside);
}

/* ---- P-9: group commit ----------------------------------------------------------------- */

RA_TEST(P_9_group_commit_constant_fsyncs) {
    const size_t sizes[] = {1, 100, 1000};
    for (size_t k = 0; k < 3; k++) {
        size_t N = sizes[k];
        simfs_t *fs = simfs_new(9);
        ra_config_t cfg;
        wal_config(&cfg, WAL_DIR);
        cfg.capacity_rows = 4096;
        ra_meter_t *m = open_io(&cfg, fs, NULL);
        REQUIRE(m);
        /* N streams: N tenants, one dimension. */
        for (size_t i = 0; i < N; i++) {
            ra_tenant_t t = ra_t_tenant((unsigned)(1000 + i));
            ra_subject_t s = ra_t_subject((unsigned)i);
            CHECK_RC(ra_meter_record_at(m, RA_T_EPOCH_MS + 5, &t, &s, RA_DIM_BYTES, i + 1), 0);
        }
        simfs_reset_counts(fs);
        double fs0 = metric(m, "accounting_wal_fsyncs_total");
        size_t n = 0;
        CHECK_RC(ra_meter_rollover(m, RA_T_EPOCH_MS + WIN_MS, NULL, 0, &n), 0);
        CHECK_EQ_U64(n, N);
        uint64_t fsyncs = simfs_count(fs, SIMFS_FSYNC) + simfs_count(fs, SIMFS_FSYNC_DIR);
        printf("# P-9: %zu slices in one rollover: %llu fsync + %llu fsync_dir, %llu create, "
               "%llu rename\n",
               N, (unsigned long long)simfs_count(fs, SIMFS_FSYNC),
               (unsigned long long)simfs_count(fs, SIMFS_FSYNC_DIR),
               (unsigned long long)simfs_count(fs, SIMFS_CREATE),
               (unsigned long long)simfs_count(fs, SIMFS_RENAME));
        CHECK_EQ_U64(simfs_count(fs, SIMFS_FSYNC), 1);
        CHECK_EQ_U64(simfs_count(fs, SIMFS_FSYNC_DIR), 1);
        CHECK_EQ_U64(fsyncs, 2);
        CHECK_EQ_U64(simfs_count(fs, SIMFS_CREATE), 1);
        CHECK_EQ_U64(simfs_count(fs, SIMFS_RENAME), 1);
        CHECK(metric(m, "accounting_wal_fsyncs_total") - fs0 == 2);
        CHECK_EQ_U64(seg_files(fs), 1);
        CHECK(metric(m, "accounting_wal_entries") == (double)N);
        /* every head survives compaction (a checkpoint of N streams) and a restart */
        ack_all(m);
        CHECK_RC(ra_meter_compact(m), 0);
        ra_meter_close(m);
        m = open_io(&cfg, fs, NULL);
        REQUIRE(m);
        for (size_t i = 0; i < N; i++) {
            ra_tenant_t t = ra_t_tenant((unsigned)(1000 + i));
            ra_subject_t s = ra_t_subject((unsigned)i);
            CHECK_RC(ra_meter_record_at(m, RA_T_EPOCH_MS + WIN_MS + 5, &t, &s, RA_DIM_BYTES, 1), 0);
        }
        static ra_slice_t *out[1000];
        CHECK_RC(ra_meter_rollover(m, RA_T_EPOCH_MS + 2 * WIN_MS, out, 1000, &n), 0);
        CHECK_EQ_U64(n, N);
        size_t wrong = 0;
        for (size_t i = 0; i < n; i++)
            wrong += seq_of(out[i]) != 2;
        CHECK_EQ_U64(wrong, 0);
        unref_all(out, n);
        ra_meter_close(m);
        simfs_free(fs);
    }
}

/* ---- G-18: torn writes, bit flips, a huge length, a zeroed hole, misplaced frames ---------- */

enum { FRAMES_MAX = 128, SEGS_MAX = 8 };
typedef struct {
    char path[128];
    size_t len, n;
    size_t off[FRAMES_MAX], end[FRAMES_MAX];
    uint8_t b3[FRAMES_MAX][32];
} seg_info_t;

typedef struct {
    simfs_t *fs;
    seg_info_t seg[SEGS_MAX];
    size_t nseg;
} wal_fix_t;

static int collect_seg(void *ud, const char *name) {
    wal_fix_t *f = ud;
    size_t l = strlen(name);
    if (l == 20 && strcmp(name + 16, ".seg") == 0 && f->nseg < SEGS_MAX)
        snprintf(f->seg[f->nseg++].path, sizeof f->seg[0].path, "%s/%s", WAL_DIR, name);
    return 0;
}

/* Reads the segments of fs (oldest first) and the position and b3 of every frame. */
static void fix_scan(wal_fix_t *f) {
    f->nseg = 0;
    simfs_names(f->fs, WAL_DIR, collect_seg, f);
    for (size_t i = 0; i < f->nseg; i++) {
        seg_info_t *s = &f->seg[i];
        const uint8_t *buf = simfs_data(f->fs, s->path, &s->len);
        s->n = 0;
        for (size_t off = RA_WAL_SEG_HDR; off < s->len && s->n < FRAMES_MAX;) {
            uint64_t seq;
            const uint8_t *pl;
            size_t plen, size = ra__wal_frame_parse(buf + off, s->len - off, &seq, &pl, &plen);
            if (!size) break;
            s->off[s->n] = off;
            s->end[s->n] = off + size;
            memcpy(s->b3[s->n], buf + off + size - 32, 32);
            s->n++;
            off += size;
        }
    }
}

/* Records into window w for `tenants` tenants x `dims` dimensions, `subjects` subjects. */
static void record_grid(ra_meter_t *m, int64_t w, unsigned tenants, unsigned dims,
                        unsigned subjects, unsigned base, uint64_t *seed) {
    for (unsigned t = 0; t < tenants; t++)
        for (unsigned d = 0; d < dims; d++)
            for (unsigned s = 0; s < subjects; s++) {
                ra_tenant_t tt = ra_t_tenant(base + t);
                ra_subject_t ss = ra_t_subject(s);
                if (ra_meter_record_at(m, RA_T_EPOCH_MS + w * WIN_MS + 7, &tt, &ss, (int)d,
                                       ra_t_rand(seed) % 5000 + 1) != 0)
                    RA_FAILF("record failed");
            }
}

/* A WAL of `segs` segments with tenants x dims frames each. */
static void fix_build(wal_fix_t *f, uint64_t seed, int segs, unsigned tenants, unsigned dims,
                      unsigned subjects) {
    memset(f, 0, sizeof *f);
    f->fs = simfs_new(seed);
    ra_config_t cfg;
    wal_config(&cfg, WAL_DIR);
    ra_meter_t *m = open_io(&cfg, f->fs, NULL);
    if (!m) abort();
    for (int w = 0; w < segs; w++) {
        record_grid(m, w, tenants, dims, subjects, 300, &seed);
        size_t n = 0;
        if (ra_meter_rollover(m, RA_T_EPOCH_MS + (w + 1) * WIN_MS, NULL, 0, &n) != 0 ||
            n != tenants * dims)
            abort();
    }
    ra_meter_close(m);
    fix_scan(f);
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

static void set_bytes(simfs_t *fs, const char *path, const uint8_t *buf, size_t len) {
    if (simfs_set_data(fs, path, buf, len) != 0) abort();
}

static uint8_t *copy_of(simfs_t *fs, const char *path, size_t *len, size_t extra) {
    const uint8_t *d = simfs_data(fs, path, len);
    if (!d) abort();
    uint8_t *b = malloc(*len + extra + 1);
    if (!b) abort();
    memcpy(b, d, *len);
    return b;
}

static int g18_failures;
#define G18_CHECK(cond, ...)                                                                       \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            if (g18_failures++ < 12)                                                               \
                RA_FAILF(__VA_ARGS__);                                                             \
            else                                                                                   \
                ra_t_failed_checks++;                                                              \
        }                                                                                          \
    } while (0)

RA_TEST(G_18_truncate_newest_segment_at_every_offset) {
    uint64_t seed = 0x18000001;
    printf("# G-18 truncation of the newest segment: seed %#llx\n", (unsigned long long)seed);
    wal_fix_t fix;
    fix_build(&fix, seed, 3, 2, 2, 6);
    REQUIRE(fix.nseg == 3);
    const seg_info_t *s = &fix.seg[2];
    REQUIRE(s->n == 4);
    size_t step = quick() ? 3 : 1, runs = 0, boundary_silent = 0;
    g18_failures = 0;
    for (size_t k = 0; k < s->len; k += step) {
        simfs_t *fs = simfs_clone(fix.fs, seed + k);
        size_t len;
        uint8_t *b = copy_of(fs, s->path, &len, 0);
        set_bytes(fs, s->path, b, k);
        bool lost[SEGS_MAX][FRAMES_MAX] = {{false}};
        size_t good_end = k < RA_WAL_SEG_HDR ? 0 : RA_WAL_SEG_HDR, nlost = 0;
        for (size_t i = 0; i < s->n; i++) {
            lost[2][i] = s->end[i] > k;
            nlost += lost[2][i];
            if (s->end[i] <= k) good_end = s->end[i];
        }
        size_t want_torn = k - good_end;
        outcome_t o = reopen_expect(fs, &fix, lost);
        G18_CHECK(o.exact, "cut at %zu: pending is not every frame before the cut", k);
        G18_CHECK(o.breaks == 0, "cut at %zu: a slice twice", k);
        G18_CHECK(o.corrupt == 0, "cut at %zu: corrupt %g, want 0 (a torn tail)", k, o.corrupt);
        G18_CHECK(o.torn == (double)want_torn, "cut at %zu: torn bytes %g, want %zu", k, o.torn,
                  want_torn);
        if (want_torn > 0) {
            char broken[160];
            snprintf(broken, sizeof broken, "%s.broken", s->path);
            size_t bl = 0;
            const uint8_t *bb = simfs_data(fs, broken, &bl);
            G18_CHECK(bb && bl == want_torn && memcmp(bb, b + good_end, bl) == 0,
                      "cut at %zu: the torn tail is not kept in %s", k, broken);
        }
        /* Frames lost at a frame boundary leave no torn bytes: the loss must still be seen
         * (the segment header says how many frames it holds). */
        if (nlost && want_torn == 0 && o.corrupt == 0 && o.torn == 0 &&
            !strstr(g_log, "wal recovery:")) {
            boundary_silent++;
        }
        /* Recovery repaired the segment: a second open finds nothing more to repair. */
        outcome_t o2 = reopen_expect(fs, &fix, lost);
        G18_CHECK(o2.exact && o2.corrupt == 0 && o2.torn == 0,
                  "cut at %zu: the second recovery is not clean (corrupt %g torn %g)", k,
                  o2.corrupt, o2.torn);
        free(b);
        simfs_free(fs);
        runs++;
    }
    printf("# G-18: %zu truncations of a %zu-byte segment (4 frames); %zu cuts at a frame "
           "boundary lost whole frames without any count or log\n",
           runs, s->len, boundary_silent);
    CHECK_EQ_U64(boundary_silent, 0);
    simfs_free(fix.fs);
}

RA_TEST(G_18_truncate_older_segment_is_corruption) {
    uint64_t seed = 0x18000002;
    printf("# G-18 truncation of an older segment: seed %#llx\n", (unsigned long long)seed);
    wal_fix_t fix;
    fix_build(&fix, seed, 3, 2, 2, 6);
    REQUIRE(fix.nseg == 3);
    const seg_info_t *s = &fix.seg[1];
    size_t step = quick() ? 3 : 1, runs = 0, silent = 0;
    g18_failures = 0;
    for (size_t k = 0; k < s->len; k += step) {
        simfs_t *fs = simfs_clone(fix.fs, seed + k);
        size_t len;
        uint8_t *b = copy_of(fs, s->path, &len, 0);
        set_bytes(fs, s->path, b, k);
        bool lost[SEGS_MAX][FRAMES_MAX] = {{false}};
        size_t nlost = 0;
        bool mid_frame = k < RA_WAL_SEG_HDR;
        for (size_t i = 0; i < s->n; i++) {
            lost[1][i] = s->end[i] > k;
            nlost += lost[1][i];
            if (s->off[i] < k && k < s->end[i]) mid_frame = true;
        }
        outcome_t o = reopen_expect(fs, &fix, lost);
        G18_CHECK(o.exact, "older cut at %zu: pending is not every surviving frame", k);
        G18_CHECK(o.torn == 0, "older cut at %zu: counted as torn (%g)", k, o.torn);
        if (mid_frame)
            G18_CHECK(o.corrupt >= 1, "older cut at %zu: not counted as corrupt", k);
        else if (nlost && o.corrupt == 0)
            silent++;
        free(b);
        simfs_free(fs);
        runs++;
    }
    printf("# G-18: %zu truncations of an older %zu-byte segment; %zu cuts at a frame boundary "
           "lost whole frames silently\n",
           runs, s->len, silent);
    CHECK_EQ_U64(silent, 0);
    simfs_free(fix.fs);
}

RA_TEST(G_18_bit_flip_in_every_frame) {
    uint64_t seed = 0x18000003;
    printf("# G-18 bit flips: seed %#llx\n", (unsigned long long)seed);
    wal_fix_t fix;
    fix_build(&fix, seed, 3, 2, 2, 6);
    REQUIRE(fix.nseg == 3);
    size_t runs = 0, unnamed = 0, step = quick() ? 5 : 1;
    g18_failures = 0;
    for (size_t si = 0; si < fix.nseg; si++) {
        const seg_info_t *s = &fix.seg[si];
        for (size_t fi = 0; fi < s->n; fi++) {
            for (size_t off = s->off[fi]; off < s->end[fi]; off += step) {
                simfs_t *fs = simfs_clone(fix.fs, seed + off);
                size_t len;
                uint8_t *b = copy_of(fs, s->path, &len, 0);
                size_t rel = off - s->off[fi];
                b[off] ^= (uint8_t)(1u << (rel % 8));
                /* the slice id of the damaged frame, as the log should name it */
                ra_slice_t *orig = NULL;
                ra_slice_decode(b + s->off[fi] + RA_WAL_FRAME_HDR,
                                s->end[fi] - s->off[fi] - RA_WAL_FRAME_HDR - RA_WAL_FRAME_TRAILER,
                                &orig);
                set_bytes(fs, s->path, b, len);
                bool lost[SEGS_MAX][FRAMES_MAX] = {{false}};
                lost[si][fi] = true;
                bool tail = si + 1 == fix.nseg && fi + 1 == s->n;
                outcome_t o = reopen_expect(fs, &fix, lost);
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
                free(b);
                simfs_free(fs);
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
    printf("# G-18 length 0xFFFFFFFF: seed %#llx\n", (unsigned long long)seed);
    wal_fix_t fix;
    fix_build(&fix, seed, 3, 2, 2, 6);
    REQUIRE(fix.nseg == 3);
    g18_failures = 0;
    const uint32_t lens[] = {0xFFFFFFFFu, RA_FRAME_MAX + 1, 0};
    for (int target = 0; target < 2; target++) {
        size_t si = target == 0 ? 1 : 2, fi = target == 0 ? 1 : fix.seg[2].n - 1;
        const seg_info_t *s = &fix.seg[si];
        for (int li = 0; li < 4; li++) {
            for (int resum = 0; resum < 2; resum++) {
                simfs_t *fs = simfs_clone(fix.fs, seed);
                size_t len;
                uint8_t *b = copy_of(fs, s->path, &len, 0);
                uint8_t *fr = b + s->off[fi];
                /* li 3: the bytes left after the header, plus one (past the end) */
                uint32_t v = li < 3 ? lens[li]
                                    : (uint32_t)(len - s->off[fi] - RA_WAL_FRAME_HDR -
                                                 RA_WAL_FRAME_TRAILER + 1);
                ra__put_u32(fr + 4, v);
                if (resum) fix_hdr_sum(fr);
                set_bytes(fs, s->path, b, len);
                bool lost[SEGS_MAX][FRAMES_MAX] = {{false}};
                lost[si][fi] = true;
                outcome_t o = reopen_expect(fs, &fix, lost);
                G18_CHECK(o.exact, "length %#x (header sum %s) in seg %zu frame %zu: not skipped",
                          v, resum ? "fixed" : "stale", si, fi);
                G18_CHECK(o.corrupt + (o.torn > 0) == 1, "length %#x: corrupt %g torn %g", v,
                          o.corrupt, o.torn);
                free(b);
                simfs_free(fs);
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
        memset(&fix, 0, sizeof fix);
        fix.fs = simfs_new(seed);
        ra_config_t cfg;
        wal_config(&cfg, WAL_DIR);
        ra_meter_t *m = open_io(&cfg, fix.fs, NULL);
        REQUIRE(m);
        record_grid(m, 0, 40, 1, 4, 500, &seed);
        size_t n;
        CHECK_RC(ra_meter_rollover(m, RA_T_EPOCH_MS + WIN_MS, NULL, 0, &n), 0);
        if (!newest) {
            record_grid(m, 1, 2, 1, 4, 500, &seed);
            CHECK_RC(ra_meter_rollover(m, RA_T_EPOCH_MS + 2 * WIN_MS, NULL, 0, &n), 0);
        }
        ra_meter_close(m);
        fix_scan(&fix);
        const seg_info_t *s = &fix.seg[0];
        REQUIRE(s->n == 40 && s->len > 4096 + 2000);
        size_t hole = 1500;
        simfs_t *fs = simfs_clone(fix.fs, seed);
        size_t len;
        uint8_t *b = copy_of(fs, s->path, &len, 0);
        memset(b + hole, 0, 4096);
        set_bytes(fs, s->path, b, len);
        bool lost[SEGS_MAX][FRAMES_MAX] = {{false}};
        size_t nlost = 0, after = 0;
        for (size_t i = 0; i < s->n; i++) {
            lost[0][i] = s->end[i] > hole && s->off[i] < hole + 4096;
            nlost += lost[0][i];
            after += s->off[i] >= hole + 4096;
        }
        outcome_t o = reopen_expect(fs, &fix, lost);
        printf("# G-18 hole at %zu..%zu of a %zu-byte %s segment: %zu frames lost, %zu after "
               "the hole, %zu recovered, corrupt %g\n",
               hole, hole + 4096, s->len, newest ? "newest" : "older", nlost, after, o.pending,
               o.corrupt);
        CHECK(after > 0);
        CHECK(o.exact);
        CHECK(o.corrupt >= 1);
        CHECK(o.torn == 0);
        CHECK(strstr(g_log, "corrupt frame") != NULL);
        free(b);
        simfs_free(fs);
        simfs_free(fix.fs);
    }
}

RA_TEST(G_18_misplaced_and_stale_frames_skipped) {
    uint64_t seed = 0x18000006;
    printf("# G-18 misplaced frames: seed %#llx\n", (unsigned long long)seed);
    wal_fix_t fix;
    fix_build(&fix, seed, 3, 2, 2, 6);
    REQUIRE(fix.nseg == 3);
    g18_failures = 0;
    /* (a) a copy of frame 0 of the middle segment inserted after its frame 2 */
    {
        const seg_info_t *s = &fix.seg[1];
        simfs_t *fs = simfs_clone(fix.fs, seed);
        size_t len, fl = s->end[0] - s->off[0];
        uint8_t *b = copy_of(fs, s->path, &len, fl);
        memmove(b + s->end[2] + fl, b + s->end[2], len - s->end[2]);
        memcpy(b + s->end[2], b + s->off[0], fl);
        set_bytes(fs, s->path, b, len + fl);
        outcome_t o = reopen_expect(fs, &fix, NULL);
        CHECK(o.exact);
        CHECK_EQ_I64(o.breaks, 0);
        CHECK(o.corrupt == 1);
        CHECK(strstr(g_log, "misplaced frame") != NULL);
        free(b);
        simfs_free(fs);
    }
    /* (b) a frame of the oldest segment appended to the newest: stale, not a torn tail */
    {
        const seg_info_t *s = &fix.seg[2], *old = &fix.seg[0];
        simfs_t *fs = simfs_clone(fix.fs, seed);
        size_t len, ol, fl = old->end[1] - old->off[1];
        uint8_t *ob = copy_of(fs, old->path, &ol, 0);
        uint8_t *b = copy_of(fs, s->path, &len, fl);
        memcpy(b + len, ob + old->off[1], fl);
        set_bytes(fs, s->path, b, len + fl);
        outcome_t o = reopen_expect(fs, &fix, NULL);
        CHECK(o.exact);
        CHECK_EQ_I64(o.breaks, 0);
        CHECK(o.corrupt == 1);
        CHECK(o.torn == 0);
        free(b);
        free(ob);
        simfs_free(fs);
    }
    /* (c) a whole old segment replayed under a newer name (a restored backup) */
    {
        simfs_t *fs = simfs_clone(fix.fs, seed);
        size_t ol;
        uint8_t *ob = copy_of(fs, fix.seg[0].path, &ol, 0);
        char path[128];
        snprintf(path, sizeof path, "%s/%016llx.seg", WAL_DIR, 0x100ull);
        set_bytes(fs, path, ob, ol);
        outcome_t o = reopen_expect(fs, &fix, NULL);
        CHECK(o.exact);
        CHECK_EQ_I64(o.breaks, 0);
        CHECK(o.corrupt >= 1);
        free(ob);
        simfs_free(fs);
    }
    simfs_free(fix.fs);
}

/* A damaged segment header loses no frame; and it must not make the WAL refuse to seal. */
RA_TEST(G_18_segment_header_flip) {
    uint64_t seed = 0x18000007;
    printf("# G-18 segment header flips: seed %#llx\n", (unsigned long long)seed);
    wal_fix_t fix;
    fix_build(&fix, seed, 3, 2, 2, 6);
    REQUIRE(fix.nseg == 3);
    g18_failures = 0;
    size_t refused = 0;
    /* byte == RA_WAL_SEG_HDR: the control, nothing flipped */
    for (size_t byte = 0; byte <= RA_WAL_SEG_HDR; byte++) {
        bool control = byte == RA_WAL_SEG_HDR;
        simfs_t *fs = simfs_clone(fix.fs, seed);
        size_t len;
        uint8_t *b = copy_of(fs, fix.seg[0].path, &len, 0);
        if (!control) b[byte] ^= 0x10;
        set_bytes(fs, fix.seg[0].path, b, len);
        outcome_t o = reopen_expect(fs, &fix, NULL);
        G18_CHECK(o.exact, "header byte %zu flipped: frames lost", byte);
        G18_CHECK(o.corrupt == (control ? 0 : 1), "header byte %zu flipped: corrupt %g", byte,
                  o.corrupt);
        /* The meter still seals: a damaged header is not "the oldest slice is too old". */
        ra_config_t cfg;
        wal_config(&cfg, WAL_DIR);
        ra_t_now_ms = RA_T_EPOCH_MS + 10 * WIN_MS;
        ra_meter_t *m = open_io(&cfg, fs, NULL);
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
        free(b);
        simfs_free(fs);
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

/* ---- power cuts at random points ---------------------------------------------------------- */

typedef struct {
    uint8_t tenant[16];
    char dim[RA_DIM_NAME_MAX + 1];
    uint64_t seq;
    uint8_t b3[32];
    bool reported, acked;
} known_t;

typedef struct {
    known_t k[1024];
    size_t n;
    uint64_t mismatch; /* the same slice id seen with two digests */
} model_t;

static known_t *model_find(model_t *md, const ra_slice_t *s) {
    ra_tenant_t t;
    ra_slice_get_tenant(s, &t);
    uint64_t seq = seq_of(s);
    for (size_t i = 0; i < md->n; i++)
        if (md->k[i].seq == seq && memcmp(md->k[i].tenant, t.b, 16) == 0 &&
            strcmp(md->k[i].dim, ra_slice_dimension(s)) == 0)
            return &md->k[i];
    return NULL;
}

static known_t *model_add(model_t *md, const ra_slice_t *s, bool reported) {
    known_t *k = model_find(md, s);
    if (k) {
        if (memcmp(k->b3, ra_slice_b3(s), 32) != 0) md->mismatch++;
        k->reported = k->reported || reported;
        return k;
    }
    if (md->n == sizeof md->k / sizeof md->k[0]) abort();
    k = &md->k[md->n++];
    memset(k, 0, sizeof *k);
    ra_tenant_t t;
    ra_slice_get_tenant(s, &t);
    memcpy(k->tenant, t.b, 16);
    snprintf(k->dim, sizeof k->dim, "%s", ra_slice_dimension(s));
    k->seq = seq_of(s);
    memcpy(k->b3, ra_slice_b3(s), 32);
    k->reported = reported;
    return k;
}

static void model_pending(model_t *md, ra_meter_t *m) {
    static ra_slice_t *p[2048];
    size_t np = pending_all(m, p, 2048);
    for (size_t i = 0; i < np; i++)
        model_add(md, p[i], false);
    unref_all(p, np);
}

typedef struct {
    uint64_t lost, phantom, mismatch, dup, breaks, recover_fail, head_wrong, reported, crashes;
} pc_result_t;

static uint64_t g_pc_refused; /* rollovers refused by an injected error (not the cut) */

/* One seeded run: rounds of records, rollover, random ACKs, compaction and clean restarts.
 * crash_at (0: none) makes call number crash_at and every later one fail. Returns the number
 * of I/O calls made. */
static uint64_t pc_workload(simfs_t *fs, uint64_t seed, uint64_t crash_at, bool skip_dir_fsync,
                            bool faults, model_t *md) {
    ra_config_t cfg;
    wal_config(&cfg, WAL_DIR);
    if (crash_at) simfs_crash_at(fs, crash_at);
    if (faults) { /* write-side I/O errors before the power cut (read errors: see below) */
        uint64_t fseed = seed ^ 0xfa17;
        int nf = 1 + (int)(ra_t_rand(&fseed) % 2);
        for (int i = 0; i < nf; i++) {
            uint64_t nth = 1 + ra_t_rand(&fseed) % 6, times = 1 + ra_t_rand(&fseed) % 2;
            switch (ra_t_rand(&fseed) % 7) {
            case 0:
                simfs_fail(fs, SIMFS_FSYNC, nth, -EIO, times);
                break;
            case 1:
                simfs_fail(fs, SIMFS_FSYNC_DIR, nth, -EIO, times);
                break;
            case 2:
                simfs_fail(fs, SIMFS_RENAME, nth, -EIO, times);
                break;
            case 3:
                simfs_fail(fs, SIMFS_UNLINK, nth, -EIO, times);
                break;
            case 4:
                simfs_fail(fs, SIMFS_WRITE, nth, -ENOSPC, times);
                break;
            case 5:
                simfs_short_write(fs, nth, (size_t)(ra_t_rand(&fseed) % 64));
                break;
            default:
                simfs_fail(fs, SIMFS_CREATE, nth, -EIO, times);
                break;
            }
        }
    }
    int rc = 0;
    ra_meter_t *m = open_io(&cfg, fs, &rc);
    if (m && skip_dir_fsync) m->wal->test_flags |= RA_WAL_TEST_SKIP_DIR_FSYNC;
    for (int r = 0; m && r < 6 && !simfs_crashed(fs); r++) {
        (void)record_window(m, r, 10 + (int)(ra_t_rand(&seed) % 30), &seed, NULL);
        ra_slice_t *out[64];
        size_t n = 0;
        rc = ra_meter_rollover(m, RA_T_EPOCH_MS + (r + 1) * WIN_MS + 1, out, 64, &n);
        if (rc != 0 && !simfs_crashed(fs)) g_pc_refused++;
        for (size_t i = 0; i < n && i < 64; i++) {
            model_add(md, out[i], true);
            ra_slice_unref(out[i]);
        }
        if (simfs_crashed(fs)) break;
        static ra_slice_t *p[2048];
        size_t np = pending_all(m, p, 2048);
        for (size_t i = 0; i < np; i++) {
            if (ra_t_rand(&seed) % 3 == 0 && ra_meter_ack(m, p[i]) == 0) {
                known_t *k = model_add(md, p[i], false);
                k->acked = true;
            }
        }
        unref_all(p, np);
        if (ra_t_rand(&seed) % 2) (void)ra_meter_compact(m);
        if (simfs_crashed(fs)) break;
        if (ra_t_rand(&seed) % 5 == 0) { /* a clean restart */
            ra_meter_close(m);
            m = open_io(&cfg, fs, &rc);
            if (!m) break;
            if (skip_dir_fsync) m->wal->test_flags |= RA_WAL_TEST_SKIP_DIR_FSYNC;
            model_pending(md, m);
        }
    }
    if (m) ra_meter_close(m);
    return simfs_calls(fs);
}

/* After the power cut: recovery succeeds; every reported, un-ACKed slice is pending with its
 * digest; nothing twice; chains continuous; every stream's next slice continues its head. */
static void pc_verify(simfs_t *fs, model_t *md, pc_result_t *res) {
    ra_config_t cfg;
    wal_config(&cfg, WAL_DIR);
    int rc = 0;
    ra_meter_t *m = open_io(&cfg, fs, &rc);
    if (!m) {
        res->recover_fail++;
        return;
    }
    static ra_slice_t *p[2048];
    size_t np = pending_all(m, p, 2048);
    for (size_t i = 0; i < np; i++)
        for (size_t j = i + 1; j < np; j++)
            if (same_stream(p[i], p[j]) && seq_of(p[i]) == seq_of(p[j])) res->dup++;
    /* Chains: per stream, pending is in seq order; a slice links to the known slice before
     * it; a gap is allowed only where every missing slice was ACKed (compaction removes whole
     * segments, so ACKed slices of a segment that still holds un-ACKed ones are resent). */
    uint64_t breaks0 = res->breaks;
    for (size_t i = 0; i < np; i++) {
        uint64_t seq = seq_of(p[i]);
        for (size_t j = i + 1; j < np; j++) {
            if (!same_stream(p[i], p[j])) continue;
            if (seq_of(p[j]) <= seq) res->breaks++; /* out of order */
            break;
        }
        if (seq == 1) {
            static const uint8_t zero[32];
            if (memcmp(ra_slice_prev_b3(p[i]), zero, 32) != 0) res->breaks++;
            continue;
        }
        ra_tenant_t t;
        ra_slice_get_tenant(p[i], &t);
        const known_t *prev = NULL;
        for (size_t k = 0; k < md->n && !prev; k++)
            if (md->k[k].seq == seq - 1 && memcmp(md->k[k].tenant, t.b, 16) == 0 &&
                strcmp(md->k[k].dim, ra_slice_dimension(p[i])) == 0)
                prev = &md->k[k];
        if (!prev || memcmp(prev->b3, ra_slice_prev_b3(p[i]), 32) != 0) res->breaks++;
        /* the previous slice is pending, or it was ACKed */
        bool pending_prev = false;
        for (size_t j = 0; j < i && !pending_prev; j++)
            pending_prev = same_stream(p[j], p[i]) && seq_of(p[j]) == seq - 1;
        if (!pending_prev && prev && !prev->acked) res->breaks++;
    }
    if (getenv("RA_TEST_VERBOSE") && res->breaks > breaks0) {
        for (size_t i = 0; i < np; i++) {
            ra_tenant_t t;
            ra_slice_get_tenant(p[i], &t);
            known_t *k = model_find(md, p[i]);
            fprintf(stderr, "  pending %zu: tenant %02x %s seq %llu wal_seq %llu %s\n", i, t.b[3],
                    ra_slice_dimension(p[i]), (unsigned long long)seq_of(p[i]),
                    (unsigned long long)ra__slice_wal_seq(p[i]),
                    k ? (k->acked ? "acked" : "reported") : "unknown");
        }
        fputs(g_log, stderr);
    }
    for (size_t i = 0; i < np; i++) {
        known_t *k = model_find(md, p[i]);
        if (!k)
            res->phantom++;
        else if (memcmp(k->b3, ra_slice_b3(p[i]), 32) != 0)
            res->mismatch++;
    }
    for (size_t i = 0; i < md->n; i++) {
        const known_t *k = &md->k[i];
        if (!k->reported) continue;
        res->reported++;
        if (k->acked) continue;
        bool found = false;
        for (size_t j = 0; j < np && !found; j++) {
            ra_tenant_t t;
            ra_slice_get_tenant(p[j], &t);
            found = seq_of(p[j]) == k->seq && memcmp(t.b, k->tenant, 16) == 0 &&
                    strcmp(ra_slice_dimension(p[j]), k->dim) == 0;
        }
        if (!found) res->lost++;
    }
    for (size_t i = 0; i < np; i++)
        model_add(md, p[i], false);
    unref_all(p, np);
    res->mismatch += md->mismatch;
    /* Heads: one record per stream, one rollover; each new slice continues the newest known. */
    for (unsigned t = 0; t < TT; t++)
        for (unsigned d = 0; d < DD; d++)
            ra_meter_record_at(m, RA_T_EPOCH_MS + 20 * WIN_MS, &g_tenants[t], &g_subjects[0],
                               (int)d, 1);
    ra_slice_t *out[64];
    size_t n = 0;
    rc = ra_meter_rollover(m, RA_T_EPOCH_MS + 21 * WIN_MS, out, 64, &n);
    if (rc != 0 || n != TT * DD) res->head_wrong++;
    for (size_t i = 0; i < n && i < 64; i++) {
        ra_tenant_t t;
        ra_slice_get_tenant(out[i], &t);
        const known_t *best = NULL;
        for (size_t k = 0; k < md->n; k++)
            if (memcmp(md->k[k].tenant, t.b, 16) == 0 &&
                strcmp(md->k[k].dim, ra_slice_dimension(out[i])) == 0 &&
                (!best || md->k[k].seq > best->seq))
                best = &md->k[k];
        uint64_t want = best ? best->seq + 1 : 1;
        static const uint8_t zero[32];
        if (seq_of(out[i]) != want ||
            memcmp(ra_slice_prev_b3(out[i]), best ? best->b3 : zero, 32) != 0)
            res->head_wrong++;
        ra_slice_unref(out[i]);
    }
    ra_meter_close(m);
}

static const char *const crash_mode_names[] = {"drop", "garbage", "torn"};

/* Runs `iters` seeded power cuts; stops early at the first loss when stop_at_loss. Returns
 * the iterations run. */
static int pc_run(uint64_t seed0, int iters, bool skip_dir_fsync, bool faults, bool stop_at_loss,
                  pc_result_t *res, int *first_loss) {
    keys_init();
    *first_loss = -1;
    int it = 0;
    for (; it < iters; it++) {
        uint64_t seed = seed0 + (uint64_t)it * 7919;
        static model_t md;
        md.n = 0;
        md.mismatch = 0;
        simfs_t *dry = simfs_new(seed);
        uint64_t calls = pc_workload(dry, seed, 0, skip_dir_fsync, faults, &md);
        simfs_free(dry);
        uint64_t pick = seed ^ 0xc0ffee;
        uint64_t at = 1 + ra_t_rand(&pick) % (calls + 1);
        simfs_crash_mode_t mode = (simfs_crash_mode_t)(it % 3);
        md.n = 0;
        md.mismatch = 0;
        simfs_t *fs = simfs_new(seed);
        pc_workload(fs, seed, at, skip_dir_fsync, faults, &md);
        res->crashes += simfs_crashed(fs);
        simfs_crash(fs, mode);
        uint64_t lost0 = res->lost, bad0 = (faults ? 0 : res->phantom) + res->dup + res->breaks +
                                           res->mismatch + res->recover_fail + res->head_wrong;
        log_reset();
        pc_verify(fs, &md, res);
        uint64_t bad = (faults ? 0 : res->phantom) + res->dup + res->breaks + res->mismatch +
                       res->recover_fail + res->head_wrong;
        if ((res->lost > lost0 || bad > bad0) && *first_loss < 0) {
            *first_loss = it;
            if (!skip_dir_fsync)
                fprintf(stderr,
                        "# power cut: iteration %d (seed %#llx, crash at call %llu of "
                        "%llu, %s) broke an invariant\n",
                        it, (unsigned long long)seed, (unsigned long long)at,
                        (unsigned long long)calls, crash_mode_names[mode]);
        }
        simfs_free(fs);
        if (stop_at_loss && res->lost > 0) {
            it++;
            break;
        }
    }
    return it;
}

/* Prints one power-cut run's outcome on a line of its own. */
static void pc_report(const char *what, int ran, uint64_t refused, const pc_result_t *r,
                      double t0) {
    printf("# %s: %d runs, %llu crashed mid-run, %llu rollovers refused by an injected error, "
           "%llu reported slices checked, lost %llu, phantom %llu, twice %llu, chain breaks "
           "%llu, digest mismatches %llu, failed recoveries %llu, wrong heads %llu (%.2f s)\n",
           what, ran, (unsigned long long)r->crashes, (unsigned long long)refused,
           (unsigned long long)r->reported, (unsigned long long)r->lost,
           (unsigned long long)r->phantom, (unsigned long long)r->dup,
           (unsigned long long)r->breaks, (unsigned long long)r->mismatch,
           (unsigned long long)r->recover_fail, (unsigned long long)r->head_wrong, now_s() - t0);
}

/* The invariants every power-cut run must keep. A "phantom" (a segment in doubt that
 * survived without having been reported) is allowed only after injected I/O errors. */
static void pc_check_clean(const pc_result_t *r, int iters, bool phantom_allowed) {
    CHECK(r->reported > (uint64_t)iters); /* the harness exercised something */
    CHECK_EQ_U64(r->lost, 0);
    CHECK_EQ_U64(r->recover_fail, 0);
    CHECK_EQ_U64(r->dup, 0);
    CHECK_EQ_U64(r->breaks, 0);
    CHECK_EQ_U64(r->mismatch, 0);
    CHECK_EQ_U64(r->head_wrong, 0);
    if (!phantom_allowed) CHECK_EQ_U64(r->phantom, 0);
}

RA_TEST(power_cut_at_random_points) {
    const uint64_t seed = 0x9c0de001;
    int iters = quick() ? 300 : 2000;
    printf("# power cuts: seed %#llx, %d iterations (drop/garbage/torn in turn)\n",
           (unsigned long long)seed, iters);
    pc_result_t r = {0};
    int first = -1;
    double t0 = now_s();
    int ran = pc_run(seed, iters, false, false, false, &r, &first);
    pc_report("power cuts", ran, 0, &r, t0);
    CHECK(r.crashes > (uint64_t)iters / 2);
    pc_check_clean(&r, iters, false);
}

/* The same with one or two write-side I/O errors injected before the power cut (EIO on
 * fsync, the directory fsync, rename, unlink or create; ENOSPC; short writes). A segment in
 * doubt may survive without having been reported ("phantom": allowed, its counts died with
 * the private plane); everything else as above. */
RA_TEST(power_cut_after_io_errors) {
    const uint64_t seed = 0x9c0de777;
    int iters = quick() ? 300 : 2000;
    printf("# power cuts after I/O errors: seed %#llx, %d iterations\n", (unsigned long long)seed,
           iters);
    pc_result_t r = {0};
    int first = -1;
    double t0 = now_s();
    g_pc_refused = 0;
    int ran = pc_run(seed, iters, false, true, false, &r, &first);
    pc_report("power cuts after I/O errors (phantoms allowed)", ran, g_pc_refused, &r, t0);
    CHECK(g_pc_refused > (uint64_t)iters / 4); /* the errors did bite */
    pc_check_clean(&r, iters, true);
}

/* The negative control: the same harness against a WAL that skips its directory fsyncs must
 * notice lost slices. */
RA_TEST(power_cut_negative_control_skipped_dir_fsync) {
    const uint64_t seed = 0x9c0de001;
    pc_result_t r = {0};
    int first = -1;
    int ran = pc_run(seed, 200, true, false, true, &r, &first);
    printf("# negative control (RA_WAL_TEST_SKIP_DIR_FSYNC): first lost slice detected at "
           "iteration %d of %d run\n",
           first, ran);
    CHECK(r.lost > 0);
}

/* ---- I/O errors -------------------------------------------------------------------------- */

typedef struct {
    simfs_t *fs;
    ra_meter_t *m;
    ra_config_t cfg;
    totals_t rec, sealed;
    uint64_t seed;
} iofix_t;

/* The fixture of the I/O tests, in three steps so a test can change the configuration in
 * between: a simulated file system and a WAL configuration (iofix_start), the meter on it
 * (iofix_meter), then both gone (iofix_end). */
static void iofix_start(iofix_t *f, uint64_t seed) {
    keys_init();
    memset(f, 0, sizeof *f);
    f->seed = seed;
    f->fs = simfs_new(seed);
    wal_config(&f->cfg, WAL_DIR);
}

static bool iofix_meter(iofix_t *f) {
    f->m = open_io(&f->cfg, f->fs, NULL);
    return f->m != NULL;
}

static void iofix_end(iofix_t *f) {
    ra_meter_close(f->m);
    simfs_free(f->fs);
}

/* The common case: the meter open, one window recorded. */
static bool io_open(iofix_t *f, uint64_t seed, const char *shm) {
    iofix_start(f, seed);
    f->cfg.shm_path = shm;
    if (!iofix_meter(f)) return false;
    return record_window(f->m, 0, 300, &f->seed, &f->rec) == 0;
}

static void io_add(iofix_t *f, ra_slice_t **out, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (!add_slice(&f->sealed, out[i])) RA_FAILF("sealed slice with an unknown key");
        ra_slice_unref(out[i]);
    }
}

/* Seals whatever is left and compares every total with what was recorded. */
static void io_finish(iofix_t *f, int64_t w) {
    ra_slice_t *out[256];
    size_t n = 0;
    CHECK_RC(ra_meter_rollover(f->m, RA_T_EPOCH_MS + w * WIN_MS, out, 256, &n), 0);
    io_add(f, out, n);
    CHECK_EQ_U64(frozen_pairs(f->m), 0);
    CHECK_EQ_U64(totals_diff(&f->rec, &f->sealed), 0);
    CHECK_EQ_U64(totals_sum(&f->rec), totals_sum(&f->sealed));
    ra_meter_close(f->m);
    f->m = NULL;
}

/* A rollover that must fail with `want`, report nothing and leave the counts in the plane. */
static void io_refused(iofix_t *f, int64_t w, int want) {
    ra_slice_t *out[256] = {NULL};
    size_t n = 77;
    CHECK_RC(ra_meter_rollover(f->m, RA_T_EPOCH_MS + w * WIN_MS, out, 256, &n), want);
    CHECK_EQ_U64(n, 0);
    CHECK(out[0] == NULL);
    CHECK_EQ_U64(ra_meter_pending_count(f->m), 0);
}

RA_TEST(io_fsync_eio_once_rewrites_to_a_new_segment) {
    iofix_t f;
    REQUIRE(io_open(&f, 0x10e1, NULL));
    uint64_t creates0 = simfs_count(f.fs, SIMFS_CREATE); /* (the space reserve, at open) */
    simfs_fail(f.fs, SIMFS_FSYNC, 1, -EIO, 1);
    ra_slice_t *out[256];
    size_t n = 0;
    CHECK_RC(ra_meter_rollover(f.m, RA_T_EPOCH_MS + WIN_MS, out, 256, &n), 0);
    CHECK(n > 0);
    io_add(&f, out, n);
    CHECK_EQ_U64(simfs_count(f.fs, SIMFS_CREATE) - creates0, 2); /* never the same file again */
    CHECK(metric(f.m, "accounting_wal_write_errors_total") == 1);
    CHECK_EQ_U64(seg_files(f.fs), 1);
    CHECK_EQ_U64(tmp_files(f.fs), 0);
    /* What was reported sealed survives a power cut right now. */
    ra_meter_close(f.m);
    CHECK_RC(simfs_crash(f.fs, SIMFS_CRASH_GARBAGE), 0);
    REQUIRE(iofix_meter(&f));
    CHECK_EQ_U64(ra_meter_pending_count(f.m), n);
    totals_t again = {{0}};
    sum_pending(f.m, &again);
    CHECK_EQ_U64(totals_diff(&f.rec, &again), 0);
    iofix_end(&f);
}

RA_TEST(io_fsync_eio_twice_nothing_sealed_nothing_lost) {
    iofix_t f;
    REQUIRE(io_open(&f, 0x10e2, NULL));
    simfs_fail(f.fs, SIMFS_FSYNC, 1, -EIO, 2);
    io_refused(&f, 1, RA_EIO);
    CHECK_EQ_U64(seg_files(f.fs), 0);
    CHECK_EQ_U64(tmp_files(f.fs), 0);
    CHECK_EQ_U64(frozen_pairs(f.m), 0);
    CHECK_EQ_U64(atomic_load(&f.m->hdr->seal_intent), 0);
    CHECK(metric(f.m, "accounting_wal_write_errors_total") == 2);
    CHECK(metric(f.m, "accounting_wal_failed") == 0);
    /* Writers carry on, in the next window and late into the unsealed one. */
    CHECK_RC(record_window(f.m, 1, 100, &f.seed, &f.rec), 0);
    CHECK_RC(record_window(f.m, 0, 50, &f.seed, &f.rec), 0);
    io_finish(&f, 2);
    simfs_free(f.fs);
}

RA_TEST(io_enospc_on_write) {
    iofix_t f;
    /* once: the second attempt succeeds */
    REQUIRE(io_open(&f, 0x10e3, NULL));
    simfs_fail(f.fs, SIMFS_WRITE, 1, -ENOSPC, 1);
    ra_slice_t *out[256];
    size_t n = 0;
    CHECK_RC(ra_meter_rollover(f.m, RA_T_EPOCH_MS + WIN_MS, out, 256, &n), 0);
    io_add(&f, out, n);
    CHECK_EQ_U64(totals_diff(&f.rec, &f.sealed), 0);
    iofix_end(&f);
    /* always: PersistenceFull, degraded, nothing sealed; room again → everything sealed */
    REQUIRE(io_open(&f, 0x10e4, NULL));
    simfs_fail(f.fs, SIMFS_WRITE, 1, -ENOSPC, 0);
    io_refused(&f, 1, RA_EPERSISTFULL);
    CHECK(metric(f.m, "accounting_rejected_total{reason=\"wal_full\"}") == 1);
    CHECK_EQ_I64(ra_meter_degraded(f.m), 1);
    CHECK_RC(
        ra_meter_record_at(f.m, RA_T_EPOCH_MS + WIN_MS + 5, &g_tenants[0], &g_subjects[0], 0, 1),
        RA_EDEGRADED);
    CHECK_EQ_U64(seg_files(f.fs), 0);
    CHECK_EQ_U64(tmp_files(f.fs), 0);
    CHECK_EQ_U64(frozen_pairs(f.m), 0);
    simfs_clear_faults(f.fs);
    CHECK_RC(ra_meter_compact(f.m), 0);
    CHECK_EQ_I64(ra_meter_degraded(f.m), 0);
    io_finish(&f, 1);
    simfs_free(f.fs);
}

/* Issue 14 item 13: the log says what happened. Before: a full disk was "the WAL is full"
 * (its caps, which were far away), a read-only file system "input/output error", and a
 * missing compaction reserve nothing at all. */
RA_TEST(io_messages_say_what_happened) {
    iofix_t f;
    REQUIRE(io_open(&f, 0x10f1, NULL));
    simfs_fail(f.fs, SIMFS_WRITE, 1, -ENOSPC, 0);
    g_log_len = 0;
    g_log[0] = '\0';
    io_refused(&f, 1, RA_EPERSISTFULL);
    CHECK(strstr(g_log, "the file system holding the WAL") != NULL);
    CHECK(strstr(g_log, "No space left on device") != NULL);
    CHECK(strstr(g_log, "within its caps") != NULL);
    simfs_clear_faults(f.fs);
    iofix_end(&f);

    REQUIRE(io_open(&f, 0x10f2, NULL));
    simfs_fail(f.fs, SIMFS_WRITE, 1, -EROFS, 0);
    g_log_len = 0;
    g_log[0] = '\0';
    io_refused(&f, 1, RA_EIO);
    CHECK(strstr(g_log, "Read-only file system") != NULL);
    CHECK(strstr(g_log, "input/output error") == NULL);
    simfs_clear_faults(f.fs);
    iofix_end(&f);

    /* the reserve cannot be made at open: said once; said again when it is back */
    iofix_start(&f, 0x10f3);
    simfs_fail(f.fs, SIMFS_CREATE, 1, -EROFS, 1);
    g_log_len = 0;
    g_log[0] = '\0';
    REQUIRE(iofix_meter(&f));
    CHECK(strstr(g_log, "cannot make the compaction reserve (Read-only file system)") != NULL);
    /* a window sealed and ACKed: compaction removes its segment and makes the reserve */
    CHECK_RC(record_window(f.m, 0, 50, &f.seed, &f.rec), 0);
    ra_slice_t *out[256];
    size_t n = 0;
    CHECK_RC(ra_meter_rollover(f.m, RA_T_EPOCH_MS + WIN_MS, out, 256, &n), 0);
    REQUIRE(n > 0);
    for (size_t i = 0; i < n; i++) {
        CHECK_RC(ra_meter_ack(f.m, out[i]), 0);
        ra_slice_unref(out[i]);
    }
    CHECK_RC(ra_meter_compact(f.m), 0);
    CHECK(strstr(g_log, "the compaction reserve is back") != NULL);
    iofix_end(&f);
}

RA_TEST(io_short_writes_are_completed) {
    const size_t ks[] = {0, 1, 7, 100};
    for (size_t i = 0; i < 4; i++) {
        iofix_t f;
        REQUIRE(io_open(&f, 0x10e5 + i, NULL));
        simfs_short_write(f.fs, 1, ks[i]);
        ra_slice_t *out[256];
        size_t n = 0;
        CHECK_RC(ra_meter_rollover(f.m, RA_T_EPOCH_MS + WIN_MS, out, 256, &n), 0);
        CHECK(n > 0);
        io_add(&f, out, n);
        CHECK_EQ_U64(totals_diff(&f.rec, &f.sealed), 0);
        /* k = 0 is "no progress": an error, rewritten to a new segment */
        CHECK(metric(f.m, "accounting_wal_write_errors_total") == (ks[i] == 0 ? 1 : 0));
        ra_meter_close(f.m);
        CHECK_RC(simfs_crash(f.fs, SIMFS_CRASH_DROP), 0);
        REQUIRE(iofix_meter(&f));
        totals_t again = {{0}};
        CHECK_EQ_U64(sum_pending(f.m, &again), n);
        CHECK_EQ_U64(totals_diff(&f.rec, &again), 0);
        CHECK(metric(f.m, "accounting_wal_corrupt_total") == 0);
        iofix_end(&f);
    }
}

RA_TEST(io_rename_eio) {
    iofix_t f;
    REQUIRE(io_open(&f, 0x10e9, NULL));
    simfs_fail(f.fs, SIMFS_RENAME, 1, -EIO, 1);
    io_refused(&f, 1, RA_EIO);
    CHECK_EQ_U64(seg_files(f.fs), 0);
    CHECK_EQ_U64(tmp_files(f.fs), 0);
    CHECK_EQ_U64(frozen_pairs(f.m), 0);
    CHECK(metric(f.m, "accounting_wal_failed") == 0);
    io_finish(&f, 1);
    simfs_free(f.fs);
}

/* A rename that took effect although it reported an error (NFS when a reply is lost; any
 * file system that fails after its journal commit). The segment is in the directory but was
 * not reported: its counts go back to the plane and are sealed again. Nothing may then be
 * counted twice, and no seq may appear twice after a restart. */
RA_TEST(io_rename_fails_after_taking_effect) {
    iofix_t f;
    REQUIRE(io_open(&f, 0x10ec, NULL));
    simfs_fail_after(f.fs, SIMFS_RENAME, 1, -EIO);
    io_refused(&f, 1, RA_EIO);
    printf("# rename failed after taking effect: %zu .seg files in the directory\n",
           seg_files(f.fs));
    /* late records for the same keys, so the next seal of window 0 differs */
    CHECK_RC(record_window(f.m, 0, 50, &f.seed, &f.rec), 0);
    ra_slice_t *out[256];
    size_t n = 0;
    CHECK_RC(ra_meter_rollover(f.m, RA_T_EPOCH_MS + WIN_MS, out, 256, &n), 0);
    io_add(&f, out, n);
    CHECK_EQ_U64(totals_diff(&f.rec, &f.sealed), 0);
    ra_meter_close(f.m);
    REQUIRE(iofix_meter(&f));
    static ra_slice_t *p[512];
    size_t np = pending_all(f.m, p, 512);
    totals_t again = {{0}};
    for (size_t i = 0; i < np; i++)
        add_slice(&again, p[i]);
    int twice = 0;
    for (size_t i = 0; i < np; i++)
        for (size_t j = i + 1; j < np; j++)
            twice += same_stream(p[i], p[j]) && seq_of(p[i]) == seq_of(p[j]);
    printf("# after a restart: %zu pending (%zu reported), %d seq twice, %llu counted vs %llu "
           "recorded\n",
           np, n, twice, (unsigned long long)totals_sum(&again),
           (unsigned long long)totals_sum(&f.rec));
    CHECK_EQ_I64(twice, 0);
    CHECK_EQ_U64(np, n);
    CHECK_EQ_U64(totals_sum(&again), totals_sum(&f.rec));
    unref_all(p, np);
    iofix_end(&f);
}

RA_TEST(io_fsync_dir_eio_rename_taken_back) {
    iofix_t f;
    REQUIRE(io_open(&f, 0x10ea, NULL));
    simfs_fail(f.fs, SIMFS_FSYNC_DIR, 1, -EIO, 1);
    io_refused(&f, 1, RA_EIO);
    CHECK_EQ_U64(seg_files(f.fs), 0);
    CHECK(metric(f.m, "accounting_wal_failed") == 0);
    CHECK_EQ_U64(frozen_pairs(f.m), 0);
    /* A power cut now finds nothing: the segment never was, and was never reported. */
    simfs_t *cut = simfs_clone(f.fs, 1);
    simfs_crash(cut, SIMFS_CRASH_DROP);
    ra_meter_close(f.m);
    f.m = NULL;
    ra_meter_t *m2 = open_io(&f.cfg, cut, NULL);
    REQUIRE(m2);
    CHECK_EQ_U64(ra_meter_pending_count(m2), 0);
    ra_meter_close(m2);
    simfs_free(cut);
    simfs_free(f.fs);

    /* and without the cut the meter carries on: everything sealed by the next rollover */
    REQUIRE(io_open(&f, 0x10eb, NULL));
    simfs_fail(f.fs, SIMFS_FSYNC_DIR, 1, -EIO, 1);
    io_refused(&f, 1, RA_EIO);
    io_finish(&f, 1);
    simfs_free(f.fs);
}

/* The directory fsync fails and so does taking the rename back: the segment is in doubt. The
 * WAL is failed (metric, typed refusals, nothing reported), the counts stay frozen in the
 * process-shared plane, and the next sealer decides from the disk. variant 0: the unlink
 * worked (segment gone); 1: the unlink failed (segment present); 2: as 1, then a power cut
 * (the rename was never durable). */
RA_TEST(io_fsync_dir_eio_twice_wal_failed_restart_decides) {
    for (int variant = 0; variant < 3; variant++) {
        char shm[700];
        snprintf(shm, sizeof shm, "%s/plane-doubt-%d", ra_t_tmpdir(), variant);
        unlink(shm);
        iofix_t f;
        REQUIRE(io_open(&f, 0x10f0 + (uint64_t)variant, shm));
        simfs_fail(f.fs, SIMFS_FSYNC_DIR, 1, -EIO, 2);
        if (variant) simfs_fail(f.fs, SIMFS_UNLINK, 1, -EIO, 1);
        io_refused(&f, 1, RA_EIO);
        CHECK(metric(f.m, "accounting_wal_failed") == 1);
        uint64_t intent = atomic_load(&f.m->hdr->seal_intent);
        CHECK(intent != 0 && intent != RA_INTENT_FREEZING);
        CHECK(frozen_pairs(f.m) > 0);
        CHECK_EQ_U64(seg_files(f.fs), variant ? 1 : 0);
        simfs_clear_faults(f.fs);
        /* Writers are never refused; late records into the frozen window go elsewhere. */
        CHECK_RC(record_window(f.m, 1, 100, &f.seed, &f.rec), 0);
        CHECK_RC(record_window(f.m, 0, 50, &f.seed, &f.rec), 0);
        /* Sealing is refused until a restart, and the refusal keeps the record of the
         * segment in doubt. */
        io_refused(&f, 2, RA_EIO);
        CHECK_EQ_U64(atomic_load(&f.m->hdr->seal_intent), intent);
        CHECK_RC(ra_meter_compact(f.m), 0);
        ra_meter_close(f.m);
        if (variant == 2) CHECK_RC(simfs_crash(f.fs, SIMFS_CRASH_DROP), 0);
        REQUIRE(iofix_meter(&f));
        CHECK_EQ_U64(atomic_load(&f.m->hdr->seal_intent), 0);
        CHECK_EQ_U64(frozen_pairs(f.m), 0);
        CHECK(metric(f.m, "accounting_wal_failed") == 0);
        size_t replayed = sum_pending(f.m, &f.sealed);
        printf("# in doubt, variant %d: %zu slices replayed from the segment, the rest sealed "
               "again\n",
               variant, replayed);
        CHECK(variant == 1 ? replayed > 0 : replayed == 0);
        io_finish(&f, 2);
        simfs_free(f.fs);
        unlink(shm);
    }
}

/* ---- caps ------------------------------------------------------------------------------- */

/* Seals window w of a grid of `streams` tenants (one dimension) into f. */
static int cap_round(iofix_t *f, int64_t w, unsigned streams, unsigned subjects, size_t *n_out) {
    for (unsigned t = 0; t < streams; t++)
        for (unsigned s = 0; s < subjects; s++) {
            ra_subject_t sub = ra_t_subject(s);
            ra_tenant_t ten = ra_t_tenant(900 + t);
            int rc = ra_meter_record_at(f->m, RA_T_EPOCH_MS + w * WIN_MS + 3, &ten, &sub,
                                        RA_DIM_REQUESTS, 1 + s % 7);
            if (rc != 0) return rc;
            f->rec.v[0] += 1 + s % 7; /* one grand total is enough here */
        }
    ra_slice_t *out[512];
    size_t n = 0;
    int rc = ra_meter_rollover(f->m, RA_T_EPOCH_MS + (w + 1) * WIN_MS, out, 512, &n);
    for (size_t i = 0; i < n; i++) {
        for (size_t r = 0; r < ra_slice_row_count(out[i]); r++) {
            uint64_t inc;
            ra_slice_row(out[i], r, NULL, &inc);
            f->sealed.v[0] += inc;
        }
        ra_slice_unref(out[i]);
    }
    *n_out = n;
    return rc;
}

static void cap_full_then_recover(iofix_t *f, int64_t w_full, unsigned streams, unsigned subj,
                                  const char *what) {
    size_t n = 0;
    double full0 = metric(f->m, "accounting_rejected_total{reason=\"wal_full\"}");
    CHECK_RC(cap_round(f, w_full, streams, subj, &n), RA_EPERSISTFULL);
    CHECK(n < streams); /* what fits under the cap is sealed, the rest waits in the plane */
    CHECK(metric(f->m, "accounting_rejected_total{reason=\"wal_full\"}") == full0 + 1);
    CHECK_EQ_I64(ra_meter_degraded(f->m), 1);
    CHECK(metric(f->m, "accounting_degraded") == 1);
    double deg0 = metric(f->m, "accounting_rejected_total{reason=\"degraded\"}");
    CHECK_RC(ra_meter_record_at(f->m, RA_T_EPOCH_MS + (w_full + 1) * WIN_MS + 9, &g_tenants[0],
                                &g_subjects[0], 0, 1),
             RA_EDEGRADED);
    CHECK(metric(f->m, "accounting_rejected_total{reason=\"degraded\"}") == deg0 + 1);
    CHECK_EQ_U64(frozen_pairs(f->m), 0);
    CHECK(f->sealed.v[0] < f->rec.v[0]); /* the refused window waits in the plane */
    /* ACK + compaction make room: degraded clears and the next rollover seals it all. */
    ack_all(f->m);
    CHECK_RC(ra_meter_compact(f->m), 0);
    CHECK_EQ_I64(ra_meter_degraded(f->m), 0);
    ra_slice_t *out[512];
    CHECK_RC(ra_meter_rollover(f->m, RA_T_EPOCH_MS + (w_full + 1) * WIN_MS, out, 512, &n), 0);
    CHECK(n > 0);
    for (size_t i = 0; i < n; i++) {
        for (size_t r = 0; r < ra_slice_row_count(out[i]); r++) {
            uint64_t inc;
            ra_slice_row(out[i], r, NULL, &inc);
            f->sealed.v[0] += inc;
        }
        ra_slice_unref(out[i]);
    }
    CHECK_EQ_U64(f->sealed.v[0], f->rec.v[0]);
    printf("# caps (%s): refused with PersistenceFull, degraded, recovered after ACK + "
           "compaction, totals equal (%llu)\n",
           what, (unsigned long long)f->rec.v[0]);
}

RA_TEST(caps_max_entries) {
    iofix_t f;
    iofix_start(&f, 0xca1);
    f.cfg.pending_slices_cap = 64;
    f.cfg.wal_max_entries = 4;
    REQUIRE(iofix_meter(&f));
    size_t n;
    CHECK_RC(cap_round(&f, 0, 3, 4, &n), 0);
    CHECK_EQ_U64(n, 3);
    cap_full_then_recover(&f, 1, 3, 4, "wal_max_entries = 4");
    iofix_end(&f);
}

/* ACKed frames count against the caps until a compaction drops them; a rollover that hits
 * a cap compacts first, so ACKs without an explicit compaction never degrade the meter. */
RA_TEST(caps_acked_frames_reclaimed_before_refusing) {
    iofix_t f;
    iofix_start(&f, 0xca4);
    f.cfg.pending_slices_cap = 64;
    f.cfg.wal_max_entries = 4;
    REQUIRE(iofix_meter(&f));
    size_t n;
    double full0 = metric(f.m, "accounting_rejected_total{reason=\"wal_full\"}");
    for (int64_t w = 0; w < 5; w++) { /* 3 frames a round, cap 4: full without a compaction */
        CHECK_RC(cap_round(&f, w, 3, 4, &n), 0);
        CHECK_EQ_U64(n, 3);
        CHECK_EQ_I64(ra_meter_degraded(f.m), 0);
        ack_all(f.m); /* no ra_meter_compact */
    }
    CHECK(metric(f.m, "accounting_rejected_total{reason=\"wal_full\"}") == full0);
    CHECK_EQ_U64(f.sealed.v[0], f.rec.v[0]);
    /* un-ACKed frames still count: the cap still refuses when they fill it */
    CHECK_RC(cap_round(&f, 5, 3, 4, &n), 0);
    CHECK_RC(cap_round(&f, 6, 3, 4, &n), RA_EPERSISTFULL);
    CHECK_EQ_I64(ra_meter_degraded(f.m), 1);
    iofix_end(&f);
}

RA_TEST(caps_max_bytes) {
    iofix_t f;
    iofix_start(&f, 0xca2);
    f.cfg.capacity_rows = 50000;
    f.cfg.wal_max_bytes = 2u << 20; /* the smallest allowed: two ~940 KiB slices fit */
    REQUIRE(iofix_meter(&f));
    size_t n;
    CHECK_RC(cap_round(&f, 0, 1, 40000, &n), 0);
    CHECK_EQ_U64(n, 1);
    CHECK_RC(cap_round(&f, 1, 1, 40000, &n), 0);
    CHECK_EQ_U64(n, 1);
    /* ACK only the first two: the third still does not fit until they are compacted */
    cap_full_then_recover(&f, 2, 1, 40000, "wal_max_bytes = 2 MiB");
    iofix_end(&f);
}

RA_TEST(caps_max_age) {
    iofix_t f;
    iofix_start(&f, 0xca3);
    f.cfg.wal_max_age_s = 90;
    ra_t_now_ms = RA_T_EPOCH_MS;
    REQUIRE(iofix_meter(&f));
    size_t n;
    ra_t_now_ms = RA_T_EPOCH_MS + WIN_MS;
    CHECK_RC(cap_round(&f, 0, 2, 3, &n), 0); /* segment created at 60 s */
    ra_t_now_ms = RA_T_EPOCH_MS + 2 * WIN_MS;
    CHECK_RC(cap_round(&f, 1, 2, 3, &n), 0); /* oldest is 60 s old: fine */
    ra_t_now_ms = RA_T_EPOCH_MS + 3 * WIN_MS;
    cap_full_then_recover(&f, 2, 2, 3, "wal_max_age_s = 90"); /* 120 s old: refused */
    ra_meter_close(f.m);
    ra_t_now_ms = 0;
    simfs_free(f.fs);
}

/* One boundary with more streams than wal_max_entries: the WAL can never take the batch as
 * one segment. Sealing must still make progress (as it does when the pending ring is the
 * limit) instead of refusing the window forever. */
RA_TEST(caps_boundary_larger_than_max_entries_makes_progress) {
    iofix_t f;
    iofix_start(&f, 0xca4);
    f.cfg.pending_slices_cap = 64;
    f.cfg.wal_max_entries = 4;
    REQUIRE(iofix_meter(&f));
    size_t n = 0, total = 0;
    int rc = cap_round(&f, 0, 6, 2, &n);
    total += n;
    for (int tries = 0; tries < 5 && f.sealed.v[0] < f.rec.v[0]; tries++) {
        ack_all(f.m);
        ra_meter_compact(f.m);
        ra_slice_t *out[64];
        rc = ra_meter_rollover(f.m, RA_T_EPOCH_MS + WIN_MS, out, 64, &n);
        for (size_t i = 0; i < n; i++) {
            for (size_t r = 0; r < ra_slice_row_count(out[i]); r++) {
                uint64_t inc;
                ra_slice_row(out[i], r, NULL, &inc);
                f.sealed.v[0] += inc;
            }
            ra_slice_unref(out[i]);
        }
        total += n;
    }
    printf("# caps: 6 streams at one boundary, wal_max_entries 4: %zu slices sealed after 5 "
           "ACK + compact + rollover rounds, last rc %s, degraded %d\n",
           total, ra_err_name(rc), ra_meter_degraded(f.m));
    CHECK_EQ_U64(f.sealed.v[0], f.rec.v[0]);
    iofix_end(&f);
}

/* A full disk: writes fail with ENOSPC. Rollovers are refused (PersistenceFull, degraded,
 * nothing lost) and the operator's way out is the downstream ACKing and compaction freeing
 * space — which must not itself need new space. */
RA_TEST(disk_full_compaction_frees_space) {
    iofix_t f;
    REQUIRE(io_open(&f, 0xd15c, NULL));
    ra_slice_t *out[256];
    size_t n = 0;
    CHECK_RC(ra_meter_rollover(f.m, RA_T_EPOCH_MS + WIN_MS, out, 256, &n), 0);
    io_add(&f, out, n);
    CHECK_RC(record_window(f.m, 1, 200, &f.seed, &f.rec), 0);
    simfs_set_capacity(f.fs, simfs_usage(f.fs)); /* the disk is full from now on */
    size_t n2 = 77;
    CHECK_RC(ra_meter_rollover(f.m, RA_T_EPOCH_MS + 2 * WIN_MS, NULL, 0, &n2), RA_EPERSISTFULL);
    CHECK_EQ_U64(n2, 0);
    CHECK_EQ_U64(ra_meter_pending_count(f.m), n);
    CHECK_EQ_I64(ra_meter_degraded(f.m), 1);
    /* the downstream ACKs what it has; compaction must free the segment */
    static ra_slice_t *p[256];
    size_t np = pending_all(f.m, p, 256);
    for (size_t i = 0; i < np; i++)
        CHECK_RC(ra_meter_ack(f.m, p[i]), 0);
    unref_all(p, np);
    int rc = ra_meter_compact(f.m);
    printf("# disk full: compaction answers %s, %zu segment(s) left, %.0f WAL bytes\n",
           ra_err_name(rc), seg_files(f.fs), metric(f.m, "accounting_wal_size_bytes"));
    CHECK_RC(rc, 0);
    CHECK_EQ_U64(seg_files(f.fs), 0);
    /* space again: everything recorded is sealed, chains intact */
    simfs_set_capacity(f.fs, 0);
    CHECK_RC(ra_meter_compact(f.m), 0);
    io_finish(&f, 2);
    simfs_free(f.fs);
}

/* ---- restarts ----------------------------------------------------------------------------- */

/* ACK is remembered in memory only and compaction removes whole segments, so a restart
 * replays the ACKed slices of every segment that still holds an un-ACKed one. The WAL's
 * entry cap counts un-ACKed slices only: a WAL within its caps must still reopen. */
RA_TEST(restart_with_acked_slices_in_partly_acked_segments) {
    keys_init();
    uint64_t seed = 0x2e01;
    simfs_t *fs = simfs_new(seed);
    ra_config_t cfg;
    wal_config(&cfg, WAL_DIR);
    cfg.pending_slices_cap = 16; /* wal_max_entries defaults to it */
    ra_meter_t *m = open_io(&cfg, fs, NULL);
    REQUIRE(m);
    for (int w = 0; w < 6; w++) {
        record_grid(m, w, 2, 2, 3, 300, &seed);
        ra_slice_t *out[8];
        size_t n = 0;
        CHECK_RC(ra_meter_rollover(m, RA_T_EPOCH_MS + (w + 1) * WIN_MS, out, 8, &n), 0);
        CHECK_EQ_U64(n, 4);
        for (size_t i = 0; i + 1 < n; i++)
            CHECK_RC(ra_meter_ack(m, out[i]), 0); /* 3 of 4 */
        unref_all(out, n);
        CHECK_RC(ra_meter_compact(m), 0);
    }
    printf("# restart: %.0f un-ACKed slices (cap %u) in %.0f segments holding %d frames\n",
           metric(m, "accounting_wal_entries"), cfg.pending_slices_cap,
           metric(m, "accounting_wal_segments"), 6 * 4);
    CHECK(metric(m, "accounting_wal_entries") == 6);
    ra_meter_close(m);
    int rc = 0;
    char err[512] = "";
    m = NULL;
    rc = ra__meter_open_io(&cfg, simfs_io(fs), &m, err, sizeof err);
    if (rc != 0) RA_FAILF("the reopen fails: %s: %s", ra_err_name(rc), err);
    if (m) {
        CHECK(ra_meter_pending_count(m) >= 6);
        ra_meter_close(m);
    }
    simfs_free(fs);
}

/* A sealer that set the shared plane degraded because the WAL was full is replaced (restart,
 * kill -9); the new sealer makes room: the plane must not stay degraded. */
RA_TEST(restart_of_a_sealer_while_wal_full_clears_degraded) {
    keys_init();
    char shm[700];
    snprintf(shm, sizeof shm, "%s/plane-full-restart", ra_t_tmpdir());
    unlink(shm);
    iofix_t f;
    memset(&f, 0, sizeof f);
    f.fs = simfs_new(0x2e02);
    wal_config(&f.cfg, WAL_DIR);
    f.cfg.shm_path = shm;
    f.cfg.pending_slices_cap = 64;
    f.cfg.wal_max_entries = 4;
    REQUIRE(iofix_meter(&f));
    size_t n;
    CHECK_RC(cap_round(&f, 0, 3, 2, &n), 0);
    CHECK_RC(cap_round(&f, 1, 3, 2, &n), RA_EPERSISTFULL);
    CHECK_EQ_U64(n, 1); /* the one stream that fit the last free entry; two wait */
    CHECK_EQ_I64(ra_meter_degraded(f.m), 1);
    ra_meter_close(f.m);
    f.m = open_io(&f.cfg, f.fs, NULL); /* the next sealer */
    REQUIRE(f.m);
    ack_all(f.m);
    CHECK_RC(ra_meter_compact(f.m), 0);
    ra_slice_t *out[16];
    CHECK_RC(ra_meter_rollover(f.m, RA_T_EPOCH_MS + 2 * WIN_MS, out, 16, &n), 0);
    unref_all(out, n < 16 ? n : 16);
    CHECK_EQ_U64(n, 2); /* the two streams that waited in the plane */
    CHECK_EQ_I64(ra_meter_degraded(f.m), 0);
    CHECK_RC(ra_meter_record_at(f.m, RA_T_EPOCH_MS + 2 * WIN_MS + 1, &g_tenants[0], &g_subjects[0],
                                0, 1),
             0);
    iofix_end(&f);
    unlink(shm);
}

/* A segment that cannot be read at open (a transient EIO) is not a corrupt one: its slices
 * must not be silently left out, and its file must never be overwritten by a new segment
 * that reuses its id. */
RA_TEST(restart_with_a_transient_read_error_loses_nothing) {
    keys_init();
    uint64_t seed = 0x2e03;
    simfs_t *fs = simfs_new(seed);
    ra_config_t cfg;
    wal_config(&cfg, WAL_DIR);
    ra_meter_t *m = open_io(&cfg, fs, NULL);
    REQUIRE(m);
    static ra_slice_t *sealed[64];
    size_t ns = 0;
    for (int w = 0; w < 3; w++) {
        record_grid(m, w, 2, 2, 3, 300, &seed);
        size_t n = 0;
        CHECK_RC(ra_meter_rollover(m, RA_T_EPOCH_MS + (w + 1) * WIN_MS, sealed + ns, 64 - ns, &n),
                 0);
        ns += n;
    }
    ra_meter_close(m);
    /* open: size(heads) is the 1st size call, the three segments the 2nd..4th */
    simfs_fail(fs, SIMFS_SIZE, 4, -EIO, 1);
    int rc = 0;
    m = open_io(&cfg, fs, &rc);
    size_t np = m ? ra_meter_pending_count(m) : 0;
    printf("# transient EIO reading the newest segment at open: open %s, %zu of %zu slices "
           "pending\n",
           ra_err_name(rc), np, ns);
    if (m) {
        /* seal more, then reopen without the fault */
        record_grid(m, 5, 2, 2, 3, 300, &seed);
        size_t n = 0;
        ra_slice_t *out[8];
        CHECK_RC(ra_meter_rollover(m, RA_T_EPOCH_MS + 6 * WIN_MS, out, 8, &n), 0);
        for (size_t i = 0; i < n && ns < 64; i++)
            sealed[ns++] = out[i];
        ra_meter_close(m);
    }
    m = open_io(&cfg, fs, NULL);
    REQUIRE(m);
    static ra_slice_t *p[64];
    np = pending_all(m, p, 64);
    size_t missing = 0;
    for (size_t i = 0; i < ns; i++) {
        bool found = false;
        for (size_t j = 0; j < np && !found; j++)
            found = same_bytes(p[j], sealed[i]);
        missing += !found;
    }
    printf("# after a clean reopen: %zu of %zu reported slices pending, %zu lost\n", np, ns,
           missing);
    CHECK_EQ_U64(missing, 0);
    CHECK_EQ_I64(chain_breaks(p, np), 0);
    unref_all(p, np);
    unref_all(sealed, ns);
    ra_meter_close(m);
    simfs_free(fs);
}

/* The same for the heads checkpoint: once every segment is compacted it is the only record
 * of the chains. A transient EIO reading it must not restart the chains at seq 1 (a fork
 * the downstream answers "conflict"), let alone get the forked heads checkpointed. */
RA_TEST(restart_with_a_transient_heads_read_error_keeps_chains) {
    keys_init();
    uint64_t seed = 0x2e04;
    simfs_t *fs = simfs_new(seed);
    ra_config_t cfg;
    wal_config(&cfg, WAL_DIR);
    ra_meter_t *m = open_io(&cfg, fs, NULL);
    REQUIRE(m);
    for (int w = 0; w < 2; w++) {
        record_grid(m, w, 1, 1, 3, 300, &seed);
        size_t n = 0;
        CHECK_RC(ra_meter_rollover(m, RA_T_EPOCH_MS + (w + 1) * WIN_MS, NULL, 0, &n), 0);
    }
    ack_all(m);
    CHECK_RC(ra_meter_compact(m), 0);
    CHECK_EQ_U64(seg_files(fs), 0);
    ra_meter_close(m);
    simfs_fail(fs, SIMFS_SIZE, 1, -EIO, 1); /* the first size call at open is the heads' */
    int rc = 0;
    m = open_io(&cfg, fs, &rc);
    uint64_t seq = 0;
    if (m) {
        record_grid(m, 3, 1, 1, 3, 300, &seed);
        ra_slice_t *out = NULL;
        size_t n = 0;
        CHECK_RC(ra_meter_rollover(m, RA_T_EPOCH_MS + 4 * WIN_MS, &out, 1, &n), 0);
        if (n) seq = seq_of(out);
        ra_slice_unref(out);
        ack_all(m);
        CHECK_RC(ra_meter_compact(m), 0);
        ra_meter_close(m);
    }
    printf("# transient EIO reading the heads checkpoint at open: open %s, next slice seq %llu "
           "(want 3)\n",
           ra_err_name(rc), (unsigned long long)seq);
    CHECK(m == NULL || seq == 3);
    simfs_free(fs);
}

/* Leftover .tmp files (a segment or a heads checkpoint never renamed into place) are removed
 * at open and never replayed; foreign names are left alone. */
RA_TEST(recovery_removes_leftover_tmp_files) {
    keys_init();
    uint64_t seed = 0x2e05;
    simfs_t *fs = simfs_new(seed);
    ra_config_t cfg;
    wal_config(&cfg, WAL_DIR);
    ra_meter_t *m = open_io(&cfg, fs, NULL);
    REQUIRE(m);
    record_grid(m, 0, 2, 1, 3, 300, &seed);
    size_t n = 0;
    CHECK_RC(ra_meter_rollover(m, RA_T_EPOCH_MS + WIN_MS, NULL, 0, &n), 0);
    ra_meter_close(m);
    wal_fix_t fix = {.fs = fs};
    fix_scan(&fix);
    REQUIRE(fix.nseg == 1);
    size_t len;
    uint8_t *b = copy_of(fs, fix.seg[0].path, &len, 0);
    set_bytes(fs, WAL_DIR "/0000000000000100.seg.tmp", b, len); /* a valid segment, as .tmp */
    set_bytes(fs, WAL_DIR "/heads.tmp", b, 10);
    set_bytes(fs, WAL_DIR "/README", b, 3);
    set_bytes(fs, WAL_DIR "/00000000000001.seg", b, len); /* not 16 hex digits */
    free(b);
    m = open_io(&cfg, fs, NULL);
    REQUIRE(m);
    CHECK_EQ_U64(ra_meter_pending_count(m), n);
    CHECK_EQ_U64(tmp_files(fs), 0);
    CHECK(simfs_data(fs, WAL_DIR "/README", &len) != NULL);
    CHECK(metric(m, "accounting_wal_corrupt_total") == 0);
    ra_meter_close(m);
    simfs_free(fs);
}

/* ---- a crash in the middle of compaction ---------------------------------------------------- */

static int g_unlinks;
static void crash_at_second_unlink(void *ud, simfs_op_t op, uint64_t n, int phase, long rc) {
    (void)n;
    (void)rc;
    if (phase == 0 && op == SIMFS_UNLINK && ++g_unlinks == 2) simfs_crash_now(ud);
}

RA_TEST(compaction_crash_brings_segments_back_harmlessly) {
    /* fail_at: which directory fsync of the compaction fails before the power cut
     * (1: the heads checkpoint's, 2: the one after the unlinks); unlink_crash: the power
     * cut comes after the first unlink instead. */
    for (int variant = 0; variant < 3; variant++) {
        keys_init();
        uint64_t seed = 0xc0a0 + (uint64_t)variant;
        simfs_t *fs = simfs_new(seed);
        ra_config_t cfg;
        wal_config(&cfg, WAL_DIR);
        ra_meter_t *m = open_io(&cfg, fs, NULL);
        REQUIRE(m);
        static ra_slice_t *sealed[256];
        size_t ns = 0;
        for (int w = 0; w < 2; w++) {
            CHECK_RC(record_window(m, w, 100, &seed, NULL), 0);
            size_t n = 0;
            CHECK_RC(
                ra_meter_rollover(m, RA_T_EPOCH_MS + (w + 1) * WIN_MS, sealed + ns, 256 - ns, &n),
                0);
            ns += n;
        }
        REQUIRE(seg_files(fs) == 2);
        ack_all(m);
        if (variant < 2)
            simfs_fail(fs, SIMFS_FSYNC_DIR, (uint64_t)variant + 1, -EIO, 0);
        else
            simfs_set_hook(fs, crash_at_second_unlink, fs);
        g_unlinks = 0;
        CHECK(ra_meter_compact(m) != 0);
        simfs_set_hook(fs, NULL, NULL);
        ra_meter_close(m);
        CHECK_RC(simfs_crash(fs, SIMFS_CRASH_DROP), 0);
        CHECK_EQ_U64(seg_files(fs), 2); /* the unlinks were never durable */
        m = open_io(&cfg, fs, NULL);
        REQUIRE(m);
        static ra_slice_t *p[256];
        size_t np = pending_all(m, p, 256);
        CHECK_EQ_U64(np, ns); /* replayed: resent, the downstream answers dup */
        for (size_t i = 0; i < np && i < ns; i++)
            if (!same_bytes(p[i], sealed[i]))
                RA_FAILF("variant %d: replayed slice %zu differs", variant, i);
        CHECK_EQ_I64(chain_breaks(p, np), 0);
        CHECK(metric(m, "accounting_wal_corrupt_total") == 0);
        unref_all(p, np);
        /* Heads continue; a second compaction finishes the job. */
        CHECK_RC(record_window(m, 3, 100, &seed, NULL), 0);
        ra_slice_t *out[64];
        size_t n = 0;
        CHECK_RC(ra_meter_rollover(m, RA_T_EPOCH_MS + 4 * WIN_MS, out, 64, &n), 0);
        for (size_t i = 0; i < n; i++) {
            const ra_slice_t *last = NULL;
            for (size_t k = 0; k < ns; k++)
                if (same_stream(sealed[k], out[i])) last = sealed[k];
            CHECK_EQ_U64(seq_of(out[i]), last ? seq_of(last) + 1 : 1);
            if (last) CHECK_MEM(ra_slice_prev_b3(out[i]), ra_slice_b3(last), 32);
            ra_slice_unref(out[i]);
        }
        ack_all(m);
        CHECK_RC(ra_meter_compact(m), 0);
        CHECK_EQ_U64(seg_files(fs), 0);
        ra_meter_close(m);
        unref_all(sealed, ns);
        simfs_free(fs);
    }
}

/* ---- the WAL as the backlog: beyond the pending ring ------------------------------------ */

/* Exports up to max pending slices in ring order, one at a time (ACK, then whatever the
 * ACK read back), checking each stream's chain across the whole export; returns how many. */
static size_t drain_in_order(ra_meter_t *m, size_t max, totals_t *got, uint64_t last_seq[TT][DD],
                             uint8_t last_b3[TT][DD][32], int *breaks) {
    size_t n = 0;
    ra_slice_t *s;
    while (n < max && ra_meter_pending_get(m, 0, &s) == 0) {
        ra_tenant_t t;
        ra_slice_get_tenant(s, &t);
        unsigned ti = 0, di = 0;
        for (unsigned i = 0; i < TT; i++)
            if (memcmp(t.b, g_tenants[i].b, 16) == 0) ti = i;
        static const char *const dn[DD] = {"bytes", "requests", "cpu_units"};
        for (unsigned i = 0; i < DD; i++)
            if (strcmp(ra_slice_dimension(s), dn[i]) == 0) di = i;
        if (seq_of(s) != last_seq[ti][di] + 1 ||
            (last_seq[ti][di] && memcmp(ra_slice_prev_b3(s), last_b3[ti][di], 32) != 0))
            (*breaks)++;
        last_seq[ti][di] = seq_of(s);
        memcpy(last_b3[ti][di], ra_slice_b3(s), 32);
        if (!add_slice(got, s)) (*breaks)++;
        if (ra_meter_ack(m, s) != 0) (*breaks)++;
        ra_slice_unref(s);
        n++;
    }
    return n;
}

/* A pending ring of 8 and a WAL: the windows sealed while nothing is ACKed go to the WAL
 * beyond the ring (they used to stop sealing at 8: "pending ring full", counts stuck in
 * the plane). They come back in order as ACKs make room, across a restart too: every
 * stream's chain is unbroken and the totals are exact. */
RA_TEST(wal_backlog_beyond_the_pending_ring) {
    iofix_t f;
    iofix_start(&f, 0xbac1);
    f.cfg.pending_slices_cap = 8;
    REQUIRE(iofix_meter(&f));
    size_t total = 0, n = 0;
    for (int64_t w = 0; w < 6; w++) {
        CHECK_RC(record_window(f.m, w, 200, &f.seed, &f.rec), 0);
        CHECK_RC(ra_meter_rollover(f.m, RA_T_EPOCH_MS + (w + 1) * WIN_MS, NULL, 0, &n), 0);
        total += n;
    }
    ra_backlog_t b;
    CHECK_RC(ra_meter_backlog(f.m, &b), 0);
    printf("# backlog: %zu slices sealed, ring 8, %llu in the WAL only\n", total,
           (unsigned long long)b.spilled);
    CHECK(total > 8);
    CHECK_EQ_U64(ra_meter_pending_count(f.m), 8);
    CHECK_EQ_U64(b.spilled, total - 8);
    CHECK(metric(f.m, "accounting_backlog_slices") == (double)(total - 8));
    CHECK(metric(f.m, "accounting_rejected_total{reason=\"pending_full\"}") == 0);
    /* Half of it exported, then a restart: recovery fills the ring, the rest waits. */
    uint64_t last_seq[TT][DD] = {{0}};
    uint8_t last_b3[TT][DD][32] = {{{0}}};
    int breaks = 0;
    totals_t got;
    memset(&got, 0, sizeof got);
    size_t exported = drain_in_order(f.m, total / 2, &got, last_seq, last_b3, &breaks);
    CHECK_EQ_U64(exported, total / 2);
    CHECK_RC(ra_meter_compact(f.m), 0);
    ra_meter_close(f.m);
    REQUIRE(iofix_meter(&f));
    CHECK_RC(ra_meter_backlog(f.m, &b), 0);
    CHECK_EQ_U64(ra_meter_pending_count(f.m) + b.spilled, total - exported);
    /* New windows while a backlog waits: they join it, behind the older slices. */
    CHECK_RC(record_window(f.m, 6, 200, &f.seed, &f.rec), 0);
    CHECK_RC(ra_meter_rollover(f.m, RA_T_EPOCH_MS + 7 * WIN_MS, NULL, 0, &n), 0);
    size_t left = drain_in_order(f.m, SIZE_MAX, &got, last_seq, last_b3, &breaks);
    CHECK_EQ_U64(left, total - exported + n);
    CHECK_EQ_I64(breaks, 0); /* in order across the restart and the backlog */
    CHECK_EQ_I64(totals_diff(&got, &f.rec), 0);
    CHECK_RC(ra_meter_backlog(f.m, &b), 0);
    CHECK_EQ_U64(b.spilled, 0);
    CHECK(b.refilled_total > 0);
    iofix_end(&f);
}

/* A segment gone from the middle of a stream's backlog: recovery says which stream misses
 * which seqs (it used to say nothing: only `verify` found the break) and counts it. */
RA_TEST(wal_recovery_reports_a_missing_middle_segment) {
    iofix_t f;
    iofix_start(&f, 0xc4a1);
    REQUIRE(iofix_meter(&f));
    ra_tenant_t t = ra_t_tenant(42);
    ra_subject_t su = ra_t_subject(42);
    size_t n;
    for (int64_t w = 0; w < 3; w++) {
        CHECK_RC(ra_meter_record_at(f.m, RA_T_EPOCH_MS + w * WIN_MS + 5, &t, &su, RA_DIM_BYTES, 7),
                 0);
        CHECK_RC(ra_meter_rollover(f.m, RA_T_EPOCH_MS + (w + 1) * WIN_MS, NULL, 0, &n), 0);
        CHECK_EQ_U64(n, 1);
    }
    ra_meter_close(f.m);
    /* one slice per segment: ids 1, 2, 3; the middle one goes */
    char seg[200];
    snprintf(seg, sizeof seg, "%s/%016x.seg", WAL_DIR, 2);
    CHECK_RC(simfs_io(f.fs)->unlink(simfs_io(f.fs)->ud, seg), 0);
    REQUIRE(iofix_meter(&f));
    CHECK(metric(f.m, "accounting_wal_chain_breaks_total") == 1);
    CHECK_EQ_U64(ra_meter_pending_count(f.m), 2); /* seq 1 and seq 3: the stream is stuck */
    iofix_end(&f);
}

int main(void) {
    printf("# test-wal\n");
    double t0 = now_s();
    RA_RUN(G_6_amnesia_on_never_creates_a_file,
           "G-6 amnesia on: no file ever, restart loses by design");
    RA_RUN(G_6_amnesia_off_restart_restores_pending_simfs,
           "G-6 amnesia off: restart restores pending and heads (sim-fs)");
    RA_RUN(G_6_amnesia_off_restart_restores_pending_real_fs,
           "G-6 amnesia off: restart restores pending and heads (real files)");
    RA_RUN(wal_recovery_bounded_memory_on_a_huge_segment,
           "WAL recovery reads a 1 GiB garbage segment in bounded memory");
    RA_RUN(wal_recovery_reports_a_missing_middle_segment,
           "WAL recovery reports a stream whose middle segment is gone");
    RA_RUN(wal_backlog_beyond_the_pending_ring,
           "the WAL holds the backlog beyond the pending ring, read back in order");
    RA_RUN(P_9_group_commit_constant_fsyncs,
           "P-9 group commit: 2 fsyncs per rollover for 1, 100, 1000 slices");
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
    RA_RUN(power_cut_at_random_points, "power cuts at random points: nothing reported is lost");
    RA_RUN(power_cut_after_io_errors,
           "power cuts after injected I/O errors: nothing reported is lost");
    RA_RUN(power_cut_negative_control_skipped_dir_fsync,
           "power cuts negative control: a skipped directory fsync is caught");
    RA_RUN(io_fsync_eio_once_rewrites_to_a_new_segment, "EIO on fsync: rewritten to a new segment");
    RA_RUN(io_fsync_eio_twice_nothing_sealed_nothing_lost,
           "EIO on both fsyncs: IoError, nothing sealed, nothing lost");
    RA_RUN(io_enospc_on_write, "ENOSPC on write: PersistenceFull, degraded, nothing lost");
    RA_RUN(io_messages_say_what_happened,
           "messages: a full disk, a read-only file system, a missing reserve, as they are");
    RA_RUN(io_short_writes_are_completed, "short writes are completed");
    RA_RUN(io_rename_eio, "EIO on rename: IoError, nothing sealed, nothing lost");
    RA_RUN(io_rename_fails_after_taking_effect,
           "EIO from a rename that took effect: nothing counted twice");
    RA_RUN(io_fsync_dir_eio_rename_taken_back, "EIO on the directory fsync: rename taken back");
    RA_RUN(io_fsync_dir_eio_twice_wal_failed_restart_decides,
           "EIO on the directory fsync twice: WAL failed, restart decides from disk");
    RA_RUN(caps_max_entries, "caps: wal_max_entries → PersistenceFull, degraded, recovers");
    RA_RUN(caps_acked_frames_reclaimed_before_refusing,
           "caps: ACKed frames are compacted away before a rollover is refused");
    RA_RUN(caps_max_bytes, "caps: wal_max_bytes → PersistenceFull, degraded, recovers");
    RA_RUN(caps_max_age, "caps: wal_max_age_s → PersistenceFull, degraded, recovers");
    RA_RUN(caps_boundary_larger_than_max_entries_makes_progress,
           "caps: a boundary larger than wal_max_entries is still sealed");
    RA_RUN(disk_full_compaction_frees_space, "disk full: compaction after ACK frees space");
    RA_RUN(restart_with_acked_slices_in_partly_acked_segments,
           "restart: a WAL within its caps reopens (ACKed slices of partly ACKed segments)");
    RA_RUN(restart_of_a_sealer_while_wal_full_clears_degraded,
           "restart: a new sealer that makes room clears the plane's degraded flag");
    RA_RUN(restart_with_a_transient_read_error_loses_nothing,
           "restart: a transient read error at open loses no segment");
    RA_RUN(restart_with_a_transient_heads_read_error_keeps_chains,
           "restart: a transient read error on the heads checkpoint forks no chain");
    RA_RUN(recovery_removes_leftover_tmp_files, "recovery removes leftover .tmp files");
    RA_RUN(compaction_crash_brings_segments_back_harmlessly,
           "compaction crash: segments come back, replayed harmlessly");
    printf("# test-wal: %.2f s\n", now_s() - t0);
    RA_DONE();
}
