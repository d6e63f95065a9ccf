/* The record path: G-1 (monotone counters, bad input rejected), G-19 (saturating add),
 * capacity (I-7), degraded (I-8), keys and errors. */
#include "internal.h"
#include "ra_test.h"

#include <pthread.h>
#include <stdatomic.h>

/* Sum of the counts the plane holds for a key in one window (reads the plane directly). */
static uint64_t plane_count(ra_meter_t *m, const ra_tenant_t *t, const ra_subject_t *s, int dim,
                            uint32_t win) {
    size_t n = (size_t)m->hdr->shards * m->hdr->slots_per_shard;
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        ra__slot_t *sl = &m->slots[i];
        uint64_t id = atomic_load(&sl->ident);
        if (ra__ident_state(id) != RA_SLOT_LIVE || ra__ident_dim(id) != (uint32_t)dim) continue;
        if (memcmp(sl->tenant, t->b, 16) || memcmp(sl->subject, s->b, 16)) continue;
        ra__u128 p = ra__pair_peek(&sl->pair);
        if (ra__stamp_win(ra__pair_stamp(p)) == win) sum += ra__pair_count(p);
    }
    return sum;
}

/* The slot a key's probe starts at (stripe 0). */
static uint32_t home_slot(const ra_meter_t *m, const ra_tenant_t *t, const ra_subject_t *s,
                          int dim) {
    uint64_t h = ra__key_hash(t->b, s->b, (uint32_t)dim);
    uint32_t shard = m->shard_bits ? (uint32_t)(h >> (64 - m->shard_bits)) : 0;
    return shard * (m->slot_mask + 1) + ((uint32_t)h & m->slot_mask);
}

/* A subject (numbered from `from`) whose key's home is `slot`. */
static ra_subject_t subject_homed_at(const ra_meter_t *m, const ra_tenant_t *t, int dim,
                                     uint32_t slot, unsigned from) {
    for (unsigned i = from; i < from + 10000000u; i++) {
        ra_subject_t s = ra_t_subject(i);
        if (home_slot(m, t, &s, dim) == slot) return s;
    }
    abort();
}

/* The names of the codes callers match on (the X-macro map in accounting.h is the rest). */
static const struct {
    int code;
    const char *name;
} NAMES[] = {
    {0, "OK"},
    {RA_ECAPACITY, "CapacityExceeded"},
    {RA_EBUSY, "Busy"},
    {RA_EDEGRADED, "DegradedExporter"},
    {RA_EOVERSIZE, "OversizeFrame"},
    {RA_ESCHEMA, "SchemaViolation"},
    {RA_EPERSISTFULL, "PersistenceFull"},
    {RA_EDUPLICATE, "DuplicateExport"},
    {RA_EORDEROVERFLOW, "OrderOverflow"},
    {RA_EWALCORRUPT, "WalCorrupt"},
    {RA_ETIMEOUT, "Timeout"},
    {RA_ECANCELED, "Canceled"},
    {RA_EINVAL, "InvalidArgument"},
};

RA_TEST(errors_have_names_and_messages) {
    for (size_t i = 0; i < sizeof NAMES / sizeof NAMES[0]; i++)
        CHECK_STR(ra_err_name(NAMES[i].code), NAMES[i].name);
    CHECK_STR(ra_err_name(12345), "Unknown");
    CHECK_STR(ra_strerror(12345), "unknown error");
    for (int c = RA_ERRNO_MIN; c < 0; c++) {
        CHECK(strcmp(ra_err_name(c), "Unknown") != 0);
        CHECK(strcmp(ra_strerror(c), "unknown error") != 0);
    }
}

RA_TEST(tenant_parse_and_format) {
    ra_tenant_t t;
    char out[37];
    CHECK_RC(ra_tenant_parse("123E4567-e89b-12d3-A456-426614174000", 36, &t), 0);
    ra_tenant_format(&t, out);
    CHECK_STR(out, "123e4567-e89b-12d3-a456-426614174000");
    CHECK_EQ_U64(t.b[0], 0x12);
    CHECK_EQ_U64(t.b[15], 0x00);
    const char *bad[] = {"123e4567-e89b-12d3-a456-42661417400",   /* short */
                         "123e4567-e89b-12d3-a456-4266141740000", /* long */
                         "123e4567e89b-12d3-a456-4266141740000",  /* dash missing */
                         "123e4567-e89b-12d3-a456-42661417400g",  /* not hex */
                         "123e4567+e89b-12d3-a456-426614174000",  /* wrong separator */
                         ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_RC(ra_tenant_parse(bad[i], strlen(bad[i]), &t), RA_EINVAL);
    CHECK_RC(ra_tenant_parse(NULL, 36, &t), RA_EINVAL);
}

RA_TEST(config_validation) {
    ra_config_t cfg;
    ra_meter_t *m = NULL;
    char err[256];
    ra_t_config(&cfg);
    cfg.window_len_s = 59;
    CHECK_RC(ra_meter_open(&cfg, &m, err, sizeof err), RA_EINVAL);
    CHECK(strstr(err, "window_len_s 59") != NULL);
    CHECK(m == NULL);
    cfg.window_len_s = 3601;
    CHECK_RC(ra_meter_open(&cfg, &m, err, sizeof err), RA_EINVAL);
    ra_t_config(&cfg);
    cfg.shards = 3;
    CHECK_RC(ra_meter_open(&cfg, &m, err, sizeof err), RA_EINVAL);
    CHECK(strstr(err, "power of two") != NULL);
    ra_t_config(&cfg);
    cfg.capacity_rows = 0;
    CHECK_RC(ra_meter_open(&cfg, &m, err, sizeof err), RA_EINVAL);
    ra_t_config(&cfg);
    const char *dims_bad[] = {"Tokens"};
    cfg.dimensions = dims_bad;
    cfg.n_dimensions = 1;
    CHECK_RC(ra_meter_open(&cfg, &m, err, sizeof err), RA_EINVAL);
    const char *dims_dup[] = {"tokens", "tokens"};
    cfg.dimensions = dims_dup;
    cfg.n_dimensions = 2;
    CHECK_RC(ra_meter_open(&cfg, &m, err, sizeof err), RA_EINVAL);
    CHECK(strstr(err, "twice") != NULL);
    const char *dims_ok[] = {"bytes", "tokens", "gpu_ms"};
    cfg.dimensions = dims_ok;
    cfg.n_dimensions = 3;
    m = ra_t_open(&cfg);
    REQUIRE(m);
    CHECK_EQ_I64(ra_meter_dimension(m, "bytes", 5), RA_DIM_BYTES);
    CHECK_EQ_I64(ra_meter_dimension(m, "requests", 8), RA_DIM_REQUESTS);
    CHECK_EQ_I64(ra_meter_dimension(m, "cpu_units", 9), RA_DIM_CPU_UNITS);
    CHECK_EQ_I64(ra_meter_dimension(m, "tokens", 6), 3);
    CHECK_EQ_I64(ra_meter_dimension(m, "gpu_ms", 6), 4);
    CHECK_RC(ra_meter_dimension(m, "nope", 4), RA_ENOTFOUND);
    CHECK_STR(ra_meter_dimension_name(m, 4), "gpu_ms");
    CHECK(ra_meter_dimension_name(m, 5) == NULL);
    ra_meter_close(m);
}

/* G-1: within a window, a key's counter never decreases while writers add to it. */
typedef struct {
    ra_meter_t *m;
    ra_tenant_t t;
    ra_subject_t s;
    atomic_int stop;
    uint64_t added;
} mono_ctx_t;

static void *mono_writer(void *arg) {
    mono_ctx_t *c = arg;
    uint64_t seed = 1;
    while (!atomic_load(&c->stop)) {
        uint64_t inc = ra_t_rand(&seed) % 1000 + 1;
        if (ra_meter_record_at(c->m, RA_T_EPOCH_MS + 1000, &c->t, &c->s, RA_DIM_BYTES, inc) == 0)
            c->added += inc;
    }
    return NULL;
}

RA_TEST(G_1_monotonicity_property) {
    ra_config_t cfg;
    ra_t_config(&cfg);
    ra_t_now_ms = RA_T_EPOCH_MS;
    mono_ctx_t c = {.m = ra_t_open(&cfg), .t = ra_t_tenant(1), .s = ra_t_subject(1)};
    REQUIRE(c.m);
    pthread_t th;
    pthread_create(&th, NULL, mono_writer, &c);
    uint32_t win = (uint32_t)(RA_T_EPOCH_MS / 1000 / 60);
    uint64_t last = 0, decreases = 0, reads = 0;
    while (reads < 20000) {
        uint64_t v = plane_count(c.m, &c.t, &c.s, RA_DIM_BYTES, win);
        if (v < last) decreases++;
        last = v;
        reads++;
    }
    atomic_store(&c.stop, 1);
    pthread_join(th, NULL);
    CHECK_EQ_U64(decreases, 0);
    CHECK_EQ_U64(plane_count(c.m, &c.t, &c.s, RA_DIM_BYTES, win), c.added);
    CHECK(c.added > 0);
    ra_meter_close(c.m);
}

/* G-1 (bad input): what the C types cannot rule out is rejected and counted. */
RA_TEST(G_1_bad_input_rejected_and_counted) {
    RA_T_METER_KEY(ra_t_meter(0, 0), 1);
    CHECK_RC(ra_meter_record_at(m, RA_T_EPOCH_MS, &t, &s, 3, 1), RA_EINVAL);  /* unknown dim */
    CHECK_RC(ra_meter_record_at(m, RA_T_EPOCH_MS, &t, &s, -1, 1), RA_EINVAL); /* negative id */
    CHECK_RC(ra_meter_record_at(m, -5, &t, &s, RA_DIM_BYTES, 1), RA_EINVAL);  /* before 1970 */
    CHECK_RC(ra_meter_record_at(m, RA_T_EPOCH_MS, NULL, &s, RA_DIM_BYTES, 1), RA_EINVAL);
    CHECK_RC(ra_meter_record_at(m, RA_T_EPOCH_MS, &t, NULL, RA_DIM_BYTES, 1), RA_EINVAL);
    CHECK(ra_t_metric(m, "accounting_rejected_total{reason=\"invalid\"}") == 5);
    ra_meter_count_invalid(m); /* a binding's own argument checks count here too */
    CHECK(ra_t_metric(m, "accounting_rejected_total{reason=\"invalid\"}") == 6);
    CHECK_RC(ra_meter_record_at(m, RA_T_EPOCH_MS, &t, &s, RA_DIM_BYTES, 0), 0); /* no-op */
    CHECK(ra_t_metric(m, "accounting_plane_entries") == 0);
    ra_meter_close(m);
}

/* Seals one-minute window win, which must give exactly one slice: that slice (a new
 * reference), or NULL after a failed check. */
static ra_slice_t *seal_one(ra_meter_t *m, uint32_t win) {
    size_t n = 0;
    ra_slice_t *sl = NULL;
    CHECK_RC(ra_meter_rollover(m, (int64_t)(win + 1) * 60000, NULL, 0, &n), 0);
    CHECK_EQ_U64(n, 1);
    if (n != 1) return NULL;
    CHECK_RC(ra_meter_pending_get(m, 0, &sl), 0);
    return sl;
}

/* G-19: a counter saturates at UINT64_MAX, the overflow is counted per dimension, and the
 * meter carries on; duplicates merged at seal saturate the same way. */
RA_TEST(G_19_overflow_property) {
    RA_T_METER_KEY(ra_t_meter(0, 0), 7);
    int64_t at = RA_T_EPOCH_MS + 5000;
    CHECK_RC(ra_meter_record_at(m, at, &t, &s, RA_DIM_REQUESTS, UINT64_MAX - 5), 0);
    CHECK_RC(ra_meter_record_at(m, at, &t, &s, RA_DIM_REQUESTS, 3), 0);
    CHECK(ra_t_metric(m, "accounting_overflow_total{dimension=\"requests\"}") == 0);
    CHECK_RC(ra_meter_record_at(m, at, &t, &s, RA_DIM_REQUESTS, 10), 0);
    CHECK(ra_t_metric(m, "accounting_overflow_total{dimension=\"requests\"}") == 1);
    CHECK_RC(ra_meter_record_at(m, at, &t, &s, RA_DIM_REQUESTS, 1), 0);
    CHECK(ra_t_metric(m, "accounting_overflow_total{dimension=\"requests\"}") == 2);
    CHECK(ra_t_metric(m, "accounting_overflow_total{dimension=\"bytes\"}") == 0);
    uint32_t win = (uint32_t)(at / 1000 / 60);
    CHECK_EQ_U64(plane_count(m, &t, &s, RA_DIM_REQUESTS, win), UINT64_MAX);
    ra_slice_t *sl = seal_one(m, win);
    REQUIRE(sl);
    uint64_t inc = 0;
    CHECK_RC(ra_slice_row(sl, 0, NULL, &inc), 0);
    CHECK_EQ_U64(inc, UINT64_MAX);
    ra_slice_unref(sl);
    ra_meter_close(m);
}

/* I-7: a new key that does not fit is refused with CapacityExceeded and counted; the room
 * comes back once idle entries are sealed and retired. */
RA_TEST(capacity_exceeded_is_counted_and_recovers) {
    ra_meter_t *m = ra_t_meter(1, 50); /* 100 entries */
    REQUIRE(m);
    ra_tenant_t t = ra_t_tenant(1);
    int64_t w0 = RA_T_EPOCH_MS;
    unsigned ok = 0, refused = 0;
    for (unsigned i = 0; i < 150; i++) {
        ra_subject_t s = ra_t_subject(i);
        int rc = ra_meter_record_at(m, w0 + 1000, &t, &s, RA_DIM_BYTES, 1);
        if (rc == 0)
            ok++;
        else if (rc == RA_ECAPACITY)
            refused++;
    }
    CHECK_EQ_U64(ok, 100);
    CHECK_EQ_U64(refused, 50);
    CHECK(ra_t_metric(m, "accounting_rejected_total{reason=\"capacity\"}") == 50);
    /* Existing keys still count. */
    ra_subject_t s0 = ra_t_subject(0);
    CHECK_RC(ra_meter_record_at(m, w0 + 2000, &t, &s0, RA_DIM_BYTES, 1), 0);
    size_t n;
    CHECK_RC(ra_meter_rollover(m, w0 + 60000, NULL, 0, &n), 0);
    CHECK_EQ_U64(n, 1);
    /* Entries stamped in the sealed window idle through the next one, then are retired. */
    CHECK_RC(ra_meter_rollover(m, w0 + 120000, NULL, 0, &n), 0);
    CHECK(ra_t_metric(m, "accounting_plane_entries") == 0);
    CHECK(ra_t_metric(m, "accounting_plane_reclaimed_total") == 100);
    ok = 0;
    for (unsigned i = 200; i < 300; i++) {
        ra_subject_t s = ra_t_subject(i);
        ok += ra_meter_record_at(m, w0 + 121000, &t, &s, RA_DIM_BYTES, 1) == 0;
    }
    CHECK_EQ_U64(ok, 100);
    ra_meter_close(m);
}

/* I-8: a degraded meter fails writes first, with a typed error, counted. */
RA_TEST(degraded_rejects_records) {
    RA_T_METER_KEY(ra_t_meter(0, 0), 1);
    ra_meter_set_degraded(m, 1);
    CHECK(ra_meter_degraded(m) == 1);
    CHECK(ra_t_metric(m, "accounting_degraded") == 1);
    CHECK_RC(ra_meter_record_at(m, RA_T_EPOCH_MS, &t, &s, RA_DIM_BYTES, 1), RA_EDEGRADED);
    CHECK(ra_t_metric(m, "accounting_rejected_total{reason=\"degraded\"}") == 1);
    ra_meter_set_degraded(m, 0);
    CHECK_RC(ra_meter_record_at(m, RA_T_EPOCH_MS, &t, &s, RA_DIM_BYTES, 1), 0);
    CHECK(ra_t_metric(m, "accounting_degraded") == 0);
    ra_meter_close(m);
}

/* The system-clock path lands in the current UTC window. */
RA_TEST(record_uses_system_clock_without_injection) {
    ra_config_t cfg;
    ra_t_config(&cfg);
    cfg.clock = NULL;
    RA_T_METER_KEY(ra_t_open(&cfg), 1);
    int64_t before = ra__clock_system_ms();
    for (int i = 0; i < 10; i++)
        CHECK_RC(ra_meter_record(m, &t, &s, RA_DIM_BYTES, 2), 0);
    int64_t after = ra__clock_system_ms();
    uint32_t w1 = (uint32_t)(before / 1000 / 60), w2 = (uint32_t)(after / 1000 / 60);
    uint64_t got = plane_count(m, &t, &s, RA_DIM_BYTES, w1);
    if (w2 != w1) got += plane_count(m, &t, &s, RA_DIM_BYTES, w2);
    CHECK_EQ_U64(got, 20);
    ra_meter_close(m);
}

/* Subjects from strings: keyed BLAKE3 with the built-in key, checked against b3sum. */
RA_TEST(subject_hash_matches_b3sum_keyed) {
    ra_config_t cfg;
    ra_t_config(&cfg);
    ra_meter_t *m = ra_t_open(&cfg);
    REQUIRE(m);
    ra_subject_t s;
    CHECK_RC(ra_meter_subject(m, "user-42@example.com", 19, &s), 0);
    char cmd[2048], key[65] = {0}, want[33] = {0}, got[33];
    snprintf(cmd, sizeof cmd,
             "%s --no-names --derive-key 'ron-accounting 2026 subject key v1' /dev/null", RA_B3SUM);
    FILE *p = popen(cmd, "r");
    REQUIRE(p && fscanf(p, "%64s", key) == 1);
    pclose(p);
    /* b3sum --keyed reads the 32 raw key bytes on stdin. */
    char subj_path[600], key_path[600];
    snprintf(subj_path, sizeof subj_path, "%s/subj", ra_t_tmpdir());
    snprintf(key_path, sizeof key_path, "%s/key", ra_t_tmpdir());
    FILE *f = fopen(subj_path, "wb");
    REQUIRE(f);
    fputs("user-42@example.com", f);
    fclose(f);
    f = fopen(key_path, "wb");
    REQUIRE(f);
    for (int i = 0; i < 32; i++) {
        unsigned b;
        sscanf(key + 2 * i, "%2x", &b);
        fputc((int)b, f);
    }
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s --no-names --keyed --length 16 '%s' < '%s'", RA_B3SUM, subj_path,
             key_path);
    p = popen(cmd, "r");
    REQUIRE(p && fscanf(p, "%32s", want) == 1);
    pclose(p);
    ra_hex(s.b, 16, got);
    CHECK_STR(got, want);
    /* An operator key changes the mapping. */
    uint8_t k2[32];
    memset(k2, 0xA5, sizeof k2);
    ra_meter_close(m);
    cfg.subject_key = k2;
    m = ra_t_open(&cfg);
    REQUIRE(m);
    ra_subject_t s2;
    CHECK_RC(ra_meter_subject(m, "user-42@example.com", 19, &s2), 0);
    CHECK(memcmp(s.b, s2.b, 16) != 0);
    ra_meter_close(m);
}

/* Key handles: the same counts, errors and counters as ra_meter_record; the cache follows
 * the meter and the stripe it was made for. */
RA_TEST(key_handles_record_like_record) {
    ra_config_t cfg;
    ra_t_config(&cfg);
    RA_T_METER_KEY(ra_t_open(&cfg), 3);
    int64_t at = RA_T_EPOCH_MS + 1000;
    uint32_t win = (uint32_t)(at / 1000 / 60);
    ra_key_t k;
    CHECK_RC(ra_key_init(&k, m, &t, &s, RA_DIM_BYTES), 0);
    CHECK(k.meter_ == NULL && k.ident_ == 0);
    CHECK_RC(ra_meter_record_key_at(m, at, &k, 5), 0);
    CHECK(k.meter_ == m && k.ident_ != 0); /* cached: the next records take the fast path */
    CHECK_EQ_U64(atomic_load(&m->slots[k.slot_].ident), k.ident_);
    for (int i = 0; i < 1000; i++)
        CHECK_RC(ra_meter_record_key_at(m, at, &k, 1), 0);
    CHECK_RC(ra_meter_record_at(m, at, &t, &s, RA_DIM_BYTES, 10), 0); /* same entry */
    CHECK_EQ_U64(plane_count(m, &t, &s, RA_DIM_BYTES, win), 1015);
    CHECK(ra_t_metric(m, "accounting_plane_entries") == 1);
    /* The meter's clock (injected here) is the clock of ra_meter_record_key. */
    ra_t_now_ms = at;
    CHECK_RC(ra_meter_record_key(m, &k, 2), 0);
    CHECK_EQ_U64(plane_count(m, &t, &s, RA_DIM_BYTES, win), 1017);

    /* Bad input: typed errors, counted; a failed init leaves the handle alone. */
    ra_key_t bad = k;
    CHECK_RC(ra_key_init(&bad, m, &t, &s, 3), RA_EINVAL);
    CHECK(memcmp(&bad, &k, sizeof k) == 0);
    CHECK_RC(ra_key_init(&bad, m, NULL, &s, RA_DIM_BYTES), RA_EINVAL);
    CHECK_RC(ra_key_init(NULL, m, &t, &s, RA_DIM_BYTES), RA_EINVAL);
    CHECK_RC(ra_key_init(&bad, NULL, &t, &s, RA_DIM_BYTES), RA_EINVAL); /* nowhere to count */
    CHECK_RC(ra_meter_record_key_at(m, at, NULL, 1), RA_EINVAL);
    CHECK_RC(ra_meter_record_key_at(m, -5, &k, 1), RA_EINVAL);
    CHECK(ra_t_metric(m, "accounting_rejected_total{reason=\"invalid\"}") == 5);
    CHECK_RC(ra_meter_record_key_at(m, at, &k, 0), 0); /* no-op */
    ra_meter_set_degraded(m, 1);
    CHECK_RC(ra_meter_record_key_at(m, at, &k, 1), RA_EDEGRADED); /* I-8, on the fast path too */
    CHECK(ra_t_metric(m, "accounting_rejected_total{reason=\"degraded\"}") == 1);
    ra_meter_set_degraded(m, 0);
    CHECK_EQ_U64(plane_count(m, &t, &s, RA_DIM_BYTES, win), 1017);

    /* Another stripe: the handle re-caches, to the key's entry of that stripe. */
    CHECK_RC(ra_meter_set_stripe(m, 5), 0);
    CHECK_RC(ra_meter_record_key_at(m, at, &k, 100), 0);
    CHECK(ra_t_metric(m, "accounting_plane_entries") == 2);
    CHECK_EQ_U64(plane_count(m, &t, &s, RA_DIM_BYTES, win), 1117);
    CHECK_RC(ra_meter_set_stripe(m, 0), 0);
    CHECK_RC(ra_meter_record_key_at(m, at, &k, 1), 0); /* back to the stripe-0 entry */
    CHECK(ra_t_metric(m, "accounting_plane_entries") == 2);
    CHECK_EQ_U64(plane_count(m, &t, &s, RA_DIM_BYTES, win), 1118);

    /* A handle used with another meter records into that meter, never into the first, and
     * never into another key's entry that has the same index and identity there. */
    ra_meter_t *m2 = ra_t_open(&cfg);
    REQUIRE(m2);
    ra_subject_t twin = subject_homed_at(m2, &t, RA_DIM_BYTES, k.slot_, 5000);
    CHECK_RC(ra_meter_record_at(m2, at, &t, &twin, RA_DIM_BYTES, 40), 0);
    CHECK_EQ_U64(atomic_load(&m2->slots[k.slot_].ident), k.ident_); /* same identity */
    CHECK_RC(ra_meter_record_key_at(m2, at, &k, 7), 0);
    CHECK(k.meter_ == m2);
    CHECK_EQ_U64(plane_count(m2, &t, &s, RA_DIM_BYTES, win), 7);
    CHECK_EQ_U64(plane_count(m2, &t, &twin, RA_DIM_BYTES, win), 40);
    CHECK_EQ_U64(plane_count(m, &t, &s, RA_DIM_BYTES, win), 1118);
    CHECK_RC(ra_meter_record_key_at(m, at, &k, 1), 0);
    CHECK_EQ_U64(plane_count(m, &t, &s, RA_DIM_BYTES, win), 1119);
    ra_meter_close(m2);

    /* Sealed like any record: one row per subject with the total. */
    ra_slice_t *sl = seal_one(m, win);
    REQUIRE(sl);
    uint64_t inc = 0;
    CHECK_EQ_U64(ra_slice_row_count(sl), 1);
    CHECK_RC(ra_slice_row(sl, 0, NULL, &inc), 0);
    CHECK_EQ_U64(inc, 1119);
    ra_slice_unref(sl);
    ra_meter_close(m);
}

/* A key handle's cached entry goes stale in every way the plane allows: its window still
 * holds an unsealed count when the next window starts, a late record comes for the old
 * window, the entry is retired, and its slot is claimed by another key. Each record lands
 * in its own key and window, exactly. */
RA_TEST(key_handle_follows_windows_and_entry_reuse) {
    RA_T_METER_KEY(ra_t_meter(1, 50), 9);
    int64_t w0 = RA_T_EPOCH_MS;
    uint32_t win0 = (uint32_t)(w0 / 1000 / 60);
    ra_key_t k;
    CHECK_RC(ra_key_init(&k, m, &t, &s, RA_DIM_REQUESTS), 0);
    CHECK_RC(ra_meter_record_key_at(m, w0 + 1000, &k, 7), 0);
    uint32_t first = k.slot_;
    /* The next window while window 0's count is unsealed: another entry, re-cached. */
    CHECK_RC(ra_meter_record_key_at(m, w0 + 61000, &k, 3), 0);
    CHECK(k.slot_ != first);
    /* A late record for window 0 (a writer whose clock is behind) finds window 0's entry. */
    CHECK_RC(ra_meter_record_key_at(m, w0 + 59000, &k, 2), 0);
    CHECK_EQ_U64(plane_count(m, &t, &s, RA_DIM_REQUESTS, win0), 9);
    CHECK_EQ_U64(plane_count(m, &t, &s, RA_DIM_REQUESTS, win0 + 1), 3);
    size_t n = 0;
    CHECK_RC(ra_meter_rollover(m, w0 + 60000, NULL, 0, &n), 0);
    CHECK_EQ_U64(n, 1);
    CHECK_RC(ra_meter_rollover(m, w0 + 120000, NULL, 0, &n), 0);
    CHECK_EQ_U64(n, 1);
    /* Idle windows: both entries are retired. */
    CHECK_RC(ra_meter_rollover(m, w0 + 180000, NULL, 0, &n), 0);
    CHECK_RC(ra_meter_rollover(m, w0 + 240000, NULL, 0, &n), 0);
    CHECK(ra_t_metric(m, "accounting_plane_entries") == 0);
    uint32_t cached = k.slot_;
    uint64_t cached_ident = k.ident_;
    CHECK(atomic_load(&m->slots[cached].ident) != cached_ident);
    /* Another key whose home is the cached slot claims it. */
    ra_subject_t other = subject_homed_at(m, &t, RA_DIM_REQUESTS, cached, 1000);
    int64_t w4 = w0 + 240000;
    uint32_t win4 = win0 + 4;
    CHECK_RC(ra_meter_record_at(m, w4 + 1000, &t, &other, RA_DIM_REQUESTS, 11), 0);
    ra__slot_t *slot = &m->slots[cached];
    CHECK(ra__ident_state(atomic_load(&slot->ident)) == RA_SLOT_LIVE);
    CHECK(memcmp(slot->subject, other.b, 16) == 0);
    /* The handle must not add to the other key's entry (same dimension, same window). */
    CHECK_RC(ra_meter_record_key_at(m, w4 + 1000, &k, 5), 0);
    CHECK(k.slot_ != cached);
    CHECK_EQ_U64(plane_count(m, &t, &other, RA_DIM_REQUESTS, win4), 11);
    CHECK_EQ_U64(plane_count(m, &t, &s, RA_DIM_REQUESTS, win4), 5);
    CHECK_RC(ra_meter_rollover(m, w4 + 60000, NULL, 0, &n), 0);
    CHECK_EQ_U64(n, 1);
    uint64_t by_key[2] = {0, 0};
    for (size_t p = 0; p < ra_meter_pending_count(m); p++) {
        ra_slice_t *sl = NULL;
        REQUIRE(ra_meter_pending_get(m, p, &sl) == 0);
        ra_slice_id_t id;
        ra_slice_get_id(sl, &id);
        for (size_t r = 0; r < ra_slice_row_count(sl); r++) {
            ra_subject_t sub;
            uint64_t inc;
            CHECK_RC(ra_slice_row(sl, r, &sub, &inc), 0);
            if (id.window_start_s == (int64_t)win4 * 60)
                by_key[memcmp(sub.b, other.b, 16) == 0] += inc;
        }
        ra_slice_unref(sl);
    }
    CHECK_EQ_U64(by_key[0], 5);
    CHECK_EQ_U64(by_key[1], 11);
    ra_meter_close(m);
}

int main(void) {
    printf("# test-record (seed for property loops: fixed, 1)\n");
    RA_RUN(errors_have_names_and_messages, "error taxonomy names and messages");
    RA_RUN(tenant_parse_and_format, "tenant UUID parse and format");
    RA_RUN(config_validation, "configuration validation");
    RA_RUN(key_handles_record_like_record, "key handles record like ra_meter_record");
    RA_RUN(key_handle_follows_windows_and_entry_reuse,
           "a key handle follows window moves, retirement and slot reuse");
    RA_RUN(G_1_monotonicity_property, "G-1 monotonicity: counters never decrease within a window");
    RA_RUN(G_1_bad_input_rejected_and_counted, "G-1 bad input rejected and counted");
    RA_RUN(G_19_overflow_property, "G-19 overflow: saturating add and accounting_overflow_total");
    RA_RUN(capacity_exceeded_is_counted_and_recovers,
           "I-7 capacity exceeded is counted and recovers");
    RA_RUN(degraded_rejects_records, "I-8 degraded meter rejects records");
    RA_RUN(record_uses_system_clock_without_injection, "record on the system clock");
    RA_RUN(subject_hash_matches_b3sum_keyed, "subject hash equals b3sum --keyed");
    RA_DONE();
}
