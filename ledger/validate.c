/* rl_validate_and_plan: the one place that decides whether a transfer may commit against
 * the state a store read (LED-5..LED-9). The checks run in the documented order (LED-12,
 * docs/LEDGER.md "Validation order"), each over its items in transfer order, so the same
 * transfer against the same state always fails with the same code: a retried intent can
 * not change outcome. Everything is a bounded linear scan over the caller's arrays
 * (sizes capped by RL_MAX_*): no allocation, no sorting (LED-11). */
#include "internal.h"

/* At most this many accounts take part: each input has one owner, each output one. */
#define RL__MAX_INVOLVED (RL_MAX_INPUTS + RL_MAX_OUTPUTS)

static int account_ok(const rl_account_t *a) {
    if (a->version == 0 || a->policy > RL_POLICY_UNCAPPED || a->status > RL_ACCOUNT_CLOSED)
        return 0;
    if (a->policy == RL_POLICY_CAPPED) return a->floor <= 0 && a->floor != INT64_MIN;
    return a->floor == 0;
}

static const rl_account_t *find_account(const rl_account_t *a, size_t n, const uint8_t id[16]) {
    for (size_t i = 0; i < n; i++)
        if (memcmp(a[i].id, id, 16) == 0) return &a[i];
    return NULL;
}

static const rl_posting_t *find_posting(const rl_posting_t *p, size_t n,
                                        const rl_posting_ref_t *id) {
    for (size_t i = 0; i < n; i++)
        if (rl_posting_ref_cmp(&p[i].id, id) == 0) return &p[i];
    return NULL;
}

static const rl_pin_t *find_pin(const rl_transfer_t *t, const uint8_t id[16]) {
    for (uint32_t i = 0; i < t->n_pins; i++)
        if (memcmp(t->pins[i].account, id, 16) == 0) return &t->pins[i];
    return NULL;
}

static rl_delta_t *find_delta(rl_plan_t *plan, const uint8_t account[16], const rl_asset_t *a) {
    for (uint32_t i = 0; i < plan->n_deltas; i++)
        if (memcmp(plan->deltas[i].account, account, 16) == 0 &&
            rl_asset_equal(&plan->deltas[i].asset, a))
            return &plan->deltas[i];
    return NULL;
}

/* The involved accounts in order of first appearance: input owners, then output accounts. */
typedef struct involved_s {
    const uint8_t *id[RL__MAX_INVOLVED];
    uint32_t n;
} involved_t;

static void involve(involved_t *inv, const uint8_t id[16]) {
    for (uint32_t i = 0; i < inv->n; i++)
        if (memcmp(inv->id[i], id, 16) == 0) return;
    inv->id[inv->n++] = id;
}

/* The asset of the i-th leg: consumed postings first (in input order), then outputs. */
static const rl_asset_t *leg_asset(const rl_transfer_t *t, const rl_posting_t *const *in,
                                   uint32_t i) {
    return i < t->n_inputs ? &in[i]->asset : &t->outputs[i - t->n_inputs].asset;
}

static int add_leg(rl_plan_t *plan, const uint8_t account[16], const rl_asset_t *asset,
                   int64_t amount, int is_credit) {
    rl_delta_t *d = find_delta(plan, account, asset);
    if (d == NULL) {
        if (plan->n_deltas == plan->deltas_cap) return RL_EBUFSIZE;
        d = &plan->deltas[plan->n_deltas++];
        memset(d, 0, sizeof *d);
        memcpy(d->account, account, 16);
        d->asset = *asset;
    }
    int64_t *sum = is_credit ? &d->credit : &d->debit;
    return rl_amount_add(*sum, amount, sum);
}

int rl_validate_and_plan(const rl_transfer_t *t, const rl_account_t *accounts, size_t n_accounts,
                         const rl_posting_t *consumed, size_t n_consumed,
                         const rl_balance_t *balances, size_t n_balances, rl_plan_t *plan) {
    /* 1. shape: arguments, limits, the transfer's canonical form. */
    if (t == NULL || plan == NULL || (plan->deltas == NULL && plan->deltas_cap != 0) ||
        (accounts == NULL && n_accounts != 0) || (consumed == NULL && n_consumed != 0) ||
        (balances == NULL && n_balances != 0))
        return RL_EINVAL;
    if (n_accounts > RL__MAX_INVOLVED || n_consumed > RL_MAX_INPUTS ||
        n_balances > RL__MAX_INVOLVED)
        return RL_ELIMIT;
    RL__TRY(rl__transfer_check(t));
    plan->n_deltas = 0;
    for (size_t i = 0; i < n_accounts; i++)
        if (!account_ok(&accounts[i]) || find_account(accounts, i, accounts[i].id) != NULL)
            return RL_EINVAL;
    /* State given twice would make the answer depend on which copy is read first. */
    for (size_t i = 0; i < n_consumed; i++)
        if (rl_asset_check(&consumed[i].asset) != 0 || !rl__amount_ok(consumed[i].amount) ||
            consumed[i].status > RL_POSTING_INACTIVE ||
            find_posting(consumed, i, &consumed[i].id) != NULL)
            return RL_EINVAL;
    for (size_t i = 0; i < n_balances; i++) {
        if (rl_asset_check(&balances[i].asset) != 0 || balances[i].amount == INT64_MIN)
            return RL_EINVAL;
        for (size_t j = 0; j < i; j++)
            if (memcmp(balances[j].account, balances[i].account, 16) == 0 &&
                rl_asset_equal(&balances[j].asset, &balances[i].asset))
                return RL_EINVAL;
    }

    /* 2. consumed postings (LED-6): supplied, and not already consumed. A PendingInactive
     * posting is the normal state at finalize (this commit's reservation); whose
     * reservation it is, the store's conditional update decides, not the core. */
    const rl_posting_t *in[RL_MAX_INPUTS];
    for (uint32_t i = 0; i < t->n_inputs; i++) {
        in[i] = find_posting(consumed, n_consumed, &t->inputs[i]);
        if (in[i] == NULL) return RL_EUNKNOWNPOSTING;
        if (in[i]->status == RL_POSTING_INACTIVE) return RL_ESPENT;
    }

    /* 3. accounts: every involved account supplied. */
    involved_t inv;
    inv.n = 0;
    for (uint32_t i = 0; i < t->n_inputs; i++)
        involve(&inv, in[i]->account);
    for (uint32_t i = 0; i < t->n_outputs; i++)
        involve(&inv, t->outputs[i].account);
    const rl_account_t *acct[RL__MAX_INVOLVED];
    for (uint32_t i = 0; i < inv.n; i++) {
        acct[i] = find_account(accounts, n_accounts, inv.id[i]);
        if (acct[i] == NULL) return RL_EUNKNOWNACCOUNT;
    }

    /* 4. snapshot pinning (LED-9): each involved account pinned at its current version,
     * and nothing else pinned, so a transfer states exactly what it was resolved against. */
    for (uint32_t i = 0; i < inv.n; i++) {
        const rl_pin_t *pin = find_pin(t, inv.id[i]);
        if (pin == NULL) return RL_EUNPINNED;
        if (pin->version != acct[i]->version) return RL_EVERSIONMISMATCH;
    }
    for (uint32_t i = 0; i < t->n_pins; i++) {
        int found = 0;
        for (uint32_t j = 0; j < inv.n && !found; j++)
            found = memcmp(inv.id[j], t->pins[i].account, 16) == 0;
        if (!found) return RL_EUNPINNED;
    }

    /* 5. status (LED-8): frozen and closed accounts take part in nothing. */
    for (uint32_t i = 0; i < inv.n; i++) {
        if (acct[i]->status == RL_ACCOUNT_FROZEN) return RL_EFROZEN;
        if (acct[i]->status == RL_ACCOUNT_CLOSED) return RL_ECLOSED;
    }

    /* 6. assets (LED-5): one code, one scale, across every leg. */
    uint32_t legs = t->n_inputs + t->n_outputs;
    for (uint32_t i = 1; i < legs; i++) {
        const rl_asset_t *a = leg_asset(t, in, i);
        for (uint32_t j = 0; j < i; j++) {
            const rl_asset_t *b = leg_asset(t, in, j);
            if (a->scale != b->scale && memcmp(a->code, b->code, sizeof a->code) == 0)
                return RL_EASSET;
        }
    }

    /* 7. per-pair sums (LED-4): debits from consumed postings, credits from outputs. */
    for (uint32_t i = 0; i < t->n_inputs; i++)
        RL__TRY(add_leg(plan, in[i]->account, &in[i]->asset, in[i]->amount, 0));
    for (uint32_t i = 0; i < t->n_outputs; i++)
        RL__TRY(
            add_leg(plan, t->outputs[i].account, &t->outputs[i].asset, t->outputs[i].amount, 1));

    /* 8. conservation per asset (LED-5), each asset once, at its first delta. */
    for (uint32_t i = 0; i < plan->n_deltas; i++) {
        const rl_asset_t *a = &plan->deltas[i].asset;
        int seen = 0;
        for (uint32_t j = 0; j < i && !seen; j++)
            seen = rl_asset_equal(&plan->deltas[j].asset, a);
        if (seen) continue;
        int64_t debit = 0, credit = 0;
        for (uint32_t j = i; j < plan->n_deltas; j++) {
            if (!rl_asset_equal(&plan->deltas[j].asset, a)) continue;
            RL__TRY(rl_amount_add(debit, plan->deltas[j].debit, &debit));
            RL__TRY(rl_amount_add(credit, plan->deltas[j].credit, &credit));
        }
        if (debit != credit) return RL_ECONSERVATION;
    }

    /* 9. balances: every pair's current balance supplied; after = before - debit + credit. */
    for (uint32_t i = 0; i < plan->n_deltas; i++) {
        rl_delta_t *d = &plan->deltas[i];
        const rl_balance_t *b = NULL;
        for (size_t j = 0; j < n_balances && b == NULL; j++)
            if (memcmp(balances[j].account, d->account, 16) == 0 &&
                rl_asset_equal(&balances[j].asset, &d->asset))
                b = &balances[j];
        if (b == NULL) return RL_ENOBALANCE;
        int64_t net;
        d->before = b->amount;
        RL__TRY(rl_amount_sub(d->credit, d->debit, &net));
        RL__TRY(rl_amount_add(d->before, net, &d->after));
    }

    /* 10. policies (LED-7): no negative posting on a no-overdraft account ... */
    for (uint32_t i = 0; i < t->n_outputs; i++) {
        const rl_account_t *a = find_account(accounts, n_accounts, t->outputs[i].account);
        if (a->policy == RL_POLICY_NO_OVERDRAFT && t->outputs[i].amount < 0) return RL_ENEGATIVE;
    }
    /* ... and no pair the transfer lowers ends below its floor. A pair that does not go
     * down is never refused, even when already below the floor (a credit must land). */
    for (uint32_t i = 0; i < plan->n_deltas; i++) {
        const rl_delta_t *d = &plan->deltas[i];
        const rl_account_t *a = find_account(accounts, n_accounts, d->account);
        if (a->policy == RL_POLICY_UNCAPPED || d->after >= d->before) continue;
        if (d->after < a->floor) return RL_EINSUFFICIENT;
    }

    return rl_transfer_id(t, plan->transfer_id);
}
