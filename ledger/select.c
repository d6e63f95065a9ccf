/* Posting selection (LED-10): greedy largest-first over the caller's postings, with no
 * scratch memory. Each round picks the best posting ordered strictly after the previous
 * pick in the total order (amount descending, posting id ascending), so the picks are the
 * same as sorting first, and nothing is picked twice even when amounts tie. */
#include "internal.h"

static int eligible(const rl_posting_t *p, const uint8_t account[16], const rl_asset_t *asset) {
    return p->status == RL_POSTING_ACTIVE && p->amount > 0 &&
           memcmp(p->account, account, 16) == 0 && rl_asset_equal(&p->asset, asset);
}

/* 1 when a comes before b in selection order. */
static int before(const rl_posting_t *a, const rl_posting_t *b) {
    if (a->amount != b->amount) return a->amount > b->amount;
    return rl_posting_ref_cmp(&a->id, &b->id) < 0;
}

int rl_select_postings(const rl_posting_t *postings, size_t n, const uint8_t account[16],
                       const rl_asset_t *asset, int64_t target, uint32_t *idx_out, uint32_t idx_cap,
                       uint32_t *n_out, int64_t *sum_out, int64_t *change_out) {
    if ((postings == NULL && n != 0) || account == NULL || asset == NULL || target <= 0 ||
        (idx_out == NULL && idx_cap != 0) || n_out == NULL || sum_out == NULL || change_out == NULL)
        return RL_EINVAL;
    if (n > RL_SELECT_MAX) return RL_ELIMIT;
    *n_out = 0;
    *sum_out = 0;
    *change_out = 0;

    /* Enough at all? The total decides between InsufficientFunds and a selection, and
     * saturating keeps a huge total from overflowing (it is enough either way). */
    int64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (!eligible(&postings[i], account, asset)) continue;
        if (rl_amount_add(total, postings[i].amount, &total) != 0) {
            total = INT64_MAX;
            break;
        }
    }
    if (total < target) {
        *sum_out = total;
        return RL_EINSUFFICIENT;
    }

    int64_t sum = 0;
    uint32_t picked = 0;
    const rl_posting_t *prev = NULL;
    while (sum < target) {
        size_t best = n;
        for (size_t i = 0; i < n; i++) {
            const rl_posting_t *p = &postings[i];
            if (!eligible(p, account, asset) || (prev != NULL && !before(prev, p))) continue;
            if (best == n || before(p, &postings[best])) best = i;
        }
        if (best == n) return RL_EINSUFFICIENT; /* unreachable: total >= target */
        if (picked == idx_cap) return RL_ELIMIT;
        /* Picks shrink, so sum + pick < 2 * target: only a target above INT64_MAX / 2 can
         * overflow here, and that is reported, never wrapped (LED-4). */
        if (rl_amount_add(sum, postings[best].amount, &sum) != 0) return RL_EOVERFLOW;
        idx_out[picked++] = (uint32_t)best;
        prev = &postings[best];
    }
    *n_out = picked;
    *sum_out = sum;
    *change_out = sum - target;
    return 0;
}
