/* Assertions for the ledger's C tests: the shape of tests/ra_test.h (RL_TEST, RL_RUN,
 * RL_DONE; "N passed, N failed") with return codes named by rl_err_name. */
#ifndef RL_TEST_H
#define RL_TEST_H

#include "ron/ledger.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rl_t_failed_checks;
static int rl_t_pass, rl_t_fail;

#define RL_TEST(name) static void name(void)

#define RL_RUN(name, label)                                                                        \
    do {                                                                                           \
        int before_ = rl_t_failed_checks;                                                          \
        name();                                                                                    \
        if (rl_t_failed_checks == before_) {                                                       \
            rl_t_pass++;                                                                           \
            printf("ok - %s\n", label);                                                            \
        } else {                                                                                   \
            rl_t_fail++;                                                                           \
            printf("not ok - %s\n", label);                                                        \
        }                                                                                          \
        fflush(stdout);                                                                            \
    } while (0)

#define RL_DONE()                                                                                  \
    do {                                                                                           \
        printf("%d passed, %d failed\n", rl_t_pass, rl_t_fail);                                    \
        return rl_t_fail ? 1 : 0;                                                                  \
    } while (0)

#define RL_FAILF(...)                                                                              \
    do {                                                                                           \
        rl_t_failed_checks++;                                                                      \
        fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                                            \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fprintf(stderr, "\n");                                                                     \
    } while (0)

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) RL_FAILF("check failed: %s", #cond);                                          \
    } while (0)

#define CHECK_EQ_I64(a, b)                                                                         \
    do {                                                                                           \
        int64_t a_ = (int64_t)(a), b_ = (int64_t)(b);                                              \
        if (a_ != b_) RL_FAILF("%s == %s: %" PRId64 " != %" PRId64, #a, #b, a_, b_);               \
    } while (0)

#define CHECK_RC(expr, want)                                                                       \
    do {                                                                                           \
        int rc_ = (expr), want_ = (want);                                                          \
        if (rc_ != want_)                                                                          \
            RL_FAILF("%s: got %d (%s), want %d (%s)", #expr, rc_, rl_err_name(rc_), want_,         \
                     rl_err_name(want_));                                                          \
    } while (0)

/* Fixtures: account ids and transfer ids made from one byte, assets from a string. */
static inline void rl_t_id(uint8_t id[16], uint8_t b) {
    memset(id, 0, 16);
    id[15] = b;
}

static inline rl_asset_t rl_t_asset(const char *code, uint8_t scale) {
    rl_asset_t a;
    if (rl_asset_init(&a, code, strlen(code), scale) != 0) abort();
    return a;
}

static inline rl_account_t rl_t_account(uint8_t b, uint8_t policy, int64_t floor) {
    rl_account_t a;
    memset(&a, 0, sizeof a);
    rl_t_id(a.id, b);
    a.version = 1;
    a.policy = policy;
    a.floor = floor;
    a.status = RL_ACCOUNT_OPEN;
    return a;
}

static inline rl_posting_t rl_t_posting(uint8_t tx, uint32_t index, uint8_t account,
                                        const char *asset, int64_t amount) {
    rl_posting_t p;
    memset(&p, 0, sizeof p);
    memset(p.id.transfer_id, tx, 32);
    p.id.index = index;
    rl_t_id(p.account, account);
    p.asset = rl_t_asset(asset, 2);
    p.amount = amount;
    p.status = RL_POSTING_ACTIVE;
    return p;
}

static inline void rl_t_hex(const uint8_t *b, size_t n, char *out) {
    static const char hx[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hx[b[i] >> 4];
        out[2 * i + 1] = hx[b[i] & 15];
    }
    out[2 * n] = '\0';
}

#endif
