/* Canonical encodings of the domain types (LED-1, docs/LEDGER-FORMAT.md): big-endian,
 * version byte and type tag first, one encoding per value. Every decoder re-checks what
 * the encoder guarantees, so decode(encode(v)) == v and encode(decode(b)) == b for every
 * b a decoder accepts (tests/ledger/test-ledger-codec.c, tests/fuzz/fuzz-ledger-decode.c). */
#include "internal.h"

/* The low-level SHA-256 API keeps its context on our stack; EVP would allocate one per call
 * (LED-11). It is deprecated, not removed, in OpenSSL 3. */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>

void rl__put(rl__sink_t *s, const void *p, size_t n) {
    if (s->sha != NULL) {
        SHA256_Update((SHA256_CTX *)s->sha, p, n);
    } else if (s->buf != NULL && s->len <= s->cap && n <= s->cap - s->len) {
        memcpy(s->buf + s->len, p, n);
    }
    s->len += n;
}

void rl__put_u8(rl__sink_t *s, uint8_t v) {
    rl__put(s, &v, 1);
}

void rl__put_u16(rl__sink_t *s, uint16_t v) {
    uint8_t b[2] = {(uint8_t)(v >> 8), (uint8_t)v};
    rl__put(s, b, 2);
}

void rl__put_u32(rl__sink_t *s, uint32_t v) {
    uint8_t b[4];
    for (int i = 0; i < 4; i++)
        b[i] = (uint8_t)(v >> (24 - 8 * i));
    rl__put(s, b, 4);
}

void rl__put_u64(rl__sink_t *s, uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (56 - 8 * i));
    rl__put(s, b, 8);
}

int rl__get(rl__reader_t *r, void *out, size_t n) {
    if (n > r->len - r->off) return RL_ETRUNCATED;
    memcpy(out, r->p + r->off, n);
    r->off += n;
    return 0;
}

int rl__get_u8(rl__reader_t *r, uint8_t *v) {
    return rl__get(r, v, 1);
}

int rl__get_u16(rl__reader_t *r, uint16_t *v) {
    uint8_t b[2];
    int rc = rl__get(r, b, 2);
    if (rc == 0) *v = (uint16_t)((b[0] << 8) | b[1]);
    return rc;
}

int rl__get_u32(rl__reader_t *r, uint32_t *v) {
    uint8_t b[4];
    int rc = rl__get(r, b, 4);
    if (rc == 0)
        *v = ((uint32_t)b[0] << 24) | ((uint32_t)b[1] << 16) | ((uint32_t)b[2] << 8) | b[3];
    return rc;
}

int rl__get_u64(rl__reader_t *r, uint64_t *v) {
    uint8_t b[8];
    int rc = rl__get(r, b, 8);
    if (rc == 0) {
        uint64_t x = 0;
        for (int i = 0; i < 8; i++)
            x = (x << 8) | b[i];
        *v = x;
    }
    return rc;
}

/* ---- sink helpers shared by the encoders ---- */

static int finish(const rl__sink_t *s, size_t *len_out) {
    if (len_out != NULL) *len_out = s->len;
    return s->len > s->cap || s->buf == NULL ? RL_EBUFSIZE : 0;
}

/* Encoders write nothing into a buffer that is too small (rl_*_encode contract): a first
 * pass sizes, the second writes. The sizes are small and bounded (LED-13). */
#define ENCODE_TWICE(put_call, buf, cap, len_out)                                                  \
    do {                                                                                           \
        rl__sink_t sz_ = {NULL, 0, 0, NULL};                                                       \
        rl__sink_t *s = &sz_;                                                                      \
        put_call;                                                                                  \
        if (sz_.len > cap || buf == NULL) {                                                        \
            if (len_out != NULL) *len_out = sz_.len;                                               \
            return RL_EBUFSIZE;                                                                    \
        }                                                                                          \
        rl__sink_t w_ = {buf, cap, 0, NULL};                                                       \
        s = &w_;                                                                                   \
        put_call;                                                                                  \
        return finish(&w_, len_out);                                                               \
    } while (0)

static size_t asset_code_len(const rl_asset_t *a) {
    size_t n = 0;
    while (n < RL_ASSET_CODE_MAX && a->code[n] != '\0')
        n++;
    return n;
}

static void asset_body_put(rl__sink_t *s, const rl_asset_t *a) {
    size_t n = asset_code_len(a);
    rl__put_u8(s, (uint8_t)n);
    rl__put(s, a->code, n);
    rl__put_u8(s, a->scale);
}

static int asset_body_get(rl__reader_t *r, rl_asset_t *a) {
    uint8_t n;
    RL__TRY(rl__get_u8(r, &n));
    if (n == 0 || n > RL_ASSET_CODE_MAX) return RL_ENONCANONICAL;
    memset(a, 0, sizeof *a);
    RL__TRY(rl__get(r, a->code, n));
    RL__TRY(rl__get_u8(r, &a->scale));
    /* A NUL or any byte outside the code alphabet inside the code is not canonical. */
    return rl_asset_check(a) == 0 && asset_code_len(a) == n ? 0 : RL_ENONCANONICAL;
}

static int header_get(rl__reader_t *r, uint8_t tag) {
    uint8_t v, t;
    RL__TRY(rl__get_u8(r, &v));
    if (v != RL_CANONICAL_VERSION) return RL_EVERSION;
    RL__TRY(rl__get_u8(r, &t));
    return t == tag ? 0 : RL_ENONCANONICAL;
}

static void header_put(rl__sink_t *s, uint8_t tag) {
    rl__put_u8(s, RL_CANONICAL_VERSION);
    rl__put_u8(s, tag);
}

static int end_get(const rl__reader_t *r) {
    return r->off == r->len ? 0 : RL_ETRAILING;
}

/* ---- asset ---- */

int rl_asset_encode(const rl_asset_t *a, uint8_t *buf, size_t cap, size_t *len_out) {
    if (a == NULL || rl_asset_check(a) != 0) return RL_EINVAL;
    ENCODE_TWICE((header_put(s, RL_TAG_ASSET), asset_body_put(s, a)), buf, cap, len_out);
}

int rl_asset_decode(const uint8_t *buf, size_t len, rl_asset_t *out) {
    if ((buf == NULL && len != 0) || out == NULL) return RL_EINVAL;
    rl__reader_t r = {buf, len, 0};
    rl_asset_t a;
    RL__TRY(header_get(&r, RL_TAG_ASSET));
    RL__TRY(asset_body_get(&r, &a));
    RL__TRY(end_get(&r));
    *out = a;
    return 0;
}

/* ---- account ---- */

static int account_check(const rl_account_t *a) {
    if (a->version == 0 || a->policy > RL_POLICY_UNCAPPED || a->status > RL_ACCOUNT_CLOSED)
        return RL_ENONCANONICAL;
    /* One encoding per meaning: only a capped account has a floor (LED-7). */
    if (a->policy == RL_POLICY_CAPPED)
        return a->floor <= 0 && a->floor != INT64_MIN ? 0 : RL_ENONCANONICAL;
    return a->floor == 0 ? 0 : RL_ENONCANONICAL;
}

static void account_put(rl__sink_t *s, const rl_account_t *a) {
    header_put(s, RL_TAG_ACCOUNT);
    rl__put(s, a->id, 16);
    rl__put_u64(s, a->version);
    rl__put_u64(s, (uint64_t)a->floor);
    rl__put_u8(s, a->policy);
    rl__put_u8(s, a->status);
}

int rl_account_encode(const rl_account_t *a, uint8_t *buf, size_t cap, size_t *len_out) {
    if (a == NULL) return RL_EINVAL;
    RL__TRY(account_check(a));
    ENCODE_TWICE(account_put(s, a), buf, cap, len_out);
}

int rl_account_decode(const uint8_t *buf, size_t len, rl_account_t *out) {
    if ((buf == NULL && len != 0) || out == NULL) return RL_EINVAL;
    rl__reader_t r = {buf, len, 0};
    rl_account_t a;
    uint64_t floor;
    memset(&a, 0, sizeof a);
    RL__TRY(header_get(&r, RL_TAG_ACCOUNT));
    RL__TRY(rl__get(&r, a.id, 16));
    RL__TRY(rl__get_u64(&r, &a.version));
    RL__TRY(rl__get_u64(&r, &floor));
    a.floor = (int64_t)floor;
    RL__TRY(rl__get_u8(&r, &a.policy));
    RL__TRY(rl__get_u8(&r, &a.status));
    RL__TRY(end_get(&r));
    RL__TRY(account_check(&a));
    *out = a;
    return 0;
}

/* ---- posting ---- */

static int posting_check(const rl_posting_t *p) {
    if (rl_asset_check(&p->asset) != 0 || !rl__amount_ok(p->amount) ||
        p->status > RL_POSTING_INACTIVE)
        return RL_ENONCANONICAL;
    return 0;
}

static void posting_put(rl__sink_t *s, const rl_posting_t *p) {
    header_put(s, RL_TAG_POSTING);
    rl__put(s, p->id.transfer_id, 32);
    rl__put_u32(s, p->id.index);
    rl__put(s, p->account, 16);
    asset_body_put(s, &p->asset);
    rl__put_u64(s, (uint64_t)p->amount);
    rl__put_u8(s, p->status);
}

int rl_posting_encode(const rl_posting_t *p, uint8_t *buf, size_t cap, size_t *len_out) {
    if (p == NULL) return RL_EINVAL;
    RL__TRY(posting_check(p));
    ENCODE_TWICE(posting_put(s, p), buf, cap, len_out);
}

int rl_posting_decode(const uint8_t *buf, size_t len, rl_posting_t *out) {
    if ((buf == NULL && len != 0) || out == NULL) return RL_EINVAL;
    rl__reader_t r = {buf, len, 0};
    rl_posting_t p;
    uint64_t amount;
    memset(&p, 0, sizeof p);
    RL__TRY(header_get(&r, RL_TAG_POSTING));
    RL__TRY(rl__get(&r, p.id.transfer_id, 32));
    RL__TRY(rl__get_u32(&r, &p.id.index));
    RL__TRY(rl__get(&r, p.account, 16));
    RL__TRY(asset_body_get(&r, &p.asset));
    RL__TRY(rl__get_u64(&r, &amount));
    p.amount = (int64_t)amount;
    RL__TRY(rl__get_u8(&r, &p.status));
    RL__TRY(end_get(&r));
    RL__TRY(posting_check(&p));
    *out = p;
    return 0;
}

/* ---- transfer ---- */

int rl_posting_ref_cmp(const rl_posting_ref_t *a, const rl_posting_ref_t *b) {
    int c = memcmp(a->transfer_id, b->transfer_id, 32);
    if (c != 0) return c;
    return a->index < b->index ? -1 : a->index > b->index;
}

int rl__transfer_check(const rl_transfer_t *t) {
    if (t->n_inputs > RL_MAX_INPUTS || t->n_outputs > RL_MAX_OUTPUTS || t->n_pins > RL_MAX_PINS ||
        t->metadata_len > RL_METADATA_MAX || t->intent_len > RL_INTENT_MAX)
        return RL_ELIMIT;
    if ((t->n_inputs && t->inputs == NULL) || (t->n_outputs && t->outputs == NULL) ||
        (t->n_pins && t->pins == NULL) || (t->metadata_len && t->metadata == NULL) ||
        t->intent == NULL)
        return RL_EINVAL;
    /* A transfer moves something and names its intent (LED-14). */
    if (t->n_inputs + t->n_outputs == 0 || t->intent_len == 0) return RL_ENONCANONICAL;
    /* Inputs and pins are sets: strictly ascending, so one order and no duplicate (LED-6). */
    for (uint32_t i = 1; i < t->n_inputs; i++)
        if (rl_posting_ref_cmp(&t->inputs[i - 1], &t->inputs[i]) >= 0) return RL_ENONCANONICAL;
    for (uint32_t i = 0; i < t->n_outputs; i++)
        if (rl_asset_check(&t->outputs[i].asset) != 0 || !rl__amount_ok(t->outputs[i].amount))
            return RL_ENONCANONICAL;
    for (uint32_t i = 0; i < t->n_pins; i++) {
        if (t->pins[i].version == 0) return RL_ENONCANONICAL;
        if (i && memcmp(t->pins[i - 1].account, t->pins[i].account, 16) >= 0)
            return RL_ENONCANONICAL;
    }
    return 0;
}

void rl__transfer_put(rl__sink_t *s, const rl_transfer_t *t) {
    header_put(s, RL_TAG_TRANSFER);
    rl__put_u16(s, (uint16_t)t->n_inputs);
    for (uint32_t i = 0; i < t->n_inputs; i++) {
        rl__put(s, t->inputs[i].transfer_id, 32);
        rl__put_u32(s, t->inputs[i].index);
    }
    rl__put_u16(s, (uint16_t)t->n_outputs);
    for (uint32_t i = 0; i < t->n_outputs; i++) {
        rl__put(s, t->outputs[i].account, 16);
        asset_body_put(s, &t->outputs[i].asset);
        rl__put_u64(s, (uint64_t)t->outputs[i].amount);
    }
    rl__put_u16(s, (uint16_t)t->n_pins);
    for (uint32_t i = 0; i < t->n_pins; i++) {
        rl__put(s, t->pins[i].account, 16);
        rl__put_u64(s, t->pins[i].version);
    }
    rl__put_u16(s, (uint16_t)t->metadata_len);
    if (t->metadata_len) rl__put(s, t->metadata, t->metadata_len);
    rl__put_u8(s, (uint8_t)t->intent_len);
    rl__put(s, t->intent, t->intent_len);
}

int rl_transfer_encode(const rl_transfer_t *t, uint8_t *buf, size_t cap, size_t *len_out) {
    if (t == NULL) return RL_EINVAL;
    RL__TRY(rl__transfer_check(t));
    ENCODE_TWICE(rl__transfer_put(s, t), buf, cap, len_out);
}

int rl_transfer_decode(const uint8_t *buf, size_t len, rl_transfer_t *out, rl_posting_ref_t *inputs,
                       uint32_t inputs_cap, rl_output_t *outputs, uint32_t outputs_cap,
                       rl_pin_t *pins, uint32_t pins_cap) {
    if ((buf == NULL && len != 0) || out == NULL || (inputs_cap && inputs == NULL) ||
        (outputs_cap && outputs == NULL) || (pins_cap && pins == NULL))
        return RL_EINVAL;
    rl__reader_t r = {buf, len, 0};
    rl_transfer_t t;
    uint16_t n16;
    uint8_t n8;
    uint64_t u;
    memset(&t, 0, sizeof t);
    RL__TRY(header_get(&r, RL_TAG_TRANSFER));

    RL__TRY(rl__get_u16(&r, &n16));
    if (n16 > RL_MAX_INPUTS) return RL_ENONCANONICAL;
    if (n16 > inputs_cap) return RL_ELIMIT;
    for (uint32_t i = 0; i < n16; i++) {
        RL__TRY(rl__get(&r, inputs[i].transfer_id, 32));
        RL__TRY(rl__get_u32(&r, &inputs[i].index));
    }
    t.inputs = inputs;
    t.n_inputs = n16;

    RL__TRY(rl__get_u16(&r, &n16));
    if (n16 > RL_MAX_OUTPUTS) return RL_ENONCANONICAL;
    if (n16 > outputs_cap) return RL_ELIMIT;
    for (uint32_t i = 0; i < n16; i++) {
        memset(&outputs[i], 0, sizeof outputs[i]); /* padding too: outputs compare by bytes */
        RL__TRY(rl__get(&r, outputs[i].account, 16));
        RL__TRY(asset_body_get(&r, &outputs[i].asset));
        RL__TRY(rl__get_u64(&r, &u));
        outputs[i].amount = (int64_t)u;
    }
    t.outputs = outputs;
    t.n_outputs = n16;

    RL__TRY(rl__get_u16(&r, &n16));
    if (n16 > RL_MAX_PINS) return RL_ENONCANONICAL;
    if (n16 > pins_cap) return RL_ELIMIT;
    for (uint32_t i = 0; i < n16; i++) {
        RL__TRY(rl__get(&r, pins[i].account, 16));
        RL__TRY(rl__get_u64(&r, &pins[i].version));
    }
    t.pins = pins;
    t.n_pins = n16;

    RL__TRY(rl__get_u16(&r, &n16));
    if (n16 > RL_METADATA_MAX) return RL_ENONCANONICAL;
    if (n16 > r.len - r.off) return RL_ETRUNCATED;
    t.metadata = r.p + r.off;
    t.metadata_len = n16;
    r.off += n16;

    RL__TRY(rl__get_u8(&r, &n8));
    if (n8 > r.len - r.off) return RL_ETRUNCATED;
    t.intent = r.p + r.off;
    t.intent_len = n8;
    r.off += n8;
    RL__TRY(end_get(&r));
    /* The same checks the encoder makes: ordering, amounts, empty transfer or intent. */
    int rc = rl__transfer_check(&t);
    if (rc != 0) return rc == RL_ELIMIT ? RL_ENONCANONICAL : rc;
    *out = t;
    return 0;
}

/* ---- ids (LED-2, LED-3) ---- */

int rl_transfer_id(const rl_transfer_t *t, uint8_t id_out[32]) {
    if (t == NULL || id_out == NULL) return RL_EINVAL;
    RL__TRY(rl__transfer_check(t));
    SHA256_CTX ctx;
    uint8_t first[32];
    rl__sink_t s = {NULL, 0, 0, &ctx};
    SHA256_Init(&ctx);
    rl__transfer_put(&s, t);
    SHA256_Final(first, &ctx);
    /* Double SHA-256, as in the seed: the outer hash closes length-extension on the id. */
    SHA256(first, sizeof first, id_out);
    return 0;
}

int rl_transfer_output_posting(const rl_transfer_t *t, const uint8_t transfer_id[32], uint32_t i,
                               rl_posting_t *out) {
    if (t == NULL || transfer_id == NULL || out == NULL || i >= t->n_outputs || t->outputs == NULL)
        return RL_EINVAL;
    memset(out, 0, sizeof *out);
    memcpy(out->id.transfer_id, transfer_id, 32);
    out->id.index = i;
    memcpy(out->account, t->outputs[i].account, 16);
    out->asset = t->outputs[i].asset;
    out->amount = t->outputs[i].amount;
    out->status = RL_POSTING_ACTIVE;
    return 0;
}
