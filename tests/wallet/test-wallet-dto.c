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

RA_TEST(document_errors) {
    refuse("", RA_WDTO_EEMPTY, 0, "");
    refuse("  \n", RA_WDTO_EEMPTY, 3, "");
    refuse("[1]", RA_WDTO_ENOT_OBJECT, 0, "");
    refuse("\"x\"", RA_WDTO_ENOT_OBJECT, 0, "");
    refuse("nul", RA_WDTO_EMALFORMED, 0, "");
    refuse("{", RA_WDTO_EMALFORMED, 1, "");
    refuse("{" ACC, RA_WDTO_EMALFORMED, 49, "");
    refuse("{" ACC ",", RA_WDTO_EMALFORMED, 50, "");
    refuse("{" ACC ",\"asset\":\"A\",\"amount\":1}x", RA_WDTO_EMALFORMED, 73, "");
    refuse("{" ACC ",\"asset\":\"A\",\"amount\":1}{}", RA_WDTO_EMALFORMED, 73, "");
    refuse("{\"account\" 1}", RA_WDTO_EMALFORMED, 11, "");
    refuse("{1:2}", RA_WDTO_EMALFORMED, 1, "");
}

RA_TEST(field_errors) {
    refuse("{}", RA_WDTO_EMISSING_FIELD, 1, "account");
    refuse("{" ACC ",\"asset\":\"A\"}", RA_WDTO_EMISSING_FIELD, 61, "amount");
    refuse("{\"Account\":1}", RA_WDTO_EUNKNOWN_FIELD, 1, "Account");
    refuse("{\"a b\\\"c\":1}", RA_WDTO_EUNKNOWN_FIELD, 1, "a?b?c");
    refuse("{\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\":1}", RA_WDTO_EUNKNOWN_FIELD, 1,
           "aaaaaaaaaaaaaaaaaaaaaaaa...");
    refuse("{\"amount\":1,\"amount\":1}", RA_WDTO_EDUPLICATE_FIELD, 12, "amount");
    refuse("{\"amount\":\"1\"}", RA_WDTO_EWRONG_TYPE, 10, "amount");
    refuse("{\"amount\":null}", RA_WDTO_EWRONG_TYPE, 10, "amount");
    refuse("{\"amount\":nul}", RA_WDTO_EMALFORMED, 10, "");
    refuse("{\"account\":7}", RA_WDTO_EWRONG_TYPE, 11, "account");
    refuse("{\"dry_run\":1}", RA_WDTO_EWRONG_TYPE, 11, "dry_run");
    refuse("{\"dry_run\":tru}", RA_WDTO_EMALFORMED, 11, "");
    refuse("{\"account\":\"short\"}", RA_WDTO_EBAD_STRING, 11, "account");
    refuse("{\"memo\":\"123456789\"}", RA_WDTO_EBAD_STRING, 8, "memo");
    refuse("{\"asset\":\"\"}", RA_WDTO_EBAD_STRING, 9, "asset");
}

RA_TEST(number_grammar) {
    refuse("{\"amount\":0}", RA_WDTO_EBAD_NUMBER, 10, "amount"); /* below min 1 */
    refuse("{\"amount\":-1}", RA_WDTO_EBAD_NUMBER, 10, "amount");
    refuse("{\"amount\":01}", RA_WDTO_EBAD_NUMBER, 10, "amount");
    refuse("{\"amount\":1.0}", RA_WDTO_EBAD_NUMBER, 10, "amount");
    refuse("{\"amount\":1e3}", RA_WDTO_EBAD_NUMBER, 10, "amount");
    refuse("{\"amount\":9007199254740992}", RA_WDTO_EBAD_NUMBER, 10, "amount");
    refuse("{\"amount\":99999999999999999999999}", RA_WDTO_EBAD_NUMBER, 10, "amount");
    refuse("{\"nonce\":1001}", RA_WDTO_EBAD_NUMBER, 9, "nonce");
    REQUIRE(dec("{" ACC ",\"asset\":\"A\",\"amount\":1,\"nonce\":1000}") == 0);
    CHECK_EQ_U64(v[3].u, 1000);
    REQUIRE(dec("{" ACC ",\"asset\":\"A\",\"amount\":1,\"nonce\":0}") == 0);
    CHECK(v[3].present && v[3].u == 0);
}

RA_TEST(strings_are_checked_as_json) {
    refuse("{\"memo\":\"a\x01\"}", RA_WDTO_EMALFORMED, 10, "");
    refuse("{\"memo\":\"\\x\"}", RA_WDTO_EMALFORMED, 9, "");
    refuse("{\"memo\":\"abc", RA_WDTO_EMALFORMED, 12, "");
    refuse("{\"memo\":\"\\ud800\\u0041\"}", RA_WDTO_EBAD_STRING, 9, "memo");
}

/* JSON that is not text (issue 24 §3): bad_string naming the field, at the bad sequence. */
RA_TEST(strings_that_are_not_text_are_bad_string) {
    refuse("{\"memo\":\"\\udc00\"}", RA_WDTO_EBAD_STRING, 9, "memo");          /* lone low */
    refuse("{\"memo\":\"\\ud800x\"}", RA_WDTO_EBAD_STRING, 9, "memo");         /* lone high */
    refuse("{\"memo\":\"ab\\ud800\"}", RA_WDTO_EBAD_STRING, 11, "memo");       /* at the end */
    refuse("{\"memo\":\"\xc0\xaf\"}", RA_WDTO_EBAD_STRING, 9, "memo");         /* overlong */
    refuse("{\"memo\":\"\xed\xa0\x80\"}", RA_WDTO_EBAD_STRING, 9, "memo");     /* surrogate */
    refuse("{\"memo\":\"\xf4\x90\x80\x80\"}", RA_WDTO_EBAD_STRING, 9, "memo"); /* > U+10FFFF */
    refuse("{\"memo\":\"a\xff\"}", RA_WDTO_EBAD_STRING, 10, "memo");           /* not UTF-8 */
    refuse("{\"asset\":\"\xe2\x82\"}", RA_WDTO_EBAD_STRING, 10, "asset");      /* truncated */
    refuse("{\"me\xffmo\":1}", RA_WDTO_EBAD_STRING, 4, "");                    /* a name */
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
    RA_RUN(document_errors, "document errors: empty, not an object, malformed, trailing bytes");
    RA_RUN(field_errors, "field errors: missing, unknown, duplicate, wrong type, string bounds");
    RA_RUN(number_grammar, "numbers: plain integers within the field's bounds");
    RA_RUN(strings_are_checked_as_json, "strings: escapes, surrogates, UTF-8, termination");
    RA_RUN(strings_that_are_not_text_are_bad_string,
           "invalid UTF-8 and lone surrogates are bad_string, naming the field");
    RA_RUN(bad_schemas_and_arguments_are_usage, "bad schemas and arguments are USAGE");
    RA_DONE();
}
