/* Refusals as events (I-14, AUD-I-35): every record the meter refuses lands in the plane's
 * ring with its key, reason and process; a reader gets each once, oldest first, and the
 * exact number it missed when writers lapped it, when an entry was torn, or when a writer
 * died half-way. */
#include "internal.h"
#include "ra_test.h"

#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#define WIN_MS 60000LL

static size_t drain(ra_meter_t *m, ra_refusal_t *out, size_t cap, uint64_t *lost) {
    size_t n = 0;
    *lost = 0;
    CHECK_RC(ra_meter_refusals(m, out, cap, &n, lost), 0);
    return n;
}

RA_TEST(refusals_every_record_path_reject_once) {
    ra_meter_t *m = ra_t_meter(0, 1); /* 2 entries: the third new key is refused for capacity */
    REQUIRE(m);
    ra_refusal_t out[16];
    uint64_t lost;
    CHECK_EQ_U64(drain(m, out, 16, &lost), 0);
    ra_tenant_t t = ra_t_tenant(7);
    ra_subject_t s = ra_t_subject(9);
    CHECK_RC(ra_meter_record_at(m, RA_T_EPOCH_MS, &t, &s, RA_DIM_BYTES, 1), 0);
    CHECK_EQ_U64(drain(m, out, 16, &lost), 0); /* accepted: no event */
    CHECK_RC(ra_meter_record_at(m, RA_T_EPOCH_MS, &t, &s, 99, 1), RA_EINVAL);
    ra_meter_count_invalid(m);
    ra_meter_set_degraded(m, 1);
    CHECK_RC(ra_meter_record_at(m, RA_T_EPOCH_MS, &t, &s, RA_DIM_REQUESTS, 1), RA_EDEGRADED);
    ra_meter_set_degraded(m, 0);
    int cap_rc = 0;
    for (int i = 0; i < 64 && cap_rc == 0; i++) {
        ra_subject_t s2 = ra_t_subject(100 + i);
        cap_rc = ra_meter_record_at(m, RA_T_EPOCH_MS, &t, &s2, RA_DIM_BYTES, 1);
    }
    CHECK_RC(cap_rc, RA_ECAPACITY);
    size_t n = drain(m, out, 16, &lost);
    CHECK_EQ_U64(n, 4);
    CHECK_EQ_U64(lost, 0);
    if (n == 4) {
        CHECK(strcmp(out[0].reason, "invalid") == 0 && out[0].dim == -1);
        CHECK(memcmp(out[0].tenant.b, t.b, 16) == 0 && memcmp(out[0].subject.b, s.b, 16) == 0);
        CHECK(strcmp(out[1].reason, "invalid") == 0 && out[1].dim == -1);
        ra_tenant_t zero = {{0}};
        CHECK(memcmp(out[1].tenant.b, zero.b, 16) == 0); /* count_invalid: no key */
        CHECK(strcmp(out[2].reason, "degraded") == 0 && out[2].dim == RA_DIM_REQUESTS);
        CHECK(strcmp(out[3].reason, "capacity") == 0 && out[3].dim == RA_DIM_BYTES);
        for (size_t i = 0; i < n; i++) {
            CHECK_EQ_U64(out[i].n, i);
            CHECK_EQ_U64(out[i].pid, (uint64_t)getpid());
            CHECK(out[i].at_ms > 1600000000000LL); /* wall clock, ms */
        }
    }
    CHECK_EQ_U64(drain(m, out, 16, &lost), 0); /* each once */
    /* The counter and the events agree. */
    CHECK(ra_t_metric(m, "accounting_rejected_total{reason=\"invalid\"}") == 2);
    ra_meter_close(m);
}

RA_TEST(refusals_lapped_reader_counts_exactly_what_it_missed) {
    ra_meter_t *m = ra_t_meter(0, 0);
    REQUIRE(m);
    for (int i = 0; i < 3000; i++)
        ra_meter_count_invalid(m);
    static ra_refusal_t out[2048];
    uint64_t lost;
    size_t n = drain(m, out, 100, &lost);
    CHECK_EQ_U64(n, 100);
    CHECK_EQ_U64(lost, 3000 - RA_REFUSALS);
    CHECK_EQ_U64(out[0].n, 3000 - RA_REFUSALS);
    n = drain(m, out, 2048, &lost);
    CHECK_EQ_U64(n, RA_REFUSALS - 100);
    CHECK_EQ_U64(lost, 0);
    CHECK_EQ_U64(out[n - 1].n, 2999);
    ra_meter_close(m);
}

RA_TEST(refusals_half_written_entry_waits_one_read_then_is_lost) {
    ra_meter_t *m = ra_t_meter(0, 0);
    REQUIRE(m);
    ra_meter_count_invalid(m);
    /* A writer killed between its fetch-add and its seq store. */
    atomic_fetch_add(&m->hdr->refusals_next, 1);
    ra_meter_count_invalid(m);
    ra_refusal_t out[8];
    uint64_t lost;
    CHECK_EQ_U64(drain(m, out, 8, &lost), 1); /* stops at the half-written one */
    CHECK_EQ_U64(lost, 0);
    size_t n = drain(m, out, 8, &lost); /* still half-written: lost, and on */
    CHECK_EQ_U64(n, 1);
    CHECK_EQ_U64(lost, 1);
    CHECK_EQ_U64(out[0].n, 2);
    ra_meter_close(m);
}

#define W_THREADS 4
#define W_EACH 50000

static void *writer(void *arg) {
    ra_meter_t *m = arg;
    for (int i = 0; i < W_EACH; i++)
        ra_meter_count_invalid(m);
    return NULL;
}

RA_TEST(refusals_concurrent_writers_read_plus_lost_is_everything) {
    ra_meter_t *m = ra_t_meter(0, 0);
    REQUIRE(m);
    pthread_t th[W_THREADS];
    for (int i = 0; i < W_THREADS; i++)
        REQUIRE(pthread_create(&th[i], NULL, writer, m) == 0);
    static ra_refusal_t out[256];
    uint64_t got = 0, lost_all = 0, prev = 0;
    int ordered = 1, done = 0;
    while (!done) {
        done = atomic_load(&m->hdr->refusals_next) == (uint64_t)W_THREADS * W_EACH;
        uint64_t lost;
        size_t n = drain(m, out, 256, &lost);
        lost_all += lost;
        for (size_t i = 0; i < n; i++) {
            if (got + lost_all > 0 && i == 0 && out[i].n < prev) ordered = 0;
            if (i > 0 && out[i].n <= out[i - 1].n) ordered = 0;
            if (strcmp(out[i].reason, "invalid") != 0) ordered = 0;
        }
        if (n) prev = out[n - 1].n;
        got += n;
    }
    for (int i = 0; i < W_THREADS; i++)
        pthread_join(th[i], NULL);
    uint64_t lost;
    for (size_t n; (n = drain(m, out, 256, &lost)) > 0 || lost > 0;) {
        got += n;
        lost_all += lost;
    }
    printf("# %d writers x %d: %llu read, %llu lost\n", W_THREADS, W_EACH, (unsigned long long)got,
           (unsigned long long)lost_all);
    CHECK(ordered);
    CHECK_EQ_U64(got + lost_all, (uint64_t)W_THREADS * W_EACH);
    ra_meter_close(m);
}

RA_TEST(refusals_of_another_process_on_the_shared_plane) {
    ra_config_t cfg;
    ra_t_config(&cfg);
    static char path[600];
    snprintf(path, sizeof path, "%s/refusals-plane", ra_t_tmpdir());
    unlink(path);
    cfg.shm_path = path;
    ra_meter_t *m = ra_t_open(&cfg);
    REQUIRE(m);
    pid_t child = fork();
    if (child == 0) {
        ra_meter_t *c = ra_t_open(&cfg);
        ra_tenant_t t = ra_t_tenant(3);
        ra_subject_t s = ra_t_subject(4);
        for (int i = 0; c && i < 10; i++)
            ra_meter_record_at(c, RA_T_EPOCH_MS, &t, &s, 77, 1);
        if (c) ra_meter_close(c);
        _exit(c ? 0 : 1);
    }
    int st = 0;
    REQUIRE(waitpid(child, &st, 0) == child);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    ra_refusal_t out[16];
    uint64_t lost;
    size_t n = drain(m, out, 16, &lost);
    CHECK_EQ_U64(n, 10);
    CHECK_EQ_U64(lost, 0);
    for (size_t i = 0; i < n; i++)
        CHECK_EQ_U64(out[i].pid, (uint64_t)child);
    /* The read position is the plane's: a restarted reader goes on from there. */
    ra_meter_count_invalid(m);
    ra_meter_close(m);
    m = ra_t_open(&cfg);
    REQUIRE(m);
    n = drain(m, out, 16, &lost);
    CHECK_EQ_U64(n, 1);
    CHECK_EQ_U64(n ? out[0].n : 0, 10);
    ra_meter_close(m);
    unlink(path);
}

int main(void) {
    printf("# test-refusals\n");
    RA_RUN(refusals_every_record_path_reject_once, "refusals: every record-path reject, once");
    RA_RUN(refusals_lapped_reader_counts_exactly_what_it_missed,
           "refusals: a lapped reader counts exactly what it missed");
    RA_RUN(refusals_half_written_entry_waits_one_read_then_is_lost,
           "refusals: a half-written entry waits one read, then is lost");
    RA_RUN(refusals_concurrent_writers_read_plus_lost_is_everything,
           "refusals: concurrent writers, read + lost = appended");
    RA_RUN(refusals_of_another_process_on_the_shared_plane,
           "refusals: another process's, on the shared plane");
    RA_DONE();
}
