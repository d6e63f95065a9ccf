/* Sealing: G-2 (determinism across processes), digests against b3sum, hash chains and seq,
 * G-15 (clock skew and jumps), G-21 (window length cannot change), the bounded pending
 * ring, catch-up after an absent sealer, late rows, and splitting of large streams. */
#include "internal.h"
#include "ra_test.h"

#include <pthread.h>
#include <sys/wait.h>

#define WIN_MS 60000LL

/* Collects every pending slice, in order. */
static size_t pending_all(ra_meter_t *m, ra_slice_t **out, size_t cap) {
    size_t n = ra_meter_pending_count(m);
    if (n > cap) n = cap;
    for (size_t i = 0; i < n; i++)
        if (ra_meter_pending_get(m, i, &out[i]) != 0) return i;
    return n;
}

/* The increment of the slice's first row (0 when it has none). */
static uint64_t first_inc(const ra_slice_t *sl) {
    uint64_t inc = 0;
    ra_slice_row(sl, 0, NULL, &inc);
    return inc;
}

static void unref_all(ra_slice_t **s, size_t n) {
    for (size_t i = 0; i < n; i++)
        ra_slice_unref(s[i]);
}

/* A deterministic event stream: (time, tenant, subject, dim, inc). */
typedef struct {
    int64_t at;
    unsigned tenant, subject;
    int dim;
    uint64_t inc;
} event_t;

/* n events over `windows` windows from seed, which is printed for the gate's run. */
static size_t make_events(const char *gate, event_t *ev, size_t n, uint64_t seed, int windows) {
    printf("# %s seed %#llx\n", gate, (unsigned long long)seed);
    for (size_t i = 0; i < n; i++) {
        ev[i].at = RA_T_EPOCH_MS + (int64_t)(ra_t_rand(&seed) % (uint64_t)(windows * WIN_MS));
        ev[i].tenant = (unsigned)(ra_t_rand(&seed) % 5);
        ev[i].subject = (unsigned)(ra_t_rand(&seed) % 200);
        ev[i].dim = (int)(ra_t_rand(&seed) % 3);
        ev[i].inc = ra_t_rand(&seed) % 10000 + 1;
    }
    return n;
}

typedef struct {
    ra_meter_t *m;
    const event_t *ev;
    size_t from, to, step;
} feed_t;

static void *feed(void *arg) {
    feed_t *f = arg;
    for (size_t i = f->from; i < f->to; i += f->step) {
        ra_tenant_t t = ra_t_tenant(f->ev[i].tenant);
        ra_subject_t s = ra_t_subject(f->ev[i].subject);
        if (ra_meter_record_at(f->m, f->ev[i].at, &t, &s, f->ev[i].dim, f->ev[i].inc) != 0) abort();
    }
    return NULL;
}

/* One process's run: two threads feed the events interleaved differently from run to run,
 * then the windows are sealed and every slice's bytes written to `path`. */
static int run_and_dump(const event_t *ev, size_t n, int windows, const char *path) {
    ra_meter_t *m = ra_t_meter(0, 0);
    if (!m) return 1;
    feed_t a = {m, ev, 0, n, 2}, b = {m, ev, 1, n, 2};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, feed, &a);
    pthread_create(&tb, NULL, feed, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    size_t sealed;
    for (int w = 1; w <= windows; w++)
        if (ra_meter_rollover(m, RA_T_EPOCH_MS + w * WIN_MS, NULL, 0, &sealed) != 0) return 1;
    FILE *f = fopen(path, "wb");
    if (!f) return 1;
    static ra_slice_t *sl[4096];
    size_t k = pending_all(m, sl, 4096);
    for (size_t i = 0; i < k; i++) {
        size_t len;
        const uint8_t *bytes = ra_slice_bytes(sl[i], &len);
        fwrite(&len, sizeof len, 1, f);
        fwrite(bytes, 1, len, f);
    }
    fclose(f);
    unref_all(sl, k);
    ra_meter_close(m);
    return k > 0 ? 0 : 1;
}

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return b;
}

RA_TEST(G_2_rollover_determinism) {
    static event_t ev[20000];
    size_t n = make_events("G-2", ev, 20000, 0x5eed0002, 3);
    char p1[600], p2[600];
    snprintf(p1, sizeof p1, "%s/g2-a", ra_t_tmpdir());
    snprintf(p2, sizeof p2, "%s/g2-b", ra_t_tmpdir());
    const char *paths[2] = {p1, p2};
    pid_t pids[2];
    for (int i = 0; i < 2; i++) {
        pids[i] = fork();
        if (pids[i] == 0) _exit(run_and_dump(ev, n, 3, paths[i]));
    }
    for (int i = 0; i < 2; i++) {
        int st;
        waitpid(pids[i], &st, 0);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    size_t la, lb;
    char *a = slurp(p1, &la), *b = slurp(p2, &lb);
    REQUIRE(a && b);
    CHECK(la > 0);
    CHECK_EQ_U64(la, lb);
    CHECK(la == lb && memcmp(a, b, la) == 0);
    free(a);
    free(b);
}

/* Digests are BLAKE3 of the canonical bytes exactly as b3sum computes them; chains link;
 * seq counts 1, 2, 3 per stream; totals equal what was recorded. */
RA_TEST(G_8_digest_b3sum_chain_and_totals) {
    ra_meter_t *m = ra_t_meter(0, 0);
    REQUIRE(m);
    ra_tenant_t t = ra_t_tenant(3);
    uint64_t total[3] = {0};
    for (int w = 0; w < 3; w++) {
        for (unsigned s = 0; s < 50; s++) {
            ra_subject_t sub = ra_t_subject(s);
            uint64_t inc = (uint64_t)(w + 1) * 100 + s;
            CHECK_RC(ra_meter_record_at(m, RA_T_EPOCH_MS + w * WIN_MS + 10 + s, &t, &sub,
                                        RA_DIM_BYTES, inc),
                     0);
            total[w] += inc;
        }
        size_t n;
        CHECK_RC(ra_meter_rollover(m, RA_T_EPOCH_MS + (w + 1) * WIN_MS, NULL, 0, &n), 0);
        CHECK_EQ_U64(n, 1);
    }
    ra_slice_t *sl[3];
    REQUIRE(pending_all(m, sl, 3) == 3);
    uint8_t zero[32] = {0};
    for (int i = 0; i < 3; i++) {
        ra_slice_id_t id;
        ra_slice_get_id(sl[i], &id);
        CHECK_EQ_U64(id.seq, (uint64_t)i + 1);
        CHECK_EQ_I64(id.window_start_s, RA_T_EPOCH_MS / 1000 + i * 60);
        CHECK_EQ_U64(id.window_len_s, 60);
        CHECK_MEM(ra_slice_prev_b3(sl[i]), i == 0 ? zero : ra_slice_b3(sl[i - 1]), 32);
        CHECK_STR(ra_slice_dimension(sl[i]), "bytes");
        CHECK_STR(ra_slice_host(sl[i]), "test-host");
        CHECK(ra_slice_amnesia(sl[i]) == 1); /* no WAL in this build: RAM only, and said */
        CHECK_EQ_U64(ra_slice_row_count(sl[i]), 50);
        uint64_t sum = 0;
        ra_subject_t prev, cur;
        for (size_t r = 0; r < ra_slice_row_count(sl[i]); r++) {
            uint64_t inc;
            CHECK_RC(ra_slice_row(sl[i], r, &cur, &inc), 0);
            if (r) CHECK(memcmp(prev.b, cur.b, 16) < 0); /* canonical order */
            prev = cur;
            sum += inc;
        }
        CHECK_EQ_U64(sum, total[i]);
        size_t len;
        const uint8_t *bytes = ra_slice_bytes(sl[i], &len);
        char want[65], got[65];
        REQUIRE(ra_t_b3sum_bytes(bytes, len, want) == 0);
        ra_hex(ra_slice_b3(sl[i]), 32, got);
        CHECK_STR(got, want);
        /* The decoder accepts what the sealer made and finds the same identity. */
        ra_slice_t *d = NULL;
        CHECK_RC(ra_slice_decode(bytes, len, &d), 0);
        if (d) {
            CHECK_MEM(ra_slice_b3(d), ra_slice_b3(sl[i]), 32);
            ra_slice_unref(d);
        }
    }
    /* ACK drains the pending ring; an unknown slice is NotFound. */
    CHECK_RC(ra_meter_ack(m, sl[1]), 0);
    CHECK_RC(ra_meter_ack(m, sl[1]), RA_ENOTFOUND);
    CHECK_EQ_U64(ra_meter_pending_count(m), 2);
    CHECK_RC(ra_meter_ack(m, sl[0]), 0);
    CHECK_RC(ra_meter_ack(m, sl[2]), 0);
    CHECK_EQ_U64(ra_meter_pending_count(m), 0);
    unref_all(sl, 3);
    ra_meter_close(m);
}

/* A scripted sealer clock: rollover times around each boundary B. */
static void seal_with_clock(ra_meter_t *m, const int64_t *times, size_t n, size_t *total) {
    *total = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k = 0;
        CHECK_RC(ra_meter_rollover(m, times[i], NULL, 0, &k), 0);
        *total += k;
    }
}

static ra_meter_t *meter_with_events(const event_t *ev, size_t n) {
    ra_meter_t *m = ra_t_meter(0, 0);
    if (!m) return NULL;
    feed_t f = {m, ev, 0, n, 1};
    feed(&f);
    return m;
}

RA_TEST(G_15_clock_skew_and_jumps) {
    static event_t ev[5000];
    size_t n = make_events("G-15", ev, 5000, 0x5eed0015, 4);
    int64_t B = RA_T_EPOCH_MS;
    /* Reference: one rollover exactly on each boundary. */
    int64_t exact[] = {B + 1 * WIN_MS, B + 2 * WIN_MS, B + 3 * WIN_MS, B + 4 * WIN_MS};
    /* Skewed: the sealer wakes up to 250 ms early (nothing to seal yet) or late, wakes twice
     * for one boundary, jumps 2 s forward across a boundary, then 2 s back across the same
     * boundary, and forward again. */
    int64_t skew[] = {B + WIN_MS - 250,      B + WIN_MS + 250,      B + WIN_MS + 260,
                      B + 2 * WIN_MS - 180,  B + 2 * WIN_MS + 120,  B + 3 * WIN_MS - 1000,
                      B + 3 * WIN_MS + 1000, B + 3 * WIN_MS - 1000, B + 3 * WIN_MS + 1000,
                      B + 3 * WIN_MS + 1500, B + 4 * WIN_MS - 250,  B + 4 * WIN_MS + 240};
    ra_meter_t *a = meter_with_events(ev, n), *b = meter_with_events(ev, n);
    REQUIRE(a && b);
    size_t na, nb;
    seal_with_clock(a, exact, 4, &na);
    seal_with_clock(b, skew, sizeof skew / sizeof skew[0], &nb);
    CHECK(na > 0);
    CHECK_EQ_U64(na, nb);
    /* Exactly one rollover per boundary: four windows sealed, in both runs. */
    CHECK(ra_t_metric(a, "accounting_sealed_windows_total") == 4);
    CHECK(ra_t_metric(b, "accounting_sealed_windows_total") == 4);
    /* Identical artifacts. */
    static ra_slice_t *sa[512], *sb[512];
    size_t ka = pending_all(a, sa, 512), kb = pending_all(b, sb, 512);
    CHECK_EQ_U64(ka, kb);
    for (size_t i = 0; i < ka && i < kb; i++)
        CHECK_MEM(ra_slice_b3(sa[i]), ra_slice_b3(sb[i]), 32);
    unref_all(sa, ka);
    unref_all(sb, kb);
    ra_meter_close(a);
    ra_meter_close(b);
}

/* A writer whose clock jumped back into a sealed window is not lost and not sealed twice:
 * its row is sealed late, into the next window, and counted as late. */
RA_TEST(G_15_backward_jump_record_is_late_not_lost) {
    RA_T_METER_KEY(ra_t_meter(0, 0), 1);
    int64_t B = RA_T_EPOCH_MS;
    CHECK_RC(ra_meter_record_at(m, B + 1000, &t, &s, RA_DIM_BYTES, 10), 0);
    size_t n;
    CHECK_RC(ra_meter_rollover(m, B + WIN_MS + 100, NULL, 0, &n), 0);
    CHECK_EQ_U64(n, 1);
    /* The clock jumps 2 s back across the boundary. */
    CHECK_RC(ra_meter_record_at(m, B + WIN_MS - 1900, &t, &s, RA_DIM_BYTES, 5), 0);
    CHECK_RC(ra_meter_record_at(m, B + WIN_MS + 5000, &t, &s, RA_DIM_BYTES, 7), 0);
    CHECK_RC(ra_meter_rollover(m, B + WIN_MS - 1900, NULL, 0, &n), 0); /* nothing: jumped back */
    CHECK_EQ_U64(n, 0);
    CHECK_RC(ra_meter_rollover(m, B + 2 * WIN_MS, NULL, 0, &n), 0);
    CHECK_EQ_U64(n, 1);
    ra_slice_t *sl[2];
    REQUIRE(pending_all(m, sl, 2) == 2);
    CHECK_EQ_U64(first_inc(sl[0]), 10);
    CHECK_EQ_U64(first_inc(sl[1]), 12); /* 7 on time + 5 late */
    ra_slice_id_t id;
    ra_slice_get_id(sl[1], &id);
    CHECK_EQ_I64(id.window_start_s, (B + WIN_MS) / 1000);
    CHECK(ra_t_metric(m, "accounting_late_rows_total") == 1);
    unref_all(sl, 2);
    ra_meter_close(m);
}

static char logged[1024];
static void capture_log(void *ud, int level, const char *msg) {
    (void)ud;
    if (level <= RA_LOG_WARN) snprintf(logged, sizeof logged, "%s", msg);
}

/* Issue 14 item 3: the sealer's clock steps a day forward for one rollover, then comes back.
 * Before: the sealed-through mark stayed a day ahead and nothing more was sealed until real
 * time caught up (the plane filling meanwhile). Now the mark is set back (ERROR, counted)
 * and the next boundary seals as usual; what was sealed stays sealed, once. */
RA_TEST(clock_step_forward_sets_the_mark_back_and_sealing_goes_on) {
    ra_config_t cfg;
    ra_t_config(&cfg);
    cfg.log = capture_log;
    RA_T_METER_KEY(ra_t_open(&cfg), 1);
    int64_t B = RA_T_EPOCH_MS, DAY = 86400000LL;
    size_t n;
    CHECK_RC(ra_meter_record_at(m, B + 1000, &t, &s, RA_DIM_BYTES, 10), 0);
    CHECK_RC(ra_meter_rollover(m, B + DAY, NULL, 0, &n), 0); /* the step: window 0 sealed */
    CHECK_EQ_U64(n, 1);
    CHECK(ra_t_metric(m, "accounting_sealed_through_window") == (double)((B + DAY) / WIN_MS - 1));
    /* the clock is back, in window 1: the mark is set back to window 0, nothing sealed */
    CHECK_RC(ra_meter_record_at(m, B + WIN_MS + 1000, &t, &s, RA_DIM_BYTES, 7), 0);
    logged[0] = '\0';
    CHECK_RC(ra_meter_rollover(m, B + WIN_MS + 2000, NULL, 0, &n), 0);
    CHECK_EQ_U64(n, 0);
    CHECK(strstr(logged, "sealed-through mark") != NULL);
    CHECK(ra_t_metric(m, "accounting_sealed_through_rewinds_total") == 1);
    CHECK(ra_t_metric(m, "accounting_sealed_through_window") == (double)(B / WIN_MS));
    /* the next boundary seals window 1 on time, not a day later */
    CHECK_RC(ra_meter_rollover(m, B + 2 * WIN_MS + 100, NULL, 0, &n), 0);
    CHECK_EQ_U64(n, 1);
    ra_slice_t *sl[2];
    REQUIRE(pending_all(m, sl, 2) == 2);
    CHECK_EQ_U64(first_inc(sl[1]), 7);
    ra_slice_id_t id;
    ra_slice_get_id(sl[1], &id);
    CHECK_EQ_I64(id.window_start_s, (B + WIN_MS) / 1000);
    CHECK(ra_t_metric(m, "accounting_late_rows_total") == 0);
    CHECK(ra_t_metric(m, "accounting_sealed_through_rewinds_total") == 1);
    unref_all(sl, 2);
    ra_meter_close(m);
}

RA_TEST(G_21_config_hot_flip_denial) {
    ra_config_t cfg;
    ra_t_config(&cfg);
    cfg.log = capture_log;
    ra_meter_t *m = ra_t_open(&cfg);
    REQUIRE(m);
    CHECK_RC(ra_meter_set_window_len(m, 60), 0);
    logged[0] = '\0';
    CHECK_RC(ra_meter_set_window_len(m, 120), RA_EINVAL);
    CHECK(strstr(logged, "window_len_s") != NULL && strstr(logged, "restart") != NULL);
    CHECK_EQ_U64(ra_meter_window_len(m), 60);
    CHECK(ra_t_metric(m, "accounting_rejected_total{reason=\"config_change\"}") == 1);
    /* The meter keeps its windows. */
    ra_tenant_t t = ra_t_tenant(1);
    ra_subject_t s = ra_t_subject(1);
    CHECK_RC(ra_meter_record_at(m, RA_T_EPOCH_MS + 61000, &t, &s, RA_DIM_BYTES, 1), 0);
    size_t n;
    CHECK_RC(ra_meter_rollover(m, RA_T_EPOCH_MS + 120000, NULL, 0, &n), 0);
    ra_slice_t *sl;
    REQUIRE(ra_meter_pending_get(m, 0, &sl) == 0);
    ra_slice_id_t id;
    ra_slice_get_id(sl, &id);
    CHECK_EQ_U64(id.window_len_s, 60);
    CHECK_EQ_I64(id.window_start_s, RA_T_EPOCH_MS / 1000 + 60);
    ra_slice_unref(sl);
    ra_meter_close(m);
}

/* A node that lost its heads continues the downstream's chain (ra_meter_seed_head): its
 * next slice of the stream is head + 1, linked to the head's b3; a stream it already has a
 * chain of refuses another head. */
RA_TEST(seed_head_continues_a_downstream_chain) {
    ra_meter_t *m = ra_t_meter(0, 0);
    REQUIRE(m);
    ra_tenant_t t = ra_t_tenant(7), other = ra_t_tenant(8);
    ra_subject_t s = ra_t_subject(1);
    uint8_t b3[32], b3x[32];
    for (int i = 0; i < 32; i++)
        b3[i] = (uint8_t)(0xa0 + i), b3x[i] = (uint8_t)i;
    CHECK_RC(ra_meter_seed_head(m, &t, RA_DIM_BYTES, 0, b3, 0), RA_EINVAL);
    CHECK_RC(ra_meter_seed_head(m, &t, RA_DIM_BYTES, 1ull << 62, b3, 0), RA_EINVAL);
    CHECK_RC(ra_meter_seed_head(m, &t, 99, 41, b3, 0), RA_EINVAL);
    CHECK_RC(ra_meter_seed_head(m, &t, RA_DIM_BYTES, 41, b3, RA_T_EPOCH_MS / 1000 - 60), 0);
    CHECK_RC(ra_meter_seed_head(m, &t, RA_DIM_BYTES, 41, b3, 0), 0); /* the same: fine */
    CHECK_RC(ra_meter_seed_head(m, &t, RA_DIM_BYTES, 40, b3x, 0), RA_EINCOMPAT);
    CHECK_RC(ra_meter_record_at(m, RA_T_EPOCH_MS + 1000, &t, &s, RA_DIM_BYTES, 5), 0);
    CHECK_RC(ra_meter_record_at(m, RA_T_EPOCH_MS + 1000, &other, &s, RA_DIM_BYTES, 5), 0);
    size_t n;
    CHECK_RC(ra_meter_rollover(m, RA_T_EPOCH_MS + WIN_MS, NULL, 0, &n), 0);
    CHECK_EQ_U64(n, 2);
    ra_slice_t *out[4];
    size_t got = pending_all(m, out, 4);
    CHECK_EQ_U64(got, 2);
    int seen = 0;
    for (size_t i = 0; i < got; i++) {
        ra_tenant_t st;
        ra_slice_get_tenant(out[i], &st);
        ra_slice_id_t id;
        ra_slice_get_id(out[i], &id);
        if (memcmp(st.b, t.b, 16) == 0) {
            CHECK_EQ_U64(id.seq, 42);
            CHECK(memcmp(ra_slice_prev_b3(out[i]), b3, 32) == 0);
            seen |= 1;
        } else {
            CHECK_EQ_U64(id.seq, 1); /* an unseeded stream starts its own chain */
            seen |= 2;
        }
    }
    CHECK_EQ_I64(seen, 3);
    /* both streams have chains of this meter's now: another head is refused */
    CHECK_RC(ra_meter_seed_head(m, &t, RA_DIM_BYTES, 41, b3, 0), RA_EINCOMPAT);
    CHECK_RC(ra_meter_seed_head(m, &other, RA_DIM_BYTES, 9, b3, 0), RA_EINCOMPAT);
    unref_all(out, got);
    ra_meter_close(m);
}

/* The pending ring is bounded: what does not fit stays in the plane (counted), and seals
 * once ACKs make room. Nothing is lost, windows are never merged. */
RA_TEST(pending_ring_full_is_counted_and_loses_nothing) {
    ra_config_t cfg;
    ra_t_config(&cfg);
    cfg.pending_slices_cap = 2;
    ra_meter_t *m = ra_t_open(&cfg);
    REQUIRE(m);
    ra_subject_t s = ra_t_subject(1);
    for (unsigned t = 0; t < 3; t++) { /* three streams per window, two windows */
        ra_tenant_t tt = ra_t_tenant(t);
        CHECK_RC(ra_meter_record_at(m, RA_T_EPOCH_MS + 1000, &tt, &s, RA_DIM_BYTES, 1 + t), 0);
        CHECK_RC(
            ra_meter_record_at(m, RA_T_EPOCH_MS + WIN_MS + 1000, &tt, &s, RA_DIM_BYTES, 10 + t), 0);
    }
    size_t n, sealed_total = 0;
    uint64_t seen = 0;
    CHECK_RC(ra_meter_rollover(m, RA_T_EPOCH_MS + 2 * WIN_MS, NULL, 0, &n), RA_ECAPACITY);
    CHECK_EQ_U64(n, 2);
    CHECK(ra_t_metric(m, "accounting_rejected_total{reason=\"pending_full\"}") == 1);
    /* No window is complete yet: the boundary counter stays before the first one. */
    CHECK(ra_t_metric(m, "accounting_sealed_through_window") < (double)(RA_T_EPOCH_MS / WIN_MS));
    int64_t last_ws[3] = {0};
    for (int round = 0; round < 10 && sealed_total < 6; round++) {
        ra_slice_t *sl[2];
        size_t k = pending_all(m, sl, 2);
        for (size_t i = 0; i < k; i++) {
            ra_slice_id_t id;
            ra_tenant_t tt;
            ra_slice_get_id(sl[i], &id);
            ra_slice_get_tenant(sl[i], &tt);
            seen += first_inc(sl[i]);
            unsigned tn = tt.b[3];
            CHECK(id.window_start_s > last_ws[tn]); /* per stream in window order */
            last_ws[tn] = id.window_start_s;
            CHECK_RC(ra_meter_ack(m, sl[i]), 0);
        }
        sealed_total += k;
        unref_all(sl, k);
        int rc = ra_meter_rollover(m, RA_T_EPOCH_MS + 2 * WIN_MS, NULL, 0, &n);
        CHECK(rc == 0 || rc == RA_ECAPACITY);
    }
    CHECK_EQ_U64(sealed_total, 6);
    CHECK_EQ_U64(seen, 1 + 2 + 3 + 10 + 11 + 12);
    CHECK(ra_t_metric(m, "accounting_sealed_through_window") ==
          (double)((RA_T_EPOCH_MS + WIN_MS) / WIN_MS));
    ra_meter_close(m);
}

/* A sealer that was away for several windows seals each one separately when it returns:
 * correctly attributed, never merged (issue: sidecar restarts). */
RA_TEST(catch_up_seals_each_missed_window_separately) {
    RA_T_METER_KEY(ra_t_meter(0, 0), 2);
    for (int w = 0; w < 5; w++)
        CHECK_RC(ra_meter_record_at(m, RA_T_EPOCH_MS + w * WIN_MS + 30000, &t, &s, RA_DIM_REQUESTS,
                                    (uint64_t)w + 1),
                 0);
    size_t n;
    ra_slice_t *got[3] = {NULL, NULL, NULL};
    CHECK_RC(ra_meter_rollover(m, -2, got, 3, &n), RA_EINVAL); /* only RA_NOW is special */
    CHECK_RC(ra_meter_rollover(m, RA_T_EPOCH_MS + 5 * WIN_MS + 1, got, 3, &n), 0);
    CHECK_EQ_U64(n, 5);
    ra_slice_t *sl[5];
    REQUIRE(pending_all(m, sl, 5) == 5);
    /* rollover hands back the first out_cap slices it sealed, as new references. */
    for (int i = 0; i < 3; i++) {
        CHECK(got[i] == sl[i]);
        ra_slice_unref(got[i]);
    }
    ra_slice_t *listed[8];
    size_t k = 0;
    CHECK_RC(ra_meter_pending_list(m, 2, listed, 8, &k), 0);
    CHECK_EQ_U64(k, 3);
    for (size_t i = 0; i < k; i++) {
        CHECK(listed[i] == sl[i + 2]);
        ra_slice_unref(listed[i]);
    }
    for (int w = 0; w < 5; w++) {
        ra_slice_id_t id;
        ra_slice_get_id(sl[w], &id);
        CHECK_EQ_I64(id.window_start_s, RA_T_EPOCH_MS / 1000 + w * 60);
        CHECK_EQ_U64(id.seq, (uint64_t)w + 1);
        CHECK_EQ_U64(first_inc(sl[w]), (uint64_t)w + 1);
    }
    CHECK(ra_t_metric(m, "accounting_late_rows_total") == 0);
    unref_all(sl, 5);
    ra_meter_close(m);
}

/* A stream larger than one 1 MiB frame is sealed as consecutive slices of one window. */
RA_TEST(large_stream_splits_under_frame_limit) {
    ra_meter_t *m = ra_t_meter(16, 100000);
    REQUIRE(m);
    ra_tenant_t t = ra_t_tenant(9);
    const unsigned N = 90000;
    for (unsigned i = 0; i < N; i++) {
        ra_subject_t s = ra_t_subject(i);
        if (ra_meter_record_at(m, RA_T_EPOCH_MS + 1, &t, &s, RA_DIM_BYTES, 1) != 0) {
            RA_FAILF("record %u failed", i);
            break;
        }
    }
    size_t n;
    CHECK_RC(ra_meter_rollover(m, RA_T_EPOCH_MS + WIN_MS, NULL, 0, &n), 0);
    CHECK_EQ_U64(n, 3);
    ra_slice_t *sl[3];
    REQUIRE(pending_all(m, sl, 3) == 3);
    size_t rows = 0;
    ra_subject_t last = {{0}};
    for (int i = 0; i < 3; i++) {
        size_t len;
        ra_slice_bytes(sl[i], &len);
        CHECK(len <= (1u << 20));
        ra_slice_id_t id;
        ra_slice_get_id(sl[i], &id);
        CHECK_EQ_U64(id.seq, (uint64_t)i + 1);
        CHECK_EQ_I64(id.window_start_s, RA_T_EPOCH_MS / 1000);
        ra_subject_t first;
        ra_slice_row(sl[i], 0, &first, NULL);
        if (i) CHECK(memcmp(last.b, first.b, 16) < 0); /* parts continue the order */
        ra_slice_row(sl[i], ra_slice_row_count(sl[i]) - 1, &last, NULL);
        rows += ra_slice_row_count(sl[i]);
    }
    CHECK_EQ_U64(rows, N);
    unref_all(sl, 3);
    ra_meter_close(m);
}

/* Amnesia is carried in every slice's meta and in the metrics (I-9). */
RA_TEST(amnesia_flag_in_meta_and_metrics) {
    ra_config_t cfg;
    ra_t_config(&cfg);
    CHECK(cfg.amnesia == 1); /* the default: this build has no WAL */
    /* amnesia = false without a WAL would make every slice claim a durability it lacks. */
    cfg.amnesia = 0;
    char err[256];
    ra_meter_t *bad = NULL;
    CHECK_RC(ra_meter_open(&cfg, &bad, err, sizeof err), RA_EINVAL);
    CHECK(bad == NULL && strstr(err, "write-ahead log") != NULL);
    cfg.amnesia = 1;
    ra_meter_t *m = ra_t_open(&cfg);
    REQUIRE(m);
    CHECK(ra_t_metric(m, "accounting_amnesia") == 1);
    ra_tenant_t t = ra_t_tenant(1);
    ra_subject_t s = ra_t_subject(1);
    CHECK_RC(ra_meter_record_at(m, RA_T_EPOCH_MS, &t, &s, RA_DIM_CPU_UNITS, 3), 0);
    size_t n;
    CHECK_RC(ra_meter_rollover(m, RA_T_EPOCH_MS + WIN_MS, NULL, 0, &n), 0);
    ra_slice_t *sl;
    REQUIRE(ra_meter_pending_get(m, 0, &sl) == 0);
    CHECK(ra_slice_amnesia(sl) == 1);
    CHECK_STR(ra_slice_dimension(sl), "cpu_units");
    ra_slice_unref(sl);
    ra_meter_close(m);
}

int main(void) {
    printf("# test-seal\n");
    RA_RUN(G_2_rollover_determinism, "G-2 rollover determinism: two processes, same bytes");
    RA_RUN(G_8_digest_b3sum_chain_and_totals, "G-8 digests equal b3sum; chain, seq, totals");
    RA_RUN(G_15_clock_skew_and_jumps, "G-15 clock skew and jumps: one rollover per boundary");
    RA_RUN(G_15_backward_jump_record_is_late_not_lost,
           "G-15 a record behind a backward jump is sealed late, not lost");
    RA_RUN(clock_step_forward_sets_the_mark_back_and_sealing_goes_on,
           "a clock step forward: the sealed-through mark is set back, sealing goes on");
    RA_RUN(G_21_config_hot_flip_denial, "G-21 config hot-flip denial");
    RA_RUN(seed_head_continues_a_downstream_chain,
           "seed_head: a node without heads continues the downstream's chain");
    RA_RUN(pending_ring_full_is_counted_and_loses_nothing,
           "I-7 pending ring full: counted, nothing lost");
    RA_RUN(catch_up_seals_each_missed_window_separately,
           "catch-up seals each missed window separately");
    RA_RUN(large_stream_splits_under_frame_limit, "large stream splits under the 1 MiB frame");
    RA_RUN(amnesia_flag_in_meta_and_metrics, "I-9 amnesia in slice meta and metrics");
    RA_DONE();
}
