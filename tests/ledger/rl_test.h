/* The ledger's C tests' header: tests/check.h's assertions with return codes named by
 * rl_err_name, and the ledger fixtures. */
#ifndef RL_TEST_H
#define RL_TEST_H

#include "ron/ledger.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RA_T_ERR_NAME(code) rl_err_name(code)
#include "../check.h"

/* The ledger's tests spell the harness RL_*. */
#define RL_TEST RA_TEST
#define RL_RUN RA_RUN
#define RL_DONE RA_DONE
#define RL_FAILF RA_FAILF
#define rl_t_failed_checks ra_t_failed_checks

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

/* A transfer over the caller's arrays (NULL and 0 for none), with metadata and intent from
 * C strings (NULL: none). */
static inline rl_transfer_t rl_t_transfer(const rl_posting_ref_t *in, uint32_t n_in,
                                          const rl_output_t *out, uint32_t n_out,
                                          const rl_pin_t *pins, uint32_t n_pins,
                                          const char *metadata, const char *intent) {
    rl_transfer_t t;
    memset(&t, 0, sizeof t);
    t.inputs = in;
    t.n_inputs = n_in;
    t.outputs = out;
    t.n_outputs = n_out;
    t.pins = pins;
    t.n_pins = n_pins;
    t.metadata = (const uint8_t *)metadata;
    t.metadata_len = metadata ? (uint32_t)strlen(metadata) : 0;
    t.intent = (const uint8_t *)intent;
    t.intent_len = intent ? (uint32_t)strlen(intent) : 0;
    return t;
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
