/* The assertions every C test of this repository uses (the meter's tests/ra_test.h, the
 * audit's tests/audit/rau_test.h, the ledger's tests/ledger/rl_test.h): RA_TEST, RA_RUN,
 * RA_DONE, RA_FAILF, CHECK*, REQUIRE; "N passed, N failed". The including header defines
 * RA_T_ERR_NAME(code), the name of its library's return codes, before including this. */
#ifndef RA_CHECK_H
#define RA_CHECK_H

#ifndef RA_T_ERR_NAME
#error "define RA_T_ERR_NAME(code) before including check.h"
#endif

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int ra_t_failed_checks;
static int ra_t_pass, ra_t_fail;

#define RA_TEST(name) static void name(void)

#define RA_RUN(name, label)                                                                        \
    do {                                                                                           \
        int before_ = ra_t_failed_checks;                                                          \
        name();                                                                                    \
        if (ra_t_failed_checks == before_) {                                                       \
            ra_t_pass++;                                                                           \
            printf("ok - %s\n", label);                                                            \
        } else {                                                                                   \
            ra_t_fail++;                                                                           \
            printf("not ok - %s\n", label);                                                        \
        }                                                                                          \
        fflush(stdout);                                                                            \
    } while (0)

#define RA_DONE()                                                                                  \
    do {                                                                                           \
        printf("%d passed, %d failed\n", ra_t_pass, ra_t_fail);                                    \
        return ra_t_fail ? 1 : 0;                                                                  \
    } while (0)

#define RA_FAILF(...)                                                                              \
    do {                                                                                           \
        ra_t_failed_checks++;                                                                      \
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

#define CHECK_EQ_I64(a, b)                                                                         \
    do {                                                                                           \
        int64_t a_ = (int64_t)(a), b_ = (int64_t)(b);                                              \
        if (a_ != b_) RA_FAILF("%s == %s: %" PRId64 " != %" PRId64, #a, #b, a_, b_);               \
    } while (0)

/* Return codes: prints the taxonomy names. */
#define CHECK_RC(expr, want)                                                                       \
    do {                                                                                           \
        int rc_ = (expr), want_ = (want);                                                          \
        if (rc_ != want_)                                                                          \
            RA_FAILF("%s: got %d (%s), want %d (%s)", #expr, rc_, RA_T_ERR_NAME(rc_), want_,       \
                     RA_T_ERR_NAME(want_));                                                        \
    } while (0)

#define CHECK_STR(a, b)                                                                            \
    do {                                                                                           \
        const char *a_ = (a), *b_ = (b);                                                           \
        if (!a_ || !b_ || strcmp(a_, b_) != 0)                                                     \
            RA_FAILF("%s == %s: \"%s\" != \"%s\"", #a, #b, a_ ? a_ : "(null)",                     \
                     b_ ? b_ : "(null)");                                                          \
    } while (0)

#define CHECK_MEM(a, b, n)                                                                         \
    do {                                                                                           \
        if (memcmp((a), (b), (n)) != 0) RA_FAILF("%s and %s differ", #a, #b);                      \
    } while (0)

/* Fatal: stop this test function when a precondition fails. */
#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            RA_FAILF("required: %s", #cond);                                                       \
            return;                                                                                \
        }                                                                                          \
    } while (0)

#endif /* RA_CHECK_H */
