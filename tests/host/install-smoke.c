/* install-tree: a C program built against the INSTALLED header and library only (through
 * pkg-config), the way a service author embeds libronacct. */
#include <ron/accounting.h>

#include <stdio.h>
#include <string.h>

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "install-smoke.c:%d: check failed: %s\n", __LINE__, #cond);            \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

static int64_t fixed_clock(void *ud) {
    return *(const int64_t *)ud;
}

int main(void) {
    CHECK(strcmp(ra_version(), RA_VERSION_STRING) == 0);

    int64_t now_ms = 1735689600000; /* 2025-01-01T00:00:00Z */
    ra_config_t cfg;
    ra_config_init(&cfg);
    cfg.window_len_s = 60;
    cfg.clock = fixed_clock;
    cfg.clock_ud = &now_ms;

    ra_meter_t *m = NULL;
    char err[256];
    int rc = ra_meter_open(&cfg, &m, err, sizeof err);
    if (rc != 0) fprintf(stderr, "ra_meter_open: %s: %s\n", ra_err_name(rc), err);
    CHECK(rc == 0);

    ra_tenant_t t;
    ra_subject_t s;
    CHECK(ra_tenant_parse("00000000-0000-4000-8000-000000000001", 36, &t) == 0);
    CHECK(ra_meter_subject(m, "user:a", 6, &s) == 0);
    CHECK(ra_meter_record(m, &t, &s, RA_DIM_BYTES, 1500) == 0);

    size_t n = 0;
    CHECK(ra_meter_rollover(m, now_ms + 60000, NULL, 0, &n) == 0 && n == 1);
    ra_slice_t *slice = NULL;
    CHECK(ra_meter_pending_get(m, 0, &slice) == 0);
    size_t len = 0;
    const uint8_t *bytes = ra_slice_bytes(slice, &len);
    uint8_t digest[RA_B3_LEN];
    ra_b3(bytes, len, digest);
    CHECK(memcmp(digest, ra_slice_b3(slice), RA_B3_LEN) == 0);
    char hex[2 * RA_B3_LEN + 1];
    ra_hex(digest, RA_B3_LEN, hex);
    CHECK(ra_meter_ack(m, slice) == 0 && ra_meter_pending_count(m) == 0);
    ra_slice_unref(slice);
    ra_meter_close(m);

    printf("install-smoke.c: ok (libronacct %s, b3 %s)\n", ra_version(), hex);
    return 0;
}
