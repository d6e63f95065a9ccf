/* The freeze protocol (core/seal.c) under real process death. A process-shared plane and a
 * real WAL directory; a forked child is the sealer, opened with an I/O layer around the
 * POSIX backend (tests/sim-fs.c in its POSIX mode, compiled in below because every test
 * executable is built from its one .c file) that calls _exit(9) just before or just after
 * I/O call number K of its rollover, K swept over every call the rollover makes, and once
 * right after the rollover returned (the frozen pairs released, nothing closed). Writers
 * record known totals before and while it runs. Then a new sealer opens the same plane and
 * WAL and rolls over: every count is sealed exactly once (per key, the sum over all pending
 * slices equals what was recorded), chains are continuous, seal_intent is cleared and no
 * pair is left frozen.
 *
 * A second test kills the sealer with SIGKILL at random moments of a run of large
 * rollovers, with a writer recording concurrently (late records into the windows being
 * sealed included), so kills land in the scan, the freeze, the build, the write and the
 * release of frozen pairs. */
#include "wal_fixture.h"

#include <signal.h>

enum { NT = 4, ND = 3 };

static void quiet_log(void *ud, int level, const char *msg) {
    (void)ud;
    if (getenv("RA_TEST_VERBOSE")) fprintf(stderr, "[%d] log %d: %s\n", (int)getpid(), level, msg);
}

/* Subjects carry their index in their first bytes, tenants are ra_t_tenant(100 + t). */
static ra_subject_t subj(unsigned i) {
    ra_subject_t s;
    memset(s.b, 0xA5, sizeof s.b);
    s.b[0] = (uint8_t)(i >> 24);
    s.b[1] = (uint8_t)(i >> 16);
    s.b[2] = (uint8_t)(i >> 8);
    s.b[3] = (uint8_t)i;
    return s;
}

static uint64_t inc_of(unsigned t, unsigned s, unsigned d, unsigned w, unsigned pass) {
    return 1 + (t * 7 + s * 13 + d * 17 + w * 3 + pass * 5) % 11;
}

typedef struct {
    unsigned ns; /* subjects */
    uint64_t *v; /* NT * ns * ND */
} cp_totals_t;

static void totals_init(cp_totals_t *t, unsigned ns) {
    t->ns = ns;
    t->v = calloc((size_t)NT * ns * ND, sizeof *t->v);
    if (!t->v) abort();
}

static uint64_t *cell(cp_totals_t *t, unsigned ti, unsigned si, unsigned d) {
    return &t->v[((size_t)ti * t->ns + si) * ND + d];
}

/* Records window w (at time offset `at_ms` into it) for every key; adds to tot if given. */
static int record_all(ra_meter_t *m, unsigned ns, unsigned w, unsigned pass, int64_t at_ms,
                      cp_totals_t *tot) {
    for (unsigned t = 0; t < NT; t++) {
        ra_tenant_t ten = ra_t_tenant(100 + t);
        for (unsigned s = 0; s < ns; s++) {
            ra_subject_t sub = subj(s);
            for (unsigned d = 0; d < ND; d++) {
                uint64_t inc = inc_of(t, s, d, w, pass);
                int rc = ra_meter_record_at(m, RA_T_EPOCH_MS + (int64_t)w * WIN_MS + at_ms, &ten,
                                            &sub, (int)d, inc);
                if (rc != 0) return rc;
                if (tot) *cell(tot, t, s, d) += inc;
            }
        }
    }
    return 0;
}

static bool cp_add_slice(cp_totals_t *tot, const ra_slice_t *sl) {
    ra_tenant_t t;
    ra_slice_get_tenant(sl, &t);
    unsigned n = (unsigned)t.b[0] << 24 | (unsigned)t.b[1] << 16 | (unsigned)t.b[2] << 8 | t.b[3];
    if (n < 100 || n >= 100 + NT) return false;
    unsigned ti = n - 100, di = ND;
    static const char *const dn[ND] = {"bytes", "requests", "cpu_units"};
    for (unsigned i = 0; i < ND; i++)
        if (strcmp(ra_slice_dimension(sl), dn[i]) == 0) di = i;
    if (di == ND) return false;
    for (size_t r = 0; r < ra_slice_row_count(sl); r++) {
        ra_subject_t s;
        uint64_t inc;
        ra_slice_row(sl, r, &s, &inc);
        unsigned si =
            (unsigned)s.b[0] << 24 | (unsigned)s.b[1] << 16 | (unsigned)s.b[2] << 8 | s.b[3];
        if (si >= tot->ns) return false;
        *cell(tot, ti, si, di) += inc;
    }
    return true;
}

/* Nothing was ACKed: per stream, pending must be seq 1, 2, 3, ... with every link. */
static int chain_breaks_from_1(ra_slice_t *const *s, size_t n) {
    int breaks = 0;
    static const uint8_t zero[32];
    for (size_t i = 0; i < n; i++) {
        const ra_slice_t *prev = NULL;
        for (size_t j = 0; j < i; j++)
            if (same_stream(s[j], s[i])) prev = s[j];
        uint64_t want = prev ? seq_of(prev) + 1 : 1;
        if (seq_of(s[i]) != want) breaks++;
        if (memcmp(ra_slice_prev_b3(s[i]), prev ? ra_slice_b3(prev) : zero, 32) != 0) breaks++;
    }
    return breaks;
}

typedef struct {
    char dir[600], shm[700], wal[700];
} paths_t;

static void paths_make(paths_t *p, const char *name) {
    snprintf(p->dir, sizeof p->dir, "%s/%s", ra_t_tmpdir(), name);
    char cmd[800];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", p->dir);
    if (system(cmd) != 0) abort();
    if (mkdir(p->dir, 0700) != 0) abort();
    snprintf(p->shm, sizeof p->shm, "%s/plane", p->dir);
    snprintf(p->wal, sizeof p->wal, "%s/wal", p->dir);
}

static void cfg_make(ra_config_t *cfg, const paths_t *p, unsigned capacity, bool sealer) {
    ra_t_config(cfg);
    cfg->amnesia = 0;
    cfg->shm_path = p->shm;
    cfg->wal_dir = sealer ? p->wal : NULL;
    cfg->capacity_rows = capacity;
    cfg->pending_slices_cap = 4096;
    cfg->shards = 8;
    cfg->log = quiet_log;
}

static ra_meter_t *open_with(const ra_config_t *cfg, const ra__io_t *io) {
    ra_meter_t *m = NULL;
    char err[512];
    int rc = ra__meter_open_io(cfg, io, &m, err, sizeof err);
    if (rc != 0) fprintf(stderr, "[%d] open: %s: %s\n", (int)getpid(), ra_err_name(rc), err);
    return m;
}

/* The recovery check: a new sealer on the same plane and WAL seals what is left; every count
 * is sealed exactly once, chains are continuous, nothing is frozen. Returns failures. */
typedef struct {
    _Atomic uint32_t go, run_us, nrep;
    uint8_t b3[8192][32]; /* every slice a rollover reported sealed, in order */
} shared_t;

static int recover_and_check(const paths_t *p, unsigned ns, unsigned capacity, unsigned w_end,
                             const cp_totals_t *want, const char *what, const shared_t *rep) {
    int bad = 0;
    ra_config_t cfg;
    cfg_make(&cfg, p, capacity, true);
    ra_meter_t *m = open_with(&cfg, ra__io_posix());
    if (!m) return 1;
    if (atomic_load(&m->hdr->seal_intent) != 0) {
        fprintf(stderr, "%s: seal_intent left set after recovery\n", what);
        bad++;
    }
    int fz = frozen_pairs(m);
    if (fz) {
        fprintf(stderr, "%s: %d frozen pairs after recovery\n", what, fz);
        bad++;
    }
    size_t n = 0;
    int rc = ra_meter_rollover(m, RA_T_EPOCH_MS + (int64_t)w_end * WIN_MS, NULL, 0, &n);
    if (rc != 0) {
        fprintf(stderr, "%s: rollover after recovery: %s\n", what, ra_err_name(rc));
        bad++;
    }
    size_t np = ra_meter_pending_count(m);
    ra_slice_t **pend = calloc(np ? np : 1, sizeof *pend);
    size_t got = 0;
    ra_meter_pending_list(m, 0, pend, np, &got);
    cp_totals_t sum;
    totals_init(&sum, ns);
    for (size_t i = 0; i < got; i++)
        if (!cp_add_slice(&sum, pend[i])) bad++;
    size_t diff = 0;
    uint64_t sw = 0, sg = 0;
    for (size_t i = 0; i < (size_t)NT * ns * ND; i++) {
        diff += sum.v[i] != want->v[i];
        sw += want->v[i];
        sg += sum.v[i];
    }
    if (diff) {
        fprintf(stderr, "%s: %zu keys differ: sealed %llu, recorded %llu\n", what, diff,
                (unsigned long long)sg, (unsigned long long)sw);
        bad++;
    }
    int br = chain_breaks_from_1(pend, got);
    if (br) {
        fprintf(stderr, "%s: %d chain breaks over %zu pending slices\n", what, br, got);
        bad++;
    }
    if (frozen_pairs(m)) bad++;
    /* every slice the killed sealer reported sealed is pending (nothing was ACKed) */
    uint32_t nrep = rep ? atomic_load(&rep->nrep) : 0;
    size_t missing = 0;
    for (uint32_t i = 0; i < nrep; i++) {
        bool found = false;
        for (size_t j = 0; j < got && !found; j++)
            found = memcmp(ra_slice_b3(pend[j]), rep->b3[i], 32) == 0;
        missing += !found;
    }
    if (missing) {
        fprintf(stderr, "%s: %zu of %u reported slices are not pending\n", what, missing, nrep);
        bad++;
    }
    /* ACK everything and compact: nothing pending after a reopen, chains continue */
    uint64_t maxseq = 0;
    for (size_t i = 0; i < got; i++) {
        if (seq_of(pend[i]) > maxseq) maxseq = seq_of(pend[i]);
        if (rep && ra_meter_ack(m, pend[i]) != 0) bad++;
    }
    if (rep) {
        if (ra_meter_compact(m) != 0) bad++;
        ra_meter_close(m);
        m = open_with(&cfg, ra__io_posix());
        if (!m) return bad + 1;
        if (ra_meter_pending_count(m) != 0) {
            fprintf(stderr, "%s: %zu pending after ACK + compaction + reopen\n", what,
                    ra_meter_pending_count(m));
            bad++;
        }
        ra_tenant_t t = ra_t_tenant(100);
        ra_subject_t s0 = subj(0);
        ra_slice_t *out = NULL;
        ra_meter_record_at(m, RA_T_EPOCH_MS + (int64_t)(w_end + 1) * WIN_MS, &t, &s0, 0, 1);
        if (ra_meter_rollover(m, RA_T_EPOCH_MS + (int64_t)(w_end + 2) * WIN_MS, &out, 1, &n) != 0 ||
            n != 1) {
            bad++;
        } else {
            const ra_slice_t *last = NULL;
            for (size_t i = 0; i < got; i++)
                if (same_stream(pend[i], out)) last = pend[i];
            if (!last || seq_of(out) != seq_of(last) + 1 ||
                memcmp(ra_slice_prev_b3(out), ra_slice_b3(last), 32) != 0) {
                fprintf(stderr, "%s: the chain does not continue after compaction\n", what);
                bad++;
            }
        }
        ra_slice_unref(out);
    }
    (void)maxseq;
    for (size_t i = 0; i < got; i++)
        ra_slice_unref(pend[i]);
    free(pend);
    free(sum.v);
    ra_meter_close(m);
    return bad;
}

/* ---- the deterministic sweep ------------------------------------------------------------- */

static uint64_t g_exit_call; /* absolute call number */
static int g_exit_phase;     /* 0: before the call, 1: after it */

static void exit_hook(void *ud, simfs_op_t op, uint64_t n, int phase, long rc) {
    (void)ud;
    (void)op;
    (void)rc;
    if (g_exit_call && n == g_exit_call && phase == g_exit_phase) _exit(9);
}

static simfs_op_t g_seq[64];
static size_t g_nseq;
static void seq_hook(void *ud, simfs_op_t op, uint64_t n, int phase, long rc) {
    (void)ud;
    (void)n;
    (void)rc;
    if (phase == 0 && g_nseq < 64) g_seq[g_nseq++] = op;
}

/* The calls a rollover makes, counted in a dry run. */
static uint64_t rollover_calls(unsigned ns, unsigned capacity) {
    paths_t p;
    paths_make(&p, "crash-dry");
    ra_config_t cfg;
    cfg_make(&cfg, &p, capacity, true);
    simfs_t *fs = simfs_new_posix();
    ra_meter_t *m = open_with(&cfg, simfs_io(fs));
    if (!m) abort();
    if (record_all(m, ns, 0, 0, 5, NULL) != 0) abort();
    size_t n;
    if (ra_meter_rollover(m, RA_T_EPOCH_MS + WIN_MS, NULL, 0, &n) != 0) abort();
    if (record_all(m, ns, 1, 0, 5, NULL) != 0) abort();
    uint64_t before[SIMFS_NOPS];
    for (int o = 0; o < SIMFS_NOPS; o++)
        before[o] = simfs_count(fs, (simfs_op_t)o);
    uint64_t c0 = simfs_calls(fs);
    g_nseq = 0;
    simfs_set_hook(fs, seq_hook, NULL);
    if (ra_meter_rollover(m, RA_T_EPOCH_MS + 2 * WIN_MS, NULL, 0, &n) != 0) abort();
    simfs_set_hook(fs, NULL, NULL);
    uint64_t calls = simfs_calls(fs) - c0;
    printf("# a rollover of %u streams makes %llu I/O calls:", NT * ND, (unsigned long long)calls);
    for (size_t i = 0; i < g_nseq; i++)
        printf(" %s", simfs_op_name(g_seq[i]));
    printf("\n");
    (void)before;
    ra_meter_close(m);
    simfs_free(fs);
    return calls;
}

/* A crash case's start: fresh paths under name, totals of ns subjects to fill, and the
 * recording meter (not a sealer) on POSIX I/O with its configuration in *wcfg. */
static ra_meter_t *writer_open(paths_t *p, const char *name, cp_totals_t *want, unsigned ns,
                               ra_config_t *wcfg, unsigned capacity) {
    paths_make(p, name);
    totals_init(want, ns);
    cfg_make(wcfg, p, capacity, false);
    return open_with(wcfg, ra__io_posix());
}

/* One crash point: `k` in 1..calls with `phase`, or k == 0: exit right after the rollover
 * returned. Returns failures. */
static int crash_point(unsigned ns, unsigned capacity, uint64_t k, int phase, const char *what,
                       bool sabotage) {
    paths_t p;
    cp_totals_t want;
    ra_config_t wcfg;
    ra_meter_t *writer = writer_open(&p, "crash-point", &want, ns, &wcfg, capacity);
    if (!writer) return 1;
    /* window 0 sealed by a first, healthy sealer: segments and chains exist */
    if (record_all(writer, ns, 0, 0, 5, &want) != 0) return 1;
    {
        ra_config_t scfg;
        cfg_make(&scfg, &p, capacity, true);
        ra_meter_t *s = open_with(&scfg, ra__io_posix());
        size_t n;
        if (!s || ra_meter_rollover(s, RA_T_EPOCH_MS + WIN_MS, NULL, 0, &n) != 0) return 1;
        ra_meter_close(s);
    }
    if (record_all(writer, ns, 1, 0, 5, &want) != 0) return 1;
    /* a concurrent writer: late records into window 1 (being sealed) and window 2 */
    for (unsigned t = 0; t < NT; t++)
        for (unsigned s = 0; s < ns; s++)
            for (unsigned d = 0; d < ND; d++) {
                *cell(&want, t, s, d) += inc_of(t, s, d, 1, 1);
                *cell(&want, t, s, d) += inc_of(t, s, d, 2, 0);
            }
    fflush(NULL);
    pid_t wpid = fork();
    if (wpid == 0) {
        ra_meter_t *w = open_with(&wcfg, ra__io_posix());
        if (!w) _exit(3);
        if (record_all(w, ns, 1, 1, 59000, NULL) != 0) _exit(4);
        if (record_all(w, ns, 2, 0, 5, NULL) != 0) _exit(5);
        _exit(0);
    }
    pid_t spid = fork();
    if (spid == 0) {
        ra_config_t scfg;
        cfg_make(&scfg, &p, capacity, true);
        simfs_t *fs = simfs_new_posix();
        ra_meter_t *s = open_with(&scfg, simfs_io(fs));
        if (!s) _exit(3);
        g_exit_phase = phase;
        g_exit_call = k ? simfs_calls(fs) + k : 0;
        simfs_set_hook(fs, exit_hook, NULL);
        size_t n;
        int rc = ra_meter_rollover(s, RA_T_EPOCH_MS + 2 * WIN_MS, NULL, 0, &n);
        if (k == 0) _exit(9); /* killed with the pairs released, nothing closed */
        _exit(rc == 0 ? 0 : 6);
    }
    int st = 0, wst = 0;
    waitpid(spid, &st, 0);
    waitpid(wpid, &wst, 0);
    int bad = 0;
    if (!WIFEXITED(wst) || WEXITSTATUS(wst) != 0) {
        fprintf(stderr, "%s: writer failed (%d)\n", what, WEXITSTATUS(wst));
        bad++;
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 9) {
        fprintf(stderr, "%s: the sealer did not die at its crash point (status %d)\n", what,
                WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        bad++;
    }
    /* The negative control: a recovery that does not know about the interrupted seal. */
    if (sabotage) atomic_store(&writer->hdr->seal_intent, 0);
    ra_meter_close(writer);
    bad += recover_and_check(&p, ns, capacity, 3, &want, what, NULL);
    free(want.v);
    return bad;
}

RA_TEST(freeze_protocol_crash_at_every_io_call) {
    const unsigned ns = 50, capacity = 4096;
    uint64_t calls = rollover_calls(ns, capacity);
    REQUIRE(calls >= 6);
    int cases = 0, failed = 0;
    double t0 = now_s();
    for (int phase = 0; phase < 2; phase++)
        for (uint64_t k = 1; k <= calls; k++) {
            char what[96];
            snprintf(what, sizeof what, "exit %s call %llu of %llu", phase ? "after" : "before",
                     (unsigned long long)k, (unsigned long long)calls);
            int bad = crash_point(ns, capacity, k, phase, what, false);
            if (bad) RA_FAILF("%s: %d failures", what, bad);
            failed += bad != 0;
            cases++;
        }
    int bad = crash_point(ns, capacity, 0, 0, "exit right after the rollover returned", false);
    if (bad) RA_FAILF("exit after return: %d failures", bad);
    failed += bad != 0;
    cases++;
    /* Negative controls: the same crash points with seal_intent wiped before recovery must be
     * caught (frozen pairs left, counts missing) — before the rename and after the fsync. */
    REQUIRE(g_nseq == calls && g_seq[calls - 1] == SIMFS_FSYNC_DIR);
    fprintf(stderr, "# negative controls follow; their complaints are expected\n");
    int caught = 0;
    caught +=
        crash_point(ns, capacity, calls, 1, "control: intent wiped after the dir fsync", true) > 0;
    caught += crash_point(ns, capacity, 1, 0, "control: intent wiped before the create", true) > 0;
    printf("# negative controls: %d of 2 sabotaged recoveries caught\n", caught);
    CHECK_EQ_I64(caught, 2);
    printf("# freeze protocol: %d crash points (before and after each of %llu I/O calls, and "
           "after the rollover returned), %d failed (%.2f s)\n",
           cases, (unsigned long long)calls, failed, now_s() - t0);
}

/* ---- random SIGKILL during large rollovers -------------------------------------------------- */

RA_TEST(sealer_sigkill_at_random_moments) {
    const unsigned ns = quick() ? 300 : 600, capacity = 65536, windows = 6;
    int iters = quick() ? 10 : 24;
    const char *env = getenv("RA_G7_ITERATIONS"); /* the soak: >= 1000 */
    if (env && atoi(env) > 0) iters = atoi(env);
    uint64_t reported = 0;
    uint64_t seed = 0x7e11;
    printf("# random SIGKILL of the sealer: seed %#llx, %d iterations, %u keys per window\n",
           (unsigned long long)seed, iters, NT * ns * ND);
    int failed = 0, killed = 0;
    double t0 = now_s();
    /* how long a sealer's run takes, to spread the kills over it */
    double span = 0;
    for (int it = 0; it < iters; it++) {
        paths_t p;
        cp_totals_t want;
        ra_config_t wcfg;
        ra_meter_t *writer = writer_open(&p, "crash-random", &want, ns, &wcfg, capacity);
        REQUIRE(writer);
        for (unsigned w = 0; w < windows; w++)
            if (record_all(writer, ns, w, 0, 5, &want) != 0) RA_FAILF("record");
        for (unsigned w = 0; w < windows; w++) /* the concurrent writer's late records */
            for (unsigned t = 0; t < NT; t++)
                for (unsigned s = 0; s < ns; s++)
                    for (unsigned d = 0; d < ND; d++)
                        *cell(&want, t, s, d) += inc_of(t, s, d, w, 1);
        fflush(NULL);
        shared_t *sh =
            mmap(NULL, sizeof(shared_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        REQUIRE(sh != MAP_FAILED);
        pid_t wpid = fork();
        if (wpid == 0) {
            ra_meter_t *w = open_with(&wcfg, ra__io_posix());
            if (!w) _exit(3);
            while (!atomic_load(&sh->go))
                usleep(50);
            for (unsigned win = 0; win < windows; win++)
                if (record_all(w, ns, win, 1, 59000, NULL) != 0) _exit(4);
            _exit(0);
        }
        pid_t spid = fork();
        if (spid == 0) {
            ra_config_t scfg;
            cfg_make(&scfg, &p, capacity, true);
            ra_meter_t *s = open_with(&scfg, ra__io_posix());
            if (!s) _exit(3);
            atomic_store(&sh->go, 1);
            double a = now_s();
            for (unsigned w = 1; w <= windows; w++) {
                size_t n = 0;
                static ra_slice_t *out[256];
                if (ra_meter_rollover(s, RA_T_EPOCH_MS + (int64_t)w * WIN_MS, out, 256, &n) != 0)
                    _exit(6);
                /* reported sealed: remember it before anything else can happen */
                uint32_t k = atomic_load(&sh->nrep);
                for (size_t i = 0; i < n && i < 256 && k + i < 8192; i++)
                    memcpy(sh->b3[k + i], ra_slice_b3(out[i]), 32);
                atomic_store(&sh->nrep, k + (uint32_t)(n < 256 ? n : 256));
            }
            atomic_store(&sh->run_us, (uint32_t)((now_s() - a) * 1e6));
            _exit(0);
        }
        while (!atomic_load(&sh->go))
            usleep(20);
        uint64_t r = ra_t_rand(&seed);
        double d =
            span > 0 ? span * (double)(r % 1000) / 1000.0 : 0.02 * (double)(r % 1000) / 1000.0;
        usleep((useconds_t)(d * 1e6));
        kill(spid, SIGKILL);
        int st = 0, wst = 0;
        waitpid(spid, &st, 0);
        waitpid(wpid, &wst, 0);
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0 && atomic_load(&sh->run_us)) {
            double run = atomic_load(&sh->run_us) / 1e6;
            if (run > span) span = run;
        }
        killed += WIFSIGNALED(st);
        if (WIFEXITED(st) && WEXITSTATUS(st) != 0) RA_FAILF("sealer exited %d", WEXITSTATUS(st));
        if (!WIFEXITED(wst) || WEXITSTATUS(wst) != 0) RA_FAILF("writer failed");
        ra_meter_close(writer);
        char what[64];
        snprintf(what, sizeof what, "random kill %d (after %.1f ms)", it, d * 1e3);
        reported += atomic_load(&sh->nrep);
        int bad = recover_and_check(&p, ns, capacity, windows + 1, &want, what, sh);
        munmap(sh, sizeof *sh);
        if (bad) RA_FAILF("%s: %d failures", what, bad);
        failed += bad != 0;
        free(want.v);
    }
    printf("# random SIGKILL: %d iterations, %d killed mid-run (longest full run %.1f ms), "
           "%llu reported slices checked, %d failed (%.2f s)\n",
           iters, killed, span * 1e3, (unsigned long long)reported, failed, now_s() - t0);
    CHECK(killed > iters / 3);
}

int main(void) {
    printf("# test-wal-crashpoints\n");
    RA_RUN(
        freeze_protocol_crash_at_every_io_call,
        "freeze protocol: sealer exits at every I/O call of a rollover, nothing lost or doubled");
    RA_RUN(sealer_sigkill_at_random_moments,
           "G-7 sealer kill -9 mid-flush: reported slices recovered, counts sealed once, "
           "compaction after ACK");
    RA_DONE();
}
