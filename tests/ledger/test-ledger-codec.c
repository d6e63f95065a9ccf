/* The ledger's canonical encodings (LED-1, LED-3, LED-4, LED-13, LED-14): round trips,
 * strictness (every truncation, every single-byte change either fails or is itself
 * canonical), encoder buffer contract, checked amount arithmetic. */
#include "rl_test.h"

RL_TEST(amount_checked) {
    int64_t r = 0;
    CHECK_RC(rl_amount_add(INT64_MAX - 1, 1, &r), 0);
    CHECK_EQ_I64(r, INT64_MAX);
    CHECK_RC(rl_amount_add(INT64_MAX, 1, &r), RL_EOVERFLOW);
    CHECK_RC(rl_amount_add(INT64_MIN + 1, -1, &r), RL_EOVERFLOW); /* INT64_MIN is no amount */
    CHECK_RC(rl_amount_add(INT64_MIN, 0, &r), RL_EOVERFLOW);
    CHECK_RC(rl_amount_sub(0, INT64_MIN, &r), RL_EOVERFLOW);
    CHECK_RC(rl_amount_sub(-5, INT64_MAX, &r), RL_EOVERFLOW);
    CHECK_RC(rl_amount_sub(-5, 7, &r), 0);
    CHECK_EQ_I64(r, -12);
    CHECK_RC(rl_amount_add(1, 2, NULL), RL_EINVAL);
}

RL_TEST(asset_rules) {
    rl_asset_t a;
    CHECK_RC(rl_asset_init(&a, "USD", 3, 2), 0);
    CHECK_RC(rl_asset_check(&a), 0);
    CHECK_RC(rl_asset_init(&a, "", 0, 2), RL_EINVAL);
    CHECK_RC(rl_asset_init(&a, "0123456789abcdef", 16, 2), RL_EINVAL);
    CHECK_RC(rl_asset_init(&a, "0123456789abcde", 15, 18), 0);
    CHECK_RC(rl_asset_init(&a, "US D", 4, 2), RL_EINVAL);
    CHECK_RC(rl_asset_init(&a, "USD", 3, 19), RL_EINVAL);
    rl_asset_t b = rl_t_asset("usage:bytes", 0);
    b.code[14] = 'x'; /* garbage after the NUL */
    CHECK_RC(rl_asset_check(&b), RL_EINVAL);

    uint8_t buf[32];
    size_t len = 0;
    rl_asset_t usd = rl_t_asset("USD", 2), back;
    CHECK_RC(rl_asset_encode(&usd, buf, sizeof buf, &len), 0);
    CHECK(len == 7);
    CHECK_RC(rl_asset_decode(buf, len, &back), 0);
    CHECK(rl_asset_equal(&usd, &back));
    buf[3] = 0x05; /* control byte in the code */
    CHECK_RC(rl_asset_decode(buf, len, &back), RL_ENONCANONICAL);
}

/* decode(b) succeeds only when re-encoding gives b back; checked on b and on every
 * truncation and single-byte change of b. */
typedef int (*roundtrip_fn)(const uint8_t *b, size_t n, uint8_t *again, size_t cap, size_t *len);

static int rt_account(const uint8_t *b, size_t n, uint8_t *again, size_t cap, size_t *len) {
    rl_account_t a;
    int rc = rl_account_decode(b, n, &a);
    return rc ? rc : (rl_account_encode(&a, again, cap, len) ? -1000 : 0);
}

static int rt_posting(const uint8_t *b, size_t n, uint8_t *again, size_t cap, size_t *len) {
    rl_posting_t p;
    int rc = rl_posting_decode(b, n, &p);
    return rc ? rc : (rl_posting_encode(&p, again, cap, len) ? -1000 : 0);
}

static rl_posting_ref_t t_in[RL_MAX_INPUTS];
static rl_output_t t_out[RL_MAX_OUTPUTS];
static rl_pin_t t_pin[RL_MAX_PINS];

static int rt_transfer(const uint8_t *b, size_t n, uint8_t *again, size_t cap, size_t *len) {
    rl_transfer_t t;
    int rc = rl_transfer_decode(b, n, &t, t_in, RL_MAX_INPUTS, t_out, RL_MAX_OUTPUTS, t_pin,
                                RL_MAX_PINS);
    return rc ? rc : (rl_transfer_encode(&t, again, cap, len) ? -1000 : 0);
}

static void strict(roundtrip_fn fn, const uint8_t *enc, size_t n) {
    static uint8_t b[RL_TRANSFER_ENC_MAX], again[RL_TRANSFER_ENC_MAX];
    size_t len = 0;
    CHECK_RC(fn(enc, n, again, sizeof again, &len), 0);
    CHECK(len == n && memcmp(again, enc, n) == 0);
    for (size_t cut = 0; cut < n; cut++) {
        int rc = fn(enc, cut, again, sizeof again, &len);
        if (rc == 0 || rc == -1000) RL_FAILF("truncation to %zu bytes accepted", cut);
    }
    memcpy(b, enc, n);
    b[n] = 0;
    if (fn(b, n + 1, again, sizeof again, &len) != RL_ETRAILING) RL_FAILF("trailing byte accepted");
    int accepted = 0;
    for (size_t i = 0; i < n; i++) {
        for (int bit = 0; bit < 8; bit++) {
            memcpy(b, enc, n);
            b[i] ^= (uint8_t)(1u << bit);
            int rc = fn(b, n, again, sizeof again, &len);
            if (rc == -1000) RL_FAILF("byte %zu bit %d: decoded but does not re-encode", i, bit);
            if (rc == 0) {
                accepted++;
                if (len != n || memcmp(again, b, n) != 0)
                    RL_FAILF("byte %zu bit %d: decoded value re-encodes differently", i, bit);
            }
        }
    }
    printf("# %zu bytes: %d of %zu single-bit changes are other canonical values\n", n, accepted,
           n * 8);
}

RL_TEST(account_codec) {
    rl_account_t a = rl_t_account(7, RL_POLICY_CAPPED, -5000), back;
    a.version = 3;
    a.status = RL_ACCOUNT_FROZEN;
    uint8_t buf[64];
    size_t len = 0;
    CHECK_RC(rl_account_encode(&a, buf, sizeof buf, &len), 0);
    CHECK(len == RL_ACCOUNT_ENC_LEN);
    CHECK_RC(rl_account_decode(buf, len, &back), 0);
    CHECK(memcmp(&a, &back, sizeof a) == 0);
    strict(rt_account, buf, len);

    rl_account_t bad = a;
    bad.version = 0;
    CHECK_RC(rl_account_encode(&bad, buf, sizeof buf, &len), RL_ENONCANONICAL);
    bad = a;
    bad.floor = 1;
    CHECK_RC(rl_account_encode(&bad, buf, sizeof buf, &len), RL_ENONCANONICAL);
    bad = a;
    bad.policy = RL_POLICY_NO_OVERDRAFT; /* a floor only a capped account has */
    CHECK_RC(rl_account_encode(&bad, buf, sizeof buf, &len), RL_ENONCANONICAL);
    bad.policy = 3;
    CHECK_RC(rl_account_encode(&bad, buf, sizeof buf, &len), RL_ENONCANONICAL);

    CHECK_RC(rl_account_encode(&a, buf, sizeof buf, &len), 0);
    buf[0] = 2;
    CHECK_RC(rl_account_decode(buf, len, &back), RL_EVERSION);
    buf[0] = 1;
    buf[1] = RL_TAG_POSTING;
    CHECK_RC(rl_account_decode(buf, len, &back), RL_ENONCANONICAL);
}

RL_TEST(encoder_buffer_contract) {
    rl_account_t a = rl_t_account(1, RL_POLICY_NO_OVERDRAFT, 0);
    uint8_t buf[64];
    size_t len = 0;
    memset(buf, 0xee, sizeof buf);
    CHECK_RC(rl_account_encode(&a, buf, 35, &len), RL_EBUFSIZE);
    CHECK(len == RL_ACCOUNT_ENC_LEN);
    CHECK(buf[0] == 0xee); /* nothing written */
    CHECK_RC(rl_account_encode(&a, NULL, 0, &len), RL_EBUFSIZE);
    CHECK(len == RL_ACCOUNT_ENC_LEN);
}

RL_TEST(posting_codec) {
    rl_posting_t p = rl_t_posting(0xab, 9, 3, "EUR", -250), back;
    p.status = RL_POSTING_PENDING_INACTIVE;
    uint8_t buf[RL_POSTING_ENC_MAX];
    size_t len = 0;
    CHECK_RC(rl_posting_encode(&p, buf, sizeof buf, &len), 0);
    CHECK(len == 2 + 32 + 4 + 16 + 5 + 8 + 1);
    CHECK_RC(rl_posting_decode(buf, len, &back), 0);
    CHECK(memcmp(&p, &back, sizeof p) == 0);
    strict(rt_posting, buf, len);
    p.amount = 0;
    CHECK_RC(rl_posting_encode(&p, buf, sizeof buf, &len), RL_ENONCANONICAL);
    p.amount = INT64_MIN;
    CHECK_RC(rl_posting_encode(&p, buf, sizeof buf, &len), RL_ENONCANONICAL);
}

static rl_transfer_t sample(rl_posting_ref_t in[2], rl_output_t out[3], rl_pin_t pin[2]) {
    memset(in, 0, 2 * sizeof *in);
    memset(in[0].transfer_id, 0x11, 32);
    in[0].index = 0;
    memset(in[1].transfer_id, 0x11, 32);
    in[1].index = 4;
    memset(out, 0, 3 * sizeof *out);
    rl_t_id(out[0].account, 2);
    out[0].asset = rl_t_asset("USD", 2);
    out[0].amount = 700;
    rl_t_id(out[1].account, 1);
    out[1].asset = rl_t_asset("USD", 2);
    out[1].amount = 300;
    rl_t_id(out[2].account, 1);
    out[2].asset = rl_t_asset("USD", 2);
    out[2].amount = -1; /* an offset: any signed amount but 0 */
    memset(pin, 0, 2 * sizeof *pin);
    rl_t_id(pin[0].account, 1);
    pin[0].version = 1;
    rl_t_id(pin[1].account, 2);
    pin[1].version = 7;
    return rl_t_transfer(in, 2, out, 3, pin, 2, "{\"memo\":\"x\"}", "pay:1");
}

RL_TEST(transfer_codec) {
    rl_posting_ref_t in[2];
    rl_output_t out[3];
    rl_pin_t pin[2];
    rl_transfer_t t = sample(in, out, pin), back;
    static uint8_t buf[RL_TRANSFER_ENC_MAX];
    size_t len = 0;
    CHECK_RC(rl_transfer_encode(&t, buf, sizeof buf, &len), 0);
    CHECK(len == 2 + 2 + 2 * 36 + 2 + 3 * (16 + 5 + 8) + 2 + 2 * 24 + 2 + 12 + 1 + 5);
    rl_posting_ref_t bi[2];
    rl_output_t bo[3];
    rl_pin_t bp[2];
    CHECK_RC(rl_transfer_decode(buf, len, &back, bi, 2, bo, 3, bp, 2), 0);
    CHECK(back.n_inputs == 2 && back.n_outputs == 3 && back.n_pins == 2);
    CHECK(memcmp(bo, out, sizeof out) == 0 && memcmp(bi, in, sizeof in) == 0);
    CHECK(back.metadata_len == 12 && memcmp(back.metadata, t.metadata, 12) == 0);
    CHECK(back.intent_len == 5 && memcmp(back.intent, "pay:1", 5) == 0);
    CHECK_RC(rl_transfer_decode(buf, len, &back, bi, 1, bo, 3, bp, 2), RL_ELIMIT);
    strict(rt_transfer, buf, len);

    rl_transfer_t bad = t;
    in[1].index = 0; /* duplicate input */
    CHECK_RC(rl_transfer_encode(&bad, buf, sizeof buf, &len), RL_ENONCANONICAL);
    in[0].index = 5; /* descending */
    CHECK_RC(rl_transfer_encode(&bad, buf, sizeof buf, &len), RL_ENONCANONICAL);
    t = sample(in, out, pin);
    bad = t;
    bad.intent_len = 0;
    CHECK_RC(rl_transfer_encode(&bad, buf, sizeof buf, &len), RL_ENONCANONICAL);
    bad = t;
    bad.n_inputs = 0;
    bad.n_outputs = 0;
    CHECK_RC(rl_transfer_encode(&bad, buf, sizeof buf, &len), RL_ENONCANONICAL);
    bad = t;
    bad.metadata_len = RL_METADATA_MAX + 1;
    CHECK_RC(rl_transfer_encode(&bad, buf, sizeof buf, &len), RL_ELIMIT);
    bad = t;
    pin[1] = pin[0]; /* pins not strictly ascending */
    CHECK_RC(rl_transfer_encode(&bad, buf, sizeof buf, &len), RL_ENONCANONICAL);
}

RL_TEST(transfer_id_and_outputs) {
    rl_posting_ref_t in[2];
    rl_output_t out[3];
    rl_pin_t pin[2];
    rl_transfer_t t = sample(in, out, pin);
    uint8_t id[32], id2[32];
    CHECK_RC(rl_transfer_id(&t, id), 0);
    CHECK_RC(rl_transfer_id(&t, id2), 0);
    CHECK(memcmp(id, id2, 32) == 0);
    /* Every field is in the preimage (LED-2): metadata, intent, pins, amounts. */
    t.intent = (const uint8_t *)"pay:2";
    CHECK_RC(rl_transfer_id(&t, id2), 0);
    CHECK(memcmp(id, id2, 32) != 0);
    t = sample(in, out, pin);
    pin[1].version = 8;
    CHECK_RC(rl_transfer_id(&t, id2), 0);
    CHECK(memcmp(id, id2, 32) != 0);
    t = sample(in, out, pin);
    rl_posting_t p;
    CHECK_RC(rl_transfer_output_posting(&t, id, 2, &p), 0);
    CHECK(memcmp(p.id.transfer_id, id, 32) == 0 && p.id.index == 2 && p.amount == -1);
    CHECK(p.status == RL_POSTING_ACTIVE);
    CHECK_RC(rl_transfer_output_posting(&t, id, 3, &p), RL_EINVAL);
}

/* LED-13: the largest transfer the limits allow encodes to exactly RL_TRANSFER_ENC_MAX, and
 * one more of anything is refused. */
RL_TEST(largest_transfer) {
    static rl_posting_ref_t in[RL_MAX_INPUTS + 1];
    static rl_output_t out[RL_MAX_OUTPUTS];
    static rl_pin_t pin[RL_MAX_PINS];
    static uint8_t meta[RL_METADATA_MAX + 1], intent[RL_INTENT_MAX], buf[RL_TRANSFER_ENC_MAX + 64];
    memset(in, 0, sizeof in);
    for (uint32_t i = 0; i <= RL_MAX_INPUTS; i++)
        in[i].index = i;
    for (uint32_t i = 0; i < RL_MAX_OUTPUTS; i++) {
        memset(&out[i], 0, sizeof out[i]);
        out[i].asset = rl_t_asset("ABCDEFGHIJKLMNO", 18);
        out[i].amount = INT64_MAX;
    }
    for (uint32_t i = 0; i < RL_MAX_PINS; i++) {
        memset(&pin[i], 0, sizeof pin[i]);
        pin[i].account[14] = (uint8_t)(i >> 8);
        pin[i].account[15] = (uint8_t)i;
        pin[i].version = UINT64_MAX;
    }
    memset(intent, 'k', sizeof intent);
    rl_transfer_t t = {in,
                       out,
                       pin,
                       meta,
                       intent,
                       RL_MAX_INPUTS,
                       RL_MAX_OUTPUTS,
                       RL_MAX_PINS,
                       RL_METADATA_MAX,
                       RL_INTENT_MAX};
    size_t len = 0;
    CHECK_RC(rl_transfer_encode(&t, buf, sizeof buf, &len), 0);
    CHECK(len == RL_TRANSFER_ENC_MAX);
    CHECK_RC(rl_transfer_encode(&t, buf, RL_TRANSFER_ENC_MAX - 1, &len), RL_EBUFSIZE);
    rl_transfer_t back;
    CHECK_RC(rl_transfer_decode(buf, RL_TRANSFER_ENC_MAX, &back, t_in, RL_MAX_INPUTS, t_out,
                                RL_MAX_OUTPUTS, t_pin, RL_MAX_PINS),
             0);
    t.n_inputs++;
    CHECK_RC(rl_transfer_encode(&t, buf, sizeof buf, &len), RL_ELIMIT);
    t.n_inputs--;
    t.metadata_len++;
    CHECK_RC(rl_transfer_encode(&t, buf, sizeof buf, &len), RL_ELIMIT);
}

RL_TEST(error_names) {
    CHECK(strcmp(rl_err_name(RL_EINSUFFICIENT), "InsufficientFunds") == 0);
    CHECK(strcmp(rl_err_name(RL_OK), "OK") == 0);
    CHECK(strcmp(rl_err_name(-999), "Unknown") == 0);
    for (int c = RL_ERRNO_MIN; c < 0; c++)
        CHECK(strcmp(rl_err_name(c), "Unknown") != 0 && strlen(rl_strerror(c)) > 0);
}

int main(void) {
    RL_RUN(amount_checked, "LED-4 amounts: checked add/sub, INT64_MIN is no amount");
    RL_RUN(asset_rules, "LED-1 asset code alphabet, length, scale, padding");
    RL_RUN(account_codec, "LED-1 account round trip and strict decoder");
    RL_RUN(encoder_buffer_contract, "LED-11 encoders write nothing into a short buffer");
    RL_RUN(posting_codec, "LED-1 LED-4 posting round trip and strict decoder");
    RL_RUN(transfer_codec, "LED-1 LED-6 LED-13 LED-14 transfer round trip and strict decoder");
    RL_RUN(transfer_id_and_outputs, "LED-2 LED-3 transfer id covers every field; output ids");
    RL_RUN(largest_transfer, "LED-13 the largest transfer is RL_TRANSFER_ENC_MAX bytes");
    RL_RUN(error_names, "every RL_E* code has a name and a message");
    RL_DONE();
}
