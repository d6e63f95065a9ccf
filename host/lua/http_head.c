/* The first look at a request head: see http_head.h for the rules. */
#include "http_head.h"

#include <string.h>
#include <strings.h>

static int fault(ra_http_head_t *o, int rc, size_t at, const char *why) {
    o->fault_at = at;
    o->why = why;
    return rc;
}

static int is_tchar(unsigned char c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return 1;
    return c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* A byte of a method or a target: not SP, not a control byte, not DEL. */
static int is_vchar8(unsigned char c) {
    return c > 0x20 && c != 0x7f;
}

/* [i, end) of the request line; whole: its LF has arrived. */
static int request_line(const unsigned char *b, size_t i, size_t end, int whole,
                        ra_http_head_t *o) {
    size_t p = i;
    if (whole && end == i) return fault(o, RA_HEAD_BAD, i, "an empty line before the request");
    while (p < end && is_vchar8(b[p]))
        p++;
    if (p == end) return whole ? fault(o, RA_HEAD_BAD, p, "a request line without a target") : 0;
    if (b[p] != ' ' || p == i) return fault(o, RA_HEAD_BAD, p, "a malformed method");
    size_t t = ++p;
    while (p < end && is_vchar8(b[p]))
        p++;
    if (p == end) return whole ? fault(o, RA_HEAD_BAD, p, "a request line without a version") : 0;
    if (b[p] != ' ' || p == t) return fault(o, RA_HEAD_BAD, p, "a malformed request target");
    size_t q = t;
    while (q < p && b[q] != '?')
        q++;
    o->method_len = t - 1 - i;
    o->path_off = t;
    o->path_len = q - t;
    static const char version[] = "HTTP/1.";
    size_t v = ++p, k = 0;
    for (; p < end && k < sizeof version - 1; p++, k++)
        if (b[p] != (unsigned char)version[k]) return fault(o, RA_HEAD_BAD, p, "not HTTP/1.x");
    if (p < end && (b[p] < '0' || b[p] > '9')) return fault(o, RA_HEAD_BAD, p, "not HTTP/1.x");
    if (p < end) p++;
    if (p < end) return fault(o, RA_HEAD_BAD, p, "bytes after the version");
    if (whole && p - v != sizeof version) return fault(o, RA_HEAD_BAD, p, "not HTTP/1.x");
    return 0;
}

/* The first Content-Length's value, digits only (else -1: H2O and httpd's framing check
 * refuse what is wrong with it). */
static void content_length(const unsigned char *b, size_t v, size_t end, ra_http_head_t *o) {
    while (v < end && (b[v] == ' ' || b[v] == '\t'))
        v++;
    while (end > v && (b[end - 1] == ' ' || b[end - 1] == '\t'))
        end--;
    if (end == v || end - v > 18) return;
    int64_t n = 0;
    for (size_t k = v; k < end; k++) {
        if (b[k] < '0' || b[k] > '9') return;
        n = n * 10 + (b[k] - '0');
    }
    o->content_length = n;
}

/* [i, end) of a header line (not empty). */
static int header_line(const unsigned char *b, size_t i, size_t end, int whole, int *cl_seen,
                       ra_http_head_t *o) {
    size_t v = i;
    if (b[i] != ' ' && b[i] != '\t') { /* else: a continuation of the previous value */
        size_t p = i;
        while (p < end && is_tchar(b[p]))
            p++;
        if (p == end) return whole ? fault(o, RA_HEAD_BAD, p, "a header line without ':'") : 0;
        if (b[p] != ':' || p == i) return fault(o, RA_HEAD_BAD, p, "a header name is not a token");
        o->name_off = i;
        o->name_len = p - i;
        v = p + 1;
    }
    for (size_t k = v; k < end; k++)
        if ((b[k] < 0x20 && b[k] != '\t') || b[k] == 0x7f)
            return fault(o, RA_HEAD_BAD_VALUE, k, "a control byte in a header's value");
    if (whole && !*cl_seen && v > i && o->name_len == 14 &&
        strncasecmp((const char *)b + i, "content-length", 14) == 0) {
        *cl_seen = 1;
        content_length(b, v, end, o);
    }
    return 0;
}

int ra_http_head_check(const char *buf, size_t len, size_t max_bytes, size_t max_headers,
                       ra_http_head_t *out) {
    const unsigned char *b = (const unsigned char *)buf;
    memset(out, 0, sizeof *out);
    out->content_length = -1;
    /* a head ends within max_bytes, or it is too large: nothing beyond needs a look */
    size_t n = len < max_bytes + 1 ? len : max_bytes + 1;
    size_t i = 0, lines = 0, headers = 0;
    int cl_seen = 0;
    for (;;) {
        size_t e = i;
        while (e < n && b[e] != '\n')
            e++;
        int whole = e < n;
        size_t end = e;
        if (end > i && b[end - 1] == '\r') end--; /* CRLF, or a CR whose LF is to come */
        if (lines > 0 && whole && end == i) {     /* the empty line: the end of the head */
            if (e + 1 > max_bytes) break;
            out->len = e + 1;
            return RA_HEAD_COMPLETE;
        }
        int rc = 0;
        if (lines == 0) {
            rc = request_line(b, i, end, whole, out);
        } else if (end > i) {
            if (++headers > max_headers) /* (H2O counts a continuation line as a header) */
                return fault(out, RA_HEAD_TOO_MANY, i, "more header lines than the server takes");
            rc = header_line(b, i, end, whole, &cl_seen, out);
        }
        if (rc) return rc;
        if (!whole) break;
        lines++;
        i = e + 1;
    }
    if (len > max_bytes) return fault(out, RA_HEAD_TOO_LARGE, max_bytes, "the head is too large");
    return RA_HEAD_INCOMPLETE;
}
