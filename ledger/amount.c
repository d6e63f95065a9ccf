/* Amounts and assets: exact integers, checked arithmetic (LED-4), assets compared by their
 * NUL-padded code and scale. */
#include "internal.h"

int rl_amount_add(int64_t a, int64_t b, int64_t *out) {
    int64_t r;
    if (out == NULL) return RL_EINVAL;
    /* INT64_MIN is not an amount: a sum landing on it would not be negatable (LED-4). */
    if (a == INT64_MIN || b == INT64_MIN || __builtin_add_overflow(a, b, &r) || r == INT64_MIN)
        return RL_EOVERFLOW;
    *out = r;
    return 0;
}

int rl_amount_sub(int64_t a, int64_t b, int64_t *out) {
    if (b == INT64_MIN) return RL_EOVERFLOW;
    return rl_amount_add(a, -b, out);
}

static int code_char_ok(unsigned char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == ':' || c == '-';
}

int rl_asset_init(rl_asset_t *out, const char *code, size_t len, uint8_t scale) {
    if (out == NULL || code == NULL || len == 0 || len > RL_ASSET_CODE_MAX ||
        scale > RL_ASSET_SCALE_MAX)
        return RL_EINVAL;
    for (size_t i = 0; i < len; i++)
        if (!code_char_ok((unsigned char)code[i])) return RL_EINVAL;
    memset(out, 0, sizeof *out);
    memcpy(out->code, code, len);
    out->scale = scale;
    return 0;
}

int rl_asset_check(const rl_asset_t *a) {
    if (a == NULL || a->scale > RL_ASSET_SCALE_MAX) return RL_EINVAL;
    size_t len = 0;
    while (len < sizeof a->code && a->code[len] != '\0')
        len++;
    if (len == 0 || len > RL_ASSET_CODE_MAX) return RL_EINVAL;
    for (size_t i = 0; i < len; i++)
        if (!code_char_ok((unsigned char)a->code[i])) return RL_EINVAL;
    /* The padding must be zero, or two equal codes would compare unequal. */
    for (size_t i = len; i < sizeof a->code; i++)
        if (a->code[i] != '\0') return RL_EINVAL;
    return 0;
}

int rl_asset_equal(const rl_asset_t *a, const rl_asset_t *b) {
    return a->scale == b->scale && memcmp(a->code, b->code, sizeof a->code) == 0;
}
