/* The pending ring (bounded, ACKs in any order, compaction) and the metrics registry
 * (I-13: every metric registered once; valid Prometheus text). */
#include "internal.h"
#include "ra_test.h"

#define WIN_MS 60000LL

/* Seals one slice per tenant per window for `windows` windows. */
static size_t seal_windows(ra_meter_t *m, int first, int windows, unsigned tenants) {
    size_t total = 0;
    ra_subject_t s = ra_t_subject(1);
    for (int w = first; w < first + windows; w++) {
        for (unsigned t = 0; t < tenants; t++) {
            ra_tenant_t tt = ra_t_tenant(t);
            ra_meter_record_at(m, RA_T_EPOCH_MS + w * WIN_MS, &tt, &s, RA_DIM_BYTES, 1);
        }
        size_t n = 0;
        ra_meter_rollover(m, RA_T_EPOCH_MS + (w + 1) * WIN_MS, NULL, 0, &n);
        total += n;
    }
    return total;
}

/* Pending slice i (a new reference; NULL when there is none), its tenant's last UUID byte
 * (the streams of seal_windows) and its seq. */
static ra_slice_t *pending_stream_seq(ra_meter_t *m, size_t i, unsigned *tenant, uint64_t *seq) {
    ra_slice_t *s;
    if (ra_meter_pending_get(m, i, &s) != 0) return NULL;
    ra_tenant_t t;
    ra_slice_get_tenant(s, &t);
    ra_slice_id_t id;
    ra_slice_get_id(s, &id);
    *tenant = t.b[3];
    *seq = id.seq;
    return s;
}

/* ACKs in a scrambled order leave holes; the ring keeps per-stream order and reuses the
 * room, over many cycles (seeded). */
RA_TEST(pending_out_of_order_acks_and_compaction) {
    const uint64_t seed = 0x5eed0a0c;
    printf("# pending seed %#llx\n", (unsigned long long)seed);
    uint64_t rng = seed;
    ra_config_t cfg;
    ra_t_config(&cfg);
    cfg.pending_slices_cap = 16;
    ra_meter_t *m = ra_t_open(&cfg);
    REQUIRE(m);
    uint64_t last_seq[4] = {0};
    int w = 0;
    for (int round = 0; round < 300; round++) {
        size_t room = 16 - ra_meter_pending_count(m);
        if (room >= 4) {
            CHECK_EQ_U64(seal_windows(m, w, 1, 4), 4);
            w++;
        }
        /* Per-stream order in the ring: seq ascending per tenant. */
        size_t n = ra_meter_pending_count(m);
        uint64_t seen[4] = {0};
        for (size_t i = 0; i < n; i++) {
            unsigned t;
            uint64_t seq;
            ra_slice_t *s = pending_stream_seq(m, i, &t, &seq);
            REQUIRE(s);
            CHECK(seq > seen[t]);
            seen[t] = seq;
            ra_slice_unref(s);
        }
        /* ACK a random pending slice (any stream, any position) one to three times. */
        int acks = (int)(ra_t_rand(&rng) % 3) + 1;
        for (int a = 0; a < acks && ra_meter_pending_count(m); a++) {
            size_t idx = ra_t_rand(&rng) % ra_meter_pending_count(m);
            unsigned t;
            uint64_t seq;
            ra_slice_t *s = pending_stream_seq(m, idx, &t, &seq);
            REQUIRE(s);
            if (seq > last_seq[t]) last_seq[t] = seq;
            CHECK_RC(ra_meter_ack(m, s), 0);
            CHECK_RC(ra_meter_ack(m, s), RA_ENOTFOUND);
            ra_slice_unref(s);
        }
    }
    CHECK(w > 50);
    /* A decoded copy of a pending slice is the same identity: ACK works across copies. */
    if (ra_meter_pending_count(m)) {
        ra_slice_t *s, *copy;
        REQUIRE(ra_meter_pending_get(m, 0, &s) == 0);
        size_t len;
        const uint8_t *b = ra_slice_bytes(s, &len);
        REQUIRE(ra_slice_decode(b, len, &copy) == 0);
        size_t before = ra_meter_pending_count(m);
        CHECK_RC(ra_meter_ack(m, copy), 0);
        CHECK_EQ_U64(ra_meter_pending_count(m), before - 1);
        ra_slice_unref(copy);
        ra_slice_unref(s);
    }
    ra_meter_close(m);
}

RA_TEST(metrics_registered_once_and_well_formed) {
    ra_config_t cfg;
    ra_t_config(&cfg);
    const char *dims[] = {"tokens"};
    cfg.dimensions = dims;
    cfg.n_dimensions = 1;
    ra_meter_t *m = ra_t_open(&cfg);
    REQUIRE(m);
    size_t need = 0;
    CHECK_RC(ra_meter_metrics(m, NULL, 0, &need), RA_EBUFSIZE);
    CHECK(need > 1000);
    char small[64];
    CHECK_RC(ra_meter_metrics(m, small, sizeof small, &need), RA_EBUFSIZE);
    char *buf = malloc(need + 1);
    REQUIRE(buf);
    size_t len = 0;
    CHECK_RC(ra_meter_metrics(m, buf, need + 1, &len), 0);
    CHECK_EQ_U64(len, need);
    CHECK_EQ_U64(strlen(buf), len);
    /* Each family has exactly one TYPE line; every sample line is "name[{...}] number". */
    const char *families[] = {"accounting_record_latency_seconds",
                              "accounting_rejected_total",
                              "accounting_pending_slices",
                              "accounting_overflow_total",
                              "accounting_degraded",
                              "accounting_amnesia"};
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++) {
        char want[128];
        snprintf(want, sizeof want, "# TYPE %s ", families[i]);
        char *first = strstr(buf, want);
        CHECK(first != NULL);
        if (first) CHECK(strstr(first + 1, want) == NULL);
    }
    CHECK(strstr(buf, "accounting_overflow_total{dimension=\"tokens\"} 0\n") != NULL);
    int types = 0;
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "# TYPE ", 7) == 0) types++;
        if (line[0] == '#') continue;
        char *sp = strrchr(line, ' ');
        CHECK(sp != NULL);
        if (!sp) continue;
        char *end;
        strtod(sp + 1, &end);
        CHECK(*end == '\0');
        CHECK(strncmp(line, "accounting_", 11) == 0);
    }
    CHECK(types >= 15);
    free(buf);
    ra_meter_close(m);
}

int main(void) {
    printf("# test-pending\n");
    RA_RUN(pending_out_of_order_acks_and_compaction,
           "pending ring: out-of-order ACKs, per-stream order, compaction");
    RA_RUN(metrics_registered_once_and_well_formed,
           "I-13 metrics registered once, Prometheus text well formed");
    RA_DONE();
}
