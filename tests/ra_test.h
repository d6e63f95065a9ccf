/* A small typed assertion header for the C tests (STYLE rule 14). Each test file defines
 * test functions with RA_TEST(name) and lists them in main() with RA_RUN(name). A failed
 * RA_RUN(name, "label") runs one; gate tests carry the gate id in the label ("G-19 ...").
 * A failed check prints the file, line and both values and marks the test failed; the process exits
 * non-zero if any test failed. The closing line is "N passed, N failed". */
#ifndef RA_TEST_H
#define RA_TEST_H

#include "fixtures.h"
#include "ron/accounting.h"

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RA_T_ERR_NAME(code) ra_err_name(code)
#include "check.h"

/* ---- helpers shared by the tests ----------------------------------------------------- */

/* A deterministic PRNG (splitmix64): property and stress tests print their seed. */
static inline uint64_t ra_t_rand(uint64_t *s) {
    return ra_fix_splitmix64(s);
}

/* A fresh temporary directory for this test process (under RA_TEST_TMP or /tmp). */
static inline const char *ra_t_tmpdir(void) {
    static char dir[512];
    if (!dir[0]) ra_fix_mkdtemp(dir, sizeof dir, NULL, "ra-test-");
    return dir;
}

static inline ra_tenant_t ra_t_tenant(unsigned n) {
    ra_tenant_t t;
    char s[37];
    snprintf(s, sizeof s, "%08x-0000-4000-8000-%012x", n, n * 7919u);
    if (ra_tenant_parse(s, 36, &t) != 0) abort();
    return t;
}

static inline ra_subject_t ra_t_subject(unsigned n) {
    ra_subject_t s;
    memset(&s, 0, sizeof s);
    uint64_t seed = n;
    uint64_t a = ra_t_rand(&seed), b = ra_t_rand(&seed);
    memcpy(s.b, &a, 8);
    memcpy(s.b + 8, &b, 8);
    return s;
}

/* An injectable clock: tests set ra_t_now_ms. */
static int64_t ra_t_now_ms;
static inline int64_t ra_t_clock(void *ud) {
    (void)ud;
    return __atomic_load_n(&ra_t_now_ms, __ATOMIC_RELAXED);
}

/* 2023-11-14T22:00:00Z: a window boundary for every window length that divides 3600. */
#define RA_T_EPOCH_MS 1699999200000LL

static inline ra_meter_t *ra_t_open(ra_config_t *cfg) {
    ra_meter_t *m = NULL;
    char err[512];
    int rc = ra_meter_open(cfg, &m, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "ra_meter_open: %s: %s\n", ra_err_name(rc), err);
        return NULL;
    }
    return m;
}

static inline void ra_t_config(ra_config_t *cfg) {
    ra_config_init(cfg);
    cfg->window_len_s = 60;
    cfg->shards = 4;
    cfg->capacity_rows = 4096;
    cfg->pending_slices_cap = 1024;
    cfg->clock = ra_t_clock;
    cfg->host = "test-host";
}

/* A meter on ra_t_config's test defaults, with shards and capacity_rows when not 0 (NULL
 * when the open fails, said on stderr). */
static inline ra_meter_t *ra_t_meter(uint32_t shards, uint32_t capacity_rows) {
    ra_config_t cfg;
    ra_t_config(&cfg);
    if (shards) cfg.shards = shards;
    if (capacity_rows) cfg.capacity_rows = capacity_rows;
    return ra_t_open(&cfg);
}

/* The start most meter tests share, written once: declares m, the meter that open
 * returns (ra_t_meter(...), ra_t_open(&cfg); the test ends, failed, when it is NULL), and
 * the key the test records under, tenant t and subject s number n. */
#define RA_T_METER_KEY(open, n)                                                                    \
    ra_meter_t *m = (open);                                                                        \
    REQUIRE(m);                                                                                    \
    ra_tenant_t t = ra_t_tenant(n);                                                                \
    ra_subject_t s = ra_t_subject(n)

/* Reads a metric's value from the exposition ("name{labels} value"); -1 when absent. */
static inline double ra_t_metric(const ra_meter_t *m, const char *series) {
    static char buf[1 << 16];
    size_t len = 0;
    if (ra_meter_metrics(m, buf, sizeof buf, &len) != 0) return -1;
    size_t n = strlen(series);
    for (char *p = buf; (p = strstr(p, series)) != NULL; p += n) {
        if ((p == buf || p[-1] == '\n') && p[n] == ' ') return strtod(p + n + 1, NULL);
    }
    return -1;
}

/* Runs b3sum on a file and returns its hex digest in out (65 bytes). */
static inline int ra_t_b3sum_file(const char *path, char *out) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s --no-names '%s'", RA_B3SUM, path);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    int ok = fscanf(p, "%64s", out) == 1;
    return pclose(p) == 0 && ok ? 0 : -1;
}

static inline int ra_t_b3sum_bytes(const uint8_t *buf, size_t len, char *out) {
    char path[600];
    snprintf(path, sizeof path, "%s/b3-input-%d", ra_t_tmpdir(), (int)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    if (len && fwrite(buf, 1, len, f) != len) {
        fclose(f);
        return -1;
    }
    fclose(f);
    int rc = ra_t_b3sum_file(path, out);
    unlink(path);
    return rc;
}

#endif
