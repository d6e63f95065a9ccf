/* rl_batch_plan: a batch member planned over the batch's view, and the view moved past it
 * (issue 25, docs/LEDGER.md "The C batch path", step 3). The engine's Lua copied a payer's
 * list into the core for every member and rebuilt it after (batch_plan.lua move_view), so
 * a payer holding 1,000 postings cost ~200 us a transfer; here the lists stay in the
 * caller's arrays and move in place. The moves are move_view's, step by step (that module
 * stays the oracle the specs compare with): the deltas' balances, the consumed postings
 * out, then each output of positive amount into its pair's list when the pair has one, at
 * its place in selection order. Pure like the rest of the core (LED-11). */
#include "internal.h"

#define RL__MAX_PAIRS (RL_MAX_INPUTS + RL_MAX_OUTPUTS)

/* Selection order (view.lua largest_less): larger amounts first, then ids ascending. */
static int posting_less(const rl_posting_t *a, const rl_posting_t *b) {
    if (a->amount != b->amount) return a->amount > b->amount;
    int c = memcmp(a->id.transfer_id, b->id.transfer_id, 32);
    if (c != 0) return c < 0;
    return a->id.index < b->id.index;
}

static int check_batch(const rl_batch_t *b, const rl_resolve_in_t *in, const rl_pair_view_t *views,
                       const uint32_t *idx, uint32_t member) {
    if (b->used > b->cap || b->limit == 0 || member >= RL_BATCH_MEMBERS ||
        (b->pairs == NULL && b->n_pairs != 0) ||
        ((b->postings == NULL || b->tags == NULL) && b->cap != 0))
        return RL_EINVAL;
    if (in->n_pairs > RL__MAX_PAIRS) return RL_ELIMIT;
    if (in->n_pairs != 0 && (views == NULL || idx == NULL)) return RL_EINVAL;
    for (uint32_t i = 0; i < in->n_pairs; i++) {
        if (idx[i] >= b->n_pairs) return RL_EINVAL;
        for (uint32_t j = 0; j < i; j++)
            if (idx[j] == idx[i]) return RL_EINVAL;
        const rl_batch_pair_t *p = &b->pairs[idx[i]];
        if (p->n > p->cap || p->off > b->cap || p->cap > b->cap - p->off ||
            views[i].account != p->account || !rl_asset_equal(&views[i].asset, &p->asset))
            return RL_EINVAL;
    }
    return 0;
}

/* The member's views: each pair's state as the batch left it. */
static void fill_views(const rl_batch_t *b, const rl_resolve_in_t *in, rl_pair_view_t *views,
                       const uint32_t *idx) {
    for (uint32_t i = 0; i < in->n_pairs; i++) {
        const rl_batch_pair_t *p = &b->pairs[idx[i]];
        views[i].postings = b->postings + p->off;
        views[i].n_postings = p->n < b->limit ? p->n : b->limit;
        views[i].balance = p->balance;
        views[i].held = p->held;
        views[i].finalizing = p->finalizing;
    }
}

/* Room for each list's new postings (removals only free some): a list short of it moves to
 * the free end with twice what it needs. RL_EBUFSIZE: the storage has no such end. */
static int make_room(rl_batch_t *b, const rl_resolve_in_t *in, const rl_resolved_t *out,
                     const uint32_t *idx) {
    for (uint32_t j = 0; j < in->n_pairs; j++) {
        rl_batch_pair_t *p = &b->pairs[idx[j]];
        uint32_t adds = 0;
        for (uint32_t k = 0; p->listed && k < out->transfer.n_outputs; k++)
            if (out->output_pair[k] == j && out->outputs[k].amount > 0) adds++;
        if (p->n + adds <= p->cap) continue;
        uint64_t want = 2 * ((uint64_t)p->n + adds);
        if (want > (uint64_t)(b->cap - b->used)) return RL_EBUFSIZE;
        memcpy(b->postings + b->used, b->postings + p->off, p->n * sizeof *b->postings);
        memcpy(b->tags + b->used, b->tags + p->off, p->n * sizeof *b->tags);
        p->off = b->used;
        p->cap = (uint32_t)want;
        b->used += (uint32_t)want;
    }
    return 0;
}

static void remove_at(rl_batch_t *b, rl_batch_pair_t *p, uint32_t at) {
    rl_posting_t *l = b->postings + p->off;
    uint32_t *t = b->tags + p->off;
    memmove(l + at, l + at + 1, (p->n - at - 1) * sizeof *l);
    memmove(t + at, t + at + 1, (p->n - at - 1) * sizeof *t);
    p->n--;
}

/* Each pair's consumed postings out of its list, the highest position first. */
static void remove_consumed(rl_batch_t *b, const rl_resolve_in_t *in, const rl_resolved_t *out,
                            const uint32_t *idx) {
    for (uint32_t j = 0; j < in->n_pairs; j++) {
        uint32_t pos[RL_MAX_INPUTS], m = 0;
        for (uint32_t i = 0; i < out->n_consumed; i++) {
            if (out->consumed_pair[i] != j) continue;
            uint32_t at = m++;
            while (at > 0 && pos[at - 1] < out->consumed_pos[i]) {
                pos[at] = pos[at - 1];
                at--;
            }
            pos[at] = out->consumed_pos[i];
        }
        for (uint32_t r = 0; r < m; r++)
            remove_at(b, &b->pairs[idx[j]], pos[r]);
    }
}

/* Output k of the transfer into its pair's list, after every posting that does not come
 * after it (view.lua insert_sorted from the list's end). */
static void insert_output(rl_batch_t *b, rl_batch_pair_t *p, const rl_resolved_t *out, uint32_t k,
                          uint32_t member) {
    rl_posting_t np;
    memset(&np, 0, sizeof np);
    memcpy(np.id.transfer_id, out->plan.transfer_id, 32);
    np.id.index = k;
    memcpy(np.account, out->outputs[k].account, 16);
    np.asset = out->outputs[k].asset;
    np.amount = out->outputs[k].amount;
    np.status = RL_POSTING_ACTIVE;
    rl_posting_t *l = b->postings + p->off;
    uint32_t *t = b->tags + p->off;
    uint32_t at = p->n;
    while (at > 0 && posting_less(&np, &l[at - 1]))
        at--;
    memmove(l + at + 1, l + at, (p->n - at) * sizeof *l);
    memmove(t + at + 1, t + at, (p->n - at) * sizeof *t);
    l[at] = np;
    t[at] = (uint32_t)RL_BATCH_MADE | member << 8 | k;
    p->n++;
}

int rl_batch_plan(rl_batch_t *b, rl_resolve_in_t *in, rl_pair_view_t *views, const uint32_t *idx,
                  uint32_t member, rl_resolved_t *out, uint32_t *consumed_tags, uint8_t *buf,
                  size_t cap, size_t *len_out) {
    if (b == NULL || in == NULL || out == NULL || consumed_tags == NULL) return RL_EINVAL;
    RL__TRY(check_batch(b, in, views, idx, member));
    fill_views(b, in, views, idx);
    in->pairs = views;
    RL__TRY(rl_resolve_and_plan(in, out, buf, cap, len_out));
    RL__TRY(make_room(b, in, out, idx));
    for (uint32_t i = 0; i < out->n_consumed; i++) {
        const rl_batch_pair_t *p = &b->pairs[idx[out->consumed_pair[i]]];
        consumed_tags[i] = b->tags[p->off + out->consumed_pos[i]];
    }
    for (uint32_t d = 0; d < out->plan.n_deltas; d++)
        b->pairs[idx[out->delta_pair[d]]].balance = out->deltas[d].after;
    remove_consumed(b, in, out, idx);
    for (uint32_t k = 0; k < out->transfer.n_outputs; k++) {
        rl_batch_pair_t *p = &b->pairs[idx[out->output_pair[k]]];
        if (p->listed && out->outputs[k].amount > 0) insert_output(b, p, out, k, member);
    }
    return 0;
}
