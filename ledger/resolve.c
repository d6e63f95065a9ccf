/* rl_resolve_and_plan: a commit request's resolution (LED-10, LED-26, LED-32) and its
 * validation in one call over the caller's view, for the batch path's plan (issue 25: the
 * engine's Lua resolution built ~40 tables and crossed the FFI three times per transfer).
 * It follows lua/ron/ledger/engine/resolve.lua step by step, for a view that is one read
 * (no page read again, no second look at a short pair): that module stays the oracle the
 * tests compare it with, and the way every request this call refuses is decided. Pure like
 * the rest of the core (LED-11): the caller's arrays, bounded loops, no allocation. */
#include "internal.h"

#define RL__MAX_PAIRS (RL_MAX_INPUTS + RL_MAX_OUTPUTS)

/* A pair's net over the movements, in order of first appearance. */
typedef struct net_s {
    uint32_t account;
    const rl_asset_t *asset;
    int64_t net;
} net_t;

typedef struct nets_s {
    net_t n[RL__MAX_PAIRS];
    uint32_t len;
} nets_t;

static int add_net(nets_t *ns, uint32_t account, const rl_asset_t *asset, int64_t amount,
                   int debit) {
    net_t *p = NULL;
    for (uint32_t i = 0; i < ns->len && p == NULL; i++)
        if (ns->n[i].account == account && rl_asset_equal(ns->n[i].asset, asset)) p = &ns->n[i];
    if (p == NULL) {
        if (ns->len == RL__MAX_PAIRS) return RL_ELIMIT;
        p = &ns->n[ns->len++];
        p->account = account;
        p->asset = asset;
        p->net = 0;
    }
    return debit ? rl_amount_sub(p->net, amount, &p->net) : rl_amount_add(p->net, amount, &p->net);
}

static int find_pair(const rl_resolve_in_t *in, uint32_t account, const rl_asset_t *asset) {
    for (uint32_t i = 0; i < in->n_pairs; i++)
        if (in->pairs[i].account == account && rl_asset_equal(&in->pairs[i].asset, asset))
            return (int)i;
    return -1;
}

static int add_output(rl_resolved_t *out, const rl_resolve_in_t *in, uint32_t account,
                      const rl_asset_t *asset, int64_t amount) {
    if (out->transfer.n_outputs == RL_MAX_OUTPUTS) return RL_ELIMIT;
    int pi = find_pair(in, account, asset);
    if (pi < 0) return RL_EUNDECIDED;
    uint32_t k = out->transfer.n_outputs++;
    out->output_pair[k] = (uint32_t)pi;
    memcpy(out->outputs[k].account, in->accounts[account].id, 16);
    out->outputs[k].asset = *asset;
    out->outputs[k].amount = amount;
    out->output_account[k] = account;
    return 0;
}

static void add_picks(rl_resolved_t *out, uint32_t pair, const uint32_t *idx, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) {
        out->consumed_pair[out->n_consumed] = pair;
        out->consumed_pos[out->n_consumed] = idx[i];
        out->n_consumed++;
    }
}

/* A pair short of its need (LED-32): value in flight is a race; else what it has is
 * drained and the shortfall goes to its receivable, or onto itself where its policy lets
 * it hold a negative posting (validation checks the floor). */
static int short_pair(const rl_resolve_in_t *in, rl_resolved_t *out, const net_t *p, int pi,
                      uint32_t n_list, int64_t need, int64_t avail, uint32_t cap) {
    const rl_pair_view_t *v = &in->pairs[pi];
    if (v->held) return RL_EINFLIGHT;
    if (v->finalizing == 2) return RL_EUNDECIDED;
    if (v->finalizing) return RL_EINFLIGHT;
    if (v->receivable < 0 && in->accounts[p->account].policy == RL_POLICY_NO_OVERDRAFT)
        return RL_EINSUFFICIENT;
    if (avail > 0) {
        uint32_t idx[RL_MAX_INPUTS], n;
        int64_t sum, change;
        int rc = rl_select_postings(v->postings, n_list, in->accounts[p->account].id, p->asset,
                                    avail, idx, cap, &n, &sum, &change);
        if (rc != 0) return rc == RL_EINSUFFICIENT ? RL_EINVAL : rc;
        add_picks(out, (uint32_t)pi, idx, n);
    }
    uint32_t to = v->receivable >= 0 ? (uint32_t)v->receivable : p->account;
    return add_output(out, in, to, p->asset, -(need - avail));
}

/* A pair that nets a debit pays it: its first page, then all it was given. */
static int pay(const rl_resolve_in_t *in, rl_resolved_t *out, const net_t *p) {
    int pi = find_pair(in, p->account, p->asset);
    if (pi < 0) return RL_EUNDECIDED;
    const rl_pair_view_t *v = &in->pairs[pi];
    const int64_t need = -p->net;
    const uint32_t cap = RL_MAX_INPUTS - out->n_consumed;
    uint32_t idx[RL_MAX_INPUTS], n = 0;
    int64_t sum = 0, change = 0;
    uint32_t n_list = v->n_postings < in->first_page ? v->n_postings : in->first_page;
    const uint8_t *id = in->accounts[p->account].id;
    int rc =
        rl_select_postings(v->postings, n_list, id, p->asset, need, idx, cap, &n, &sum, &change);
    if (rc != 0 && v->n_postings >= in->first_page) {
        n_list = v->n_postings;
        rc = rl_select_postings(v->postings, n_list, id, p->asset, need, idx, cap, &n, &sum,
                                &change);
    }
    if (rc == RL_EINSUFFICIENT) return short_pair(in, out, p, pi, n_list, need, sum, cap);
    if (rc != 0) return rc;
    add_picks(out, (uint32_t)pi, idx, n);
    return change != 0 ? add_output(out, in, p->account, p->asset, change) : 0;
}

/* input_of: the consumed postings' places in ascending id order (inputs[k] holds consumed
 * k's id until the caller reorders them); ids are distinct (one pair pays once). */
static void sort_inputs(rl_resolved_t *out) {
    for (uint32_t i = 0; i < out->n_consumed; i++) {
        uint32_t j = i;
        while (j > 0 &&
               rl_posting_ref_cmp(&out->inputs[i], &out->inputs[out->input_of[j - 1]]) < 0) {
            out->input_of[j] = out->input_of[j - 1];
            j--;
        }
        out->input_of[j] = i;
    }
}

static void involve(rl_resolved_t *out, uint32_t account) {
    for (uint32_t i = 0; i < out->n_involved; i++)
        if (out->involved[i] == account) return;
    out->involved[out->n_involved++] = account;
}

static int use_pair(const rl_resolve_in_t *in, rl_resolved_t *out, uint32_t account,
                    const rl_asset_t *asset) {
    int pi = find_pair(in, account, asset);
    if (pi < 0) return RL_EUNDECIDED;
    for (uint32_t i = 0; i < out->n_pairs_used; i++)
        if (out->pairs_used[i] == (uint32_t)pi) return 0;
    out->pairs_used[out->n_pairs_used++] = (uint32_t)pi;
    return 0;
}

/* The pins (every involved account at the version read, ascending ids: LED-9) and the
 * validation's inputs: accounts, consumed postings, balances. */
static int complete(const rl_resolve_in_t *in, rl_resolved_t *out) {
    rl_transfer_t *t = &out->transfer;
    for (uint32_t i = 0; i < out->n_consumed; i++) {
        const rl_posting_t *c = &in->pairs[out->consumed_pair[i]].postings[out->consumed_pos[i]];
        out->scratch_consumed[i] = *c;
        involve(out, in->pairs[out->consumed_pair[i]].account);
        RL__TRY(use_pair(in, out, in->pairs[out->consumed_pair[i]].account, &c->asset));
    }
    for (uint32_t i = 0; i < t->n_outputs; i++) {
        involve(out, out->output_account[i]);
        RL__TRY(use_pair(in, out, out->output_account[i], &out->outputs[i].asset));
    }
    for (uint32_t i = 0; i < out->n_involved; i++) {
        uint32_t a = out->involved[i], j = i;
        while (j > 0 && memcmp(in->accounts[a].id, out->pins[j - 1].account, 16) < 0) {
            out->pins[j] = out->pins[j - 1];
            out->pin_account[j] = out->pin_account[j - 1];
            j--;
        }
        memcpy(out->pins[j].account, in->accounts[a].id, 16);
        out->pins[j].version = in->accounts[a].version;
        out->pin_account[j] = a;
        out->scratch_accounts[i] = in->accounts[a];
    }
    t->n_pins = out->n_involved;
    for (uint32_t i = 0; i < out->n_pairs_used; i++) {
        const rl_pair_view_t *v = &in->pairs[out->pairs_used[i]];
        rl_balance_t *b = &out->scratch_balances[i];
        memcpy(b->account, in->accounts[v->account].id, 16);
        b->asset = v->asset;
        b->amount = v->balance;
    }
    return 0;
}

static int check_in(const rl_resolve_in_t *in) {
    if (in->n_accounts > RL_SELECT_MAX || in->n_pairs > RL__MAX_PAIRS ||
        in->n_movements > RL__MAX_PAIRS || in->first_page == 0)
        return RL_ELIMIT;
    if ((in->accounts == NULL && in->n_accounts != 0) ||
        (in->movements == NULL && in->n_movements != 0) || (in->pairs == NULL && in->n_pairs != 0))
        return RL_EINVAL;
    for (uint32_t i = 0; i < in->n_movements; i++) {
        const rl_movement_t *m = &in->movements[i];
        if (m->from >= in->n_accounts || m->to >= in->n_accounts || m->amount <= 0 ||
            rl_asset_check(&m->asset) != 0)
            return RL_EINVAL;
    }
    for (uint32_t i = 0; i < in->n_pairs; i++) {
        const rl_pair_view_t *v = &in->pairs[i];
        if (v->account >= in->n_accounts || v->receivable < -1 ||
            (v->receivable >= 0 && (uint32_t)v->receivable >= in->n_accounts) ||
            (v->postings == NULL && v->n_postings != 0))
            return RL_EINVAL;
    }
    return 0;
}

/* The transfer: the nets, each debit paid, each credit an output; inputs in canonical
 * order (LED-1). */
static int resolve(const rl_resolve_in_t *in, rl_resolved_t *out) {
    nets_t ns;
    ns.len = 0;
    for (uint32_t i = 0; i < in->n_movements; i++) {
        const rl_movement_t *m = &in->movements[i];
        RL__TRY(add_net(&ns, m->from, &m->asset, m->amount, 1));
        RL__TRY(add_net(&ns, m->to, &m->asset, m->amount, 0));
    }
    rl_transfer_t *t = &out->transfer;
    memset(t, 0, sizeof *t);
    out->n_consumed = out->n_involved = out->n_pairs_used = 0;
    for (uint32_t i = 0; i < ns.len; i++) {
        if (ns.n[i].net < 0)
            RL__TRY(pay(in, out, &ns.n[i]));
        else if (ns.n[i].net > 0)
            RL__TRY(add_output(out, in, ns.n[i].account, ns.n[i].asset, ns.n[i].net));
    }
    for (uint32_t i = 0; i < out->n_consumed; i++) {
        const rl_pair_view_t *v = &in->pairs[out->consumed_pair[i]];
        out->inputs[i] = v->postings[out->consumed_pos[i]].id;
    }
    sort_inputs(out);
    rl_posting_ref_t sorted[RL_MAX_INPUTS];
    for (uint32_t i = 0; i < out->n_consumed; i++)
        sorted[i] = out->inputs[out->input_of[i]];
    for (uint32_t i = 0; i < out->n_consumed; i++)
        out->inputs[i] = sorted[i];
    t->inputs = out->inputs;
    t->n_inputs = out->n_consumed;
    t->outputs = out->outputs;
    t->pins = out->pins;
    t->metadata = in->metadata;
    t->metadata_len = in->metadata_len;
    t->intent = in->intent;
    t->intent_len = in->intent_len;
    return 0;
}

/* Each delta's pair: one whose balance validation took. */
static int delta_pairs(const rl_resolve_in_t *in, rl_resolved_t *out) {
    for (uint32_t i = 0; i < out->plan.n_deltas; i++) {
        const rl_delta_t *d = &out->deltas[i];
        uint32_t j = 0;
        for (; j < out->n_pairs_used; j++) {
            const rl_pair_view_t *v = &in->pairs[out->pairs_used[j]];
            if (memcmp(in->accounts[v->account].id, d->account, 16) == 0 &&
                rl_asset_equal(&v->asset, &d->asset))
                break;
        }
        if (j == out->n_pairs_used) return RL_ENOBALANCE;
        out->delta_pair[i] = out->pairs_used[j];
    }
    return 0;
}

int rl_resolve_and_plan(const rl_resolve_in_t *in, rl_resolved_t *out, uint8_t *buf, size_t cap,
                        size_t *len_out) {
    if (in == NULL || out == NULL || len_out == NULL || (buf == NULL && cap != 0)) return RL_EINVAL;
    RL__TRY(check_in(in));
    RL__TRY(resolve(in, out));
    RL__TRY(complete(in, out));
    out->plan.deltas = out->deltas;
    out->plan.deltas_cap = RL__MAX_PAIRS;
    out->plan.n_deltas = 0;
    RL__TRY(rl_validate_and_plan(&out->transfer, out->scratch_accounts, out->n_involved,
                                 out->scratch_consumed, out->n_consumed, out->scratch_balances,
                                 out->n_pairs_used, &out->plan));
    RL__TRY(delta_pairs(in, out));
    return rl_transfer_encode(&out->transfer, buf, cap, len_out);
}
