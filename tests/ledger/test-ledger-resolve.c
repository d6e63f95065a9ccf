/* rl_resolve_and_plan (LED-10, LED-26, LED-32; issue 25): a request's transfer and plan in
 * one call over the caller's view. Each case builds the transfer resolution must give by
 * hand (the picks, the change, the shortfall's output, the pins) and checks the call's
 * bytes, id and plan against it; the refusals (a race, a view that lacks a decision's
 * input, a rejection) each get their code. The engine's Lua resolution is the oracle over
 * random batches (spec/ron/ledger/ledger_batch_spec.lua, plan_core.check). */
#include "rl_test.h"

enum { PAYER = 1, PAYEE = 2, RECV = 3, SOURCE = 4 };

typedef struct view_s {
    rl_account_t acct[4];
    rl_posting_t post[8];
    rl_movement_t mv[2];
    rl_pair_view_t pairs[6];
    rl_resolve_in_t in;
    rl_resolved_t out;
    uint8_t buf[RL_TRANSFER_ENC_MAX];
    size_t len;
} view_t;

static view_t V;

/* payer (no overdraft, receivable RECV) holds postings of amounts amt[0..n) (largest
 * first); payee and the receivable hold nothing; payer pays payee `need`. */
static void view_init(view_t *v, const int64_t *amt, uint32_t n, int64_t need) {
    memset(v, 0, sizeof *v);
    v->acct[0] = rl_t_account(PAYER, RL_POLICY_NO_OVERDRAFT, 0);
    v->acct[1] = rl_t_account(PAYEE, RL_POLICY_NO_OVERDRAFT, 0);
    v->acct[1].version = 7;
    v->acct[2] = rl_t_account(RECV, RL_POLICY_UNCAPPED, 0);
    v->acct[3] = rl_t_account(SOURCE, RL_POLICY_UNCAPPED, 0);
    int64_t sum = 0;
    for (uint32_t i = 0; i < n; i++) {
        v->post[i] = rl_t_posting((uint8_t)(0x10 + i), i, PAYER, "USD", amt[i]);
        sum += amt[i];
    }
    v->mv[0] = (rl_movement_t){.from = 0, .to = 1, .asset = rl_t_asset("USD", 2), .amount = need};
    v->pairs[0] = (rl_pair_view_t){.postings = v->post,
                                   .n_postings = n,
                                   .account = 0,
                                   .asset = rl_t_asset("USD", 2),
                                   .balance = sum,
                                   .receivable = 2};
    v->pairs[1] = (rl_pair_view_t){.account = 1, .asset = rl_t_asset("USD", 2), .receivable = -1};
    v->pairs[2] = (rl_pair_view_t){.account = 2, .asset = rl_t_asset("USD", 2), .receivable = -1};
    v->in = (rl_resolve_in_t){.accounts = v->acct,
                              .n_accounts = 4,
                              .movements = v->mv,
                              .n_movements = 1,
                              .pairs = v->pairs,
                              .n_pairs = 3,
                              .intent = (const uint8_t *)"pay:1",
                              .intent_len = 5,
                              .first_page = 32};
}

static int run(view_t *v) {
    return rl_resolve_and_plan(&v->in, &v->out, v->buf, sizeof v->buf, &v->len);
}

/* The call's transfer equals want (bytes and id), with the pins every involved account. */
static void check_transfer(view_t *v, const rl_transfer_t *want) {
    uint8_t wbuf[4096], id[32];
    size_t wlen = 0;
    CHECK_RC(rl_transfer_encode(want, wbuf, sizeof wbuf, &wlen), 0);
    CHECK_EQ_U64(v->len, wlen);
    if (v->len == wlen) CHECK_MEM(v->buf, wbuf, wlen);
    CHECK_RC(rl_transfer_id(want, id), 0);
    CHECK_MEM(v->out.plan.transfer_id, id, 32);
}

static rl_output_t output(uint8_t acct, int64_t amount) {
    rl_output_t o;
    memset(&o, 0, sizeof o);
    rl_t_id(o.account, acct);
    o.asset = rl_t_asset("USD", 2);
    o.amount = amount;
    return o;
}

static rl_pin_t pin(uint8_t acct, uint64_t version) {
    rl_pin_t p;
    memset(&p, 0, sizeof p);
    rl_t_id(p.account, acct);
    p.version = version;
    return p;
}

RL_TEST(payment_with_change) {
    const int64_t amt[] = {500, 300, 100};
    view_init(&V, amt, 3, 600);
    CHECK_RC(run(&V), 0);
    /* largest first: 500 + 300 cover 600; change 200 back first (the payer's net comes
     * first), then the payee's credit; inputs ascending; pins ascending */
    rl_posting_ref_t in[2] = {V.post[0].id, V.post[1].id};
    rl_output_t out[2] = {output(PAYER, 200), output(PAYEE, 600)};
    rl_pin_t pins[2] = {pin(PAYER, 1), pin(PAYEE, 7)};
    rl_transfer_t want = rl_t_transfer(in, 2, out, 2, pins, 2, NULL, "pay:1");
    check_transfer(&V, &want);
    CHECK_EQ_U64(V.out.n_consumed, 2);
    CHECK_EQ_U64(V.out.consumed_pos[0], 0);
    CHECK_EQ_U64(V.out.consumed_pos[1], 1);
    CHECK_EQ_U64(V.out.output_pair[0], 0);
    CHECK_EQ_U64(V.out.output_pair[1], 1);
    /* the plan: the payer 900 -> 300 (800 spent, 200 back), the payee 0 -> 600 */
    CHECK_EQ_U64(V.out.plan.n_deltas, 2);
    CHECK_EQ_I64(V.out.deltas[0].before, 900);
    CHECK_EQ_I64(V.out.deltas[0].debit, 800);
    CHECK_EQ_I64(V.out.deltas[0].after, 300);
    CHECK_EQ_I64(V.out.deltas[1].after, 600);
    CHECK_EQ_U64(V.out.delta_pair[1], 1);
    CHECK_EQ_U64(V.out.n_involved, 2);
    CHECK_EQ_U64(V.out.n_pairs_used, 2);
}

RL_TEST(inputs_in_canonical_order) {
    /* 400 (id 0x20..) is picked before 50 (id 0x05..): the inputs ascend by id, the
     * consumed keep pick order */
    const int64_t amt[] = {400, 50};
    view_init(&V, amt, 2, 420);
    V.post[0] = rl_t_posting(0x20, 0, PAYER, "USD", 400);
    V.post[1] = rl_t_posting(0x05, 0, PAYER, "USD", 50);
    CHECK_RC(run(&V), 0);
    CHECK_EQ_U64(V.out.n_consumed, 2);
    CHECK_EQ_U64(V.out.consumed_pos[0], 0);
    CHECK_EQ_U64(V.out.input_of[0], 1);
    CHECK_MEM(V.out.inputs[0].transfer_id, V.post[1].id.transfer_id, 32);
    CHECK(rl_posting_ref_cmp(&V.out.inputs[0], &V.out.inputs[1]) < 0);
}

RL_TEST(second_page_when_the_first_falls_short) {
    /* first page of 2 (200) short of 300: all four given are looked at */
    const int64_t amt[] = {100, 100, 100, 100};
    view_init(&V, amt, 4, 300);
    V.in.first_page = 2;
    CHECK_RC(run(&V), 0);
    CHECK_EQ_U64(V.out.n_consumed, 3);
    /* a first page that is not full holds every posting: no second look */
    V.pairs[0].n_postings = 1;
    V.pairs[0].balance = 100;
    V.pairs[0].receivable = -1;
    CHECK_RC(run(&V), RL_EINSUFFICIENT);
}

RL_TEST(shortfall_to_the_receivable) {
    /* 100 of 250: drained, 150 onto the receivable (LED-32's overdraft) */
    const int64_t amt[] = {100};
    view_init(&V, amt, 1, 250);
    CHECK_RC(run(&V), 0);
    rl_posting_ref_t in[1] = {V.post[0].id};
    rl_output_t out[2] = {output(RECV, -150), output(PAYEE, 250)};
    rl_pin_t pins[3] = {pin(PAYER, 1), pin(PAYEE, 7), pin(RECV, 1)};
    rl_transfer_t want = rl_t_transfer(in, 1, out, 2, pins, 3, NULL, "pay:1");
    check_transfer(&V, &want);
    CHECK_EQ_U64(V.out.output_pair[0], 2);
    CHECK_EQ_U64(V.out.output_account[0], 2);
}

RL_TEST(shortfall_on_an_uncapped_source) {
    /* the usage source: no postings, no receivable, its own negative posting */
    view_init(&V, NULL, 0, 40);
    V.mv[0].from = 3;
    V.pairs[0] = (rl_pair_view_t){.account = 3, .asset = rl_t_asset("USD", 2), .receivable = -1};
    CHECK_RC(run(&V), 0);
    rl_output_t out[2] = {output(SOURCE, -40), output(PAYEE, 40)};
    rl_pin_t pins[2] = {pin(PAYEE, 7), pin(SOURCE, 1)};
    rl_transfer_t want = rl_t_transfer(NULL, 0, out, 2, pins, 2, NULL, "pay:1");
    check_transfer(&V, &want);
}

RL_TEST(refusals) {
    const int64_t amt[] = {100};
    view_init(&V, amt, 1, 250);
    V.pairs[0].receivable = -1;
    CHECK_RC(run(&V), RL_EINSUFFICIENT); /* no overdraft, no receivable: a rejection */
    view_init(&V, amt, 1, 250);
    V.pairs[0].held = 1;
    CHECK_RC(run(&V), RL_EINFLIGHT); /* a reservation on a short pair: a race */
    view_init(&V, amt, 1, 250);
    V.pairs[0].finalizing = 1;
    CHECK_RC(run(&V), RL_EINFLIGHT);
    view_init(&V, amt, 1, 250);
    V.pairs[0].finalizing = 2;
    CHECK_RC(run(&V), RL_EUNDECIDED); /* the caller must look */
    view_init(&V, amt, 1, 50);
    V.pairs[0].finalizing = 2;
    CHECK_RC(run(&V), 0); /* not short: finalizing sagas do not matter */
    view_init(&V, amt, 1, 250);
    V.in.n_pairs = 2; /* the receivable's pair not in the view */
    CHECK_RC(run(&V), RL_EUNDECIDED);
    view_init(&V, amt, 1, 50);
    V.in.n_pairs = 1; /* the payee's */
    CHECK_RC(run(&V), RL_EUNDECIDED);
    view_init(&V, amt, 1, 50);
    V.acct[1].status = RL_ACCOUNT_FROZEN; /* validation's own codes */
    CHECK_RC(run(&V), RL_EFROZEN);
}

RL_TEST(bad_input) {
    const int64_t amt[] = {100};
    view_init(&V, amt, 1, 50);
    V.mv[0].amount = 0;
    CHECK_RC(run(&V), RL_EINVAL);
    view_init(&V, amt, 1, 50);
    V.mv[0].to = 9;
    CHECK_RC(run(&V), RL_EINVAL);
    view_init(&V, amt, 1, 50);
    V.pairs[1].account = 4;
    CHECK_RC(run(&V), RL_EINVAL);
    view_init(&V, amt, 1, 50); /* a receivable out of range: refused up front, short or not */
    V.pairs[0].receivable = 4;
    CHECK_RC(run(&V), RL_EINVAL);
    V.pairs[0].receivable = -2;
    CHECK_RC(run(&V), RL_EINVAL);
    view_init(&V, amt, 1, 50);
    V.in.first_page = 0;
    CHECK_RC(run(&V), RL_ELIMIT);
    view_init(&V, amt, 1, 50);
    V.mv[0].amount = INT64_MAX;
    V.mv[1] = V.mv[0];
    V.in.n_movements = 2; /* the payee's net overflows */
    CHECK_RC(run(&V), RL_EOVERFLOW);
    view_init(&V, amt, 1, 50);
    CHECK_RC(rl_resolve_and_plan(&V.in, &V.out, V.buf, 10, &V.len), RL_EBUFSIZE);
    CHECK_RC(rl_resolve_and_plan(NULL, &V.out, V.buf, 10, &V.len), RL_EINVAL);
}

RL_TEST(error_names) {
    CHECK_STR(rl_err_name(RL_EINFLIGHT), "ValueInFlight");
    CHECK_STR(rl_err_name(RL_EUNDECIDED), "Undecided");
}

int main(void) {
    RL_RUN(payment_with_change, "LED-10 LED-26 a payment's picks, change, pins and plan");
    RL_RUN(inputs_in_canonical_order, "LED-1 inputs ascending, consumed in pick order");
    RL_RUN(second_page_when_the_first_falls_short, "LED-10 a full first page, then the rest");
    RL_RUN(shortfall_to_the_receivable, "LED-32 a short payer drains, the rest to its receivable");
    RL_RUN(shortfall_on_an_uncapped_source, "LED-32 an uncapped payer's own negative posting");
    RL_RUN(refusals, "LED-32 races, views that lack an input and rejections are the caller's");
    RL_RUN(bad_input, "LED-13 bad input gets a code, never a crash");
    RL_RUN(error_names, "the two new codes have names");
    RL_DONE();
}
