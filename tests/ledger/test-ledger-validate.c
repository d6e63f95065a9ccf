/* rl_select_postings and rl_validate_and_plan (LED-4..LED-10, LED-12): unit tests for every
 * rule and error code, and a seeded property test over random histories that checks
 * per-asset conservation, that plans equal an independent recomputation from postings,
 * that no plan overdraws a floor, and that injected faults get exactly their code.
 *
 *   test-ledger-validate [SEED [STEPS]]     (default seed 20261125, 4000 steps; printed) */
#include "rl_test.h"

/* ---- a small world for the unit tests ---- */

enum { ALICE = 1, BOB = 2, WORLD = 3, CAROL = 4 };

typedef struct world_s {
    rl_account_t acct[4];
    rl_posting_t post[8];
    rl_balance_t bal[8];
    size_t n_bal;
    rl_posting_ref_t in[4];
    rl_output_t out[4];
    rl_pin_t pin[4];
    rl_delta_t deltas[16];
    rl_plan_t plan;
    rl_transfer_t t;
} world_t;

static void add_balance(world_t *w, uint8_t acct, const char *asset, int64_t amount) {
    rl_balance_t *b = &w->bal[w->n_bal++];
    memset(b, 0, sizeof *b);
    rl_t_id(b->account, acct);
    b->asset = rl_t_asset(asset, 2);
    b->amount = amount;
}

static void set_out(rl_output_t *o, uint8_t acct, const char *asset, int64_t amount) {
    memset(o, 0, sizeof *o);
    rl_t_id(o->account, acct);
    o->asset = rl_t_asset(asset, 2);
    o->amount = amount;
}

static void set_pin(rl_pin_t *p, uint8_t acct, uint64_t version) {
    memset(p, 0, sizeof *p);
    rl_t_id(p->account, acct);
    p->version = version;
}

/* alice (no overdraft) holds 10.00 + 2.50 USD; bob is capped at -20.00; world uncapped.
 * The transfer: alice pays bob 7.00 from both postings, 5.50 change. */
static void world_init(world_t *w) {
    memset(w, 0, sizeof *w);
    w->acct[0] = rl_t_account(ALICE, RL_POLICY_NO_OVERDRAFT, 0);
    w->acct[1] = rl_t_account(BOB, RL_POLICY_CAPPED, -2000);
    w->acct[1].version = 2;
    w->acct[2] = rl_t_account(WORLD, RL_POLICY_UNCAPPED, 0);
    w->acct[3] = rl_t_account(CAROL, RL_POLICY_NO_OVERDRAFT, 0);
    w->post[0] = rl_t_posting(0x01, 0, ALICE, "USD", 1000);
    w->post[1] = rl_t_posting(0x01, 1, ALICE, "USD", 250);
    w->post[2] = rl_t_posting(0x02, 0, BOB, "USD", 300);
    w->post[3] = rl_t_posting(0x02, 1, WORLD, "USD", -1550);
    add_balance(w, ALICE, "USD", 1250);
    add_balance(w, BOB, "USD", 300);
    add_balance(w, WORLD, "USD", -1550);
    w->in[0] = w->post[0].id;
    w->in[1] = w->post[1].id;
    set_out(&w->out[0], BOB, "USD", 700);
    set_out(&w->out[1], ALICE, "USD", 550);
    set_pin(&w->pin[0], ALICE, 1);
    set_pin(&w->pin[1], BOB, 2);
    w->t = rl_t_transfer(w->in, 2, w->out, 2, w->pin, 2, NULL, "pay:1");
    w->plan.deltas = w->deltas;
    w->plan.deltas_cap = 16;
}

static int run(world_t *w) {
    return rl_validate_and_plan(&w->t, w->acct, 4, w->post, 4, w->bal, w->n_bal, &w->plan);
}

RL_TEST(plan_of_a_payment) {
    world_t w;
    world_init(&w);
    CHECK_RC(run(&w), 0);
    CHECK(w.plan.n_deltas == 2);
    /* alice: 12.50 - 12.50 + 5.50; bob: 3.00 + 7.00 */
    CHECK_EQ_I64(w.deltas[0].before, 1250);
    CHECK_EQ_I64(w.deltas[0].debit, 1250);
    CHECK_EQ_I64(w.deltas[0].credit, 550);
    CHECK_EQ_I64(w.deltas[0].after, 550);
    CHECK_EQ_I64(w.deltas[1].after, 1000);
    uint8_t id[32];
    CHECK_RC(rl_transfer_id(&w.t, id), 0);
    CHECK(memcmp(id, w.plan.transfer_id, 32) == 0);
}

RL_TEST(consumed_postings) {
    world_t w;
    world_init(&w);
    w.in[1].index = 9; /* not supplied */
    CHECK_RC(run(&w), RL_EUNKNOWNPOSTING);
    world_init(&w);
    w.post[1].status = RL_POSTING_INACTIVE;
    CHECK_RC(run(&w), RL_ESPENT);
    world_init(&w);
    w.post[1].status = RL_POSTING_PENDING_INACTIVE; /* reserved: the finalize-time state */
    CHECK_RC(run(&w), 0);
}

RL_TEST(accounts_and_pins) {
    world_t w;
    world_init(&w);
    w.out[0].account[15] = 9; /* an account nobody supplied */
    CHECK_RC(run(&w), RL_EUNKNOWNACCOUNT);
    world_init(&w);
    w.t.n_pins = 1; /* bob unpinned */
    CHECK_RC(run(&w), RL_EUNPINNED);
    world_init(&w);
    set_pin(&w.pin[2], CAROL, 1); /* carol pinned but not involved */
    w.t.n_pins = 3;
    CHECK_RC(run(&w), RL_EUNPINNED);
    world_init(&w);
    w.acct[1].version = 3; /* bob changed since the transfer was resolved */
    CHECK_RC(run(&w), RL_EVERSIONMISMATCH);
    world_init(&w);
    w.acct[3] = w.acct[0]; /* the same id twice */
    CHECK_RC(run(&w), RL_EINVAL);
    world_init(&w);
    w.post[3] = w.post[0]; /* the same posting twice */
    CHECK_RC(run(&w), RL_EINVAL);
    world_init(&w);
    w.bal[2] = w.bal[0]; /* the same pair's balance twice */
    CHECK_RC(run(&w), RL_EINVAL);
}

RL_TEST(frozen_and_closed) {
    world_t w;
    world_init(&w);
    w.acct[1].status = RL_ACCOUNT_FROZEN; /* receiving is refused too */
    CHECK_RC(run(&w), RL_EFROZEN);
    world_init(&w);
    w.acct[0].status = RL_ACCOUNT_CLOSED;
    CHECK_RC(run(&w), RL_ECLOSED);
    /* order: alice (an input owner) comes before bob */
    w.acct[1].status = RL_ACCOUNT_FROZEN;
    CHECK_RC(run(&w), RL_ECLOSED);
}

RL_TEST(conservation_and_assets) {
    world_t w;
    world_init(&w);
    w.out[1].amount = 551;
    CHECK_RC(run(&w), RL_ECONSERVATION);
    world_init(&w);
    set_out(&w.out[1], ALICE, "EUR", 550); /* right sum, wrong asset */
    add_balance(&w, ALICE, "EUR", 0);
    CHECK_RC(run(&w), RL_ECONSERVATION);
    world_init(&w);
    w.out[1].asset.scale = 3;
    CHECK_RC(run(&w), RL_EASSET);
    /* two assets, each conserved */
    world_init(&w);
    w.post[2] = rl_t_posting(0x01, 2, ALICE, "EUR", 400);
    w.in[2] = w.post[2].id;
    w.t.n_inputs = 3;
    set_out(&w.out[2], BOB, "EUR", 400);
    w.t.n_outputs = 3;
    add_balance(&w, ALICE, "EUR", 400);
    add_balance(&w, BOB, "EUR", 0);
    CHECK_RC(run(&w), 0);
    CHECK(w.plan.n_deltas == 4);
}

RL_TEST(overflow_is_an_error) {
    world_t w;
    world_init(&w);
    w.bal[1].amount = INT64_MAX - 10; /* bob's after would overflow */
    CHECK_RC(run(&w), RL_EOVERFLOW);
    world_init(&w);
    w.post[0].amount = INT64_MAX;
    w.post[1].amount = INT64_MAX; /* alice's debit sum overflows */
    CHECK_RC(run(&w), RL_EOVERFLOW);
}

RL_TEST(balances_required) {
    world_t w;
    world_init(&w);
    w.n_bal = 0;
    CHECK_RC(run(&w), RL_ENOBALANCE);
}

RL_TEST(policies_and_floors) {
    world_t w;
    /* alice (no overdraft) may not hold a negative posting */
    world_init(&w);
    w.out[1].amount = -50;
    set_out(&w.out[0], BOB, "USD", 1300);
    CHECK_RC(run(&w), RL_ENEGATIVE);
    /* alice's supplied balance says she has less than she spends: floor 0 */
    world_init(&w);
    w.bal[0].amount = 600;
    CHECK_RC(run(&w), RL_EINSUFFICIENT);
    /* bob (capped at -20.00) pays 23.00 from his 3.00: overdraft posting of -20.00 is fine */
    world_init(&w);
    w.in[0] = w.post[2].id;
    w.t.n_inputs = 1;
    set_out(&w.out[0], ALICE, "USD", 2300);
    set_out(&w.out[1], BOB, "USD", -2000);
    CHECK_RC(run(&w), 0);
    CHECK_EQ_I64(w.deltas[0].after, -2000);
    /* 23.01 is a cent below the floor */
    w.out[0].amount = 2301;
    w.out[1].amount = -2001;
    CHECK_RC(run(&w), RL_EINSUFFICIENT);
    /* a pair already below its floor may still receive (a credit must land) */
    world_init(&w);
    w.bal[1].amount = -5000;
    CHECK_RC(run(&w), 0);
    /* the world account has no floor */
    world_init(&w);
    w.in[0] = w.post[3].id;
    w.t.n_inputs = 1;
    set_out(&w.out[0], WORLD, "USD", -1000000);
    set_out(&w.out[1], BOB, "USD", 1000000 - 1550);
    set_pin(&w.pin[0], BOB, 2);
    set_pin(&w.pin[1], WORLD, 1);
    CHECK_RC(run(&w), 0);
}

RL_TEST(order_of_checks) {
    /* LED-12: several faults at once report the earliest step's code. */
    world_t w;
    world_init(&w);
    w.out[1].amount = 551;                /* conservation (step 8) */
    w.acct[1].status = RL_ACCOUNT_FROZEN; /* status (step 5) */
    w.acct[1].version = 5;                /* pin (step 4) */
    CHECK_RC(run(&w), RL_EVERSIONMISMATCH);
    w.acct[1].version = 2;
    CHECK_RC(run(&w), RL_EFROZEN);
    w.acct[1].status = RL_ACCOUNT_OPEN;
    CHECK_RC(run(&w), RL_ECONSERVATION);
    w.post[1].status = RL_POSTING_INACTIVE; /* consumed postings (step 2) */
    CHECK_RC(run(&w), RL_ESPENT);
    w.plan.deltas_cap = 1; /* the plan does not fit: only once the sums are built */
    w.post[1].status = RL_POSTING_ACTIVE;
    w.out[1].amount = 550;
    CHECK_RC(run(&w), RL_EBUFSIZE);
}

RL_TEST(select_largest_first) {
    rl_posting_t p[7];
    p[0] = rl_t_posting(0x05, 0, ALICE, "USD", 100);
    p[1] = rl_t_posting(0x04, 0, ALICE, "USD", 500);
    p[2] = rl_t_posting(0x03, 0, ALICE, "USD", 300);
    p[3] = rl_t_posting(0x02, 0, ALICE, "USD", 300); /* ties p[2]: smaller id first */
    p[4] = rl_t_posting(0x01, 0, BOB, "USD", 900);   /* another account */
    p[5] = rl_t_posting(0x01, 1, ALICE, "EUR", 900); /* another asset */
    p[6] = rl_t_posting(0x01, 2, ALICE, "USD", 800);
    p[6].status = RL_POSTING_PENDING_INACTIVE; /* reserved: not selectable */
    uint8_t alice[16];
    rl_t_id(alice, ALICE);
    rl_asset_t usd = rl_t_asset("USD", 2);
    uint32_t idx[8], n = 0;
    int64_t sum = 0, change = 0;
    CHECK_RC(rl_select_postings(p, 7, alice, &usd, 700, idx, 8, &n, &sum, &change), 0);
    CHECK(n == 2 && idx[0] == 1 && idx[1] == 3);
    CHECK_EQ_I64(sum, 800);
    CHECK_EQ_I64(change, 100);
    CHECK_RC(rl_select_postings(p, 7, alice, &usd, 1100, idx, 8, &n, &sum, &change), 0);
    CHECK(n == 3 && idx[2] == 2);
    CHECK_EQ_I64(change, 0);
    CHECK_RC(rl_select_postings(p, 7, alice, &usd, 1201, idx, 8, &n, &sum, &change),
             RL_EINSUFFICIENT);
    CHECK_EQ_I64(sum, 1200);
    CHECK(n == 0);
    CHECK_RC(rl_select_postings(p, 7, alice, &usd, 1200, idx, 3, &n, &sum, &change), RL_ELIMIT);
    CHECK_RC(rl_select_postings(p, 7, alice, &usd, 0, idx, 8, &n, &sum, &change), RL_EINVAL);
    /* negative postings are never selected */
    p[0].amount = -100;
    CHECK_RC(rl_select_postings(p, 7, alice, &usd, 1101, idx, 8, &n, &sum, &change),
             RL_EINSUFFICIENT);
    CHECK_EQ_I64(sum, 1100);
}

/* The reference: sort every eligible posting (amount descending, id ascending), take the
 * shortest prefix that reaches the target. rl_select_postings must agree with it on the
 * picks, their order, the sum, the change and the error code. */
static const rl_posting_t *ref_base;
static int ref_cmp(const void *a, const void *b) {
    const rl_posting_t *x = &ref_base[*(const uint32_t *)a], *y = &ref_base[*(const uint32_t *)b];
    if (x->amount != y->amount) return x->amount > y->amount ? -1 : 1;
    return rl_posting_ref_cmp(&x->id, &y->id);
}

RL_TEST(select_equals_sorting) {
    enum { N = 300 };
    static rl_posting_t p[N];
    static uint32_t all[N], idx[N];
    uint64_t x = 0x5e1ec7;
    rl_asset_t usd = rl_t_asset("USD", 2);
    uint8_t alice[16];
    rl_t_id(alice, ALICE);
    int cases = 0, ok = 0, insufficient = 0, limit = 0;
    for (int round = 0; round < 400; round++) {
        size_t n = 1 + (size_t)(x % N);
        for (size_t i = 0; i < n; i++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            uint32_t r = (uint32_t)(x >> 33);
            /* few distinct amounts (ties), some other owners, assets, states, signs */
            p[i] = rl_t_posting((uint8_t)(r & 7), (uint32_t)i, (r >> 3) % 5 ? ALICE : BOB,
                                (r >> 6) % 7 ? "USD" : "EUR", 1 + (int64_t)((r >> 9) % 40) * 25);
            if ((r >> 16) % 9 == 0) p[i].status = RL_POSTING_INACTIVE;
            if ((r >> 20) % 11 == 0) p[i].amount = -p[i].amount;
        }
        if (round % 50 == 0) /* huge amounts: sums beyond INT64_MAX */
            for (size_t i = 0; i < n; i++)
                if (p[i].amount > 0) p[i].amount = INT64_MAX - (int64_t)i;
        size_t m = 0;
        int64_t total = 0;
        for (size_t i = 0; i < n; i++)
            if (p[i].status == RL_POSTING_ACTIVE && p[i].amount > 0 &&
                memcmp(p[i].account, alice, 16) == 0 && rl_asset_equal(&p[i].asset, &usd)) {
                all[m++] = (uint32_t)i;
                if (rl_amount_add(total, p[i].amount, &total) != 0) total = INT64_MAX;
            }
        ref_base = p;
        qsort(all, m, sizeof all[0], ref_cmp);
        for (int k = 0; k < 4; k++, cases++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            int64_t target = round % 50 == 0 ? INT64_MAX - (int64_t)(x >> 40)
                             : k == 3        ? total + 1 + (int64_t)((x >> 20) % 50)
                                      : 1 + (int64_t)((x >> 20) % (uint64_t)(total / 4 + 60));
            uint32_t cap = (uint32_t)((x >> 8) % 40);
            /* the reference */
            size_t take = 0;
            __int128 acc = 0;
            while (take < m && acc < target)
                acc += ref_base[all[take++]].amount;
            int want = acc < target      ? RL_EINSUFFICIENT
                       : take > cap      ? RL_ELIMIT
                       : acc > INT64_MAX ? RL_EOVERFLOW
                                         : 0;
            uint32_t n_sel = 0;
            int64_t sum = 0, change = 0;
            int rc = rl_select_postings(p, n, alice, &usd, target, idx, cap, &n_sel, &sum, &change);
            if (rc != want) {
                RL_FAILF("round %d: got %s, want %s", round, rl_err_name(rc), rl_err_name(want));
                return;
            }
            if (rc == 0) {
                ok++;
                if (n_sel != take || memcmp(idx, all, take * sizeof idx[0]) != 0 ||
                    sum != (int64_t)acc || change != (int64_t)acc - target)
                    RL_FAILF("round %d: picks differ from sorting", round);
            } else if (rc == RL_EINSUFFICIENT) {
                insufficient++;
                CHECK_EQ_I64(sum, total);
            } else if (rc == RL_ELIMIT) {
                limit++;
            }
        }
    }
    printf("# select vs sorting: %d cases, %d selections, %d insufficient, %d over the cap\n",
           cases, ok, insufficient, limit);
    CHECK(ok > 100 && insufficient > 10 && limit > 10);
}

/* ---- the property test ---- */

enum { P_ACCTS = 8, P_MAX_POSTINGS = 200000 };

static uint64_t rng_state;
static uint64_t rnd(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static uint64_t rnd_below(uint64_t n) {
    return rnd() % n;
}

static rl_account_t p_acct[P_ACCTS];
static rl_posting_t p_post[P_MAX_POSTINGS];
static size_t p_n;
static const char *p_assets[2] = {"USD", "EUR"};

/* The model's balance: an independent sum over every posting (LED-7's "in the balance"). */
static int64_t model_balance(int a, const rl_asset_t *asset) {
    int64_t s = 0;
    for (size_t i = 0; i < p_n; i++)
        if (p_post[i].status != RL_POSTING_INACTIVE &&
            memcmp(p_post[i].account, p_acct[a].id, 16) == 0 &&
            rl_asset_equal(&p_post[i].asset, asset))
            s += p_post[i].amount;
    return s;
}

static int cmp_ref(const void *a, const void *b) {
    return rl_posting_ref_cmp((const rl_posting_ref_t *)a, (const rl_posting_ref_t *)b);
}

static int64_t floor_of(const rl_account_t *a) {
    return a->policy == RL_POLICY_CAPPED ? a->floor : 0;
}

typedef enum fault_e {
    F_NONE,
    F_CONSERVE,
    F_STALE_PIN,
    F_FROZEN,
    F_SPENT,
    F_UNPINNED,
    F_NOBAL,
    F_COUNT
} fault_t;

typedef struct pstats_s {
    int committed, insufficient, negative, faults[F_COUNT], limit;
} pstats_t;

static void property_step(int step, pstats_t *st) {
    static uint32_t idx[RL_MAX_INPUTS];
    static rl_posting_ref_t in[RL_MAX_INPUTS];
    static rl_posting_t consumed[RL_MAX_INPUTS];
    static rl_output_t out[4];
    static rl_pin_t pin[2];
    static rl_balance_t bal[4];
    static rl_delta_t deltas[RL_MAX_INPUTS + RL_MAX_OUTPUTS];
    char intent[32];

    int from = (int)rnd_below(P_ACCTS), to = (int)rnd_below(P_ACCTS - 1);
    if (to >= from) to++;
    rl_asset_t asset = rl_t_asset(p_assets[rnd_below(2)], 2);
    int64_t amount = 1 + (int64_t)rnd_below(rnd_below(4) == 0 ? 100000 : 3000);

    /* Occasionally an account changes: a new version, sometimes frozen, sometimes thawed. */
    if (rnd_below(20) == 0) {
        int a = (int)rnd_below(P_ACCTS);
        p_acct[a].version++;
        p_acct[a].status = rnd_below(3) == 0 ? RL_ACCOUNT_FROZEN : RL_ACCOUNT_OPEN;
    }

    /* Resolve, as the future commit path will: select, change, overdraft posting. */
    int64_t balance_from = model_balance(from, &asset);
    uint32_t n_sel = 0;
    int64_t sum = 0, change = 0, need = 0;
    int rc = rl_select_postings(p_post, p_n, p_acct[from].id, &asset, amount, idx, RL_MAX_INPUTS,
                                &n_sel, &sum, &change);
    if (rc == RL_ELIMIT) {
        st->limit++;
        return;
    }
    if (rc == RL_EINSUFFICIENT) {
        /* spend everything positive, cover the rest with a negative posting */
        need = amount - sum;
        n_sel = 0;
        for (size_t i = 0; i < p_n && n_sel < RL_MAX_INPUTS; i++)
            if (p_post[i].status == RL_POSTING_ACTIVE && p_post[i].amount > 0 &&
                memcmp(p_post[i].account, p_acct[from].id, 16) == 0 &&
                rl_asset_equal(&p_post[i].asset, &asset))
                idx[n_sel++] = (uint32_t)i;
        if (n_sel == RL_MAX_INPUTS) {
            st->limit++;
            return;
        }
        change = 0;
    } else if (rc != 0) {
        RL_FAILF("step %d: select: %s", step, rl_err_name(rc));
        return;
    }
    for (uint32_t i = 0; i < n_sel; i++)
        in[i] = p_post[idx[i]].id;
    qsort(in, n_sel, sizeof in[0], cmp_ref);
    for (uint32_t i = 0; i < n_sel; i++)
        for (size_t j = 0; j < p_n; j++)
            if (rl_posting_ref_cmp(&p_post[j].id, &in[i]) == 0) consumed[i] = p_post[j];
    uint32_t n_out = 0;
    memset(out, 0, sizeof out);
    memcpy(out[n_out].account, p_acct[to].id, 16);
    out[n_out].asset = asset;
    out[n_out++].amount = amount;
    if (change > 0 || need > 0) {
        memcpy(out[n_out].account, p_acct[from].id, 16);
        out[n_out].asset = asset;
        out[n_out++].amount = need > 0 ? -need : change;
    }
    int lo = from < to ? from : to, hi = from < to ? to : from;
    memset(pin, 0, sizeof pin);
    memcpy(pin[0].account, p_acct[lo].id, 16);
    pin[0].version = p_acct[lo].version;
    memcpy(pin[1].account, p_acct[hi].id, 16);
    pin[1].version = p_acct[hi].version;
    memset(bal, 0, sizeof bal);
    memcpy(bal[0].account, p_acct[from].id, 16);
    bal[0].asset = asset;
    bal[0].amount = balance_from;
    memcpy(bal[1].account, p_acct[to].id, 16);
    bal[1].asset = asset;
    bal[1].amount = model_balance(to, &asset);
    size_t n_bal = 2;
    snprintf(intent, sizeof intent, "prop:%d", step);
    rl_transfer_t t = rl_t_transfer(in, n_sel, out, n_out, pin, 2, NULL, intent);

    /* The model's verdict on the clean transfer (LED-7, LED-8). */
    int frozen = p_acct[from].status != RL_ACCOUNT_OPEN || p_acct[to].status != RL_ACCOUNT_OPEN;
    int want = 0;
    if (frozen)
        want = RL_EFROZEN;
    else if (need > 0 && p_acct[from].policy == RL_POLICY_NO_OVERDRAFT)
        want = RL_ENEGATIVE;
    else if (p_acct[from].policy != RL_POLICY_UNCAPPED &&
             balance_from - amount < floor_of(&p_acct[from]))
        want = RL_EINSUFFICIENT;

    /* Inject at most one fault, only into transfers that would otherwise commit. */
    fault_t fault = F_NONE;
    rl_posting_t spent_copy;
    if (want == 0 && rnd_below(4) == 0) {
        fault = (fault_t)(1 + rnd_below(F_COUNT - 1));
        switch (fault) {
        case F_CONSERVE:
            out[0].amount += 1;
            want = RL_ECONSERVATION;
            break;
        case F_STALE_PIN:
            pin[rnd_below(2)].version += 1;
            want = RL_EVERSIONMISMATCH;
            break;
        case F_FROZEN:
            p_acct[to].status = RL_ACCOUNT_FROZEN; /* frozen after pinning: version not bumped */
            want = RL_EFROZEN;
            break;
        case F_SPENT:
            if (n_sel == 0) {
                fault = F_NONE;
                break;
            }
            spent_copy = consumed[0];
            consumed[0].status = RL_POSTING_INACTIVE;
            want = RL_ESPENT;
            break;
        case F_UNPINNED:
            t.n_pins = 1;
            if (memcmp(pin[0].account, p_acct[to].id, 16) != 0 && n_sel == 0 && n_out == 1)
                fault = F_NONE, t.n_pins = 2; /* from uninvolved: cannot happen here */
            want = RL_EUNPINNED;
            break;
        case F_NOBAL:
            n_bal = 1;
            want = RL_ENOBALANCE;
            break;
        default:
            break;
        }
        if (fault == F_NONE) want = 0;
    }

    rl_plan_t plan = {{0}, deltas, RL_MAX_INPUTS + RL_MAX_OUTPUTS, 0};
    rc = rl_validate_and_plan(&t, p_acct, P_ACCTS, consumed, n_sel, bal, n_bal, &plan);
    if (fault == F_FROZEN) p_acct[to].status = RL_ACCOUNT_OPEN;
    if (fault == F_SPENT) consumed[0] = spent_copy;
    if (rc != want) {
        RL_FAILF("step %d: fault %d: got %s, want %s", step, (int)fault, rl_err_name(rc),
                 rl_err_name(want));
        return;
    }
    if (fault != F_NONE) st->faults[fault]++;
    if (rc == RL_EINSUFFICIENT) st->insufficient++;
    if (rc == RL_ENEGATIVE) st->negative++;
    if (rc != 0) return;

    /* The plan: conservation per asset, after = before - debit + credit. */
    int64_t debit = 0, credit = 0;
    for (uint32_t i = 0; i < plan.n_deltas; i++) {
        const rl_delta_t *d = &plan.deltas[i];
        debit += d->debit;
        credit += d->credit;
        if (d->after != d->before - d->debit + d->credit)
            RL_FAILF("step %d: delta arithmetic", step);
    }
    if (debit != credit)
        RL_FAILF("step %d: plan not conserved: %lld != %lld", step, (long long)debit,
                 (long long)credit);

    /* Apply to the model, then recompute from postings alone. */
    for (uint32_t i = 0; i < n_sel; i++)
        for (size_t j = 0; j < p_n; j++)
            if (rl_posting_ref_cmp(&p_post[j].id, &in[i]) == 0)
                p_post[j].status = RL_POSTING_INACTIVE;
    for (uint32_t i = 0; i < n_out; i++) {
        if (p_n == P_MAX_POSTINGS) {
            RL_FAILF("posting table full");
            return;
        }
        CHECK_RC(rl_transfer_output_posting(&t, plan.transfer_id, i, &p_post[p_n]), 0);
        p_n++;
    }
    for (uint32_t i = 0; i < plan.n_deltas; i++) {
        const rl_delta_t *d = &plan.deltas[i];
        int a = memcmp(d->account, p_acct[from].id, 16) == 0 ? from : to;
        int64_t now = model_balance(a, &d->asset);
        if (now != d->after)
            RL_FAILF("step %d: plan says %lld, postings say %lld", step, (long long)d->after,
                     (long long)now);
        /* No plan overdraws a floor (LED-7). */
        if (p_acct[a].policy != RL_POLICY_UNCAPPED && d->after < d->before &&
            now < floor_of(&p_acct[a]))
            RL_FAILF("step %d: account %d below its floor: %lld < %lld", step, a, (long long)now,
                     (long long)floor_of(&p_acct[a]));
    }
    st->committed++;
}

RL_TEST(property_random_histories) {
    static const char *env_seed;
    uint64_t seed = 20261125;
    int steps = 4000;
    env_seed = getenv("RL_SEED");
    if (env_seed != NULL) seed = strtoull(env_seed, NULL, 10);
    if (getenv("RL_STEPS") != NULL) steps = atoi(getenv("RL_STEPS"));
    printf("# property: seed %llu, %d steps (RL_SEED=%llu RL_STEPS=%d to replay)\n",
           (unsigned long long)seed, steps, (unsigned long long)seed, steps);
    rng_state = seed;
    p_n = 0;
    for (int a = 0; a < P_ACCTS; a++) {
        uint8_t policy = a == 0 ? RL_POLICY_UNCAPPED
                                : (uint8_t)(a % 3 == 0   ? RL_POLICY_UNCAPPED
                                            : a % 3 == 1 ? RL_POLICY_NO_OVERDRAFT
                                                         : RL_POLICY_CAPPED);
        p_acct[a] = rl_t_account((uint8_t)(a + 1), policy,
                                 policy == RL_POLICY_CAPPED ? -(int64_t)(1000 * a) : 0);
    }
    pstats_t st;
    memset(&st, 0, sizeof st);
    int before = rl_t_failed_checks;
    for (int s = 0; s < steps && rl_t_failed_checks == before; s++)
        property_step(s, &st);
    /* Global conservation: every asset's postings still sum to zero (all value was issued
     * against an uncapped account's negative postings, LED-5). */
    for (int k = 0; k < 2; k++) {
        rl_asset_t a = rl_t_asset(p_assets[k], 2);
        int64_t total = 0;
        for (int i = 0; i < P_ACCTS; i++)
            total += model_balance(i, &a);
        if (total != 0) RL_FAILF("%s: postings sum to %lld, not 0", p_assets[k], (long long)total);
    }
    printf("# committed %d, insufficient %d, negative %d, limit %d; faults: conservation %d, "
           "stale pin %d, frozen %d, spent %d, unpinned %d, no balance %d; %zu postings\n",
           st.committed, st.insufficient, st.negative, st.limit, st.faults[F_CONSERVE],
           st.faults[F_STALE_PIN], st.faults[F_FROZEN], st.faults[F_SPENT], st.faults[F_UNPINNED],
           st.faults[F_NOBAL], p_n);
    CHECK(st.committed > steps / 4 && st.insufficient > 0 && st.negative > 0);
    for (int f = 1; f < F_COUNT; f++)
        CHECK(st.faults[f] > 0);
}

int main(int argc, char **argv) {
    if (argc > 1) setenv("RL_SEED", argv[1], 1);
    if (argc > 2) setenv("RL_STEPS", argv[2], 1);
    RL_RUN(plan_of_a_payment, "LED-5 LED-7 plan of a payment with change");
    RL_RUN(consumed_postings, "LED-6 consumed postings supplied and not inactive");
    RL_RUN(accounts_and_pins, "LED-9 every involved account supplied and pinned at its version");
    RL_RUN(frozen_and_closed, "LED-8 frozen and closed accounts take part in nothing");
    RL_RUN(conservation_and_assets, "LED-5 per-asset conservation, one scale per code");
    RL_RUN(overflow_is_an_error, "LED-4 sums that overflow are errors");
    RL_RUN(balances_required, "LED-12 every involved pair's balance supplied");
    RL_RUN(policies_and_floors, "LED-7 no negative postings, floors, credits always land");
    RL_RUN(order_of_checks, "LED-12 the first failing check in the documented order");
    RL_RUN(select_largest_first, "LED-10 greedy largest-first selection, ties by id, change");
    RL_RUN(select_equals_sorting, "LED-10 one-pass selection equals sorting, over random sets");
    RL_RUN(property_random_histories,
           "LED-5 LED-7 property: conservation, plans match postings, no floor overdrawn");
    RL_DONE();
}
