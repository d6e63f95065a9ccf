/* Posting selection (LED-10): greedy largest-first over the caller's postings in one pass,
 * with no scratch memory beyond the caller's idx_out.
 *
 * The picks are the shortest prefix of the eligible postings in selection order (amount
 * descending, then posting id ascending) whose sum reaches the target: what sorting and
 * accumulating would give. Instead of sorting, idx_out holds that prefix for the postings
 * seen so far, in order; each new posting is inserted at its place, and the tail that the
 * postings before it already cover is dropped (a later posting can only push it further
 * back, never into the answer). So idx_out stays short (about as long as the answer) and
 * the pass is linear in n in practice, O(n * idx_cap) at worst.
 *
 * Invariant (no overflow, LED-4): when idx_out is not empty, the sum of all but its last
 * pick is below the target, so sum < target + last < 2^64 in a uint64_t. */
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

    const uint64_t want = (uint64_t)target;
    uint64_t sum = 0; /* of idx_out[0..len) */
    uint32_t len = 0;
    int64_t total = 0; /* of every eligible posting, saturating: only compared to target */
    for (size_t i = 0; i < n; i++) {
        const rl_posting_t *p = &postings[i];
        if (!eligible(p, account, asset)) continue;
        if (rl_amount_add(total, p->amount, &total) != 0) total = INT64_MAX;
        /* The common case once the picks cover the target: smaller than the last pick. */
        if (len > 0 && sum >= want && before(&postings[idx_out[len - 1]], p)) continue;
        /* its place among the picks so far (binary search on selection order) */
        uint32_t lo = 0, hi = len;
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (before(&postings[idx_out[mid]], p))
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo == len && (sum >= want || len == idx_cap)) continue; /* never a pick */
        const uint64_t x = (uint64_t)p->amount;
        /* Drop the tail after its place that the picks before it, with it, cover; and the
         * last pick when there is no room (it would be pick idx_cap + 1). */
        while (len > lo &&
               (sum - (uint64_t)postings[idx_out[len - 1]].amount + x >= want || len == idx_cap)) {
            sum -= (uint64_t)postings[idx_out[len - 1]].amount;
            len--;
        }
        memmove(&idx_out[lo + 1], &idx_out[lo], (size_t)(len - lo) * sizeof idx_out[0]);
        idx_out[lo] = (uint32_t)i;
        len++;
        sum += x;
    }
    if (sum < want) {
        if (total >= target) return RL_ELIMIT; /* reachable, but in more than idx_cap picks */
        *sum_out = total;
        return RL_EINSUFFICIENT;
    }
    /* sum < target + last <= 2 * INT64_MAX: the sum itself may not fit an amount. */
    if (sum > (uint64_t)INT64_MAX) return RL_EOVERFLOW;
    *n_out = len;
    *sum_out = (int64_t)sum;
    *change_out = (int64_t)(sum - want);
    return 0;
}
