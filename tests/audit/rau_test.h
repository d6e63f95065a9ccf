/* Assertion macros for the audit tests: tests/ra_test.h's shape (RA_TEST, RA_RUN, CHECK...)
 * with return codes named by rau_err_name. */
#ifndef RAU_TEST_H
#define RAU_TEST_H

#include "fixtures.h"
#include "ron/audit.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rau_t_failed_checks;
static int rau_t_pass, rau_t_fail;

#define RA_TEST(name) static void name(void)

#define RA_RUN(name, label)                                                                        \
    do {                                                                                           \
        int before_ = rau_t_failed_checks;                                                         \
        name();                                                                                    \
        if (rau_t_failed_checks == before_) {                                                      \
            rau_t_pass++;                                                                          \
            printf("ok - %s\n", label);                                                            \
        } else {                                                                                   \
            rau_t_fail++;                                                                          \
            printf("not ok - %s\n", label);                                                        \
        }                                                                                          \
        fflush(stdout);                                                                            \
    } while (0)

#define RA_DONE()                                                                                  \
    do {                                                                                           \
        printf("%d passed, %d failed\n", rau_t_pass, rau_t_fail);                                  \
        return rau_t_fail ? 1 : 0;                                                                 \
    } while (0)

#define RA_FAILF(...)                                                                              \
    do {                                                                                           \
        rau_t_failed_checks++;                                                                     \
        fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                                            \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fprintf(stderr, "\n");                                                                     \
    } while (0)

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) RA_FAILF("check failed: %s", #cond);                                          \
    } while (0)

#define CHECK_EQ_U64(a, b)                                                                         \
    do {                                                                                           \
        uint64_t a_ = (uint64_t)(a), b_ = (uint64_t)(b);                                           \
        if (a_ != b_) RA_FAILF("%s == %s: %" PRIu64 " != %" PRIu64, #a, #b, a_, b_);               \
    } while (0)

#define CHECK_RC(expr, want)                                                                       \
    do {                                                                                           \
        int rc_ = (expr), want_ = (want);                                                          \
        if (rc_ != want_)                                                                          \
            RA_FAILF("%s: got %d (%s), want %d (%s)", #expr, rc_, rau_err_name(rc_), want_,        \
                     rau_err_name(want_));                                                         \
    } while (0)

#define CHECK_STR(a, b)                                                                            \
    do {                                                                                           \
        const char *a_ = (a), *b_ = (b);                                                           \
        if (!a_ || !b_ || strcmp(a_, b_) != 0)                                                     \
            RA_FAILF("%s == %s: \"%s\" != \"%s\"", #a, #b, a_ ? a_ : "(null)",                     \
                     b_ ? b_ : "(null)");                                                          \
    } while (0)

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            RA_FAILF("required: %s", #cond);                                                       \
            return;                                                                                \
        }                                                                                          \
    } while (0)

static inline void rau_t_hex(const uint8_t *b, size_t n, char *out) {
    static const char d[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = d[b[i] >> 4];
        out[2 * i + 1] = d[b[i] & 15];
    }
    out[2 * n] = 0;
}

static inline size_t rau_t_unhex(const char *s, uint8_t *out, size_t cap) {
    size_t n = 0;
    for (; s[0] && s[1] && n < cap; s += 2) {
        unsigned v;
        if (sscanf(s, "%2x", &v) != 1) break;
        out[n++] = (uint8_t)v;
    }
    return n;
}

static inline const char *rau_t_tmpdir(void) {
    static char dir[512];
    if (!dir[0]) ra_fix_mkdtemp(dir, sizeof dir, NULL, "rau-test-");
    return dir;
}

#endif
