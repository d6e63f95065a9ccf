/* The write-ahead log (C-5, I-9, I-10): G-6 (the amnesia matrix), group commit (P-9),
 * recovery in bounded memory, a missing middle segment, and the WAL as the backlog beyond
 * the pending ring. The other groups have their own files: test-wal-damage.c (G-18),
 * test-wal-powercut.c, test-wal-io.c (I/O errors, caps), test-wal-restart.c; the fixture
 * they share is tests/wal_fixture.h. */
#include "wal_fixture.h"

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

/* s continues its stream's chain from the newest slice of that stream in a[0..na) and
 * b[0..nb) (seq + 1, prev_b3 = its b3), or starts the stream (seq 1) when there is none. */
static void check_continues(const ra_slice_t *s, ra_slice_t *const *a, size_t na,
                            ra_slice_t *const *b, size_t nb) {
    const ra_slice_t *last = NULL;
    for (size_t k = 0; k < na + nb; k++) {
        const ra_slice_t *o = k < na ? a[k] : b[k - na];
        if (same_stream(o, s) && (!last || seq_of(o) > seq_of(last))) last = o;
    }
    if (!last) {
        CHECK_EQ_U64(seq_of(s), 1);
        return;
    }
    CHECK_EQ_U64(seq_of(s), seq_of(last) + 1);
    CHECK_MEM(ra_slice_prev_b3(s), ra_slice_b3(last), 32);
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
    for (size_t i = 0; i < n; i++)
        check_continues(next[i], sealed, ns, NULL, 0);

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
    for (size_t i = 0; i < na; i++)
        check_continues(after[i], next, n, sealed, ns);
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
    walfix_t f;
    walfix_start(&f, 0xbac1);
    f.cfg.pending_slices_cap = 8;
    REQUIRE(walfix_meter(&f));
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
    REQUIRE(walfix_meter(&f));
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
    walfix_end(&f);
}

/* A segment gone from the middle of a stream's backlog: recovery says which stream misses
 * which seqs (it used to say nothing: only `verify` found the break) and counts it. */
RA_TEST(wal_recovery_reports_a_missing_middle_segment) {
    walfix_t f;
    walfix_start(&f, 0xc4a1);
    REQUIRE(walfix_meter(&f));
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
    REQUIRE(walfix_meter(&f));
    CHECK(metric(f.m, "accounting_wal_chain_breaks_total") == 1);
    CHECK_EQ_U64(ra_meter_pending_count(f.m), 2); /* seq 1 and seq 3: the stream is stuck */
    walfix_end(&f);
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
    printf("# test-wal: %.2f s\n", now_s() - t0);
    RA_DONE();
}
