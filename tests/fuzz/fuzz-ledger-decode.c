/* libFuzzer harness for the ledger's decoders (LED-1, LED-13): any input, read as each
 * type, must give either a typed error or a value whose canonical encoding is exactly the
 * input; never a crash, a hang, an out-of-bounds read (ASan) or undefined behaviour
 * (UBSan). A decoded transfer also goes through rl_transfer_id and rl_validate_and_plan
 * with the state it implies (its pinned accounts, its inputs as Active postings, zero
 * balances): a typed result, and a plan only when it conserves every asset. */
#include "ron/ledger.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static rl_posting_ref_t in[RL_MAX_INPUTS];
static rl_output_t out[RL_MAX_OUTPUTS];
static rl_pin_t pin[RL_MAX_PINS];
static uint8_t again[RL_TRANSFER_ENC_MAX];
static rl_account_t accts[RL_MAX_PINS];
static rl_posting_t consumed[RL_MAX_INPUTS];
static rl_balance_t bal[RL_MAX_INPUTS + RL_MAX_OUTPUTS];
static rl_delta_t deltas[RL_MAX_INPUTS + RL_MAX_OUTPUTS];

static void typed(int rc) {
    if (rc > 0 || rc < RL_ERRNO_MIN || strcmp(rl_err_name(rc), "Unknown") == 0) abort();
}

static void same_bytes(int rc, size_t len, const uint8_t *data, size_t size) {
    if (rc != 0 || len != size || memcmp(again, data, size) != 0) abort();
}

static void plan_transfer(const rl_transfer_t *t) {
    size_t na = 0, nb = 0;
    /* Accounts: one per pin, open, uncapped, at the pinned version. */
    for (uint32_t i = 0; i < t->n_pins; i++) {
        memset(&accts[na], 0, sizeof accts[na]);
        memcpy(accts[na].id, t->pins[i].account, 16);
        accts[na].version = t->pins[i].version;
        accts[na].policy = (uint8_t)(i % 3); /* some floors: 0 for no-overdraft and capped */
        na++;
    }
    /* Inputs: Active postings owned by the first pinned account, in the first output's
     * asset, worth the first output's amount (so some inputs conserve). */
    for (uint32_t i = 0; i < t->n_inputs; i++) {
        memset(&consumed[i], 0, sizeof consumed[i]);
        consumed[i].id = t->inputs[i];
        if (t->n_pins) memcpy(consumed[i].account, t->pins[0].account, 16);
        if (t->n_outputs) {
            consumed[i].asset = t->outputs[0].asset;
            consumed[i].amount = t->outputs[0].amount;
        } else {
            rl_asset_init(&consumed[i].asset, "X", 1, 0);
            consumed[i].amount = 1;
        }
    }
    for (uint32_t i = 0; i < t->n_outputs && nb < sizeof bal / sizeof bal[0]; i++) {
        memset(&bal[nb], 0, sizeof bal[nb]);
        memcpy(bal[nb].account, t->outputs[i].account, 16);
        bal[nb].asset = t->outputs[i].asset;
        nb++;
    }
    rl_plan_t plan = {{0}, deltas, RL_MAX_INPUTS + RL_MAX_OUTPUTS, 0};
    int rc = rl_validate_and_plan(t, accts, na, consumed, t->n_inputs, bal, nb, &plan);
    typed(rc);
    if (rc != 0) return;
    /* Success means conserved, per asset. */
    for (uint32_t i = 0; i < plan.n_deltas; i++) {
        int64_t d = 0, c = 0;
        for (uint32_t j = 0; j < plan.n_deltas; j++) {
            if (!rl_asset_equal(&plan.deltas[i].asset, &plan.deltas[j].asset)) continue;
            d += plan.deltas[j].debit;
            c += plan.deltas[j].credit;
        }
        if (d != c) abort();
    }
    uint8_t id[32];
    if (rl_transfer_id(t, id) != 0 || memcmp(id, plan.transfer_id, 32) != 0) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t len = 0;
    int rc;

    rl_asset_t a;
    rc = rl_asset_decode(data, size, &a);
    typed(rc);
    if (rc == 0) same_bytes(rl_asset_encode(&a, again, sizeof again, &len), len, data, size);

    rl_account_t acct;
    rc = rl_account_decode(data, size, &acct);
    typed(rc);
    if (rc == 0) same_bytes(rl_account_encode(&acct, again, sizeof again, &len), len, data, size);

    rl_posting_t p;
    rc = rl_posting_decode(data, size, &p);
    typed(rc);
    if (rc == 0) same_bytes(rl_posting_encode(&p, again, sizeof again, &len), len, data, size);

    rl_transfer_t t;
    rc = rl_transfer_decode(data, size, &t, in, RL_MAX_INPUTS, out, RL_MAX_OUTPUTS, pin,
                            RL_MAX_PINS);
    typed(rc);
    if (rc == 0) {
        same_bytes(rl_transfer_encode(&t, again, sizeof again, &len), len, data, size);
        plan_transfer(&t);
    }
    return 0;
}
