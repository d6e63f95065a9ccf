/* The process-shared counter plane (cfg.shm_path): creation, attachment, refusal of
 * foreign, damaged, unsafe or mismatched files, the one-sealer lock and its hand-over when
 * the sealer is killed, and chains that continue across sealers. */
#include "internal.h"
#include "ra_test.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#define WIN_MS 60000LL

static char *plane_path(const char *name) {
    static char path[8][600];
    static int k;
    char *p = path[k++ % 8];
    snprintf(p, 600, "%s/%s", ra_t_tmpdir(), name);
    return p;
}

static int open_rc(ra_config_t *cfg, char *err, size_t errlen) {
    ra_meter_t *m = NULL;
    int rc = ra_meter_open(cfg, &m, err, errlen);
    if (m) ra_meter_close(m);
    return rc;
}

RA_TEST(shm_created_0600_and_shared_between_meters) {
    ra_config_t cfg;
    ra_t_config(&cfg);
    cfg.shm_path = plane_path("plane-a");
    ra_meter_t *a = ra_t_open(&cfg), *b = ra_t_open(&cfg);
    REQUIRE(a && b);
    struct stat st;
    REQUIRE(stat(cfg.shm_path, &st) == 0);
    CHECK_EQ_U64(st.st_mode & 0777, 0600);
    ra_tenant_t t = ra_t_tenant(1);
    ra_subject_t s = ra_t_subject(1);
    CHECK_RC(ra_meter_record_at(a, RA_T_EPOCH_MS, &t, &s, RA_DIM_BYTES, 5), 0);
    CHECK_RC(ra_meter_record_at(b, RA_T_EPOCH_MS, &t, &s, RA_DIM_BYTES, 7), 0);
    size_t n;
    CHECK_RC(ra_meter_rollover(a, RA_T_EPOCH_MS + WIN_MS, NULL, 0, &n), 0);
    CHECK_EQ_U64(n, 1);
    /* One sealer per plane: the other attachment is refused. */
    CHECK_RC(ra_meter_rollover(b, RA_T_EPOCH_MS + 2 * WIN_MS, NULL, 0, &n), RA_EBUSY);
    ra_slice_t *sl;
    REQUIRE(ra_meter_pending_get(a, 0, &sl) == 0);
    uint64_t inc;
    ra_slice_row(sl, 0, NULL, &inc);
    CHECK_EQ_U64(inc, 12);
    ra_slice_unref(sl);
    /* Rejects from any process show in the shared metrics. */
    CHECK_RC(ra_meter_record_at(b, RA_T_EPOCH_MS, &t, &s, 99, 1), RA_EINVAL);
    CHECK(ra_t_metric(a, "accounting_rejected_total{reason=\"invalid\"}") == 1);
    ra_meter_close(a);
    /* The lock goes with the meter: b may seal now. */
    CHECK_RC(ra_meter_rollover(b, RA_T_EPOCH_MS + 2 * WIN_MS, NULL, 0, &n), 0);
    ra_meter_close(b);
}

RA_TEST(shm_refuses_mismatched_configuration) {
    ra_config_t cfg;
    ra_t_config(&cfg);
    cfg.shm_path = plane_path("plane-b");
    ra_meter_t *a = ra_t_open(&cfg);
    REQUIRE(a);
    char err[512];
    ra_config_t c2 = cfg;
    c2.window_len_s = 300;
    CHECK_RC(open_rc(&c2, err, sizeof err), RA_EINCOMPAT);
    CHECK(strstr(err, "window_len_s=60") && strstr(err, "300") && strstr(err, "restart"));
    c2 = cfg;
    c2.capacity_rows = 8192;
    CHECK_RC(open_rc(&c2, err, sizeof err), RA_EINCOMPAT);
    CHECK(strstr(err, "capacity_rows") != NULL);
    c2 = cfg;
    const char *dims[] = {"tokens"};
    c2.dimensions = dims;
    c2.n_dimensions = 1;
    CHECK_RC(open_rc(&c2, err, sizeof err), RA_EINCOMPAT);
    uint8_t key[32] = {1};
    c2 = cfg;
    c2.subject_key = key;
    CHECK_RC(open_rc(&c2, err, sizeof err), RA_EINCOMPAT);
    CHECK(strstr(err, "subject_key") != NULL);
    CHECK_RC(open_rc(&cfg, err, sizeof err), 0);
    ra_meter_close(a);
}

static void write_file(const char *path, const void *buf, size_t len, mode_t mode) {
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    if (fd < 0 || write(fd, buf, len) != (ssize_t)len) abort();
    fchmod(fd, mode);
    close(fd);
}

RA_TEST(shm_refuses_foreign_damaged_and_unsafe_files) {
    ra_config_t cfg;
    ra_t_config(&cfg);
    char err[512];
    static uint8_t junk[1 << 20];
    uint64_t seed = 77;
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (uint8_t)ra_t_rand(&seed);

    cfg.shm_path = plane_path("foreign");
    write_file(cfg.shm_path, junk, sizeof junk, 0600);
    CHECK_RC(open_rc(&cfg, err, sizeof err), RA_EINCOMPAT);
    CHECK(strstr(err, "not a ron-accounting counter plane") != NULL);

    cfg.shm_path = plane_path("tiny");
    write_file(cfg.shm_path, "RONACCT", 7, 0600);
    CHECK_RC(open_rc(&cfg, err, sizeof err), RA_EINCOMPAT);

    cfg.shm_path = plane_path("dir");
    mkdir(cfg.shm_path, 0700);
    CHECK(open_rc(&cfg, err, sizeof err) < 0);

    /* A real plane, then damaged or loosened in various ways. */
    cfg.shm_path = plane_path("real");
    CHECK_RC(open_rc(&cfg, err, sizeof err), 0);
    chmod(cfg.shm_path, 0620);
    CHECK_RC(open_rc(&cfg, err, sizeof err), RA_EINCOMPAT);
    CHECK(strstr(err, "writable by group or others") != NULL);
    chmod(cfg.shm_path, 0600);

    int fd = open(cfg.shm_path, O_RDWR);
    REQUIRE(fd >= 0);
    uint32_t layout = 99;
    REQUIRE(pwrite(fd, &layout, 4, offsetof(ra__plane_hdr_t, layout)) == 4);
    CHECK_RC(open_rc(&cfg, err, sizeof err), RA_EINCOMPAT);
    CHECK(strstr(err, "layout 99") != NULL);
    layout = RA_PLANE_LAYOUT;
    REQUIRE(pwrite(fd, &layout, 4, offsetof(ra__plane_hdr_t, layout)) == 4);
    CHECK_RC(open_rc(&cfg, err, sizeof err), 0);
    struct stat st;
    fstat(fd, &st);
    REQUIRE(ftruncate(fd, st.st_size - 4096) == 0);
    CHECK_RC(open_rc(&cfg, err, sizeof err), RA_EINCOMPAT);
    CHECK(strstr(err, "damaged") != NULL);
    close(fd);

    char link_path[700];
    snprintf(link_path, sizeof link_path, "%s/link", ra_t_tmpdir());
    REQUIRE(symlink(plane_path("real"), link_path) == 0);
    cfg.shm_path = link_path;
    CHECK(open_rc(&cfg, err, sizeof err) < 0); /* never follows a symlink */
}

/* Racing creators end up on one plane, and everything every process recorded is sealed. */
RA_TEST(shm_racing_creators_share_one_plane) {
    ra_config_t cfg;
    ra_t_config(&cfg);
    cfg.shm_path = plane_path("race");
    enum { P = 6 };
    pid_t pids[P];
    for (int i = 0; i < P; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            ra_meter_t *m = NULL;
            if (ra_meter_open(&cfg, &m, NULL, 0) != 0) _exit(1);
            ra_tenant_t t = ra_t_tenant(1);
            ra_subject_t s = ra_t_subject((unsigned)i);
            for (int k = 0; k < 1000; k++)
                if (ra_meter_record_at(m, RA_T_EPOCH_MS + k, &t, &s, RA_DIM_BYTES, 1) != 0)
                    _exit(2);
            ra_meter_close(m);
            _exit(0);
        }
    }
    for (int i = 0; i < P; i++) {
        int st;
        waitpid(pids[i], &st, 0);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    ra_meter_t *m = ra_t_open(&cfg);
    REQUIRE(m);
    size_t n;
    CHECK_RC(ra_meter_rollover(m, RA_T_EPOCH_MS + WIN_MS, NULL, 0, &n), 0);
    REQUIRE(n == 1);
    ra_slice_t *sl;
    REQUIRE(ra_meter_pending_get(m, 0, &sl) == 0);
    CHECK_EQ_U64(ra_slice_row_count(sl), P);
    for (size_t r = 0; r < ra_slice_row_count(sl); r++) {
        uint64_t inc;
        ra_slice_row(sl, r, NULL, &inc);
        CHECK_EQ_U64(inc, 1000);
    }
    ra_slice_unref(sl);
    ra_meter_close(m);
}

/* kill -9 of the sealer releases the lock; the next sealer continues every chain: seq and
 * prev_b3 live in the plane, not in the dead process. */
RA_TEST(shm_sealer_killed_next_sealer_continues_chain) {
    ra_config_t cfg;
    ra_t_config(&cfg);
    cfg.shm_path = plane_path("handover");
    ra_tenant_t t = ra_t_tenant(4);
    ra_subject_t s = ra_t_subject(4);
    uint8_t *shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    REQUIRE(shared != MAP_FAILED);
    pid_t pid = fork();
    if (pid == 0) {
        ra_meter_t *m = NULL;
        if (ra_meter_open(&cfg, &m, NULL, 0) != 0) _exit(1);
        ra_meter_record_at(m, RA_T_EPOCH_MS, &t, &s, RA_DIM_BYTES, 3);
        size_t n;
        if (ra_meter_rollover(m, RA_T_EPOCH_MS + WIN_MS, NULL, 0, &n) != 0 || n != 1) _exit(2);
        ra_slice_t *sl;
        ra_meter_pending_get(m, 0, &sl);
        memcpy(shared, ra_slice_b3(sl), 32);
        __atomic_store_n(&shared[100], 1, __ATOMIC_RELEASE);
        for (;;)
            pause(); /* holds the lock until killed */
    }
    while (!__atomic_load_n(&shared[100], __ATOMIC_ACQUIRE))
        usleep(1000);
    ra_meter_t *m = ra_t_open(&cfg);
    REQUIRE(m);
    size_t n;
    CHECK_RC(ra_meter_rollover(m, RA_T_EPOCH_MS + 2 * WIN_MS, NULL, 0, &n), RA_EBUSY);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    CHECK_RC(ra_meter_record_at(m, RA_T_EPOCH_MS + WIN_MS + 1, &t, &s, RA_DIM_BYTES, 4), 0);
    CHECK_RC(ra_meter_rollover(m, RA_T_EPOCH_MS + 2 * WIN_MS, NULL, 0, &n), 0);
    CHECK_EQ_U64(n, 1);
    ra_slice_t *sl;
    REQUIRE(ra_meter_pending_get(m, 0, &sl) == 0);
    ra_slice_id_t id;
    ra_slice_get_id(sl, &id);
    CHECK_EQ_U64(id.seq, 2);
    CHECK_MEM(ra_slice_prev_b3(sl), shared, 32);
    ra_slice_unref(sl);
    ra_meter_close(m);
    munmap(shared, 4096);
}

/* ra_meter_set_stripe: handles with different stripes record the same keys into entries
 * of their own (concurrently, as nginx workers do), and sealing adds them up: one row per
 * subject, exact totals. A stripe out of range is refused. */
typedef struct {
    ra_meter_t *m;
    uint64_t inc;
} stripe_writer_t;

#define STRIPE_KEYS 8
#define STRIPE_OPS 40000

static void *stripe_writer(void *arg) {
    stripe_writer_t *w = arg;
    for (unsigned i = 0; i < STRIPE_OPS; i++) {
        ra_tenant_t t = ra_t_tenant(1 + i % 2);
        ra_subject_t s = ra_t_subject((i / 2) % (STRIPE_KEYS / 2)); /* 2 x 4 keys */
        if (ra_meter_record_at(w->m, RA_T_EPOCH_MS + 1000, &t, &s, RA_DIM_BYTES, w->inc) != 0)
            return (void *)1;
    }
    return NULL;
}

RA_TEST(shm_striped_handles_add_up) {
    ra_config_t cfg;
    ra_t_config(&cfg);
    cfg.shm_path = plane_path("plane-stripes");
    unlink(cfg.shm_path);
    ra_meter_t *h[3] = {ra_t_open(&cfg), ra_t_open(&cfg), ra_t_open(&cfg)};
    REQUIRE(h[0] && h[1] && h[2]);
    CHECK_RC(ra_meter_set_stripe(h[1], 1), 0);
    CHECK_RC(ra_meter_set_stripe(h[2], RA_STRIPES_MAX - 1), 0);
    CHECK_RC(ra_meter_set_stripe(h[2], RA_STRIPES_MAX), RA_EINVAL);
    CHECK_RC(ra_meter_set_stripe(NULL, 1), RA_EINVAL);
    stripe_writer_t w[3] = {{h[0], 1}, {h[1], 10}, {h[2], 100}};
    pthread_t th[3];
    for (int i = 0; i < 3; i++)
        REQUIRE(pthread_create(&th[i], NULL, stripe_writer, &w[i]) == 0);
    for (int i = 0; i < 3; i++) {
        void *r;
        pthread_join(th[i], &r);
        CHECK(r == NULL);
    }
    /* Each stripe has entries of its own: more entries than keys. */
    CHECK(ra_t_metric(h[0], "accounting_plane_entries") > STRIPE_KEYS);
    size_t n;
    CHECK_RC(ra_meter_rollover(h[0], RA_T_EPOCH_MS + WIN_MS, NULL, 0, &n), 0);
    CHECK_EQ_U64(n, 2); /* one slice per tenant */
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        ra_slice_t *sl;
        REQUIRE(ra_meter_pending_get(h[0], i, &sl) == 0);
        CHECK_EQ_U64(ra_slice_row_count(sl), STRIPE_KEYS / 2); /* merged: one per subject */
        for (size_t r = 0; r < ra_slice_row_count(sl); r++) {
            uint64_t inc;
            CHECK_RC(ra_slice_row(sl, r, NULL, &inc), 0);
            /* every key got STRIPE_OPS / 8 records from each writer */
            CHECK_EQ_U64(inc, (uint64_t)(STRIPE_OPS / STRIPE_KEYS) * 111);
            total += inc;
        }
        ra_slice_unref(sl);
    }
    CHECK_EQ_U64(total, (uint64_t)STRIPE_OPS * 111);
    for (int i = 0; i < 3; i++)
        ra_meter_close(h[i]);
}

int main(void) {
    printf("# test-shm\n");
    RA_RUN(shm_created_0600_and_shared_between_meters,
           "shm plane created 0600 and shared; one sealer");
    RA_RUN(shm_striped_handles_add_up, "shm striped handles record apart and seal exact totals");
    RA_RUN(shm_refuses_mismatched_configuration, "shm refuses a mismatched configuration");
    RA_RUN(shm_refuses_foreign_damaged_and_unsafe_files,
           "shm refuses foreign, damaged and unsafe files");
    RA_RUN(shm_racing_creators_share_one_plane, "shm racing creators share one plane");
    RA_RUN(shm_sealer_killed_next_sealer_continues_chain,
           "shm sealer killed with -9: next sealer continues every chain");
    RA_DONE();
}
