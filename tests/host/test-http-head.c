/* The server's first look at a request head (host/lua/http_head.c, issue 24 §3): what H2O
 * 2.2's parser refuses is refused here first, with where and why (a header's name for a bad
 * value: the wallet answers a garbled Authorization 401); the size and count limits (431);
 * heads arriving in pieces; the first Content-Length. Every byte split of each head gives
 * the answer of the whole (an incomplete prefix is never a fault the whole does not have).
 * What the host answers on the wire is spec/ron/wallet/http_spec.lua's. */
#include "lua/http_head.h"

#define RA_T_ERR_NAME(code) ((code) == 0 ? "incomplete" : "fault")
#include "check.h"

#include <string.h>

static ra_http_head_t h;

static int look(const char *s, size_t max_bytes) {
    return ra_http_head_check(s, strlen(s), max_bytes, 100, &h);
}

/* s must give rc (and its every prefix INCOMPLETE, or rc when the fault is in the prefix). */
static void want(const char *s, int rc) {
    size_t n = strlen(s);
    int got = ra_http_head_check(s, n, 65536, 100, &h);
    if (got != rc) RA_FAILF("%s: got %d (%s), want %d", s, got, h.why ? h.why : "-", rc);
    ra_http_head_t whole = h;
    for (size_t k = 0; k < n; k++) {
        int p = ra_http_head_check(s, k, 65536, 100, &h);
        if (p == RA_HEAD_INCOMPLETE) continue;
        if (p != rc || h.fault_at != whole.fault_at)
            RA_FAILF("%s: its prefix of %zu bytes gives %d at %zu, the whole %d at %zu", s, k, p,
                     h.fault_at, rc, whole.fault_at);
    }
    h = whole;
}

#define GET "GET /v1/accounts/x/balance?asset=USD HTTP/1.1\r\n"

RA_TEST(valid_heads_are_complete) {
    want(GET "Host: x\r\nAuthorization: Bearer t0k_en\r\n\r\n", RA_HEAD_COMPLETE);
    CHECK_EQ_U64(h.len, strlen(GET "Host: x\r\nAuthorization: Bearer t0k_en\r\n\r\n"));
    CHECK_EQ_U64(h.path_len, strlen("/v1/accounts/x/balance"));
    CHECK_EQ_U64(h.method_len, 3); /* the early refusals' attribution: method and path */
    CHECK(h.content_length == -1);
    want("POST /v1/transfer HTTP/1.0\nContent-Length: 42 \nX-A:\tb c\xc3\xa9\n\n",
         RA_HEAD_COMPLETE);
    CHECK(h.content_length == 42);
    CHECK_EQ_U64(h.method_len, 4);
    want("PO(ST /x HTTP/1.1\r\n\r\n", RA_HEAD_COMPLETE);             /* H2O takes such a method */
    want("GET /x?a=\xff HTTP/1.1\r\n\r\n", RA_HEAD_COMPLETE);        /* and high bytes */
    want("GET /x HTTP/1.1\r\nA: b\r\n c\r\n\r\n", RA_HEAD_COMPLETE); /* a continuation */
    /* the head ends at the first empty line: a body after it is not looked at */
    const char *body = "POST /x HTTP/1.1\r\nContent-Length: 3\r\n\r\n\x01\x02\x03";
    CHECK(look(body, 65536) == RA_HEAD_COMPLETE);
    CHECK_EQ_U64(h.len, strlen(body) - 3);
    CHECK(look("POST /x HTTP/1.1\r\nContent-Length: 1x\r\ncontent-length: 7\r\n\r\n", 999) ==
          RA_HEAD_COMPLETE);
    CHECK(h.content_length == -1); /* the first one counts; framing is the server's */
}

RA_TEST(what_h2o_refuses_is_refused_first) {
    want(GET "Authorization: Bearer \x01"
             "abc\r\n\r\n",
         RA_HEAD_BAD_VALUE);
    CHECK(h.name_len == 13 && memcmp(GET "Authorization" + h.name_off, "Authorization", 13) == 0);
    want(GET "Authorization: Bearer a\rb\r\n\r\n", RA_HEAD_BAD_VALUE);
    want(GET "X: a\x7f\r\n\r\n", RA_HEAD_BAD_VALUE);
    want(GET "A: b\r\n \x02\r\n\r\n", RA_HEAD_BAD_VALUE); /* in a continuation */
    CHECK(h.name_len == 1);
    want(GET "X Foo: bar\r\n\r\n", RA_HEAD_BAD);
    want(GET "X@Foo: bar\r\n\r\n", RA_HEAD_BAD);
    want(GET "X-Foo : bar\r\n\r\n", RA_HEAD_BAD);
    want(GET ": bar\r\n\r\n", RA_HEAD_BAD);
    want(GET "X-\x80: bar\r\n\r\n", RA_HEAD_BAD);
    want(GET "NoColon\r\n\r\n", RA_HEAD_BAD);
    want("\r\nGET /x HTTP/1.1\r\n\r\n", RA_HEAD_BAD);
    want("GET  /x HTTP/1.1\r\n\r\n", RA_HEAD_BAD);
    want("GET /x HTTP/1.1 \r\n\r\n", RA_HEAD_BAD);
    want("GET /x HTTP/2.0\r\n\r\n", RA_HEAD_BAD);
    want("GET /x HTTP/1.x\r\n\r\n", RA_HEAD_BAD);
    want("GET /x HTTP/1.\r\n\r\n", RA_HEAD_BAD);
    want("GET /x\r\n\r\n", RA_HEAD_BAD);
    want("GET\r\n\r\n", RA_HEAD_BAD);
    want("G\x01T /x HTTP/1.1\r\n\r\n", RA_HEAD_BAD);
    want("GET /\x01 HTTP/1.1\r\n\r\n", RA_HEAD_BAD);
    CHECK(look("GET /x HTTP/1.1\r\nA: \x01", 65536) == RA_HEAD_BAD_VALUE); /* before its end */
}

RA_TEST(limits_are_431) {
    char big[3000];
    memset(big, 'a', sizeof big);
    memcpy(big, "GET /x HTTP/1.1\r\nX: ", 20);
    big[sizeof big - 1] = '\0';
    CHECK(look(big, 2048) == RA_HEAD_TOO_LARGE); /* incomplete and over */
    CHECK(look(big, 4096) == RA_HEAD_INCOMPLETE);
    char whole[3100];
    snprintf(whole, sizeof whole, "%s\r\n\r\n", big);
    CHECK(look(whole, 2048) == RA_HEAD_TOO_LARGE);
    CHECK(look(whole, 4096) == RA_HEAD_COMPLETE);
    CHECK(look(whole, strlen(whole)) == RA_HEAD_COMPLETE); /* exactly at the limit */
    CHECK(look(whole, strlen(whole) - 1) == RA_HEAD_TOO_LARGE);
    char many[4096];
    size_t n = (size_t)snprintf(many, sizeof many, "GET /x HTTP/1.1\r\n");
    for (int i = 0; i < 100; i++)
        n += (size_t)snprintf(many + n, sizeof many - n, "X%d: v\r\n", i);
    snprintf(many + n, sizeof many - n, "\r\n");
    CHECK(look(many, 65536) == RA_HEAD_COMPLETE);
    snprintf(many + n, sizeof many - n, "Y: v\r\n\r\n");
    CHECK(look(many, 65536) == RA_HEAD_TOO_MANY);
}

int main(void) {
    RA_RUN(valid_heads_are_complete, "valid heads: complete, path, Content-Length");
    RA_RUN(what_h2o_refuses_is_refused_first, "H2O's refusals found first, with where and why");
    RA_RUN(limits_are_431, "over max_bytes or 100 header lines: 431");
    RA_DONE();
}
