/* rl_batch_plan (issue 25, step 3 of docs/LEDGER.md "The C batch path"): members planned
 * over a batch's view in the caller's arrays, the view moved past each. Each case checks
 * a member's transfer against rl_resolve_and_plan over a view built by hand in the state
 * the earlier members must have left (the balances, the lists without the consumed
 * postings and with the change at its place), and the tags the call returns. The engine's
 * Lua move_view is the oracle over random batches (spec/ron/ledger/ledger_batch_spec.lua,
 * plan_core.check). */
#include "rl_test.h"

enum { PAYER = 1, PAYEE = 2, RECV = 3 };

static rl_account_t acct[3];
static rl_batch_pair_t bpairs[3];
static rl_posting_t posts[64];
static uint32_t tags[64];
static rl_batch_t B;
static rl_movement_t mv[1];
static rl_pair_view_t views[3];
static uint32_t idx[3];
static rl_resolve_in_t in;
static rl_resolved_t out, want_out;
static uint32_t ctags[RL_MAX_INPUTS];
static uint8_t buf[RL_TRANSFER_ENC_MAX], wbuf[RL_TRANSFER_ENC_MAX];
static size_t len, wlen;

/* The payer holds amt[0..n) (largest first, tagged 1..n) in a list with room for cap at
 * off; the payee's pair has no list. */
static void batch_init(const int64_t *amt, uint32_t n, uint32_t off, uint32_t cap) {
    memset(&B, 0, sizeof B);
    memset(bpairs, 0, sizeof bpairs);
    acct[0] = rl_t_account(PAYER, RL_POLICY_NO_OVERDRAFT, 0);
    acct[1] = rl_t_account(PAYEE, RL_POLICY_NO_OVERDRAFT, 0);
    acct[2] = rl_t_account(RECV, RL_POLICY_UNCAPPED, 0);
    int64_t sum = 0;
    for (uint32_t i = 0; i < n; i++) {
        posts[off + i] = rl_t_posting((uint8_t)(0x10 + i), i, PAYER, "USD", amt[i]);
        tags[off + i] = i + 1;
        sum += amt[i];
    }
    bpairs[0] = (rl_batch_pair_t){.balance = sum,
                                  .asset = rl_t_asset("USD", 2),
                                  .account = 0,
                                  .off = off,
                                  .n = n,
                                  .cap = cap,
                                  .listed = 1};
    bpairs[1] =
        (rl_batch_pair_t){.asset = rl_t_asset("USD", 2), .account = 1, .off = off + cap, .cap = 0};
    B = (rl_batch_t){.pairs = bpairs,
                     .postings = posts,
                     .tags = tags,
                     .n_pairs = 2,
                     .cap = 64,
                     .used = off + cap,
                     .limit = 1024};
}

/* A member paying `need` from the payer to the payee. */
static int pay(int64_t need, uint32_t member) {
    mv[0] = (rl_movement_t){.from = 0, .to = 1, .asset = rl_t_asset("USD", 2), .amount = need};
    memset(views, 0, sizeof views);
    for (uint32_t i = 0; i < 2; i++) {
        views[i].account = i;
        views[i].asset = rl_t_asset("USD", 2);
        views[i].receivable = -1;
        idx[i] = i;
    }
    in = (rl_resolve_in_t){.accounts = acct,
                           .n_accounts = 3,
                           .movements = mv,
                           .n_movements = 1,
                           .n_pairs = 2,
                           .intent = (const uint8_t *)"pay",
                           .intent_len = 3,
                           .first_page = 32};
    return rl_batch_plan(&B, &in, views, idx, member, &out, ctags, buf, sizeof buf, &len);
}

/* The member's transfer equals rl_resolve_and_plan's over the payer's list as given. */
static void same_as_fresh(const rl_posting_t *list, uint32_t n, int64_t balance) {
    rl_pair_view_t fv[2];
    memset(fv, 0, sizeof fv);
    fv[0] = (rl_pair_view_t){.postings = list,
                             .n_postings = n,
                             .account = 0,
                             .asset = rl_t_asset("USD", 2),
                             .balance = balance,
                             .receivable = -1};
    fv[1] = (rl_pair_view_t){.account = 1, .asset = rl_t_asset("USD", 2), .receivable = -1};
    rl_resolve_in_t fin = in;
    fin.pairs = fv;
    CHECK_RC(rl_resolve_and_plan(&fin, &want_out, wbuf, sizeof wbuf, &wlen), 0);
    CHECK_EQ_U64(len, wlen);
    if (len == wlen) CHECK_MEM(buf, wbuf, wlen);
}

RL_TEST(members_move_the_view) {
    const int64_t amt[] = {500, 300, 100};
    batch_init(amt, 3, 0, 8);
    rl_posting_t before[3] = {posts[0], posts[1], posts[2]};
    CHECK_RC(pay(450, 0), 0);
    same_as_fresh(before, 3, 900);
    /* 500 picked (tag 1), its change 50 joins the list after 100: 300, 100, 50 */
    CHECK_EQ_U64(out.n_consumed, 1);
    CHECK_EQ_U64(ctags[0], 1);
    CHECK_EQ_I64(bpairs[0].balance, 450);
    CHECK_EQ_I64(bpairs[1].balance, 450);
    CHECK_EQ_U64(bpairs[0].n, 3);
    CHECK_EQ_I64(posts[0].amount, 300);
    CHECK_EQ_I64(posts[1].amount, 100);
    CHECK_EQ_I64(posts[2].amount, 50);
    CHECK_MEM(posts[2].id.transfer_id, out.plan.transfer_id, 32);
    CHECK_EQ_U64(posts[2].id.index, 0);
    CHECK_EQ_U64(tags[2], (uint32_t)RL_BATCH_MADE | 0u << 8 | 0u);
    /* the second member spends over the moved view: 300 and 100 for 380, change 20 last */
    rl_posting_t moved[3] = {posts[0], posts[1], posts[2]};
    CHECK_RC(pay(380, 7), 0);
    same_as_fresh(moved, 3, 450);
    CHECK_EQ_U64(out.n_consumed, 2);
    CHECK_EQ_U64(ctags[0], 2);
    CHECK_EQ_U64(ctags[1], 3);
    CHECK_EQ_I64(bpairs[0].balance, 70);
    CHECK_EQ_U64(bpairs[0].n, 2);
    CHECK_EQ_I64(posts[0].amount, 50);
    CHECK_EQ_I64(posts[1].amount, 20);
    CHECK_EQ_U64(tags[1], (uint32_t)RL_BATCH_MADE | 7u << 8 | 0u);
    /* the third spends the change planned in the batch: its tag comes back */
    CHECK_RC(pay(60, 8), 0);
    CHECK_EQ_U64(out.n_consumed, 2);
    CHECK_EQ_U64(ctags[0], (uint32_t)RL_BATCH_MADE | 0u);
    CHECK_EQ_U64(ctags[1], (uint32_t)RL_BATCH_MADE | 7u << 8);
    CHECK_EQ_I64(bpairs[0].balance, 10);
}

RL_TEST(a_full_list_moves_to_the_free_end) {
    const int64_t amt[] = {500, 300};
    batch_init(amt, 2, 4, 2); /* no room for the change */
    CHECK_RC(pay(100, 1), 0);
    CHECK_EQ_U64(bpairs[0].off, 6); /* after the payee's empty list */
    CHECK_EQ_U64(bpairs[0].cap, 6);
    CHECK_EQ_U64(B.used, 12);
    CHECK_EQ_U64(bpairs[0].n, 2);
    CHECK_EQ_I64(posts[6].amount, 400);
    CHECK_EQ_I64(posts[7].amount, 300);
    CHECK_EQ_U64(tags[7], 2);
    /* no free end: RL_EBUFSIZE, and the view as it was */
    batch_init(amt, 2, 60, 2);
    B.used = 64;
    CHECK_RC(pay(100, 1), RL_EBUFSIZE);
    CHECK_EQ_I64(bpairs[0].balance, 800);
    CHECK_EQ_U64(bpairs[0].n, 2);
    CHECK_EQ_I64(posts[60].amount, 500);
}

RL_TEST(refusals_leave_the_view) {
    const int64_t amt[] = {500};
    batch_init(amt, 1, 0, 4);
    CHECK_RC(pay(600, 0), RL_EINSUFFICIENT);
    CHECK_EQ_I64(bpairs[0].balance, 500);
    CHECK_EQ_U64(bpairs[0].n, 1);
    bpairs[0].held = 1; /* a reservation on the short pair: a race */
    CHECK_RC(pay(600, 0), RL_EINFLIGHT);
    bpairs[0].held = 0;
    /* bad views: an index past the pairs, twice the same pair, an account that does not
     * match, a member past the bound, a list past the storage */
    idx[0] = 5;
    CHECK_RC(rl_batch_plan(&B, &in, views, idx, 0, &out, ctags, buf, sizeof buf, &len), RL_EINVAL);
    idx[0] = 1;
    CHECK_RC(rl_batch_plan(&B, &in, views, idx, 0, &out, ctags, buf, sizeof buf, &len), RL_EINVAL);
    idx[0] = 0;
    views[0].account = 2;
    CHECK_RC(rl_batch_plan(&B, &in, views, idx, 0, &out, ctags, buf, sizeof buf, &len), RL_EINVAL);
    views[0].account = 0;
    CHECK_RC(pay(100, RL_BATCH_MEMBERS), RL_EINVAL);
    bpairs[0].cap = 100;
    CHECK_RC(pay(100, 0), RL_EINVAL);
    bpairs[0].cap = 4;
    B.limit = 0;
    CHECK_RC(pay(100, 0), RL_EINVAL);
    B.limit = 1024;
    CHECK_RC(rl_batch_plan(NULL, &in, views, idx, 0, &out, ctags, buf, sizeof buf, &len),
             RL_EINVAL);
    CHECK_RC(pay(100, 0), 0);
}

int main(void) {
    RL_RUN(members_move_the_view, "LED-52 members over one view: balances, lists, tags");
    RL_RUN(a_full_list_moves_to_the_free_end, "I-7 a list's room, and a storage that is full");
    RL_RUN(refusals_leave_the_view, "LED-13 a refusal or a bad view moves nothing");
    RL_DONE();
}
