/* The wallet's strict request decoder (host/lua/wallet_dto.c): every error code with its
 * field and byte offset, the values of accepted bodies, the schema checks (USAGE) and the
 * shared scanner's edge cases (escapes, surrogates, UTF-8, number grammar). The fuzz
 * harness tests/fuzz/fuzz-wallet-dto.c checks the same decoder on arbitrary input. */
#include "lua/wallet_dto.h"

#define RA_T_ERR_NAME(code) ra_wdto_reason(code)
#include "check.h"

static const ra_wdto_field_t SCHEMA[] = {
    {"account", RA_WDTO_STRING, 1, 36, 36},
    {"asset", RA_WDTO_STRING, 1, 1, 15},
    {"amount", RA_WDTO_UINT, 1, 1, RA_WDTO_UINT_MAX},
    {"nonce", RA_WDTO_UINT, 0, 0, 1000},
    {"memo", RA_WDTO_STRING, 0, 0, 8},
    {"dry_run", RA_WDTO_BOOL, 0, 0, 0},
};
#define N (sizeof SCHEMA / sizeof SCHEMA[0])
#define ACC "\"account\":\"6f1e3c52-7d0b-4b8e-9a51-0c2f4e8d9a10\""

static char scratch[4096];
static ra_wdto_value_t v[N];
static ra_wdto_error_t err;

static int dec(const char *body) {
    return ra_wdto_decode(body, strlen(body), SCHEMA, N, v, scratch, sizeof scratch, &err);
}

/* body must fail with code, at byte pos, naming field. */
static void refuse(const char *body, int code, uint32_t pos, const char *field) {
    int rc = dec(body);
    if (rc != code || err.code != code || err.pos != pos || strcmp(err.field, field) != 0)
        RA_FAILF("%s: got %s at %u field '%s' (%s), want %s at %u field '%s'", body,
                 ra_wdto_reason(rc), err.pos, err.field, err.detail ? err.detail : "-",
                 ra_wdto_reason(code), pos, field);
}

/* What the decoder refuses: the body, the code, the byte offset and the field it names,
 * and the group (one test each, GROUPS). */
typedef struct refusal_s {
    const char *body;
    int code;
    uint32_t pos;
    const char *field;
    const char *group;
} refusal_t;

static const refusal_t REFUSALS[] = {
    {"", RA_WDTO_EEMPTY, 0, "", "document"},
    {"  \n", RA_WDTO_EEMPTY, 3, "", "document"},
    {"[1]", RA_WDTO_ENOT_OBJECT, 0, "", "document"},
    {"\"x\"", RA_WDTO_ENOT_OBJECT, 0, "", "document"},
    {"nul", RA_WDTO_EMALFORMED, 0, "", "document"},
    {"{", RA_WDTO_EMALFORMED, 1, "", "document"},
    {"{" ACC, RA_WDTO_EMALFORMED, 49, "", "document"},
    {"{" ACC ",", RA_WDTO_EMALFORMED, 50, "", "document"},
    {"{" ACC ",\"asset\":\"A\",\"amount\":1}x", RA_WDTO_EMALFORMED, 73, "", "document"},
    {"{" ACC ",\"asset\":\"A\",\"amount\":1}{}", RA_WDTO_EMALFORMED, 73, "", "document"},
    {"{\"account\" 1}", RA_WDTO_EMALFORMED, 11, "", "document"},
    {"{1:2}", RA_WDTO_EMALFORMED, 1, "", "document"},
    {"{}", RA_WDTO_EMISSING_FIELD, 1, "account", "field"},
    {"{" ACC ",\"asset\":\"A\"}", RA_WDTO_EMISSING_FIELD, 61, "amount", "field"},
    {"{\"Account\":1}", RA_WDTO_EUNKNOWN_FIELD, 1, "Account", "field"},
    {"{\"a b\\\"c\":1}", RA_WDTO_EUNKNOWN_FIELD, 1, "a?b?c", "field"},
    {"{\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\":1}", RA_WDTO_EUNKNOWN_FIELD, 1,
     "aaaaaaaaaaaaaaaaaaaaaaaa...", "field"},
    {"{\"amount\":1,\"amount\":1}", RA_WDTO_EDUPLICATE_FIELD, 12, "amount", "field"},
    {"{\"amount\":\"1\"}", RA_WDTO_EWRONG_TYPE, 10, "amount", "field"},
    {"{\"amount\":null}", RA_WDTO_EWRONG_TYPE, 10, "amount", "field"},
    {"{\"amount\":nul}", RA_WDTO_EMALFORMED, 10, "", "field"},
    {"{\"account\":7}", RA_WDTO_EWRONG_TYPE, 11, "account", "field"},
    {"{\"dry_run\":1}", RA_WDTO_EWRONG_TYPE, 11, "dry_run", "field"},
    {"{\"dry_run\":tru}", RA_WDTO_EMALFORMED, 11, "", "field"},
    {"{\"account\":\"short\"}", RA_WDTO_EBAD_STRING, 11, "account", "field"},
    {"{\"memo\":\"123456789\"}", RA_WDTO_EBAD_STRING, 8, "memo", "field"},
    {"{\"asset\":\"\"}", RA_WDTO_EBAD_STRING, 9, "asset", "field"},
    {"{\"amount\":0}", RA_WDTO_EBAD_NUMBER, 10, "amount", "number"}, /* below min 1 */
    {"{\"amount\":-1}", RA_WDTO_EBAD_NUMBER, 10, "amount", "number"},
    {"{\"amount\":01}", RA_WDTO_EBAD_NUMBER, 10, "amount", "number"},
    {"{\"amount\":1.0}", RA_WDTO_EBAD_NUMBER, 10, "amount", "number"},
    {"{\"amount\":1e3}", RA_WDTO_EBAD_NUMBER, 10, "amount", "number"},
    {"{\"amount\":9007199254740992}", RA_WDTO_EBAD_NUMBER, 10, "amount", "number"},
    {"{\"amount\":99999999999999999999999}", RA_WDTO_EBAD_NUMBER, 10, "amount", "number"},
    {"{\"nonce\":1001}", RA_WDTO_EBAD_NUMBER, 9, "nonce", "number"},
    {"{\"memo\":\"a\x01\"}", RA_WDTO_EMALFORMED, 10, "", "json"},
    {"{\"memo\":\"\\x\"}", RA_WDTO_EMALFORMED, 9, "", "json"},
    {"{\"memo\":\"abc", RA_WDTO_EMALFORMED, 12, "", "json"},
    {"{\"memo\":\"\\ud800\\u0041\"}", RA_WDTO_EBAD_STRING, 9, "memo", "json"},
    {"{\"memo\":\"\\udc00\"}", RA_WDTO_EBAD_STRING, 9, "memo", "text"},          /* lone low */
    {"{\"memo\":\"\\ud800x\"}", RA_WDTO_EBAD_STRING, 9, "memo", "text"},         /* lone high */
    {"{\"memo\":\"ab\\ud800\"}", RA_WDTO_EBAD_STRING, 11, "memo", "text"},       /* at the end */
    {"{\"memo\":\"\xc0\xaf\"}", RA_WDTO_EBAD_STRING, 9, "memo", "text"},         /* overlong */
    {"{\"memo\":\"\xed\xa0\x80\"}", RA_WDTO_EBAD_STRING, 9, "memo", "text"},     /* surrogate */
    {"{\"memo\":\"\xf4\x90\x80\x80\"}", RA_WDTO_EBAD_STRING, 9, "memo", "text"}, /* > U+10FFFF */
    {"{\"memo\":\"a\xff\"}", RA_WDTO_EBAD_STRING, 10, "memo", "text"},           /* not UTF-8 */
    {"{\"asset\":\"\xe2\x82\"}", RA_WDTO_EBAD_STRING, 10, "asset", "text"},      /* truncated */
    {"{\"me\xffmo\":1}", RA_WDTO_EBAD_STRING, 4, "", "text"},                    /* a name */
};

static void refuse_group(const char *group) {
    int n = 0;
    for (size_t i = 0; i < sizeof REFUSALS / sizeof REFUSALS[0]; i++) {
        const refusal_t *r = &REFUSALS[i];
        if (strcmp(r->group, group) != 0) continue;
        refuse(r->body, r->code, r->pos, r->field);
        n++;
    }
    CHECK(n > 0);
}

RA_TEST(accepts_a_full_body) {
    const char *body = "{" ACC ",\"asset\":\"USD\",\"amount\":1250,\"nonce\":7,"
                       "\"memo\":\"caf\\u00e9\",\"dry_run\":true}";
    REQUIRE(dec(body) == 0);
    CHECK(v[0].present && v[0].len == 36 && memcmp(scratch + v[0].off, "6f1e3c52", 8) == 0);
    CHECK(v[1].present && v[1].len == 3 && memcmp(scratch + v[1].off, "USD", 3) == 0);
    CHECK_EQ_U64(v[2].u, 1250);
    CHECK_EQ_U64(v[3].u, 7);
    CHECK(v[4].len == 5 && memcmp(scratch + v[4].off, "caf\xc3\xa9", 5) == 0);
    CHECK(v[5].present && v[5].u == 1);
    CHECK_EQ_U64(v[2].pos, (uint64_t)(strstr(body, "1250") - body));
}

RA_TEST(optional_fields_may_be_absent_and_order_is_free) {
    REQUIRE(dec(" {\"amount\":9007199254740991,\"asset\":\"A\"," ACC "} \n") == 0);
    CHECK_EQ_U64(v[2].u, 9007199254740991u);
    CHECK(!v[3].present && !v[4].present && !v[5].present);
    REQUIRE(dec("{" ACC ",\"asset\":\"A\",\"amount\":1,\"dry_run\":false}") == 0);
    CHECK(v[5].present && v[5].u == 0);
}

static const struct {
    const char *group, *label;
} GROUPS[] = {
    {"document", "document errors: empty, not an object, malformed, trailing bytes"},
    {"field", "field errors: missing, unknown, duplicate, wrong type, string bounds"},
    {"number", "numbers: plain integers within the field's bounds"},
    {"json", "strings: escapes, surrogates, UTF-8, termination"},
    /* JSON that is not text (issue 24 §3): bad_string naming the field, at the bad sequence */
    {"text", "invalid UTF-8 and lone surrogates are bad_string, naming the field"},
};
static const char *g_group;

RA_TEST(refusals_of_the_group) {
    refuse_group(g_group);
}

RA_TEST(number_bounds_are_inclusive) {
    REQUIRE(dec("{" ACC ",\"asset\":\"A\",\"amount\":1,\"nonce\":1000}") == 0);
    CHECK_EQ_U64(v[3].u, 1000);
    REQUIRE(dec("{" ACC ",\"asset\":\"A\",\"amount\":1,\"nonce\":0}") == 0);
    CHECK(v[3].present && v[3].u == 0);
}

RA_TEST(surrogate_pairs_and_escapes_are_text) {
    REQUIRE(dec("{" ACC ",\"asset\":\"A\",\"amount\":1,\"memo\":\"\\ud83d\\ude00\\\"\"}") == 0);
    CHECK(v[4].len == 5 && memcmp(scratch + v[4].off, "\xf0\x9f\x98\x80\"", 5) == 0);
}

RA_TEST(bad_schemas_and_arguments_are_usage) {
    ra_wdto_field_t bad[2] = {{"a", RA_WDTO_STRING, 1, 0, 4}, {"a", RA_WDTO_UINT, 0, 0, 1}};
    CHECK(ra_wdto_decode("{}", 2, bad, 2, v, scratch, sizeof scratch, &err) == RA_WDTO_EUSAGE);
    ra_wdto_field_t big = {"n", RA_WDTO_UINT, 0, 0, RA_WDTO_UINT_MAX + 1};
    CHECK(ra_wdto_decode("{}", 2, &big, 1, v, scratch, sizeof scratch, &err) == RA_WDTO_EUSAGE);
    ra_wdto_field_t inv = {"n", RA_WDTO_UINT, 0, 5, 4};
    CHECK(ra_wdto_decode("{}", 2, &inv, 1, v, scratch, sizeof scratch, &err) == RA_WDTO_EUSAGE);
    ra_wdto_field_t name = {"a-b", RA_WDTO_BOOL, 0, 0, 0};
    CHECK(ra_wdto_decode("{}", 2, &name, 1, v, scratch, sizeof scratch, &err) == RA_WDTO_EUSAGE);
    CHECK(ra_wdto_decode("{}", 2, SCHEMA, N, v, scratch, 1, &err) == RA_WDTO_EUSAGE);
    CHECK(ra_wdto_decode("{}", 2, SCHEMA, 0, v, scratch, sizeof scratch, &err) == RA_WDTO_EUSAGE);
    CHECK(ra_wdto_decode("{}", 2, SCHEMA, N, v, scratch, sizeof scratch, NULL) == RA_WDTO_EUSAGE);
    size_t f, val, e;
    CHECK(ra_wdto_abi(&f, &val, &e) == RA_WDTO_ABI);
    CHECK(f == sizeof(ra_wdto_field_t) && val == sizeof(ra_wdto_value_t) &&
          e == sizeof(ra_wdto_error_t));
    CHECK(strcmp(ra_wdto_reason(RA_WDTO_EUNKNOWN_FIELD), "unknown_field") == 0);
    CHECK(strcmp(ra_wdto_reason(-99), "unknown") == 0);
    CHECK(strcmp(ra_wdto_message(0), "ok") == 0);
}

int main(void) {
    RA_RUN(accepts_a_full_body, "a full body decodes to its values");
    RA_RUN(optional_fields_may_be_absent_and_order_is_free, "optional fields, any order");
    for (size_t i = 0; i < sizeof GROUPS / sizeof GROUPS[0]; i++) {
        g_group = GROUPS[i].group;
        RA_RUN(refusals_of_the_group, GROUPS[i].label);
    }
    RA_RUN(number_bounds_are_inclusive, "numbers: the field's bounds are inclusive");
    RA_RUN(surrogate_pairs_and_escapes_are_text, "strings: a surrogate pair and an escape decode");
    RA_RUN(bad_schemas_and_arguments_are_usage, "bad schemas and arguments are USAGE");
    RA_DONE();
}
